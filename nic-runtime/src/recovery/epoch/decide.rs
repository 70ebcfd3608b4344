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
use crate::protocol::skeleton::{row_of, Evidence};
use crate::protocol::{dnl1, dnl4, CommitProtocol};

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
    /// Dnl: per shard, the surviving replicas that hold the transaction's
    /// LOCK on keys of that shard.
    pub lock_holders: [NodeMask; MASK_NODES_MAX],
    /// Dnl: whether some surviving replica holds a REPL record.
    pub repl_record: bool,
}

/// Which rule decides a transaction the records must decide (rule 4 of the
/// module docs, or a Dnl protocol's own): the cluster's commit protocol's
/// ([`RecoveryRule::of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryRule {
    /// Xenic OCC: rule 4 over LOG records.
    #[default]
    XenicOcc,
    /// A Dnl protocol's rule ([`Evidence::Records`]: `dnl4::decide`, Dnl-4
    /// and Dnl-2; [`Evidence::AllLocked`]: `dnl1::decide`).
    Dnl(Evidence),
}

impl RecoveryRule {
    /// The rule of commit protocol `protocol`.
    pub fn of(protocol: CommitProtocol) -> RecoveryRule {
        row_of(protocol).map_or(RecoveryRule::XenicOcc, |row| {
            RecoveryRule::Dnl(row.evidence)
        })
    }
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
    /// Rule 5 (or the Dnl rule failed): a written shard has a surviving
    /// replica without the LOG, or no surviving replica, or nothing is
    /// written.
    NotLogged,
    /// `dnl4::decide` (Dnl-4, Dnl-2): a REPL record survived and every
    /// surviving replica of every written shard holds a value record.
    DnlValuesHeld,
    /// `dnl1::decide` (Dnl-1): every surviving replica of every locked
    /// shard holds the LOCK.
    DnlAllLocked,
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
        // A record of values names a written shard; a Dnl LOCK may be of
        // keys only read (Dnl-2, Dnl-1), whose shard the rule does not ask
        // about unless the record's mask names it.
        let mut asked = NodeMask(self.write_shards.0 | r.write_shards.0);
        if r.kind != RecordKind::Lock {
            asked = asked.with(r.shard);
        }
        self.write_shards = asked;
        match r.kind {
            RecordKind::Log => *held = held.with(holder),
            RecordKind::Commit => {
                *held = held.with(holder);
                self.commit_record = true;
            }
            RecordKind::Abort => self.abort_record = true,
            RecordKind::Lock => {
                let locked = &mut self.lock_holders[r.shard as usize];
                *locked = locked.with(holder);
            }
            RecordKind::Repl => {
                *held = held.with(holder);
                self.repl_record = true;
            }
        }
    }

    /// Whether every replica that `quorum` names, in `view`, of every shard
    /// the transaction writes (or, for Dnl-1, locks) is in `holders` for
    /// that shard, and every such shard has a primary. Rule 4 with
    /// [`TxEvidence::log_holders`]; the Dnl rules with theirs.
    pub fn every_replica_holds(
        &self,
        view: &PlacementView,
        quorum: LogQuorum,
        holders: &[NodeMask; MASK_NODES_MAX],
    ) -> bool {
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
                        .all(|n| holders[s as usize].contains(n))
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
    pub fn decide_tx(
        &self,
        tx_id: TxId,
        view: &PlacementView,
        rule: RecoveryRule,
    ) -> (bool, DecisionReason) {
        self.decide_tx_over(tx_id, view, LogQuorum::EveryMember, rule)
    }

    /// [`TxEvidence::decide_tx`] with rule 4 asking the LOG of the live
    /// members of `view` that are caught up ([`LogQuorum::CaughtUpMembers`]):
    /// crash recovery's leader.
    pub fn decide_tx_caught_up(
        &self,
        tx_id: TxId,
        view: &PlacementView,
        rule: RecoveryRule,
    ) -> (bool, DecisionReason) {
        self.decide_tx_over(tx_id, view, LogQuorum::CaughtUpMembers, rule)
    }

    fn decide_tx_over(
        &self,
        tx_id: TxId,
        view: &PlacementView,
        quorum: LogQuorum,
        rule: RecoveryRule,
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
        self.decide_over(view, quorum, rule)
    }

    /// The decision (`true` = commit) and the rule that made it, for the
    /// surviving nodes of `view` (rule 4, or `rule`'s Dnl rule, asking
    /// every live member).
    pub fn decide(&self, view: &PlacementView, rule: RecoveryRule) -> (bool, DecisionReason) {
        self.decide_over(view, LogQuorum::EveryMember, rule)
    }

    fn decide_over(
        &self,
        view: &PlacementView,
        quorum: LogQuorum,
        rule: RecoveryRule,
    ) -> (bool, DecisionReason) {
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
        match rule {
            RecoveryRule::XenicOcc if self.every_replica_holds(view, quorum, &self.log_holders) => {
                (true, DecisionReason::EveryReplicaLogged)
            }
            RecoveryRule::Dnl(Evidence::Records) if dnl4::decide(self, view, quorum) => {
                (true, DecisionReason::DnlValuesHeld)
            }
            RecoveryRule::Dnl(Evidence::AllLocked) if dnl1::decide(self, view, quorum) => {
                (true, DecisionReason::DnlAllLocked)
            }
            _ => (false, DecisionReason::NotLogged),
        }
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
    rule: RecoveryRule,
) -> (bool, DecisionReason) {
    let mut e = TxEvidence::default();
    for (holder, r) in records {
        e.add_record(holder, r);
    }
    e.decide_over(view, quorum, rule)
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

    /// Every transaction's decision in `view` under `rule`, ascending by id.
    pub fn decide_all<'a>(
        &'a self,
        view: &'a PlacementView,
        rule: RecoveryRule,
    ) -> impl Iterator<Item = (TxId, bool)> + 'a {
        self.txs
            .iter()
            .map(move |(&id, e)| (id, e.decide_tx(id, view, rule).0))
    }
}

#[cfg(test)]
mod tests;
