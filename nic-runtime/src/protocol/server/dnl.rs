//! The Dnl skeleton's requests at a server (Dandelion §4.2; the server
//! actions of `tla/DnlSkeleton.tla`, one wire kind each): `Get` (TLA
//! `Read`, `ReadLocal`) and `Lock` (TLA `Lock`) here, `Replicate`, `Unlock`
//! and `Readable` in `server/dnl_steps.rs`. Read validation (TLA
//! `ValidateReads`) is the Xenic VALIDATE handler ([`Server::handle`]): read
//! keys unlocked by others, versions unchanged.
//!
//! Design A of the spec: every value a replica receives before it is
//! visible is a pending record in its host log ([`LogKind::Log`] records of
//! a Lock or a Replicate; [`LogKind::Lock`] or [`LogKind::Repl`] marker when
//! the step carried no value here). The host table changes only when the
//! decision record reaches that replica (the host worker applies a
//! transaction's pending records at its COMMIT record and drops them at its
//! ABORT record): at Unlock at a lock holder, or at Readable at a Dnl-4/2
//! backup. So nothing is rolled back and no value is copied between
//! replicas. A node that is both a lock holder and a backup
//! of the same transaction (Dnl-4, Dnl-2) gets a COMMIT record at its
//! Unlock and one at its Readable; the first to be appended (Dnl-2 sends
//! both at once) applies every pending record of t there, its LOCK and
//! REPL values alike (t is committed by then: both go out only after the
//! decision). Its READABLE bits stay down until the Readable and its locks
//! held until the Unlock, so a Get there reports those keys not clean
//! (the spec's `Unlock` installs those replicated values too).
//!
//! Per transaction the server keeps its Dnl marks in the per-slot table
//! (`server/txs.rs`: Locking, Locked, Replicating, Replicated, Unlocking,
//! Unlocked, Installing, Readable), which make every step idempotent: a
//! duplicate of a step in progress gets no answer of its own (the first
//! answers), of a step done the same `Ok`; a request of a superseded
//! generation is refused with [`ReplyStatus::Malformed`] and counted in
//! [`ServerStats::late_requests`](super::ServerStats::late_requests). Bad
//! input is refused with a typed status (a value over the limit
//! `TooLarge`, planted metadata or a broken rule `Malformed`), never a
//! panic.

use super::txs::{DnlHeld, TxState, DNL_LOCKED, DNL_LOCKING, DNL_UNLOCKED, DNL_UNLOCKING};
use super::{read_version_unchanged, OpKind, RoomError, Server};
use crate::index::NicIndex;
use crate::protocol::Io;
use splitkv_layout::log_record::{LogKind, LogRecord};
use splitkv_layout::wire::{
    Body, ItemList, KeyList, MsgKind, NodeId, NodeMask, RecordKind, ReplyStatus, VersionList,
    ITEMS_PER_MESSAGE_MAX, ITEM_FIXED_BYTES, MESSAGE_BYTES_MAX,
};
use splitkv_layout::{ObjectFlags, TxId};

/// Bytes of a GetResp besides its items: tx_id (8), status (1), clean bits
/// (8), item count (2).
const GET_RESP_FIXED_BYTES: usize = 8 + 1 + 8 + 2;

/// The Dnl step whose records an append carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DnlStep {
    /// A Lock's pending values (or marker), its versions checked.
    Lock,
    /// A Replicate's pending values (or marker).
    Replicate,
    /// An Unlock's decision record: COMMIT if `commit`, else ABORT.
    Unlock {
        /// Install (true) or drop (false).
        commit: bool,
    },
    /// A Readable's COMMIT record.
    Readable,
}

impl DnlStep {
    /// The reply kind of the step's request.
    pub(super) fn ack_kind(self) -> MsgKind {
        match self {
            DnlStep::Lock => MsgKind::LockResp,
            DnlStep::Replicate => MsgKind::ReplicateAck,
            DnlStep::Unlock { .. } => MsgKind::UnlockAck,
            DnlStep::Readable => MsgKind::ReadableAck,
        }
    }
}

