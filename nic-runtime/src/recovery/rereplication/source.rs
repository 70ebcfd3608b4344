//! The copy state machine of one node (see the module docs): the copies it
//! runs as a shard's primary (snapshot, chunks in copy-transaction slots,
//! `Done`) and, when it is being copied, the `Done`s it waits for.

use super::{
    COPIES_MAX, COPY_CHUNKS_PER_EPOCH_MAX, COPY_CHUNK_BYTES_MAX, COPY_CHUNK_OBJECTS_MAX,
    COPY_CHUNK_RETRIES_MAX, COPY_OBJECTS_MAX, COPY_SLOTS_MAX,
};
use crate::placement::{Placement, PlacementView, NODES_MAX};
use crate::protocol::Io;
use crate::slots::TX_INFLIGHT_MAX;
use splitkv_layout::wire::{CopyMsg, Flow, MsgKind, NodeId, NodeMask, ReplyStatus};
use splitkv_layout::{Key, ObjectMeta, TxId};

/// The host side of a re-replication snapshot: a scan of the host table as it
/// is at the call. In-process drivers implement it over their host table;
/// a node whose NIC runtime runs apart from its host serves it over the
/// host rings (not yet).
pub trait ShardSnapshot {
    /// Calls `f` once for every object the host table holds now: its key,
    /// metadata (version) and value.
    fn for_each_object(&mut self, f: &mut dyn FnMut(Key, ObjectMeta, &[u8]));
}

impl<F: FnMut(&mut dyn FnMut(Key, ObjectMeta, &[u8]))> ShardSnapshot for F {
    fn for_each_object(&mut self, f: &mut dyn FnMut(Key, ObjectMeta, &[u8])) {
        self(f)
    }
}

/// Why a snapshot could not be taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// The shard holds more than [`COPY_OBJECTS_MAX`] objects.
    #[error("shard {shard} holds more than {COPY_OBJECTS_MAX} objects")]
    TooLarge {
        /// The shard.
        shard: NodeId,
    },
}

/// Counters of one node's copies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyStats {
    /// Copies begun here as a shard's primary.
    pub copies_begun: u64,
    /// Snapshots taken from the host table.
    pub snapshots: u64,
    /// Objects in those snapshots.
    pub snapshot_objects: u64,
    /// Chunks sent (LOG of a copy transaction), retries included.
    pub chunks_sent: u64,
    /// Chunks sent again after a refusal.
    pub chunk_retries: u64,
    /// Objects whose chunk was acknowledged (COMMIT appended at the receiver).
    pub objects_acked: u64,
    /// `Done` messages sent.
    pub done_sent: u64,
    /// Chunks that could not be queued (backlog full); tried again later.
    pub send_deferred: u64,
    /// Copies abandoned by a new configuration before they finished.
    pub abandoned: u64,
    /// Copies given up: snapshot too large, chunk refused too often, or
    /// the epoch's chunk budget spent.
    pub failed: u64,
    /// `Done` messages received that count (current epoch, a shard being
    /// copied here, from its primary).
    pub done_received: u64,
    /// `Done` messages of another epoch or shard, or from another node.
    pub done_stale: u64,
    /// Copy messages that did not decode.
    pub bad_messages: u64,
    /// Times this node reported itself caught up.
    pub caught_up: u64,
    /// Copies begun again from a new snapshot because the NIC runtime at
    /// one end restarted (its chunks and acknowledgements in flight were
    /// lost with the old incarnation's sessions).
    pub streams_restarted: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    NeedSnapshot,
    Streaming,
    Done,
    Failed,
}

