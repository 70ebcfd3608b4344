//! Coordinator role of Xenic's OCC (Xenic §4.2): runs shipped procedures
//! (Xenic §4.2.2) and drives each through Execute → Validate → Log → Commit, or
//! Abort. One `TxCtx` per transaction in flight, in a fixed-size slab. A
//! cluster running a Dnl row (Dnl-4, Dnl-2, Dnl-1) drives them through
//! the skeleton's steps instead: Get → Lock → Validate → Replicate →
//! Unlock → Readable, each elided where the row has none
//! (`coordinator/dnl.rs` decides, `coordinator/dnl_steps.rs` sends).
//!
//! Transaction ids are `node (16 bits) | slot (16 bits) | generation (32 bits)`,
//! so a late or duplicated response for a finished transaction is recognised and
//! dropped.
//!
//! A phase that outlives its deadline or waits on a failed peer ends by the
//! rules of the `deadline` module: an abort before LOG; after LOG, an abort
//! in two rounds (`coordinator/commit.rs`, `abort_after_log`: every LOG
//! holder acknowledges the ABORT before the client hears it and before the
//! locks are released; `tla/XenicOCCMsgs.tla`, `AbortMode = "tworound"`).

use super::Io;
use crate::placement::{Placement, NODES_MAX};
use crate::procedure::{ProcedureRegistry, ReadView, TxPlan, WriteSet};
use splitkv_layout::host_nic::{TxRequest, TxStatus, ARGS_BYTES_MAX, RESULT_BYTES_MAX};
use splitkv_layout::wire::{
    Body, BodyWriter, MsgKind, NodeId, ReplyStatus, ITEM_FIXED_BYTES, MESSAGE_BYTES_MAX,
};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, TxId};
use std::collections::VecDeque;

mod commit;
mod deadline;
mod dnl;
mod dnl_steps;
mod stats;
pub use dnl::COMMIT_ROUND_TRIPS_MAX;
pub use stats::CoordinatorStats;
mod evidence;
mod rebuild;
pub use deadline::{
    phase_deadline_ns, DeadlineStats, ABORT_LOG_RESENDS_MAX, DEADLINE_SCAN_INTERVAL_NS,
    PHASE_DEADLINE_NS_DEFAULT,
};
use deadline::{Deadlines, Waiting};

/// Most transactions one coordinator has in flight (its slots of the
/// transaction-id slot space, [`crate::slots`]).
pub use crate::slots::TX_INFLIGHT_MAX;
/// Bytes of a message body besides its items: transaction id, status byte and
/// item counts, with room to spare.
const BODY_OVERHEAD_BYTES: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Free,
    Execute,
    Validate,
    Log,
    Commit,
    /// Round 1 of an abort after LOG: waiting for every LOG holder's
    /// acknowledgement of its ABORT (`coordinator/commit.rs`, `abort_after_log`).
    AbortLog,
    /// Dnl execution: lock-free Gets (`coordinator/dnl.rs`).
    Get,
    /// Dnl Locking.
    Lock,
    /// Dnl Replication.
    Replicate,
    /// Dnl Unlocking (commit or abort: `TxCtx::dnl_decision`).
    Unlock,
    /// The Readable round after a Dnl commit was reported (holds the slot only).
    Readable,
}

