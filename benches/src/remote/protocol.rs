//! The JSON bodies of the control calls a bench driver makes to deployed
//! nodes (`host/src/deploy/control.rs` routes them), shared by the node side
//! ([`super::node`]) and the driver side ([`super::check`]) so the two never
//! disagree on a field. Every request and answer carries
//! [`PROTOCOL_VERSION`]; a node refuses a request of another version, and a
//! driver an answer of another version.
//!
//! | route | request | answer |
//! |---|---|---|
//! | `POST /load` | [`LoadRequest`] | [`LoadAnswer`] |
//! | `POST /workload/start` | [`StartRequest`] | [`StartAnswer`] |
//! | `POST /workload/stop` | (none) | [`StartAnswer`] (the run's start) |
//! | `GET /results` | (none) | [`Results`] |

use crate::api::{ApiError, TxApi};
use crate::history::HistoryCheck;
use crate::history_gen::{TxShape, WorkloadConfigError};
use crate::smallbank::Smallbank;
use serde::{Deserialize, Serialize};

// What a client saw, in the shapes an external client program writes too.
pub use splitkv_workloads::results::{
    HistoryCounters, HistorySummary, LoadCounters, SmallbankSummary, TxnSummary,
};

/// Version of these bodies; bumped on any change of their shape (an added
/// optional field that is left out when absent, with the old meaning, is
/// not a change: `StartRequest::journal`, `SmallbankSummary::money_unknown`).
pub const PROTOCOL_VERSION: u32 = 1;

/// A transaction shape of the history workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShapeSpec {
    /// Elle's default mix.
    Mixed,
    /// Read two keys, write one.
    WriteSkew,
    /// Dandelion §7's O(G,P): `gets` reads, then `puts` writes.
    GetsPuts {
        /// Reads per transaction.
        gets: u8,
        /// Writes per transaction.
        puts: u8,
    },
}

impl From<TxShape> for ShapeSpec {
    fn from(s: TxShape) -> ShapeSpec {
        match s {
            TxShape::Mixed => ShapeSpec::Mixed,
            TxShape::WriteSkew => ShapeSpec::WriteSkew,
            TxShape::GetsPuts { gets, puts } => ShapeSpec::GetsPuts { gets, puts },
        }
    }
}

/// Checked when the workload is built (`TxShape::check`).
impl From<ShapeSpec> for TxShape {
    fn from(s: ShapeSpec) -> TxShape {
        match s {
            ShapeSpec::Mixed => TxShape::Mixed,
            ShapeSpec::WriteSkew => TxShape::WriteSkew,
            ShapeSpec::GetsPuts { gets, puts } => TxShape::GetsPuts { gets, puts },
        }
    }
}

/// A workload and its parameters: every node derives the same rows,
/// procedures and generators from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum WorkloadSpec {
    /// Smallbank over `accounts` accounts (hot set: 4% unless given).
    Smallbank {
        /// Accounts of the whole cluster.
        accounts: u64,
        /// Hot-set size.
        hot_accounts: Option<u64>,
        /// How the transactions reach the store; absent: shipped (so the
        /// specs of older drivers decode with their meaning).
        #[serde(default, skip_serializing_if = "TxApi::is_shipped")]
        api: TxApi,
    },
    /// Elle's list-append.
    ListAppend {
        /// Keys in the active window.
        keys: u64,
        /// Clients (one per node).
        clients: u64,
        /// Transactions each client draws at most (sizes the key space).
        transactions_per_client: u64,
        /// Transaction shape.
        shape: ShapeSpec,
        /// How the transactions reach the store; absent: shipped (so the
        /// specs of older drivers decode with their meaning).
        #[serde(default, skip_serializing_if = "TxApi::is_shipped")]
        api: TxApi,
    },
    /// Read-write registers with unique values.
    Register {
        /// Keys.
        keys: u64,
        /// Transaction shape.
        shape: ShapeSpec,
        /// How the transactions reach the store; absent: shipped (so the
        /// specs of older drivers decode with their meaning).
        #[serde(default, skip_serializing_if = "TxApi::is_shipped")]
        api: TxApi,
    },
    /// No built-in workload: an empty store that serves applications in
    /// their own processes (`[clients]`) and runs no client of its own.
    Applications,
}

