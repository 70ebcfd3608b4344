//! The etcd key layout of one cluster and the configuration record: pure
//! encode/decode, no I/O (unit-tested without etcd).
//!
//! Under the prefix `/<cluster>/`:
//!
//! | key | value | lease |
//! |---|---|---|
//! | `config` | [`ConfigRecord`] as JSON `{"epoch":E,"live":MASK,"copying":MASK,"incarnation":[..],"shards":[..],"generation":G,"cluster_id":ID,"nodes":N,"replication":R}` (all but `epoch` and `live` optional in older records) | none; changed only by a transaction comparing its mod revision |
//! | `members/<node>` | the incarnation of the process holding it (decimal) | that process's lease: deleted by etcd when the lease runs out; created only while absent, so a restarted process takes it only once its predecessor's lease ran out |
//! | `joined/<node>` | the node's *first* incarnation (decimal; empty in clusters older than rejoin) | none: created once, at the first registration; a configuration's `incarnation[node] = 0` means this one |
//! | `joining/<node>` | the incarnation of a restarted process waiting for `members/<node>` | that process's lease |
//! | `incarnations/<node>` | the last incarnation handed out for the node (decimal) | none; raised by compare-and-swap at every connect, so incarnations only grow |
//! | `suspects/<suspect>/<reporter>` | the suspect's incarnation in the reporter's configuration, raw (`incarnation[suspect]`, decimal; 0 stands for its first) | the reporter's lease; a report counts only while the stored configuration holds the suspect with that incarnation ([`current_suspicions`]) |
//! | `probes/<node>` | the incarnation of a starting process the stored configuration does not admit, asking whether its members are alive ("Lifecycle" in the parent module's docs) | that process's lease |
//! | `acks/<prober>/<member>` | the incarnation `probes/<prober>` named, written by a live member that saw it | the member's lease |
//! | `addresses/<node>` | the [`AddressRecord`](super::address::AddressRecord) of the process holding `members/<node>`: its incarnation, data and control addresses (versioned JSON) | that process's lease: written in the transaction that takes the member key, so it names the member key's holder |

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

    /// `/<cluster>/joining/<node>`.
    pub fn joining(&self, node: NodeId) -> String {
        format!("{}joining/{node}", self.prefix)
    }

    /// `/<cluster>/incarnations/` (the prefix of every incarnation counter).
    pub fn incarnations_all(&self) -> String {
        format!("{}incarnations/", self.prefix)
    }

    /// `/<cluster>/incarnations/<node>` (the node's incarnation counter).
    pub fn incarnations(&self, node: NodeId) -> String {
        format!("{}incarnations/{node}", self.prefix)
    }

    /// `/<cluster>/addresses/` (the prefix of every address record).
    pub fn addresses(&self) -> String {
        format!("{}addresses/", self.prefix)
    }

    /// `/<cluster>/addresses/<node>`.
    pub fn address(&self, node: NodeId) -> String {
        format!("{}addresses/{node}", self.prefix)
    }

    /// `/<cluster>/probes/` (the prefix of every liveness probe).
    pub fn probes(&self) -> String {
        format!("{}probes/", self.prefix)
    }

    /// `/<cluster>/probes/<node>`.
    pub fn probe(&self, node: NodeId) -> String {
        format!("{}probes/{node}", self.prefix)
    }

    /// `/<cluster>/acks/<prober>/` (the prefix of the answers to a probe).
    pub fn acks_of(&self, prober: NodeId) -> String {
        format!("{}acks/{prober}/", self.prefix)
    }

    /// `/<cluster>/acks/<prober>/<member>`.
    pub fn ack(&self, prober: NodeId, member: NodeId) -> String {
        format!("{}acks/{prober}/{member}", self.prefix)
    }

    /// `/<cluster>/suspects/` (the prefix of every suspect report).
    pub fn suspects(&self) -> String {
        format!("{}suspects/", self.prefix)
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
        keys.filter_map(|k| Self::node_of(prefix, k))
            .fold(0u32, |m, id| m | 1 << id)
    }

    /// The node id a key under `prefix` names (below [`NODES_MAX`]), if any.
    pub fn node_of(prefix: &str, key: &[u8]) -> Option<usize> {
        let id = std::str::from_utf8(key).ok()?.strip_prefix(prefix)?;
        id.parse::<usize>().ok().filter(|&id| id < NODES_MAX)
    }

    /// The (reporter, suspect) a report key under `prefix` (the
    /// [`ClusterKeys::suspects`] prefix) names: `<suspect>/<reporter>`, both
    /// node ids below [`NODES_MAX`]; `None` for any other key.
    pub fn report_of(prefix: &str, key: &[u8]) -> Option<(NodeId, NodeId)> {
        let rest = std::str::from_utf8(key).ok()?.strip_prefix(prefix)?;
        let (suspect, reporter) = rest.split_once('/')?;
        let id = |s: &str| {
            s.parse::<usize>()
                .ok()
                .filter(|&id| id < NODES_MAX)
                .map(|id| id as NodeId)
        };
        Some((id(reporter)?, id(suspect)?))
    }

    /// Per node, the incarnation stored as the value of its key under
    /// `prefix` (`None`: no key, or a value that is not a decimal `u32`,
    /// such as the empty `joined/<node>` of clusters older than rejoin).
    pub fn incarnations_of<'a>(
        prefix: &str,
        kvs: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    ) -> [Option<u32>; NODES_MAX] {
        let mut out = [None; NODES_MAX];
        for (k, v) in kvs {
            if let Some(n) = Self::node_of(prefix, k) {
                out[n] = parse_incarnation(v);
            }
        }
        out
    }
}

