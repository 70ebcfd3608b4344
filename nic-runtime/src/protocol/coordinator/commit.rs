//! Xenic §4.2 steps 4–6 at the coordinator: LOG to every replica of each
//! written key (the commit point), COMMIT to every replica once all
//! acknowledged, the report to the application, the abort that releases
//! locks and drops LOG records, and the two-round abort after LOG
//! (`abort_after_log`, then `abort_unlock`).

use super::{bit, send_each, Coordinator, Phase};
use crate::placement::Placement;
use crate::procedure::{ReadView, TxPlan, WriteSet};
use crate::protocol::{Io, ABORT_REPORT_EARLY, LOG_BACKUPS_ONLY};
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::wire::{BodyWriter, MsgKind, NodeId, NodeMask};
use splitkv_layout::TxId;

impl Coordinator {
    /// Step 4: send the write set to every replica of each written key,
    /// primary and backups (the commit point: before any COMMIT makes
    /// a write visible, its new value is on every replica). Replicas hold
    /// the records pending until the decision.
    pub(super) fn log(&mut self, io: &mut Io, slot: usize) {
        let t = &mut self.txs[slot];
        if t.writes.is_empty() {
            // Nothing to replicate: release any write locks and report.
            return self.commit(io, slot);
        }
        let tx_id = TxId::new(io.node, slot, t.gen);
        t.phase = Phase::Log;
        let (writes, reads) = (&t.writes, &t.reads);
        let write_shards = write_shards(writes, &io.placement);
        let mut logged = 0;
        t.pending = send_each(io, |w, placement, b| {
            let any = write_log(w, placement, b, tx_id, write_shards, writes, reads);
            if any {
                logged |= bit(b);
            }
            any
        });
        t.logged = logged;
        if t.pending == 0 {
            self.commit(io, slot);
        }
    }

    /// The LOG the replicas of `refusers` (a mask by node id) answered
    /// [`ReplyStatus::Unavailable`]: their NIC runtime restarted and lost it
    /// before it reached their host log (a rebuilding node answers so for a
    /// LOG it does not hold, `crate::recovery::restart`). They are live
    /// replicas that log it once they serve again, so it goes to them again,
    /// like a retransmission: the phase keeps its start time (its deadline
    /// still bounds the wait) and the other replicas' answers stand.
    /// Aborting instead would take two rounds (`abort_after_log`).
    pub(super) fn log_again(&mut self, io: &mut Io, slot: usize, refusers: u32) {
        self.stats.log_resends += 1;
        let t = &mut self.txs[slot];
        let tx_id = TxId::new(io.node, slot, t.gen);
        t.answered = t.pending.owe_again(refusers);
        let (writes, reads) = (&t.writes, &t.reads);
        let write_shards = write_shards(writes, &io.placement);
        send_each(io, |w, placement, b| {
            refusers & bit(b) != 0 && write_log(w, placement, b, tx_id, write_shards, writes, reads)
        });
    }

    /// Steps 5–6: the transaction is committed (every replica of every
    /// written key acknowledged its LOG); COMMIT goes to every replica sent
    /// the LOG. A primary's COMMIT carries the writes it is primary of, to
    /// install in its NIC index before it unlocks; a backup's carries none
    /// (its host applies the pending LOG records). Then report (see `report`).
    pub(super) fn commit(&mut self, io: &mut Io, slot: usize) {
        self.stats.committed += 1;
        let t = &mut self.txs[slot];
        let tx_id = TxId::new(io.node, slot, t.gen);
        t.phase = Phase::Commit;
        let (locked, logged, plan, writes, reads) =
            (t.locked, t.logged, &t.plan, &t.writes, &t.reads);
        t.pending = send_each(io, |w, placement, p| {
            w.begin_items(MsgKind::Commit, tx_id);
            let mut any = false;
            for (k, v) in writes.iter().filter(|(k, _)| placement.primary(k) == p) {
                w.push_item(k, Self::new_meta(reads, writes, k).unwrap_or_default(), v);
                any = true;
            }
            if LOG_BACKUPS_ONLY {
                locked & bit(p) != 0 && any
            } else {
                logged & bit(p) != 0
            }
        });
        // Locked but not written: just unlock (no answer expected). Sent
        // after the COMMIT to the same node, so it arrives after it.
        unlock_unwritten(io, tx_id, locked, plan, writes);
        if t.pending == 0 {
            self.report(slot, TxStatus::Committed);
        }
    }

