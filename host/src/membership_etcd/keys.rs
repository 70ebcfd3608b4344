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

/// Why a stored configuration record is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// Not JSON of the record's shape (the parser's reason).
    #[error("not a configuration record: {0}")]
    Shape(String),
    /// Epoch 0 (the first is 1).
    #[error("epoch 0 (the first is 1)")]
    EpochZero,
    /// A node set names nodes outside the cluster.
    #[error("{what} set {mask:#x} names nodes outside a cluster of {nodes}")]
    OutsideCluster {
        /// `live` or `copying`.
        what: &'static str,
        /// The stored mask.
        mask: u32,
        /// Nodes in the cluster.
        nodes: usize,
    },
    /// Copying nodes that are not live.
    #[error("copying set {copying:#x} is not within the live set {live:#x}")]
    CopyingNotLive {
        /// The stored copying mask.
        copying: u32,
        /// The stored live mask.
        live: u32,
    },
    /// A per-node array longer than the cluster.
    #[error("{what} has {len} entries for a cluster of {nodes}")]
    TooLong {
        /// `since`, `incarnation` or `shards`.
        what: &'static str,
        /// Its length.
        len: usize,
        /// Nodes in the cluster.
        nodes: usize,
    },
    /// A node a replica from an epoch later than the record's.
    #[error("since[{node}] = {since} is later than epoch {epoch}")]
    SinceAfterEpoch {
        /// The node.
        node: usize,
        /// Its stored `since`.
        since: u32,
        /// The record's epoch.
        epoch: u32,
    },
    /// Generation 0 (the first is 1).
    #[error("generation 0 (the first is 1)")]
    GenerationZero,
    /// A record of a cluster of another shape than the reader's.
    #[error("a configuration of {stored_nodes} nodes with replication {stored_replication}, not {nodes} with {replication}")]
    OtherShape {
        /// Nodes in the stored record.
        stored_nodes: usize,
        /// Replicas per shard in the stored record.
        stored_replication: usize,
        /// Nodes the reader expects.
        nodes: usize,
        /// Replicas per shard the reader expects.
        replication: usize,
    },
    /// A shard whose members are not live, or whose joining backups are
    /// not members.
    #[error("shard {shard}: members {members:#x} not within the live set {live:#x}, or joining {joining:#x} not within the members")]
    ShardMembers {
        /// The shard.
        shard: usize,
        /// Its stored members.
        members: u32,
        /// Its stored joining backups.
        joining: u32,
        /// The stored live mask.
        live: u32,
    },
}

/// Which cluster a stored configuration belongs to, and which of its lives
/// (the cluster lifecycle, module `lifecycle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lineage {
    /// The cluster file's `cluster_id` (`None` in records older than
    /// cluster generations: taken as anyone's).
    pub cluster_id: Option<u32>,
    /// The cluster generation: 1 for the configuration created on an empty
    /// prefix, one more each time the starting processes of a cluster none
    /// of whose configured members is alive form a new one.
    pub generation: u32,
}

impl Lineage {
    /// The first generation of cluster `cluster_id`.
    pub fn first(cluster_id: u32) -> Lineage {
        Lineage {
            cluster_id: Some(cluster_id),
            generation: 1,
        }
    }

    /// Whether a record of this lineage may be read by cluster `cluster_id`.
    pub fn belongs_to(&self, cluster_id: u32) -> bool {
        self.cluster_id.is_none_or(|id| id == cluster_id)
    }
}

/// What a stored record says before it is decoded for a cluster's shape:
/// its epoch, lineage and the shape it was written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// [`Configuration::epoch`].
    pub epoch: u32,
    /// The cluster and generation.
    pub lineage: Lineage,
    /// Nodes (`None` in records older than cluster generations).
    pub nodes: Option<usize>,
    /// Replicas per shard (`None` as `nodes`).
    pub replication: Option<usize>,
}