/// The incarnation of `node` configuration `c` admits, if `node` is in it:
/// `c.incarnation[node]`, or where that is 0 (the node never rejoined) its
/// first incarnation `first` (the value of `joined/<node>`; `None` when not
/// known, as in clusters older than rejoin: then any incarnation is taken
/// as the configured one, the behaviour before rejoin).
pub fn configured_incarnation(c: &Configuration, node: NodeId, first: Option<u32>) -> Option<u32> {
    if !c.contains(node) {
        return None;
    }
    match c.incarnation[node as usize] {
        0 => first,
        inc => Some(inc),
    }
}

/// The suspects configuration `c` takes from the stored reports `reports`
/// (key under `prefix`, the [`ClusterKeys::suspects`] prefix; value; create
/// revision), oldest first ([`Configuration::taken_suspicions`]). A report
/// counts only if it names the incarnation `c` configures for its suspect
/// (`c.incarnation[suspect]`, raw): a report on a process that is gone —
/// written late, after the suspect's restarted process cleared the reports
/// as it took its member key — must not fence its successor (the deployed
/// overlapping test, where a survivor whose NIC runtime had restarted
/// reported the dead node again as its successor joined). A key or value
/// that does not parse is ignored.
pub fn current_suspicions<'a>(
    c: &Configuration,
    prefix: &str,
    reports: impl Iterator<Item = (&'a [u8], &'a [u8], i64)>,
) -> u32 {
    let mut taken: Vec<(i64, NodeId, NodeId)> = reports
        .filter_map(|(key, value, created)| {
            let (reporter, suspect) = ClusterKeys::report_of(prefix, key)?;
            let named = parse_incarnation(value)?;
            (named == c.incarnation[suspect as usize]).then_some((created, reporter, suspect))
        })
        .collect();
    taken.sort_unstable();
    c.taken_suspicions(taken.into_iter().map(|(_, r, s)| (r, s)))
}

/// A stored incarnation: a decimal `u32` (`None` otherwise).
pub fn parse_incarnation(v: &[u8]) -> Option<u32> {
    std::str::from_utf8(v).ok()?.parse().ok()
}

pub use super::record::{ConfigRecord, Lineage, RecordError, RecordHeader, ShardRecord};

#[cfg(test)]
#[path = "keys_tests.rs"]
mod tests;
