//! Memory layout of the host table (Xenic §4.1.2), the part of host memory the
//! NIC runtime reads by DMA to look keys up (Xenic §4.1.3).
//!
//! This module is format only: offsets, slot and header encodings, decoders and
//! the torn-read rule. The Robinhood policy that places objects lives in
//! `splitkv-host` (`host/src/table/robinhood.rs`).
//!
//! # Region layout
//!
//! One [`Region`] holds, in this order (byte offsets from [`TableLayout`]):
//!
//! ```text
//! [segment headers: segments × 64 B]
//! [main slot array: (home_slots + d_max) × slot_bytes]   (starts 64 B aligned)
//! [overflow buckets: buckets × bucket_bytes]              (starts 64 B aligned)
//! [value heap: value_blocks × value_block_bytes]          (starts 64 B aligned)
//! ```
//!
//! * **Main array.** `home_slots` (a power of two) home positions plus `d_max`
//!   tail slots. A key's home is `key.hash64() & (home_slots - 1)`; no object
//!   sits more than `d_max` slots after its home, and the tail slots mean the
//!   probe never wraps: a key's whole probe range is the contiguous run of slots
//!   `home ..= home + d_max`, fetched by one DMA read ([`TableLayout::probe_range`]).
//! * **Segments.** Home positions are grouped into segments of `segment_slots`
//!   (a power of two). The NIC index keeps one entry per segment (Xenic §4.1.3).
//!   Each segment has a 64-byte [`SegmentHeader`]: the first overflow bucket of
//!   its chain, the number of objects in that chain, and a move sequence that
//!   lets a reader tell when a concurrent delete moved one of the segment's
//!   objects ([`HEADER_MOVES_OFFSET`]).
//! * **Overflow buckets.** A fixed pool of buckets, each a 64-byte
//!   [`BucketHeader`] (next bucket of the chain, occupied slots) followed by
//!   `bucket_slots` slots, contiguous ([`TableLayout::bucket_bytes`]). An object
//!   whose Robinhood position would exceed displacement `d_max` lives in the
//!   chain of its home segment instead.
//! * **Value heap** (Xenic §4.1.2, "objects over 256 bytes are stored out of
//!   line"). Present only if `value_bytes_max > VALUE_INLINE_BYTES_MAX`: a
//!   fixed pool of `value_blocks` blocks, each able to hold one value of up to
//!   `value_bytes_max` bytes ([`TableLayout::value_block_bytes`]). A slot whose
//!   value is longer than the inline capacity holds a reference to a block;
//!   the NIC runtime follows it with one more DMA read of the same region.
//!   (One size class: a 300-byte value takes a whole block.)
//!
//! # Slot format
//!
//! All fields are little-endian `u64` words; a slot is
//! `8 × (4 + ⌈value_inline_bytes_max / 8⌉ + 1)` bytes, where
//! `value_inline_bytes_max = min(value_bytes_max, VALUE_INLINE_BYTES_MAX)`:
//!
//! | word | content |
//! |---|---|
//! | 0 | `seq_head` |
//! | 1 | `key.table: u32` (bits 0..32) · `value_len: u16` (bits 32..48) · `state: u16` (bits 48..64; 0 = empty, 1 = occupied with the value inline, 2 = occupied with the value out of line) |
//! | 2 | `key.id` |
//! | 3 | [`ObjectMeta`] raw `u64` |
//! | 4 .. | state 1: value, zero-padded to a whole word, capacity `value_inline_bytes_max`; state 2: word 4 block index, word 5 block sequence number ([`ValueRef`]) |
//! | last | `seq_tail` |
//!
//! A value is inline iff `value_len ≤ value_inline_bytes_max`; decoders reject
//! a slot that says otherwise. For `value_bytes_max ≤ 256` the slot format and
//! size are the same as before the heap existed, and state 2 never occurs.
//!
//! # Value block format
//!
//! A block is `8 × (4 + ⌈value_bytes_max / 8⌉ + 1)` bytes:
//!
//! | word | content |
//! |---|---|
//! | 0 | `seq_head` |
//! | 1 | `key.table: u32` · `value_len: u16` · `state: u16` (0 = never written, 1 = holds a value), as the slot info word |
//! | 2 | `key.id` of the owning object |
//! | 3 | [`ObjectMeta`] raw `u64` of the owning object (its version) |
//! | 4 .. | value, zero-padded, capacity `value_bytes_max` |
//! | last | `seq_tail` |
//!
//! Blocks use the same seqlock as slots. The host writes a block completely
//! (closing its seqlock at sequence `s`) *before* it publishes a slot whose
//! [`ValueRef`] says `(block, s)`, and a block is only written again after the
//! slot stopped referencing it (freed blocks are reused in FIFO order, which
//! makes reuse under a slow reader rare). A reader that copied an intact slot
//! with reference `(b, s)`, key `k` and meta `m` accepts its copy of block `b`
//! only if the block's seqlock is closed at exactly `s` and the block names `k`,
//! `m` and the slot's `value_len` ([`decode_value_block`]); anything else means
//! the block was freed and reused (or is being written) since the slot was
//! copied, and the lookup starts over. Because sequence numbers never repeat,
//! "closed at `s`" alone identifies the write the slot referenced; the key and
//! meta checks are a second, independent guard against a wrong value.
//!
//! # Torn-read protection (slot seqlock)
//!
//! The host is the only writer; the DMA engine copies slots concurrently, word
//! by word in increasing address order, so it reads `seq_head` first and
//! `seq_tail` last. A writer that changes a slot whose words hold sequence `s`
//! (even) does:
//!
//! 1. `seq_tail ← s + 1` (odd: "write in progress");
//! 2. `fence(Release)`;
//! 3. the data words (1 ..= last − 1);
//! 4. `fence(Release)`;
//! 5. `seq_tail ← s + 2`, then `seq_head ← s + 2` with `Release`.
//!
//! A reader's copy is valid iff `seq_head == seq_tail` and both are even
//! ([`decode_slot`] returns [`SlotRead::Torn`] otherwise). Why this suffices:
//!
//! * If the copy holds any data word of a write that started at `s`, that word
//!   was stored after `seq_tail ← s + 1` (step 2 orders them), and the reader
//!   loads `seq_tail` after that word, so it sees `seq_tail ≥ s + 1`. Its
//!   `seq_head`, loaded before the data, is at most the value the last
//!   *completed* write left, i.e. `≤ s`. So `head ≠ tail`: torn.
//! * If the copy's `seq_head` is `s + 2`, the whole write `s` happened before
//!   (the Release store of `seq_head` publishes it), so every data word copied
//!   is from write `s` or a later one, and a later one would show up as
//!   `seq_tail ≥ s + 3` by the first argument.
//! * Sequence numbers only grow (64 bits, never reset, never reused — a freed
//!   slot keeps its sequence), so equal `head` and `tail` cannot come from two
//!   different writes.
//!
//! Both arguments need each word load to be ordered after the previous one
//! (Acquire, or an acquire fence between loads). x86 loads are ordered; on a
//! weakly ordered reader use [`read_acquire`] or an equivalent DMA engine.
//! Consistency *across* slots (objects moved by Robinhood swaps) is the host's
//! job; see `host/src/table/robinhood.rs`.

