//! Workloads across processes: one node per process (`splitkv node`), driven
//! by `splitkv bench … --cluster FILE` through the nodes' control endpoints
//! (`splitkv_host::deploy::control`).
//!
//! - [`protocol`]: the versioned JSON bodies of the control calls, shared by
//!   both sides;
//! - [`node`]: the node side ([`RemoteNode`]): load the rows the node
//!   replicates, run the workload's client as an application component on
//!   the node's polling thread(s), collect results and the checkers' inputs;
//! - [`check`]: the driver side: the money, replica and history checks over
//!   what every node sent back, with the in-process bench's rules;
//! - [`journal`] and [`replay`]: a node's client journal, written before
//!   each transaction is submitted, and its replay by the driver when the
//!   node died (SIGKILL) and its client with it.

pub mod check;
mod collect;
pub mod journal;
pub mod node;
pub mod protocol;
pub mod replay;

pub use check::{merged_history, Mirror, RemoteHistoryReport};
pub use node::RemoteNode;
pub use protocol::{Results, WorkloadSpec, PROTOCOL_VERSION};
