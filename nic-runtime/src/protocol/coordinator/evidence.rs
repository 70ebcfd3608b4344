//! What a surviving coordinator reports at an epoch change (crash
//! recovery, Xenic §4.2.1): one [`CoordEvidence`] per transaction in flight,
//! and how it ends the transactions recovery decided.

use super::{bit, Coordinator, Phase};
use crate::placement::Placement;
use crate::protocol::skeleton::{Decision, Evidence, Row};
use crate::protocol::Io;
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::wire::{CoordEvidence, CoordOutcome, CoordPhase, NodeId, NodeMask};
use splitkv_layout::TxId;

impl Coordinator {
    /// Appends one entry per transaction in flight at node `node` to `out`
    /// (at most [`TX_INFLIGHT_MAX`](super::TX_INFLIGHT_MAX)): its phase, its
    /// own decision (commit once every LOG was acknowledged, i.e. in the
    /// COMMIT phase; abort in round 1 of an abort after LOG, reported as
    /// phase Log; otherwise undecided: other aborted transactions have left
    /// their slot), whether a decision was reported to the client (an
    /// "unknown outcome" is not one), and the shards it writes.
    pub fn evidence(&self, node: NodeId, placement: &Placement, out: &mut Vec<CoordEvidence>) {
        for (slot, t) in self.txs.iter().enumerate() {
            let phase = match t.phase {
                Phase::Free => continue,
                Phase::Execute => CoordPhase::Execute,
                Phase::Validate => CoordPhase::Validate,
                Phase::Log | Phase::AbortLog => CoordPhase::Log,
                Phase::Commit => CoordPhase::Commit,
                Phase::Get => CoordPhase::Get,
                Phase::Lock => CoordPhase::Lock,
                Phase::Replicate => CoordPhase::Replicate,
                Phase::Unlock | Phase::Readable => CoordPhase::Unlock,
            };
            let (outcome, write_shards) = match self.row {
                Some(row) => (dnl_outcome(t), dnl_asked_shards(row, t, placement)),
                None => {
                    let outcome = match t.phase {
                        Phase::Commit => CoordOutcome::Commit,
                        Phase::AbortLog => CoordOutcome::Abort,
                        _ => CoordOutcome::Undecided,
                    };
                    let shards = t.plan.writes.iter();
                    (
                        outcome,
                        shards.fold(NodeMask::EMPTY, |m, k| m.with(placement.shard(k))),
                    )
                }
            };
            out.push(CoordEvidence {
                tx_id: TxId::new(node, slot, t.gen),
                phase,
                outcome,
                reported: matches!(t.told, Some(s) if s != TxStatus::Unknown),
                write_shards,
            });
        }
    }
}

/// A Dnl transaction's outcome for recovery (TLA `Known`): an abort
/// decided stands; a commit only once durable, past its row's last step
/// before Unlocking (Dnl-4/2: the Replicate acks, Dnl-1: the Lock acks),
/// where every replica holds what its rule needs; before that the records
/// decide (a commit not durable was not reported).
fn dnl_outcome(t: &super::TxCtx) -> CoordOutcome {
    match (t.dnl_decision, t.phase) {
        (Some(Decision::Abort), _) => CoordOutcome::Abort,
        (Some(Decision::Commit), Phase::Unlock | Phase::Readable) => CoordOutcome::Commit,
        _ => CoordOutcome::Undecided,
    }
}

/// The shards a Dnl transaction's recovery rule asks about, as its Lock
/// and Replicate say: the shards it writes (Dnl-4/2, `dnl4::decide`), or
/// every shard it locks (Dnl-1, `dnl1::decide`).
pub(super) fn dnl_asked_shards(row: &Row, t: &super::TxCtx, placement: &Placement) -> NodeMask {
    let shards = |m: NodeMask, k: &splitkv_layout::Key| m.with(placement.shard(k));
    match row.evidence {
        Evidence::Records => t
            .writes
            .iter()
            .map(|(k, _)| k)
            .fold(NodeMask::EMPTY, shards),
        Evidence::AllLocked => {
            let locked = t.plan.writes.iter();
            let locked = locked.chain(t.plan.reads.iter().filter(|_| row.lock_reads));
            locked.fold(NodeMask::EMPTY, shards)
        }
    }
}

impl Coordinator {
    /// Crash recovery decided `tx_id`, which this coordinator still holds
    /// (every live node recorded the decision before this is
    /// called). Commit: the replicas' recovery commits released the locks of
    /// the written keys, so only the keys locked and not written are
    /// released here (an ABORT naming them, as at a normal commit). Abort:
    /// an ABORT goes to every primary of the write set and every replica
    /// sent the LOG (their recorded decision makes it a no-op there). The
    /// client hears [`TxStatus::Committed`] or [`TxStatus::Unavailable`]
    /// unless it was told already (an "unknown outcome" stays the only
    /// answer), and the slot is freed. Returns whether `tx_id` was held.
    pub fn finish_recovered(&mut self, io: &mut Io, tx_id: TxId, commit: bool) -> bool {
        let Some(slot) = self.lookup(io.node, tx_id) else {
            return false;
        };
        self.stats.recovered += 1;
        if self.row.is_some() {
            // Every replica holding its records applied the decision from
            // them (`server/dnl_recovery.rs`), and a Lock without records
            // was dropped: nothing more to send.
            let t = &self.txs[slot];
            let (status, result) = if commit {
                (TxStatus::Committed, t.result.clone())
            } else {
                (TxStatus::Unavailable, b"aborted by crash recovery".to_vec())
            };
            self.tell(slot, status, result);
            self.release(slot);
            return true;
        }
        if !commit {
            // An EXECUTE may still be on its way to any primary of the
            // write set: the ABORT follows it in the same session (and a
            // later copy is refused there as late).
            let t = &mut self.txs[slot];
            let placement = io.placement;
            t.locked |= t
                .plan
                .writes
                .iter()
                .fold(0, |m, k| m | bit(placement.primary(k)));
            let why = b"aborted by crash recovery";
            self.abort(io, slot, TxStatus::Unavailable, why);
            return true;
        }
        let t = &mut self.txs[slot];
        let (locked, plan, writes) = (t.locked, &t.plan, &t.writes);
        super::commit::unlock_unwritten(io, tx_id, locked, plan, writes);
        let result = t.result.clone();
        self.tell(slot, TxStatus::Committed, result);
        self.release(slot);
        true
    }
}

impl Coordinator {
    /// Counts a response dropped during a recovery epoch (the runtime
    /// hands none to [`Coordinator::on_response`] then).
    pub fn count_frozen_response(&mut self) {
        self.stats.frozen_responses += 1;
    }
}
