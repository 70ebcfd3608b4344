//! Primary and backup roles of Xenic's OCC (Xenic §4.2): handle EXECUTE,
//! VALIDATE, LOG, COMMIT and ABORT from coordinators.
//!
//! Reads that miss the NIC index's cache go to the host table by DMA through a
//! [`Lookup`] (Xenic §4.1.3: d_i + k slots, then the rest up to D_m, then the
//! overflow chain). Each outstanding request is a `ServerOp` resumed by DMA
//! completions; objects found are cached.
//!
//! Correctness of reads that race commits: a key pinned in the NIC index is read
//! from there; otherwise every commit of it before the DMA was submitted has been
//! applied by the host, so the DMA returns a committed value no older than the
//! submission time. Validation therefore fixes each read at its submission time,
//! which is after all of the transaction's locks were taken.

use super::Io;
use crate::dma::{DmaCompletion, DmaDone, DmaError, DmaRead, HostMemoryError};
use crate::index::{Next, NicIndex, TableLookup};
use crate::placement::NODES_MAX;
use crate::protocol::coordinator::TX_INFLIGHT_MAX;
use splitkv_layout::log_record::{LogKind, LogRecord};
use splitkv_layout::wire::{Body, ExecStatus, ItemList, KeyList, MsgKind, NodeId, VersionList};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
use std::collections::VecDeque;

/// Most server requests in flight on one node. A coordinator has at most
/// [`TX_INFLIGHT_MAX`] transactions in flight and each has at most one request
/// outstanding at a node (phases run one after another; ABORT needs no slot),
/// so this bound is never reached. Slots are allocated as first needed.
pub const SERVER_OPS_MAX: usize = NODES_MAX * TX_INFLIGHT_MAX;
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpKind {
    Execute,
    Validate,
    Log,
    Commit,
}

#[derive(Debug)]
struct ServerOp {
    gen: u32,
    active: bool,
    kind: OpKind,
    src: NodeId,
    tx_id: u64,
    keys: Vec<Key>,
    n_reads: usize,
    expect: Vec<u64>,
    metas: Vec<ObjectMeta>,
    values: Vec<Vec<u8>>,
    lookups: Vec<Option<TableLookup>>,
    stamps: Vec<u32>,
    queued: Vec<Option<([DmaRead; 2], usize)>>,
    pending: usize,
    failed: bool,
    entry: Vec<u8>,
}

impl ServerOp {
    fn new() -> ServerOp {
        ServerOp {
            gen: 0,
            active: false,
            kind: OpKind::Execute,
            src: 0,
            tx_id: 0,
            keys: Vec::new(),
            n_reads: 0,
            expect: Vec::new(),
            metas: Vec::new(),
            values: Vec::new(),
            lookups: Vec::new(),
            stamps: Vec::new(),
            queued: Vec::new(),
            pending: 0,
            failed: false,
            entry: Vec::new(),
        }
    }
}

/// Counters of the server role.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// EXECUTEs refused for a lock conflict.
    pub lock_conflicts: u64,
    /// VALIDATEs that failed.
    pub validation_failures: u64,
    /// Lookups answered from the NIC index.
    pub index_hits: u64,
    /// DMA read vectors submitted.
    pub dma_reads: u64,
    /// DMA reads after the first of a lookup (adjacent, overflow, torn re-reads).
    pub lookup_rereads: u64,
    /// Host-log appends (LOG or COMMIT entries).
    pub log_appends: u64,
    /// Requests failed because host memory did not decode.
    pub host_decode_errors: u64,
}