use crate::sync::Ordering;
use crate::{DecodeError, Key, ObjectMeta, Reader, Region, RegionError};

/// Size of a segment header and of a bucket header, in bytes (one cache line).
pub const HEADER_BYTES: usize = 64;
/// Byte offset, inside a segment or bucket header, of the link word: the
/// index + 1 of the next (first) overflow bucket, 0 for none.
pub const HEADER_LINK_OFFSET: usize = 0;
/// Byte offset, inside a segment or bucket header, of the count word
/// (segment: objects in the chain; bucket: occupied slots).
pub const HEADER_COUNT_OFFSET: usize = 8;
/// Byte offset, inside a segment header, of the move sequence: a counter the
/// host makes odd before a delete moves an object homed in the segment (or
/// reuses a bucket that was in the segment's chain) and even again after. A
/// reader that saw the same even value before and after its reads of a key
/// knows no object homed in that segment moved meanwhile, so "not found" is
/// definite. Bucket headers keep this word zero.
pub const HEADER_MOVES_OFFSET: usize = 16;

/// Byte offset of `seq_head` inside a slot.
pub const SLOT_SEQ_HEAD_OFFSET: usize = 0;
/// Byte offset of the info word (`key.table`, `value_len`, `state`) inside a slot.
pub const SLOT_INFO_OFFSET: usize = 8;
/// Byte offset of `key.id` inside a slot.
pub const SLOT_KEY_ID_OFFSET: usize = 16;
/// Byte offset of the [`ObjectMeta`] word inside a slot.
pub const SLOT_META_OFFSET: usize = 24;
/// Byte offset of the first value byte inside a slot.
pub const SLOT_VALUE_OFFSET: usize = 32;
/// Data words of a slot before the value: info, key id, meta.
pub const SLOT_FIXED_DATA_WORDS: usize = 3;

/// Slot `state` of an empty slot.
pub const SLOT_STATE_EMPTY: u16 = 0;
/// Slot `state` of a slot holding an object.
pub const SLOT_STATE_OCCUPIED: u16 = 1;

/// Largest allowed maximum displacement `d_max`, in slots.
pub const D_MAX_LIMIT: usize = 4096;
/// Largest allowed `value_bytes_max`, in bytes.
pub const VALUE_BYTES_LIMIT: usize = 4096;
/// Largest value stored inside a slot, in bytes; longer values go to the value
/// heap (DESIGN.md, Xenic §4.1.2).
pub const VALUE_INLINE_BYTES_MAX: usize = 256;
/// Largest number of value-heap blocks (block indexes are stored as `u32`).
pub const VALUE_BLOCKS_LIMIT: usize = u32::MAX as usize;
/// Slot `state` of a slot whose value lives in a value-heap block.
pub const SLOT_STATE_OUT_OF_LINE: u16 = 2;
/// Block `state` of a block holding a value.
pub const BLOCK_STATE_USED: u16 = 1;
/// Data words of an out-of-line reference in a slot (block index, block sequence).
pub const VALUE_REF_WORDS: usize = 2;
/// Largest allowed `segment_slots`.
pub const SEGMENT_SLOTS_LIMIT: usize = 1 << 20;
/// Largest allowed `bucket_slots`.
pub const BUCKET_SLOTS_LIMIT: usize = 4096;
/// Largest table region, in bytes (1 TiB).
pub const REGION_BYTES_LIMIT: usize = 1 << 40;

/// Sizing of a host table. Build the [`TableLayout`] with [`TableLayout::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableConfig {
    /// Keys the table is sized for: `home_slots` is chosen so this many keys
    /// fill about 90% of the home positions. Must be > 0.
    pub capacity_keys: usize,
    /// Global maximum displacement D_m, in slots (Xenic §4.1.2): 1 ..= [`D_MAX_LIMIT`].
    pub d_max: usize,
    /// Longest value the table stores, in bytes: 0 ..= [`VALUE_BYTES_LIMIT`].
    /// Values up to [`VALUE_INLINE_BYTES_MAX`] live inside the slot, longer
    /// ones in the value heap.
    pub value_bytes_max: usize,
    /// Home positions per segment: a power of two, ≤ [`SEGMENT_SLOTS_LIMIT`].
    /// Clamped to `home_slots` for tables smaller than one segment.
    pub segment_slots: usize,
    /// Size of the overflow pool, in slots, as a percentage (0 ..= 100) of `home_slots`.
    pub overflow_fraction_pct: usize,
    /// Slots per overflow bucket: 1 ..= [`BUCKET_SLOTS_LIMIT`].
    pub bucket_slots: usize,
    /// Blocks of the value heap (each holds one value longer than
    /// [`VALUE_INLINE_BYTES_MAX`]). `None` sizes the heap so that every key
    /// the table is sized for can hold a maximum-size value, plus 1/8 headroom
    /// that delays the reuse of freed blocks: `capacity_keys + ⌈capacity_keys /
    /// 8⌉`. Set it lower when few values are long (a block costs
    /// `value_block_bytes`, about `value_bytes_max + 40` bytes). Ignored (0
    /// blocks) when `value_bytes_max ≤ VALUE_INLINE_BYTES_MAX`.
    pub value_blocks: Option<usize>,
}

