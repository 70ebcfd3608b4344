//! The coordinator's Dnl path (Dandelion §4.2.2; `tla/DnlSkeleton.tla`;
//! only the Dnl-4 row, `protocol/dnl4.rs`, is enabled): lock-free Gets at
//! the primaries (TLA `Read`), the procedure, then the row's steps in the
//! order [`Row::step_done`] gives (the spec's `StepDone`: `ExecDone`,
//! `LockDone`, `ValidateReadsDone`, `ReplicateDone`, `UnlockDone`) — Lock
//! of the write set at its primaries with the values, Read validation of
//! the rest of the read set, Replicate to the backups, Unlock at the lock
//! holders — reporting at the row's report points (Dnl-4: a commit after
//! the Unlock acks, an abort at once), then Readable at the backups sent
//! Replicate (`ReadableDone`); the slot is free only after those acks.
//! Read-only transactions run Dnl-RO: Gets, then validation of every key
//! read, a lone read too (the spec's `ValKeys`: a Get answers a locked
//! key's value, which a transaction already ordered before others may be
//! about to replace; the simulator's list-append check finds that cycle
//! when a lone read skips validation).
//!
//! The coordinator waits for every Lock reply before it decides (the spec
//! lets it abort at the first refusal and drop the rest): no Lock lands
//! after the Unlock(abort) meant to release it. Keys planned as written
//! and not written are locked and released like the written ones.

use super::{bit, send_each, Coordinator, Phase};
use crate::placement::Placement;
use crate::procedure::ProcedureRegistry;
use crate::protocol::skeleton::{Decision, Row, Shape, Step};
use crate::protocol::Io;
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::wire::NodeMask;
use splitkv_layout::TxId;