    /// The outcome goes to the application only once every primary acknowledged
    /// COMMIT: reporting at the LOG acknowledgements (Xenic §4.2 step 6 read
    /// literally) can lose a reported commit when the coordinator is also the
    /// only backup of a key and crashes — the primary then holds just a lock.
    /// TLA+ (`tla/XenicOCC.tla`, model `XenicEarlyReport`) finds that trace.
    pub(super) fn report(&mut self, slot: usize, status: TxStatus) {
        let t = &mut self.txs[slot];
        let mut result = self.spare.pop().unwrap_or_default();
        result.clear();
        result.extend_from_slice(&t.result);
        self.tell(slot, status, result);
        self.release(slot);
    }

    /// Abort: release the locks taken, drop the LOG records sent (an ABORT
    /// goes to every replica that was sent the LOG), and report `status`.
    pub(super) fn abort(&mut self, io: &mut Io, slot: usize, status: TxStatus, why: &[u8]) {
        let t = &mut self.txs[slot];
        let tx_id = TxId::new(io.node, slot, t.gen);
        let (locked, logged, plan) = (t.locked, t.logged, &t.plan);
        send_each(io, |w, placement, p| {
            w.begin_abort(tx_id);
            for k in plan.writes.iter().filter(|k| placement.primary(k) == p) {
                w.push_abort_key(k);
            }
            (locked | logged) & bit(p) != 0
        });
        self.tell(slot, status, why.to_vec());
        self.release(slot);
    }

    /// Round 1 of an abort after LOG (Xenic §4.2.1; `tla/XenicOCCMsgs.tla`,
    /// `AbortMode = "tworound"`, `TimeoutAbort` in Log): the transaction is
    /// decided aborted, and [`MsgKind::AbortLog`] goes to every replica sent
    /// its LOG and not excluded (each may hold the LOG record, or still
    /// receive it). Nothing is unlocked and nothing is reported yet: the
    /// client hears `status` (with `why`), and the primaries' locks are
    /// released (`abort_unlock`), only once every one of them acknowledged
    /// (or was excluded by a configuration), resent at the phase deadline
    /// (the `deadline` module).
    ///
    /// Why two rounds: a refusing replica may stop (`Server::fatal`) and be
    /// excluded; if this coordinator then crashed before its ABORTs landed,
    /// the survivors would all hold the LOG records and recovery would
    /// commit (rule 4 of `crate::recovery::decide`) a transaction reported
    /// aborted (`XenicAbortReportEarly.cfg` fails), or, with the locks
    /// released in round 1, one whose keys others wrote meanwhile
    /// (`XenicAbortUnlockEarly.cfg` fails). Once every LOG holder recorded
    /// the abort, any surviving one makes recovery abort (rule 3), and a
    /// live coordinator's own report says abort (rule 1).
    pub(super) fn abort_after_log(
        &mut self,
        io: &mut Io,
        slot: usize,
        status: TxStatus,
        why: &'static [u8],
    ) {
        self.stats.aborts_after_log += 1;
        let dead = self.excluded_peers();
        let t = &mut self.txs[slot];
        let tx_id = TxId::new(io.node, slot, t.gen);
        t.phase = Phase::AbortLog;
        (t.answered, t.failed, t.refusers) = (0, false, 0);
        t.abort = (status, why);
        t.abort_resends = 0;
        t.logged &= !dead;
        t.locked &= !dead;
        let holders = t.logged;
        if ABORT_REPORT_EARLY {
            self.tell(slot, status, why.to_vec());
        }
        let t = &mut self.txs[slot];
        t.pending = send_each(io, |w, _, p| {
            let to = holders & bit(p) != 0;
            if to {
                w.abort_log(tx_id);
            }
            to
        });
        if t.pending == 0 {
            self.abort_unlock(io, slot);
        }
    }

