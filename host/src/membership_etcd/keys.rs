//! The etcd key layout of one cluster and the configuration record: pure
//! encode/decode, no I/O (unit-tested without etcd).
//!
//! Under the prefix `/<cluster>/`:
//!
//! | key | value | lease |
//! |---|---|---|
//! | `config` | [`ConfigRecord`] as JSON `{"epoch":E,"live":MASK}` | none; changed only by a transaction comparing its mod revision |
//! | `members/<node>` | the node's incarnation (decimal) | the node's lease: deleted by etcd when the lease runs out |
//! | `joined/<node>` | empty | none: the node registered once, so a missing `members/<node>` means its lease ran out |
//! | `suspects/<suspect>/<reporter>` | empty | the reporter's lease |

use splitkv_layout::wire::NodeId;
use splitkv_nic::membership::Configuration;
use splitkv_nic::NODES_MAX;

/// Longest cluster name (bytes) used in key prefixes.
pub const CLUSTER_NAME_BYTES_MAX: usize = 64;

/// The keys of one cluster in etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterKeys {
    prefix: String,
}

impl ClusterKeys {
    /// The keys of cluster `cluster` (a non-empty name of at most
    /// [`CLUSTER_NAME_BYTES_MAX`] bytes without `/`; the caller checks).
    pub fn new(cluster: &str) -> ClusterKeys {
        ClusterKeys {
            prefix: format!("/{cluster}/"),
        }
    }

    /// Whether `cluster` is a usable cluster name.
    pub fn valid_name(cluster: &str) -> bool {
        !cluster.is_empty() && cluster.len() <= CLUSTER_NAME_BYTES_MAX && !cluster.contains('/')
    }

    /// `/<cluster>/config`.
    pub fn config(&self) -> String {
        format!("{}config", self.prefix)
    }

    /// `/<cluster>/members/` (the prefix of every member key).
    pub fn members(&self) -> String {
        format!("{}members/", self.prefix)
    }

    /// `/<cluster>/members/<node>`.
    pub fn member(&self, node: NodeId) -> String {
        format!("{}members/{node}", self.prefix)
    }

    /// `/<cluster>/joined/` (the prefix of every joined key).
    pub fn joined(&self) -> String {
        format!("{}joined/", self.prefix)
    }

    /// `/<cluster>/joined/<node>`.
    pub fn joined_node(&self, node: NodeId) -> String {
        format!("{}joined/{node}", self.prefix)
    }

    /// `/<cluster>/suspects/<suspect>/` (the prefix of the reports on `suspect`).
    pub fn suspects_of(&self, suspect: NodeId) -> String {
        format!("{}suspects/{suspect}/", self.prefix)
    }

    /// `/<cluster>/suspects/<suspect>/<reporter>`.
    pub fn suspect(&self, suspect: NodeId, reporter: NodeId) -> String {
        format!("{}suspects/{suspect}/{reporter}", self.prefix)
    }

    /// A node mask from keys under `prefix` whose last component is a node
    /// id below [`NODES_MAX`]; other keys are ignored.
    pub fn node_mask<'a>(prefix: &str, keys: impl Iterator<Item = &'a [u8]>) -> u32 {
        keys.filter_map(|k| std::str::from_utf8(k).ok())
            .filter_map(|k| k.strip_prefix(prefix))
            .filter_map(|id| id.parse::<usize>().ok())
            .filter(|&id| id < NODES_MAX)
            .fold(0u32, |m, id| m | 1 << id)
    }
}

/// The configuration as stored under `/<cluster>/config`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigRecord {
    /// [`Configuration::epoch`].
    pub epoch: u32,
    /// [`Configuration::live`] (bit `n` for node `n`).
    pub live: u32,
}

impl ConfigRecord {
    /// The JSON bytes stored in etcd.
    pub fn encode(c: &Configuration) -> Vec<u8> {
        let r = ConfigRecord {
            epoch: c.epoch,
            live: c.live,
        };
        // A struct of two integers always serializes.
        serde_json::to_vec(&r).unwrap_or_default()
    }

    /// Decodes a stored record for a cluster of `nodes` nodes.
    ///
    /// # Errors
    /// A sentence saying why: not JSON of this shape, epoch 0, or a live
    /// node outside the cluster.
    pub fn decode(bytes: &[u8], nodes: usize) -> Result<Configuration, String> {
        let r: ConfigRecord = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if r.epoch == 0 {
            return Err("epoch 0 (the first is 1)".into());
        }
        let all = Configuration::initial(nodes).live;
        if r.live & !all != 0 {
            return Err(format!(
                "live set {:#x} names nodes outside a cluster of {nodes}",
                r.live
            ));
        }
        Ok(Configuration {
            epoch: r.epoch,
            live: r.live,
            ..Default::default()
        })
    }
}
