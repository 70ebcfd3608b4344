//! What this node recorded for a recovery it has not resumed from yet
//! (an abandoned recovery): kept across abandoned epochs and added to the
//! evidence of the next one, so that a decision one node already recorded is
//! the decision every later epoch makes (`tla/XenicOCCMsgs.tla`,
//! `KeepRecovered`; the broken variant `XenicForgetRecovered.cfg` violates
//! `DecisionRecordsAgree`).
//!
//! Why the server's evidence alone is not enough: the machine relies on it
//! for the decision records of failed coordinators' transactions only (the
//! runtime's server reports every decision record its per-slot table holds,
//! the newest per coordinator slot, which a later transaction of that slot
//! replaces; the TLA+ model's servers report only the failed
//! coordinators'), and the coordinator reports a transaction recovery
//! decided as undecided until the decision's `Resume`. So when a leader decides a live coordinator's
//! transaction (say commit, by rule 4), a replica records the COMMIT, and
//! the leader crashes before `Resume`, the next epoch's leader sees neither
//! the COMMIT record nor the LOG it replaced, and aborts what a replica has
//! applied. Two facts close this:
//! - every COMMIT or ABORT record this node appended for a recovery is
//!   reported until it resumes (a replica that got the decisions while the
//!   coordinator did not);
//! - every decision of a transaction this node coordinates is reported as
//!   its coordinator's outcome until it resumes (the coordinator got the
//!   decisions and the replicas resumed, but the `Resume` to the
//!   coordinator was lost with its leader).
//!
//! Both are needed: the three-node model never separates them (there every
//! coordinator replicates what it writes), `tests/recovery_machine.rs` does.
//!
//! A third fact, for a NIC runtime that restarted alone (`recovery::restart`):
//! its rebuild decides the transactions its coordinator lost and sends the
//! decisions to their replicas, but its coordinator no longer holds them, so
//! a recovery epoch that begins before every replica took those decisions
//! would see the coordinator live and silent and abort by the leader's
//! "forgot" rule what some replicas committed (chaos Smallbank seed 135 of
//! 5 nodes). Every such decision is reported as its coordinator's outcome
//! until this node resumes.

use splitkv_layout::TxId;
use std::collections::{BTreeMap, BTreeSet};

use splitkv_layout::wire::{
    CoordEvidence, CoordOutcome, CoordPhase, Decision, NodeId, NodeMask, RecordEvidence, RecordKind,
};

use super::types::LocalEvidence;

/// Mutation switch `forget_recovered_records`: the decision records a
/// recovery appended are not reported again (the first fact of the module
/// docs). Killed by `tests/recovery_abandoned.rs`. Declared in `Cargo.toml`
/// check-cfg.
const FORGET_RECOVERED_RECORDS: bool = cfg!(splitkv_mutation = "forget_recovered_records");

/// Mutation switch `forget_recovered_outcome`: a coordinator's recorded
/// decisions are not reported as its outcome (the second fact). Killed by
/// `tests/recovery_abandoned.rs`. Declared in `Cargo.toml` check-cfg.
const FORGET_RECOVERED_OUTCOME: bool = cfg!(splitkv_mutation = "forget_recovered_outcome");

/// The decisions this node recorded since it last resumed.
#[derive(Debug, Clone, Default)]
pub(super) struct Unresumed {
    /// Decision records appended here, by `(transaction, shard)`.
    records: BTreeMap<(TxId, NodeId), RecordEvidence>,
    /// Decisions of transactions this node coordinates, by transaction.
    coordinated: BTreeMap<TxId, bool>,
    /// Decisions this node's rebuild made of the transactions its
    /// coordinator lost in a NIC restart: (written shards, commit), by
    /// transaction (at most [`LOST_DECISIONS_MAX`]).
    lost: BTreeMap<TxId, (NodeMask, bool)>,
}

/// The coordinator's report of `tx_id`, a transaction it lost in a NIC
/// restart whose outcome it learned since (`commit` or abort; writing
/// `write_shards`): what its rebuild decided, or a COMMIT record a replica
/// reported to the rebuild (`recovery::restart`).
pub(crate) fn lost_outcome(tx_id: TxId, write_shards: NodeMask, commit: bool) -> CoordEvidence {
    CoordEvidence {
        tx_id,
        phase: if commit {
            CoordPhase::Commit
        } else {
            CoordPhase::Log
        },
        outcome: if commit {
            CoordOutcome::Commit
        } else {
            CoordOutcome::Abort
        },
        reported: false,
        write_shards,
    }
}

/// Most rebuild decisions of lost transactions kept for the next epoch's
/// evidence (one per coordinator slot of the restarted node, twice over).
pub(super) const LOST_DECISIONS_MAX: usize = 2 * crate::protocol::coordinator::TX_INFLIGHT_MAX;