/// Whether a GetResp of `keys` items of up to `value_bytes_max` bytes fits
/// one message, and its clean bits one `u64`.
pub fn get_resp_fits(keys: usize, value_bytes_max: usize) -> bool {
    let items = keys.saturating_mul(ITEM_FIXED_BYTES + value_bytes_max);
    keys <= ITEMS_PER_MESSAGE_MAX.min(64) && GET_RESP_FIXED_BYTES + items <= MESSAGE_BYTES_MAX
}

/// Sends the one-status reply `kind` of `tx_id` to `src`.
pub(super) fn reply(io: &mut Io, kind: MsgKind, src: NodeId, tx_id: TxId, status: ReplyStatus) {
    io.w.ack(kind, tx_id, status);
    io.send(src);
}

impl Server {
    /// Serves one Dnl request (module docs); any other body is left alone.
    pub(super) fn handle_dnl(
        &mut self,
        io: &mut Io,
        index: &mut NicIndex,
        src: NodeId,
        body: &Body<'_>,
    ) {
        self.stats.dnl_requests += 1;
        match *body {
            Body::Get { tx_id, keys } => self.get(io, index, src, tx_id, keys),
            Body::Lock {
                tx_id,
                lock_shards,
                reads,
                items,
            } => self.lock(io, index, src, (tx_id, lock_shards), reads, items),
            Body::Replicate {
                tx_id,
                write_shards,
                items,
            } => self.replicate(io, index, src, (tx_id, write_shards), items),
            Body::Unlock {
                tx_id,
                commit,
                keys,
                items,
            } => self.unlock(io, index, src, (tx_id, commit), keys, items),
            Body::Readable { tx_id, items } => self.readable(io, index, src, tx_id, items),
            _ => {}
        }
    }

    /// TLA `Read` / `ReadLocal` (Dandelion §4.2.1, §4.3): reads `keys` at
    /// this replica, lock-free, through the NIC index and the host table
    /// like an EXECUTE's reads, and answers every value and version even
    /// when locked or not READABLE; bit `i` of `clean` says item `i` was
    /// unlocked and readable when answered. Refused with `Unavailable` for a
    /// key this node does not replicate, `TooLarge` when the answer could
    /// not fit a message, `Busy` without a free slot. Keeps no per-transaction state.
    fn get(
        &mut self,
        io: &mut Io,
        index: &mut NicIndex,
        src: NodeId,
        tx_id: TxId,
        keys: KeyList<'_>,
    ) {
        let refusal = if !get_resp_fits(keys.len(), io.value_bytes_max) {
            self.stats.too_large += 1;
            Some(ReplyStatus::TooLarge)
        } else if keys.iter().any(|k| !io.placement.is_replica(io.node, &k)) {
            self.stats.malformed += 1;
            Some(ReplyStatus::Unavailable)
        } else {
            None
        };
        if let Some(why) = refusal {
            io.w.begin_get_resp(tx_id, why, 0);
            return io.send(src);
        }
        let Some(slot) = self.alloc(OpKind::DnlGet, src, tx_id) else {
            io.w.begin_get_resp(tx_id, ReplyStatus::Busy, 0);
            return io.send(src);
        };
        let op = &mut self.ops[slot];
        op.keys.extend(keys.iter());
        op.n_reads = op.keys.len();
        self.start_lookups(io, index, slot);
    }

