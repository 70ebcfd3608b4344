//! Crash recovery's decision rule (Xenic §4.2.1, FaRM-style): from what the
//! surviving nodes report about one transaction, commit or abort it so that
//! no decision already reported to a client is contradicted.
//!
//! Rules, first match wins:
//! 1. a live coordinator that decided: its decision stands;
//! 2. some surviving replica holds a COMMIT record: commit (COMMIT is only
//!    sent after the commit point);
//! 3. some surviving replica holds an ABORT record: abort (ABORT after LOG is
//!    only sent once abort was decided);
//! 4. the transaction writes something, and *every surviving replica* of
//!    every shard it writes holds its LOG record (and each such shard has a
//!    surviving replica): commit (LOG is only sent after validation passed, so
//!    the transaction may have reached its commit point). In crash recovery
//!    only the caught-up replicas are asked: not a joining backup, nor a
//!    restarted member ([`LogQuorum`]);
//! 5. otherwise abort.
//!
//! Rules 2–5 are *the* commit-point rule over the replicas' records
//! ([`decide_by_records`]); a NIC runtime that restarted alone decides the
//! transactions it coordinated and lost by it too (`recovery/restart/decide.rs`),
//! without rule 1 and the leader's "forgot" rule: their coordinator is
//! that very node, and it lost them.
//!
//! Before rules 4 and 5, at the leader ([`TxEvidence::decide_tx`]): a
//! transaction whose coordinator ([`TxId::coordinator`]) is live and did not
//! report it, and of which no replica reported a decision record, is
//! aborted. A live coordinator reports every transaction it still holds, and
//! it lets one go only once decided and reported: a commit after every live
//! replica acknowledged its COMMIT (so no live replica still holds the LOG
//! pending), an abort after sending ABORT, which a replica may not have
//! taken before the epoch changed (packets of the old epoch are dropped).
//! Without this rule such a replica's pending LOG could be committed by
//! rule 4 after the client heard of the abort. Every replica reports the
//! decision records it holds (`Server::recovery_evidence`), and rules 2 and
//! 3 come first: a coordinator whose NIC restarted lost its transactions
//! without letting them go, and its COMMIT may have reached one replica
//! only, which must not be aborted at the others (chaos list-append seeds
//! 167 and 326 of 4 nodes; `tla/LostCoordinator.tla`).
//!
//! Rule 4 is stricter than "some surviving replica of each written shard
//! holds the LOG": with that weaker rule a surviving replica that never
//! received the LOG (the coordinator crashed while sending) would miss a
//! committed write, and a promoted primary would serve the old value; the
//! stricter rule needs no copying of records during recovery and still never
//! contradicts a reported commit, which needs every replica's LOG ack.
//!
//! Why a reported decision is never contradicted (replication `f + 1`, at
//! most `f` crashed nodes): a commit is reported only after every replica of
//! every written shard acknowledged LOG, so every surviving replica holds the
//! LOG (or its COMMIT), each written shard keeps one, and rule 4 (or 1, 2)
//! commits; no ABORT record exists. An abort is reported either before any
//! LOG was sent (no LOG, COMMIT or ABORT record exists, rule 4 fails) or after
//! the abort was decided *and every replica that holds the LOG acknowledged
//! the ABORT* (any surviving LOG holder then holds an ABORT record and rule 3
//! aborts, or a written shard has a surviving replica without the LOG, or
//! none at all, and rule 4 fails). The second condition matters: a coordinator
//! that reports an abort caused by one replica's LOG refusal before the other
//! LOG holders have its ABORT can be contradicted by rule 4 after it crashes
//! (`tests/recovery_decide.rs` keeps that counterexample).

use splitkv_layout::TxId;
use std::collections::BTreeMap;

use splitkv_layout::wire::{
    CoordEvidence, CoordOutcome, NodeId, NodeMask, RecordEvidence, RecordKind, MASK_NODES_MAX,
};

use crate::placement::PlacementView;

/// Everything the recovery leader learned about one transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxEvidence {
    /// The coordinator's report, if the coordinator survived and still knows
    /// the transaction.
    pub coordinator: Option<CoordEvidence>,
    /// Shards the transaction writes (union of every report).
    pub write_shards: NodeMask,
    /// Per shard, the surviving replicas that hold the transaction's LOG
    /// record (pending, or applied under a COMMIT record).
    pub log_holders: [NodeMask; MASK_NODES_MAX],
    /// Whether some surviving replica holds a COMMIT record.
    pub commit_record: bool,
    /// Whether some surviving replica holds an ABORT record.
    pub abort_record: bool,
}

