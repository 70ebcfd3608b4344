//! The coordinator's Dnl path (Dandelion §4.2.2; `tla/DnlSkeleton.tla`):
//! one skeleton driving every row — Dnl-4 (`protocol/dnl4.rs`), Dnl-2
//! (`protocol/dnl2.rs`) and Dnl-1 (`protocol/dnl1.rs`). Lock-free Gets at
//! the primaries (TLA `Read`), the procedure, then the row's steps in the
//! order [`Row::step_done`] gives (the spec's `StepDone`: `ExecDone`,
//! `LockDone`, `ValidateReadsDone`, `ReplicateDone`, `UnlockDone`),
//! reporting at the row's report points, then the Readable round
//! (`ReadableDone`); the slot is free only after every Unlock and Readable
//! ack. The requests of each step are built in `coordinator/dnl_steps.rs`
//! from [`Row::visit`].
//!
//! Report points (the spec's `reportCommit`, `reportAbort`): Dnl-4 reports
//! a commit after the Unlock acks, Dnl-2 after the Replicate acks, Dnl-1
//! after the Lock acks (one round trip); aborts at once, except Dnl-1,
//! which reports an abort only after the Unlock acks (the must-fail model
//! `Dnl1EarlyAbortReport`: recovery must never find a reported abort's
//! locks everywhere and commit it). Readable goes out once the commit is
//! reported (the spec's `readableAt = "report"`): with Unlock in Dnl-2,
//! after the Unlock acks in Dnl-4; Dnl-1 replicates nothing and sends none.
//! [`CoordinatorStats::commits_by_round_trips`](super::CoordinatorStats)
//! counts the round trips each commit took before its report.
//!
//! Read-only transactions run Dnl-RO under every row: Gets, then
//! validation of every key read, a lone read too (the spec's `ValKeys`: a
//! Get answers a locked key's value, which a transaction already ordered
//! before others may be about to replace; the simulator's list-append check
//! finds that cycle when a lone read skips validation). They never lock
//! ([`CoordinatorStats::read_only_lock_requests`](super::CoordinatorStats)
//! stays 0).
//!
//! The coordinator waits for every Lock reply before it decides (the spec
//! lets it abort at the first refusal and drop the rest): no Lock lands
//! after the Unlock(abort) meant to release it. Only a deadline's abort
//! (`deadline` module) decides with Lock replies missing: an Unlock that a
//! node refuses `Busy`, its Lock still in progress, is sent to it again
//! (`dnl_unlock_again`) until it is taken. Keys planned as written
//! and not written are locked and released like the written ones.

use super::{bit, Coordinator, Phase};
use crate::placement::NODES_MAX;
use crate::procedure::ProcedureRegistry;
use crate::protocol::skeleton::{Decision, Shape, Step};
use crate::protocol::Io;
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::wire::{Body, NodeId};
use splitkv_layout::TxId;

/// Round trips a commit can take before its report (Dnl-4's four).
pub const COMMIT_ROUND_TRIPS_MAX: usize = 4;

impl Coordinator {
    /// Execution (TLA `Read`): Gets of the read and write sets at their
    /// primaries; the procedure runs once every answer is in.
    pub(super) fn dnl_start(&mut self, io: &mut Io, procs: &ProcedureRegistry, slot: usize) {
        let t = &mut self.txs[slot];
        t.phase = Phase::Get;
        let tx_id = TxId::new(io.node, slot, t.gen);
        let plan = &t.plan;
        t.pending = super::send_each(io, |w, placement, p| {
            w.begin_get(tx_id);
            let mut any = false;
            for k in plan.reads.iter().chain(&plan.writes) {
                if placement.primary(k) == p {
                    w.push_get_key(k);
                    any = true;
                }
            }
            any
        });
        if t.pending == 0 {
            self.run_body(io, procs, slot);
        }
    }

    /// The procedure ran: execution is done (TLA `ExecDone`).
    pub(super) fn dnl_after_body(&mut self, io: &mut Io, slot: usize) {
        self.dnl_step_done(io, slot, Step::Exec, false);
    }

    /// Every answer of a Dnl phase is in (`failed`: some refused, first
    /// reason `why`).
    pub(super) fn dnl_end_phase(
        &mut self,
        io: &mut Io,
        procs: &ProcedureRegistry,
        slot: usize,
        failed: bool,
        why: TxStatus,
    ) {
        let step = match self.txs[slot].phase {
            Phase::Get if !failed => return self.run_body(io, procs, slot),
            Phase::Get => Step::Exec,
            Phase::Lock => Step::Lock,
            Phase::Validate => Step::Validate,
            Phase::Replicate => Step::Replicate,
            Phase::Unlock => Step::Unlock,
            _ => return,
        };
        match step {
            Step::Exec | Step::Lock if failed => self.stats.execute_aborts += 1,
            Step::Validate if failed => self.stats.validate_aborts += 1,
            // Never refused for a rule of the protocol: a replica that
            // cannot take it stops (its server's `fatal`).
            Step::Replicate | Step::Unlock if failed => self.stats.commit_refusals += 1,
            _ => {}
        }
        let failed = failed && step.is_check();
        if failed {
            self.txs[slot].abort = (why, b"");
        }
        self.dnl_step_done(io, slot, step, failed);
    }

