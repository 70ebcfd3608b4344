//! Xenic's host-side Robinhood hash table (Xenic §4.1.2), stored in a shared
//! [`Region`] in the layout of [`splitkv_layout::table`], so the NIC runtime can
//! look keys up by DMA while the host changes the table.
//!
//! # Policy
//!
//! * **Insert**: linear probing from the key's home slot with displacement
//!   stealing: an object that sits closer to its home than the object being
//!   carried (smaller displacement) gives up its slot and is carried on. Within
//!   a cluster, objects therefore stay sorted by home slot, which lets a lookup
//!   stop at the first empty slot or the first object with a smaller
//!   displacement than the key would have there.
//! * **Global maximum displacement D_m** (`d_max`): the insert is planned before
//!   anything is written; if any carried object would end more than `d_max`
//!   slots past its home, the main array is left as it is and the *new* object
//!   goes to the overflow chain of its home segment instead (a free slot of a
//!   bucket already in the chain, else a bucket from the pool appended to the
//!   chain; [`TableError::Full`] when the pool is empty). Existing objects thus
//!   never move from the main array to a bucket.
//! * **Delete** (no tombstones): if an overflow object of a nearby segment can
//!   legally live in the freed slot (its home is in range, at most `d_max`
//!   back, and keeps the cluster sorted), it is moved in ("overflow swap");
//!   otherwise the following run is shifted back one slot until an empty slot or
//!   an object at its home, and the slot freed at the end of the run is offered
//!   to the overflow chains the same way before it is cleared.
//!
//! * **Out-of-line values** (Xenic §4.1.2): a value longer than
//!   [`VALUE_INLINE_BYTES_MAX`](splitkv_layout::table::VALUE_INLINE_BYTES_MAX) goes to a block of the value heap and the slot
//!   holds a reference to it (format in [`splitkv_layout::table`]). An upsert
//!   takes a block from the FIFO free list, writes it completely, then writes
//!   the slot, then frees the object's previous block (if any); a delete frees
//!   the block after the slot is gone. Swaps, shifts and overflow moves copy
//!   only the slot (the reference), never the block. No free block:
//!   [`TableError::ValueHeapFull`], table unchanged.
//!
//! # Concurrent DMA readers
//!
//! Every slot write goes through the slot seqlock of [`splitkv_layout::table`],
//! so a reader never takes a torn slot for a valid one. Moves *between* slots
//! need more care, because a reader copies a probe range in increasing address
//! order while the host rewrites slots one at a time:
//!
//! * **Insert swap chains are written from the free end backwards** (Xenic
//!   §4.1.2, "DMA-consistent swapping"). With the chain `p0 < p1 < … < pk`
//!   (`pk` empty), the host first copies the object at `p(k-1)` into `pk`, then
//!   the one at `p(k-2)` into `p(k-1)`, …, and finally writes the new object at
//!   `p0`. Each object is written at its new, higher slot *before* its old slot
//!   is overwritten, so at every instant every object is in the table, and the
//!   lowest slot `m(t)` holding a given object never decreases while only
//!   inserts and updates run. A reader copies slots `s = home, home + 1, …` at
//!   increasing times `t_s`, and `home ≤ m(t) ≤ home + d_max` throughout. Take
//!   the first `s` with `s ≥ m(t_s)`: either `s = home`, or `s - 1 < m(t_(s-1))
//!   ≤ m(t_s)`; both give `s = m(t_s)`, so the slot it copies at `t_s` holds
//!   the object (intact, or flagged torn by the seqlock). Writing the chain
//!   from `p0` upwards instead would keep each displaced object only in host
//!   registers between two writes, and a reader could miss it (the
//!   concurrent-reader test in `host/tests/robinhood.rs` catches that order).
//! * **Deletes move objects down**, against the reader's direction, or from a
//!   bucket into the main array, and per-slot sequence numbers cannot show
//!   that (the reader sees each slot intact):
//!   - backward shift: an object moved from slot `q` to `q - 1` is missed by a
//!     reader that copied slot `q - 1` before the move and slot `q` after the
//!     next object overwrote it;
//!   - overflow swap: an object copied from a bucket into the main array and
//!     then cleared in the bucket is missed by a reader that read the main
//!     array before the copy and the bucket after the clear;
//!   - a bucket that empties is unlinked and later reused by another segment; a
//!     reader still inside it may then stop its chain walk early.
//!
//!   So every segment header carries a **move sequence**
//!   (`splitkv_layout::table::HEADER_MOVES_OFFSET`): before a delete moves an
//!   object homed in segment `S` (or an insert reuses a bucket that was in
//!   `S`'s chain), the host makes `S`'s sequence odd; when the operation is
//!   done, even again. A reader reads the sequence of its key's home segment
//!   before its first slot and again after its last one; only the same even
//!   value both times makes "not found" definite, otherwise it looks again
//!   (the NIC lookup, `nic-runtime/src/index/lookup.rs`). A found object needs
//!   no check: the slot seqlock already proves it was there. Inserts and
//!   updates never touch the sequence, and the loom model
//!   `delete_shift_never_hides_a_key_from_a_checked_reader`
//!   (`host/tests/robinhood_loom.rs`) checks the delete side.
//! * **Value blocks** are never rewritten while a slot references them. A
//!   reader that copied a slot referencing block `b` at sequence `s` may find
//!   `b` freed and rewritten for another object by the time it reads it; the
//!   block's seqlock, sequence and key/meta words tell it so
//!   ([`splitkv_layout::table::decode_value_block`]) and it starts over. The
//!   FIFO free list makes that rare: a freed block is reused only after every
//!   block freed before it.

use super::{Request, Upserted};
use splitkv_layout::sync::fence;
use splitkv_layout::sync::Ordering::{Relaxed, Release};
use splitkv_layout::table::{
    decode_slot_info, encode_link, encode_slot_info, LayoutError, TableConfig, TableLayout,
    BLOCK_STATE_USED, HEADER_COUNT_OFFSET, HEADER_LINK_OFFSET, HEADER_MOVES_OFFSET,
    SLOT_FIXED_DATA_WORDS, SLOT_INFO_OFFSET, SLOT_KEY_ID_OFFSET, SLOT_META_OFFSET,
    SLOT_STATE_EMPTY, SLOT_STATE_OCCUPIED, SLOT_STATE_OUT_OF_LINE, SLOT_VALUE_OFFSET,
    VALUE_REF_WORDS,
};
use splitkv_layout::{Key, ObjectMeta, Region, CACHE_LINE_BYTES};
use std::collections::VecDeque;

