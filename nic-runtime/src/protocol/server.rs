//! Primary and backup roles of Xenic's OCC (Xenic §4.2): handle EXECUTE,
//! VALIDATE, LOG, COMMIT and ABORT from coordinators.
//!
//! Reads that miss the NIC index's cache go to the host table by DMA through a
//! [`TableLookup`] (Xenic §4.1.3: d_i + k slots, then the rest up to D_m, then the
//! overflow chain). Each outstanding request is a `ServerOp` resumed by DMA
//! completions; objects found are cached. `server/lookups.rs` holds that DMA path,
//! `server/append.rs` the LOG, COMMIT and ABORT-record path, `server/dnl.rs`
//! and `server/dnl_steps.rs` the Dandelion skeleton's Get, Lock, Replicate,
//! Unlock and Readable, `server/abort.rs`
//! the ABORT of both rounds of an abort after LOG, `server/room.rs` the room an
//! insert reserves before the commit point ([`Room`]), `server/txs.rs` the
//! newest generation seen per coordinator slot (late requests are refused).
//!
//! Correctness of reads that race commits: a key pinned in the NIC index is read
//! from there; otherwise every commit of it before the DMA was submitted has been
//! applied by the host, so the DMA returns a committed value no older than the
//! submission time. Validation therefore fixes each read at its submission time,
//! which is after all of the transaction's locks were taken.
//!
//! Every request gets exactly one answer (a rule the fuzz targets check): `Ok`,
//! or a [`ReplyStatus`] naming why it was refused — a lock conflict, a failed
//! validation, a value or response too large, a DMA or host-decode failure, no
//! free server slot, or a request that breaks a protocol rule. Nothing a peer
//! sends panics the node. A host log that refuses an append is the one
//! condition this node cannot continue from: the request is still answered, and
//! [`Server::fatal`] says why the node must stop.

mod abort;
mod append;
mod dnl;
mod dnl_recovery;
mod dnl_steps;
mod get_one;
mod lookups;
mod orphans;
mod rebuild;
mod room;
mod txs;

pub(crate) use get_one::refuse_get_one;
pub use rebuild::WaitingAnswer;
pub use room::{fits, Room, RoomError, RESERVATIONS_MAX, ROOM_KEYS_UNLIMITED};

use super::Io;
use crate::dma::DmaRead;
use crate::index::{NicIndex, TableLookup};
use crate::placement::NODES_MAX;
use crate::protocol::coordinator::TX_INFLIGHT_MAX;
use splitkv_layout::log_record::LogKind;
use splitkv_layout::wire::{
    Body, KeyList, MsgKind, NodeId, NodeMask, ReplyStatus, VersionList, ITEM_FIXED_BYTES,
    MESSAGE_BYTES_MAX,
};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, TxId};
use std::collections::VecDeque;
use txs::{TxState, TxTable};

/// Most server requests in flight on one node. A coordinator has at most
/// [`TX_INFLIGHT_MAX`] transactions in flight and each has at most one request
/// outstanding at a node (phases run one after another; ABORT needs no slot),
/// so this bound is not reached by well-behaved peers; a request beyond it is
/// refused with [`ReplyStatus::Busy`]. Slots are allocated as first needed.
pub const SERVER_OPS_MAX: usize = NODES_MAX * TX_INFLIGHT_MAX;

/// Bytes of an EXECUTE response besides its items: transaction id (8),
/// status (1), item count (2).
const EXECUTE_RESP_FIXED_BYTES: usize = 8 + 1 + 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpKind {
    Execute,
    Validate,
    Log,
    Commit,
    /// Appending a decision record (ABORT after a LOG, or a decision
    /// recovery made); no answer.
    Decision,
    /// A GetOne's read (`server/get_one.rs`): one key, no lock.
    GetOne,
    /// A Dnl Get's lock-free reads (`server/dnl.rs`).
    DnlGet,
    /// A Dnl Lock's version reads, its locks held (`server/dnl.rs`).
    DnlLock,
    /// Appending the records of a Dnl step (`server/dnl_steps.rs`).
    DnlAppend(dnl::DnlStep),
}

