//! The configuration record stored under `/<cluster>/config`
//! ([`ConfigRecord`]) with its lineage ([`Lineage`]: which cluster, which
//! generation) and the shape it was written for: pure encode/decode, no
//! I/O (unit-tested without etcd, in `keys_tests.rs`).

use splitkv_nic::membership::Configuration;
use splitkv_nic::{CommitProtocol, NODES_MAX};

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
    /// A commit protocol name this build does not know.
    #[error("commit: {0}")]
    Commit(#[from] splitkv_nic::CommitProtocolError),
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
    /// The commit protocol the cluster runs (`None` in records older than
    /// the choice of protocol: they ran Xenic OCC).
    pub commit: Option<CommitProtocol>,
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
    /// The commit protocol's name ([`CommitProtocol::as_str`]; absent in
    /// older records, which ran Xenic OCC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
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
    /// The JSON bytes stored in etcd for `c` of `lineage`, in a cluster
    /// running `commit`.
    pub fn encode(c: &Configuration, lineage: Lineage, commit: CommitProtocol) -> Vec<u8> {
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
            commit: Some(commit.as_str().to_string()),
        };
        // Integers and arrays of integers always serialize.
        serde_json::to_vec(&r).unwrap_or_default()
    }

    /// The epoch, lineage and shape of a stored record, whatever cluster
    /// it was written for.
    ///
    /// # Errors
    /// [`RecordError::Shape`] if it is not a record;
    /// [`RecordError::EpochZero`], [`RecordError::GenerationZero`];
    /// [`RecordError::Commit`] for a commit protocol name this build does
    /// not know.
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
            commit: self.commit.as_deref().map(str::parse).transpose()?,
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
