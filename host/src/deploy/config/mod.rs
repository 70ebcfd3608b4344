//! `cluster.toml`: the one file every node process of a deployed cluster reads.
//!
//! ```toml
//! cluster_id = 7                 # packets of other clusters are dropped
//! token = "s3cret"               # bearer token of the mutating control calls
//! replication = 3                # primary + backups, 1 ..= nodes
//! log = "stderr"                 # or a file path
//!
//! [table]                        # every field optional
//! kind = "robinhood"             # or "dlht"
//! capacity_keys = 1048576
//! value_bytes_max = 1024
//! cache_objects = 65536          # NIC object cache (Xenic §4.1.3)
//!
//! [protocol]                     # every field optional
//! commit = "xenic-occ"           # the commit protocol (only xenic-occ runs yet)
//! batching = true                # false: one message per packet (Dandelion §5.1)
//! session_silence_ms = 1000
//! retransmit_timeout_us = 5000
//!
//! [transport]                    # the default of every node; every field optional
//! kind = "udp"                   # or "mem", "dpdk" (see [`transport`]) or "verbs" (see [`verbs`])
//! mtu = 1472
//!
//! [[node]]                       # ids 0 ..= n-1, each once
//! id = 0
//! data = "127.0.0.1:7100"
//! control = "127.0.0.1:7200"     # loopback unless control_public = true
//! cores = [0]                    # optional
//! transport = { mtu = 9000 }     # optional, overrides [transport] field by field
//! mac = "02:00:00:00:00:01"      # required for every node when any node's kind is "dpdk"
//!
//! [membership]                   # optional; see [`membership`]
//! kind = "etcd"                  # or "static" (the default)
//! endpoints = ["http://127.0.0.1:2379"]
//! lease_ttl_s = 2
//!
//! [clients]                      # optional; see [`clients`]
//! socket_dir = "/tmp/splitkv-7"  # node N listens on node-N.sock in it
//! ```
//!
//! [`ClusterConfig::from_file`] and [`str::parse`] read the file with serde
//! (unknown fields rejected everywhere) and then check it as a whole, before
//! anything starts; every problem is one [`ConfigError`] whose `Display` is one
//! line naming the field (`node[1].data: …`) or, for TOML syntax, the line and
//! column. Named bounds and defaults are the `*_MAX`, `*_MIN` and `*_DEFAULT`
//! constants of this module.

pub mod clients;
pub mod membership;
mod raw;
pub mod transport;
mod validate;
pub mod verbs;

pub use clients::{ClientSettings, ClientsStart};
pub use membership::MembershipSettings;
pub use transport::{
    DpdkSettings, Neighbour, TransportKind, TransportSettings, DPDK_DEVICE_BYTES_MAX, EAL_ARGS_MAX,
    EAL_ARG_BYTES_MAX, FAULT_PPM_MAX, MTU_DEFAULT, MTU_MAX, MTU_MIN, SOCKET_BUFFER_BYTES_DEFAULT,
    SOCKET_BUFFER_BYTES_MAX, SOCKET_BUFFER_BYTES_MIN,
};
pub use verbs::VerbsSettings;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use splitkv_layout::wire::NodeId;
use thiserror::Error;

use crate::node::NodeConfig;
use crate::table::TableKind;
use splitkv_nic::net::dpdk::MacAddr;
use splitkv_nic::{CommitProtocol, Placement};

/// Keys a node's host table is sized for when `[table] capacity_keys` is absent.
pub const CAPACITY_KEYS_DEFAULT: usize = 1 << 20;
/// Largest `[table] capacity_keys` a cluster file may ask for.
pub const CAPACITY_KEYS_MAX: usize = 1 << 30;
/// Largest `[table] cache_objects` a cluster file may ask for.
pub const CACHE_OBJECTS_MAX: usize = 1 << 26;
/// Default silence after which a peer's session is declared failed (ms).
pub const SESSION_SILENCE_MS_DEFAULT: u64 = 1_000;
/// Shortest session silence a cluster file may ask for (ms).
pub const SESSION_SILENCE_MS_MIN: u64 = 10;
/// Longest session silence a cluster file may ask for (ms).
pub const SESSION_SILENCE_MS_MAX: u64 = 600_000;
/// Default retransmission timeout of a session (µs; eRPC uses 5 ms).
pub const RETRANSMIT_TIMEOUT_US_DEFAULT: u64 = 5_000;
/// Shortest retransmission timeout a cluster file may ask for (µs).
pub const RETRANSMIT_TIMEOUT_US_MIN: u64 = 10;
/// Largest core id a `cores` list may name.
pub const CORE_ID_MAX: usize = 4095;
/// Most cores one node may list.
pub const CORES_PER_NODE_MAX: usize = 64;
/// Longest control token (bytes).
pub const TOKEN_BYTES_MAX: usize = 256;

