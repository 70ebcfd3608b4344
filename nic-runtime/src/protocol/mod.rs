//! Xenic's OCC commit protocol with primary-backup replication (Xenic §4.2
//! steps 1–7; DESIGN.md "Commit protocols", row "Xenic OCC"), with the
//! crash-safe commit point:
//!
//! 1. **Execute** — the coordinator sends one EXECUTE per primary: read the read
//!    set, lock and read the write set (no-wait: a held lock aborts).
//! 2. the shipped procedure computes the writes on the coordinator;
//! 3. **Validate** — re-check the versions of the read set at its primaries
//!    (skipped for a lone read: see `server/lookups.rs`, `recheck_read`);
//! 4. **Log** — send the write set to **every replica** of each written key,
//!    primary and backups; each appends LOG records to its host log by DMA,
//!    held *pending* (the NIC cache and the host table do not change), and
//!    acknowledges;
//! 5. the **commit point**: every replica of every written key acknowledged
//!    its LOG, so every new value is on all f+1 replicas before any of them
//!    becomes visible (the 16-step TLC commit-point counterexample needed the new
//!    value of a key only on a replica that crashed);
//! 6. **Commit** — COMMIT goes to every replica sent the LOG and each appends
//!    one COMMIT *decision record*; a primary's COMMIT also carries the keys
//!    it is primary of, which it installs in its NIC index (pinned) on
//!    arrival and unlocks only once the decision record's append completed
//!    (Xenic step 6 waits); once every replica acknowledged, the outcome goes
//!    to the application (not earlier: see `tla/README.md`,
//!    "XenicEarlyReport");
//! 7. host workers apply a transaction's pending LOG records at its decision
//!    record and acknowledge; pinned objects are released.
//!
//! **Abort** releases the locks a transaction took; after step 4 it also
//! goes to every replica sent the LOG, which appends an ABORT decision record
//! so its host drops the pending records. A LOG record without a decision is
//! therefore exactly what crash recovery reads. Step names match the TLA+
//! actions in `tla/XenicOCC.tla`.
//!
//! **Late and duplicated requests.** A server remembers, per coordinator
//! slot, the newest transaction generation it saw and whether it finished
//! there (`server/txs.rs`): an EXECUTE or LOG of a finished or superseded
//! transaction is refused (no orphan lock, no undecided LOG), a COMMIT being
//! appended is answered once. Sessions deliver each pair's messages in order,
//! so a committing transaction's ABORT for keys it locked and did not write
//! arrives after its COMMIT.
//!
//! The mutation switch `log_backups_only` (`LOG_BACKUPS_ONLY`) restores
//! the protocol before the fix, for the simulator to show the counterexample.
//!
//! Every request gets one reply carrying a [`ReplyStatus`]: `Ok`, or why the
//! server refused (lock conflict, failed validation, too large, a DMA or
//! host-decode failure, no free slot, a broken protocol rule or a late
//! request). Before the commit point (step 5) a refusal aborts the
//! transaction with that reason as its [`TxStatus`], and replicas that
//! already appended its LOG drop it at the ABORT; after it, a primary that
//! cannot take its COMMIT stops its node ([`server::Server::fatal`]).
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
//! flight); [`server`] the primary and backup roles; [`single_key`] the
//! single-key calls (GetOne, PutOne/InsertOne) in one round at the key's
//! primary; [`selection`] which protocol a cluster runs ([`CommitProtocol`]);
//! [`skeleton`] the Dandelion commit skeleton and its rows [`dnl4`],
//! [`dnl2`], [`dnl1`] and [`dnl_ro`] (every row runs: `coordinator/dnl.rs`).

pub mod coordinator;
pub mod dnl1;
pub mod dnl2;
pub mod dnl4;
pub mod dnl_ro;
pub mod selection;
pub mod server;
pub mod single_key;
pub mod skeleton;

pub use selection::{CommitProtocol, CommitProtocolError};

/// Whether transaction-id generation `a` is newer than `b`, with
/// wrap-around (generations are `u32` counters per coordinator slot that
/// wrap; the fences and the numbering of a restarted coordinator compare
/// them this way).
#[inline]
pub fn generation_newer(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// The newer of two generations ([`generation_newer`]).
#[inline]
pub fn newer_generation(a: u32, b: u32) -> u32 {
    if generation_newer(a, b) {
        a
    } else {
        b
    }
}

/// Mutation switch `log_backups_only`: the protocol before the commit point
/// moved to every replica's LOG acknowledgement — LOG to backups only,
/// applied at once by backups (NIC cache and host table), COMMIT to
/// primaries only, which unlock before their COMMIT append completed. A
/// simulator test (`sim/tests/commit_point_scenario.rs`) shows the
/// commit-point counterexample failing against it. Declared in `Cargo.toml`
/// check-cfg.
pub(crate) const LOG_BACKUPS_ONLY: bool = cfg!(splitkv_mutation = "log_backups_only");

/// Mutation switch `abort_report_early`: the coordinator reports an abort
/// after LOG at its decision, before every LOG holder acknowledged round 1
/// (`tla/XenicAbortReportEarly.cfg`). Killed by `tests/abort_after_log.rs`.
/// Declared in `Cargo.toml` check-cfg.
pub(crate) const ABORT_REPORT_EARLY: bool = cfg!(splitkv_mutation = "abort_report_early");

/// Mutation switch `abort_unlock_early`: a replica releases the
/// transaction's locks at round 1 of an abort after LOG
/// (`tla/XenicAbortUnlockEarly.cfg`). Killed by
/// `tests/abort_after_log_server.rs`. Declared in `Cargo.toml` check-cfg.
pub(crate) const ABORT_UNLOCK_EARLY: bool = cfg!(splitkv_mutation = "abort_unlock_early");

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

/// The Dnl mutant a mutation build runs (`--cfg splitkv_mutation="dnl"`,
/// `scripts/mutation`: one build for every Dnl mutant), named by the
/// environment variable `SPLITKV_DNL_MUTANT`: a broken row
/// (`skeleton.rs`) or a broken recovery rule (`dnl4::decide`,
/// `dnl1::decide`). Read once.
#[cfg(splitkv_mutation = "dnl")]
pub(crate) fn dnl_mutant() -> Option<&'static str> {
    static NAME: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    NAME.get_or_init(|| std::env::var("SPLITKV_DNL_MUTANT").ok())
        .as_deref()
}

/// Whether the Dnl mutation build runs mutant `name` ([`dnl_mutant`]);
/// always false in other builds.
#[inline]
pub(crate) fn dnl_mutant_is(name: &str) -> bool {
    #[cfg(splitkv_mutation = "dnl")]
    return dnl_mutant() == Some(name);
    #[cfg(not(splitkv_mutation = "dnl"))]
    {
        let _ = name;
        false
    }
}