#[derive(Debug)]
struct ServerOp {
    gen: u32,
    active: bool,
    kind: OpKind,
    src: NodeId,
    tx_id: TxId,
    keys: Vec<Key>,
    n_reads: usize,
    expect: Vec<u64>,
    metas: Vec<ObjectMeta>,
    values: Vec<Vec<u8>>,
    lookups: Vec<Option<TableLookup>>,
    stamps: Vec<u32>,
    queued: Vec<Option<([DmaRead; 2], usize)>>,
    pending: usize,
    /// `Ok`, or why the request fails (the first failure wins).
    status: ReplyStatus,
    entry: Vec<u8>,
    /// A LOG append's transaction decided here while its records were
    /// still being appended: the decision record to append after them
    /// ([`Server::decide_logged`]). Kept with the append rather than read
    /// back from the per-slot table, which a newer transaction of the same
    /// coordinator slot may overwrite before the append completes.
    decision: Option<LogKind>,
    /// A Dnl Lock's `lock_shards` (recovery evidence, held once its
    /// versions checked).
    shards: NodeMask,
    /// A Dnl Lock's shards of the values it carries (recovery evidence).
    value_shards: NodeMask,
}

impl ServerOp {
    fn new() -> ServerOp {
        ServerOp {
            gen: 0,
            active: false,
            kind: OpKind::Execute,
            src: 0,
            tx_id: TxId::default(),
            keys: Vec::new(),
            n_reads: 0,
            expect: Vec::new(),
            metas: Vec::new(),
            values: Vec::new(),
            lookups: Vec::new(),
            stamps: Vec::new(),
            queued: Vec::new(),
            pending: 0,
            status: ReplyStatus::Ok,
            entry: Vec::new(),
            decision: None,
            shards: NodeMask::EMPTY,
            value_shards: NodeMask::EMPTY,
        }
    }

    /// Records a failure; the first reason is the one reported.
    fn fail(&mut self, why: ReplyStatus) {
        if self.status.is_ok() {
            self.status = why;
        }
    }
}

/// Counters of the server role.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// EXECUTEs refused for a lock conflict.
    pub lock_conflicts: u64,
    /// VALIDATEs that failed (a read changed or is locked).
    pub validation_failures: u64,
    /// Lookups answered from the NIC index.
    pub index_hits: u64,
    /// DMA read vectors submitted.
    pub dma_reads: u64,
    /// DMA reads after the first of a lookup (adjacent, overflow, torn re-reads).
    pub lookup_rereads: u64,
    /// Host-log appends (LOG or COMMIT entries).
    pub log_appends: u64,
    /// Lookups failed because host memory did not decode.
    pub host_decode_errors: u64,
    /// DMA requests refused at submission or failed at completion (other than
    /// "queue full", which is retried).
    pub dma_errors: u64,
    /// Requests refused for want of a free server slot ([`SERVER_OPS_MAX`]).
    pub busy_refusals: u64,
    /// Requests refused as too large (a value over the node's limit, or an
    /// EXECUTE response that cannot fit a packet).
    pub too_large: u64,
    /// Requests refused for breaking a protocol rule (planted metadata bits,
    /// a COMMIT for a key not locked by its transaction).
    pub malformed: u64,
    /// EXECUTEs refused with [`ReplyStatus::TableFull`]: their inserts would
    /// pass the shard's quota ([`Room`]).
    pub table_full: u64,
    /// EXECUTE, LOG or COMMIT requests refused (or, for a duplicate COMMIT
    /// being appended, dropped) because their transaction already finished
    /// here or a newer one of its coordinator slot was seen: late or
    /// duplicated messages (the orphan lock).
    pub late_requests: u64,
    /// EXECUTE reads by DMA that found, at completion, a newer committed
    /// version installed in the NIC index meanwhile, and returned it.
    pub refreshed_reads: u64,
    /// Locks released because their transaction's coordinator crashed
    /// before it could reach the commit point (crash recovery).
    pub orphan_locks_released: u64,
    /// Transactions whose LOG was here that crash recovery decided
    /// ([`Server::apply_recovered`]).
    pub recovered_decisions: u64,
    /// LOGs refused because they arrived during a recovery epoch
    /// ([`Server::refuse_log`]).
    pub refused_recovering: u64,
    /// ABORT-after-LOG requests handled (round 1 of the two-round abort,
    /// duplicates included); each is acknowledged.
    pub abort_log_requests: u64,
    /// GetOne requests taken (each answered once; `server/get_one.rs`).
    pub get_ones: u64,
    /// GetOnes refused because their key was locked (or its READABLE bit
    /// was down).
    pub get_one_locked: u64,
    /// Dnl requests taken (Get, Lock, Replicate, Unlock, Readable;
    /// `server/dnl.rs`), duplicates and refusals included.
    pub dnl_requests: u64,
}