/// Why a table operation failed. A failed operation leaves the table unchanged.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum TableError {
    /// The value is longer than the table's `value_bytes_max`.
    #[error("value of {len} B exceeds the table's maximum of {max} B")]
    ValueTooLarge {
        /// Value length in bytes.
        len: usize,
        /// `value_bytes_max` of the table.
        max: usize,
    },
    /// The key cannot be placed within `d_max` of its home and the overflow
    /// bucket pool has no room in the key's segment chain nor a free bucket.
    #[error("table full: displacement limit reached and no overflow bucket free")]
    Full,
    /// The value is longer than [`VALUE_INLINE_BYTES_MAX`](splitkv_layout::table::VALUE_INLINE_BYTES_MAX) and every block of
    /// the value heap is in use (or the table has no heap: `value_blocks` 0).
    #[error("value heap full: all {blocks} out-of-line value blocks in use")]
    ValueHeapFull {
        /// Blocks in the heap.
        blocks: usize,
    },
    /// The configuration has no valid layout.
    #[error(transparent)]
    Layout(#[from] LayoutError),
}

/// Counters of the work the table has done since it was built, for tests and
/// benchmarks ([`RobinhoodTable::stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TableStats {
    /// Existing objects copied one chain step forward by insert swap chains.
    pub moved_by_inserts: u64,
    /// Objects moved one slot back by delete backward shifts.
    pub moved_by_shifts: u64,
    /// New objects placed in an overflow bucket (displacement limit reached).
    pub overflow_inserts: u64,
    /// Overflow objects moved into the main array by deletes (overflow swaps).
    pub overflow_swaps: u64,
    /// Values written to value-heap blocks (out of line).
    pub blocks_written: u64,
}

/// Data words of an empty slot: info (state 0), key id, meta.
const EMPTY_SLOT_WORDS: [u64; SLOT_FIXED_DATA_WORDS] = [0; SLOT_FIXED_DATA_WORDS];

/// The Robinhood table (Xenic §4.1.2). Single writer: mutation takes `&mut self`;
/// the NIC runtime reads [`RobinhoodTable::region`] clones concurrently (see the
/// module docs for what such readers may observe).
///
/// Steady-state operations do not allocate: scratch buffers and the bucket and
/// value-block free lists are sized at construction.
pub struct RobinhoodTable {
    layout: TableLayout,
    region: Region,
    /// Objects stored (main array plus overflow).
    len: usize,
    /// Objects stored in overflow buckets.
    overflow_len: usize,
    /// Buckets not linked into any chain, in FIFO order of release.
    free_buckets: VecDeque<usize>,
    /// Value-heap blocks no slot references, in FIFO order of release.
    free_blocks: VecDeque<usize>,
    /// Largest displacement any object has been placed at in the main array.
    max_displacement_seen: usize,
    /// Work counters.
    stats: TableStats,
    /// Probe slots [`RobinhoodTable::prefetch`] covers (1 ..= `d_max + 1`), or
    /// `None` to follow the occupancy ([`RobinhoodTable::prefetch_slots`]).
    prefetch_slots: Option<usize>,
    /// Scratch: the insert swap chain `p0 < p1 < … < pk` (`pk` free).
    chain: Vec<usize>,
    /// Scratch: data words (info, id, meta, value) of the object being written.
    new_words: Vec<u64>,
    /// Scratch: data words of an object being moved.
    copy_words: Vec<u64>,
    /// Segments whose move sequence the running delete has made odd.
    open_moves: Vec<usize>,
    /// Per bucket: the segment whose chain it last belonged to (`usize::MAX`:
    /// none yet), so reusing it can warn that segment's readers.
    bucket_owner: Vec<usize>,
    /// Scratch: data words (info, id, meta, value) of a value block being written.
    block_words: Vec<u64>,
}

impl std::fmt::Debug for RobinhoodTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RobinhoodTable")
            .field("layout", &self.layout)
            .field("len", &self.len)
            .field("overflow_len", &self.overflow_len)
            .field("free_buckets", &self.free_buckets.len())
            .field("free_blocks", &self.free_blocks.len())
            .finish_non_exhaustive()
    }
}

/// Writes one slot's data words (`data`: info, id, meta, value words; the rest
/// of the slot keeps its bytes) with the slot seqlock protocol of
/// `splitkv_layout::table`: `seq_tail ← s+1`, fence, data, fence,
/// `seq_tail ← s+2`, `seq_head ← s+2` (Release).
fn write_slot(region: &Region, layout: &TableLayout, offset: usize, data: &[u64]) {
    debug_assert!((SLOT_FIXED_DATA_WORDS..=layout.slot_data_words()).contains(&data.len()));
    write_seqlocked(region, offset, layout.slot_seq_tail_offset(), data);
}

/// Writes a value block's data words with the same seqlock protocol as
/// [`write_slot`]; returns the block's new (even) sequence number.
fn write_block(region: &Region, layout: &TableLayout, block: usize, data: &[u64]) -> u64 {
    debug_assert!(data.len() <= layout.value_block_bytes() / 8 - 2);
    let offset = layout.value_block_offset(block);
    write_seqlocked(region, offset, layout.value_block_seq_tail_offset(), data)
}

/// The seqlock write shared by slots and value blocks: `tail_offset` is the
/// byte offset of `seq_tail` inside the record at `offset`. Returns the new
/// sequence number.
fn write_seqlocked(region: &Region, offset: usize, tail_offset: usize, data: &[u64]) -> u64 {
    let tail = offset + tail_offset;
    // Only this writer stores sequence words, so its own relaxed load is current.
    let seq = region.load(offset, Relaxed);
    debug_assert_eq!(seq % 2, 0, "slot at {offset} left mid-write");
    debug_assert_eq!(
        seq,
        region.load(tail, Relaxed),
        "slot at {offset} left mid-write"
    );
    region.store(tail, seq + 1, Relaxed);
    fence(Release);
    for (i, &word) in data.iter().enumerate() {
        region.store(offset + 8 + 8 * i, word, Relaxed);
    }
    fence(Release);
    region.store(tail, seq + 2, Relaxed);
    region.store(offset, seq + 2, Release);
    seq + 2
}