impl TableConfig {
    /// Default `d_max` (Xenic Table 2 uses D_m = 16 at 90% occupancy).
    pub const D_MAX_DEFAULT: usize = 16;
    /// Default `segment_slots`.
    pub const SEGMENT_SLOTS_DEFAULT: usize = 16;
    /// Default `overflow_fraction_pct`.
    pub const OVERFLOW_FRACTION_PCT_DEFAULT: usize = 10;
    /// Default `bucket_slots`.
    pub const BUCKET_SLOTS_DEFAULT: usize = 8;

    /// A configuration for `capacity_keys` keys with values up to
    /// `value_bytes_max` bytes, and defaults for everything else: `d_max` 16,
    /// 16-slot segments, an overflow pool of 10% of the home slots in 8-slot
    /// buckets, the default value heap (see [`TableConfig::value_blocks`]).
    pub fn new(capacity_keys: usize, value_bytes_max: usize) -> TableConfig {
        TableConfig {
            capacity_keys,
            d_max: Self::D_MAX_DEFAULT,
            value_bytes_max,
            segment_slots: Self::SEGMENT_SLOTS_DEFAULT,
            overflow_fraction_pct: Self::OVERFLOW_FRACTION_PCT_DEFAULT,
            bucket_slots: Self::BUCKET_SLOTS_DEFAULT,
            value_blocks: None,
        }
    }

    /// The number of value-heap blocks this configuration asks for (see
    /// [`TableConfig::value_blocks`]); `None` on `usize` overflow.
    pub fn value_blocks_resolved(&self) -> Option<usize> {
        if self.value_bytes_max <= VALUE_INLINE_BYTES_MAX {
            return Some(0);
        }
        match self.value_blocks {
            Some(n) => Some(n),
            None => self
                .capacity_keys
                .checked_add(self.capacity_keys.div_ceil(8)),
        }
    }
}

/// Why a [`TableConfig`] has no layout.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum LayoutError {
    /// `capacity_keys` is 0.
    #[error("table capacity must be at least one key")]
    ZeroCapacity,
    /// `d_max` is 0 or over [`D_MAX_LIMIT`].
    #[error("maximum displacement {d_max} outside 1..={max}")]
    DisplacementOutOfRange {
        /// The configured value.
        d_max: usize,
        /// The limit.
        max: usize,
    },
    /// `value_bytes_max` is over [`VALUE_BYTES_LIMIT`].
    #[error("value size {value_bytes_max} B exceeds the table format's {max} B")]
    ValueTooLarge {
        /// The configured value.
        value_bytes_max: usize,
        /// The limit.
        max: usize,
    },
    /// `segment_slots` is 0, not a power of two, or over [`SEGMENT_SLOTS_LIMIT`].
    #[error("segment size {segment_slots} is not a power of two in 1..={max}")]
    BadSegmentSlots {
        /// The configured value.
        segment_slots: usize,
        /// The limit.
        max: usize,
    },
    /// `bucket_slots` is 0 or over [`BUCKET_SLOTS_LIMIT`].
    #[error("bucket size {bucket_slots} outside 1..={max}")]
    BadBucketSlots {
        /// The configured value.
        bucket_slots: usize,
        /// The limit.
        max: usize,
    },
    /// `value_blocks` is over [`VALUE_BLOCKS_LIMIT`].
    #[error("value heap of {blocks} blocks exceeds {max}")]
    TooManyValueBlocks {
        /// The configured (or default) number of blocks.
        blocks: usize,
        /// The limit.
        max: usize,
    },
    /// `overflow_fraction_pct` is over 100.
    #[error("overflow pool of {pct}% of the home slots exceeds 100%")]
    BadOverflowFraction {
        /// The configured value.
        pct: usize,
    },
    /// The region would exceed [`REGION_BYTES_LIMIT`] (or overflow `usize`).
    #[error("a table for {capacity_keys} keys exceeds the {max} B region limit")]
    TooLarge {
        /// The configured capacity.
        capacity_keys: usize,
        /// The limit in bytes.
        max: usize,
    },
}

/// Byte offsets and sizes of one host table region; see the module docs for the
/// picture. Cheap to copy; the host and the NIC runtime build it from the same
/// [`TableConfig`] and must agree on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableLayout {
    home_slots: usize,
    d_max: usize,
    value_bytes_max: usize,
    value_inline_bytes_max: usize,
    slot_bytes: usize,
    segment_slots: usize,
    segments: usize,
    bucket_slots: usize,
    buckets: usize,
    bucket_bytes: usize,
    main_offset: usize,
    overflow_offset: usize,
    value_blocks: usize,
    value_block_bytes: usize,
    value_heap_offset: usize,
    region_bytes: usize,
}

