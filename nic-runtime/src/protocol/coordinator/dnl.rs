//! The coordinator's Dnl-4 path (Dandelion §4.2.2; `tla/DnlSkeleton.tla`,
//! row `Dnl4Row`; `protocol/dnl4.rs`): lock-free Gets at the primaries
//! (TLA `Read`, `ExecDone`), the procedure, then Lock of the write set at
//! its primaries with the values (`LockDone`), Read validation of the rest
//! of the read set (`ValidateReadsDone`), Replicate to the backups
//! (`ReplicateDone`), Unlock at the lock holders (`UnlockDone`: the commit
//! is reported here), Readable at the backups (`ReadableDone`), and only
//! then the slot is free. An abort is reported at the decision and its
//! locks are released by Unlock(abort) before the slot is free. Read-only
//! transactions run Dnl-RO: Gets, then validation of every key read, a
//! lone read too (the spec's `ValKeys`: a Get answers a locked key's
//! value, which a transaction already ordered before others may be about
//! to replace; the simulator's list-append check finds that cycle when a
//! lone read skips validation).
//!
//! The coordinator waits for every Lock reply before it decides (the spec
//! lets it abort at the first refusal and drop the rest): no Lock lands
//! after the Unlock(abort) meant to release it.

use super::{bit, send_each, Coordinator, Phase};
use crate::placement::Placement;
use crate::procedure::ProcedureRegistry;
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

    /// The procedure ran: Lock (TLA `Lock`) when it wrote, else Dnl-RO's
    /// validation of every key read.
    pub(super) fn dnl_after_body(&mut self, io: &mut Io, slot: usize) {
        let t = &mut self.txs[slot];
        let tx_id = TxId::new(io.node, slot, t.gen);
        if t.writes.is_empty() {
            return self.dnl_validate(io, slot, true);
        }
        t.phase = Phase::Lock;
        let shards = shards_of(t.plan.writes.iter(), &io.placement);
        let (plan, writes, reads) = (&t.plan, &t.writes, &t.reads);
        t.pending = send_each(io, |w, placement, p| {
            w.begin_lock(tx_id, shards);
            let mut any = false;
            for k in plan.writes.iter().filter(|k| placement.primary(k) == p) {
                w.push_version(k, reads.meta(k).map_or(0, |m| m.version()));
                any = true;
            }
            for (k, v) in writes.iter().filter(|(k, _)| placement.primary(k) == p) {
                w.push_item(k, Self::new_meta(reads, k).unwrap_or_default(), v);
            }
            any
        });
    }

    /// Read validation (TLA `ValidateReads`) at the primaries: the keys only
    /// read, or (`all`, Dnl-RO) every key read.
    fn dnl_validate(&mut self, io: &mut Io, slot: usize, all: bool) {
        let t = &mut self.txs[slot];
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
        if t.pending == 0 && all {
            self.dnl_report_commit(slot, true);
        } else if t.pending == 0 {
            self.dnl_replicate(io, slot);
        }
    }

    /// Every answer of a Dnl phase is in (`failed`: some refused, first
    /// reason `why`): the coordinator's `StepDone`.
    pub(super) fn dnl_end_phase(
        &mut self,
        io: &mut Io,
        procs: &ProcedureRegistry,
        slot: usize,
        failed: bool,
        why: TxStatus,
    ) {
        let t = &self.txs[slot];
        let read_only = t.writes.is_empty();
        match t.phase {
            Phase::Get | Phase::Lock if failed => {
                self.stats.execute_aborts += 1;
                self.dnl_abort(io, slot, why, &[]);
            }
            Phase::Get => self.run_body(io, procs, slot),
            Phase::Lock if t.plan.reads.is_empty() => self.dnl_replicate(io, slot),
            Phase::Lock => self.dnl_validate(io, slot, false),
            Phase::Validate if failed => {
                self.stats.validate_aborts += 1;
                self.dnl_abort(io, slot, why, &[]);
            }
            Phase::Validate if read_only => self.dnl_report_commit(slot, true),
            Phase::Validate => self.dnl_replicate(io, slot),
            Phase::Replicate => {
                if failed {
                    // Never refused for a rule of the protocol: a replica
                    // that cannot take it stops (its server's `fatal`).
                    self.stats.commit_refusals += 1;
                }
                self.dnl_unlock(io, slot, true);
            }
            Phase::Unlock if self.txs[slot].dnl_commit => {
                self.dnl_report_commit(slot, false);
                self.dnl_readable(io, slot);
            }
            Phase::Unlock | Phase::Readable => self.release(slot),
            _ => {}
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
                    w.push_item(k, Self::new_meta(reads, k).unwrap_or_default(), v);
                    any = true;
                }
            }
            any
        });
        t.logged = t.pending.sent();
        if t.pending == 0 {
            self.dnl_unlock(io, slot, true);
        }
    }

    /// Unlocking (TLA `Unlock`) at every lock holder: `commit` installs the
    /// values written there, else drops them; the locked keys not written
    /// are released.
    fn dnl_unlock(&mut self, io: &mut Io, slot: usize, commit: bool) {
        let t = &mut self.txs[slot];
        let tx_id = TxId::new(io.node, slot, t.gen);
        t.phase = Phase::Unlock;
        t.dnl_commit = commit;
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
                    w.push_item(k, Self::new_meta(reads, k).unwrap_or_default(), v);
                }
            }
            true
        });
        if t.pending == 0 && commit {
            self.dnl_report_commit(slot, false);
            self.dnl_readable(io, slot);
        } else if t.pending == 0 {
            self.release(slot);
        }
    }

    /// Readable (TLA `Readable`), once the commit is reported: every backup
    /// sent Replicate installs and raises READABLE; the slot is free after
    /// their acks.
    fn dnl_readable(&mut self, io: &mut Io, slot: usize) {
        let t = &mut self.txs[slot];
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
                    w.push_item(k, Self::new_meta(reads, k).unwrap_or_default(), v);
                }
            }
            true
        });
        if t.pending == 0 {
            self.release(slot);
        }
    }

    /// Reports the commit of `slot` (Dnl-4: after the Unlock acks; Dnl-RO:
    /// after validation); `free` frees the slot too (nothing more to send).
    fn dnl_report_commit(&mut self, slot: usize, free: bool) {
        self.stats.committed += 1;
        let mut result = self.spare_buffer();
        result.clear();
        result.extend_from_slice(&self.txs[slot].result);
        self.tell(slot, TxStatus::Committed, result);
        if free {
            self.release(slot);
        }
    }

    /// Aborts `slot`: reported at once (Dnl-4 reports aborts at the
    /// decision), then Unlock(abort) to every node that may hold its locks;
    /// the slot is free after their acks.
    pub(super) fn dnl_abort(&mut self, io: &mut Io, slot: usize, status: TxStatus, why: &[u8]) {
        self.tell(slot, status, why.to_vec());
        if self.txs[slot].locked == 0 {
            return self.release(slot);
        }
        self.dnl_unlock(io, slot, false);
    }
}

/// The shards of `keys`.
fn shards_of<'a>(keys: impl Iterator<Item = &'a splitkv_layout::Key>, p: &Placement) -> NodeMask {
    keys.fold(NodeMask::EMPTY, |m, k| m.with(p.shard(k)))
}
