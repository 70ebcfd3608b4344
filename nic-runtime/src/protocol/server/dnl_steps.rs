//! The Dnl steps after the decision at a server (Dandelion §4.2.2; TLA
//! `Replicate`, `Unlock`, `Readable` of `tla/DnlSkeleton.tla`), and the
//! completion of every Dnl append (`server/dnl.rs` has the module's design:
//! pending records, decision records, marks, idempotence).
//!
//! - Replicate: never refused for a rule of the protocol (no abort after
//!   Replicate); appends t's values as pending [`LogKind::Log`] records (a
//!   Dnl-2 primary, whose values came with its Lock: a [`LogKind::Repl`]
//!   marker) and lowers READABLE on the keys this node is a backup of;
//!   answered once appended.
//! - Unlock: at a lock holder, commit installs the carried values in the
//!   NIC index (pinned until the host applied them) and appends a COMMIT
//!   record, whose arrival makes the host worker apply t's pending records;
//!   abort appends an ABORT record (they are dropped); the locks are
//!   released once that record is appended, then answered. An abort at a
//!   node where t never locked anything is answered `Ok` at once and
//!   finishes t there (a late Lock is refused).
//! - Readable: at a backup holding t's REPL record, installs the carried
//!   values in the NIC index (pinned), appends COMMIT (the host installs
//!   t's writes from its own REPL record), raises READABLE on the keys t
//!   lowered last (newest version wins: a newer cached version stays), and
//!   answers.

use super::dnl::{encode_pending, reply, DnlStep};
use super::txs::{
    DnlHeld, TxState, DNL_INSTALLING, DNL_LOCKED, DNL_LOCKING, DNL_READABLE, DNL_REPLICATED,
    DNL_REPLICATING, DNL_UNLOCKED, DNL_UNLOCKING,
};
use super::{OpKind, Server};
use crate::index::NicIndex;
use crate::protocol::Io;
use splitkv_layout::log_record::{LogKind, LogRecord};
use splitkv_layout::wire::{ItemList, KeyList, NodeId, NodeMask, RecordKind, ReplyStatus};
use splitkv_layout::TxId;

impl Server {
    /// The step's marks of `tx_id` here, or its answer: `Malformed` for a
    /// superseded or malformed id (counted late), `Ok` again for a step
    /// already `done`, no answer for one in progress (`doing`: the first
    /// copy answers). `Err(())` when answered or dropped.
    fn dnl_marks(
        &mut self,
        io: &mut Io,
        src: NodeId,
        tx_id: TxId,
        step: DnlStep,
        (doing, done): (u8, u8),
    ) -> Result<u8, ()> {
        let Some(marks) = self.txs.dnl(tx_id) else {
            self.stats.late_requests += 1;
            reply(io, step.ack_kind(), src, tx_id, ReplyStatus::Malformed);
            return Err(());
        };
        if marks & (doing | done) != 0 {
            self.stats.late_requests += 1;
            if marks & done != 0 {
                reply(io, step.ack_kind(), src, tx_id, ReplyStatus::Ok);
            }
            return Err(());
        }
        Ok(marks)
    }