/// Per-transaction coordinator state.
#[derive(Debug)]
struct TxCtx {
    gen: u32,
    phase: Phase,
    req_id: u64,
    procedure: u32,
    args: Vec<u8>,
    plan: TxPlan,
    reads: ReadView,
    writes: WriteSet,
    result: Vec<u8>,
    /// Responses still expected in the current phase, from which nodes, since when.
    pending: Waiting,
    /// The outcome the application was told, once told (the `deadline` module).
    told: Option<TxStatus>,
    /// Nodes whose response to the current phase has arrived.
    answered: u32,
    /// A response in the current phase said no.
    failed: bool,
    /// Why (the first refusal's status) when `failed`.
    reason: ReplyStatus,
    /// Nodes that refused in the current phase (mask by node id).
    refusers: u32,
    /// Primaries that hold locks for this transaction.
    locked: u32,
    /// Nodes sent its LOG (every replica of a written key): COMMIT, or an
    /// ABORT after LOG, goes to each of them.
    logged: u32,
    /// In [`Phase::AbortLog`]: the outcome the client hears once every LOG
    /// holder acknowledged, and the reason bytes that go with it.
    abort: (TxStatus, &'static [u8]),
    /// In [`Phase::AbortLog`]: ABORTs sent again so far
    /// (at most `ABORT_LOG_RESENDS_MAX`, the `deadline` module).
    abort_resends: u8,
    /// A Dnl transaction's decision so far (`Row::step_done`).
    dnl_decision: Option<super::skeleton::Decision>,
    /// Dnl: its Readable went out (at most once, `coordinator/dnl_steps.rs`).
    readable_sent: bool,
    /// Dnl: nodes sent its Readable that have not acknowledged it (mask by
    /// node id); the slot stays taken until none is left.
    readable_due: u32,
    /// Dnl: commit-phase steps sent so far, each one round trip.
    round_trips: u8,
}

impl TxCtx {
    fn new() -> TxCtx {
        TxCtx {
            gen: 0,
            phase: Phase::Free,
            req_id: 0,
            procedure: 0,
            args: Vec::new(),
            plan: TxPlan::default(),
            reads: ReadView::default(),
            writes: WriteSet::default(),
            result: Vec::new(),
            pending: Waiting::default(),
            told: None,
            answered: 0,
            failed: false,
            reason: ReplyStatus::Ok,
            refusers: 0,
            locked: 0,
            logged: 0,
            abort: (TxStatus::Unavailable, b""),
            abort_resends: 0,
            dnl_decision: None,
            readable_sent: false,
            readable_due: 0,
            round_trips: 0,
        }
    }

    /// Records a refusal from server `src`; the first reason is the one reported.
    fn refused(&mut self, src: NodeId, why: ReplyStatus) {
        self.refusers |= bit(src);
        if !self.failed {
            self.failed = true;
            self.reason = why;
        }
    }
}

/// The abort reason an application sees for a server's refusal (a rule the
/// fuzz targets check: never a wrong reason; a DMA or host-decode failure is
/// not a conflict).
fn abort_status(why: ReplyStatus) -> TxStatus {
    match why {
        ReplyStatus::Ok => TxStatus::Committed,
        ReplyStatus::LockConflict => TxStatus::LockConflict,
        ReplyStatus::ValidationFailed => TxStatus::ValidationFailed,
        ReplyStatus::TableFull => TxStatus::TableFull,
        ReplyStatus::TooLarge => TxStatus::TooLarge,
        ReplyStatus::HostFailure => TxStatus::HostFailure,
        ReplyStatus::Busy => TxStatus::Unavailable,
        ReplyStatus::Malformed => TxStatus::Rejected,
        ReplyStatus::Unavailable => TxStatus::Unavailable,
    }
}

/// An outcome waiting to be returned to the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedOutcome {
    /// The application's request id.
    pub req_id: u64,
    /// How it ended.
    pub status: TxStatus,
    /// Procedure result on commit; a reason on rejection.
    pub result: Vec<u8>,
}

/// The coordinator role of one node.
#[derive(Debug)]
pub struct Coordinator {
    txs: Vec<TxCtx>,
    free: Vec<usize>,
    outcomes: VecDeque<QueuedOutcome>,
    /// Result buffers handed back by [`Coordinator::recycle`], so reporting a
    /// commit does not allocate.
    spare: Vec<Vec<u8>>,
    stats: CoordinatorStats,
    deadlines: Deadlines,
    /// The Dnl row this coordinator runs (`coordinator/dnl.rs`), or `None`
    /// for Xenic OCC.
    row: Option<&'static super::skeleton::Row>,
}

fn bit(n: NodeId) -> u32 {
    1 << n
}

