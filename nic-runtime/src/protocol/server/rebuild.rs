//! The server's side of a NIC runtime that restarts alone (the NIC restart;
//! the design is argued in `recovery::restart`'s module docs).
//!
//! At the restarted node: what of the server survives ([`Server::restarted`]),
//! locks given back by their coordinators ([`Server::reinstall_lock`]), the
//! answers owed to a peer's transaction that waits on this node
//! ([`Server::answer_waiting`]), and the host-log records left undecided
//! ([`Server::logged_of`]). At a peer: the locks of the restarted node's
//! lost transactions released and their records reported
//! ([`Server::forget_coordinator`]).

use super::txs::TxState;
use super::{OpKind, Server};
use crate::index::NicIndex;
use crate::protocol::Io;
use splitkv_layout::log_record::LogKind;
use splitkv_layout::wire::{
    CoordPhase, MsgKind, NodeId, PeerTx, RecordEvidence, RecordKind, ReplyStatus,
};
use splitkv_layout::Key;
use splitkv_layout::TxId;

/// What [`Server::answer_waiting`] did for one waiting transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitingAnswer {
    /// An EXECUTE or VALIDATE refused with [`ReplyStatus::Unavailable`]
    /// (its coordinator aborts: the client hears `Unavailable`).
    Refused,
    /// A LOG this node lost (not in its host log) answered
    /// [`ReplyStatus::Unavailable`]: its coordinator sends it again
    /// (`log_again`), no abort.
    LogLost,
    /// Its LOG is in this node's host log: acknowledged `Ok`.
    LogAcked,
    /// Past the commit point with its LOG here: the COMMIT decision record
    /// appended (or already there) and acknowledged `Ok`.
    Committed,
    /// A COMMIT for a transaction whose LOG this node never held: answered
    /// [`ReplyStatus::Malformed`] (already decided, like a late COMMIT).
    NotHeld,
    /// A Dnl skeleton phase (Get, Lock, Replicate, Unlock): no coordinator
    /// runs the Dnl protocols yet, so a peer reporting one broke the
    /// protocol; nothing is sent, and it is counted.
    UnknownPhase,
}

impl Server {
    /// The server of a restarted NIC runtime, from the one that crashed
    /// (after its DMA requests drained): requests in flight, deferred work
    /// and counters of the old runtime are gone; kept are what mirrors host
    /// memory — the per-slot table of records the host log holds
    /// (`server/txs.rs`; states `Logging`/`Committing` cannot remain once the
    /// appends drained), the host log's tail, and the shard's [`Room`](super::Room)
    /// (row count of the host table).
    pub fn restarted(self) -> Server {
        let mut s = Server::new();
        s.txs = self.txs;
        s.room = self.room;
        s.appended_tail = self.appended_tail;
        s.stats = self.stats;
        s
    }

    /// Whether requests, deferred appends or decision records are still in
    /// flight (a restart drains them first).
    pub fn busy(&self) -> bool {
        self.inflight() > 0 || !self.deferred.is_empty() || !self.decisions_waiting.is_empty()
    }

    /// The host log's tail after the newest completed append (bytes).
    pub fn appended_tail(&self) -> u64 {
        self.appended_tail
    }

    /// Decision records being appended or waiting for a slot.
    pub fn decisions_in_flight(&self) -> usize {
        let appending = self
            .ops
            .iter()
            .filter(|o| o.active && o.kind == super::OpKind::Decision)
            .count();
        appending + self.decisions_waiting.len()
    }

    /// Takes `key`'s lock for `tx_id` again, as its coordinator reported it
    /// (Xenic §4.2.1 (a): locks live only in the NIC index). Not taken when
    /// this node already holds `tx_id`'s COMMIT record (its commit released
    /// its locks here) or saw a newer transaction of its slot. An ABORT
    /// record does not release them: round 1 of an abort after LOG records
    /// it and the locks stay until round 2, whose ABORT releases the lock
    /// given back here (a coordinator reports it only before sending that).
    /// Returns whether the lock is held by `tx_id` now.
    pub fn reinstall_lock(&mut self, index: &mut NicIndex, tx_id: TxId, key: Key) -> bool {
        let decided = self.txs.held(tx_id).map(|h| h.kind) == Some(RecordKind::Commit);
        if decided || self.txs.state(tx_id).is_none() {
            return false;
        }
        index.try_lock(key, tx_id)
    }