/// A cluster file that cannot be used. `Display` is one line.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        reason: String,
    },
    /// The text is not TOML, or does not have the file's shape (an unknown or
    /// missing field, a value of the wrong type).
    #[error("line {line}, column {column}: {message}")]
    Syntax {
        /// 1-based line of the offending text.
        line: usize,
        /// 1-based column (in characters) of the offending text.
        column: usize,
        /// The parser's reason, on one line.
        message: String,
    },
    /// The file parses but a field's value is unusable.
    #[error("{field}: {reason}")]
    Invalid {
        /// Path of the field, e.g. `replication`, `node[1].data`, `transport.mtu`.
        field: String,
        /// Why it is unusable.
        reason: String,
    },
    /// A MAC address that is not six hex bytes separated by `:`.
    #[error("{field}: \"{text}\" is not a MAC address (six hex bytes separated by ':', e.g. \"02:00:00:00:00:01\")")]
    BadMac {
        /// Path of the field, e.g. `node[1].mac`.
        field: String,
        /// The text given.
        text: String,
    },
    /// A node without the MAC its DPDK peers address their frames to.
    #[error("{field}: required when a node's transport is \"dpdk\" (its peers address their frames to it), e.g. mac = \"02:00:00:00:00:01\"")]
    MissingMac {
        /// Path of the field, e.g. `node[1].mac`.
        field: String,
    },
}

impl ConfigError {
    /// The field an [`ConfigError::Invalid`], [`ConfigError::BadMac`] or
    /// [`ConfigError::MissingMac`] names (`None` for other errors).
    pub fn field(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { field, .. }
            | ConfigError::BadMac { field, .. }
            | ConfigError::MissingMac { field } => Some(field),
            _ => None,
        }
    }

    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// Where a node writes its `tracing` log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogTarget {
    /// Standard error (`log = "stderr"`, or no `log` field).
    Stderr,
    /// This file, appended to.
    File(PathBuf),
}

/// `[table]`: the host table of every node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableSettings {
    /// Robinhood (Xenic §4.1.2) or DLHT (Dandelion §6).
    pub kind: TableKind,
    /// Keys each node's table is sized for: 1 ..= [`CAPACITY_KEYS_MAX`].
    pub capacity_keys: usize,
    /// Longest value stored (bytes): 1 ..= [`splitkv_layout::VALUE_BYTES_MAX`].
    pub value_bytes_max: usize,
    /// NIC object-cache capacity in objects: 1 ..= [`CACHE_OBJECTS_MAX`],
    /// default [`splitkv_nic::index::CACHE_OBJECTS_DEFAULT`].
    pub cache_objects: usize,
}

/// `[protocol]`: options of the commit protocol and the session layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtocolSettings {
    /// The commit protocol every node runs (`commit`: `xenic-occ`, `dnl4`,
    /// `dnl2` or `dnl1`; default `xenic-occ`). Stored in the etcd
    /// configuration record: a node whose file names another protocol than
    /// the cluster's refuses to join. A protocol without crash recovery
    /// (every Dnl row today) is refused when the file is checked.
    pub commit: CommitProtocol,
    /// Many messages per packet (Dandelion §5.1); `false` sends one message
    /// per packet, for measurement. Default `true`.
    pub batching: bool,
    /// Silence (ms) after which a peer's session is declared failed:
    /// [`SESSION_SILENCE_MS_MIN`] ..= [`SESSION_SILENCE_MS_MAX`], default
    /// [`SESSION_SILENCE_MS_DEFAULT`].
    pub session_silence_ms: u64,
    /// Time (µs) after which an unacknowledged packet is sent again: at least
    /// [`RETRANSMIT_TIMEOUT_US_MIN`] and below the session silence, default
    /// [`RETRANSMIT_TIMEOUT_US_DEFAULT`].
    pub retransmit_timeout_us: u64,
}

/// One `[[node]]`, with its transport resolved (node override over
/// `[transport]` over the defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSettings {
    /// Node id: nodes are numbered 0 ..= n-1.
    pub id: NodeId,
    /// Where the node's transport receives packets.
    pub data: SocketAddr,
    /// Where the node's control endpoint listens (HTTP).
    pub control: SocketAddr,
    /// Whether `control` may be a non-loopback address.
    pub control_public: bool,
    /// Cores to pin the node's polling threads to (empty: not pinned).
    pub cores: Vec<usize>,
    /// The node's transport.
    pub transport: TransportSettings,
    /// The node's MAC (`mac`): where DPDK peers send its frames. Required
    /// for every node when any node's transport is DPDK; optional otherwise.
    pub mac: Option<MacAddr>,
    /// The DPDK fields of its transport, when `transport.kind` is
    /// [`TransportKind::Dpdk`] (`None` otherwise).
    pub dpdk: Option<DpdkSettings>,
    /// The verbs fields of its transport, when `transport.kind` is
    /// [`TransportKind::Verbs`] (`None` otherwise).
    pub verbs: Option<VerbsSettings>,
}