/// Sends one message to every node whose body `build` fills: `build(w,
/// placement, p)` writes the body for node `p` into `w` and returns whether
/// it holds anything to send (Dandelion §5.1: the batcher packs the messages
/// per destination). Returns the messages sent: how many, to whom, when.
fn send_each(
    io: &mut Io,
    mut build: impl FnMut(&mut BodyWriter, &Placement, NodeId) -> bool,
) -> Waiting {
    let placement = io.placement;
    let (mut sent, mut to) = (0, 0);
    for p in 0..placement.nodes() as NodeId {
        if build(&mut io.w, &placement, p) {
            io.send(p);
            sent += 1;
            to |= bit(p);
        }
    }
    Waiting::new(sent, to, io.now)
}

impl Default for Coordinator {
    fn default() -> Coordinator {
        Coordinator::new()
    }
}

impl Coordinator {
    /// A coordinator with room for [`TX_INFLIGHT_MAX`] transactions. Their
    /// values may be at most [`Io::value_bytes_max`] bytes (the longest value
    /// the host table stores), read from the [`Io`] each call is given.
    pub fn new() -> Coordinator {
        let txs: Vec<_> = (0..TX_INFLIGHT_MAX).map(|_| TxCtx::new()).collect();
        Coordinator {
            txs,
            free: (0..TX_INFLIGHT_MAX).rev().collect(),
            outcomes: VecDeque::with_capacity(TX_INFLIGHT_MAX),
            spare: Vec::with_capacity(TX_INFLIGHT_MAX),
            stats: CoordinatorStats::default(),
            deadlines: Deadlines::default(),
            row: None,
        }
    }

    /// Runs `protocol` from now on: Xenic OCC, or a Dnl row
    /// (`coordinator/dnl.rs`: Dnl-4, Dnl-2, Dnl-1).
    pub fn set_commit_protocol(&mut self, protocol: super::CommitProtocol) {
        self.row = super::skeleton::row_of(protocol);
    }

    /// Counters so far.
    pub fn stats(&self) -> CoordinatorStats {
        self.stats
    }

    /// Whether another transaction can start.
    pub fn has_room(&self) -> bool {
        !self.free.is_empty()
    }

    /// Transactions in flight (including those committing after their outcome was reported).
    pub fn inflight(&self) -> usize {
        TX_INFLIGHT_MAX - self.free.len()
    }

