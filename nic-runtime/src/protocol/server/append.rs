//! The write path: LOG at a backup (Xenic §4.2 step 4) and COMMIT at a
//! primary (step 6) append their records to the host log by DMA.
//!
//! Before anything is installed or appended, every item is checked (issue 9
//! §4): a value over the node's limit, or records that would make a host-log
//! entry longer than [`log_entry_bytes_max`] (the size the node's host log
//! is built to take), are refused with [`ReplyStatus::TooLarge`]; metadata
//! with planted LOCKED or DELETED bits or version 0 with
//! [`ReplyStatus::Malformed`]; and a COMMIT is installed only
//! for keys its transaction holds locked here, so a late or duplicated COMMIT
//! (the lock already released) is refused and never rolls the NIC cache back
//! (a duplicate that arrives while the first is still being appended gets no
//! answer of its own: the first one's acknowledgement answers both).
//! Installs themselves never move a cached version backwards
//! ([`NicIndex::install_committed`]).
//!
//! Every LOG and COMMIT is answered: `Ok` once its records are in the host
//! log, otherwise the reason. A COMMIT a primary cannot take for a reason
//! other than a broken protocol rule (too large, no free slot) and an append
//! the host log refuses leave a committed write this node cannot apply, so
//! they also stop the node ([`Server::fatal`]).

use super::{token, OpKind, Server};
use crate::dma::DmaError;
use crate::index::NicIndex;
use crate::protocol::Io;
use splitkv_layout::log_record::{
    log_entry_bytes_max, LogKind, LogRecord, LOG_RECORD_HEADER_BYTES,
};
use splitkv_layout::wire::{ItemList, MsgKind, NodeId, ReplyStatus};

impl Server {
    /// Steps 4 (backup, LOG) and 6 (primary, COMMIT): write the records to the host
    /// log by DMA. A primary installs the new values in its NIC index and unlocks
    /// right away, so later readers see them before the host applies the log.
    pub(super) fn append(
        &mut self,
        io: &mut Io,
        index: &mut NicIndex,
        kind: OpKind,
        src: NodeId,
        tx_id: u64,
        items: ItemList<'_>,
    ) {
        if let Err(why) = self.check_items(io, index, kind, tx_id, items) {
            if why == ReplyStatus::Malformed && self.appending(kind, src, tx_id) {
                // A duplicate of a request still in flight: that one answers.
                return;
            }
            return self.refuse_append(io, kind, src, tx_id, why);
        }
        let Some(slot) = self.alloc(kind, src, tx_id) else {
            return self.refuse_append(io, kind, src, tx_id, ReplyStatus::Busy);
        };
        let log_kind = if kind == OpKind::Commit {
            LogKind::Commit
        } else {
            LogKind::Log
        };
        for it in items.iter() {
            index.prefetch(&it.key);
        }
        let op = &mut self.ops[slot];
        for it in items.iter() {
            // Both roles pin the new value until the host applied it, so this
            // NIC never reads an older copy from its host table. A newer
            // cached version stays (a late LOG); the host skips the record.
            index.install_committed(it.key, it.meta, it.value);
            if kind == OpKind::Commit {
                index.unlock(&it.key, tx_id);
                self.room.committed(&it.key, tx_id);
            }
            op.keys.push(it.key);
            op.metas.push(it.meta);
            LogRecord {
                kind: log_kind,
                tx_id,
                key: it.key,
                meta: it.meta,
                value: it.value,
            }
            .encode(&mut op.entry);
        }
        self.submit_append(io, slot);
    }

    /// Whether a `kind` request of `tx_id` from `src` is being appended.
    /// Scans the slots: only on the refusal path.
    fn appending(&self, kind: OpKind, src: NodeId, tx_id: u64) -> bool {
        self.ops
            .iter()
            .any(|op| op.active && op.kind == kind && op.src == src && op.tx_id == tx_id)
    }

    /// The checks of the module docs, before anything changes.
    fn check_items(
        &mut self,
        io: &Io,
        index: &NicIndex,
        kind: OpKind,
        tx_id: u64,
        items: ItemList<'_>,
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
            let unlocked = kind == OpKind::Commit && index.lock_holder(&it.key) != Some(tx_id);
            if it.meta.check_written().is_err() || unlocked {
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
        tx_id: u64,
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
        let ack = if kind == OpKind::Commit {
            MsgKind::CommitAck
        } else {
            MsgKind::LogAck
        };
        io.w.ack(ack, tx_id, ReplyStatus::HostFailure);
        io.send(src);
    }

    pub(super) fn finish_append(
        &mut self,
        io: &mut Io,
        index: &mut NicIndex,
        slot: usize,
        tail: u64,
    ) {
        let op = &self.ops[slot];
        for (k, m) in op.keys.iter().zip(&op.metas) {
            index.set_pin(*k, m.version(), tail);
        }
        let ack = if op.kind == OpKind::Commit {
            MsgKind::CommitAck
        } else {
            MsgKind::LogAck
        };
        io.w.ack(ack, op.tx_id, ReplyStatus::Ok);
        io.send(op.src);
        self.release(slot);
    }
}