    /// The last answer of `step` is in (TLA `StepDone`): the row decides,
    /// reports and names the next step, which is sent. An abort is
    /// reported with the status and reason in `TxCtx::abort`.
    pub(super) fn dnl_step_done(&mut self, io: &mut Io, slot: usize, step: Step, failed: bool) {
        let Some(row) = self.row else {
            return;
        };
        let t = &mut self.txs[slot];
        let shape = dnl_shape(t);
        let done = row.step_done(step, shape, failed, t.dnl_decision, t.told.is_some());
        t.dnl_decision = done.decision;
        match done.report {
            Some(Decision::Commit) => self.dnl_report_commit(slot, shape),
            Some(Decision::Abort) => {
                let (status, why) = self.txs[slot].abort;
                self.tell(slot, status, why.to_vec());
            }
            None => {}
        }
        if !matches!(done.next, Step::Exec | Step::Done) {
            let t = &mut self.txs[slot];
            t.round_trips = t.round_trips.saturating_add(1);
        }
        match done.next {
            Step::Exec => {}
            Step::Lock => self.dnl_lock(io, slot, row),
            Step::Validate => self.dnl_validate(io, slot, row),
            Step::Replicate => self.dnl_replicate(io, slot, row),
            Step::Unlock => self.dnl_unlock(io, slot, row),
            Step::Done => self.dnl_done(io, slot),
        }
    }

    /// Every step ran: Readable if the commit was reported and it has not
    /// gone out yet (TLA `Readable`), then the slot is free once every
    /// Readable ack is in (`ReadableDone`), at once without any.
    fn dnl_done(&mut self, io: &mut Io, slot: usize) {
        self.dnl_send_readable(io, slot);
        let t = &mut self.txs[slot];
        if t.readable_due == 0 {
            return self.release(slot);
        }
        t.phase = Phase::Readable;
        t.pending = super::Waiting::new(t.readable_due.count_ones() as u16, t.readable_due, io.now);
    }

    /// A Readable ack from `src` (the answer to TLA `Readable`), counted
    /// down apart from the phase's responses: it may arrive during
    /// Unlocking (Dnl-2 sends both at once) or in the Readable round. The
    /// slot is freed at the last one once every step ran. A refusal is
    /// counted (never refused for a rule of the protocol); an ack not due
    /// is stale.
    pub(super) fn on_readable_ack(&mut self, slot: usize, src: NodeId, body: &Body<'_>) {
        let due = (src as usize) < NODES_MAX && self.txs[slot].readable_due & bit(src) != 0;
        let Body::ReadableAck { status, .. } = *body else {
            return;
        };
        if !due {
            self.stats.stale_responses += 1;
            return;
        }
        let t = &mut self.txs[slot];
        t.readable_due &= !bit(src);
        if !status.is_ok() {
            self.stats.commit_refusals += 1;
        }
        let t = &self.txs[slot];
        if t.readable_due == 0 && t.phase == Phase::Readable {
            self.release(slot);
        }
    }

    /// Reports the commit of `slot` to the client and counts its round
    /// trips.
    fn dnl_report_commit(&mut self, slot: usize, shape: Shape) {
        self.stats.committed += 1;
        if shape.is_read_only() {
            self.stats.read_only_committed += 1;
        }
        let trips = usize::from(self.txs[slot].round_trips).min(COMMIT_ROUND_TRIPS_MAX);
        self.stats.commits_by_round_trips[trips] += 1;
        let mut result = self.spare_buffer();
        result.clear();
        result.extend_from_slice(&self.txs[slot].result);
        self.tell(slot, TxStatus::Committed, result);
    }

    /// Aborts `slot` in its current step (a deadline or a failed peer) with
    /// `status` and `why`: the row's abort path (Unlock(abort) to every
    /// node that may hold its locks; the slot is free after their acks),
    /// reported at the row's abort report point (Dnl-1: after the Unlock
    /// acks; the others now). The slot is free once every Unlock ack is in.
    pub(super) fn dnl_abort(
        &mut self,
        io: &mut Io,
        slot: usize,
        status: TxStatus,
        why: &'static [u8],
    ) {
        let t = &mut self.txs[slot];
        t.abort = (status, why);
        // The phase ends here, not in `end_phase`: its answers so far must
        // not count against the Unlock that follows.
        (t.answered, t.failed, t.refusers) = (0, false, 0);
        t.reason = splitkv_layout::wire::ReplyStatus::Ok;
        let step = match t.phase {
            Phase::Get => Step::Exec,
            Phase::Lock => Step::Lock,
            _ => Step::Validate,
        };
        self.dnl_step_done(io, slot, step, true);
    }
}

/// The [`Shape`] of a transaction: its planned writes count as written
/// (locked and released alike) once it wrote anything; a transaction that
/// wrote nothing is read-only (Dnl-RO), every key it read a read.
pub(super) fn dnl_shape(t: &super::TxCtx) -> Shape {
    let (reads, writes) = (t.plan.reads.len(), t.plan.writes.len());
    if t.writes.is_empty() {
        Shape {
            reads_not_written: reads + writes,
            written: 0,
        }
    } else {
        Shape {
            reads_not_written: reads,
            written: writes,
        }
    }
}