/// A workload built from a [`WorkloadSpec`].
#[derive(Debug, Clone)]
pub enum BuiltWorkload {
    /// Smallbank.
    Smallbank(Smallbank),
    /// List-append or register.
    History(HistoryCheck),
    /// No built-in workload ([`WorkloadSpec::Applications`]).
    Applications,
}

/// Why a [`WorkloadSpec`] names no workload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Smallbank refused its parameters.
    #[error("smallbank: {0}")]
    Smallbank(String),
    /// A history workload refused its parameters.
    #[error("{0}")]
    History(#[from] WorkloadConfigError),
    /// The workload cannot run through the api asked for.
    #[error("{0}")]
    Api(#[from] ApiError),
}

impl WorkloadSpec {
    /// Builds the workload.
    ///
    /// # Errors
    /// [`SpecError`] for parameters the workload refuses.
    pub fn build(&self) -> Result<BuiltWorkload, SpecError> {
        Ok(match *self {
            WorkloadSpec::Smallbank {
                accounts,
                hot_accounts,
                api,
            } => BuiltWorkload::Smallbank(
                Smallbank::new(accounts, hot_accounts)
                    .map_err(|e| SpecError::Smallbank(e.to_string()))?
                    .with_api(api)?,
            ),
            WorkloadSpec::ListAppend {
                keys,
                clients,
                transactions_per_client,
                shape,
                api,
            } => BuiltWorkload::History(
                HistoryCheck::list_append(keys, clients, transactions_per_client, shape.into())?
                    .with_api(api)?,
            ),
            WorkloadSpec::Register { keys, shape, api } => {
                BuiltWorkload::History(HistoryCheck::register(keys, shape.into())?.with_api(api)?)
            }
            WorkloadSpec::Applications => BuiltWorkload::Applications,
        })
    }

    /// The workload's short name ("smallbank", "list-append", "register",
    /// "applications").
    pub fn name(&self) -> &'static str {
        match self {
            WorkloadSpec::Smallbank { .. } => "smallbank",
            WorkloadSpec::ListAppend { .. } => "list-append",
            WorkloadSpec::Register { .. } => "register",
            WorkloadSpec::Applications => "applications",
        }
    }
}

/// `POST /load`: load the rows of `workload` this node replicates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadRequest {
    /// [`PROTOCOL_VERSION`].
    pub version: u32,
    /// The workload.
    pub workload: WorkloadSpec,
    /// A restarted node rejoining: build the node empty and load
    /// no row; re-replication copies its shards once the membership admits
    /// it. Absent: `false`.
    #[serde(default)]
    pub rejoin: bool,
}

/// The answer to `POST /load`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadAnswer {
    /// [`PROTOCOL_VERSION`].
    pub version: u32,
    /// The node.
    pub node: u16,
    /// Rows written on this node.
    pub rows: u64,
}

/// `POST /workload/start`: start the node's client of the loaded workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartRequest {
    /// [`PROTOCOL_VERSION`].
    pub version: u32,
    /// Seed of the generators and the retries' backoff (the same on every node).
    pub seed: u64,
    /// Transactions the node's client keeps outstanding.
    pub inflight: usize,
    /// Transactions the client draws at most (`None`: until stopped).
    pub budget: Option<u64>,
    /// Attempts per transaction (conflicts retried); history workloads use 1.
    pub max_tries: u32,
    /// Outcomes before this long after the start are in no figure (ms).
    pub warmup_ms: u64,
    /// The client stops drawing this long after the start (ms; `None`: at its
    /// budget); figures cover `warmup_ms ..` this.
    pub run_ms: Option<u64>,
    /// Where the node's client journals its invocations and completions
    /// (a file path on the node's machine, see [`super::journal`]; `None`:
    /// no journal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<String>,
    /// The workload's clients run as processes of their own, attached to
    /// the node's application socket (L5 §III): the node starts no client,
    /// its run is done at once, and `/results` carries its counters and
    /// rows only (the clients report the rest).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub external: bool,
}

/// The answer to `POST /workload/start` and `/workload/stop`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartAnswer {
    /// [`PROTOCOL_VERSION`].
    pub version: u32,
    /// The node.
    pub node: u16,
    /// The node clock's time at the start (ns).
    pub start_ns: u64,
}

