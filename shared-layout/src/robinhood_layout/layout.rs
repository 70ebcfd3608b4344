//! Byte offsets and sizes of one host table region ([`TableLayout`]); the
//! picture is in the module docs of [`crate::robinhood_layout`].

use super::*;
use crate::Key;

/// Byte offsets and sizes of one host table region; see the module docs for the
/// picture. Cheap to copy; the host and the NIC runtime build it from the same
/// [`TableConfig`] and must agree on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableLayout {
    pub(super) home_slots: usize,
    pub(super) d_max: usize,
    pub(super) value_bytes_max: usize,
    pub(super) value_inline_bytes_max: usize,
    pub(super) slot_bytes: usize,
    pub(super) segment_slots: usize,
    pub(super) segments: usize,
    pub(super) bucket_slots: usize,
    pub(super) buckets: usize,
    pub(super) bucket_bytes: usize,
    pub(super) main_offset: usize,
    pub(super) overflow_offset: usize,
    pub(super) value_blocks: usize,
    pub(super) value_block_bytes: usize,
    pub(super) value_heap_offset: usize,
    pub(super) region_bytes: usize,
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
        if config.value_bytes_max > ROBINHOOD_VALUE_BYTES_MAX {
            return Err(LayoutError::ValueTooLarge {
                value_bytes_max: config.value_bytes_max,
                max: ROBINHOOD_VALUE_BYTES_MAX,
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
        let value_inline_bytes_max = config.value_bytes_max.min(ROBINHOOD_VALUE_INLINE_BYTES_MAX);
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
    /// `min(value_bytes_max, ROBINHOOD_VALUE_INLINE_BYTES_MAX)`. Longer values go out of line.
    #[inline]
    pub fn value_inline_bytes_max(&self) -> usize {
        self.value_inline_bytes_max
    }

    /// Whether a value of `len` bytes is stored out of line.
    #[inline]
    pub fn is_out_of_line(&self, len: usize) -> bool {
        len > self.value_inline_bytes_max
    }

    /// Blocks in the value heap (0 if `value_bytes_max ≤ ROBINHOOD_VALUE_INLINE_BYTES_MAX`).
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

    /// The two DMA reads, `(byte offset, byte length)`, that copy just what a
    /// reader needs of value block `block` holding a value of `len` bytes
    /// (`len` is clamped to `value_bytes_max`): the block's first
    /// `32 + ⌈len / 8⌉ × 8` bytes (`seq_head`, info, key id, meta, value) and
    /// its `seq_tail` word. Read in this order, address-increasing, they keep
    /// the seqlock argument of the module docs (`seq_head` first, `seq_tail`
    /// last), and a 300-byte value in a heap of 4 KiB blocks costs a 344-byte
    /// copy instead of the whole block. [`decode_value_block_copy`](super::decode_value_block_copy)
    /// decodes the bytes of both reads concatenated
    /// ([`TableLayout::value_block_copy_bytes`] of them).
    #[inline]
    pub fn value_block_reads(&self, block: usize, len: usize) -> [(usize, usize); 2] {
        let at = self.value_block_offset(block);
        [
            (at, self.value_block_prefix_bytes(len)),
            (at + self.value_block_seq_tail_offset(), 8),
        ]
    }

    /// Bytes [`TableLayout::value_block_reads`] copies for a value of `len`
    /// bytes: `32 + ⌈min(len, value_bytes_max) / 8⌉ × 8 + 8`, at most
    /// [`TableLayout::value_block_bytes`].
    #[inline]
    pub fn value_block_copy_bytes(&self, len: usize) -> usize {
        self.value_block_prefix_bytes(len) + 8
    }

    /// Bytes of a block up to the end of a `len`-byte value, word-rounded.
    #[inline]
    fn value_block_prefix_bytes(&self, len: usize) -> usize {
        SLOT_VALUE_OFFSET + len.min(self.value_bytes_max).div_ceil(8) * 8
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

    /// Size of the whole region in bytes: allocate a [`Region`](crate::Region) of this size.
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