impl TableLayout {
    /// Validates `config` and computes the layout. `home_slots` is
    /// `next_power_of_two(capacity_keys · 10 / 9)` (integer division), so the
    /// table is about 90% full at capacity; the overflow pool has
    /// `⌈⌈home_slots · overflow_fraction_pct / 100⌉ / bucket_slots⌉` buckets;
    /// the value heap has [`TableConfig::value_blocks_resolved`] blocks.
    ///
    /// # Errors
    /// A [`LayoutError`] naming the first out-of-range field.
    pub fn new(config: &TableConfig) -> Result<TableLayout, LayoutError> {
        if config.capacity_keys == 0 {
            return Err(LayoutError::ZeroCapacity);
        }
        if config.d_max == 0 || config.d_max > D_MAX_LIMIT {
            return Err(LayoutError::DisplacementOutOfRange {
                d_max: config.d_max,
                max: D_MAX_LIMIT,
            });
        }
        if config.value_bytes_max > VALUE_BYTES_LIMIT {
            return Err(LayoutError::ValueTooLarge {
                value_bytes_max: config.value_bytes_max,
                max: VALUE_BYTES_LIMIT,
            });
        }
        if !config.segment_slots.is_power_of_two() || config.segment_slots > SEGMENT_SLOTS_LIMIT {
            return Err(LayoutError::BadSegmentSlots {
                segment_slots: config.segment_slots,
                max: SEGMENT_SLOTS_LIMIT,
            });
        }
        if config.bucket_slots == 0 || config.bucket_slots > BUCKET_SLOTS_LIMIT {
            return Err(LayoutError::BadBucketSlots {
                bucket_slots: config.bucket_slots,
                max: BUCKET_SLOTS_LIMIT,
            });
        }
        if config.overflow_fraction_pct > 100 {
            return Err(LayoutError::BadOverflowFraction {
                pct: config.overflow_fraction_pct,
            });
        }
        let blocks = config.value_blocks_resolved().unwrap_or(usize::MAX);
        if blocks > VALUE_BLOCKS_LIMIT {
            return Err(LayoutError::TooManyValueBlocks {
                blocks,
                max: VALUE_BLOCKS_LIMIT,
            });
        }
        let too_large = LayoutError::TooLarge {
            capacity_keys: config.capacity_keys,
            max: REGION_BYTES_LIMIT,
        };
        Self::compute(config)
            .filter(|l| l.region_bytes <= REGION_BYTES_LIMIT)
            .ok_or(too_large)
    }

    /// The arithmetic of [`TableLayout::new`] for a validated config; `None` on
    /// `usize` overflow.
    fn compute(config: &TableConfig) -> Option<TableLayout> {
        let home_slots = config
            .capacity_keys
            .checked_mul(10)?
            .checked_div(9)?
            .checked_next_power_of_two()?;
        let segment_slots = config.segment_slots.min(home_slots);
        let segments = home_slots / segment_slots;
        let value_inline_bytes_max = config.value_bytes_max.min(VALUE_INLINE_BYTES_MAX);
        let value_words = value_inline_bytes_max.div_ceil(8);
        let slot_bytes = 8 * (1 + SLOT_FIXED_DATA_WORDS + value_words + 1);
        let main_offset = segments.checked_mul(HEADER_BYTES)?;
        let main_slots = home_slots.checked_add(config.d_max)?;
        let main_end = main_offset.checked_add(main_slots.checked_mul(slot_bytes)?)?;
        let overflow_offset = main_end.checked_next_multiple_of(HEADER_BYTES)?;
        let overflow_slots = home_slots
            .checked_mul(config.overflow_fraction_pct)?
            .div_ceil(100);
        let buckets = overflow_slots.div_ceil(config.bucket_slots);
        // Segment counts are stored as u32 in the format's decoders.
        if buckets.checked_mul(config.bucket_slots)? > u32::MAX as usize {
            return None;
        }
        let bucket_bytes = HEADER_BYTES + config.bucket_slots * slot_bytes;
        let overflow_end = overflow_offset.checked_add(buckets.checked_mul(bucket_bytes)?)?;
        let value_heap_offset = overflow_end.checked_next_multiple_of(HEADER_BYTES)?;
        let value_blocks = config.value_blocks_resolved()?;
        let value_block_bytes =
            8 * (1 + SLOT_FIXED_DATA_WORDS + config.value_bytes_max.div_ceil(8) + 1);
        let (value_heap_offset, region_bytes) = if value_blocks == 0 {
            (overflow_end, overflow_end)
        } else {
            let end =
                value_heap_offset.checked_add(value_blocks.checked_mul(value_block_bytes)?)?;
            (value_heap_offset, end)
        };
        Some(TableLayout {
            home_slots,
            d_max: config.d_max,
            value_bytes_max: config.value_bytes_max,
            value_inline_bytes_max,
            slot_bytes,
            segment_slots,
            segments,
            bucket_slots: config.bucket_slots,
            buckets,
            bucket_bytes,
            main_offset,
            overflow_offset,
            value_blocks,
            value_block_bytes,
            value_heap_offset,
            region_bytes,
        })
    }

    /// Home positions (a power of two).
    #[inline]
    pub fn home_slots(&self) -> usize {
        self.home_slots
    }

    /// Maximum displacement D_m, in slots.
    #[inline]
    pub fn d_max(&self) -> usize {
        self.d_max
    }

    /// Longest value the table stores, in bytes.
    #[inline]
    pub fn value_bytes_max(&self) -> usize {
        self.value_bytes_max
    }

    /// Inline value capacity per slot, in bytes:
    /// `min(value_bytes_max, VALUE_INLINE_BYTES_MAX)`. Longer values go out of line.
    #[inline]
    pub fn value_inline_bytes_max(&self) -> usize {
        self.value_inline_bytes_max
    }

    /// Whether a value of `len` bytes is stored out of line.
    #[inline]
    pub fn is_out_of_line(&self, len: usize) -> bool {
        len > self.value_inline_bytes_max
    }

    /// Blocks in the value heap (0 if `value_bytes_max ≤ VALUE_INLINE_BYTES_MAX`).
    #[inline]
    pub fn value_blocks(&self) -> usize {
        self.value_blocks
    }

    /// Size of one value block in bytes (a multiple of 8):
    /// `8 × (4 + ⌈value_bytes_max / 8⌉ + 1)`.
    #[inline]
    pub fn value_block_bytes(&self) -> usize {
        self.value_block_bytes
    }

    /// Byte offset of `seq_tail` inside a value block.
    #[inline]
    pub fn value_block_seq_tail_offset(&self) -> usize {
        self.value_block_bytes - 8
    }

    /// Byte offset of the value heap (64-byte aligned; equal to the region size
    /// if the heap is empty).
    #[inline]
    pub fn value_heap_offset(&self) -> usize {
        self.value_heap_offset
    }

    /// Byte offset of value block `block` (`< value_blocks`).
    #[inline]
    pub fn value_block_offset(&self, block: usize) -> usize {
        debug_assert!(
            block < self.value_blocks,
            "value block {block} out of range"
        );
        self.value_heap_offset + block * self.value_block_bytes
    }