    /// TLA `Lock`: locks every key of `reads` no-wait, then reads their
    /// versions and checks each against the version the transaction read;
    /// the written values (`items`, each a key of `reads`) become pending
    /// [`LogKind::Log`] records (a [`LogKind::Lock`] marker when there are
    /// none), appended once the versions checked; answered `Ok` once
    /// appended. Refused with `LockConflict` when a key is held (nothing
    /// stays locked), `ValidationFailed` when a version changed (its locks
    /// released), `TableFull` when the absent keys it locks at their primary
    /// would pass the shard's quota ([`Room`](super::Room)), `Malformed` for a late or superseded transaction, no keys,
    /// an item whose key is not among `reads` or planted metadata,
    /// `TooLarge` for values over the limit, `Busy` without a free slot. A
    /// refusal finishes the transaction here: a late copy locks nothing.
    /// `tx` is the transaction and every shard it locks (recovery evidence).
    fn lock(
        &mut self,
        io: &mut Io,
        index: &mut NicIndex,
        src: NodeId,
        tx: (TxId, NodeMask),
        reads: VersionList<'_>,
        items: ItemList<'_>,
    ) {
        let (tx_id, lock_shards) = tx;
        let marks = self.txs.dnl(tx_id).filter(|_| self.txs.live(tx_id));
        let Some(marks) = marks else {
            self.stats.late_requests += 1;
            return reply(io, MsgKind::LockResp, src, tx_id, ReplyStatus::Malformed);
        };
        if marks & (DNL_LOCKING | DNL_LOCKED | DNL_UNLOCKING | DNL_UNLOCKED) != 0 {
            // A duplicate: the first copy answers, or answered `Ok`.
            self.stats.late_requests += 1;
            if marks & DNL_LOCKED != 0 {
                reply(io, MsgKind::LockResp, src, tx_id, ReplyStatus::Ok);
            }
            return;
        }
        let checked = self.check_dnl_items(io, items).and_then(|()| {
            let named = |it: splitkv_layout::wire::Item<'_>| reads.iter().any(|(k, _)| k == it.key);
            if reads.is_empty() || !items.iter().all(named) {
                self.stats.malformed += 1;
                return Err(ReplyStatus::Malformed);
            }
            Ok(())
        });
        if let Err(why) = checked.and_then(|()| self.take_locks(index, tx_id, reads)) {
            self.txs.set(tx_id, TxState::Finished);
            return reply(io, MsgKind::LockResp, src, tx_id, why);
        }
        let Some(slot) = self.alloc(OpKind::DnlLock, src, tx_id) else {
            reads.iter().for_each(|(k, _)| {
                index.unlock(&k, tx_id);
            });
            self.txs.set(tx_id, TxState::Finished);
            return reply(io, MsgKind::LockResp, src, tx_id, ReplyStatus::Busy);
        };
        self.txs.mark_dnl(tx_id, DNL_LOCKING, 0);
        let value_shards = items
            .iter()
            .fold(NodeMask::EMPTY, |m, it| m.with(io.placement.shard(&it.key)));
        let op = &mut self.ops[slot];
        op.shards = lock_shards;
        op.value_shards = value_shards;
        for (k, v) in reads.iter() {
            op.keys.push(k);
            op.expect.push(v);
        }
        op.n_reads = op.keys.len();
        encode_pending(&mut op.entry, LogKind::Lock, tx_id, items);
        self.start_lookups(io, index, slot);
    }

    /// Locks every key of `reads` for `tx_id` (no-wait), or none of them:
    /// `LockConflict` when one is held (or named twice).
    fn take_locks(
        &mut self,
        index: &mut NicIndex,
        tx_id: TxId,
        reads: VersionList<'_>,
    ) -> Result<(), ReplyStatus> {
        for (taken, (k, _)) in reads.iter().enumerate() {
            if index.lock_holder(&k) == Some(tx_id) || !index.try_lock(k, tx_id) {
                for (k, _) in reads.iter().take(taken) {
                    index.unlock(&k, tx_id);
                }
                self.stats.lock_conflicts += 1;
                return Err(ReplyStatus::LockConflict);
            }
        }
        Ok(())
    }

    /// Checks the items of a Dnl request before anything changes: values
    /// within the node's limit and a host-log entry within
    /// [`log_entry_bytes_max`](splitkv_layout::log_record::log_entry_bytes_max) (`TooLarge`; a marker record is written only
    /// without items), metadata of a written value (`Malformed`).
    pub(super) fn check_dnl_items(
        &mut self,
        io: &Io,
        items: ItemList<'_>,
    ) -> Result<(), ReplyStatus> {
        self.check_written_items(io, items, |_| false)
    }

