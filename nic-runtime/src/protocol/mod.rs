//! Xenic's OCC commit protocol with primary-backup replication (Xenic §4.2
//! steps 1–7; DESIGN.md "Commit protocols", row "Xenic OCC"):
//!
//! 1. **Execute** — the coordinator sends one EXECUTE per primary: read the read
//!    set, lock and read the write set (no-wait: a held lock aborts).
//! 2. the shipped procedure computes the writes on the coordinator;
//! 3. **Validate** — re-check the versions of the read set at its primaries;
//! 4. **Log** — send the write set to every backup, which appends LOG records to
//!    its host log by DMA and acknowledges;
//! 5. the transaction is committed once every backup acknowledged;
//! 6. **Commit** — each primary installs the new values in its NIC index (pinned),
//!    unlocks, and appends COMMIT records to its host log; once every primary
//!    acknowledged, the outcome goes to the application (not earlier: see
//!    `tla/README.md`, "XenicEarlyReport");
//! 7. host workers apply the log and acknowledge; pinned objects are released.
//!
//! **Abort** releases the locks a transaction took. Step names match the TLA+
//! actions in `tla/XenicOCC.tla`.
//!
//! Every request gets one reply carrying a [`ReplyStatus`]: `Ok`, or why the
//! server refused (lock conflict, failed validation, too large, a DMA or
//! host-decode failure, no free slot, a broken protocol rule). Before the
//! commit point (step 5) a refusal aborts the transaction with that reason as
//! its [`TxStatus`]; after it, a primary that cannot take its COMMIT stops its
//! node ([`server::Server::fatal`]). Known gap: a LOG refused by one backup
//! after another appended it leaves that copy in the other's host log; with
//! one value limit per cluster (checked by the coordinator first) only a
//! failing host log refuses a LOG, and that node stops.
//!
//! Room in the host tables is therefore never decided by a backup: an insert
//! of an absent key reserves room at the primary's EXECUTE, where the key is
//! locked and found absent, against a quota per shard that fits every
//! replica's table, and is refused there with `TableFull` (before anything
//! is logged) when the shard has none ([`server::Room`]). A DLHT's quota is
//! its growth bound: it grows instead of refusing. What the quota cannot see
//! (a Robinhood table physically full because keys collide) still stops the
//! node at its host worker, with a typed reason.
//!
//! [`ReplyStatus`]: splitkv_layout::wire::ReplyStatus
//! [`TxStatus`]: splitkv_layout::host_nic::TxStatus
//!
//! [`coordinator`] holds the coordinator role (one `TxCtx` per transaction in
//! flight); [`server`] the primary and backup roles.

pub mod coordinator;
pub mod server;

/// Mutation switch `log_backups_only` (issue 11): the protocol before the
/// commit-point fix — LOG to backups only, applied at once by backups (NIC
/// cache and host table), COMMIT to primaries only, which unlock before
/// their COMMIT append completed. A simulator test shows the issue's
/// counterexample failing against it. Declared in `Cargo.toml` check-cfg.
pub(crate) const LOG_BACKUPS_ONLY: bool = cfg!(splitkv_mutation = "log_backups_only");

use crate::dma::DmaEngine;
use crate::net::batch::BatchError;
use crate::net::stack::Stack;
use crate::placement::Placement;
use crate::Nanos;
use splitkv_layout::wire::{BodyWriter, NodeId};

/// What both roles need to send messages and reach host memory.
pub struct Io {
    /// This node.
    pub node: NodeId,
    /// Placement of keys on nodes.
    pub placement: Placement,
    /// Largest value the host table stores (bytes); larger writes are refused.
    /// The node's one copy of [`NicParts::value_bytes_max`](crate::NicParts::value_bytes_max),
    /// read by both the coordinator and the server.
    pub value_bytes_max: usize,
    /// Current time (set at the start of each iteration).
    pub now: Nanos,
    /// The Dnl stack: batching, fragmentation, sessions.
    pub net: Stack,
    /// Host memory access.
    pub dma: Box<dyn DmaEngine>,
    /// Scratch writer for message bodies.
    pub w: BodyWriter,
    /// The first message the stack refused, if one was: the node stops
    /// ([`NicRuntime::fault`](crate::NicRuntime::fault)).
    pub send_fault: Option<SendFault>,
}

/// A protocol message the stack refused. It cannot happen within the
/// protocol's own bounds: every message is at most
/// [`MESSAGE_BYTES_MAX`](splitkv_layout::wire::MESSAGE_BYTES_MAX) (the
/// coordinator and server check sizes first), destinations come from the
/// placement, and admission control keeps backlogs below their bound
/// ([`crate::net::batch`]). If it happens anyway the message is lost, so the
/// node stops with this reason instead of panicking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendFault {
    /// Destination of the refused message.
    pub dest: NodeId,
    /// Why it was refused.
    pub error: BatchError,
    /// The reason in words, as [`NicRuntime::fault`](crate::NicRuntime::fault) reports it.
    pub reason: String,
}

impl Io {
    /// Queues the body in `self.w` for `dest`. A refusal is recorded in
    /// [`Io::send_fault`] (the first one), which stops the node.
    #[inline]
    pub fn send(&mut self, dest: NodeId) {
        if let Err(error) = self.net.try_insert(dest, &self.w) {
            if self.send_fault.is_none() {
                self.send_fault = Some(SendFault {
                    dest,
                    error,
                    reason: format!("protocol message to node {dest} not sendable: {error}"),
                });
            }
        }
    }
}