    /// Size of one slot in bytes (a multiple of 8).
    #[inline]
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// Byte offset of `seq_tail` inside a slot (`slot_bytes - 8`).
    #[inline]
    pub fn slot_seq_tail_offset(&self) -> usize {
        self.slot_bytes - 8
    }

    /// Data words of a slot between `seq_head` and `seq_tail`.
    #[inline]
    pub fn slot_data_words(&self) -> usize {
        self.slot_bytes / 8 - 2
    }

    /// Size of the whole region in bytes: allocate a [`Region`] of this size.
    #[inline]
    pub fn region_bytes(&self) -> usize {
        self.region_bytes
    }

    /// Slots in the main array: `home_slots + d_max`.
    #[inline]
    pub fn main_slots(&self) -> usize {
        self.home_slots + self.d_max
    }

    /// Byte offset of the main slot array (64-byte aligned).
    #[inline]
    pub fn main_offset(&self) -> usize {
        self.main_offset
    }

    /// Byte offset of the overflow bucket pool (64-byte aligned).
    #[inline]
    pub fn overflow_offset(&self) -> usize {
        self.overflow_offset
    }

    /// Home slot of `key`: `key.hash64() & (home_slots - 1)`.
    #[inline]
    pub fn home_slot(&self, key: &Key) -> usize {
        (key.hash64() & (self.home_slots as u64 - 1)) as usize
    }

    /// Byte offset of main-array slot `slot` (`0 ..= home_slots + d_max - 1`).
    /// Larger `slot`s give offsets past the main array (debug builds assert).
    #[inline]
    pub fn slot_offset(&self, slot: usize) -> usize {
        debug_assert!(
            slot < self.main_slots(),
            "slot {slot} outside the main array"
        );
        self.main_offset + slot * self.slot_bytes
    }

    /// The DMA read that covers every main-array position `key` may occupy:
    /// `(byte offset, byte length)` of slots `home ..= home + d_max`.
    #[inline]
    pub fn probe_range(&self, key: &Key) -> (usize, usize) {
        (
            self.slot_offset(self.home_slot(key)),
            (self.d_max + 1) * self.slot_bytes,
        )
    }

    /// Home positions per segment (the configured value, clamped to `home_slots`).
    #[inline]
    pub fn segment_slots(&self) -> usize {
        self.segment_slots
    }

    /// Number of segments: `home_slots / segment_slots`.
    #[inline]
    pub fn segments(&self) -> usize {
        self.segments
    }

    /// Segment of home position `home` (`< home_slots`).
    #[inline]
    pub fn segment_of(&self, home: usize) -> usize {
        home / self.segment_slots
    }

    /// Byte offset of the 64-byte header of `segment` (`< segments`).
    #[inline]
    pub fn segment_header_offset(&self, segment: usize) -> usize {
        debug_assert!(segment < self.segments, "segment {segment} out of range");
        segment * HEADER_BYTES
    }

    /// Byte offset of the 64-byte header of overflow bucket `bucket`
    /// (0-based, `< buckets`); its slots follow it contiguously.
    #[inline]
    pub fn bucket_header_offset(&self, bucket: usize) -> usize {
        debug_assert!(bucket < self.buckets, "bucket {bucket} out of range");
        self.overflow_offset + bucket * self.bucket_bytes
    }

    /// Byte offset of slot `index` (`< bucket_slots`) of overflow bucket `bucket`.
    #[inline]
    pub fn bucket_slot_offset(&self, bucket: usize, index: usize) -> usize {
        debug_assert!(
            index < self.bucket_slots,
            "bucket slot {index} out of range"
        );
        self.bucket_header_offset(bucket) + HEADER_BYTES + index * self.slot_bytes
    }

    /// Size of one bucket in bytes: header plus `bucket_slots` slots, contiguous,
    /// so one DMA read fetches a whole bucket.
    #[inline]
    pub fn bucket_bytes(&self) -> usize {
        self.bucket_bytes
    }

    /// Slots per overflow bucket.
    #[inline]
    pub fn bucket_slots(&self) -> usize {
        self.bucket_slots
    }

    /// Buckets in the overflow pool (may be 0).
    #[inline]
    pub fn buckets(&self) -> usize {
        self.buckets
    }
}

/// Packs the info word of a slot (word 1).
#[inline]
pub fn encode_slot_info(key_table: u32, value_len: u16, state: u16) -> u64 {
    key_table as u64 | (value_len as u64) << 32 | (state as u64) << 48
}

/// Unpacks an info word into `(key.table, value_len, state)`; no validation.
#[inline]
pub fn decode_slot_info(word: u64) -> (u32, u16, u16) {
    (word as u32, (word >> 32) as u16, (word >> 48) as u16)
}

/// Encodes a header link: bucket index + 1, or 0 for none.
#[inline]
pub fn encode_link(bucket: Option<usize>) -> u64 {
    bucket.map_or(0, |b| b as u64 + 1)
}

/// Where an out-of-line value lives: a value-heap block and the sequence number
/// at which the host closed that block's seqlock after writing the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueRef {
    /// Block index (`< value_blocks`).
    pub block: usize,
    /// The block's `seq_head`/`seq_tail` right after the referenced write (even, ≥ 2).
    pub seq: u64,
}

/// The value of an object in a copied slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotValue<'a> {
    /// Stored in the slot; borrows the copied bytes.
    Inline(&'a [u8]),
    /// Stored in a value-heap block: read `block` and check it with
    /// [`decode_value_block`].
    OutOfLine {
        /// The block reference.
        block: ValueRef,
        /// Value length in bytes (`> value_inline_bytes_max`).
        len: usize,
    },
}

