//! What a surviving coordinator reports at an epoch change (issue 11
//! recovery, Xenic §4.2.1): one [`CoordEvidence`] per transaction in flight.

use super::{Coordinator, Phase};
use crate::placement::Placement;
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::wire::{CoordEvidence, CoordPhase, NodeId, NodeMask, Outcome};

impl Coordinator {
    /// Appends one entry per transaction in flight at node `node` to `out`
    /// (at most [`TX_INFLIGHT_MAX`](super::TX_INFLIGHT_MAX)): its phase, its
    /// own decision (commit once every LOG was acknowledged, i.e. in the
    /// COMMIT phase; otherwise undecided: aborted transactions have left
    /// their slot), whether a decision was reported to the client (an
    /// "unknown outcome" is not one), and the shards it writes.
    pub fn evidence(&self, node: NodeId, placement: &Placement, out: &mut Vec<CoordEvidence>) {
        for (slot, t) in self.txs.iter().enumerate() {
            let phase = match t.phase {
                Phase::Free => continue,
                Phase::Execute => CoordPhase::Execute,
                Phase::Validate => CoordPhase::Validate,
                Phase::Log => CoordPhase::Log,
                Phase::Commit => CoordPhase::Commit,
            };
            let outcome = if t.phase == Phase::Commit {
                Outcome::Commit
            } else {
                Outcome::Undecided
            };
            let write_shards = t
                .plan
                .writes
                .iter()
                .fold(NodeMask::EMPTY, |m, k| m.with(placement.shard(k)));
            out.push(CoordEvidence {
                tx_id: Coordinator::tx_id(node, slot, t.gen),
                phase,
                outcome,
                reported: matches!(t.told, Some(s) if s != TxStatus::Unknown),
                write_shards,
            });
        }
    }
}
