//! Node assembly: builds one node's host table, host log, rings and NIC runtime
//! and wires them together (DESIGN.md, "Node anatomy and data flow").
//!
//! ```text
//! Client ──requests ring──► NicRuntime ──DMA──► host table (read)
//!    ▲                         │  └──DMA──► host log ──► HostWorker ──► table (write)
//!    └──outcomes ring──────────┘                            │
//!                      NicRuntime ◄──acks ring (LogApplied)─┘
//! ```
//!
//! A node has [`NodeConfig::clients`] clients, each with its own request and
//! outcome ring (one per application thread, L5 §3); the NIC runtime polls
//! them fairly and routes each outcome to the client that asked.

use crate::client::Client;
use crate::log::HostWorker;
use crate::table::{HostTable, HostTableError, TableKind};
use splitkv_layout::host_nic::{HOST_TO_NIC_BYTES_MAX, NIC_TO_HOST_BYTES_MAX};
use splitkv_layout::log_record::{log_entry_bytes_max, LOG_ENTRY_BYTES_MAX};
use splitkv_layout::ring::{ring_entry_bytes, ring_pair, ring_payload_bytes_max, RingError};
use splitkv_layout::robinhood_layout::TableConfig;
use splitkv_layout::wire::NodeId;
use splitkv_layout::VALUE_BYTES_MAX;
use splitkv_nic::dma::local::LocalDma;
use splitkv_nic::net::stack::{StackConfig, StackError};
use splitkv_nic::net::Transport;
use splitkv_nic::runtime::CLIENTS_PER_NODE_MAX;
use splitkv_nic::{
    ClientPorts, CommitProtocol, CommitProtocolError, HostPorts, Nanos, NicBuildError, NicParts,
    NicRuntime, Placement, ProcedureRegistry,
};

/// Largest entries (full-size transactions: 16 values of 4 KiB) each default
/// ring holds at once, so that many such transactions can be in flight.
pub const RING_FULL_SIZE_ENTRIES_MIN: usize = 16;

/// Default [`NodeConfig::app_ring_bytes`]: 2 MiB, room for 31 requests (or
/// outcomes) of [`HOST_TO_NIC_BYTES_MAX`] bytes, and for 40 000 of a few
/// tens of bytes.
pub const APP_RING_BYTES_DEFAULT: usize = 2 << 20;

/// Default [`NodeConfig::log_ring_bytes`]: 4 MiB, room for 63 host-log
/// entries of [`LOG_ENTRY_BYTES_MAX`] bytes (a COMMIT of 16 values of 4 KiB).
pub const LOG_RING_BYTES_DEFAULT: usize = 4 << 20;

/// Default [`NodeConfig::ack_ring_bytes`]: acknowledgements are 9 bytes.
pub const ACK_RING_BYTES_DEFAULT: usize = 64 << 10;

const _: () = assert!(
    RING_FULL_SIZE_ENTRIES_MIN * ring_entry_bytes(HOST_TO_NIC_BYTES_MAX) <= APP_RING_BYTES_DEFAULT
);
const _: () = assert!(
    RING_FULL_SIZE_ENTRIES_MIN * ring_entry_bytes(NIC_TO_HOST_BYTES_MAX) <= APP_RING_BYTES_DEFAULT
);
const _: () = assert!(
    RING_FULL_SIZE_ENTRIES_MIN * ring_entry_bytes(LOG_ENTRY_BYTES_MAX) <= LOG_RING_BYTES_DEFAULT
);

