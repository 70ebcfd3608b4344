//! The server's part of crash recovery (Xenic §4.2.1): the records
//! this node holds as evidence, the decisions recovery makes for them, and
//! the locks of transactions whose coordinator crashed.
//!
//! A transaction whose LOG this node took keeps its locks (at a primary)
//! and its pending records (in the host log) until a decision: its
//! coordinator's COMMIT or ABORT, or recovery's
//! ([`Server::apply_recovered`]). A recovery decision appends the decision
//! record, releases every lock the transaction holds here and drops the
//! cached objects of those keys, so that they are read from the host table,
//! which holds the decided values once the host worker applied the record
//! ([`Server::appends_settled`]; the runtime answers recovery only then).

use super::txs::{Held, TxState};
use super::Server;
use crate::index::NicIndex;
use crate::protocol::Io;
use splitkv_layout::log_record::LogKind;
use splitkv_layout::wire::{MsgKind, NodeId, NodeMask, RecordEvidence, RecordKind, ReplyStatus};
use splitkv_layout::TxId;

impl Server {
    /// A new epoch left the coordinators of `failed` (a mask by node id)
    /// out: releases every lock here held by one of their transactions that
    /// has no LOG record at this node (state `Active`, or superseded by a
    /// newer transaction of its slot). Such a transaction never reached its
    /// commit point: LOG goes to every replica of a written key, this
    /// primary included, and the commit point needs every replica's
    /// acknowledgement. Locks of transactions whose LOG (or Dnl LOCK) is
    /// here wait for recovery's decision. Returns the locks released.
    pub fn release_orphan_locks(&mut self, index: &mut NicIndex, failed: u32) -> usize {
        let txs = &self.txs;
        let mut released = Vec::new();
        index.unlock_where(
            |tx_id| {
                let coordinator = u32::from(tx_id.coordinator());
                coordinator < 32
                    && failed & (1 << coordinator) != 0
                    && matches!(txs.state(tx_id), None | Some(TxState::Active))
                    // A Dnl transaction's records here (a Lock holder)
                    // wait for recovery's decision.
                    && txs.held(tx_id).is_none()
            },
            &mut released,
        );
        for (k, tx_id) in &released {
            self.room.released(k, *tx_id);
            self.txs.set(*tx_id, TxState::Finished);
        }
        self.stats.orphan_locks_released += released.len() as u64;
        released.len()
    }

    /// A LOG that arrives while this node is in a recovery epoch: refused
    /// with [`ReplyStatus::Busy`] (its evidence is taken; module docs of
    /// the runtime's dispatch).
    pub fn refuse_log(&mut self, io: &mut Io, src: NodeId, tx_id: TxId) {
        self.stats.refused_recovering += 1;
        io.w.ack(MsgKind::LogAck, tx_id, ReplyStatus::Busy);
        io.send(src);
    }

    /// Appends this node's records to `out`, one per `(transaction,
    /// shard, kind)` ([`held_records`]), at most `max` in all (pending
    /// records first): every pending LOG record (and Dnl LOCK and REPL), and every COMMIT or ABORT record the per-slot
    /// record table holds (the newest of each coordinator slot), whatever
    /// its coordinator's state: a coordinator whose NIC restarted lost its
    /// transactions, and this replica may not know it yet (the leader's
    /// rules 2 and 3 come before its "forgot" rule, `recovery/epoch/decide.rs`).
    /// Returns the records left out for want of room.
    pub fn recovery_evidence(&self, max: usize, out: &mut Vec<RecordEvidence>) -> usize {
        let mut left_out = 0;
        for pending in [true, false] {
            for (tx_id, held) in self.txs.held_all() {
                if held.pending() != pending {
                    continue;
                }
                for (shard, kind) in held_records(&held) {
                    if out.len() >= max {
                        left_out += 1;
                        continue;
                    }
                    out.push(RecordEvidence {
                        tx_id,
                        shard,
                        kind,
                        write_shards: held.write_shards,
                    });
                }
            }
        }
        left_out
    }