impl<'a> SlotValue<'a> {
    /// The inline bytes, or `None` for an out-of-line value.
    pub fn inline(&self) -> Option<&'a [u8]> {
        match self {
            SlotValue::Inline(v) => Some(v),
            SlotValue::OutOfLine { .. } => None,
        }
    }

    /// The value's length in bytes.
    pub fn len(&self) -> usize {
        match self {
            SlotValue::Inline(v) => v.len(),
            SlotValue::OutOfLine { len, .. } => *len,
        }
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What one copied slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotRead<'a> {
    /// No object (state 0).
    Empty,
    /// The copy overlapped a host write (`seq_head != seq_tail`, or odd): retry.
    Torn,
    /// An object.
    Object {
        /// The object's key.
        key: Key,
        /// Version and flags.
        meta: ObjectMeta,
        /// The value (inline bytes, or a reference into the value heap).
        value: SlotValue<'a>,
    },
}

/// Decodes one slot image (exactly `slot_bytes` bytes) copied from host memory.
///
/// Returns [`SlotRead::Torn`] if the sequence words disagree or are odd (the
/// rest of the slot is then not looked at), else the slot's content.
///
/// # Errors
/// [`DecodeError::Truncated`] / [`DecodeError::Inconsistent`] if `bytes` is not
/// exactly one slot; [`DecodeError::BadTag`] for a state other than 0, 1 or 2;
/// [`DecodeError::TooLarge`] if `value_len` exceeds what the state allows
/// (`value_inline_bytes_max` inline, `value_bytes_max` out of line) or the
/// block index is outside the heap; [`DecodeError::Inconsistent`] for an
/// out-of-line value short enough to be inline, or an odd block sequence.
pub fn decode_slot<'a>(layout: &TableLayout, bytes: &'a [u8]) -> Result<SlotRead<'a>, DecodeError> {
    const WHAT: &str = "table slot";
    if bytes.len() > layout.slot_bytes {
        return Err(DecodeError::Inconsistent {
            what: WHAT,
            detail: "trailing bytes",
        });
    }
    let mut r = Reader::new(bytes, WHAT);
    let head = r.u64()?;
    let data = r.take(layout.slot_bytes - 16)?;
    let tail = r.u64()?;
    if head != tail || head & 1 != 0 {
        return Ok(SlotRead::Torn);
    }
    let mut r = Reader::new(data, WHAT);
    let (table, value_len, state) = decode_slot_info(r.u64()?);
    let id = r.u64()?;
    let meta = ObjectMeta(r.u64()?);
    let len = value_len as usize;
    let value = match state {
        SLOT_STATE_EMPTY => return Ok(SlotRead::Empty),
        SLOT_STATE_OCCUPIED => {
            if len > layout.value_inline_bytes_max {
                return Err(DecodeError::TooLarge {
                    what: "table slot value_len",
                    len,
                    max: layout.value_inline_bytes_max,
                });
            }
            SlotValue::Inline(r.take(len)?)
        }
        SLOT_STATE_OUT_OF_LINE => {
            if len > layout.value_bytes_max {
                return Err(DecodeError::TooLarge {
                    what: "table slot value_len",
                    len,
                    max: layout.value_bytes_max,
                });
            }
            if !layout.is_out_of_line(len) {
                return Err(DecodeError::Inconsistent {
                    what: WHAT,
                    detail: "out-of-line value short enough to be inline",
                });
            }
            let block = r.u64()?;
            let seq = r.u64()?;
            if block >= layout.value_blocks as u64 {
                return Err(DecodeError::TooLarge {
                    what: "table slot value block",
                    len: usize::try_from(block).unwrap_or(usize::MAX),
                    max: layout.value_blocks.saturating_sub(1),
                });
            }
            if seq & 1 != 0 || seq == 0 {
                return Err(DecodeError::Inconsistent {
                    what: WHAT,
                    detail: "value block sequence odd or zero",
                });
            }
            SlotValue::OutOfLine {
                block: ValueRef {
                    block: block as usize,
                    seq,
                },
                len,
            }
        }
        tag => {
            return Err(DecodeError::BadTag {
                what: "table slot state",
                tag: tag as u64,
            })
        }
    };
    Ok(SlotRead::Object {
        key: Key::new(table, id),
        meta,
        value,
    })
}

/// What one copied value block holds, checked against the slot that referenced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockRead<'a> {
    /// The block holds the referenced value; borrows the copied bytes.
    Value(&'a [u8]),
    /// The copy overlapped a host write of the block: it was freed and is
    /// being reused. Start the lookup over.
    Torn,
    /// An intact copy of some other write (another sequence, key, meta or
    /// length): the block was freed and reused. Start the lookup over.
    Stale,
}

/// Decodes one value block image (exactly `value_block_bytes` bytes) copied
/// from host memory, expecting the value the slot of `key` with `meta` and an
/// out-of-line value of `len` bytes referenced with `value_ref`.
///
/// # Errors
/// [`DecodeError::Truncated`] / [`DecodeError::Inconsistent`] if `bytes` is not
/// exactly one block; [`DecodeError::TooLarge`] if an intact block at the
/// expected sequence claims a length over `value_bytes_max`. (A mismatch of
/// sequence, key, meta or length is not an error: it is [`BlockRead::Stale`].)
pub fn decode_value_block<'a>(
    layout: &TableLayout,
    bytes: &'a [u8],
    key: &Key,
    meta: ObjectMeta,
    len: usize,
    value_ref: ValueRef,
) -> Result<BlockRead<'a>, DecodeError> {
    const WHAT: &str = "value block";
    if bytes.len() > layout.value_block_bytes {
        return Err(DecodeError::Inconsistent {
            what: WHAT,
            detail: "trailing bytes",
        });
    }
    let mut r = Reader::new(bytes, WHAT);
    let head = r.u64()?;
    let data = r.take(layout.value_block_bytes.saturating_sub(16))?;
    let tail = r.u64()?;
    if head != tail || head & 1 != 0 {
        return Ok(BlockRead::Torn);
    }
    let mut r = Reader::new(data, WHAT);
    let (table, block_len, state) = decode_slot_info(r.u64()?);
    let id = r.u64()?;
    let block_meta = ObjectMeta(r.u64()?);
    if head != value_ref.seq
        || state != BLOCK_STATE_USED
        || Key::new(table, id) != *key
        || block_meta != meta
        || block_len as usize != len
    {
        return Ok(BlockRead::Stale);
    }
    if len > layout.value_bytes_max {
        return Err(DecodeError::TooLarge {
            what: "value block value_len",
            len,
            max: layout.value_bytes_max,
        });
    }
    Ok(BlockRead::Value(r.take(len)?))
}