    /// TLA `Replicate` (module docs). `tx` is the transaction and every
    /// shard it writes (recovery evidence). Refused only for a late
    /// transaction (finished here, or superseded), bad items (`TooLarge`, `Malformed`, a key this node does
    /// not replicate) or no free slot (`Busy`).
    pub(super) fn replicate(
        &mut self,
        io: &mut Io,
        index: &mut NicIndex,
        src: NodeId,
        tx: (TxId, NodeMask),
        items: ItemList<'_>,
    ) {
        let (tx_id, write_shards) = tx;
        let step = DnlStep::Replicate;
        let marks = (DNL_REPLICATING, DNL_REPLICATED);
        if self.dnl_marks(io, src, tx_id, step, marks).is_err() {
            return;
        }
        if !self.txs.live(tx_id) {
            // Finished here (a Replicate always comes before this node's
            // Unlock): decided by recovery, or refused at Lock.
            self.stats.late_requests += 1;
            return reply(io, step.ack_kind(), src, tx_id, ReplyStatus::Malformed);
        }
        let (placement, node) = (&io.placement, io.node);
        let checked =
            self.check_written_items(io, items, |it| !placement.is_replica(node, &it.key));
        if let Err(why) = checked {
            return reply(io, step.ack_kind(), src, tx_id, why);
        }
        let Some(slot) = self.alloc(OpKind::DnlAppend(step), src, tx_id) else {
            return reply(io, step.ack_kind(), src, tx_id, ReplyStatus::Busy);
        };
        self.txs.mark_dnl(tx_id, DNL_REPLICATING, 0);
        let shards = items
            .iter()
            .fold(NodeMask::EMPTY, |m, it| m.with(io.placement.shard(&it.key)));
        // A Dnl-2 primary's marker covers the shards its Lock's values did.
        let repl = match self.txs.held(tx_id) {
            Some(h) if shards.is_empty() => h.shards,
            _ => shards,
        };
        let held = DnlHeld {
            values: shards,
            locked: NodeMask::EMPTY,
            repl,
        };
        self.txs
            .hold_dnl(tx_id, RecordKind::Repl, held, write_shards);
        for it in items.iter() {
            if io.placement.primary(&it.key) != io.node {
                index.lower_readable(it.key, tx_id);
            }
        }
        encode_pending(&mut self.ops[slot].entry, LogKind::Repl, tx_id, items);
        self.submit_append(io, slot);
    }

    /// TLA `Unlock` (module docs): `tx` is the transaction and whether it
    /// committed; `keys` are released, `items` installed on commit, then
    /// released. Refused with `Busy` while t's Lock here is still being
    /// checked or appended (answer the Lock first), `Malformed` for a
    /// commit at a node that holds none of t's locks or names a key t does
    /// not hold, for bad items, or a late transaction.
    pub(super) fn unlock(
        &mut self,
        io: &mut Io,
        index: &mut NicIndex,
        src: NodeId,
        tx: (TxId, bool),
        keys: KeyList<'_>,
        items: ItemList<'_>,
    ) {
        let (tx_id, commit) = tx;
        let step = DnlStep::Unlock { commit };
        let Ok(marks) = self.dnl_marks(io, src, tx_id, step, (DNL_UNLOCKING, DNL_UNLOCKED)) else {
            return;
        };
        let status = if marks & DNL_LOCKING != 0 {
            self.stats.busy_refusals += 1;
            Some(ReplyStatus::Busy)
        } else if marks & DNL_LOCKED == 0 && !commit {
            // Aborted before any lock here: nothing to drop.
            self.txs.mark_dnl(tx_id, DNL_UNLOCKED, 0);
            self.txs.set(tx_id, TxState::Finished);
            Some(ReplyStatus::Ok)
        } else {
            let held = |k: &splitkv_layout::Key| index.lock_holder(k) == Some(tx_id);
            let bad = marks & DNL_LOCKED == 0
                || (commit
                    && !(keys.iter().all(|k| held(&k)) && items.iter().all(|it| held(&it.key))));
            match self.check_dnl_items(io, items) {
                Err(why) => Some(why),
                Ok(()) if bad => {
                    self.stats.malformed += 1;
                    Some(ReplyStatus::Malformed)
                }
                Ok(()) => None,
            }
        };
        if let Some(status) = status {
            return reply(io, step.ack_kind(), src, tx_id, status);
        }
        let Some(slot) = self.alloc(OpKind::DnlAppend(step), src, tx_id) else {
            return reply(io, step.ack_kind(), src, tx_id, ReplyStatus::Busy);
        };
        self.txs.mark_dnl(tx_id, DNL_UNLOCKING, 0);
        let (decision, record) = if commit {
            (LogKind::Commit, RecordKind::Commit)
        } else {
            (LogKind::Abort, RecordKind::Abort)
        };
        self.hold_decision(tx_id, record);
        for k in keys.iter() {
            self.room.released(&k, tx_id);
        }
        let op = &mut self.ops[slot];
        for it in items.iter() {
            if commit {
                // Pinned until the host applied it (Xenic §4.2 step 6).
                index.install_committed(it.key, it.meta, it.value);
                self.room.committed(&it.key, tx_id);
            } else {
                self.room.released(&it.key, tx_id);
            }
            op.keys.push(it.key);
            op.metas.push(it.meta);
        }
        op.n_reads = if commit { op.keys.len() } else { 0 };
        op.keys.extend(keys.iter());
        LogRecord::decision(decision, tx_id).encode(&mut op.entry);
        self.submit_append(io, slot);
    }

