//! Memory layout of the host table (Xenic §4.1.2), the part of host memory the
//! NIC runtime reads by DMA to look keys up (Xenic §4.1.3).
//!
//! This module is format only: offsets, slot and header encodings, decoders and
//! the torn-read rule. The Robinhood policy that places objects lives in
//! `splitkv-host` (`host/src/table/robinhood/`).
//!
//! # Region layout
//!
//! One [`Region`](crate::Region) holds, in this order (byte offsets from [`TableLayout`]):
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
//!   line"). Present only if `value_bytes_max > ROBINHOOD_VALUE_INLINE_BYTES_MAX`: a
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
//! `value_inline_bytes_max = min(value_bytes_max, ROBINHOOD_VALUE_INLINE_BYTES_MAX)`:
//!
//! | word | content |
//! |---|---|
//! | 0 | `seq_head` |
//! | 1 | `key.table: u32` (bits 0..32) · `value_len: u16` (bits 32..48) · `state: u16` (bits 48..64; 0 = empty, 1 = occupied with the value inline, 2 = occupied with the value out of line) |
//! | 2 | `key.id` |
//! | 3 | [`ObjectMeta`](crate::ObjectMeta) raw `u64` |
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
//! | 3 | [`ObjectMeta`](crate::ObjectMeta) raw `u64` of the owning object (its version) |
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
//! A reader need not copy a whole block: [`TableLayout::value_block_reads`]
//! names two reads, the block's words from `seq_head` up to the end of the
//! slot's `value_len` bytes and then `seq_tail`, which keep the seqlock
//! argument below (head loaded first, tail last, address-increasing), and
//! [`decode_value_block_copy`] decodes them. With one size class of 4 KiB
//! blocks, a 300-byte value then costs a 344-byte copy, not 4136 bytes.
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
//! job; see `host/src/table/robinhood/`.

mod config;
mod header;
mod layout;
mod slot;
mod value_block;

pub use config::{LayoutError, TableConfig};
pub use header::{BucketHeader, SegmentHeader};
pub use layout::TableLayout;
pub use slot::{
    decode_slot, decode_slot_info, encode_link, encode_slot, encode_slot_info, find_in_bucket,
    find_in_slots, read_acquire, SlotRead, SlotValue, ValueRef,
};
pub use value_block::{decode_value_block, decode_value_block_copy, encode_value_block, BlockRead};

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
/// Byte offset of the [`ObjectMeta`](crate::ObjectMeta) word inside a slot.
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
pub const ROBINHOOD_VALUE_BYTES_MAX: usize = 4096;
/// Largest value stored inside a slot, in bytes; longer values go to the value
/// heap (DESIGN.md, Xenic §4.1.2).
pub const ROBINHOOD_VALUE_INLINE_BYTES_MAX: usize = 256;
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
