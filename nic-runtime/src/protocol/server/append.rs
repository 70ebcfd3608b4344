//! The write path (the commit point): LOG at every replica (Xenic
//! §4.2 step 4) appends pending LOG records; COMMIT at every replica (step 6)
//! appends one decision record, and at a primary also installs the writes in
//! the NIC index and unlocks once that append completed; an ABORT after LOG
//! appends an ABORT decision record. All by DMA to the host log.
//!
//! Before anything is installed or appended, every item is checked (a rule the
//! fuzz targets check): a value over the node's limit, or records that would
//! make a host-log entry longer than [`log_entry_bytes_max`] (the size the
//! node's host log is built to take), are refused with
//! [`ReplyStatus::TooLarge`]; metadata with a planted LOCKED bit, DELETED
//! with a value, or version 0 with [`ReplyStatus::Malformed`] (a delete's
//! tombstone — DELETED, the next version, no value — is a write like any
//! other: installed and appended as it is); and a COMMIT is installed only
//! for keys its transaction holds locked here, so a late or duplicated COMMIT
//! (the lock already released) is refused and never rolls the NIC cache back (a
//! duplicate that arrives while the first is still being appended gets no
//! answer of its own: the first one's acknowledgement answers both). Installs
//! themselves never move a cached version backwards
//! ([`NicIndex::install_committed`]).
//!
//! Every LOG and COMMIT is answered: `Ok` once its records are in the host
//! log, otherwise the reason. A COMMIT a primary cannot take for a reason
//! other than a broken protocol rule (too large, no free slot) and an append
//! the host log refuses leave a committed write this node cannot apply, so
//! they also stop the node ([`Server::fatal`]).

use super::txs::TxState;
use super::{token, OpKind, Server};
use crate::dma::DmaError;
use crate::index::NicIndex;
use crate::protocol::Io;
use crate::protocol::LOG_BACKUPS_ONLY;
use splitkv_layout::log_record::{
    log_entry_bytes_max, LogKind, LogRecord, LOG_RECORD_HEADER_BYTES,
};
use splitkv_layout::wire::{Item, ItemList, MsgKind, NodeId, NodeMask, RecordKind, ReplyStatus};
use splitkv_layout::TxId;

impl Server {
    /// Steps 4 (every replica, LOG) and 6 (every replica, COMMIT): write the
    /// records to the host log by DMA. A LOG appends one pending
    /// [`LogKind::Log`] record per item and changes nothing in the NIC index.
    /// A COMMIT installs its items (the keys this node is primary of) in the
    /// NIC index, pinned, and appends one [`LogKind::Commit`] decision record;
    /// the locks are released only when that append completed
    /// ([`Server::finish_append`], Xenic §4.2 step 6). `tx` is the
    /// transaction id and, for a LOG, every shard it writes (recovery
    /// evidence, kept with the shards of the records taken here).
    pub(super) fn append(
        &mut self,
        io: &mut Io,
        index: &mut NicIndex,
        kind: OpKind,
        src: NodeId,
        tx: (TxId, NodeMask),
        items: ItemList<'_>,
    ) {
        let (tx_id, write_shards) = tx;
        if let Err(why) = self.check_items(io, index, kind, tx_id, items) {
            return self.refuse_append(io, kind, src, tx_id, why);
        }
        let Some(slot) = self.alloc(kind, src, tx_id) else {
            return self.refuse_append(io, kind, src, tx_id, ReplyStatus::Busy);
        };
        self.txs.set(
            tx_id,
            if kind == OpKind::Commit {
                TxState::Committing
            } else {
                TxState::Logging
            },
        );
        if kind == OpKind::Commit {
            self.hold_decision(tx_id, RecordKind::Commit);
        } else {
            let shards = items
                .iter()
                .fold(NodeMask::EMPTY, |m, it| m.with(io.placement.shard(&it.key)));
            self.txs.hold(tx_id, RecordKind::Log, shards, write_shards);
        }
        for it in items.iter() {
            index.prefetch(&it.key);
        }
        let op = &mut self.ops[slot];
        for it in items.iter() {
            // Mutation switch (the old commit point): LOG to backups
            // only, applied at once, and a primary that unlocks before its
            // COMMIT append completed.
            let apply_now = kind == OpKind::Commit || LOG_BACKUPS_ONLY;
            if apply_now {
                // Pinned until the host applied it, so this NIC never reads
                // an older copy from its host table. A newer cached version
                // stays; the host skips the record.
                index.install_committed(it.key, it.meta, it.value);
            }
            if kind == OpKind::Commit {
                self.room.committed(&it.key, tx_id);
                if LOG_BACKUPS_ONLY {
                    index.unlock(&it.key, tx_id);
                }
            }
            op.keys.push(it.key);
            op.metas.push(it.meta);
            if kind == OpKind::Log || LOG_BACKUPS_ONLY {
                LogRecord {
                    kind: LogKind::Log,
                    tx_id,
                    key: it.key,
                    meta: it.meta,
                    value: it.value,
                }
                .encode(&mut op.entry);
            }
        }
        if kind == OpKind::Commit && !LOG_BACKUPS_ONLY {
            LogRecord::decision(LogKind::Commit, tx_id).encode(&mut op.entry);
        }
        self.submit_append(io, slot);
    }