/// Which rule decided a transaction (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecisionReason {
    /// Rule 1: the live coordinator had decided.
    CoordinatorDecided,
    /// Rule 2: a COMMIT record survived.
    CommitRecord,
    /// Rule 3: an ABORT record survived.
    AbortRecord,
    /// Rule 4: every surviving replica of every written shard holds the LOG.
    EveryReplicaLogged,
    /// Rule 5: a written shard has a surviving replica without the LOG, or
    /// no surviving replica, or nothing is written.
    NotLogged,
    /// The coordinator is live and no longer holds the transaction: it
    /// decided it, and only an abort can leave a LOG pending (module docs).
    CoordinatorForgot,
}

impl TxEvidence {
    /// Adds a live coordinator's report.
    pub fn add_coordinator(&mut self, c: CoordEvidence) {
        self.coordinator = Some(c);
        self.write_shards = NodeMask(self.write_shards.0 | c.write_shards.0);
    }

    /// Adds replica `holder`'s report of its record (`r.shard` must be below
    /// [`MASK_NODES_MAX`], as the wire decoder checks; others are ignored).
    pub fn add_record(&mut self, holder: NodeId, r: RecordEvidence) {
        let Some(held) = self.log_holders.get_mut(r.shard as usize) else {
            return;
        };
        self.write_shards = NodeMask(self.write_shards.0 | r.write_shards.0).with(r.shard);
        match r.kind {
            RecordKind::Log => *held = held.with(holder),
            RecordKind::Commit => {
                *held = held.with(holder);
                self.commit_record = true;
            }
            RecordKind::Abort => self.abort_record = true,
            // Dnl records: no server writes them until the Dnl protocols
            // run (their recovery rules come with them); as no record here,
            // they never make a commit.
            RecordKind::Lock | RecordKind::Repl => {}
        }
    }

    /// Whether every replica of every written shard that `quorum` names
    /// holds the LOG (and every written shard has a primary), in `view`.
    fn every_replica_logged(&self, view: &PlacementView, quorum: LogQuorum) -> bool {
        !self.write_shards.is_empty()
            && self.write_shards.iter().all(|s| {
                let asked = |n: NodeId| match quorum {
                    LogQuorum::CaughtUpMembers => {
                        !view.joining(s).contains(n) && !view.renewed().contains(n)
                    }
                    LogQuorum::EveryMember => true,
                };
                (s as usize) < view.placement().nodes()
                    && view.shard_primary(s).is_some()
                    && view
                        .live_replicas(s)
                        .filter(|&n| asked(n))
                        .all(|n| self.log_holders[s as usize].contains(n))
            })
    }

    /// The decision of transaction `tx_id` at the recovery leader: abort if
    /// its coordinator is live in `view` and did not report it (module
    /// docs), otherwise [`TxEvidence::decide`]. A coordinator being copied
    /// (a rejoined node) is a new incarnation: a transaction it did not report is
    /// its old incarnation's, decided by the evidence like a failed
    /// coordinator's (a replica may hold its COMMIT).
    ///
    /// Rule 4 asks the LOG of every live member of `view`; the recovery
    /// machine asks only the caught-up ones
    /// ([`TxEvidence::decide_tx_caught_up`]).
    pub fn decide_tx(&self, tx_id: TxId, view: &PlacementView) -> (bool, DecisionReason) {
        self.decide_tx_over(tx_id, view, LogQuorum::EveryMember)
    }

    /// [`TxEvidence::decide_tx`] with rule 4 asking the LOG of the live
    /// members of `view` that are caught up ([`LogQuorum::CaughtUpMembers`]):
    /// crash recovery's leader.
    pub fn decide_tx_caught_up(&self, tx_id: TxId, view: &PlacementView) -> (bool, DecisionReason) {
        self.decide_tx_over(tx_id, view, LogQuorum::CaughtUpMembers)
    }