    /// Recovery decided `tx_id` (`commit` or not): if its LOG is here and
    /// undecided, appends the decision record (after the LOG records, if
    /// they are still being appended), releases every lock it holds here
    /// and drops those keys' cached objects (module docs). An abort of a
    /// transaction whose abort after LOG was recorded here (round 1) also
    /// releases the locks round 2 would have. Returns whether the decision
    /// changed anything here (a transaction decided here already, by its
    /// coordinator, is otherwise left alone).
    pub fn apply_recovered(
        &mut self,
        io: &mut Io,
        index: &mut NicIndex,
        tx_id: TxId,
        commit: bool,
    ) -> bool {
        if self.txs.dnl(tx_id).is_some_and(|marks| marks != 0) {
            return self.apply_recovered_dnl(io, index, tx_id, commit);
        }
        let state = self.txs.state(tx_id);
        if !matches!(state, Some(TxState::Logging | TxState::Logged)) {
            return !commit && self.release_aborted_after_log(index, tx_id);
        }
        let kind = if commit {
            LogKind::Commit
        } else {
            LogKind::Abort
        };
        self.decide_logged(io, io.node, tx_id, state, kind);
        let mut released = Vec::new();
        index.unlock_where(|holder| holder == tx_id, &mut released);
        for (k, _) in &released {
            if commit {
                self.room.committed(k, tx_id);
            } else {
                self.room.released(k, tx_id);
            }
        }
        if commit {
            released.iter().for_each(|(k, _)| _ = index.forget(k));
        }
        self.stats.recovered_decisions += 1;
        true
    }

    /// Round 1 of an abort after LOG recorded `tx_id`'s abort here and left
    /// its locks for round 2, which may never come (its coordinator crashed
    /// between the rounds): recovery decided it aborted, so its locks here
    /// are released now (`tla/XenicOCCMsgs.tla`: `Resume` clears the locks
    /// of decided transactions). Returns whether any was held.
    fn release_aborted_after_log(&mut self, index: &mut NicIndex, tx_id: TxId) -> bool {
        let recorded = self.txs.state(tx_id) == Some(TxState::Finished)
            && self.txs.held(tx_id).map(|h| h.kind) == Some(RecordKind::Abort);
        if !recorded {
            return false;
        }
        let mut released = Vec::new();
        index.unlock_where(|holder| holder == tx_id, &mut released);
        for (k, _) in &released {
            self.room.released(k, tx_id);
        }
        self.stats.orphan_locks_released += released.len() as u64;
        !released.is_empty()
    }

    /// Whether every host-log append this node started has completed and
    /// the host worker has applied the log through it (`host_applied`: the
    /// position of its last `LogApplied`): then the host table holds every
    /// decision recorded here.
    pub fn appends_settled(&self, host_applied: u64) -> bool {
        self.decisions_waiting.is_empty()
            && !self.ops.iter().any(|op| {
                op.active
                    && matches!(
                        op.kind,
                        super::OpKind::Log
                            | super::OpKind::Commit
                            | super::OpKind::Decision
                            | super::OpKind::DnlAppend(_)
                    )
            })
            && host_applied >= self.appended_tail
    }
}

/// The evidence records of one held entry, as `(shard, kind)`: a decision
/// record once per shard it covers; pending records as a LOG per shard of
/// values held (Xenic LOG, or a Dnl Lock's or Replicate's values), a LOCK
/// per shard locked and a REPL per shard a REPL record covers (Dnl).
fn held_records(held: &Held) -> impl Iterator<Item = (u16, RecordKind)> {
    let (values, locked, repl) = (held.shards, held.locked, held.repl);
    let decided = (!held.pending()).then_some(held.kind);
    let every = NodeMask(values.0 | locked.0 | repl.0);
    let decisions = decided
        .into_iter()
        .flat_map(move |kind| every.iter().map(move |s| (s, kind)));
    let pending = held
        .pending()
        .then_some(())
        .into_iter()
        .flat_map(move |()| {
            let at = |m: NodeMask, kind| m.iter().map(move |s| (s, kind));
            at(values, RecordKind::Log)
                .chain(at(locked, RecordKind::Lock))
                .chain(at(repl, RecordKind::Repl))
        });
    decisions.chain(pending)
}