/// Loads the data words of the slot at `offset` that carry information (info,
/// id, meta and the inline value's words or the out-of-line reference) into `out`.
fn load_slot_words(region: &Region, offset: usize, out: &mut Vec<u64>) {
    out.clear();
    let info = region.load(offset + SLOT_INFO_OFFSET, Relaxed);
    let (_, value_len, state) = decode_slot_info(info);
    let value_words = match state {
        SLOT_STATE_OUT_OF_LINE => VALUE_REF_WORDS,
        _ => (value_len as usize).div_ceil(8),
    };
    for i in 0..SLOT_FIXED_DATA_WORDS + value_words {
        out.push(region.load(offset + 8 + 8 * i, Relaxed));
    }
}

#[inline]
fn is_occupied(info: u64) -> bool {
    decode_slot_info(info).2 != SLOT_STATE_EMPTY
}

/// Appends `value` to `words` as little-endian words, the last one zero-padded.
fn push_value_words(words: &mut Vec<u64>, value: &[u8]) {
    for chunk in value.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        words.push(u64::from_le_bytes(word));
    }
}

impl RobinhoodTable {
    /// Builds an empty table: computes the layout and allocates its zeroed region
    /// ([`TableLayout::region_bytes`]).
    ///
    /// # Errors
    /// [`TableError::Layout`] if `config` is invalid.
    pub fn new(config: &TableConfig) -> Result<RobinhoodTable, TableError> {
        let layout = TableLayout::new(config)?;
        let region = Region::new(layout.region_bytes());
        let data_words = layout.slot_data_words();
        Ok(RobinhoodTable {
            layout,
            region,
            len: 0,
            overflow_len: 0,
            free_buckets: (0..layout.buckets()).collect(),
            free_blocks: (0..layout.value_blocks()).collect(),
            max_displacement_seen: 0,
            stats: TableStats::default(),
            prefetch_slots: None,
            chain: Vec::with_capacity(2 * (layout.d_max() + 1)),
            new_words: Vec::with_capacity(data_words),
            copy_words: Vec::with_capacity(data_words),
            open_moves: Vec::with_capacity(2 * layout.d_max() / layout.segment_slots() + 4),
            bucket_owner: vec![usize::MAX; layout.buckets()],
            block_words: Vec::with_capacity(layout.value_block_bytes() / 8),
        })
    }

    /// The table's layout.
    pub fn layout(&self) -> &TableLayout {
        &self.layout
    }

    /// The host memory holding the table. Clones share it; the NIC runtime reads
    /// a clone by DMA concurrently with this table's writes.
    pub fn region(&self) -> &Region {
        &self.region
    }

    /// Objects stored (main array and overflow buckets).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no object is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Objects stored in overflow buckets.
    pub fn overflow_len(&self) -> usize {
        self.overflow_len
    }

    /// Overflow buckets linked into some segment's chain.
    pub fn buckets_in_use(&self) -> usize {
        self.layout.buckets() - self.free_buckets.len()
    }

    /// Value-heap blocks referenced by some slot (objects whose value is
    /// longer than [`VALUE_INLINE_BYTES_MAX`](splitkv_layout::table::VALUE_INLINE_BYTES_MAX)).
    pub fn value_blocks_in_use(&self) -> usize {
        self.layout.value_blocks() - self.free_blocks.len()
    }

    /// The largest displacement, in slots, at which any object has been placed
    /// in the main array since the table was built (≤ `d_max`).
    pub fn max_displacement_seen(&self) -> usize {
        self.max_displacement_seen
    }

    /// Work counters since the table was built.
    pub fn stats(&self) -> TableStats {
        self.stats
    }

    /// Looks `key` up. On a hit, `value_out` is cleared and filled with the value
    /// and the object's metadata is returned; on a miss `value_out` is left empty.
    pub fn get(&self, key: &Key, value_out: &mut Vec<u8>) -> Option<ObjectMeta> {
        value_out.clear();
        let home = self.layout.home_slot(key);
        let offset = match self.find_main(key, home) {
            Some(pos) => self.layout.slot_offset(pos),
            None => {
                let (bucket, index) = self.find_overflow(key, home)?;
                self.layout.bucket_slot_offset(bucket, index)
            }
        };
        Some(self.read_object(offset, value_out).1)
    }

    /// Inserts `key` or replaces its metadata and value. Returns `true` if the
    /// key was new.
    ///
    /// # Errors
    /// [`TableError::ValueTooLarge`] if `value` exceeds `value_bytes_max`;
    /// [`TableError::ValueHeapFull`] if `value` must go out of line and no
    /// block is free; [`TableError::Full`] if a new key fits neither the main
    /// array nor the overflow pool. The table is unchanged on error.
    pub fn upsert(&mut self, key: Key, meta: ObjectMeta, value: &[u8]) -> Result<bool, TableError> {
        self.upsert_with(key, meta, value, false)
            .map(|done| done == Upserted::Inserted)
    }

    /// Like [`RobinhoodTable::upsert`], but an existing object is replaced only
    /// if its version is lower than `meta.version()`; otherwise nothing is
    /// written and [`Upserted::Stale`] carries the stored metadata. One lookup
    /// serves both the version check and the write (the host log's apply rule,
    /// Xenic §4.2 step 7).
    ///
    /// # Errors
    /// As [`RobinhoodTable::upsert`]; a stale write is not an error, even with
    /// a value too large for the table.
    pub fn upsert_if_newer(
        &mut self,
        key: Key,
        meta: ObjectMeta,
        value: &[u8],
    ) -> Result<Upserted, TableError> {
        self.upsert_with(key, meta, value, true)
    }