    /// The decision (`kind`: [`LogKind::Commit`] or [`LogKind::Abort`]) of a
    /// transaction whose LOG this node took, decided elsewhere (an ABORT
    /// after LOG, or crash recovery): appends the decision record so the
    /// host worker applies or drops the pending records (no answer is
    /// sent). Without a free slot it waits in a queue of at most one entry
    /// per coordinator slot, retried with the deferred requests.
    pub(super) fn append_decision(&mut self, io: &mut Io, src: NodeId, tx_id: TxId, kind: LogKind) {
        let Some(slot) = self.alloc(OpKind::Decision, src, tx_id) else {
            if self.decisions_waiting.len() < super::SERVER_OPS_MAX {
                self.decisions_waiting.push_back((src, tx_id, kind));
            }
            return;
        };
        LogRecord::decision(kind, tx_id).encode(&mut self.ops[slot].entry);
        self.submit_append(io, slot);
    }

    /// `tx_id`, in state `state` here, is decided `kind` here (its
    /// coordinator's ABORT, or a recovery or rebuild decision): it is
    /// finished, its held record says the decision (recovery evidence),
    /// and if it took a LOG here the decision record is appended after the
    /// LOG records — now if they are in the host log (`Logged`), or when
    /// their append completes (`Logging`; [`Server::finish_append`] reads
    /// the decision from the append itself, so a newer transaction of the
    /// same coordinator slot arriving meanwhile cannot lose it). `src` is
    /// the node the decision came from.
    pub(super) fn decide_logged(
        &mut self,
        io: &mut Io,
        src: NodeId,
        tx_id: TxId,
        state: Option<TxState>,
        kind: LogKind,
    ) {
        self.txs.set(tx_id, TxState::Finished);
        self.hold_decision(
            tx_id,
            match kind {
                LogKind::Commit => RecordKind::Commit,
                _ => RecordKind::Abort,
            },
        );
        match state {
            Some(TxState::Logged) => self.append_decision(io, src, tx_id, kind),
            Some(TxState::Logging) => {
                let op = self.ops.iter_mut().find(|o| {
                    o.active && o.kind == OpKind::Log && o.tx_id == tx_id && o.decision.is_none()
                });
                debug_assert!(op.is_some(), "a Logging transaction has its LOG append");
                if let Some(op) = op {
                    op.decision = Some(kind);
                }
            }
            _ => {}
        }
    }

    /// Records that this node's record of `tx_id`, if it holds its LOG, is
    /// now decided `kind` (recovery evidence).
    pub(super) fn hold_decision(&mut self, tx_id: TxId, kind: RecordKind) {
        if let Some(h) = self.txs.held(tx_id) {
            self.txs.hold(tx_id, kind, NodeMask::EMPTY, NodeMask::EMPTY);
            debug_assert!(self.txs.held(tx_id).is_some_and(|n| n.shards == h.shards));
        }
    }

    /// The checks of the module docs, before anything changes.
    fn check_items(
        &mut self,
        io: &Io,
        index: &NicIndex,
        kind: OpKind,
        tx_id: TxId,
        items: ItemList<'_>,
    ) -> Result<(), ReplyStatus> {
        self.check_written_items(io, items, |it| {
            kind == OpKind::Commit && index.lock_holder(&it.key) != Some(tx_id)
        })
    }