    fn decide_tx_over(
        &self,
        tx_id: TxId,
        view: &PlacementView,
        quorum: LogQuorum,
    ) -> (bool, DecisionReason) {
        let coordinator = tx_id.coordinator();
        let renewed = view.renewed().contains(coordinator);
        // A decision record says what the coordinator decided (a COMMIT is
        // sent only past the commit point, an ABORT only once abort was
        // decided): rules 2 and 3 come first. Replicas report the decision
        // records of a live coordinator's transactions only when its NIC
        // restarted (it lost them, and its COMMIT may have reached one
        // replica only).
        let recorded = self.commit_record || self.abort_record;
        if self.coordinator.is_none() && view.is_live(coordinator) && !renewed && !recorded {
            return (false, DecisionReason::CoordinatorForgot);
        }
        self.decide_over(view, quorum)
    }

    /// The decision (`true` = commit) and the rule that made it, for the
    /// surviving nodes of `view` (rule 4 asking every live member).
    pub fn decide(&self, view: &PlacementView) -> (bool, DecisionReason) {
        self.decide_over(view, LogQuorum::EveryMember)
    }

    fn decide_over(&self, view: &PlacementView, quorum: LogQuorum) -> (bool, DecisionReason) {
        if let Some(c) = self.coordinator {
            match c.outcome {
                CoordOutcome::Commit => return (true, DecisionReason::CoordinatorDecided),
                CoordOutcome::Abort => return (false, DecisionReason::CoordinatorDecided),
                CoordOutcome::Undecided => {}
            }
        }
        if self.commit_record {
            return (true, DecisionReason::CommitRecord);
        }
        if self.abort_record {
            return (false, DecisionReason::AbortRecord);
        }
        if self.every_replica_logged(view, quorum) {
            return (true, DecisionReason::EveryReplicaLogged);
        }
        (false, DecisionReason::NotLogged)
    }
}

/// Whose LOG rule 4 asks for (as re-replication and rejoins change the replicas).
///
/// A transaction still undecided at a recovery epoch began at or after the
/// last epoch that resumed (every earlier one was decided in that epoch's
/// recovery), so its LOG went to the members of that epoch's view, and a
/// commit was reported only once each of them acknowledged it. In crash
/// recovery rule 4 asks the live members of the current view that are
/// caught up ([`LogQuorum::CaughtUpMembers`]). A *joining* backup — a
/// survivor chosen as a new backup in this very configuration, or one
/// whose copy is not done — may never have seen that LOG, and asking it
/// would abort a transaction that reached its commit point; no client heard
/// of that commit (a reported one leaves COMMIT records, which every
/// replica reports: rule 2), so asking it would be safe, only less live
/// (`tla/LogQuorum.tla`, model `LogQuorum_every`). Leaving it out loses
/// nothing, since every recovery epoch abandons the copies and the next
/// snapshot is taken after the decisions were applied at the primary. A *renewed* member (restarted since, [`PlacementView::renewed`])
/// lost its LOG records with its previous process. A caught-up member was a
/// member when the transaction ran: a node becomes one only by a caught-up
/// report of an epoch that resumed, after its recovery decided every
/// earlier transaction.
///
/// Asking the members of the view the *leader* last resumed in instead
/// (the rule before) depends on the leader's history: a restarted leader's
/// is the first configuration's, so it did not ask a survivor that had
/// since caught up as a shard's new backup, and committed a transaction
/// whose LOG that replica never took (rejoin Smallbank seed 282 of 5 nodes,
/// replication 3: a version behind its primary; `tla/LogQuorum.tla`, model
/// `LogQuorumLeaderView`, must fail).
///
/// A NIC runtime that restarted alone decides transactions of its current
/// epoch, which resumed with the current view: there every live member,
/// joining backups included, must hold the LOG ([`LogQuorum::EveryMember`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogQuorum {
    /// The live members of the view that are neither joining the shard nor
    /// renewed (crash recovery).
    CaughtUpMembers,
    /// Every live member, joining backups included (a NIC restart).
    EveryMember,
}

/// The commit-point rule over replicas' records alone (rules 2–5 of the
/// module docs), for a transaction whose coordinator lost it: `records` as
/// `(holder, record)` from every surviving replica that holds one, in
/// `view`, rule 4 asking the LOG of the replicas `quorum` names. Used by
/// crash recovery's leader (through [`TxEvidence::decide`]) and by a NIC
/// runtime rebuilding after a restart alone (`recovery/restart/decide.rs`),
/// so both apply one rule.
pub fn decide_by_records(
    view: &PlacementView,
    records: impl IntoIterator<Item = (NodeId, RecordEvidence)>,
    quorum: LogQuorum,
) -> (bool, DecisionReason) {
    let mut e = TxEvidence::default();
    for (holder, r) in records {
        e.add_record(holder, r);
    }
    e.decide_over(view, quorum)
}