/// The server role of one node.
#[derive(Debug)]
pub struct Server {
    ops: Vec<ServerOp>,
    free: Vec<usize>,
    deferred: VecDeque<(usize, u32)>,
    reads: Vec<DmaRead>,
    stats: ServerStats,
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
fn read_locked(index: &NicIndex, key: &Key, tx_id: u64) -> bool {
    // Mutation switches (issue 9 §1's mutation test): the checkers must fail
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
    // Mutation switch (issue 9 §1's mutation test): the checkers must fail
    // when read validation is skipped.
    if cfg!(splitkv_mutation = "skip_read_validation") {
        return true;
    }
    now == read
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

    fn alloc(&mut self, kind: OpKind, src: NodeId, tx_id: u64) -> Option<usize> {
        let slot = match self.free.pop() {
            Some(s) => s,
            None if self.ops.len() < SERVER_OPS_MAX => {
                self.ops.push(ServerOp::new());
                self.ops.len() - 1
            }
            None => return None,
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
        op.failed = false;
        op.entry.clear();
        Some(slot)
    }

    fn release(&mut self, slot: usize) {
        self.ops[slot].active = false;
        self.free.push(slot);
    }

    /// Handles one request message from a coordinator.
    pub fn handle(&mut self, io: &mut Io, index: &mut NicIndex, src: NodeId, body: &Body<'_>) {
        match *body {
            Body::Execute {
                tx_id,
                reads,
                locks,
            } => self.execute(io, index, src, tx_id, reads, locks),
            Body::Validate { tx_id, items } => self.validate(io, index, src, tx_id, items),
            Body::Log { tx_id, items } => self.append(io, index, OpKind::Log, src, tx_id, items),
            Body::Commit { tx_id, items } => {
                self.append(io, index, OpKind::Commit, src, tx_id, items)
            }
            Body::Abort { tx_id, keys } => {
                for k in keys.iter() {
                    index.unlock(&k, tx_id);
                }
            }
            _ => unreachable!("responses go to the coordinator"),
        }
    }

    /// Step 1 at a primary: lock the write set (no-wait), then read everything.
    fn execute(
        &mut self,
        io: &mut Io,
        index: &mut NicIndex,
        src: NodeId,
        tx_id: u64,
        reads: KeyList<'_>,
        locks: KeyList<'_>,
    ) {
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
            io.w.begin_execute_resp(tx_id, ExecStatus::Conflict);
            io.send(src);
            return;
        }
        let Some(slot) = self.alloc(OpKind::Execute, src, tx_id) else {
            for k in locks.iter() {
                index.unlock(&k, tx_id);
            }
            io.w.begin_execute_resp(tx_id, ExecStatus::Conflict);
            io.send(src);
            return;
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
        tx_id: u64,
        items: VersionList<'_>,
    ) {
        let locked = items.iter().any(|(k, _)| read_locked(index, &k, tx_id));
        let slot = if locked {
            None
        } else {
            self.alloc(OpKind::Validate, src, tx_id)
        };
        let Some(slot) = slot else {
            self.stats.validation_failures += 1;
            io.w.validate_resp(tx_id, false);
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

    fn start_lookups(&mut self, io: &mut Io, index: &mut NicIndex, slot: usize) {
        let n = self.ops[slot].keys.len();
        {
            let op = &mut self.ops[slot];
            op.metas.resize(n, ABSENT);
            if op.values.len() < n {
                op.values.resize_with(n, Vec::new);
            }
            op.lookups.resize(n, None);
            op.stamps.resize(n, 0);
            op.queued.resize(n, None);
        }
        for k in self.ops[slot].keys.iter() {
            index.prefetch(k);
        }
        for i in 0..n {
            let key = self.ops[slot].keys[i];
            if let Some(c) = index.cached(&key) {
                self.stats.index_hits += 1;
                let op = &mut self.ops[slot];
                op.metas[i] = c.meta;
                op.values[i].clear();
                op.values[i].extend_from_slice(&c.value);
            } else {
                let stamp = index.read_stamp(&key);
                let (lookup, step) = TableLookup::start(index, key);
                let op = &mut self.ops[slot];
                op.lookups[i] = Some(lookup);
                op.stamps[i] = stamp;
                op.pending += 1;
                let Next::Read(v, n) = step else {
                    unreachable!("a lookup starts with a read")
                };
                self.submit(io, slot, i, v, n);
            }
        }
        if self.ops[slot].pending == 0 {
            self.finish(io, index, slot);
        }
    }

    fn submit(&mut self, io: &mut Io, slot: usize, idx: usize, v: [DmaRead; 2], n: usize) {
        let gen = self.ops[slot].gen;
        self.reads.clear();
        self.reads.extend_from_slice(&v[..n]);
        self.stats.dma_reads += 1;
        match io
            .dma
            .submit_read(io.now, token(slot, gen, idx), &self.reads)
        {
            Ok(()) => {}
            Err(DmaError::QueueFull) => {
                // Retried from `retry_deferred`.
                self.ops[slot].queued[idx] = Some((v, n));
                self.deferred.push_back((slot, gen));
            }
            Err(_) => {
                self.stats.host_decode_errors += 1;
                let op = &mut self.ops[slot];
                op.failed = true;
                op.pending -= 1;
            }
        }
    }

    /// Resubmits requests the DMA engine refused while full.
    pub fn retry_deferred(&mut self, io: &mut Io, index: &mut NicIndex) {
        let n = self.deferred.len();
        for _ in 0..n {
            let Some((slot, gen)) = self.deferred.pop_front() else {
                break;
            };
            if !self.ops[slot].active || self.ops[slot].gen != gen {
                continue;
            }
            match self.ops[slot].kind {
                OpKind::Log | OpKind::Commit => self.submit_append(io, slot),
                OpKind::Execute | OpKind::Validate => {
                    for i in 0..self.ops[slot].keys.len() {
                        if let Some((v, n)) = self.ops[slot].queued[i].take() {
                            self.submit(io, slot, i, v, n);
                        }
                    }
                    if self.ops[slot].pending == 0 {
                        self.finish(io, index, slot);
                    }
                }
            }
        }
    }

    /// Resumes the request a DMA completion belongs to.
    pub fn on_dma(&mut self, io: &mut Io, index: &mut NicIndex, c: &DmaCompletion) {
        let (slot, gen, idx) = untoken(c.token);
        if slot >= self.ops.len() || !self.ops[slot].active || self.ops[slot].gen != gen {
            return;
        }
        match (&c.result, self.ops[slot].kind) {
            (Ok(DmaDone::Appended { tail }), OpKind::Log | OpKind::Commit) => {
                let tail = *tail;
                self.finish_append(io, index, slot, tail);
            }
            (Err(DmaError::Memory(HostMemoryError::Stale)), OpKind::Execute | OpKind::Validate) => {
                // The host table was resized under the lookup: start it over.
                let Some(lookup) = self.ops[slot].lookups.get_mut(idx).and_then(Option::as_mut)
                else {
                    return;
                };
                match lookup.restart(index) {
                    Next::Read(v, n) => {
                        self.stats.lookup_rereads += 1;
                        self.submit(io, slot, idx, v, n);
                    }
                    _ => {
                        let op = &mut self.ops[slot];
                        op.failed = true;
                        op.pending -= 1;
                        if op.pending == 0 {
                            self.finish(io, index, slot);
                        }
                    }
                }
            }
            (Ok(DmaDone::Read { start, len }), OpKind::Execute | OpKind::Validate) => {
                let data = &io.dma.data()[*start..*start + *len];
                let op = &mut self.ops[slot];
                let Some(lookup) = op.lookups.get_mut(idx).and_then(Option::as_mut) else {
                    return;
                };
                let next = match lookup.advance(index, data) {
                    Next::Read(v, n) => Some((v, n)),
                    Next::Found { meta, value } => {
                        op.metas[idx] = meta;
                        op.values[idx].clear();
                        op.values[idx].extend_from_slice(value);
                        index.cache_clean(op.keys[idx], meta, value, op.stamps[idx]);
                        None
                    }
                    Next::Absent => {
                        op.metas[idx] = ABSENT;
                        op.values[idx].clear();
                        None
                    }
                    Next::Failed(_) => {
                        self.stats.host_decode_errors += 1;
                        op.failed = true;
                        None
                    }
                };
                match next {
                    Some((v, n)) => {
                        self.stats.lookup_rereads += 1;
                        self.submit(io, slot, idx, v, n)
                    }
                    None => {
                        let op = &mut self.ops[slot];
                        op.pending -= 1;
                        if op.pending == 0 {
                            self.finish(io, index, slot);
                        }
                    }
                }
            }
            _ => {
                self.stats.host_decode_errors += 1;
                let op = &mut self.ops[slot];
                op.failed = true;
                match op.kind {
                    OpKind::Log | OpKind::Commit => {
                        panic!("host log append failed: {:?}", c.result)
                    }
                    _ => {
                        op.pending -= 1;
                        if op.pending == 0 {
                            self.finish(io, index, slot);
                        }
                    }
                }
            }
        }
    }

    fn finish(&mut self, io: &mut Io, index: &mut NicIndex, slot: usize) {
        let op = &self.ops[slot];
        match op.kind {
            OpKind::Execute => {
                if op.failed {
                    for k in &op.keys[op.n_reads..] {
                        index.unlock(k, op.tx_id);
                    }
                    io.w.begin_execute_resp(op.tx_id, ExecStatus::Conflict);
                } else {
                    io.w.begin_execute_resp(op.tx_id, ExecStatus::Ok);
                    for i in 0..op.keys.len() {
                        io.w.push_item(&op.keys[i], op.metas[i], &op.values[i]);
                    }
                }
            }
            OpKind::Validate => {
                let ok = !op.failed
                    && (0..op.keys.len()).all(|i| {
                        read_version_unchanged(op.metas[i].version(), op.expect[i])
                            && !read_locked(index, &op.keys[i], op.tx_id)
                    });
                if !ok {
                    self.stats.validation_failures += 1;
                }
                io.w.validate_resp(op.tx_id, ok);
            }
            OpKind::Log | OpKind::Commit => unreachable!("appends finish in finish_append"),
        }
        io.send(op.src);
        self.release(slot);
    }

    /// Steps 4 (backup, LOG) and 6 (primary, COMMIT): write the records to the host
    /// log by DMA. A primary installs the new values in its NIC index and unlocks
    /// right away, so later readers see them before the host applies the log.
    fn append(
        &mut self,
        io: &mut Io,
        index: &mut NicIndex,
        kind: OpKind,
        src: NodeId,
        tx_id: u64,
        items: ItemList<'_>,
    ) {
        let Some(slot) = self.alloc(kind, src, tx_id) else {
            panic!("server ops exhausted ({SERVER_OPS_MAX}): coordinators bound their transactions in flight");
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
            // NIC never reads an older copy from its host table.
            index.install_committed(it.key, it.meta, it.value);
            if kind == OpKind::Commit {
                index.unlock(&it.key, tx_id);
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

    fn submit_append(&mut self, io: &mut Io, slot: usize) {
        let op = &self.ops[slot];
        match io
            .dma
            .submit_log_append(io.now, token(slot, op.gen, 0), &op.entry)
        {
            Ok(()) => self.stats.log_appends += 1,
            Err(DmaError::QueueFull) => self.deferred.push_back((slot, op.gen)),
            Err(e) => panic!("host log append refused: {e}"),
        }
    }

    fn finish_append(&mut self, io: &mut Io, index: &mut NicIndex, slot: usize, tail: u64) {
        let op = &self.ops[slot];
        for (k, m) in op.keys.iter().zip(&op.metas) {
            index.set_pin(*k, m.version(), tail);
        }
        let ack = if op.kind == OpKind::Commit {
            MsgKind::CommitAck
        } else {
            MsgKind::LogAck
        };
        io.w.ack(ack, op.tx_id);
        io.send(op.src);
        self.release(slot);
    }
}