    fn upsert_with(
        &mut self,
        key: Key,
        meta: ObjectMeta,
        value: &[u8],
        only_if_newer: bool,
    ) -> Result<Upserted, TableError> {
        let home = self.layout.home_slot(&key);
        let existing = match self.find_main(&key, home) {
            Some(pos) => Some(self.layout.slot_offset(pos)),
            None => self
                .find_overflow(&key, home)
                .map(|(b, i)| self.layout.bucket_slot_offset(b, i)),
        };
        // A stale write is skipped before its value is looked at, as a Get
        // followed by a version check would.
        if let (Some(offset), true) = (existing, only_if_newer) {
            let stored = ObjectMeta(self.region.load(offset + SLOT_META_OFFSET, Relaxed));
            if stored.version() >= meta.version() {
                return Ok(Upserted::Stale(stored));
            }
        }
        let max = self.layout.value_bytes_max();
        if value.len() > max {
            return Err(TableError::ValueTooLarge {
                len: value.len(),
                max,
            });
        }
        // A long value's block is written in full before any slot refers to it.
        let block = if self.layout.is_out_of_line(value.len()) {
            let block = self
                .free_blocks
                .pop_front()
                .ok_or(TableError::ValueHeapFull {
                    blocks: self.layout.value_blocks(),
                })?;
            Some(self.write_value_block(block, key, meta, value))
        } else {
            None
        };
        self.encode_new(key, meta, value, block);
        if let Some(offset) = existing {
            let old_block = self.block_of(offset);
            write_slot(&self.region, &self.layout, offset, &self.new_words);
            // Freed only now: the slot no longer refers to it.
            self.free_blocks.extend(old_block);
            return Ok(Upserted::Updated);
        }
        match self.plan_insert(home) {
            Some(displacement) => {
                self.apply_chain();
                self.max_displacement_seen = self.max_displacement_seen.max(displacement);
            }
            None => {
                if let Err(e) = self.overflow_insert(home) {
                    // Unreferenced and back where it was: the table is unchanged.
                    if let Some((b, _)) = block {
                        self.free_blocks.push_front(b);
                    }
                    return Err(e);
                }
            }
        }
        self.len += 1;
        Ok(Upserted::Inserted)
    }

    /// Removes `key`. Returns whether it was present.
    pub fn remove(&mut self, key: &Key) -> bool {
        let home = self.layout.home_slot(key);
        let old_block;
        if let Some(pos) = self.find_main(key, home) {
            old_block = self.block_of(self.layout.slot_offset(pos));
            self.remove_main(pos);
        } else if let Some((bucket, index)) = self.find_overflow(key, home) {
            old_block = self.block_of(self.layout.bucket_slot_offset(bucket, index));
            self.overflow_remove(self.layout.segment_of(home), bucket, index);
        } else {
            return false;
        }
        // Freed after the slot is gone (or overwritten by the object moved in).
        self.free_blocks.extend(old_block);
        self.len -= 1;
        true
    }

    // ---- batches (Dandelion §6) ---------------------------------------------

    /// Number of consecutive probe slots, from the home slot on, whose cache
    /// lines [`RobinhoodTable::prefetch`] fetches now. Unless set with
    /// [`RobinhoodTable::set_prefetch_slots`], it follows the main array's
    /// occupancy α: a successful lookup reads `(1 + 1/(1 − α)) / 2` slots on
    /// average (as for linear probing), rounded up and clamped to
    /// `1 ..= d_max + 1` — 2 slots at α = 0.5, 6 at α = 0.9. Prefetching only
    /// the home slot leaves the rest of a displaced key's probe to miss one
    /// line after another (benches/README.md has the measurement).
    pub fn prefetch_slots(&self) -> usize {
        let most = self.layout.d_max() + 1;
        if let Some(slots) = self.prefetch_slots {
            return slots;
        }
        let home = self.layout.home_slots();
        let free = home.saturating_sub(self.len - self.overflow_len);
        if free == 0 {
            return most;
        }
        (1 + home.div_ceil(free)).div_ceil(2).clamp(1, most)
    }

    /// Fixes the number of probe slots a prefetch covers (clamped to
    /// `1 ..= d_max + 1`), or with `None` returns to following the occupancy
    /// ([`RobinhoodTable::prefetch_slots`]). More slots cover the probes of
    /// displaced keys at the price of more memory traffic per request.
    pub fn set_prefetch_slots(&mut self, slots: Option<usize>) {
        self.prefetch_slots = slots.map(|n| n.clamp(1, self.layout.d_max() + 1));
    }

    /// Issues software prefetches for the cache lines of `key`'s first
    /// [`RobinhoodTable::prefetch_slots`] probe slots (its home slot and the
    /// next ones, from the home slot's info word on), so that a lookup issued a
    /// little later finds them in cache. Changes nothing; a no-op on targets
    /// without a prefetch instruction ([`Region::prefetch`]).
    #[inline]
    pub fn prefetch(&self, key: &Key) {
        self.prefetch_slots_of(key, self.prefetch_slots());
    }

    /// [`RobinhoodTable::prefetch`] with the slot count computed once per batch.
    #[inline]
    fn prefetch_slots_of(&self, key: &Key, slots: usize) {
        let home_offset = self.layout.slot_offset(self.layout.home_slot(key));
        let first = home_offset + SLOT_INFO_OFFSET;
        // Up to the last value byte of the last slot (its `seq_tail` is not read).
        let last = home_offset + slots * self.layout.slot_bytes() - 9;
        let mut line = first & !(CACHE_LINE_BYTES - 1);
        while line <= last {
            self.region.prefetch(line);
            line += CACHE_LINE_BYTES;
        }
    }