#[derive(Debug)]
struct Source {
    shard: NodeId,
    to: NodeId,
    state: State,
    /// Snapshot objects: key, metadata, value offset and length in `values`.
    objects: Vec<(Key, ObjectMeta, u32, u32)>,
    values: Vec<u8>,
    /// Next object to put in a chunk.
    next: usize,
    acked: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Slot {
    #[default]
    Idle,
    /// A chunk (objects `from..to` of source `src`) in flight as `tx_id`.
    Busy {
        src: usize,
        from: u32,
        to: u32,
        tx_id: TxId,
        committing: bool,
        tries: u32,
    },
}

/// One node's re-replication copies: as source (a shard's primary) and as the
/// node being copied. A polled state machine; the runtime feeds it.
#[derive(Debug)]
pub struct Copies {
    node: NodeId,
    epoch: u32,
    chunks: u32,
    sources: Vec<Source>,
    slots: [Slot; COPY_SLOTS_MAX],
    /// Shards this node is being copied for, and who must send their `Done`.
    joining: NodeMask,
    primaries: [Option<NodeId>; NODES_MAX],
    done: NodeMask,
    caught_up: Option<u32>,
    enc: Vec<u8>,
    stats: CopyStats,
}

impl Copies {
    /// Node `node`'s copies: none.
    pub fn new(node: NodeId) -> Copies {
        Copies {
            node,
            epoch: 0,
            chunks: 0,
            sources: Vec::with_capacity(COPIES_MAX),
            slots: [Slot::Idle; COPY_SLOTS_MAX],
            joining: NodeMask::EMPTY,
            primaries: [None; NODES_MAX],
            done: NodeMask::EMPTY,
            caught_up: None,
            enc: Vec::with_capacity(splitkv_layout::wire::COPY_MESSAGE_BYTES),
            stats: CopyStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> CopyStats {
        self.stats
    }

    /// The shards this node is being copied for (empty when it is a replica).
    pub fn joining(&self) -> NodeMask {
        self.joining
    }

    /// The shards whose copy to this node finished in the current epoch.
    pub fn done(&self) -> NodeMask {
        self.done
    }

    /// Whether a copy runs here as source (not yet `Done` or failed).
    pub fn sourcing(&self) -> bool {
        self.sources
            .iter()
            .any(|s| matches!(s.state, State::NeedSnapshot | State::Streaming))
    }

    /// Whether a source waits for its snapshot ([`Copies::take_snapshots`]).
    pub fn needs_snapshot(&self) -> bool {
        self.sources.iter().any(|s| s.state == State::NeedSnapshot)
    }

    /// The epoch of the current copies (that of the last resume or restart).
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// A newer epoch `epoch` with the same view (no recovery epoch): copies
    /// in progress, as source or target, begin again from scratch in it
    /// (the old epoch's packets are dropped, so its chunks may never be
    /// acknowledged). Nothing happens when no copy is under way.
    pub fn restart(&mut self, epoch: u32, view: &PlacementView) {
        let under_way = self.sourcing() || (!self.joining.is_empty() && self.done != self.joining);
        if under_way {
            self.on_resume(epoch, view);
        }
    }

    /// The NIC runtime of every node in `to` (a mask by node id; this node
    /// itself for a restart here) restarted (a NIC restart): every copy
    /// under way from here to such a node — or every copy from here, if
    /// this node restarted — begins again from a new snapshot in the same
    /// epoch, since chunks and acknowledgements in flight were lost with the
    /// old incarnation's sessions and would be waited for forever. Chunk
    /// transaction ids go on from the epoch's count (never reused), so an
    /// old chunk's late acknowledgement matches no slot. A restart does not
    /// change the copying node's data (its host applied what arrived), and
    /// the new snapshot is at least as new as the old one.
    pub fn restart_streams(&mut self, to: NodeMask) {
        let all = to.contains(self.node);
        for (i, src) in self.sources.iter_mut().enumerate() {
            let under_way = matches!(src.state, State::NeedSnapshot | State::Streaming);
            if !under_way || !(all || to.contains(src.to)) {
                continue;
            }
            self.stats.streams_restarted += 1;
            src.state = State::NeedSnapshot;
            src.objects.clear();
            src.values.clear();
            src.next = 0;
            src.acked = 0;
            for slot in self.slots.iter_mut() {
                if matches!(slot, Slot::Busy { src, .. } if *src == i) {
                    *slot = Slot::Idle;
                }
            }
        }
    }

    /// A new configuration: every copy in progress is abandoned; its
    /// chunks' acknowledgements and `Done`s no longer count.
    pub fn abandon(&mut self) {
        self.stats.abandoned += self
            .sources
            .iter()
            .filter(|s| matches!(s.state, State::NeedSnapshot | State::Streaming))
            .count() as u64;
        self.sources.clear();
        self.slots = [Slot::Idle; COPY_SLOTS_MAX];
        self.joining = NodeMask::EMPTY;
        self.done = NodeMask::EMPTY;
        self.caught_up = None;
    }

    /// The epoch `epoch` resumed with `view`: copies begin from scratch —
    /// as the primary of a shard with joining backups, one per such
    /// backup; as a joining backup, the wait for a `Done` from the primary
    /// of each shard it joins. A restarted incarnation that joins no shard
    /// (survivors took its place) is caught up at once.
    pub fn on_resume(&mut self, epoch: u32, view: &PlacementView) {
        self.abandon();
        self.epoch = epoch;
        self.chunks = 0;
        for s in 0..view.placement().nodes() as NodeId {
            let joining = view.joining(s);
            if joining.contains(self.node) {
                self.joining = self.joining.with(s);
                self.primaries[s as usize] = view.shard_primary(s);
            }
            if view.shard_primary(s) != Some(self.node) {
                continue;
            }
            for to in view.live_replicas(s).filter(|&n| joining.contains(n)) {
                if self.sources.len() == COPIES_MAX {
                    self.stats.failed += 1;
                    continue;
                }
                self.stats.copies_begun += 1;
                self.sources.push(Source {
                    shard: s,
                    to,
                    state: State::NeedSnapshot,
                    objects: Vec::new(),
                    values: Vec::new(),
                    next: 0,
                    acked: 0,
                });
            }
        }
        if self.joining.is_empty() && view.renewed().contains(self.node) {
            self.caught_up = Some(epoch);
            self.stats.caught_up += 1;
        }
    }

    /// Takes the snapshot of every source that waits for one, from
    /// `host`'s table as it is now (objects of other shards skipped).
    /// Returns how many were taken.
    ///
    /// # Errors
    /// [`SnapshotError::TooLarge`] for the first shard over
    /// [`COPY_OBJECTS_MAX`] objects (that copy is given up; the others are
    /// taken).
    pub fn take_snapshots(
        &mut self,
        placement: &Placement,
        host: &mut dyn ShardSnapshot,
    ) -> Result<usize, SnapshotError> {
        let (mut taken, mut err) = (0, None);
        for src in self.sources.iter_mut() {
            if src.state != State::NeedSnapshot {
                continue;
            }
            let (shard, objects, values) = (src.shard, &mut src.objects, &mut src.values);
            let mut over = false;
            host.for_each_object(&mut |k, meta, v| {
                if placement.shard(&k) != shard {
                    return;
                }
                if objects.len() == COPY_OBJECTS_MAX {
                    over = true;
                    return;
                }
                objects.push((k, meta, values.len() as u32, v.len() as u32));
                values.extend_from_slice(v);
            });
            if over {
                src.state = State::Failed;
                self.stats.failed += 1;
                err.get_or_insert(SnapshotError::TooLarge { shard });
                continue;
            }
            src.state = State::Streaming;
            self.stats.snapshots += 1;
            self.stats.snapshot_objects += src.objects.len() as u64;
            taken += 1;
        }
        err.map_or(Ok(taken), Err)
    }
}

impl Copies {
    /// Sends what is ready: a chunk in every idle slot, and `Done` for each
    /// copy whose chunks were all acknowledged. Returns whether it sent.
    pub fn step(&mut self, io: &mut Io) -> bool {
        let mut work = false;
        for slot in 0..COPY_SLOTS_MAX {
            if self.slots[slot] != Slot::Idle {
                continue;
            }
            let Some(src) = self
                .sources
                .iter()
                .position(|s| s.state == State::Streaming && s.next < s.objects.len())
            else {
                break;
            };
            let from = self.sources[src].next;
            let to = self.chunk_end(src, from);
            if self.send_chunk(io, slot, src, from as u32, to as u32, 0) {
                self.sources[src].next = to;
                work = true;
            } else {
                break;
            }
        }
        for i in 0..self.sources.len() {
            let s = &self.sources[i];
            let busy = self
                .slots
                .iter()
                .any(|sl| matches!(sl, Slot::Busy { src, .. } if *src == i));
            if s.state == State::Streaming && s.acked == s.objects.len() && !busy {
                work |= self.send_done(io, i);
            }
        }
        work
    }

    /// The end of the chunk that starts at object `from` of source `src`.
    fn chunk_end(&self, src: usize, from: usize) -> usize {
        let s = &self.sources[src];
        let (mut to, mut bytes) = (from, 0usize);
        while to < s.objects.len() && to - from < COPY_CHUNK_OBJECTS_MAX {
            let b = splitkv_layout::KEY_BYTES + s.objects[to].3 as usize;
            if to > from && bytes + b > COPY_CHUNK_BYTES_MAX {
                break;
            }
            bytes += b;
            to += 1;
        }
        to
    }

    /// The LOG of one chunk in `slot` as a new copy transaction; `false`
    /// (nothing changed) when the backlog toward the receiver is full.
    fn send_chunk(
        &mut self,
        io: &mut Io,
        slot: usize,
        src: usize,
        from: u32,
        to: u32,
        tries: u32,
    ) -> bool {
        if io.net.congested() {
            self.stats.send_deferred += 1;
            return false;
        }
        if self.chunks >= COPY_CHUNKS_PER_EPOCH_MAX {
            self.fail(src);
            return false;
        }
        self.chunks += 1;
        let gen = (self.epoch << 16) | self.chunks;
        let tx_id = TxId::new(self.node, TX_INFLIGHT_MAX + slot, gen);
        let s = &self.sources[src];
        io.w.begin_log(tx_id, NodeMask::EMPTY.with(s.shard));
        for &(k, meta, off, len) in &s.objects[from as usize..to as usize] {
            io.w.push_item(&k, meta, &s.values[off as usize..(off + len) as usize]);
        }
        if io.net.try_insert(s.to, &io.w).is_err() {
            self.stats.send_deferred += 1;
            return false;
        }
        self.stats.chunks_sent += 1;
        self.slots[slot] = Slot::Busy {
            src,
            from,
            to,
            tx_id,
            committing: false,
            tries,
        };
        true
    }

    fn send_done(&mut self, io: &mut Io, src: usize) -> bool {
        let s = &self.sources[src];
        self.enc.clear();
        CopyMsg::Done {
            epoch: self.epoch,
            shard: s.shard,
            objects: s.objects.len() as u32,
        }
        .encode(&mut self.enc);
        if io
            .net
            .try_insert_raw(s.to, Flow::Recovery, MsgKind::Copy, &self.enc)
            .is_err()
        {
            self.stats.send_deferred += 1;
            return false;
        }
        self.stats.done_sent += 1;
        self.sources[src].state = State::Done;
        self.sources[src].objects = Vec::new();
        self.sources[src].values = Vec::new();
        true
    }

    fn fail(&mut self, src: usize) {
        self.sources[src].state = State::Failed;
        self.stats.failed += 1;
        for sl in self.slots.iter_mut() {
            if matches!(sl, Slot::Busy { src: s, .. } if *s == src) {
                *sl = Slot::Idle;
            }
        }
    }

    /// Whether `tx_id` names one of this node's copy transactions.
    pub fn owns(&self, tx_id: TxId) -> bool {
        tx_id.coordinator() == self.node
            && (TX_INFLIGHT_MAX..TX_INFLIGHT_MAX + COPY_SLOTS_MAX).contains(&tx_id.slot())
    }

    /// A LOG (`commit` false) or COMMIT acknowledgement of copy transaction
    /// `tx_id` ([`Copies::owns`]): an acknowledged LOG is followed by its
    /// COMMIT (no items: the receiver's host applies the records), an
    /// acknowledged COMMIT frees the slot, a refusal sends the chunk again
    /// as a new transaction. Acknowledgements of an abandoned copy match no
    /// slot and are ignored.
    pub fn on_ack(&mut self, io: &mut Io, tx_id: TxId, commit: bool, status: ReplyStatus) {
        let slot = tx_id.slot() - TX_INFLIGHT_MAX;
        let Slot::Busy {
            src,
            from,
            to,
            tx_id: want,
            committing,
            tries,
        } = self.slots[slot]
        else {
            return;
        };
        if want != tx_id || committing != commit {
            return;
        }
        if status != ReplyStatus::Ok {
            self.slots[slot] = Slot::Idle;
            // Only a busy or failing receiver may take the chunk later; a
            // chunk it finds malformed or too large never will.
            let transient = matches!(status, ReplyStatus::Busy | ReplyStatus::HostFailure);
            if !transient || tries + 1 > COPY_CHUNK_RETRIES_MAX {
                return self.fail(src);
            }
            self.stats.chunk_retries += 1;
            if !self.send_chunk(io, slot, src, from, to, tries + 1) {
                // Not queued: the chunk goes again from the stream.
                self.sources[src].next = self.sources[src].next.min(from as usize);
            }
            return;
        }
        if !commit {
            io.w.begin_items(MsgKind::Commit, tx_id);
            let dest = self.sources[src].to;
            if io.net.try_insert(dest, &io.w).is_err() {
                // Never sent: the chunk goes again as a new transaction
                // (the receiver's pending LOG is superseded by its slot).
                self.stats.send_deferred += 1;
                self.slots[slot] = Slot::Idle;
                self.sources[src].next = self.sources[src].next.min(from as usize);
                return;
            }
            if let Slot::Busy { committing, .. } = &mut self.slots[slot] {
                *committing = true;
            }
            return;
        }
        self.slots[slot] = Slot::Idle;
        self.sources[src].acked += (to - from) as usize;
        self.stats.objects_acked += (to - from) as u64;
    }

    /// A received [`MsgKind::Copy`] body from `from`; returns `false` if it
    /// did not decode.
    pub fn on_wire(&mut self, from: NodeId, bytes: &[u8]) -> bool {
        let Ok(CopyMsg::Done { epoch, shard, .. }) = CopyMsg::decode(bytes) else {
            self.stats.bad_messages += 1;
            return false;
        };
        let counts = epoch == self.epoch
            && (shard as usize) < NODES_MAX
            && self.joining.contains(shard)
            && self.primaries[shard as usize] == Some(from);
        if !counts {
            self.stats.done_stale += 1;
            return true;
        }
        self.stats.done_received += 1;
        let fresh = !self.done.contains(shard);
        self.done = self.done.with(shard);
        if fresh && self.done == self.joining {
            self.caught_up = Some(epoch);
            self.stats.caught_up += 1;
        }
        true
    }

    /// The epoch in which this node finished being copied for every shard
    /// it joins, once (the membership then makes it a replica).
    pub fn take_caught_up(&mut self) -> Option<u32> {
        self.caught_up.take()
    }
}