/// The configuration as stored under `/<cluster>/config`: every field of
/// [`Configuration`], the arrays cut after the last entry that is not 0,
/// with its [`Lineage`] and the cluster's shape (nodes, replication degree)
/// it was written for.
/// Records of clusters older than cluster generations have no lineage
/// and no shape (generation 1, any cluster id, the reader's shape);
/// records of clusters older than re-replication onto survivors have no
/// `shards` (each shard's replicas are then its ring members, a per-node
/// `since`); records older than rejoin also lack `copying`, `since` and
/// `incarnation` (none copying, since 0, incarnation 0).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigRecord {
    /// [`Configuration::epoch`].
    pub epoch: u32,
    /// [`Configuration::live`] (bit `n` for node `n`).
    pub live: u32,
    /// [`Configuration::copying`] (a subset of `live`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub copying: u32,
    /// The older per-node form of each shard's `since` (read, never
    /// written).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub since: Vec<u32>,
    /// [`Configuration::incarnation`], per node id (at most the cluster's
    /// nodes; 0: the node's first incarnation, the value of `joined/<node>`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub incarnation: Vec<u32>,
    /// [`Configuration::shards`], per shard id (at most the cluster's nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<Vec<ShardRecord>>,
    /// [`Lineage::generation`] (1 in older records).
    #[serde(default = "first_generation")]
    pub generation: u32,
    /// [`Lineage::cluster_id`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<u32>,
    /// [`Configuration::nodes`] (absent in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u32>,
    /// [`Configuration::replication`] (absent in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<u32>,
}

fn first_generation() -> u32 {
    1
}

/// One shard of a [`ConfigRecord`]: [`splitkv_nic::membership::ShardReplicas`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardRecord {
    /// [`splitkv_nic::membership::ShardReplicas::members`].
    pub members: u32,
    /// [`splitkv_nic::membership::ShardReplicas::joining`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub joining: u32,
    /// [`splitkv_nic::membership::ShardReplicas::since`], per node id (at most the cluster's nodes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub since: Vec<u32>,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// `a` without its trailing zeros.
fn trimmed(a: &[u32]) -> Vec<u32> {
    let len = a.iter().rposition(|&v| v != 0).map_or(0, |i| i + 1);
    a[..len].to_vec()
}

/// Copies a stored per-node array into `to`.
fn per_node(
    what: &'static str,
    from: &[u32],
    to: &mut [u32; NODES_MAX],
    nodes: usize,
) -> Result<(), RecordError> {
    if from.len() > nodes {
        let len = from.len();
        return Err(RecordError::TooLong { what, len, nodes });
    }
    to[..from.len()].copy_from_slice(from);
    Ok(())
}

impl ConfigRecord {
    /// The JSON bytes stored in etcd for `c` of `lineage`.
    pub fn encode(c: &Configuration, lineage: Lineage) -> Vec<u8> {
        let nodes = (c.nodes as usize).min(NODES_MAX);
        let r = ConfigRecord {
            epoch: c.epoch,
            live: c.live,
            copying: c.copying,
            since: Vec::new(),
            incarnation: trimmed(&c.incarnation),
            shards: Some(
                c.shards[..nodes]
                    .iter()
                    .map(|s| ShardRecord {
                        members: s.members,
                        joining: s.joining,
                        since: trimmed(&s.since),
                    })
                    .collect(),
            ),
            generation: lineage.generation,
            cluster_id: lineage.cluster_id,
            nodes: Some(c.nodes.into()),
            replication: Some(c.replication.into()),
        };
        // Integers and arrays of integers always serialize.
        serde_json::to_vec(&r).unwrap_or_default()
    }

    /// The epoch, lineage and shape of a stored record, whatever cluster
    /// it was written for.
    ///
    /// # Errors
    /// [`RecordError::Shape`] if it is not a record;
    /// [`RecordError::EpochZero`], [`RecordError::GenerationZero`].
    pub fn header(bytes: &[u8]) -> Result<RecordHeader, RecordError> {
        let r: ConfigRecord =
            serde_json::from_slice(bytes).map_err(|e| RecordError::Shape(e.to_string()))?;
        r.checked_header()
    }

    fn checked_header(&self) -> Result<RecordHeader, RecordError> {
        if self.epoch == 0 {
            return Err(RecordError::EpochZero);
        }
        if self.generation == 0 {
            return Err(RecordError::GenerationZero);
        }
        Ok(RecordHeader {
            epoch: self.epoch,
            lineage: Lineage {
                cluster_id: self.cluster_id,
                generation: self.generation,
            },
            nodes: self.nodes.map(|n| n as usize),
            replication: self.replication.map(|r| r as usize),
        })
    }

