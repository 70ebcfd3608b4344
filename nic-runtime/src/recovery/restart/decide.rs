//! Steps 5–6 of `recovery::restart`'s docs: the restarted node decides the
//! transactions it coordinated and lost, and serves again once its host has
//! applied every decision.

use crate::recovery::decide::{decide_by_records, LogQuorum, RecoveryRule};
use crate::runtime::NicRuntime;
use crate::{Nanos, Placement, PlacementView};
use splitkv_layout::wire::REBUILD_DECISIONS_PER_MESSAGE_MAX;
use splitkv_layout::wire::{Decision, NodeId, NodeMask, RebuildMsg, RecordEvidence};
use splitkv_layout::TxId;

impl NicRuntime {
    /// Restarted side (steps 5–6): decide once every report is in; serve
    /// once the decisions are appended and applied by the host.
    pub(super) fn advance_rebuild(&mut self, now: Nanos) -> bool {
        let Some(r) = self.restart.rebuild.as_mut() else {
            return false;
        };
        if r.waiting_for != 0 || self.restart.stats.records_dropped > 0 {
            return false;
        }
        if !r.decided {
            r.decided = true;
            let records = std::mem::take(&mut r.records);
            let (restart, at_restart) = (r.restart, r.recovery_at_restart);
            self.decide_lost(restart, at_restart, records);
            return true;
        }
        if self.server.decisions_in_flight() > 0 || self.host_applied < self.server.appended_tail()
        {
            return false;
        }
        self.restart.rebuild = None;
        self.restart.stats.rebuilds_done += 1;
        self.restart.stats.last_serving_ns = now;
        true
    }

    /// Step 5: decides this node's lost transactions from every replica's
    /// records (the peers' and its own) and sends each decision to the
    /// peers holding records of it.
    ///
    /// A node that rejoined and is still renewed decides none:
    /// transaction ids name the node, not its process, so the records
    /// reported of "its" transactions are its previous process's, which
    /// crash recovery decides in the epoch that admitted the rejoin (by its
    /// own rule; deciding them here as well could split one transaction
    /// into a commit at some replicas and an abort at others). The new
    /// process coordinates no transaction until it caught up.
    ///
    /// Nor does a rebuild a recovery epoch overtook: one under way at the
    /// restart (`at_restart`: epochs begun then, and whether one was under
    /// way), or begun since. Every replica reported its records of the lost
    /// transactions to that epoch's leader, whose decisions reach every
    /// holder, while this rebuild's would race them (chaos Smallbank seed
    /// 135 of 5 nodes: this rebuild committed at two replicas what the
    /// leader aborted at the third).
    fn decide_lost(
        &mut self,
        restart: u32,
        at_restart: (u64, bool),
        mut records: Vec<(NodeId, RecordEvidence)>,
    ) {
        let me = self.io.node;
        let (begun, during) = at_restart;
        let overtaken = during
            || self.recovery.paused()
            || self.recovery.machine().stats().epochs_begun != begun;
        if overtaken || self.recovery.machine().view().renewed().contains(me) {
            self.restart.stats.left_to_recovery += distinct_txs(&records);
            return;
        }
        let mut own = Vec::new();
        self.server.records_of(me, &mut own);
        records.extend(own.into_iter().map(|r| (me, r)));
        records.sort_by_key(|(_, r)| r.tx_id);
        let placement = self.io.placement;
        let nodes = placement.nodes();
        let mut out: Vec<Vec<Decision>> = vec![Vec::new(); nodes];
        let mut i = 0;
        while i < records.len() {
            let tx_id = records[i].1.tx_id;
            let j = i + records[i..]
                .iter()
                .take_while(|(_, r)| r.tx_id == tx_id)
                .count();
            let recs = &records[i..j];
            i = j;
            let commit = commit_point_reached(&placement, recs);
            if commit {
                self.restart.stats.decided_commit += 1;
            } else {
                self.restart.stats.decided_abort += 1;
            }
            self.server
                .apply_recovered(&mut self.io, &mut self.index, tx_id, commit);
            // Reported as this coordinator's outcome until it resumes, so a
            // recovery epoch that begins before every holder took the
            // decision makes the same one (`recovery/epoch/unresumed.rs`).
            let write_shards = recs.iter().fold(NodeMask::EMPTY, |m, (_, r)| {
                NodeMask(m.0 | r.write_shards.0).with(r.shard)
            });
            if !self
                .recovery
                .note_rebuild_decision(tx_id, write_shards, commit)
            {
                self.restart.stats.decisions_unkept += 1;
            }
            for p in 0..nodes as NodeId {
                if p != me && recs.iter().any(|(h, _)| *h == p) {
                    out[p as usize].push(Decision { tx_id, commit });
                }
            }
        }
        for (p, decisions) in out.into_iter().enumerate() {
            for chunk in decisions.chunks(REBUILD_DECISIONS_PER_MESSAGE_MAX) {
                let msg = RebuildMsg::Decisions {
                    restart,
                    decisions: chunk.to_vec(),
                };
                self.restart.send(&mut self.io.net, p as NodeId, &msg);
            }
        }
    }
}

