//! Sizing of a host table ([`TableConfig`]) and why a sizing has no layout ([`LayoutError`]).

use super::*;

/// Sizing of a host table. Build the [`TableLayout`] with [`TableLayout::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableConfig {
    /// Keys the table is sized for: `home_slots` is chosen so this many keys
    /// fill about 90% of the home positions. Must be > 0.
    pub capacity_keys: usize,
    /// Global maximum displacement D_m, in slots (Xenic §4.1.2): 1 ..= [`D_MAX_LIMIT`].
    pub d_max: usize,
    /// Longest value the table stores, in bytes: 0 ..= [`ROBINHOOD_VALUE_BYTES_MAX`].
    /// Values up to [`ROBINHOOD_VALUE_INLINE_BYTES_MAX`] live inside the slot, longer
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
    /// [`ROBINHOOD_VALUE_INLINE_BYTES_MAX`]). `None` sizes the heap so that every key
    /// the table is sized for can hold a maximum-size value, plus 1/8 headroom
    /// that delays the reuse of freed blocks: `capacity_keys + ⌈capacity_keys /
    /// 8⌉`. Set it lower when few values are long (a block costs
    /// `value_block_bytes`, about `value_bytes_max + 40` bytes). Ignored (0
    /// blocks) when `value_bytes_max ≤ ROBINHOOD_VALUE_INLINE_BYTES_MAX`.
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
        if self.value_bytes_max <= ROBINHOOD_VALUE_INLINE_BYTES_MAX {
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
    /// `value_bytes_max` is over [`ROBINHOOD_VALUE_BYTES_MAX`].
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
