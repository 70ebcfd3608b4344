//! The embedding API and the local-cluster driver (DESIGN.md driver 2, the
//! embedded default): several in-process nodes whose components are spread
//! over a few OS threads, each thread polling a fixed set of components.
//!
//! ```no_run
//! # use splitkv_host::cluster::{Cluster, ClusterError};
//! # use splitkv_nic::ProcedureRegistry;
//! # fn main() -> Result<(), ClusterError> {
//! let registry = ProcedureRegistry::new(); // register procedures here
//! let mut cluster = Cluster::builder()
//!     .nodes(3)
//!     .replication(3)
//!     .capacity_keys(10_000)
//!     .value_bytes_max(64)
//!     .procedures(registry)
//!     .clients_per_node(2)
//!     .build()?;
//! cluster.load(Vec::<(splitkv_layout::Key, Vec<u8>)>::new(), |_| {})?;
//! let mut client = cluster.client(0)?; // one per application thread
//! // client.call(procedure_id, &args)?;
//! let stats = cluster.stats();
//! let stopped = cluster.shutdown()?; // tables readable for checks
//! # Ok(()) }
//! ```
//!
//! - [`ClusterBuilder`] checks the settings ([`ClusterError`] on bad ones) and
//!   either starts a [`Cluster`] on threads over the in-process `mem` transport
//!   ([`ClusterBuilder::build`]) or returns the assembled components for
//!   another driver, such as the simulator, to poll
//!   ([`ClusterBuilder::build_parts`] → [`ClusterParts`]); or only one node
//!   of the cluster, for a process of a deployed cluster whose peers live in
//!   other processes ([`ClusterBuilder::build_local_parts`],
//!   [`ClusterBuilder::build_local`]: the same node, table, quota and seed
//!   the in-process cluster would give it; it loads only the rows it
//!   replicates).
//! - [`Cluster`] hands out one [`Client`](crate::Client) per application
//!   thread, bulk-loads rows on every replica ([`Cluster::load`]), reports counters
//!   ([`ClusterStats`]) and shuts down into a [`ClusterParts`] whose tables a
//!   checker reads. A polling thread that panics stops every thread and the
//!   cluster reports [`ClusterError::Panicked`]. [`Cluster::pause_with`]
//!   pauses the threads to add or take application components;
//!   [`StatsHandle`] reads the published counters (and the failed peers the
//!   sessions reported) from another thread. [`Cluster::restart_nic`]
//!   (or [`StatsHandle::restart_nic`]) restarts a node's NIC runtime in
//!   place on its polling thread (a NIC-runtime-only crash).
//! - [`ClusterBuilder::observe_calls`] registers a
//!   [`CallObserver`](crate::observe::CallObserver) that every client tells of
//!   each call and its outcome, with sound times: the way to record a Jepsen
//!   history of an application's own run ([`crate::observe`]).
//! - [`ClusterParts::set_membership`] gives a node its membership
//!   ([`NodeMembership`]): its agent runs beside the node's NIC runtime on
//!   its polling thread, applies configurations, and fences the node once
//!   its lease runs out ([`ClusterError::Fenced`]).
//! - [`run_threads`] is the older scoped driver over borrowed components.

mod builder;
mod copy_reads;
mod driver;
mod load;
mod membership;
mod parts;
mod poll;
mod scoped;
mod stats;
#[cfg(test)]
mod tests_copy;
#[cfg(test)]
mod tests_local;
#[cfg(test)]
mod tests_membership;
#[cfg(test)]
mod tests_restart;

pub use builder::{
    ClusterBuilder, CAPACITY_KEYS_DEFAULT, CLIENTS_PER_NODE_DEFAULT, THREADS_DEFAULT, THREADS_MAX,
    VALUE_BYTES_MAX_DEFAULT,
};
pub use driver::{Cluster, STATS_PUBLISH_INTERVAL_NS};
pub use load::{
    node_keys_max, shard_quotas, LoadError, LoadProgress, LOADED_VERSION, LOAD_PROGRESS_ROWS,
};
pub use membership::{MembershipView, NodeMembership, AGENT_EVERY_NS_DEFAULT};
pub use parts::{AppComponent, ClusterParts, NodeParts, DRAIN_IDLE_PASSES_MAX, DRAIN_PASSES_MAX};
pub use poll::IDLE_PASSES_BEFORE_YIELD;
pub use scoped::{round_robin, run_threads, try_run_threads};
pub use stats::{ClusterStats, NodeStats, StatsHandle};