    /// Answers a peer's transaction `tx` that waits on this node for an
    /// answer the crash lost (see [`WaitingAnswer`]).
    pub fn answer_waiting(
        &mut self,
        io: &mut Io,
        index: &mut NicIndex,
        src: NodeId,
        tx: PeerTx,
    ) -> WaitingAnswer {
        let tx_id = tx.tx_id;
        let held = self.txs.held(tx_id).map(|h| h.kind);
        let logged = self.txs.state(tx_id) == Some(TxState::Logged);
        match tx.phase {
            CoordPhase::Get | CoordPhase::Lock | CoordPhase::Replicate | CoordPhase::Unlock => {
                return WaitingAnswer::UnknownPhase;
            }
            CoordPhase::Execute => {
                io.w.begin_execute_resp(tx_id, ReplyStatus::Unavailable);
            }
            CoordPhase::Validate => io.w.validate_resp(tx_id, ReplyStatus::Unavailable),
            CoordPhase::Log if logged => {
                io.w.ack(MsgKind::LogAck, tx_id, ReplyStatus::Ok);
                io.send(src);
                return WaitingAnswer::LogAcked;
            }
            CoordPhase::Log => {
                io.w.ack(MsgKind::LogAck, tx_id, ReplyStatus::Unavailable);
                io.send(src);
                return WaitingAnswer::LogLost;
            }
            CoordPhase::Commit => {
                let answer = if logged {
                    self.apply_recovered(io, index, tx_id, true);
                    WaitingAnswer::Committed
                } else if held == Some(RecordKind::Commit) {
                    WaitingAnswer::Committed
                } else {
                    WaitingAnswer::NotHeld
                };
                let status = if answer == WaitingAnswer::Committed {
                    ReplyStatus::Ok
                } else {
                    ReplyStatus::Malformed
                };
                io.w.ack(MsgKind::CommitAck, tx_id, status);
                io.send(src);
                return answer;
            }
        }
        io.send(src);
        WaitingAnswer::Refused
    }

    /// The transactions of coordinator `coordinator` whose LOG records this
    /// node's host log holds undecided, appended to `out`.
    pub fn logged_of(&self, coordinator: NodeId, out: &mut Vec<TxId>) {
        out.extend(
            self.txs
                .held_all()
                .filter(|(tx_id, h)| {
                    tx_id.coordinator() == coordinator
                        && h.kind == RecordKind::Log
                        && self.txs.state(*tx_id) == Some(TxState::Logged)
                })
                .map(|(tx_id, _)| tx_id),
        );
    }

    /// Every record this node holds for transactions of `coordinator`, one
    /// per `(transaction, shard)`, appended to `out`.
    pub fn records_of(&self, coordinator: NodeId, out: &mut Vec<RecordEvidence>) {
        for (tx_id, held) in self.txs.held_all() {
            if tx_id.coordinator() != coordinator {
                continue;
            }
            for shard in held.shards.iter() {
                out.push(RecordEvidence {
                    tx_id,
                    shard,
                    kind: held.kind,
                    write_shards: held.write_shards,
                });
            }
        }
    }

    /// At a peer of a restarted node `coordinator`: its coordinator lost
    /// every transaction it had in flight. Locks of those with no LOG here
    /// are released (they cannot have reached the commit point once the old
    /// incarnation's packets are dropped, as the sessions do); the records
    /// held for the others are appended to `out` for the restarted node to
    /// decide. Returns the locks released.
    pub fn forget_coordinator(
        &mut self,
        index: &mut NicIndex,
        coordinator: NodeId,
        out: &mut Vec<RecordEvidence>,
    ) -> usize {
        let released = self.release_orphan_locks(index, 1 << coordinator);
        self.records_of(coordinator, out);
        released
    }

    /// The newest generation of `coordinator`'s transaction ids this
    /// node's per-slot fence has seen (0: none): a coordinator that lost
    /// its numbering (a NIC restart) numbers its new transactions above the
    /// newest its peers report, so none is refused as late and no id is
    /// reused while records of the old one may remain.
    pub fn newest_generation(&self, coordinator: NodeId) -> u32 {
        self.txs.newest_generation(coordinator as usize)
    }

    /// At a peer of a restarted node: that node decided commit for its lost
    /// transaction `tx_id`, whose LOG is here. The COMMIT decision record is
    /// appended, but unlike [`Server::apply_recovered`] the locks stay held:
    /// this node serves meanwhile, and its NIC cache does not hold the new
    /// values (the LOG records in the host log do), so a read before the
    /// host applied them would return the old version and a later write
    /// would reuse its version number. The caller releases them with
    /// [`Server::release_recovered`] once the append completed
    /// ([`Server::appending`]) and the host applied the log through
    /// [`Server::appended_tail`]. Returns whether `tx_id` was undecided here.
    pub fn commit_recovered_holding_locks(&mut self, io: &mut Io, tx_id: TxId) -> bool {
        let state = self.txs.state(tx_id);
        if !matches!(state, Some(TxState::Logging | TxState::Logged)) {
            return false;
        }
        self.decide_logged(io, io.node, tx_id, state, LogKind::Commit);
        self.stats.recovered_decisions += 1;
        true
    }

    /// Whether a host-log append of `tx_id` (its LOG or its decision) is
    /// under way or waiting here.
    pub fn appending(&self, tx_id: TxId) -> bool {
        self.ops.iter().any(|o| {
            o.active
                && o.tx_id == tx_id
                && matches!(o.kind, OpKind::Log | OpKind::Commit | OpKind::Decision)
        }) || self.decisions_waiting.iter().any(|&(_, t, _)| t == tx_id)
    }

    /// Releases the locks `tx_id` holds here after its recovered commit
    /// reached the host table ([`Server::commit_recovered_holding_locks`]),
    /// dropping those keys' cached objects; returns the locks released.
    pub fn release_recovered(&mut self, index: &mut NicIndex, tx_id: TxId) -> usize {
        let mut released = Vec::new();
        index.unlock_where(|holder| holder == tx_id, &mut released);
        for (k, _) in &released {
            self.room.committed(k, tx_id);
            index.forget(k);
        }
        released.len()
    }
}