    /// Decodes a stored record for a cluster of `nodes` nodes with
    /// `replication` replicas per shard.
    ///
    /// # Errors
    /// [`RecordError`]: not JSON of this shape, epoch or generation 0, a
    /// record written for another shape, node sets outside
    /// the cluster or copying nodes not live, arrays longer than the
    /// cluster, a `since` later than the epoch, or shard members that are
    /// not live.
    pub fn decode(
        bytes: &[u8],
        nodes: usize,
        replication: usize,
    ) -> Result<Configuration, RecordError> {
        let r: ConfigRecord =
            serde_json::from_slice(bytes).map_err(|e| RecordError::Shape(e.to_string()))?;
        let h = r.checked_header()?;
        let (stored_nodes, stored_replication) = (
            h.nodes.unwrap_or(nodes),
            h.replication.unwrap_or(replication),
        );
        if (stored_nodes, stored_replication) != (nodes, replication) {
            return Err(RecordError::OtherShape {
                stored_nodes,
                stored_replication,
                nodes,
                replication,
            });
        }
        let nodes = nodes.clamp(1, NODES_MAX);
        let ring = Configuration::initial(nodes, replication);
        for (what, mask) in [("live", r.live), ("copying", r.copying)] {
            if mask & !ring.live != 0 {
                return Err(RecordError::OutsideCluster { what, mask, nodes });
            }
        }
        if r.copying & !r.live != 0 {
            return Err(RecordError::CopyingNotLive {
                copying: r.copying,
                live: r.live,
            });
        }
        let mut c = Configuration {
            epoch: r.epoch,
            live: r.live,
            copying: r.copying,
            ..ring
        };
        per_node("incarnation", &r.incarnation, &mut c.incarnation, nodes)?;
        match &r.shards {
            Some(shards) => Self::decode_shards(shards, &mut c, nodes)?,
            None => Self::decode_ring(&r, &mut c, nodes)?,
        }
        Ok(c)
    }

    /// The stored shards into `c` (whose other fields are decoded).
    fn decode_shards(
        shards: &[ShardRecord],
        c: &mut Configuration,
        nodes: usize,
    ) -> Result<(), RecordError> {
        if shards.len() > nodes {
            let len = shards.len();
            return Err(RecordError::TooLong {
                what: "shards",
                len,
                nodes,
            });
        }
        c.shards = Default::default();
        for (shard, (from, to)) in shards.iter().zip(c.shards.iter_mut()).enumerate() {
            if from.members & !c.live != 0 || from.joining & !from.members != 0 {
                return Err(RecordError::ShardMembers {
                    shard,
                    members: from.members,
                    joining: from.joining,
                    live: c.live,
                });
            }
            to.members = from.members;
            to.joining = from.joining;
            per_node("since", &from.since, &mut to.since, nodes)?;
            Self::since_within(&to.since, c.epoch)?;
        }
        Ok(())
    }

    /// An older record without shards: each shard's replicas are its live
    /// ring members (`c` holds the ring), copying nodes joining, `since`
    /// per node.
    fn decode_ring(
        r: &ConfigRecord,
        c: &mut Configuration,
        nodes: usize,
    ) -> Result<(), RecordError> {
        let mut since = [0u32; NODES_MAX];
        per_node("since", &r.since, &mut since, nodes)?;
        Self::since_within(&since, c.epoch)?;
        for sh in c.shards[..nodes].iter_mut() {
            sh.members &= c.live;
            sh.joining = sh.members & c.copying;
            for n in (0..nodes).filter(|n| sh.members & (1 << n) != 0) {
                sh.since[n] = since[n];
            }
        }
        Ok(())
    }

    fn since_within(since: &[u32; NODES_MAX], epoch: u32) -> Result<(), RecordError> {
        match since.iter().position(|&s| s > epoch) {
            Some(node) => Err(RecordError::SinceAfterEpoch {
                node,
                since: since[node],
                epoch,
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
#[path = "keys_tests.rs"]
mod tests;