use crate::node::NodeError;
use splitkv_layout::wire::NodeId;
use splitkv_nic::PlacementError;
pub(crate) use stats::Shared;

/// Why a cluster could not be built, run or stopped cleanly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// Bad node count or replication degree.
    #[error("placement: {0}")]
    Placement(#[from] PlacementError),
    /// A node could not be assembled (table, rings, value or client limits).
    #[error("node: {0}")]
    Node(#[from] NodeError),
    /// A setting of the builder is out of range.
    #[error("invalid setting {setting} = {value}: {expected}")]
    Setting {
        /// The builder method.
        setting: &'static str,
        /// The value given.
        value: u64,
        /// What is allowed.
        expected: &'static str,
    },
    /// [`ClusterBuilder::build_parts`] got a transport count other than the node count.
    #[error("{given} transports for {nodes} nodes")]
    Transports {
        /// Transports given.
        given: usize,
        /// Nodes.
        nodes: usize,
    },
    /// A node id outside the cluster.
    #[error("node {node} outside a {nodes}-node cluster")]
    BadNode {
        /// Requested id.
        node: NodeId,
        /// Cluster size.
        nodes: usize,
    },
    /// Every client of the node has been handed out
    /// ([`ClusterBuilder::clients_per_node`] sets how many there are).
    #[error("node {node} has no client left: all {clients} handed out")]
    NoFreeClient {
        /// The node.
        node: NodeId,
        /// Clients the node has.
        clients: usize,
    },
    /// A node stopped on a fault it cannot continue past (its host table
    /// cannot take a committed write, its host log refused an append); every
    /// thread of the cluster was stopped. Not an internal error: the reason
    /// says what to change (for example a larger table).
    #[error("node {node} stopped: {reason}")]
    NodeStopped {
        /// The node.
        node: NodeId,
        /// What its NIC runtime or host worker reported
        /// ([`Component::fault`](splitkv_nic::Component::fault)).
        reason: String,
    },
    /// A node's membership fenced it (Xenic §4.2.1, FaRM leases): its lease
    /// ran out, or a configuration left it out. Its NIC runtime stopped
    /// answering and sending at once, and every thread of the cluster was
    /// stopped. Not an internal error: the node must rejoin as a new
    /// incarnation.
    #[error("node {node} fenced by its membership: {reason}")]
    Fenced {
        /// The node.
        node: NodeId,
        /// Why ([`MembershipError`](splitkv_nic::membership::MembershipError)).
        reason: String,
    },
    /// A component polled by [`try_run_threads`] stopped on a fault
    /// ([`Component::fault`](splitkv_nic::Component::fault)); every thread was
    /// stopped.
    #[error("a component on polling thread {thread} stopped: {reason}")]
    ComponentStopped {
        /// Name of the thread that polled it (`splitkv-poll-<i>`).
        thread: String,
        /// What it reported.
        reason: String,
    },
    /// Bulk load failed; rows before the failing one are loaded.
    #[error("load: {0}")]
    Load(#[from] LoadError),
    /// A polling thread could not be started.
    #[error("could not start polling thread {thread}: {message}")]
    Spawn {
        /// Thread name.
        thread: String,
        /// The OS error.
        message: String,
    },
    /// A node could not start serving applications (its socket, or the
    /// gateway's thread); nothing of the cluster keeps running.
    #[error("node {node} cannot serve applications: {message}")]
    Applications {
        /// The node.
        node: NodeId,
        /// Why ([`ServiceError`](crate::clients::ServiceError)).
        message: String,
    },
    /// A polling thread panicked; every thread of the cluster was stopped.
    /// (Binaries map this to their internal-error exit code.)
    #[error("polling thread {thread} panicked: {message}")]
    Panicked {
        /// Name of the thread that panicked (`splitkv-poll-<i>`).
        thread: String,
        /// The panic's message.
        message: String,
    },
}

impl ClusterError {
    /// Whether this is [`ClusterError::Panicked`] (an internal error, not bad input).
    pub fn is_panic(&self) -> bool {
        matches!(self, ClusterError::Panicked { .. })
    }
}