/// How to build one node.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// This node's id (< placement.nodes()).
    pub node: NodeId,
    /// Cluster placement.
    pub placement: Placement,
    /// Host table shape (capacity, D_m, value size).
    pub table: TableConfig,
    /// Host log ring size in bytes (power of two); it must take an entry of
    /// [`log_entry_bytes_max`]`(value_bytes_max)` bytes. Default
    /// [`LOG_RING_BYTES_DEFAULT`].
    pub log_ring_bytes: usize,
    /// Request and outcome ring size in bytes (power of two). Default
    /// [`APP_RING_BYTES_DEFAULT`]; a smaller ring refuses larger requests
    /// ([`crate::ClientError::Ring`]) and outcomes.
    pub app_ring_bytes: usize,
    /// Ack ring size in bytes (power of two). Default [`ACK_RING_BYTES_DEFAULT`].
    pub ack_ring_bytes: usize,
    /// DMA completion latency (0 = next poll).
    pub dma_latency_ns: Nanos,
    /// Prefetch host-table lines when a DMA read is submitted
    /// ([`LocalDma::set_prefetch`]); default on.
    pub dma_prefetch: bool,
    /// NIC object-cache capacity in objects.
    pub cache_objects: usize,
    /// Which host table to keep the data in.
    pub table_kind: TableKind,
    /// Application clients (request/outcome ring pairs), 1 to
    /// [`CLIENTS_PER_NODE_MAX`]; default 1.
    pub clients: usize,
    /// The run's seed: every random choice of the node derives from it and the
    /// node id ([`splitkv_nic::node_seed`]); default 0.
    pub seed: u64,
    /// The network stack: cluster id, incarnation, batching switch, session
    /// limits; default `StackConfig::default()`.
    pub net: StackConfig,
    /// The cluster's commit protocol; default [`CommitProtocol::XenicOcc`]
    /// (a protocol not implemented yet is refused, [`NodeError::Commit`]).
    pub commit: CommitProtocol,
}

impl NodeConfig {
    /// Defaults for a node holding up to `capacity_keys` keys with values of at
    /// most `value_bytes_max` bytes.
    pub fn new(
        node: NodeId,
        placement: Placement,
        capacity_keys: usize,
        value_bytes_max: usize,
    ) -> NodeConfig {
        NodeConfig {
            node,
            placement,
            table: TableConfig::new(capacity_keys, value_bytes_max),
            log_ring_bytes: LOG_RING_BYTES_DEFAULT,
            app_ring_bytes: APP_RING_BYTES_DEFAULT,
            ack_ring_bytes: ACK_RING_BYTES_DEFAULT,
            dma_latency_ns: 0,
            dma_prefetch: true,
            cache_objects: splitkv_nic::index::CACHE_OBJECTS_DEFAULT,
            table_kind: TableKind::Robinhood,
            clients: 1,
            seed: 0,
            net: StackConfig::default(),
            commit: CommitProtocol::XenicOcc,
        }
    }
}

/// Why a node could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeError {
    /// Bad table configuration.
    #[error("host table: {0}")]
    Table(#[from] HostTableError),
    /// Bad ring size.
    #[error("ring: {0}")]
    Ring(#[from] RingError),
    /// Bad network stack configuration.
    #[error("network stack: {0}")]
    Net(#[from] StackError),
    /// A commit protocol this build does not run.
    #[error("{0}")]
    Commit(#[from] CommitProtocolError),
    /// Value size over [`VALUE_BYTES_MAX`].
    #[error(
        "value size {0} B exceeds the node maximum of {VALUE_BYTES_MAX} B (the wire's item limit)"
    )]
    ValueTooLarge(usize),
    /// The host log ring cannot take the largest entry the node may append.
    #[error(
        "a host log of {ring_bytes} B takes entries of at most {max} B; \
         values of {value_bytes_max} B need {need} B"
    )]
    LogRingTooSmall {
        /// The configured log ring size.
        ring_bytes: usize,
        /// Largest entry that ring takes.
        max: usize,
        /// The node's value limit.
        value_bytes_max: usize,
        /// [`log_entry_bytes_max`] of that limit.
        need: usize,
    },
    /// Client count outside 1..=[`CLIENTS_PER_NODE_MAX`].
    #[error("{0} clients per node: must be 1 to {CLIENTS_PER_NODE_MAX}")]
    Clients(usize),
    /// Node id outside the cluster.
    #[error("node {node} outside a {nodes}-node cluster")]
    BadNode {
        /// Requested id.
        node: NodeId,
        /// Cluster size.
        nodes: usize,
    },
}

/// The components of one node, ready to be placed on threads by a driver.
#[derive(Debug)]
pub struct Node {
    /// The protocol engine.
    pub nic: NicRuntime,
    /// The host worker owning the table and applying the host log.
    pub worker: HostWorker,
    /// The first application client (its end of the request and outcome rings).
    pub client: Client,
    /// Clients 1.. (`NodeConfig::clients - 1` of them), in ring order.
    pub more_clients: Vec<Client>,
}