impl Unresumed {
    /// This node recorded decision `d`: `pending` are its LOG records of
    /// `d.tx_id` (one per shard) the decision turned into COMMIT or ABORT
    /// records, and `coordinates` says whether this node coordinates
    /// `d.tx_id`.
    pub(super) fn record(&mut self, d: Decision, pending: &[RecordEvidence], coordinates: bool) {
        let kind = if d.commit {
            RecordKind::Commit
        } else {
            RecordKind::Abort
        };
        for r in pending {
            let decided = RecordEvidence { kind, ..*r };
            self.records.insert((r.tx_id, r.shard), decided);
        }
        if coordinates {
            self.coordinated.insert(d.tx_id, d.commit);
        }
    }

    /// This node's rebuild decided `tx_id`, which its coordinator lost in a
    /// NIC restart (module docs, third fact). Returns false (and keeps
    /// nothing) past [`LOST_DECISIONS_MAX`].
    pub(super) fn record_lost(
        &mut self,
        tx_id: TxId,
        write_shards: NodeMask,
        commit: bool,
    ) -> bool {
        if self.lost.len() >= LOST_DECISIONS_MAX && !self.lost.contains_key(&tx_id) {
            return false;
        }
        self.lost.insert(tx_id, (write_shards, commit));
        true
    }

    /// Adds what was recorded to `local`, gathered for a new epoch: a
    /// coordinated transaction still undecided there takes the recorded
    /// decision as its outcome, and each decision record is reported unless
    /// `local` reports that record already.
    pub(super) fn add_to(&self, local: &mut LocalEvidence) {
        for c in local
            .coordinated
            .iter_mut()
            .filter(|_| !FORGET_RECOVERED_OUTCOME)
        {
            if let (CoordOutcome::Undecided, Some(&commit)) =
                (c.outcome, self.coordinated.get(&c.tx_id))
            {
                c.outcome = if commit {
                    CoordOutcome::Commit
                } else {
                    CoordOutcome::Abort
                };
            }
        }
        let known: BTreeSet<TxId> = local.coordinated.iter().map(|c| c.tx_id).collect();
        for (&tx_id, &(write_shards, commit)) in &self.lost {
            if !known.contains(&tx_id) {
                local
                    .coordinated
                    .push(lost_outcome(tx_id, write_shards, commit));
            }
        }
        let reported: BTreeSet<(TxId, NodeId, u8)> = local
            .records
            .iter()
            .map(|l| (l.tx_id, l.shard, l.kind as u8))
            .collect();
        let missing = self
            .records
            .values()
            .filter(|_| !FORGET_RECOVERED_RECORDS)
            .filter(|r| !reported.contains(&(r.tx_id, r.shard, r.kind as u8)));
        local.records.extend(missing);
    }

    /// The node resumed: every live node recorded the decisions.
    pub(super) fn clear(&mut self) {
        self.records.clear();
        self.coordinated.clear();
        self.lost.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rebuild_decisions_are_reported_as_the_coordinators_outcome_until_resume() {
        let mut u = Unresumed::default();
        let (t7, t8) = (TxId::from_bits(7), TxId::from_bits(8));
        assert!(u.record_lost(t7, NodeMask(0b110), true));
        assert!(u.record_lost(t8, NodeMask(0b010), false));
        let mut local = LocalEvidence::default();
        // Transaction 8 is still in the coordinator (a newer report of it).
        local.coordinated.push(CoordEvidence {
            tx_id: t8,
            phase: CoordPhase::Log,
            outcome: CoordOutcome::Undecided,
            reported: false,
            write_shards: NodeMask(0b010),
        });
        u.add_to(&mut local);
        let got: Vec<_> = local
            .coordinated
            .iter()
            .map(|c| (c.tx_id, c.outcome))
            .collect();
        assert_eq!(
            got,
            vec![(t8, CoordOutcome::Undecided), (t7, CoordOutcome::Commit)]
        );
        assert_eq!(local.coordinated[1].write_shards, NodeMask(0b110));
        u.clear();
        let mut after = LocalEvidence::default();
        u.add_to(&mut after);
        assert!(after.coordinated.is_empty(), "resumed: nothing reported");
    }

    #[test]
    fn rebuild_decisions_are_bounded() {
        let mut u = Unresumed::default();
        for tx in 0..LOST_DECISIONS_MAX as u64 {
            assert!(u.record_lost(TxId::from_bits(tx), NodeMask(1), true));
        }
        assert!(!u.record_lost(TxId::from_bits(u64::MAX), NodeMask(1), true));
        assert!(
            u.record_lost(TxId::from_bits(0), NodeMask(1), false),
            "an update is kept"
        );
    }
}