/// The evidence of every transaction reported for one epoch, by transaction
/// id (ordered, so decisions come out in the same order on every run).
#[derive(Debug, Clone, Default)]
pub struct EvidenceSet {
    txs: BTreeMap<TxId, TxEvidence>,
}

impl EvidenceSet {
    /// An empty set.
    pub fn new() -> EvidenceSet {
        EvidenceSet::default()
    }

    /// Adds node `from`'s report; returns `false` when some transaction was
    /// left out because the set already holds `limit` transactions.
    pub fn add(
        &mut self,
        from: NodeId,
        coordinated: &[CoordEvidence],
        records: &[RecordEvidence],
        limit: usize,
    ) -> bool {
        let mut ok = true;
        for c in coordinated {
            ok &= self
                .entry(c.tx_id, limit)
                .map(|e| e.add_coordinator(*c))
                .is_some();
        }
        for r in records {
            ok &= self
                .entry(r.tx_id, limit)
                .map(|e| e.add_record(from, *r))
                .is_some();
        }
        ok
    }

    fn entry(&mut self, tx_id: TxId, limit: usize) -> Option<&mut TxEvidence> {
        if self.txs.len() >= limit && !self.txs.contains_key(&tx_id) {
            return None;
        }
        Some(self.txs.entry(tx_id).or_default())
    }

    /// Number of transactions.
    pub fn len(&self) -> usize {
        self.txs.len()
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.txs.is_empty()
    }

    /// The evidence for `tx_id`.
    pub fn get(&self, tx_id: TxId) -> Option<&TxEvidence> {
        self.txs.get(&tx_id)
    }