/// The NIC and host-worker counters a report and the fault-free check need.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeCounters {
    /// Packets sent (Dandelion §5.1).
    pub packets: u64,
    /// Messages in them.
    pub messages: u64,
    /// NIC index hits (Xenic §4.1.3).
    pub index_hits: u64,
    /// DMA reads the server submitted.
    pub dma_reads: u64,
    /// Lookups that read again.
    pub lookup_rereads: u64,
    /// Malformed packets dropped.
    pub bad_packets: u64,
    /// Malformed ring entries.
    pub bad_ring_entries: u64,
    /// Host-memory decode errors.
    pub host_decode_errors: u64,
    /// Stale host-log records.
    pub stale_records: u64,
    /// Bad host-log entries.
    pub bad_entries: u64,
    /// Packets sent again after a retransmission timeout (sessions).
    pub retransmissions: u64,
    /// Received packets dropped as duplicates.
    pub duplicates_dropped: u64,
    /// Sessions declared failed after the configured silence.
    pub sessions_failed: u64,
}

/// One row of a node's host table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    /// Table id of the key.
    pub table: u32,
    /// Key id.
    pub id: u64,
    /// Object version.
    pub version: u64,
    /// The value, hex.
    pub value: String,
}

/// Where a node's clock starts, in the machine's `CLOCK_MONOTONIC` (ns):
/// between `lo_ns` and `hi_ns`. Times of one node shift by it to compare
/// with another's (on one machine only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockOrigin {
    /// Earliest it can be.
    pub lo_ns: u64,
    /// Latest it can be.
    pub hi_ns: u64,
}

/// `GET /results`: everything the driver's report and checks need from one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// [`PROTOCOL_VERSION`].
    pub version: u32,
    /// The node.
    pub node: u16,
    /// Whether the run ended (client stopped, nothing in flight).
    pub done: bool,
    /// Every outcome.
    pub all: LoadCounters,
    /// Outcomes within the measured interval.
    pub window: LoadCounters,
    /// Latency (ns) of the window's commits: `(value, count)` pairs (with
    /// Smallbank through the `Txn`, of its transactions, each several calls).
    pub latency_ns: Vec<(u64, u64)>,
    /// NIC and worker counters.
    pub counters: NodeCounters,
    /// The node's clock origin.
    pub clock: ClockOrigin,
    /// Smallbank's generator summary.
    pub smallbank: Option<SmallbankSummary>,
    /// A history workload's recording.
    pub history: Option<HistorySummary>,
    /// Every row of the node's host table (sent once the run is done).
    pub rows: Vec<Row>,
    /// The replica sets the node served at the end (after a
    /// crash, survivors may replicate shards their ring position does not
    /// give them). Left out by older nodes, by a node that sent no rows,
    /// and in results rebuilt from a journal; the checks then use the ring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<ServedRoles>,
}

impl Results {
    /// Results of `node` (clock origin `clock`) with nothing counted,
    /// recorded or collected yet, `done` as given: what a node answers
    /// before its run ends, and what a journal replay or an external
    /// client's results fill in.
    pub fn empty(node: u16, clock: ClockOrigin, done: bool) -> Results {
        Results {
            version: PROTOCOL_VERSION,
            node,
            done,
            all: LoadCounters::default(),
            window: LoadCounters::default(),
            latency_ns: Vec::new(),
            counters: NodeCounters::default(),
            clock,
            smallbank: None,
            history: None,
            rows: Vec::new(),
            roles: None,
        }
    }
}

/// The replica sets one node served, as its placement view had them
/// (`splitkv_nic::placement::Roles`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServedRoles {
    /// The epoch of the view.
    pub epoch: u32,
    /// Per shard (one per node), its members in serving order, joining
    /// backups last.
    pub members: Vec<Vec<u16>>,
    /// Per shard, its joining backups.
    pub joining: Vec<Vec<u16>>,
    /// Restarted nodes not caught up yet.
    pub renewed: Vec<u16>,
}

/// `value` as lower-case hex.
pub fn to_hex(value: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(2 * value.len());
    for b in value {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// The bytes of a hex string, or `None` if it is not hex of even length.
pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let b = s.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    b.chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests;