    /// Returns the result buffer of an outcome that has been delivered.
    pub fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.spare.len() < TX_INFLIGHT_MAX {
            buf.clear();
            self.spare.push(buf);
        }
    }

    /// An empty result buffer: one handed back by [`Coordinator::recycle`]
    /// if any (so an outcome queued here allocates only while the spares
    /// fill up), else a new one.
    pub fn spare_buffer(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_default()
    }

    /// Outcomes not yet handed to the application ring.
    pub fn pending_outcomes(&self) -> usize {
        self.outcomes.len()
    }

    /// Outcomes waiting for the application ring.
    pub fn outcomes(&mut self) -> &mut VecDeque<QueuedOutcome> {
        &mut self.outcomes
    }

    fn lookup(&self, node: NodeId, tx_id: TxId) -> Option<usize> {
        if tx_id.coordinator() != node {
            return None;
        }
        let slot = tx_id.slot();
        let t = self.txs.get(slot)?;
        (t.phase != Phase::Free && t.gen == tx_id.generation()).then_some(slot)
    }

    /// Whether every message of a transaction touching `keys` keys fits one
    /// message of at most [`MESSAGE_BYTES_MAX`] body bytes (fragmented below
    /// the protocol when larger than a packet) when each value may be
    /// `value_bytes_max` bytes long. The EXECUTE response of a primary
    /// carries the value of every key of the plan it holds (reads and
    /// writes), whose sizes are unknown before the read, so the bound assumes
    /// all of them at the maximum; LOG and COMMIT carry at most the writes,
    /// so the same bound covers them.
    fn fits_one_message(keys: usize, value_bytes_max: usize) -> bool {
        let per_item = ITEM_FIXED_BYTES + value_bytes_max;
        BODY_OVERHEAD_BYTES + keys.saturating_mul(per_item) <= MESSAGE_BYTES_MAX
    }

    fn reject(&mut self, req_id: u64, status: TxStatus, why: &str) {
        self.stats.rejected += 1;
        let mut result = why.as_bytes().to_vec();
        result.truncate(RESULT_BYTES_MAX);
        self.outcomes.push_back(QueuedOutcome {
            req_id,
            status,
            result,
        });
    }

    /// Starts a transaction for an application request (step 1: Execute).
    ///
    /// # Panics
    /// If called without room (check [`Coordinator::has_room`]).
    pub fn start(&mut self, io: &mut Io, procs: &ProcedureRegistry, req: &TxRequest<'_>) {
        let proc = match procs.get(req.procedure) {
            Ok(p) => p,
            Err(e) => return self.reject(req.req_id, TxStatus::Rejected, &e.to_string()),
        };
        if req.args.len() > ARGS_BYTES_MAX {
            return self.reject(req.req_id, TxStatus::TooLarge, "arguments too large");
        }
        let slot = self.free.pop().expect("start() needs room");
        let t = &mut self.txs[slot];
        t.plan.clear();
        if let Err(e) = proc
            .plan(req.args, &mut t.plan)
            .and_then(|()| t.plan.check())
        {
            self.free.push(slot);
            return self.reject(req.req_id, TxStatus::Rejected, &e.to_string());
        }
        let keys = t.plan.reads.len() + t.plan.writes.len();
        if !Self::fits_one_message(keys, io.value_bytes_max) {
            self.free.push(slot);
            let why = format!(
                "transaction too large for one message: {keys} keys with values up to {} B exceed the {MESSAGE_BYTES_MAX} B message limit",
                io.value_bytes_max,
            );
            return self.reject(req.req_id, TxStatus::TooLarge, &why);
        }
        self.stats.started += 1;
        t.gen = t.gen.wrapping_add(1);
        t.req_id = req.req_id;
        t.procedure = req.procedure;
        t.args.clear();
        t.args.extend_from_slice(req.args);
        t.reads.clear();
        t.writes.clear();
        t.result.clear();
        t.locked = 0;
        t.logged = 0;
        t.abort_resends = 0;
        t.dnl_decision = None;
        (t.readable_sent, t.readable_due, t.round_trips) = (false, 0, 0);
        t.failed = false;
        t.reason = ReplyStatus::Ok;
        t.refusers = 0;
        t.answered = 0;
        (t.pending, t.told) = (Waiting::default(), None);
        if self.row.is_some() {
            return self.dnl_start(io, procs, slot);
        }
        let t = &mut self.txs[slot];
        t.phase = Phase::Execute;
        let tx_id = TxId::new(io.node, slot, t.gen);
        let plan = &t.plan;
        t.pending = send_each(io, |w, placement, p| {
            w.begin_execute(tx_id);
            let mut any = false;
            for k in plan.reads.iter().filter(|k| placement.primary(k) == p) {
                w.push_read(k);
                any = true;
            }
            for k in plan.writes.iter().filter(|k| placement.primary(k) == p) {
                w.push_lock(k);
                any = true;
            }
            any
        });
        if t.pending == 0 {
            self.run_body(io, procs, slot);
        }
    }

    /// Handles a response from a primary or backup.
    pub fn on_response(
        &mut self,
        io: &mut Io,
        procs: &ProcedureRegistry,
        src: NodeId,
        body: &Body<'_>,
    ) {
        let Some(slot) = self.lookup(io.node, body.tx_id()) else {
            self.stats.stale_responses += 1;
            return;
        };
        let expected = match body.kind() {
            MsgKind::ExecuteResp => Phase::Execute,
            MsgKind::ValidateResp => Phase::Validate,
            MsgKind::LogAck => Phase::Log,
            MsgKind::CommitAck => Phase::Commit,
            MsgKind::AbortLogAck => Phase::AbortLog,
            MsgKind::GetResp => Phase::Get,
            MsgKind::LockResp => Phase::Lock,
            MsgKind::ReplicateAck => Phase::Replicate,
            MsgKind::UnlockAck => Phase::Unlock,
            MsgKind::ReadableAck => return self.on_readable_ack(slot, src, body),
            // Requests go to the server; one here is dropped, never a panic.
            _ => Phase::Free,
        };
        let t = &mut self.txs[slot];
        if t.phase != expected || (src as usize) >= NODES_MAX || t.answered & bit(src) != 0 {
            self.stats.stale_responses += 1;
            return;
        }
        t.answered |= bit(src);
        t.pending -= 1;
        if expected == Phase::AbortLog {
            self.stats.abort_log_acks += 1;
        }
        self.absorb(io, slot, src, body);
        if self.txs[slot].pending == 0 {
            self.end_phase(io, procs, slot);
        }
    }

    /// Takes in one response of the current phase: the values read, or a
    /// refusal's reason.
    fn absorb(&mut self, io: &Io, slot: usize, src: NodeId, body: &Body<'_>) {
        let t = &mut self.txs[slot];
        match *body {
            Body::LockResp { status, .. } if status.is_ok() => t.locked |= bit(src),
            Body::ExecuteResp { status, items, .. } | Body::GetResp { status, items, .. } => {
                if status.is_ok() {
                    // Locks are held at `src` even if its items are refused
                    // below (an EXECUTE's; a Dnl Get takes none).
                    let execute = matches!(body, Body::ExecuteResp { .. });
                    if execute && t.plan.writes.iter().any(|k| io.placement.primary(k) == src) {
                        t.locked |= bit(src);
                    }
                    for it in items.iter() {
                        if it.meta.check_read(it.value.len()).is_err() {
                            self.stats.malformed_responses += 1;
                            t.refused(src, ReplyStatus::Malformed);
                            break;
                        }
                        let present = !it.meta.flags().contains(ObjectFlags::DELETED);
                        t.reads.insert(it.key, it.meta, it.value, present);
                    }
                } else {
                    t.refused(src, status);
                }
            }
            Body::ValidateResp { status, .. }
            | Body::LogAck { status, .. }
            | Body::CommitAck { status, .. }
            | Body::LockResp { status, .. }
            | Body::ReplicateAck { status, .. }
            | Body::UnlockAck { status, .. }
                if !status.is_ok() =>
            {
                t.refused(src, status)
            }
            _ => {}
        }
    }

    /// Every response of the current phase is in: go on, or abort with the
    /// first refusal's reason.
    fn end_phase(&mut self, io: &mut Io, procs: &ProcedureRegistry, slot: usize) {
        let t = &mut self.txs[slot];
        t.answered = 0;
        let (failed, why, refusers) = (t.failed, abort_status(t.reason), t.refusers);
        let lost = t.reason == ReplyStatus::Unavailable;
        let busy = t.reason == ReplyStatus::Busy;
        t.failed = false;
        t.refusers = 0;
        t.reason = ReplyStatus::Ok;
        if failed && why == TxStatus::HostFailure {
            self.stats.host_failures += 1;
        }
        if self.row.is_some() && t.phase == Phase::Unlock && failed && busy {
            return self.dnl_unlock_again(io, slot, refusers);
        }
        if self.row.is_some() && t.phase != Phase::AbortLog {
            return self.dnl_end_phase(io, procs, slot, failed, why);
        }
        match t.phase {
            Phase::Execute if failed => {
                self.stats.execute_aborts += 1;
                self.abort(io, slot, why, &[]);
            }
            Phase::Execute => self.run_body(io, procs, slot),
            Phase::Validate if failed => {
                self.stats.validate_aborts += 1;
                self.abort(io, slot, why, &[]);
            }
            Phase::Validate => self.log(io, slot),
            // A restarted replica lost the LOG: it goes to it again.
            Phase::Log if failed && lost => self.log_again(io, slot, refusers),
            // Any other refusal (including a late LOG, answered `Malformed`
            // by a replica that finished the transaction): not committed,
            // and aborted in two rounds (`commit::abort_after_log`).
            Phase::Log if failed => {
                self.stats.log_refusals += 1;
                self.abort_after_log(io, slot, why, b"");
            }
            Phase::Log => self.commit(io, slot),
            // Past the commit point: every replica holds the writes. A
            // replica that had already decided the transaction (crash
            // recovery committed it there) refuses the COMMIT as malformed:
            // still committed. Any other refusing node stops
            // (`Server::fatal`); the application learns why.
            Phase::Commit if failed && why != TxStatus::Rejected => {
                self.stats.commit_refusals += 1;
                self.report(slot, why);
            }
            Phase::Commit => self.report(slot, TxStatus::Committed),
            // Round 1 done: every LOG holder recorded the abort.
            Phase::AbortLog => self.abort_unlock(io, slot),
            Phase::Free
            | Phase::Get
            | Phase::Lock
            | Phase::Replicate
            | Phase::Unlock
            | Phase::Readable => unreachable!("Dnl phases end in dnl_end_phase"),
        }
    }

    /// Step 2: run the procedure on the values read, then Validate if needed.
    fn run_body(&mut self, io: &mut Io, procs: &ProcedureRegistry, slot: usize) {
        let t = &mut self.txs[slot];
        let proc = procs.get(t.procedure).expect("checked at start");
        t.writes.clear();
        t.result.clear();
        if proc
            .execute(&t.args, &t.reads, &mut t.writes, &mut t.result)
            .is_err()
        {
            self.stats.user_aborts += 1;
            return self.abort(io, slot, TxStatus::UserAborted, &[]);
        }
        let value_bytes_max = io.value_bytes_max;
        let bad_write = t.writes.iter().find_map(|(k, v)| {
            if !t.plan.writes.contains(k) {
                Some("procedure wrote a key outside its write set")
            } else if v.len() > value_bytes_max {
                Some("value too large")
            } else if Self::new_meta(&t.reads, &t.writes, k).is_none() {
                Some("version overflow")
            } else {
                None
            }
        });
        if let Some(why) = bad_write {
            self.stats.rejected += 1;
            let status = if why == "value too large" {
                TxStatus::TooLarge
            } else {
                TxStatus::Rejected
            };
            return self.abort(io, slot, status, why.as_bytes());
        }
        if t.result.len() > RESULT_BYTES_MAX {
            self.stats.rejected += 1;
            return self.abort(io, slot, TxStatus::TooLarge, b"result too large");
        }
        if self.row.is_some() {
            return self.dnl_after_body(io, slot);
        }
        // A single read needs no validation: it is linearized when it was read.
        let validate =
            !t.plan.reads.is_empty() && (!t.plan.writes.is_empty() || t.plan.reads.len() > 1);
        if !validate {
            return self.log(io, slot);
        }
        let tx_id = TxId::new(io.node, slot, t.gen);
        t.phase = Phase::Validate;
        let (plan, reads) = (&t.plan, &t.reads);
        t.pending = send_each(io, |w, placement, p| {
            w.begin_validate(tx_id);
            let mut any = false;
            for k in plan.reads.iter().filter(|k| placement.primary(k) == p) {
                w.push_version(k, reads.meta(k).map_or(0, |m| m.version()));
                any = true;
            }
            any
        });
    }

    /// The metadata of the write of `key` in `writes`: the next version
    /// after the one read (a tombstone's too: an insert over a delete takes
    /// the version after it), DELETED for a delete; `None` at `VERSION_MAX`
    /// (checked in `run_body`, before Log).
    fn new_meta(reads: &ReadView, writes: &WriteSet, key: &Key) -> Option<ObjectMeta> {
        let read = ObjectMeta(reads.meta(key).map_or(0, |m| m.version()));
        match writes.is_delete(key) {
            true => read.next_delete().ok(),
            false => read.next_write().ok(),
        }
    }
}