impl Node {
    /// Splits the node into its NIC runtime, its host worker and all its
    /// clients (ring order: [`Node::client`] first).
    pub fn into_clients(self) -> (NicRuntime, HostWorker, Vec<Client>) {
        let mut clients = Vec::with_capacity(1 + self.more_clients.len());
        clients.push(self.client);
        clients.extend(self.more_clients);
        (self.nic, self.worker, clients)
    }
}

/// Builds a node whose NIC runtime uses `transport` and runs `procedures`.
///
/// # Errors
/// [`NodeError`] for a node id outside the placement, a value limit over
/// [`VALUE_BYTES_MAX`], a client count outside 1..=[`CLIENTS_PER_NODE_MAX`],
/// a host log ring too small for the node's largest entry
/// ([`NodeError::LogRingTooSmall`]), a bad table configuration, a bad ring
/// size, or a commit protocol not implemented yet ([`NodeError::Commit`]).
pub fn build_node(
    cfg: &NodeConfig,
    procedures: ProcedureRegistry,
    transport: Box<dyn Transport>,
) -> Result<Node, NodeError> {
    if cfg.node as usize >= cfg.placement.nodes() {
        return Err(NodeError::BadNode {
            node: cfg.node,
            nodes: cfg.placement.nodes(),
        });
    }
    if cfg.table.value_bytes_max > VALUE_BYTES_MAX {
        return Err(NodeError::ValueTooLarge(cfg.table.value_bytes_max));
    }
    if cfg.clients == 0 || cfg.clients > CLIENTS_PER_NODE_MAX {
        return Err(NodeError::Clients(cfg.clients));
    }
    cfg.commit.check_implemented()?;
    let need = log_entry_bytes_max(cfg.table.value_bytes_max);
    let max = ring_payload_bytes_max(cfg.log_ring_bytes);
    if need > max {
        return Err(NodeError::LogRingTooSmall {
            ring_bytes: cfg.log_ring_bytes,
            max,
            value_bytes_max: cfg.table.value_bytes_max,
            need,
        });
    }
    let table = HostTable::new(cfg.table_kind, &cfg.table)?;
    let (memory, table_kind) = table.dma();
    let value_bytes_max = table.value_bytes_max();
    let (log_tx, log_rx) = ring_pair(cfg.log_ring_bytes)?;
    let mut ports = Vec::with_capacity(cfg.clients);
    let mut clients = Vec::with_capacity(cfg.clients);
    for _ in 0..cfg.clients {
        let (req_tx, req_rx) = ring_pair(cfg.app_ring_bytes)?;
        let (out_tx, out_rx) = ring_pair(cfg.app_ring_bytes)?;
        ports.push(ClientPorts {
            requests: req_rx,
            outcomes: out_tx,
        });
        let mut client = Client::new(req_tx, out_rx);
        client.resolve_procedures(&procedures, value_bytes_max);
        clients.push(client);
    }
    let (ack_tx, ack_rx) = ring_pair(cfg.ack_ring_bytes)?;
    let mut dma = LocalDma::new(memory, log_tx, cfg.dma_latency_ns);
    dma.set_prefetch(cfg.dma_prefetch);
    let nic = NicRuntime::new(NicParts {
        node: cfg.node,
        placement: cfg.placement,
        table: table_kind,
        value_bytes_max,
        procedures,
        dma: Box::new(dma),
        transport,
        host: HostPorts {
            clients: ports,
            acks: ack_rx,
        },
        cache_objects: cfg.cache_objects,
        seed: cfg.seed,
        net: cfg.net,
        commit: cfg.commit,
    })
    .map_err(|e| match e {
        NicBuildError::Stack(e) => NodeError::Net(e),
        NicBuildError::Commit(e) => NodeError::Commit(e),
    })?;
    let mut clients = clients.into_iter();
    let client = clients.next().ok_or(NodeError::Clients(0))?;
    Ok(Node {
        nic,
        worker: HostWorker::new(table, log_rx, ack_tx),
        client,
        more_clients: clients.collect(),
    })
}