/// Writes an intact value block image with sequence number `seq` holding the
/// value of `key` with `meta` into `out`. For tests and tools; the host writes
/// blocks in place with the seqlock protocol instead.
///
/// # Panics
/// If `out.len() != value_block_bytes`, `seq` is odd, or the value is longer
/// than `value_bytes_max` (caller bugs).
pub fn encode_value_block(
    layout: &TableLayout,
    seq: u64,
    key: Key,
    meta: ObjectMeta,
    value: &[u8],
    out: &mut [u8],
) {
    assert_eq!(out.len(), layout.value_block_bytes, "block image size");
    assert_eq!(seq % 2, 0, "odd block sequence");
    assert!(
        value.len() <= layout.value_bytes_max,
        "value exceeds the block"
    );
    out.fill(0);
    out[..8].copy_from_slice(&seq.to_le_bytes());
    let tail = layout.value_block_seq_tail_offset();
    out[tail..].copy_from_slice(&seq.to_le_bytes());
    let info = encode_slot_info(key.table, value.len() as u16, BLOCK_STATE_USED);
    out[SLOT_INFO_OFFSET..SLOT_INFO_OFFSET + 8].copy_from_slice(&info.to_le_bytes());
    out[SLOT_KEY_ID_OFFSET..SLOT_KEY_ID_OFFSET + 8].copy_from_slice(&key.id.to_le_bytes());
    out[SLOT_META_OFFSET..SLOT_META_OFFSET + 8].copy_from_slice(&meta.0.to_le_bytes());
    out[SLOT_VALUE_OFFSET..SLOT_VALUE_OFFSET + value.len()].copy_from_slice(value);
}

/// Scans a copied run of consecutive slots (a probe range, or a bucket's slots)
/// for `key`.
///
/// Returns `Ok(Some(SlotRead::Object { .. }))` from the first intact slot holding
/// `key`; otherwise `Ok(Some(SlotRead::Torn))` if any slot of the run was torn
/// (the key may be hiding there: retry), else `Ok(None)` (absent from this run).
///
/// # Errors
/// [`DecodeError::Inconsistent`] if `bytes` is not a whole number of slots, or
/// the first slot that [`decode_slot`] rejects.
pub fn find_in_slots<'a>(
    layout: &TableLayout,
    bytes: &'a [u8],
    key: &Key,
) -> Result<Option<SlotRead<'a>>, DecodeError> {
    let slots = bytes.chunks_exact(layout.slot_bytes);
    if !slots.remainder().is_empty() {
        return Err(DecodeError::Inconsistent {
            what: "table slot run",
            detail: "not a whole number of slots",
        });
    }
    let mut torn = false;
    for slot in slots {
        match decode_slot(layout, slot)? {
            found @ SlotRead::Object { key: k, .. } if k == *key => return Ok(Some(found)),
            SlotRead::Torn => torn = true,
            _ => {}
        }
    }
    Ok(torn.then_some(SlotRead::Torn))
}

/// Decodes one copied overflow bucket (exactly `bucket_bytes` bytes): its header
/// and the result of [`find_in_slots`] over its slots.
///
/// # Errors
/// As [`BucketHeader::decode`] and [`find_in_slots`]; [`DecodeError::Truncated`]
/// / [`DecodeError::Inconsistent`] if `bytes` is not exactly one bucket.
pub fn find_in_bucket<'a>(
    layout: &TableLayout,
    bytes: &'a [u8],
    key: &Key,
) -> Result<(BucketHeader, Option<SlotRead<'a>>), DecodeError> {
    const WHAT: &str = "overflow bucket";
    if bytes.len() > layout.bucket_bytes {
        return Err(DecodeError::Inconsistent {
            what: WHAT,
            detail: "trailing bytes",
        });
    }
    let mut r = Reader::new(bytes, WHAT);
    let header = BucketHeader::decode(layout, r.take(HEADER_BYTES)?)?;
    let slots = r.take(layout.bucket_slots * layout.slot_bytes)?;
    Ok((header, find_in_slots(layout, slots, key)?))
}

/// Header of one segment: the head of its overflow chain (Xenic §4.1.2), the
/// number of objects in the chain and the move sequence
/// ([`HEADER_MOVES_OFFSET`]). Encoded as 64 bytes: word 0 link (bucket index +
/// 1, 0 = none), word 1 count, word 2 move sequence, words 3..8 zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SegmentHeader {
    /// First overflow bucket of the chain (0-based), if any.
    pub overflow_head: Option<usize>,
    /// Objects stored in the chain.
    pub overflow_count: u32,
    /// Move sequence: odd while a delete moves objects homed in this segment.
    pub moves: u64,
}

/// Header of one overflow bucket: the next bucket of its segment's chain and
/// the number of occupied slots. Encoded as 64 bytes: word 0 link (bucket
/// index + 1, 0 = none), word 1 occupied, words 2..8 zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BucketHeader {
    /// Next bucket of the chain (0-based), if any.
    pub next: Option<usize>,
    /// Occupied slots in this bucket (`≤ bucket_slots`).
    pub occupied: u32,
}