/// How many distinct transactions `records` hold.
fn distinct_txs(records: &[(NodeId, RecordEvidence)]) -> u64 {
    let mut ids: Vec<TxId> = records.iter().map(|(_, r)| r.tx_id).collect();
    ids.sort_unstable();
    ids.dedup();
    ids.len() as u64
}

/// The commit-point rule for a transaction its coordinator lost (step 5),
/// over `recs`, the records every live replica holds of it as `(holder,
/// record)`: committed if some replica holds its COMMIT record (a COMMIT is
/// sent only past the commit point), or every live replica of every shard it
/// writes holds its LOG or COMMIT for that shard (the commit point was
/// reached: its coordinator may have sent COMMIT); otherwise aborted (some
/// replica lacks the LOG, or one holds an ABORT record: no COMMIT was sent).
///
/// This is crash recovery's rule, rules 2–5 of `crate::recovery::decide`
/// ([`decide_by_records`]), over `placement`'s live nodes and replica
/// order; rule 1 (a live coordinator's decision) and the leader's
/// "forgotten by a live coordinator" rule do not apply: the coordinator is
/// the restarted node, and it lost the transaction. A placement whose view
/// cannot be built (every node failed: impossible while this node runs)
/// decides abort.
pub fn commit_point_reached(placement: &Placement, recs: &[(NodeId, RecordEvidence)]) -> bool {
    match PlacementView::with_roles(*placement, placement.failed(), placement.roles()) {
        // Xenic OCC's rule: a NIC runtime restarts alone only under Xenic
        // OCC so far (the Dnl protocols refuse NIC-only faults).
        Ok(view) => {
            let (quorum, rule) = (LogQuorum::EveryMember, RecoveryRule::XenicOcc);
            decide_by_records(&view, recs.iter().copied(), quorum, rule).0
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use splitkv_layout::wire::{NodeMask, RecordKind};

    fn rec(tx_id: TxId, shard: NodeId, kind: RecordKind, writes: u16) -> RecordEvidence {
        RecordEvidence {
            tx_id,
            shard,
            kind,
            write_shards: NodeMask(writes),
        }
    }

    #[test]
    fn the_commit_point_needs_every_live_replica_of_every_written_shard() {
        // 4 nodes, replication 2: shard 1 on nodes 1, 2; shard 3 on 3, 0.
        let p = Placement::new(4, 2).unwrap();
        let log = |h, s| (h, rec(TxId::from_bits(7), s, RecordKind::Log, 0b1010));
        let all = [log(1, 1), log(2, 1), log(3, 3), log(0, 3)];
        assert!(commit_point_reached(&p, &all));
        assert!(!commit_point_reached(&p, &all[..3]), "node 0 lacks the LOG");
        assert!(
            !commit_point_reached(&p, &all[1..]),
            "node 1 lacks the LOG of shard 1"
        );
        // A COMMIT anywhere: past the commit point.
        let c = [(2, rec(TxId::from_bits(7), 1, RecordKind::Commit, 0b1010))];
        assert!(commit_point_reached(&p, &c));
        // An ABORT anywhere: no COMMIT was sent.
        let mut a = all.to_vec();
        a[0].1.kind = RecordKind::Abort;
        assert!(!commit_point_reached(&p, &a));
        // A failed replica is not waited for.
        let failed = p.with_failed(NodeMask(1 << 0));
        assert!(commit_point_reached(&failed, &all[..3]));
    }
}
