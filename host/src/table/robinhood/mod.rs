//! Xenic's host-side Robinhood hash table (Xenic §4.1.2), stored in a shared
//! [`Region`] in the layout of [`splitkv_layout::robinhood_layout`], so the NIC runtime can
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
//!   chain; [`RobinhoodError::Full`] when the pool is empty). Existing objects thus
//!   never move from the main array to a bucket.
//! * **Delete** (no tombstones): if an overflow object of a nearby segment can
//!   legally live in the freed slot (its home is in range, at most `d_max`
//!   back, and keeps the cluster sorted), it is moved in ("overflow swap");
//!   otherwise the following run is shifted back one slot until an empty slot or
//!   an object at its home, and the slot freed at the end of the run is offered
//!   to the overflow chains the same way before it is cleared.
//!
//! * **Out-of-line values** (Xenic §4.1.2): a value longer than
//!   [`ROBINHOOD_VALUE_INLINE_BYTES_MAX`](splitkv_layout::robinhood_layout::ROBINHOOD_VALUE_INLINE_BYTES_MAX) goes to a block of the value heap and the slot
//!   holds a reference to it (format in [`splitkv_layout::robinhood_layout`]). An upsert
//!   takes a block from the FIFO free list, writes it completely, then writes
//!   the slot, then frees the object's previous block (if any); a delete frees
//!   the block after the slot is gone. Swaps, shifts and overflow moves copy
//!   only the slot (the reference), never the block. No free block:
//!   [`RobinhoodError::ValueHeapFull`], table unchanged.
//!
//! # Concurrent DMA readers
//!
//! Every slot write goes through the slot seqlock of [`splitkv_layout::robinhood_layout`],
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
//!   (`splitkv_layout::robinhood_layout::HEADER_MOVES_OFFSET`): before a delete moves an
//!   object homed in segment `S` (or an insert reuses a bucket that was in
//!   `S`'s chain), the host makes `S`'s sequence odd; when the operation is
//!   done, even again. A reader reads the sequence of its key's home segment
//!   before its first slot and again after its last one; only the same even
//!   value both times makes "not found" definite, otherwise it looks again
//!   (the NIC lookup, `nic-runtime/src/index/robinhood_lookup.rs`). A found object needs
//!   no check: the slot seqlock already proves it was there. Inserts and
//!   updates never touch the sequence, and the loom model
//!   `delete_shift_never_hides_a_key_from_a_checked_reader`
//!   (`host/tests/robinhood_loom.rs`) checks the delete side.
//! * **Value blocks** are never rewritten while a slot references them. A
//!   reader that copied a slot referencing block `b` at sequence `s` may find
//!   `b` freed and rewritten for another object by the time it reads it; the
//!   block's seqlock, sequence and key/meta words tell it so
//!   ([`splitkv_layout::robinhood_layout::decode_value_block`]) and it starts over. The
//!   FIFO free list makes that rare: a freed block is reused only after every
//!   block freed before it.

mod batch;
mod delete;
mod insert;
mod invariants;
mod lookup;
mod slots;

use slots::write_slot;

use super::Upserted;
use crate::table::sync::Ordering::Relaxed;
use splitkv_layout::robinhood_layout::{LayoutError, TableConfig, TableLayout, SLOT_META_OFFSET};
use splitkv_layout::{Key, ObjectMeta, Region};
use std::collections::VecDeque;

/// Why a table operation failed. A failed operation leaves the table unchanged.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum RobinhoodError {
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
    /// The value is longer than [`ROBINHOOD_VALUE_INLINE_BYTES_MAX`](splitkv_layout::robinhood_layout::ROBINHOOD_VALUE_INLINE_BYTES_MAX) and every block of
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
pub struct RobinhoodStats {
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
    stats: RobinhoodStats,
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
impl RobinhoodTable {
    /// Builds an empty table: computes the layout and allocates its zeroed region
    /// ([`TableLayout::region_bytes`]).
    ///
    /// # Errors
    /// [`RobinhoodError::Layout`] if `config` is invalid.
    pub fn new(config: &TableConfig) -> Result<RobinhoodTable, RobinhoodError> {
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
            stats: RobinhoodStats::default(),
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
    /// longer than [`ROBINHOOD_VALUE_INLINE_BYTES_MAX`](splitkv_layout::robinhood_layout::ROBINHOOD_VALUE_INLINE_BYTES_MAX)).
    pub fn value_blocks_in_use(&self) -> usize {
        self.layout.value_blocks() - self.free_blocks.len()
    }

    /// The largest displacement, in slots, at which any object has been placed
    /// in the main array since the table was built (≤ `d_max`).
    pub fn max_displacement_seen(&self) -> usize {
        self.max_displacement_seen
    }

    /// Work counters since the table was built.
    pub fn stats(&self) -> RobinhoodStats {
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
    /// [`RobinhoodError::ValueTooLarge`] if `value` exceeds `value_bytes_max`;
    /// [`RobinhoodError::ValueHeapFull`] if `value` must go out of line and no
    /// block is free; [`RobinhoodError::Full`] if a new key fits neither the main
    /// array nor the overflow pool. The table is unchanged on error.
    pub fn upsert(
        &mut self,
        key: Key,
        meta: ObjectMeta,
        value: &[u8],
    ) -> Result<bool, RobinhoodError> {
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
    ) -> Result<Upserted, RobinhoodError> {
        self.upsert_with(key, meta, value, true)
    }

    fn upsert_with(
        &mut self,
        key: Key,
        meta: ObjectMeta,
        value: &[u8],
        only_if_newer: bool,
    ) -> Result<Upserted, RobinhoodError> {
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
            return Err(RobinhoodError::ValueTooLarge {
                len: value.len(),
                max,
            });
        }
        // A long value's block is written in full before any slot refers to it.
        let block = if self.layout.is_out_of_line(value.len()) {
            let block = self
                .free_blocks
                .pop_front()
                .ok_or(RobinhoodError::ValueHeapFull {
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
}