/// The server role of one node.
#[derive(Debug)]
pub struct Server {
    ops: Vec<ServerOp>,
    free: Vec<usize>,
    deferred: VecDeque<(usize, u32)>,
    reads: Vec<DmaRead>,
    stats: ServerStats,
    fatal: Option<String>,
    room: Room,
    /// Newest generation and state per coordinator slot (`server/txs.rs`).
    txs: TxTable,
    /// Decision records waiting for a free slot (`server/append.rs`).
    decisions_waiting: VecDeque<(NodeId, TxId, LogKind)>,
    /// The host log's tail after the newest completed append.
    appended_tail: u64,
}

fn token(slot: usize, gen: u32, idx: usize) -> u64 {
    ((slot as u64) << 40) | (((gen & 0xFF_FFFF) as u64) << 16) | idx as u64
}

fn untoken(t: u64) -> (usize, u32, usize) {
    (
        (t >> 40) as usize,
        ((t >> 16) & 0xFF_FFFF) as u32,
        (t & 0xFFFF) as usize,
    )
}

/// Whether read-set key `key` is locked by a transaction other than `tx_id`:
/// the lock test of a read at EXECUTE and of VALIDATE (Xenic §4.2 steps 1, 3).
#[inline]
fn read_locked(index: &NicIndex, key: &Key, tx_id: TxId) -> bool {
    // Mutation switches (the mutation test): the checkers must fail
    // when a read-set lock is ignored or read validation is skipped.
    if cfg!(splitkv_mutation = "ignore_read_locks")
        || cfg!(splitkv_mutation = "skip_read_validation")
    {
        return false;
    }
    index.lock_holder(key).is_some_and(|h| h != tx_id)
}

/// Whether a read-set key still has the version the transaction read
/// (VALIDATE, Xenic §4.2 step 3).
#[inline]
fn read_version_unchanged(now: u64, read: u64) -> bool {
    // Mutation switch (the mutation test): the checkers must fail
    // when read validation is skipped.
    if cfg!(splitkv_mutation = "skip_read_validation") {
        return true;
    }
    now == read
}

/// Reserves room for the write-set keys of the EXECUTE in `op` that were
/// found absent (all its locks held, every read done), or fails it with
/// [`ReplyStatus::TableFull`] (see [`Room`]; a full reservation table is
/// [`ReplyStatus::Busy`]).
fn reserve_inserts(room: &mut Room, stats: &mut ServerStats, op: &mut ServerOp) {
    // A tombstone (DELETED, a version) holds its slot: an insert over it
    // takes no new room.
    let absent = op.keys[op.n_reads..]
        .iter()
        .zip(&op.metas[op.n_reads..])
        .filter(|(_, m)| m.is_deleted() && m.version() == 0)
        .map(|(k, _)| k);
    match room.reserve(op.tx_id, absent) {
        Ok(()) => {}
        Err(RoomError::Full { .. }) => {
            stats.table_full += 1;
            op.fail(ReplyStatus::TableFull);
        }
        Err(RoomError::TooManyReservations) => {
            stats.busy_refusals += 1;
            op.fail(ReplyStatus::Busy);
        }
    }
}