    /// Executes a batch of requests (Dandelion §6): first prefetches every
    /// request's home slot and the probe slots after it
    /// ([`RobinhoodTable::prefetch`]), then executes the
    /// requests in slice order and stores each one's result in it. Results and
    /// the final table equal those of issuing the same operations one at a
    /// time; a failed upsert (its `result` holds the [`TableError`]) does not
    /// stop the requests after it.
    ///
    /// Allocation-free as long as each Get's `value` buffer has capacity for the
    /// table's `value_bytes_max`. Batches of a few tens of requests suit the
    /// hardware: the prefetched lines must still be in L1/L2 when their request
    /// runs (Dandelion Figure 7 uses up to 32).
    pub fn batch(&mut self, reqs: &mut [Request<'_>]) {
        let slots = self.prefetch_slots();
        for req in reqs.iter() {
            self.prefetch_slots_of(req.key(), slots);
        }
        for req in reqs.iter_mut() {
            match req {
                Request::Get { key, value, result } => *result = self.get(key, value),
                Request::Upsert {
                    key,
                    meta,
                    value,
                    only_if_newer,
                    result,
                } => *result = Some(self.upsert_with(*key, *meta, value, *only_if_newer)),
                Request::Remove { key, result } => *result = self.remove(key),
            }
        }
    }

    /// Read-only batch of Gets (Dandelion §6), usable through `&self`: prefetches
    /// every key's home slot and the probe slots after it, then looks the keys up in order. For each `i`,
    /// `metas[i]` and `values[i]` get what [`RobinhoodTable::get`] of `keys[i]`
    /// would return and fill in.
    ///
    /// # Panics
    /// If the three slices do not have the same length.
    pub fn get_batch(
        &self,
        keys: &[Key],
        values: &mut [Vec<u8>],
        metas: &mut [Option<ObjectMeta>],
    ) {
        assert_eq!(
            keys.len(),
            values.len(),
            "get_batch: keys and values differ in length"
        );
        assert_eq!(
            keys.len(),
            metas.len(),
            "get_batch: keys and metas differ in length"
        );
        let slots = self.prefetch_slots();
        for key in keys {
            self.prefetch_slots_of(key, slots);
        }
        for ((key, value), meta) in keys.iter().zip(values.iter_mut()).zip(metas.iter_mut()) {
            *meta = self.get(key, value);
        }
    }

    /// Calls `f(key, meta, value)` for every object: main array in slot order,
    /// then overflow buckets in pool order.
    pub fn for_each(&self, mut f: impl FnMut(Key, ObjectMeta, &[u8])) {
        let mut value = Vec::with_capacity(self.layout.value_bytes_max());
        let mut visit = |offset: usize| {
            if let (Some(key), meta) = self.read_object(offset, &mut value) {
                f(key, meta, &value);
            }
        };
        for pos in 0..self.layout.main_slots() {
            visit(self.layout.slot_offset(pos));
        }
        for bucket in 0..self.layout.buckets() {
            if self.bucket_count(bucket) == 0 {
                continue;
            }
            for index in 0..self.layout.bucket_slots() {
                visit(self.layout.bucket_slot_offset(bucket, index));
            }
        }
    }

    /// Checks every structural invariant by a full scan (O(table size); for
    /// tests): seqlocks closed; every main object within `d_max` of its home with
    /// the slots from its home occupied by objects whose homes are not larger;
    /// overflow objects in their home segment's chain; header counts, `len`,
    /// `overflow_len` and the free list consistent; no key stored twice.
    ///
    /// # Errors
    /// A description of the first violation found.
    pub fn check_invariants(&self) -> Result<(), String> {
        let l = &self.layout;
        let mut keys = std::collections::HashSet::new();
        let mut value = Vec::new();
        let check_seq = |offset: usize| -> Result<(), String> {
            let head = self.region.load(offset, Relaxed);
            let tail = self.region.load(offset + l.slot_seq_tail_offset(), Relaxed);
            if head != tail || head & 1 != 0 {
                return Err(format!("slot at byte {offset}: open seqlock {head}/{tail}"));
            }
            Ok(())
        };
        for segment in 0..l.segments() {
            let moves = self.region.load(
                l.segment_header_offset(segment) + HEADER_MOVES_OFFSET,
                Relaxed,
            );
            if moves & 1 != 0 {
                return Err(format!(
                    "segment {segment}: move sequence left odd ({moves})"
                ));
            }
        }
        // Every value-heap block is referenced by exactly one slot or free.
        let mut block_seen = vec![false; l.value_blocks()];
        let mut check_block = |offset: usize| -> Result<(), String> {
            let Some(block) = self.block_of(offset) else {
                return Ok(());
            };
            if std::mem::replace(&mut block_seen[block], true) {
                return Err(format!("value block {block} referenced twice"));
            }
            let at = l.value_block_offset(block);
            let head = self.region.load(at, Relaxed);
            let tail = self
                .region
                .load(at + l.value_block_seq_tail_offset(), Relaxed);
            let seq = self.region.load(offset + SLOT_VALUE_OFFSET + 8, Relaxed);
            if head != tail || head != seq {
                return Err(format!(
                    "value block {block}: seqlock {head}/{tail}, slot expects {seq}"
                ));
            }
            for word in [SLOT_INFO_OFFSET, SLOT_KEY_ID_OFFSET, SLOT_META_OFFSET] {
                let mut slot_word = self.region.load(offset + word, Relaxed);
                if word == SLOT_INFO_OFFSET {
                    let (table, len, _) = decode_slot_info(slot_word);
                    slot_word = encode_slot_info(table, len, BLOCK_STATE_USED);
                }
                if self.region.load(at + word, Relaxed) != slot_word {
                    return Err(format!(
                        "value block {block}: word at {word} differs from its slot's"
                    ));
                }
            }
            Ok(())
        };
        let mut main_len = 0;
        for pos in 0..l.main_slots() {
            check_seq(l.slot_offset(pos))?;
            check_block(l.slot_offset(pos))?;
            let Some(home) = self.main_home(pos) else {
                continue;
            };
            main_len += 1;
            let key = self.read_object(l.slot_offset(pos), &mut value).0.unwrap();
            if !keys.insert(key) {
                return Err(format!("{key:?} stored twice"));
            }
            if home > pos || pos - home > l.d_max() {
                return Err(format!("{key:?} at slot {pos} with home {home}"));
            }
            if pos > home {
                match self.main_home(pos - 1) {
                    Some(h) if h <= home => {}
                    other => {
                        return Err(format!(
                            "slot {pos} (home {home}) preceded by home {other:?}"
                        ))
                    }
                }
            }
        }
        let mut overflow_len = 0;
        let mut linked = vec![false; l.buckets()];
        for segment in 0..l.segments() {
            let mut count = 0;
            let mut link = self.segment_link(segment);
            while let Some(bucket) = link {
                if std::mem::replace(&mut linked[bucket], true) {
                    return Err(format!("bucket {bucket} linked twice"));
                }
                let mut occupied = 0;
                for index in 0..l.bucket_slots() {
                    let offset = l.bucket_slot_offset(bucket, index);
                    check_seq(offset)?;
                    check_block(offset)?;
                    let Some(key) = self.read_object(offset, &mut value).0 else {
                        continue;
                    };
                    occupied += 1;
                    if !keys.insert(key) {
                        return Err(format!("{key:?} stored twice"));
                    }
                    if l.segment_of(l.home_slot(&key)) != segment {
                        return Err(format!("{key:?} in the chain of segment {segment}"));
                    }
                }
                if occupied == 0 || occupied != self.bucket_count(bucket) {
                    return Err(format!(
                        "bucket {bucket}: {occupied} objects, header {}",
                        self.bucket_count(bucket)
                    ));
                }
                count += occupied;
                link = self.bucket_link(bucket);
            }
            if count != self.segment_count(segment) {
                return Err(format!(
                    "segment {segment}: {count} objects, header {}",
                    self.segment_count(segment)
                ));
            }
            overflow_len += count;
        }
        for &bucket in &self.free_buckets {
            if std::mem::replace(&mut linked[bucket], true) {
                return Err(format!(
                    "bucket {bucket} both free and linked (or free twice)"
                ));
            }
            if self.bucket_count(bucket) != 0 {
                return Err(format!("free bucket {bucket} has a non-zero count"));
            }
        }
        if let Some(lost) = linked.iter().position(|&seen| !seen) {
            return Err(format!("bucket {lost} neither free nor linked"));
        }
        for &block in &self.free_blocks {
            if std::mem::replace(&mut block_seen[block], true) {
                return Err(format!(
                    "value block {block} both free and referenced (or free twice)"
                ));
            }
        }
        if let Some(lost) = block_seen.iter().position(|&seen| !seen) {
            return Err(format!("value block {lost} neither free nor referenced"));
        }
        if overflow_len != self.overflow_len || main_len + overflow_len != self.len {
            return Err(format!(
                "counted {main_len} main + {overflow_len} overflow, recorded len {} overflow {}",
                self.len, self.overflow_len
            ));
        }
        Ok(())
    }

    // ---- slot access -------------------------------------------------------

    /// Reads the slot at `offset`: its key if occupied (then `value` holds the
    /// value) and its meta word.
    fn read_object(&self, offset: usize, value: &mut Vec<u8>) -> (Option<Key>, ObjectMeta) {
        value.clear();
        let (table, value_len, state) =
            decode_slot_info(self.region.load(offset + SLOT_INFO_OFFSET, Relaxed));
        let meta = ObjectMeta(self.region.load(offset + SLOT_META_OFFSET, Relaxed));
        if state == SLOT_STATE_EMPTY {
            return (None, meta);
        }
        let id = self.region.load(offset + SLOT_KEY_ID_OFFSET, Relaxed);
        value.resize(value_len as usize, 0);
        let at = match self.block_of(offset) {
            Some(block) => self.layout.value_block_offset(block) + SLOT_VALUE_OFFSET,
            None => offset + SLOT_VALUE_OFFSET,
        };
        self.region
            .read_bytes(at, value)
            .expect("slot and block lie inside the region");
        (Some(Key::new(table, id)), meta)
    }

    /// The value block the slot at `offset` refers to, if its value is out of line.
    #[inline]
    fn block_of(&self, offset: usize) -> Option<usize> {
        let info = self.region.load(offset + SLOT_INFO_OFFSET, Relaxed);
        (decode_slot_info(info).2 == SLOT_STATE_OUT_OF_LINE)
            .then(|| self.region.load(offset + SLOT_VALUE_OFFSET, Relaxed) as usize)
    }

    /// Writes `value` of `key` with `meta` into value block `block` (seqlocked);
    /// returns the reference a slot stores: `(block, sequence)`.
    fn write_value_block(
        &mut self,
        block: usize,
        key: Key,
        meta: ObjectMeta,
        value: &[u8],
    ) -> (usize, u64) {
        let words = &mut self.block_words;
        words.clear();
        words.push(encode_slot_info(
            key.table,
            value.len() as u16,
            BLOCK_STATE_USED,
        ));
        words.push(key.id);
        words.push(meta.0);
        push_value_words(words, value);
        self.stats.blocks_written += 1;
        (block, write_block(&self.region, &self.layout, block, words))
    }

    /// The key in the slot at `offset`, given its info word.
    #[inline]
    fn key_at(&self, offset: usize, info: u64) -> Key {
        Key::new(
            decode_slot_info(info).0,
            self.region.load(offset + SLOT_KEY_ID_OFFSET, Relaxed),
        )
    }

    /// Home slot of the object in main slot `pos`, or `None` if it is empty.
    #[inline]
    fn main_home(&self, pos: usize) -> Option<usize> {
        let offset = self.layout.slot_offset(pos);
        let info = self.region.load(offset + SLOT_INFO_OFFSET, Relaxed);
        is_occupied(info).then(|| self.layout.home_slot(&self.key_at(offset, info)))
    }

    /// Encodes the data words of a new object into `self.new_words`: the value
    /// inline, or the reference `(block, sequence)` to its value block.
    fn encode_new(
        &mut self,
        key: Key,
        meta: ObjectMeta,
        value: &[u8],
        block: Option<(usize, u64)>,
    ) {
        let words = &mut self.new_words;
        words.clear();
        let state = match block {
            Some(_) => SLOT_STATE_OUT_OF_LINE,
            None => SLOT_STATE_OCCUPIED,
        };
        words.push(encode_slot_info(key.table, value.len() as u16, state));
        words.push(key.id);
        words.push(meta.0);
        match block {
            Some((b, seq)) => words.extend_from_slice(&[b as u64, seq]),
            None => push_value_words(words, value),
        }
    }

    /// Copies the object in the slot at `from` into the slot at `to`.
    fn copy_slot(&mut self, from: usize, to: usize) {
        load_slot_words(&self.region, from, &mut self.copy_words);
        write_slot(&self.region, &self.layout, to, &self.copy_words);
    }

    // ---- headers -----------------------------------------------------------

    fn link_at(&self, header: usize) -> Option<usize> {
        let word = self.region.load(header + HEADER_LINK_OFFSET, Relaxed);
        word.checked_sub(1).map(|b| b as usize)
    }

    fn segment_link(&self, segment: usize) -> Option<usize> {
        self.link_at(self.layout.segment_header_offset(segment))
    }

    fn bucket_link(&self, bucket: usize) -> Option<usize> {
        self.link_at(self.layout.bucket_header_offset(bucket))
    }

    fn segment_count(&self, segment: usize) -> usize {
        self.region.load(
            self.layout.segment_header_offset(segment) + HEADER_COUNT_OFFSET,
            Relaxed,
        ) as usize
    }

    fn bucket_count(&self, bucket: usize) -> usize {
        self.region.load(
            self.layout.bucket_header_offset(bucket) + HEADER_COUNT_OFFSET,
            Relaxed,
        ) as usize
    }

    fn set_segment_count(&self, segment: usize, count: usize) {
        let offset = self.layout.segment_header_offset(segment) + HEADER_COUNT_OFFSET;
        self.region.store(offset, count as u64, Release);
    }

    fn set_bucket_count(&self, bucket: usize, count: usize) {
        let offset = self.layout.bucket_header_offset(bucket) + HEADER_COUNT_OFFSET;
        self.region.store(offset, count as u64, Release);
    }

    /// Makes `segment`'s move sequence odd before the running operation moves
    /// one of its objects (once per operation). The Release fence orders the
    /// odd value before every slot write that follows, so a reader that copies
    /// any of those writes sees a changed sequence when it re-reads the header.
    fn moves_open(&mut self, segment: usize) {
        if self.open_moves.contains(&segment) {
            return;
        }
        let offset = self.layout.segment_header_offset(segment) + HEADER_MOVES_OFFSET;
        let seq = self.region.load(offset, Relaxed);
        debug_assert_eq!(seq % 2, 0, "segment {segment} left mid-move");
        self.region.store(offset, seq + 1, Relaxed);
        fence(Release);
        self.open_moves.push(segment);
    }

    /// Makes every sequence [`RobinhoodTable::moves_open`] opened even again
    /// (Release: the moves happen before the new value).
    fn moves_close(&mut self) {
        while let Some(segment) = self.open_moves.pop() {
            let offset = self.layout.segment_header_offset(segment) + HEADER_MOVES_OFFSET;
            let seq = self.region.load(offset, Relaxed);
            self.region.store(offset, seq + 1, Release);
        }
    }

    // ---- lookup ------------------------------------------------------------

    /// Main-array slot of `key` (home `home`). Stops early at an empty slot or at
    /// an object closer to its home than `key` would be there: by the sorted-
    /// cluster invariant `key` cannot lie beyond it.
    fn find_main(&self, key: &Key, home: usize) -> Option<usize> {
        for displacement in 0..=self.layout.d_max() {
            let pos = home + displacement;
            let offset = self.layout.slot_offset(pos);
            let info = self.region.load(offset + SLOT_INFO_OFFSET, Relaxed);
            if !is_occupied(info) {
                return None;
            }
            let other = self.key_at(offset, info);
            if other == *key {
                return Some(pos);
            }
            if pos - self.layout.home_slot(&other) < displacement {
                return None;
            }
        }
        None
    }

    /// `(bucket, index)` of `key` (home `home`) in its segment's overflow chain.
    fn find_overflow(&self, key: &Key, home: usize) -> Option<(usize, usize)> {
        let segment = self.layout.segment_of(home);
        if self.segment_count(segment) == 0 {
            return None;
        }
        let mut link = self.segment_link(segment);
        while let Some(bucket) = link {
            for index in 0..self.layout.bucket_slots() {
                let offset = self.layout.bucket_slot_offset(bucket, index);
                let info = self.region.load(offset + SLOT_INFO_OFFSET, Relaxed);
                if is_occupied(info) && self.key_at(offset, info) == *key {
                    return Some((bucket, index));
                }
            }
            link = self.bucket_link(bucket);
        }
        None
    }

    // ---- insert ------------------------------------------------------------

    /// Plans the Robinhood insert of a new key with home `home` into
    /// `self.chain` without writing anything: the chain is the slots
    /// `p0 < … < pk` where the new object lands (`p0`), where each displaced
    /// object lands, and the free slot `pk`. Returns the largest displacement in
    /// the plan, or `None` if some object would exceed `d_max`.
    fn plan_insert(&mut self, home: usize) -> Option<usize> {
        self.chain.clear();
        let d_max = self.layout.d_max();
        let mut carried_home = home;
        let mut max_displacement = 0;
        for pos in home.. {
            let displacement = pos - carried_home;
            if displacement > d_max {
                self.chain.clear();
                return None;
            }
            // Every carried object has home < home_slots and displacement <= d_max,
            // so `pos` stays inside the main array: the tail slots absorb the end.
            match self.main_home(pos) {
                None => {
                    self.chain.push(pos);
                    return Some(max_displacement.max(displacement));
                }
                Some(other_home) if pos - other_home < displacement => {
                    self.chain.push(pos);
                    max_displacement = max_displacement.max(displacement);
                    carried_home = other_home;
                }
                Some(_) => {}
            }
        }
        unreachable!("the probe ends within d_max slots")
    }

    /// Writes the planned chain, from the free end back to the new object's
    /// slot (see the module docs for why this order).
    fn apply_chain(&mut self) {
        for j in (1..self.chain.len()).rev() {
            let (from, to) = (self.chain[j - 1], self.chain[j]);
            self.copy_slot(self.layout.slot_offset(from), self.layout.slot_offset(to));
        }
        self.stats.moved_by_inserts += self.chain.len() as u64 - 1;
        write_slot(
            &self.region,
            &self.layout,
            self.layout.slot_offset(self.chain[0]),
            &self.new_words,
        );
    }

    /// Stores the object in `self.new_words` (home `home`) in its segment's
    /// overflow chain: first free slot of a bucket in the chain, else a fresh
    /// bucket from the pool appended to the chain.
    fn overflow_insert(&mut self, home: usize) -> Result<(), TableError> {
        let segment = self.layout.segment_of(home);
        let mut tail_header = self.layout.segment_header_offset(segment);
        let mut link = self.segment_link(segment);
        let slot = loop {
            let Some(bucket) = link else {
                let bucket = self.free_buckets.pop_front().ok_or(TableError::Full)?;
                // A reader of the bucket's former segment may still be inside
                // it and would lose its way: warn it through that segment.
                let former = std::mem::replace(&mut self.bucket_owner[bucket], segment);
                if former != usize::MAX {
                    self.moves_open(former);
                }
                write_slot(
                    &self.region,
                    &self.layout,
                    self.layout.bucket_slot_offset(bucket, 0),
                    &self.new_words,
                );
                let header = self.layout.bucket_header_offset(bucket);
                self.region
                    .store(header + HEADER_LINK_OFFSET, encode_link(None), Relaxed);
                self.region.store(header + HEADER_COUNT_OFFSET, 1, Relaxed);
                // Publish the filled bucket only now (Release) at the chain's end.
                self.region.store(
                    tail_header + HEADER_LINK_OFFSET,
                    encode_link(Some(bucket)),
                    Release,
                );
                self.moves_close();
                break None;
            };
            let count = self.bucket_count(bucket);
            if count < self.layout.bucket_slots() {
                let index = (0..self.layout.bucket_slots())
                    .find(|&i| {
                        let offset = self.layout.bucket_slot_offset(bucket, i);
                        !is_occupied(self.region.load(offset + SLOT_INFO_OFFSET, Relaxed))
                    })
                    .expect("bucket count says a slot is free");
                break Some((bucket, index, count));
            }
            tail_header = self.layout.bucket_header_offset(bucket);
            link = self.bucket_link(bucket);
        };
        if let Some((bucket, index, count)) = slot {
            write_slot(
                &self.region,
                &self.layout,
                self.layout.bucket_slot_offset(bucket, index),
                &self.new_words,
            );
            self.set_bucket_count(bucket, count + 1);
        }
        self.set_segment_count(segment, self.segment_count(segment) + 1);
        self.overflow_len += 1;
        self.stats.overflow_inserts += 1;
        Ok(())
    }

    // ---- delete ------------------------------------------------------------

    /// Empties main slot `pos`: overflow swap if possible, else backward shift
    /// of the following run (then overflow swap into the slot it frees).
    fn remove_main(&mut self, pos: usize) {
        self.remove_main_moving(pos);
        self.moves_close();
    }

    /// [`RobinhoodTable::remove_main`] without closing the move sequences.
    fn remove_main_moving(&mut self, pos: usize) {
        if self.overflow_swap_into(pos) {
            return;
        }
        let mut next = pos + 1;
        while next < self.layout.main_slots() {
            match self.main_home(next) {
                Some(home) if home < next => {
                    // The object is in two slots until the next copy (or the
                    // final clear) overwrites `next`: its segment stays odd
                    // until the whole delete is done.
                    self.moves_open(self.layout.segment_of(home));
                    self.copy_slot(
                        self.layout.slot_offset(next),
                        self.layout.slot_offset(next - 1),
                    );
                    self.stats.moved_by_shifts += 1;
                    next += 1;
                }
                _ => break,
            }
        }
        let hole = next - 1;
        if hole != pos && self.overflow_swap_into(hole) {
            return;
        }
        write_slot(
            &self.region,
            &self.layout,
            self.layout.slot_offset(hole),
            &EMPTY_SLOT_WORDS,
        );
    }

    /// Homes `[lo, hi]` an object may have to be placed in main slot `pos`
    /// (whose current content is being discarded) without breaking the
    /// invariants: within `d_max` before `pos`, no earlier than the home of the
    /// object at `pos - 1` (or exactly `pos` if that slot is empty), and no later
    /// than the home of the object at `pos + 1`.
    fn home_window(&self, pos: usize) -> Option<(usize, usize)> {
        let mut hi = pos.min(self.layout.home_slots() - 1);
        if pos + 1 < self.layout.main_slots() {
            if let Some(next_home) = self.main_home(pos + 1) {
                hi = hi.min(next_home);
            }
        }
        let lo = match pos.checked_sub(1).and_then(|prev| self.main_home(prev)) {
            Some(prev_home) => prev_home.max(pos.saturating_sub(self.layout.d_max())),
            None => pos,
        };
        (lo <= hi).then_some((lo, hi))
    }

    /// Moves an overflow object that may legally live in main slot `pos` there
    /// (Xenic §4.1.2 "swaps an overflow element over the deleted element").
    /// Returns whether one was moved.
    fn overflow_swap_into(&mut self, pos: usize) -> bool {
        if self.overflow_len == 0 {
            return false;
        }
        let Some((lo, hi)) = self.home_window(pos) else {
            return false;
        };
        for segment in self.layout.segment_of(lo)..=self.layout.segment_of(hi) {
            if self.segment_count(segment) == 0 {
                continue;
            }
            let mut link = self.segment_link(segment);
            while let Some(bucket) = link {
                for index in 0..self.layout.bucket_slots() {
                    let offset = self.layout.bucket_slot_offset(bucket, index);
                    let info = self.region.load(offset + SLOT_INFO_OFFSET, Relaxed);
                    if !is_occupied(info) {
                        continue;
                    }
                    let home = self.layout.home_slot(&self.key_at(offset, info));
                    if (lo..=hi).contains(&home) {
                        // Into the main array first, out of the bucket second.
                        self.moves_open(segment);
                        self.copy_slot(offset, self.layout.slot_offset(pos));
                        self.max_displacement_seen = self.max_displacement_seen.max(pos - home);
                        self.overflow_remove(segment, bucket, index);
                        self.stats.overflow_swaps += 1;
                        return true;
                    }
                }
                link = self.bucket_link(bucket);
            }
        }
        false
    }

    /// Clears slot `index` of `bucket` in `segment`'s chain; unlinks the bucket
    /// and returns it to the pool if it empties. The bucket's link word is kept
    /// until reuse, so a reader inside it still reaches the rest of the chain.
    fn overflow_remove(&mut self, segment: usize, bucket: usize, index: usize) {
        write_slot(
            &self.region,
            &self.layout,
            self.layout.bucket_slot_offset(bucket, index),
            &EMPTY_SLOT_WORDS,
        );
        let count = self.bucket_count(bucket) - 1;
        self.set_bucket_count(bucket, count);
        self.set_segment_count(segment, self.segment_count(segment) - 1);
        self.overflow_len -= 1;
        if count > 0 {
            return;
        }
        let mut prev_header = self.layout.segment_header_offset(segment);
        let mut link = self.segment_link(segment);
        while link != Some(bucket) {
            let b = link.expect("an emptied bucket is in its segment's chain");
            prev_header = self.layout.bucket_header_offset(b);
            link = self.bucket_link(b);
        }
        let next = encode_link(self.bucket_link(bucket));
        self.region
            .store(prev_header + HEADER_LINK_OFFSET, next, Release);
        self.free_buckets.push_back(bucket);
    }
}