    /// Sends the ABORT after LOG of `slot` again to the nodes of `nodes` (a
    /// mask by node id; those that have not acknowledged), counted.
    pub(super) fn abort_log_again(&mut self, io: &mut Io, slot: usize, nodes: u32) {
        let t = &mut self.txs[slot];
        let tx_id = TxId::new(io.node, slot, t.gen);
        t.abort_resends = t.abort_resends.saturating_add(1);
        t.pending.restart(io.now);
        let sent = send_each(io, |w, _, p| {
            let to = nodes & bit(p) != 0;
            if to {
                w.abort_log(tx_id);
            }
            to
        });
        self.stats.abort_log_resends += u64::from(sent.sent().count_ones());
    }

    /// Round 2 of an abort after LOG: every LOG holder not excluded
    /// recorded the abort, so the primaries' locks are released (the plain
    /// ABORT, as `tla/XenicOCCMsgs.tla`'s `AbortL`), the client hears the
    /// abort, and the slot is freed.
    pub(super) fn abort_unlock(&mut self, io: &mut Io, slot: usize) {
        let t = &mut self.txs[slot];
        // Round 2 goes to the locked primaries only: the LOG holders
        // recorded the abort in round 1.
        t.logged = 0;
        let (status, why) = t.abort;
        self.abort(io, slot, status, why);
    }

    pub(super) fn release(&mut self, slot: usize) {
        self.txs[slot].phase = Phase::Free;
        self.free.push(slot);
    }
}

/// The shards `writes` writes (a LOG carries them: recovery's evidence).
fn write_shards(writes: &WriteSet, placement: &Placement) -> NodeMask {
    writes
        .iter()
        .fold(NodeMask::EMPTY, |m, (k, _)| m.with(placement.shard(k)))
}

/// Writes the LOG of `tx_id` for replica `b`: the items of `writes` it
/// replicates (primary or backup); false if it replicates none.
fn write_log(
    w: &mut BodyWriter,
    placement: &Placement,
    b: NodeId,
    tx_id: TxId,
    write_shards: NodeMask,
    writes: &WriteSet,
    reads: &ReadView,
) -> bool {
    w.begin_log(tx_id, write_shards);
    let mut any = false;
    for (k, v) in writes.iter() {
        // Mutation switch (the commit point before it moved to every
        // replica's LOG acknowledgement): LOG at the backups only.
        let primary = !LOG_BACKUPS_ONLY && placement.primary(k) == b;
        if primary || placement.backups(k).any(|n| n == b) {
            w.push_item(
                k,
                Coordinator::new_meta(reads, writes, k).unwrap_or_default(),
                v,
            );
            any = true;
        }
    }
    any
}

/// The ABORT that only unlocks, at each primary in `locked` (a mask by
/// node), the keys of `plan`'s write set the procedure did not write
/// (`writes`); no answer is expected. Sent after a COMMIT to the same node,
/// so it arrives after it.
pub(super) fn unlock_unwritten(
    io: &mut Io,
    tx_id: TxId,
    locked: u32,
    plan: &TxPlan,
    writes: &WriteSet,
) {
    send_each(io, |w, placement, p| {
        w.begin_abort(tx_id);
        let mut any = false;
        for k in plan.writes.iter().filter(|k| placement.primary(k) == p) {
            if writes.iter().all(|(written, _)| written != k) {
                w.push_abort_key(k);
                any = true;
            }
        }
        locked & bit(p) != 0 && any
    });
}