    /// Answers a Dnl Get whose reads are done, or checks a Dnl Lock's
    /// versions and appends its records (or refuses it, releasing its locks).
    pub(super) fn finish_dnl_reads(&mut self, io: &mut Io, index: &mut NicIndex, slot: usize) {
        let op = &mut self.ops[slot];
        let (tx_id, src) = (op.tx_id, op.src);
        if op.kind == OpKind::DnlGet {
            let clean = op.keys.iter().enumerate().fold(0u64, |c, (i, k)| {
                let ok = index.lock_holder(k).is_none() && index.is_readable(k);
                c | (u64::from(ok) << i)
            });
            io.w.begin_get_resp(tx_id, op.status, clean);
            if op.status.is_ok() {
                for i in 0..op.keys.len() {
                    io.w.push_item(&op.keys[i], op.metas[i], &op.values[i]);
                }
            }
            io.send(src);
            return self.release(slot);
        }
        if !self.txs.live(tx_id) {
            // Dropped by a recovery epoch while its versions were being
            // read (`server/dnl_recovery.rs`): its locks are gone, and the
            // reply of the old epoch would reach nobody.
            for k in &op.keys {
                index.unlock(k, tx_id);
            }
            return self.release(slot);
        }
        let changed = (0..op.keys.len())
            .any(|i| !read_version_unchanged(op.metas[i].version(), op.expect[i]));
        if op.status.is_ok() && changed {
            self.stats.validation_failures += 1;
            op.fail(ReplyStatus::ValidationFailed);
        }
        if op.status.is_ok() {
            // Room for inserts (`server/room.rs`), decided at the primary
            // under the locks: every locked key of this shard found absent
            // (one read and not written gives its reservation back at Unlock).
            let absent = op.keys.iter().zip(&op.metas).filter(|(k, m)| {
                m.flags().contains(ObjectFlags::DELETED) && io.placement.primary(k) == io.node
            });
            match self.room.reserve(tx_id, absent.map(|(k, _)| k)) {
                Ok(()) => {}
                Err(RoomError::Full { .. }) => {
                    self.stats.table_full += 1;
                    op.fail(ReplyStatus::TableFull);
                }
                Err(RoomError::TooManyReservations) => {
                    self.stats.busy_refusals += 1;
                    op.fail(ReplyStatus::Busy);
                }
            }
        }
        if !op.status.is_ok() {
            let status = op.status;
            for k in &op.keys {
                index.unlock(k, tx_id);
            }
            self.txs.mark_dnl(tx_id, 0, DNL_LOCKING);
            self.txs.set(tx_id, TxState::Finished);
            self.release(slot);
            return reply(io, MsgKind::LockResp, src, tx_id, status);
        }
        let shards = op
            .keys
            .iter()
            .fold(NodeMask::EMPTY, |m, k| m.with(io.placement.shard(k)));
        let (lock_shards, values) = (op.shards, op.value_shards);
        op.kind = OpKind::DnlAppend(DnlStep::Lock);
        let held = DnlHeld {
            values,
            locked: shards,
            repl: NodeMask::EMPTY,
        };
        self.txs
            .hold_dnl(tx_id, RecordKind::Lock, held, lock_shards);
        self.submit_append(io, slot);
    }
}

/// Encodes a step's pending records into `entry`: one [`LogKind::Log`]
/// record per item, or the step's `marker` record when there is none.
pub(super) fn encode_pending(
    entry: &mut Vec<u8>,
    marker: LogKind,
    tx_id: TxId,
    items: ItemList<'_>,
) {
    for it in items.iter() {
        LogRecord {
            kind: LogKind::Log,
            tx_id,
            key: it.key,
            meta: it.meta,
            value: it.value,
        }
        .encode(entry);
    }
    if items.is_empty() {
        LogRecord::decision(marker, tx_id).encode(entry);
    }
}