    /// TLA `Readable` (module docs). Refused with `Malformed` at a node that
    /// holds no REPL record of t, for bad items, or a late transaction.
    pub(super) fn readable(
        &mut self,
        io: &mut Io,
        index: &mut NicIndex,
        src: NodeId,
        tx_id: TxId,
        items: ItemList<'_>,
    ) {
        let step = DnlStep::Readable;
        let Ok(marks) = self.dnl_marks(io, src, tx_id, step, (DNL_INSTALLING, DNL_READABLE)) else {
            return;
        };
        let checked = self.check_dnl_items(io, items).and_then(|()| {
            if marks & DNL_REPLICATED == 0 {
                self.stats.malformed += 1;
                return Err(ReplyStatus::Malformed);
            }
            Ok(())
        });
        if let Err(why) = checked {
            return reply(io, step.ack_kind(), src, tx_id, why);
        }
        let Some(slot) = self.alloc(OpKind::DnlAppend(step), src, tx_id) else {
            return reply(io, step.ack_kind(), src, tx_id, ReplyStatus::Busy);
        };
        self.txs.mark_dnl(tx_id, DNL_INSTALLING, 0);
        self.hold_decision(tx_id, RecordKind::Commit);
        let op = &mut self.ops[slot];
        for it in items.iter() {
            // A newer cached version stays (newest version wins).
            index.install_committed(it.key, it.meta, it.value);
            op.keys.push(it.key);
            op.metas.push(it.meta);
        }
        op.n_reads = op.keys.len();
        LogRecord::decision(LogKind::Commit, tx_id).encode(&mut op.entry);
        self.submit_append(io, slot);
    }

    /// The Dnl append in `slot` completed with the log's tail at `tail`:
    /// mark the step done, pin what it installed until the host applied up
    /// to there, release locks (Unlock) or raise READABLE (Readable), answer.
    pub(super) fn finish_dnl_append(
        &mut self,
        io: &mut Io,
        index: &mut NicIndex,
        slot: usize,
        step: DnlStep,
        tail: u64,
    ) {
        let op = &self.ops[slot];
        let (tx_id, src) = (op.tx_id, op.src);
        if let Some(decision) = op.decision {
            // Decided by recovery while its pending records were being
            // appended (`server/dnl_recovery.rs`): the decision record goes
            // after them, and the old epoch's request needs no answer.
            self.release(slot);
            return self.append_decision(io, src, tx_id, decision);
        }
        let installed = op.keys[..op.n_reads].iter().zip(&op.metas);
        match step {
            DnlStep::Lock => self.txs.mark_dnl(tx_id, DNL_LOCKED, DNL_LOCKING),
            DnlStep::Replicate => self.txs.mark_dnl(tx_id, DNL_REPLICATED, DNL_REPLICATING),
            DnlStep::Unlock { .. } => {
                for (k, m) in installed {
                    index.set_pin(*k, m.version(), tail);
                }
                for k in &op.keys {
                    index.unlock(k, tx_id);
                }
                self.txs.mark_dnl(tx_id, DNL_UNLOCKED, DNL_UNLOCKING);
                self.txs.set(tx_id, TxState::Finished);
            }
            DnlStep::Readable => {
                for (k, m) in installed {
                    index.set_pin(*k, m.version(), tail);
                    index.raise_readable(k, tx_id);
                }
                self.txs.mark_dnl(tx_id, DNL_READABLE, DNL_INSTALLING);
            }
        }
        self.release(slot);
        reply(io, step.ack_kind(), src, tx_id, ReplyStatus::Ok);
    }
}