/// A checked cluster file: every node's view of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// Identifies the cluster on the wire; packets of other clusters are dropped.
    pub cluster_id: u32,
    /// Bearer token the mutating control calls must carry (printable ASCII,
    /// 1 ..= [`TOKEN_BYTES_MAX`] bytes).
    pub token: String,
    /// Replication degree (primary + backups): 1 ..= nodes.
    pub replication: usize,
    /// Where each node logs.
    pub log: LogTarget,
    /// The host table.
    pub table: TableSettings,
    /// Protocol options.
    pub protocol: ProtocolSettings,
    /// The nodes, in id order (`nodes[i].id == i`), 1 ..= [`splitkv_nic::NODES_MAX`] of them.
    pub nodes: Vec<NodeSettings>,
    /// How the node processes agree on membership (`[membership]`).
    pub membership: MembershipSettings,
    /// Application connections (`[clients]`; `None`: none taken).
    pub clients: Option<ClientSettings>,
}

impl ClusterConfig {
    /// Reads and checks the cluster file at `path`.
    ///
    /// # Errors
    /// [`ConfigError::Read`] if the file cannot be read, else as [`str::parse`].
    pub fn from_file(path: impl AsRef<Path>) -> Result<ClusterConfig, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        text.parse()
    }

    /// The node with id `id`, if the cluster has it.
    pub fn node(&self, id: NodeId) -> Option<&NodeSettings> {
        self.nodes.get(id as usize)
    }

    /// This cluster with node `id` at other addresses than the file's
    /// (a replacement machine: a new machine replaces a dead node): `data`
    /// (where its transport receives) and `control` (its control endpoint),
    /// where given, replace the node's, under the file's own checks — a data
    /// address peers can send to, fixed ports, a loopback control address
    /// unless the node has `control_public`, no address another node has. Only
    /// this process sees the move: its peers learn the new data address from
    /// the membership (etcd), not from this value.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming `node[id].data` or
    /// `node[id].control` for an address the checks refuse, or `node` if
    /// the cluster has no node `id`.
    pub fn with_node_moved(
        self,
        id: NodeId,
        data: Option<SocketAddr>,
        control: Option<SocketAddr>,
    ) -> Result<ClusterConfig, ConfigError> {
        validate::moved(self, id, data, control)
    }

    /// How to build node `id` of this cluster: its placement, host table
    /// (kind, capacity, value limit) and NIC cache from this file, every
    /// other field [`NodeConfig::new`]'s default (set `seed` and `clients`
    /// afterwards).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming `node` if the cluster has no node `id`,
    /// or `replication` if the fields were changed after checking into a
    /// placement that cannot exist.
    pub fn node_config(&self, id: NodeId) -> Result<NodeConfig, ConfigError> {
        if self.node(id).is_none() {
            return Err(ConfigError::invalid(
                "node",
                format!(
                    "the cluster has no node {id} (ids 0 ..= {})",
                    self.nodes.len().saturating_sub(1)
                ),
            ));
        }
        let placement = Placement::new(self.nodes.len(), self.replication)
            .map_err(|e| ConfigError::invalid("replication", e.to_string()))?;
        let table = &self.table;
        let mut config = NodeConfig::new(id, placement, table.capacity_keys, table.value_bytes_max);
        config.table_kind = table.kind;
        config.cache_objects = table.cache_objects;
        config.commit = self.protocol.commit;
        Ok(config)
    }
}

impl FromStr for ClusterConfig {
    type Err = ConfigError;

    /// Parses and checks a cluster file's text.
    ///
    /// # Errors
    /// [`ConfigError::Syntax`] for text that is not TOML or not of the file's
    /// shape; [`ConfigError::Invalid`] for a value the checks refuse.
    fn from_str(text: &str) -> Result<ClusterConfig, ConfigError> {
        let raw: raw::RawCluster = toml::from_str(text).map_err(|e| syntax_error(text, &e))?;
        validate::check(raw)
    }
}

/// A toml error as one line with its 1-based line and column.
fn syntax_error(text: &str, e: &toml::de::Error) -> ConfigError {
    let mut start = e.span().map_or(0, |s| s.start).min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let before = &text[..start];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    let mut message = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
    // Name the key of a `key = value` line when the parser's reason does not
    // (a value of the wrong type).
    let line_text = text[line_start..].lines().next().unwrap_or("");
    if let Some((key, _)) = line_text.split_once('=') {
        let key = key.trim();
        let bare = key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if bare && !key.is_empty() && !message.contains(key) {
            message = format!("{key}: {message}");
        }
    }
    ConfigError::Syntax {
        line,
        column,
        message,
    }
}