    /// Every transaction's decision in `view`, ascending by id.
    pub fn decide_all<'a>(
        &'a self,
        view: &'a PlacementView,
    ) -> impl Iterator<Item = (TxId, bool)> + 'a {
        self.txs
            .iter()
            .map(move |(&id, e)| (id, e.decide_tx(id, view).0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::Placement;
    use splitkv_layout::wire::CoordPhase;

    #[test]
    fn a_backup_chosen_in_this_configuration_is_not_asked_for_older_logs() {
        use crate::membership::Configuration;
        // 4 nodes, replication 3: coordinator 0 crashes after every replica
        // of shard 0 (0, 1, 2) logged its write, and node 3 becomes the
        // shard's new backup in that same configuration.
        let p = Placement::new(4, 3).unwrap();
        let c = Configuration::initial(4, 3).without(1 << 0);
        let view = PlacementView::with_roles(p, NodeMask::EMPTY.with(0), c.roles()).unwrap();
        assert_eq!(view.live_replicas(0).collect::<Vec<_>>(), vec![1, 2, 3]);
        let mut e = TxEvidence::default();
        for holder in [1, 2] {
            e.add_record(holder, rec(0, RecordKind::Log, 0b1));
        }
        // The commit may have been reported: recovery commits it.
        assert_eq!(
            e.decide_tx_caught_up(TxId::new(0, 0, 1), &view),
            (true, DecisionReason::EveryReplicaLogged)
        );
        // Asking the new backup too (the broken variant) aborts it.
        assert_eq!(
            e.decide_tx(TxId::new(0, 0, 1), &view),
            (false, DecisionReason::NotLogged)
        );
        // A caught-up member that lacks the LOG still aborts it.
        let mut short = TxEvidence::default();
        short.add_record(1, rec(0, RecordKind::Log, 0b1));
        assert_eq!(
            short.decide_tx_caught_up(TxId::new(0, 0, 1), &view),
            (false, DecisionReason::NotLogged)
        );
    }

    #[test]
    fn a_new_backup_that_caught_up_is_asked_whatever_the_leader_served() {
        use crate::membership::Configuration;
        // Rejoin Smallbank seed 282 (5 nodes, replication 3): node 0
        // crashed; node 1 became shard 3's new backup (3, 4, 0 → 3, 4, 1)
        // and caught up; node 0 rejoined as a new process, the lowest live
        // id and so the recovery leader, whose last served view is the
        // first configuration's. Node 3 coordinated a write to shard 3 whose
        // LOG reached 3 and 4 but not node 1.
        let p = Placement::new(5, 3).unwrap();
        let c = Configuration::initial(5, 3).without(1 << 0);
        assert!(c.shards[3].joining & (1 << 1) != 0, "node 1 joins shard 3");
        let c = c.caught_up(1).unwrap().rejoining(0, 2).unwrap();
        let view = PlacementView::with_roles(p, NodeMask::EMPTY, c.roles()).unwrap();
        assert_eq!(view.live_replicas(3).collect::<Vec<_>>(), vec![3, 4, 1]);
        assert!(view.joining(3).is_empty() && view.renewed().contains(0));
        let tx = TxId::new(3, 0, 0x8e);
        let mut e = logged_at(tx, 3, &[3, 4]);
        e.add_coordinator(coord(CoordOutcome::Undecided, 0b1000));
        assert_eq!(
            e.decide_tx_caught_up(tx, &view),
            (false, DecisionReason::NotLogged),
            "node 1, a caught-up replica, never took the LOG"
        );
    }

    #[test]
    fn a_restarted_member_is_not_asked_for_its_previous_process_logs() {
        use crate::membership::Configuration;
        // 3 nodes, replication 3: node 1 coordinated a transaction writing
        // shard 0, whose LOG every replica acknowledged (its commit may have
        // been reported); node 1 crashes and, before that epoch resumed,
        // rejoins as a new process holding nothing.
        let p = Placement::new(3, 3).unwrap();
        let c = Configuration::initial(3, 3).without(1 << 1);
        let c = c.rejoining(1, 2).unwrap();
        let view = PlacementView::with_roles(p, NodeMask::EMPTY, c.roles()).unwrap();
        assert!(view.renewed().contains(1));
        assert!(
            view.live_replicas(0).any(|n| n == 1),
            "node 1 joins shard 0 again"
        );
        let tx = TxId::new(1, 0, 5);
        let e = logged_at(tx, 0, &[0, 2]);
        assert_eq!(
            e.decide_tx_caught_up(tx, &view),
            (true, DecisionReason::EveryReplicaLogged),
            "the new process of node 1 lost the LOG with its predecessor"
        );
    }

    /// The evidence of `tx`, writing shard `shard` only, whose LOG
    /// `holders` hold.
    fn logged_at(tx: TxId, shard: u16, holders: &[NodeId]) -> TxEvidence {
        let mut e = TxEvidence::default();
        for &holder in holders {
            let r = RecordEvidence {
                tx_id: tx,
                ..rec(shard, RecordKind::Log, 1 << shard)
            };
            e.add_record(holder, r);
        }
        e
    }

    fn coord(outcome: CoordOutcome, shards: u16) -> CoordEvidence {
        CoordEvidence {
            tx_id: TxId::new(0, 0, 1),
            phase: CoordPhase::Log,
            outcome,
            reported: false,
            write_shards: NodeMask(shards),
        }
    }

    fn rec(shard: u16, kind: RecordKind, shards: u16) -> RecordEvidence {
        RecordEvidence {
            tx_id: TxId::new(0, 0, 1),
            shard,
            kind,
            write_shards: NodeMask(shards),
        }
    }

    /// 3 nodes, replication 2 (shard 0 on nodes 0 and 1, shard 1 on 1 and
    /// 2), node 2 crashed; the transaction writes shards 0 and 1.
    fn view() -> PlacementView {
        PlacementView::new(Placement::new(3, 2).unwrap(), NodeMask::EMPTY.with(2)).unwrap()
    }

    /// Every combination of a coordinator (absent or with each outcome) and,
    /// for each surviving (shard, replica) pair, no record or one of each
    /// kind; the decision is checked against the rules written out again.
    #[test]
    fn exhaustive_over_two_shards() {
        let coords = [
            None,
            Some(CoordOutcome::Undecided),
            Some(CoordOutcome::Commit),
            Some(CoordOutcome::Abort),
        ];
        let kinds = [
            None,
            Some(RecordKind::Log),
            Some(RecordKind::Commit),
            Some(RecordKind::Abort),
        ];
        let slots = [(0u16, 0u16), (0, 1), (1, 1)];
        let mut seen = std::collections::HashSet::new();
        for c in coords {
            for combo in 0..kinds.len().pow(slots.len() as u32) {
                let ks: Vec<_> = (0..slots.len())
                    .map(|i| kinds[combo / kinds.len().pow(i as u32) % kinds.len()])
                    .collect();
                let mut e = TxEvidence::default();
                if let Some(o) = c {
                    e.add_coordinator(coord(o, 0b11));
                }
                for (&(shard, holder), k) in slots.iter().zip(&ks) {
                    if let Some(k) = k {
                        e.add_record(holder, rec(shard, *k, 0b11));
                    }
                }
                let any = |kind| ks.contains(&Some(kind));
                let logged = ks
                    .iter()
                    .all(|k| matches!(k, Some(RecordKind::Log | RecordKind::Commit)));
                let want = match c {
                    Some(CoordOutcome::Commit) => true,
                    Some(CoordOutcome::Abort) => false,
                    _ if any(RecordKind::Commit) => true,
                    _ if any(RecordKind::Abort) => false,
                    _ => logged,
                };
                let (got, why) = e.decide(&view());
                assert_eq!(got, want, "coordinator {c:?}, records {ks:?}: {why:?}");
                seen.insert(why);
            }
        }
        assert_eq!(seen.len(), 5, "every rule is exercised: {seen:?}");
    }

    #[test]
    fn write_shards_come_from_any_record() {
        // Only shard 0's LOGs survived, but they name shard 1 as written too.
        let mut e = TxEvidence::default();
        e.add_record(0, rec(0, RecordKind::Log, 0b11));
        e.add_record(1, rec(0, RecordKind::Log, 0b11));
        assert_eq!(e.decide(&view()), (false, DecisionReason::NotLogged));
        e.add_record(1, rec(1, RecordKind::Log, 0b11));
        assert_eq!(
            e.decide(&view()),
            (true, DecisionReason::EveryReplicaLogged)
        );
    }

    #[test]
    fn a_surviving_replica_without_the_log_aborts() {
        // Shard 0: node 0 holds the LOG, node 1 (alive) never received it.
        let mut e = TxEvidence::default();
        e.add_record(0, rec(0, RecordKind::Log, 0b01));
        assert_eq!(e.decide(&view()), (false, DecisionReason::NotLogged));
    }

    #[test]
    fn a_lost_shard_aborts() {
        let v = PlacementView::new(Placement::new(3, 1).unwrap(), NodeMask::EMPTY.with(1)).unwrap();
        let mut e = TxEvidence::default();
        e.add_record(0, rec(0, RecordKind::Log, 0b11));
        assert_eq!(e.decide(&v), (false, DecisionReason::NotLogged));
    }

    #[test]
    fn read_only_undecided_aborts() {
        let mut e = TxEvidence::default();
        e.add_coordinator(coord(CoordOutcome::Undecided, 0));
        assert_eq!(e.decide(&view()), (false, DecisionReason::NotLogged));
    }

    #[test]
    fn a_live_coordinator_that_let_go_of_a_transaction_aborts_it() {
        // Every surviving replica holds the LOG (rule 4 would commit), but
        // its coordinator, node 0, is live and no longer holds it.
        let mut e = TxEvidence::default();
        for (shard, holder) in [(0, 0), (0, 1), (1, 1)] {
            e.add_record(holder, rec(shard, RecordKind::Log, 0b11));
        }
        let by = |node: NodeId| TxId::new(node, 0, 7);
        assert_eq!(
            e.decide_tx(by(0), &view()),
            (false, DecisionReason::CoordinatorForgot)
        );
        assert_eq!(
            e.decide_tx(by(2), &view()),
            (true, DecisionReason::EveryReplicaLogged),
            "a crashed coordinator's transaction goes by the records"
        );
        e.add_coordinator(coord(CoordOutcome::Commit, 0b11));
        assert_eq!(
            e.decide_tx(by(0), &view()),
            (true, DecisionReason::CoordinatorDecided)
        );
    }

    #[test]
    fn evidence_set_is_bounded() {
        let mut s = EvidenceSet::new();
        // Coordinated by node 2, which crashed.
        let r = |generation: u32| RecordEvidence {
            tx_id: TxId::new(2, 0, generation),
            ..rec(1, RecordKind::Log, 0b10)
        };
        assert!(s.add(1, &[], &[r(1), r(2)], 2));
        assert!(s.add(1, &[], &[r(2)], 2), "a known transaction still fits");
        assert!(!s.add(1, &[], &[r(3)], 2));
        assert_eq!(s.len(), 2);
        assert_eq!(
            s.decide_all(&view()).collect::<Vec<_>>(),
            vec![(TxId::new(2, 0, 1), true), (TxId::new(2, 0, 2), true)]
        );
    }
}
