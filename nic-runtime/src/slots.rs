//! The slot space of one node's transaction ids: the named interface
//! between the protocol engine ([`crate::protocol`]: the coordinator's
//! transaction contexts, the server's per-slot record table) and
//! re-replication's copy transactions ([`crate::recovery::rereplication`]),
//! so that neither reads the other's bounds.
//!
//! A transaction id names its coordinator node, a slot of that node and a
//! generation of the slot ([`crate::protocol::coordinator`]). Per node,
//! slots `0..TX_INFLIGHT_MAX` are the coordinator's transactions and
//! slots `TX_INFLIGHT_MAX..SLOTS_PER_NODE` the copy streams a node runs as
//! a re-replication source (one chunk in flight per slot). The server
//! fences and records every slot alike: its table holds
//! [`NODES_MAX`](crate::placement::NODES_MAX) × [`SLOTS_PER_NODE`] entries.

/// Most transactions one coordinator has in flight: its slots
/// `0..TX_INFLIGHT_MAX`.
pub const TX_INFLIGHT_MAX: usize = 1024;
/// Copy-transaction slots per source node (chunks in flight at once): its
/// slots `TX_INFLIGHT_MAX..SLOTS_PER_NODE`.
pub const COPY_SLOTS_MAX: usize = 4;
/// Slots per coordinator node: its transactions', then its copy
/// transactions'.
pub const SLOTS_PER_NODE: usize = TX_INFLIGHT_MAX + COPY_SLOTS_MAX;