    /// Checks a request's written items before anything changes, counting
    /// a refusal: values within the node's limit and one host-log entry
    /// within [`log_entry_bytes_max`] (`TooLarge`), metadata a peer may send
    /// with a written value ([`ObjectMeta::check_written`](splitkv_layout::ObjectMeta::check_written))
    /// and no item that `malformed` picks (`Malformed`).
    pub(super) fn check_written_items(
        &mut self,
        io: &Io,
        items: ItemList<'_>,
        mut malformed: impl FnMut(&Item<'_>) -> bool,
    ) -> Result<(), ReplyStatus> {
        let mut entry_bytes = 0;
        for it in items.iter() {
            entry_bytes += LOG_RECORD_HEADER_BYTES + it.value.len();
            if it.value.len() > io.value_bytes_max
                || entry_bytes > log_entry_bytes_max(io.value_bytes_max)
            {
                self.stats.too_large += 1;
                return Err(ReplyStatus::TooLarge);
            }
            if it.meta.check_written(it.value.len()).is_err() || malformed(&it) {
                self.stats.malformed += 1;
                return Err(ReplyStatus::Malformed);
            }
        }
        Ok(())
    }

    /// Answers a LOG or COMMIT negatively. A COMMIT refused for anything but a
    /// broken rule is a committed write this primary cannot take: stop.
    fn refuse_append(
        &mut self,
        io: &mut Io,
        kind: OpKind,
        src: NodeId,
        tx_id: TxId,
        why: ReplyStatus,
    ) {
        let ack = if kind == OpKind::Commit {
            MsgKind::CommitAck
        } else {
            MsgKind::LogAck
        };
        if kind == OpKind::Commit && why != ReplyStatus::Malformed && self.fatal.is_none() {
            self.fatal = Some(format!(
                "node {} cannot take the COMMIT of transaction {tx_id:#x} from node {src} \
                 ({why:?}): its nodes disagree on value or request limits",
                io.node
            ));
        }
        io.w.ack(ack, tx_id, why);
        io.send(src);
    }

    pub(super) fn submit_append(&mut self, io: &mut Io, slot: usize) {
        let op = &self.ops[slot];
        match io
            .dma
            .submit_log_append(io.now, token(slot, op.gen, 0), &op.entry)
        {
            Ok(()) => self.stats.log_appends += 1,
            Err(DmaError::QueueFull) => self.deferred.push_back((slot, op.gen)),
            Err(e) => self.append_failed(io, slot, e.to_string()),
        }
    }

    /// The host log refused the append in `slot`: answer negatively
    /// ([`ReplyStatus::HostFailure`]) and stop the node ([`Server::fatal`]).
    pub(super) fn append_failed(&mut self, io: &mut Io, slot: usize, why: String) {
        self.stats.dma_errors += 1;
        let op = &self.ops[slot];
        let (kind, src, tx_id) = (op.kind, op.src, op.tx_id);
        if self.fatal.is_none() {
            self.fatal = Some(format!(
                "node {}: the host log refused an append ({why}); its writes cannot be applied",
                io.node
            ));
        }
        self.release(slot);
        let ack = match kind {
            OpKind::Commit => MsgKind::CommitAck,
            OpKind::Log => MsgKind::LogAck,
            OpKind::DnlAppend(step) => step.ack_kind(),
            _ => return,
        };
        io.w.ack(ack, tx_id, ReplyStatus::HostFailure);
        io.send(src);
    }

    /// The append in `slot` completed with the log's tail at `tail`: pin
    /// what a COMMIT installed until the host applied up to there, release
    /// the COMMIT's locks (Xenic §4.2 step 6: only now), and answer.
    pub(super) fn finish_append(
        &mut self,
        io: &mut Io,
        index: &mut NicIndex,
        slot: usize,
        tail: u64,
    ) {
        let op = &self.ops[slot];
        let (kind, tx_id, src) = (op.kind, op.tx_id, op.src);
        self.appended_tail = self.appended_tail.max(tail);
        if kind == OpKind::Commit || LOG_BACKUPS_ONLY {
            for (k, m) in op.keys.iter().zip(&op.metas) {
                index.set_pin(*k, m.version(), tail);
            }
        }
        let ack = match kind {
            OpKind::Commit => {
                for k in &op.keys {
                    index.unlock(k, tx_id);
                }
                self.txs.set(tx_id, TxState::Finished);
                MsgKind::CommitAck
            }
            OpKind::Log => {
                // Decided (aborted, or by recovery) while its records were
                // being appended: the decision record goes after them, and
                // the coordinator needs no answer. The decision is the
                // append's own: the slot's entry may already describe a
                // newer transaction.
                if let Some(decision) = op.decision.filter(|_| !LOG_BACKUPS_ONLY) {
                    self.release(slot);
                    self.append_decision(io, src, tx_id, decision);
                    return;
                }
                if self.txs.state(tx_id) == Some(TxState::Logging) {
                    self.txs.set(tx_id, TxState::Logged);
                }
                MsgKind::LogAck
            }
            OpKind::DnlAppend(step) => return self.finish_dnl_append(io, index, slot, step, tail),
            _ => return self.release(slot),
        };
        io.w.ack(ack, tx_id, ReplyStatus::Ok);
        io.send(src);
        self.release(slot);
    }
}