impl Coordinator {
    /// Execution (TLA `Read`): Gets of the read and write sets at their
    /// primaries; the procedure runs once every answer is in.
    pub(super) fn dnl_start(&mut self, io: &mut Io, procs: &ProcedureRegistry, slot: usize) {
        let t = &mut self.txs[slot];
        t.phase = Phase::Get;
        let tx_id = TxId::new(io.node, slot, t.gen);
        let plan = &t.plan;
        t.pending = send_each(io, |w, placement, p| {
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
        self.dnl_step_done(io, slot, Step::Exec, false, TxStatus::Committed);
    }

    /// Locking (TLA `Lock`): the planned write set at its primaries, each
    /// key with the version read, the written ones with their new values.
    fn dnl_lock(&mut self, io: &mut Io, slot: usize, row: &Row) {
        let t = &mut self.txs[slot];
        let tx_id = TxId::new(io.node, slot, t.gen);
        t.phase = Phase::Lock;
        let shards = super::evidence::dnl_asked_shards(row, t, &io.placement);
        let (plan, writes, reads) = (&t.plan, &t.writes, &t.reads);
        t.pending = send_each(io, |w, placement, p| {
            w.begin_lock(tx_id, shards);
            let mut any = false;
            for k in plan.writes.iter().filter(|k| placement.primary(k) == p) {
                w.push_version(k, reads.meta(k).map_or(0, |m| m.version()));
                any = true;
            }
            for (k, v) in writes.iter().filter(|(k, _)| placement.primary(k) == p) {
                w.push_item(k, Self::new_meta(reads, writes, k).unwrap_or_default(), v);
            }
            any
        });
        if t.pending == 0 {
            self.dnl_step_done(io, slot, Step::Lock, false, TxStatus::Committed);
        }
    }

    /// Read validation (TLA `ValidateReads`) at the primaries: the keys only
    /// read, or (Dnl-RO, nothing written) every key read.
    fn dnl_validate(&mut self, io: &mut Io, slot: usize) {
        let t = &mut self.txs[slot];
        let all = t.writes.is_empty();
        let tx_id = TxId::new(io.node, slot, t.gen);
        t.phase = Phase::Validate;
        let (plan, reads) = (&t.plan, &t.reads);
        let extra: &[_] = if all { &plan.writes } else { &[] };
        t.pending = send_each(io, |w, placement, p| {
            w.begin_validate(tx_id);
            let mut any = false;
            for k in plan.reads.iter().chain(extra) {
                if placement.primary(k) == p {
                    w.push_version(k, reads.meta(k).map_or(0, |m| m.version()));
                    any = true;
                }
            }
            any
        });
        if t.pending == 0 {
            self.dnl_step_done(io, slot, Step::Validate, false, TxStatus::Committed);
        }
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
            // TLA `ReadableDone`: only the slot was held.
            Phase::Readable => return self.release(slot),
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
        self.dnl_step_done(io, slot, step, failed, why);
    }

    /// The last answer of `step` is in (TLA `StepDone`): the row decides,
    /// reports and names the next step, which is sent (`why`: the abort's
    /// status when `failed`).
    fn dnl_step_done(&mut self, io: &mut Io, slot: usize, step: Step, failed: bool, why: TxStatus) {
        let Some(row) = self.row else {
            return;
        };
        let t = &mut self.txs[slot];
        let shape = dnl_shape(t);
        let done = row.step_done(step, shape, failed, t.dnl_decision, t.told.is_some());
        t.dnl_decision = done.decision;
        match done.report {
            Some(Decision::Commit) => self.dnl_report_commit(slot),
            Some(Decision::Abort) => self.tell(slot, why, Vec::new()),
            None => {}
        }
        match done.next {
            Step::Exec => {}
            Step::Lock => self.dnl_lock(io, slot, row),
            Step::Validate => self.dnl_validate(io, slot),
            Step::Replicate => self.dnl_replicate(io, slot),
            Step::Unlock => self.dnl_unlock(io, slot),
            Step::Done => self.dnl_readable(io, slot, row),
        }
    }

    /// Replication (TLA `Replicate`): the written values to every backup
    /// of a written key.
    fn dnl_replicate(&mut self, io: &mut Io, slot: usize) {
        let t = &mut self.txs[slot];
        let tx_id = TxId::new(io.node, slot, t.gen);
        t.phase = Phase::Replicate;
        let shards = shards_of(t.writes.iter().map(|(k, _)| k), &io.placement);
        let (writes, reads) = (&t.writes, &t.reads);
        t.pending = send_each(io, |w, placement, b| {
            w.begin_replicate(tx_id, shards);
            let mut any = false;
            for (k, v) in writes.iter() {
                if placement.backups(k).any(|n| n == b) {
                    w.push_item(k, Self::new_meta(reads, writes, k).unwrap_or_default(), v);
                    any = true;
                }
            }
            any
        });
        t.logged = t.pending.sent();
        if t.pending == 0 {
            self.dnl_step_done(io, slot, Step::Replicate, false, TxStatus::Committed);
        }
    }

    /// Unlocking (TLA `Unlock`) at every lock holder: a commit installs the
    /// values written there, an abort drops them; the locked keys not
    /// written are released.
    fn dnl_unlock(&mut self, io: &mut Io, slot: usize) {
        let t = &mut self.txs[slot];
        let tx_id = TxId::new(io.node, slot, t.gen);
        t.phase = Phase::Unlock;
        let commit = t.dnl_decision == Some(Decision::Commit);
        let (locked, plan, writes, reads) = (t.locked, &t.plan, &t.writes, &t.reads);
        t.pending = send_each(io, |w, placement, p| {
            if locked & bit(p) == 0 {
                return false;
            }
            w.begin_unlock(tx_id, commit);
            let here = |k: &splitkv_layout::Key| placement.primary(k) == p;
            for k in plan.writes.iter().filter(|k| here(k)) {
                if !commit || writes.iter().all(|(written, _)| written != k) {
                    w.push_unlock_key(k);
                }
            }
            if commit {
                for (k, v) in writes.iter().filter(|(k, _)| here(k)) {
                    w.push_item(k, Self::new_meta(reads, writes, k).unwrap_or_default(), v);
                }
            }
            true
        });
        if t.pending == 0 {
            self.dnl_step_done(io, slot, Step::Unlock, false, TxStatus::Committed);
        }
    }

    /// The transaction is done: Readable (TLA `Readable`, once the commit is
    /// reported) to every backup sent Replicate, which installs and raises
    /// READABLE; the slot is free after their acks, at once without any.
    fn dnl_readable(&mut self, io: &mut Io, slot: usize, row: &Row) {
        let t = &mut self.txs[slot];
        let commit = t.dnl_decision == Some(Decision::Commit) && t.told.is_some();
        if !commit || !row.readable || t.logged == 0 {
            return self.release(slot);
        }
        let tx_id = TxId::new(io.node, slot, t.gen);
        t.phase = Phase::Readable;
        let (logged, writes, reads) = (t.logged, &t.writes, &t.reads);
        t.pending = send_each(io, |w, placement, b| {
            if logged & bit(b) == 0 {
                return false;
            }
            w.begin_readable(tx_id);
            for (k, v) in writes.iter() {
                if placement.backups(k).any(|n| n == b) {
                    w.push_item(k, Self::new_meta(reads, writes, k).unwrap_or_default(), v);
                }
            }
            true
        });
        if t.pending == 0 {
            self.release(slot);
        }
    }

    /// Reports the commit of `slot` to the client.
    fn dnl_report_commit(&mut self, slot: usize) {
        self.stats.committed += 1;
        let mut result = self.spare_buffer();
        result.clear();
        result.extend_from_slice(&self.txs[slot].result);
        self.tell(slot, TxStatus::Committed, result);
    }

    /// Aborts `slot` in its current step (a deadline or a failed peer):
    /// reported now with `status` and `why`, then the row's abort path
    /// (Unlock(abort) to every node that may hold its locks; the slot is
    /// free after their acks).
    pub(super) fn dnl_abort(&mut self, io: &mut Io, slot: usize, status: TxStatus, why: &[u8]) {
        self.tell(slot, status, why.to_vec());
        let step = match self.txs[slot].phase {
            Phase::Get => Step::Exec,
            Phase::Lock => Step::Lock,
            _ => Step::Validate,
        };
        self.dnl_step_done(io, slot, step, true, status);
    }
}

/// The [`Shape`] of a transaction: its planned writes count as written
/// (locked and released alike) once it wrote anything; a transaction that
/// wrote nothing is read-only (Dnl-RO), every key it read a read.
fn dnl_shape(t: &super::TxCtx) -> Shape {
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

/// The shards of `keys`.
fn shards_of<'a>(keys: impl Iterator<Item = &'a splitkv_layout::Key>, p: &Placement) -> NodeMask {
    keys.fold(NodeMask::EMPTY, |m, k| m.with(p.shard(k)))
}