/// Decodes the common 64-byte header shape: `(link, count, word 2)`, checking
/// length, link range, count bound and zero reserved words (word 2 is reserved
/// too unless `word2_used`).
fn decode_header(
    layout: &TableLayout,
    bytes: &[u8],
    what: &'static str,
    count_max: usize,
    word2_used: bool,
) -> Result<(Option<usize>, u32, u64), DecodeError> {
    if bytes.len() > HEADER_BYTES {
        return Err(DecodeError::Inconsistent {
            what,
            detail: "trailing bytes",
        });
    }
    let mut r = Reader::new(bytes, what);
    let link = r.u64()?;
    let count = r.u64()?;
    let word2 = r.u64()?;
    if word2 != 0 && !word2_used {
        return Err(DecodeError::Inconsistent {
            what,
            detail: "reserved word not zero",
        });
    }
    for _ in 3..HEADER_BYTES / 8 {
        if r.u64()? != 0 {
            return Err(DecodeError::Inconsistent {
                what,
                detail: "reserved word not zero",
            });
        }
    }
    let link = match link {
        0 => None,
        l if l - 1 < layout.buckets as u64 => Some((l - 1) as usize),
        l => {
            let len = usize::try_from(l - 1).unwrap_or(usize::MAX);
            return Err(DecodeError::TooLarge {
                what,
                len,
                max: layout.buckets.saturating_sub(1),
            });
        }
    };
    if count > count_max as u64 {
        let len = usize::try_from(count).unwrap_or(usize::MAX);
        return Err(DecodeError::TooLarge {
            what,
            len,
            max: count_max,
        });
    }
    Ok((link, count as u32, word2))
}

fn encode_header(link: Option<usize>, count: u32, word2: u64) -> [u8; HEADER_BYTES] {
    let mut out = [0u8; HEADER_BYTES];
    out[HEADER_LINK_OFFSET..HEADER_LINK_OFFSET + 8]
        .copy_from_slice(&encode_link(link).to_le_bytes());
    out[HEADER_COUNT_OFFSET..HEADER_COUNT_OFFSET + 8]
        .copy_from_slice(&(count as u64).to_le_bytes());
    out[HEADER_MOVES_OFFSET..HEADER_MOVES_OFFSET + 8].copy_from_slice(&word2.to_le_bytes());
    out
}

impl SegmentHeader {
    /// Decodes a segment header copied from host memory (exactly 64 bytes).
    ///
    /// # Errors
    /// Wrong length; a link to a bucket `≥ buckets`; a count over the pool's
    /// `buckets · bucket_slots`; non-zero reserved words.
    pub fn decode(layout: &TableLayout, bytes: &[u8]) -> Result<SegmentHeader, DecodeError> {
        let (overflow_head, overflow_count, moves) = decode_header(
            layout,
            bytes,
            "segment header",
            layout.buckets * layout.bucket_slots,
            true,
        )?;
        Ok(SegmentHeader {
            overflow_head,
            overflow_count,
            moves,
        })
    }

    /// The 64-byte encoding.
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        encode_header(self.overflow_head, self.overflow_count, self.moves)
    }
}

impl BucketHeader {
    /// Decodes a bucket header copied from host memory (exactly 64 bytes).
    ///
    /// # Errors
    /// Wrong length; a link to a bucket `≥ buckets`; `occupied > bucket_slots`;
    /// non-zero reserved words.
    pub fn decode(layout: &TableLayout, bytes: &[u8]) -> Result<BucketHeader, DecodeError> {
        let (next, occupied, _) =
            decode_header(layout, bytes, "bucket header", layout.bucket_slots, false)?;
        Ok(BucketHeader { next, occupied })
    }

    /// The 64-byte encoding.
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        encode_header(self.next, self.occupied, 0)
    }
}

/// Writes an intact slot image with sequence number `seq` into `out`: empty if
/// `object` is `None`. For tests and tools; the host writes slots in place with
/// the seqlock protocol instead.
///
/// # Panics
/// If `out.len() != slot_bytes` or `seq` is odd; if an inline value is longer
/// than `value_inline_bytes_max` or an out-of-line one is not longer (caller bugs).
pub fn encode_slot(
    layout: &TableLayout,
    seq: u64,
    object: Option<(Key, ObjectMeta, SlotValue<'_>)>,
    out: &mut [u8],
) {
    assert_eq!(out.len(), layout.slot_bytes, "slot image size");
    assert_eq!(seq % 2, 0, "odd slot sequence");
    out.fill(0);
    out[..8].copy_from_slice(&seq.to_le_bytes());
    let tail = layout.slot_seq_tail_offset();
    out[tail..].copy_from_slice(&seq.to_le_bytes());
    if let Some((key, meta, value)) = object {
        let state = match value {
            SlotValue::Inline(v) => {
                assert!(
                    v.len() <= layout.value_inline_bytes_max,
                    "value of {} B exceeds the slot",
                    v.len()
                );
                out[SLOT_VALUE_OFFSET..SLOT_VALUE_OFFSET + v.len()].copy_from_slice(v);
                SLOT_STATE_OCCUPIED
            }
            SlotValue::OutOfLine { block, len } => {
                assert!(layout.is_out_of_line(len), "out-of-line value fits inline");
                let at = SLOT_VALUE_OFFSET;
                out[at..at + 8].copy_from_slice(&(block.block as u64).to_le_bytes());
                out[at + 8..at + 16].copy_from_slice(&block.seq.to_le_bytes());
                SLOT_STATE_OUT_OF_LINE
            }
        };
        let info = encode_slot_info(key.table, value.len() as u16, state);
        out[SLOT_INFO_OFFSET..SLOT_INFO_OFFSET + 8].copy_from_slice(&info.to_le_bytes());
        out[SLOT_KEY_ID_OFFSET..SLOT_KEY_ID_OFFSET + 8].copy_from_slice(&key.id.to_le_bytes());
        out[SLOT_META_OFFSET..SLOT_META_OFFSET + 8].copy_from_slice(&meta.0.to_le_bytes());
    }
}

/// Copies `dst.len()` bytes from `region` at `offset` like
/// [`Region::read_bytes`] (word by word, increasing addresses), but with each
/// word loaded with `Acquire`, which is what the slot seqlock argument needs from
/// a reader on a weakly ordered CPU (on x86 it compiles to the same plain loads).
///
/// # Errors
/// [`RegionError`] if the range is outside the region or `offset` is misaligned.
pub fn read_acquire(region: &Region, offset: usize, dst: &mut [u8]) -> Result<(), RegionError> {
    region.check(offset, dst.len())?;
    for (i, chunk) in dst.chunks_mut(8).enumerate() {
        let word = region.load(offset + 8 * i, Ordering::Acquire).to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
    Ok(())
}