/// Whether the EXECUTE response for `keys` keys, each value up to
/// `value_bytes_max` bytes, fits one message of at most
/// [`MESSAGE_BYTES_MAX`] body bytes (fragmented below the protocol when
/// larger than a packet). The server checks this before it locks or reads
/// anything (a rule the fuzz targets check: refused with
/// [`ReplyStatus::TooLarge`] before it runs, not a panic when it answers).
pub fn execute_resp_fits(keys: usize, value_bytes_max: usize) -> bool {
    let items = keys.saturating_mul(ITEM_FIXED_BYTES + value_bytes_max);
    EXECUTE_RESP_FIXED_BYTES + items <= MESSAGE_BYTES_MAX
}

const ABSENT: ObjectMeta = ObjectMeta(ObjectFlags::DELETED.bits());

impl Default for Server {
    fn default() -> Self {
        Server::new()
    }
}

impl Server {
    /// A server with no requests in flight.
    pub fn new() -> Server {
        Server {
            ops: Vec::new(),
            free: Vec::new(),
            deferred: VecDeque::new(),
            reads: Vec::with_capacity(1),
            stats: ServerStats::default(),
            fatal: None,
            room: Room::new(),
            txs: TxTable::new(),
            decisions_waiting: VecDeque::new(),
            appended_tail: 0,
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    /// Requests in flight.
    pub fn inflight(&self) -> usize {
        self.ops.len() - self.free.len()
    }

    /// Why this node must stop, if it must: its host log refused an append
    /// (other than "full", which the DMA engine retries), so a write it
    /// installed or was asked to keep cannot reach its host table. The request
    /// was answered negatively; the driver stops the node with this message.
    pub fn fatal(&self) -> Option<&str> {
        self.fatal.as_deref()
    }

    /// The room of the shard this node is primary of (quota, key count,
    /// reservations; see [`Room`]).
    pub fn room(&self) -> &Room {
        &self.room
    }

    /// The room, mutably: to set the quota and add loaded keys while the
    /// node does not run.
    pub fn room_mut(&mut self) -> &mut Room {
        &mut self.room
    }

    fn alloc(&mut self, kind: OpKind, src: NodeId, tx_id: TxId) -> Option<usize> {
        let slot = match self.free.pop() {
            Some(s) => s,
            None if self.ops.len() < SERVER_OPS_MAX => {
                self.ops.push(ServerOp::new());
                self.ops.len() - 1
            }
            None => {
                self.stats.busy_refusals += 1;
                return None;
            }
        };
        let op = &mut self.ops[slot];
        op.gen = op.gen.wrapping_add(1) & 0xFF_FFFF;
        op.active = true;
        op.kind = kind;
        op.src = src;
        op.tx_id = tx_id;
        op.keys.clear();
        op.expect.clear();
        op.metas.clear();
        op.lookups.clear();
        op.stamps.clear();
        op.queued.clear();
        op.n_reads = 0;
        op.pending = 0;
        op.status = ReplyStatus::Ok;
        op.entry.clear();
        op.decision = None;
        op.shards = NodeMask::EMPTY;
        op.value_shards = NodeMask::EMPTY;
        Some(slot)
    }

    fn release(&mut self, slot: usize) {
        self.ops[slot].active = false;
        self.free.push(slot);
    }

    /// Handles one request message from a coordinator. Responses are not
    /// requests: one reaching here is counted as malformed and dropped.
    pub fn handle(&mut self, io: &mut Io, index: &mut NicIndex, src: NodeId, body: &Body<'_>) {
        match *body {
            Body::Execute {
                tx_id,
                reads,
                locks,
            } => self.execute(io, index, src, tx_id, reads, locks),
            Body::Validate { tx_id, items } => self.validate(io, index, src, tx_id, items),
            Body::Log {
                tx_id,
                write_shards,
                items,
            } => match self.txs.state(tx_id) {
                None | Some(TxState::Finished) => {
                    self.stats.late_requests += 1;
                    io.w.ack(MsgKind::LogAck, tx_id, ReplyStatus::Malformed);
                    io.send(src);
                }
                // A duplicate (a retry): its records are being appended (the
                // first copy answers) or are in the host log (answered now),
                // never appended twice.
                Some(TxState::Logging) => self.stats.late_requests += 1,
                Some(TxState::Logged | TxState::Committing) => {
                    self.stats.late_requests += 1;
                    io.w.ack(MsgKind::LogAck, tx_id, ReplyStatus::Ok);
                    io.send(src);
                }
                Some(TxState::Active) => {
                    self.append(io, index, OpKind::Log, src, (tx_id, write_shards), items)
                }
            },
            // A COMMIT after an ABORT that only released keys it did not
            // write (`Finished`) is still checked against its locks.
            Body::Commit { tx_id, items } => match self.txs.state(tx_id) {
                // Being appended: the first one's acknowledgement answers.
                Some(TxState::Committing) => self.stats.late_requests += 1,
                None => {
                    self.stats.late_requests += 1;
                    io.w.ack(MsgKind::CommitAck, tx_id, ReplyStatus::Malformed);
                    io.send(src);
                }
                Some(_) => {
                    let tx = (tx_id, NodeMask::EMPTY);
                    self.append(io, index, OpKind::Commit, src, tx, items)
                }
            },
            Body::Abort { tx_id, keys } => self.abort(io, index, src, tx_id, keys),
            Body::AbortLog { tx_id } => self.abort_log(io, index, src, tx_id),
            Body::Get { .. }
            | Body::Lock { .. }
            | Body::Replicate { .. }
            | Body::Unlock { .. }
            | Body::Readable { .. } => self.handle_dnl(io, index, src, body),
            _ => self.stats.malformed += 1,
        }
    }

    /// Answers an EXECUTE with a refusal and no items.
    /// The refusal decides the transaction (its coordinator aborts it), so it
    /// is finished here: a late copy of the EXECUTE takes no locks.
    fn refuse_execute(&mut self, io: &mut Io, src: NodeId, tx_id: TxId, why: ReplyStatus) {
        if self.txs.state(tx_id) == Some(TxState::Active) {
            self.txs.set(tx_id, TxState::Finished);
        }
        io.w.begin_execute_resp(tx_id, why);
        io.send(src);
    }

    /// Step 1 at a primary: lock the write set (no-wait), then read everything.
    /// Refused before anything is locked if its response could not fit a packet.
    fn execute(
        &mut self,
        io: &mut Io,
        index: &mut NicIndex,
        src: NodeId,
        tx_id: TxId,
        reads: KeyList<'_>,
        locks: KeyList<'_>,
    ) {
        if !self.txs.live(tx_id) {
            // Late or duplicated after its transaction finished here: taking
            // its locks would leave them with nobody to release them.
            self.stats.late_requests += 1;
            return self.refuse_execute(io, src, tx_id, ReplyStatus::Malformed);
        }
        if self.txs.state(tx_id) == Some(TxState::Active) {
            self.txs.set(tx_id, TxState::Active);
        }
        let keys = reads.len() + locks.len();
        if !execute_resp_fits(keys, io.value_bytes_max) {
            self.stats.too_large += 1;
            return self.refuse_execute(io, src, tx_id, ReplyStatus::TooLarge);
        }
        if locks
            .iter()
            .next()
            .is_some_and(|k| index.lock_holder(&k) == Some(tx_id))
        {
            // A duplicate of this live transaction's EXECUTE: its locks are
            // held already, and its first copy answers.
            self.stats.late_requests += 1;
            io.w.begin_execute_resp(tx_id, ReplyStatus::LockConflict);
            return io.send(src);
        }
        let mut taken = 0;
        let mut conflict = false;
        for k in locks.iter() {
            if index.lock_holder(&k) == Some(tx_id) || !index.try_lock(k, tx_id) {
                // Held by another transaction (or a duplicate key): no-wait abort.
                conflict = true;
                break;
            }
            taken += 1;
        }
        if !conflict {
            conflict = reads.iter().any(|k| read_locked(index, &k, tx_id));
        }
        if conflict {
            for k in locks.iter().take(taken) {
                index.unlock(&k, tx_id);
            }
            self.stats.lock_conflicts += 1;
            return self.refuse_execute(io, src, tx_id, ReplyStatus::LockConflict);
        }
        let Some(slot) = self.alloc(OpKind::Execute, src, tx_id) else {
            for k in locks.iter() {
                index.unlock(&k, tx_id);
            }
            return self.refuse_execute(io, src, tx_id, ReplyStatus::Busy);
        };
        let op = &mut self.ops[slot];
        op.keys.extend(reads.iter());
        op.n_reads = reads.len();
        op.keys.extend(locks.iter());
        self.start_lookups(io, index, slot);
    }

    /// Step 3 at a primary: every read version unchanged and unlocked.
    fn validate(
        &mut self,
        io: &mut Io,
        index: &mut NicIndex,
        src: NodeId,
        tx_id: TxId,
        items: VersionList<'_>,
    ) {
        if items.iter().any(|(k, _)| read_locked(index, &k, tx_id)) {
            self.stats.validation_failures += 1;
            io.w.validate_resp(tx_id, ReplyStatus::ValidationFailed);
            io.send(src);
            return;
        }
        let Some(slot) = self.alloc(OpKind::Validate, src, tx_id) else {
            io.w.validate_resp(tx_id, ReplyStatus::Busy);
            io.send(src);
            return;
        };
        let op = &mut self.ops[slot];
        for (k, v) in items.iter() {
            op.keys.push(k);
            op.expect.push(v);
        }
        op.n_reads = op.keys.len();
        self.start_lookups(io, index, slot);
    }

    /// Answers an EXECUTE or VALIDATE whose reads are all done (or failed).
    /// A failed EXECUTE releases the locks it took.
    fn finish(&mut self, io: &mut Io, index: &mut NicIndex, slot: usize) {
        if matches!(self.ops[slot].kind, OpKind::DnlGet | OpKind::DnlLock) {
            return self.finish_dnl_reads(io, index, slot);
        }
        let op = &mut self.ops[slot];
        match op.kind {
            OpKind::Execute => {
                if op.status.is_ok() {
                    reserve_inserts(&mut self.room, &mut self.stats, op);
                }
                if !op.status.is_ok() {
                    for k in &op.keys[op.n_reads..] {
                        index.unlock(k, op.tx_id);
                    }
                    self.txs.set(op.tx_id, TxState::Finished);
                    io.w.begin_execute_resp(op.tx_id, op.status);
                } else {
                    io.w.begin_execute_resp(op.tx_id, ReplyStatus::Ok);
                    for i in 0..op.keys.len() {
                        io.w.push_item(&op.keys[i], op.metas[i], &op.values[i]);
                    }
                }
            }
            OpKind::Validate => {
                let unchanged = (0..op.keys.len()).all(|i| {
                    read_version_unchanged(op.metas[i].version(), op.expect[i])
                        && !read_locked(index, &op.keys[i], op.tx_id)
                });
                if op.status.is_ok() && !unchanged {
                    op.status = ReplyStatus::ValidationFailed;
                    self.stats.validation_failures += 1;
                }
                io.w.validate_resp(op.tx_id, op.status);
            }
            OpKind::GetOne => {
                io.w.begin_get_one_resp(op.tx_id, op.status);
                if op.status.is_ok() {
                    io.w.push_item(&op.keys[0], op.metas[0], &op.values[0]);
                }
            }
            OpKind::Log
            | OpKind::Commit
            | OpKind::Decision
            | OpKind::DnlGet
            | OpKind::DnlLock
            | OpKind::DnlAppend(_) => {
                unreachable!("appends finish in finish_append, Dnl reads in finish_dnl_reads")
            }
        }
        io.send(op.src);
        self.release(slot);
    }
}
