//! The DLHT's memory format (Dandelion §6): 64-byte bins with a bounded chain of
//! 64-byte link buckets, as the host writes them and as a DMA reader copies them.
//!
//! # Lines
//!
//! Bins and link buckets are both *lines*: eight little-endian `u64` words,
//! 64-byte aligned, holding two slots each.
//!
//! | word | bin | link bucket |
//! |---|---|---|
//! | 0 | header (below) | owner: index of the bin it belongs to, plus one (0 = unused) |
//! | 1 | tags: slot tags and the next link index | same |
//! | 2, 3, 4 | slot 0: key id, [`ObjectMeta`], value word | same |
//! | 5, 6, 7 | slot 1: key id, [`ObjectMeta`], value word | same |
//!
//! A bin's chain is the bin followed by up to [`LINK_BUCKETS_PER_BIN_MAX`] link
//! buckets: chain slot `s` lives in line `s / 2` of the chain, position `s % 2`.
//! Link buckets are numbered from 1 in a per-table pool; index 0 means "no link".
//!
//! # Header (bin word 0)
//!
//! One header covers every slot of the chain, so a single compare-and-swap moves
//! any slot between states and a reader validates a whole chain with one word:
//!
//! | bits | field |
//! |---|---|
//! | `2s .. 2s+2` for `s < 16` | [`SlotState`] of chain slot `s` |
//! | 32 .. 34 | [`BinState`] (resize hand-off) |
//! | 34 .. 64 | version: +1 (mod 2^30) on every header change |
//!
//! # Tags (word 1)
//!
//! | bits | field |
//! |---|---|
//! | 0 .. 16 | tag of slot 0 of this line |
//! | 16 .. 32 | tag of slot 1 of this line |
//! | 32 .. 64 | index of the next link bucket (0 = end of chain) |
//!
//! A tag is `len_code | table << 4`: the key's table id in 12 bits (so tables
//! above [`TABLE_ID_MAX`] cannot be stored) and the value's length code in 4
//! bits: 0..=8 is the length of an inline value held in the value word's low
//! bytes, [`LEN_CODE_OUT_OF_LINE`] means the value word is the address of an
//! out-of-line record: `len: u64` (little endian) then `len` bytes.
//!
//! # Reading without locks
//!
//! A reader (a host thread or a DMA copy) reads the header, then the slots it
//! needs, then the header again; the slots are consistent if both header reads
//! are equal. Only slots whose state is [`SlotState::Valid`] hold data. A bin in
//! state [`BinState::Moved`] has been copied to the next, twice as large table;
//! its key's bin there is [`bin_index`] with the new bin count.

use crate::{DecodeError, Key, ObjectMeta};

/// Bytes in one bin or link bucket: one cache line.
pub const LINE_BYTES: usize = 64;
/// 64-bit words in one line.
pub const LINE_WORDS: usize = LINE_BYTES / 8;
/// Slots in one line (bin or link bucket).
pub const SLOTS_PER_LINE: usize = 2;
/// Bound on the chain: link buckets a bin may have after itself.
pub const LINK_BUCKETS_PER_BIN_MAX: usize = 7;
/// Lines in a full chain (the bin plus its link buckets).
pub const LINES_PER_CHAIN_MAX: usize = 1 + LINK_BUCKETS_PER_BIN_MAX;
/// Slots in a full chain; the header has state bits for exactly this many.
pub const SLOTS_PER_CHAIN_MAX: usize = LINES_PER_CHAIN_MAX * SLOTS_PER_LINE;
/// Largest table id a slot can store (12 bits).
pub const TABLE_ID_MAX: u32 = (1 << 12) - 1;
/// Largest value stored inline in the slot's value word.
pub const DLHT_VALUE_INLINE_BYTES_MAX: usize = 8;
/// Length code of a value stored out of line.
pub const LEN_CODE_OUT_OF_LINE: u8 = 15;
/// Bytes before the value bytes in an out-of-line record (the `u64` length).
pub const OUT_OF_LINE_HEADER_BYTES: usize = 8;
/// Largest value the table accepts (out of line), in bytes.
pub const DLHT_VALUE_BYTES_MAX: usize = 1 << 20;
/// Largest link-bucket index the tags word can hold.
pub const LINK_INDEX_MAX: u64 = u32::MAX as u64;

/// Word index of the header (bins) or owner (link buckets).
pub const WORD_CONTROL: usize = 0;
/// Word index of the tags word.
pub const WORD_TAGS: usize = 1;

/// Word index of slot `pos`'s key id (`pos < SLOTS_PER_LINE`).
#[inline]
pub const fn word_id(pos: usize) -> usize {
    2 + 3 * pos
}
/// Word index of slot `pos`'s [`ObjectMeta`].
#[inline]
pub const fn word_meta(pos: usize) -> usize {
    3 + 3 * pos
}
/// Word index of slot `pos`'s value word.
#[inline]
pub const fn word_value(pos: usize) -> usize {
    4 + 3 * pos
}

/// The bin of `key` in a table of `bin_count` bins (a power of two): the low
/// bits of [`Key::hash64`]. Doubling the table sends bin `b`'s keys to `b` or
/// `b + bin_count`.
#[inline]
pub fn bin_index(key: &Key, bin_count: usize) -> usize {
    debug_assert!(bin_count.is_power_of_two());
    (key.hash64() & (bin_count as u64 - 1)) as usize
}

/// State of one chain slot in the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum SlotState {
    /// Free: any writer may reserve it.
    Empty = 0,
    /// Reserved by one writer that is filling it; invisible to readers.
    Reserved = 1,
    /// Holds a key, its metadata and its value.
    Valid = 2,
}

impl SlotState {
    /// Decodes two state bits.
    #[inline]
    pub fn from_bits(bits: u64) -> Result<SlotState, DecodeError> {
        match bits {
            0 => Ok(SlotState::Empty),
            1 => Ok(SlotState::Reserved),
            2 => Ok(SlotState::Valid),
            tag => Err(DecodeError::BadTag {
                what: "dlht slot state",
                tag,
            }),
        }
    }
}

/// Resize state of a bin (Dandelion §6, non-blocking resize).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum BinState {
    /// Normal operation.
    Live = 0,
    /// Being copied to the next table: contents no longer change; readers may
    /// still read it, writers help finish the copy first.
    Frozen = 1,
    /// Copied: the key's current bin is in the next table.
    Moved = 2,
    /// A bin of a new table that its source bin is still being copied into;
    /// only the copying threads touch it.
    Pending = 3,
}

impl BinState {
    /// Decodes two state bits (every value is valid).
    #[inline]
    pub fn from_bits(bits: u64) -> BinState {
        match bits & 3 {
            0 => BinState::Live,
            1 => BinState::Frozen,
            2 => BinState::Moved,
            _ => BinState::Pending,
        }
    }
}

const STATE_MASK: u64 = 3;
const BIN_STATE_SHIFT: u32 = 32;
const VERSION_SHIFT: u32 = 34;
/// Mask of the header's version field after shifting (30 bits).
pub const HEADER_VERSION_MASK: u64 = (1 << 30) - 1;
const SLOT_STATES_MASK: u64 = (1 << BIN_STATE_SHIFT) - 1;
/// Bits of the header with one `1` per chain slot in the low bit of its state.
const STATE_LOW_BITS: u64 = 0x5555_5555;

/// Raw header-word helpers (the host's hot path uses these on `u64`s).
pub mod header {
    use super::*;

    /// The state bits of chain slot `s`.
    #[inline]
    pub const fn slot_bits(h: u64, s: usize) -> u64 {
        (h >> (2 * s)) & STATE_MASK
    }
    /// Whether chain slot `s` is [`SlotState::Valid`].
    #[inline]
    pub const fn is_valid(h: u64, s: usize) -> bool {
        slot_bits(h, s) == SlotState::Valid as u64
    }
    /// Whether chain slot `s` is [`SlotState::Empty`].
    #[inline]
    pub const fn is_empty(h: u64, s: usize) -> bool {
        slot_bits(h, s) == SlotState::Empty as u64
    }
    /// `h` with chain slot `s` in state `st` (version unchanged).
    #[inline]
    pub const fn with_slot(h: u64, s: usize, st: SlotState) -> u64 {
        (h & !(STATE_MASK << (2 * s))) | ((st as u64) << (2 * s))
    }
    /// One bit per chain slot (bit `s`) that is [`SlotState::Valid`].
    #[inline]
    pub const fn valid_mask(h: u64) -> u32 {
        // Valid = 0b10: high bit set, low bit clear.
        let hi = (h >> 1) & STATE_LOW_BITS;
        let lo = h & STATE_LOW_BITS;
        compress_even_bits(hi & !lo)
    }
    /// Whether any chain slot `s` or later is [`SlotState::Valid`] (a Get
    /// that missed slots `0 .. s` uses it to skip the rest of the chain).
    #[inline]
    pub const fn any_valid_from(h: u64, s: usize) -> bool {
        (((h >> 1) & !h & STATE_LOW_BITS) >> (2 * s)) != 0
    }
    /// One bit per chain slot (bit `s`) that is [`SlotState::Empty`].
    #[inline]
    pub const fn empty_mask(h: u64) -> u32 {
        let hi = (h >> 1) & STATE_LOW_BITS;
        let lo = h & STATE_LOW_BITS;
        compress_even_bits(!(hi | lo) & STATE_LOW_BITS)
    }
    /// One bit per chain slot (bit `s`) that is [`SlotState::Reserved`].
    #[inline]
    pub const fn reserved_mask(h: u64) -> u32 {
        let hi = (h >> 1) & STATE_LOW_BITS;
        let lo = h & STATE_LOW_BITS;
        compress_even_bits(lo & !hi)
    }
    /// The bin's resize state.
    #[inline]
    pub fn bin_state(h: u64) -> BinState {
        BinState::from_bits(h >> BIN_STATE_SHIFT)
    }
    /// `h` with resize state `st` (version unchanged).
    #[inline]
    pub const fn with_bin_state(h: u64, st: BinState) -> u64 {
        (h & !(STATE_MASK << BIN_STATE_SHIFT)) | ((st as u64) << BIN_STATE_SHIFT)
    }
    /// The version field (30 bits).
    #[inline]
    pub const fn version(h: u64) -> u64 {
        h >> VERSION_SHIFT
    }
    /// `h` with its version advanced by one (wrapping in 30 bits): every header
    /// change goes through this, so a reader never sees the same word twice
    /// across a change (short of 2^30 changes during one read).
    #[inline]
    pub const fn bumped(h: u64) -> u64 {
        let v = (version(h) + 1) & HEADER_VERSION_MASK;
        (h & !(HEADER_VERSION_MASK << VERSION_SHIFT)) | (v << VERSION_SHIFT)
    }
    /// The 32 slot-state bits.
    #[inline]
    pub const fn slot_states(h: u64) -> u64 {
        h & SLOT_STATES_MASK
    }

    /// Packs bits 0, 2, 4, .. 30 of `x` into bits 0 .. 16.
    #[inline]
    const fn compress_even_bits(x: u64) -> u32 {
        let mut x = x & STATE_LOW_BITS;
        x = (x | (x >> 1)) & 0x3333_3333;
        x = (x | (x >> 2)) & 0x0F0F_0F0F;
        x = (x | (x >> 4)) & 0x00FF_00FF;
        x = (x | (x >> 8)) & 0x0000_FFFF;
        x as u32
    }
}

/// Raw tags-word helpers.
pub mod tags {
    /// The 16-bit tag of slot `pos` of this line.
    #[inline]
    pub const fn tag(w: u64, pos: usize) -> u16 {
        (w >> (16 * pos)) as u16
    }
    /// The next link-bucket index (0 = none).
    #[inline]
    pub const fn link(w: u64) -> u32 {
        (w >> 32) as u32
    }
    /// `w` with next-link index `link`.
    #[inline]
    pub const fn with_link(w: u64, link: u32) -> u64 {
        (w & 0xFFFF_FFFF) | ((link as u64) << 32)
    }
    /// The bits of `w` that hold slot `pos`'s tag.
    #[inline]
    pub const fn tag_mask(pos: usize) -> u64 {
        0xFFFF << (16 * pos)
    }
    /// A slot tag from a table id (≤ [`TABLE_ID_MAX`](super::TABLE_ID_MAX)) and a length code.
    #[inline]
    pub const fn make_tag(table: u32, len_code: u8) -> u16 {
        ((table as u16) << 4) | (len_code as u16 & 0xF)
    }
    /// The table id of a tag.
    #[inline]
    pub const fn tag_table(tag: u16) -> u32 {
        (tag >> 4) as u32
    }
    /// The length code of a tag.
    #[inline]
    pub const fn tag_len_code(tag: u16) -> u8 {
        (tag & 0xF) as u8
    }
}

/// A decoded bin header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinHeader {
    /// State of each chain slot.
    pub slots: [SlotState; SLOTS_PER_CHAIN_MAX],
    /// Resize state.
    pub bin_state: BinState,
    /// Version (30 bits).
    pub version: u32,
}

impl BinHeader {
    /// Decodes a header word; fails on the unused slot state `3`.
    pub fn from_word(h: u64) -> Result<BinHeader, DecodeError> {
        let mut slots = [SlotState::Empty; SLOTS_PER_CHAIN_MAX];
        for (s, slot) in slots.iter_mut().enumerate() {
            *slot = SlotState::from_bits(header::slot_bits(h, s))?;
        }
        Ok(BinHeader {
            slots,
            bin_state: header::bin_state(h),
            version: header::version(h) as u32,
        })
    }

    /// Encodes the header word.
    pub fn to_word(&self) -> u64 {
        let mut h = header::with_bin_state(0, self.bin_state);
        for (s, st) in self.slots.iter().enumerate() {
            h = header::with_slot(h, s, *st);
        }
        h | ((self.version as u64 & HEADER_VERSION_MASK) << VERSION_SHIFT)
    }
}

/// Where a slot's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotValue {
    /// Held in the slot: the first `len` bytes of `bytes`.
    Inline {
        /// Value length, 0..=8.
        len: u8,
        /// The value word's bytes (little endian); bytes past `len` are zero.
        bytes: [u8; DLHT_VALUE_INLINE_BYTES_MAX],
    },
    /// An out-of-line record at this host address (see the module docs).
    OutOfLine {
        /// Host address of the record.
        addr: u64,
    },
}

impl SlotValue {
    /// The inline bytes, or `None` for an out-of-line value.
    pub fn inline_bytes(&self) -> Option<&[u8]> {
        match self {
            SlotValue::Inline { len, bytes } => Some(&bytes[..*len as usize]),
            SlotValue::OutOfLine { .. } => None,
        }
    }
}

/// One [`SlotState::Valid`] slot of a decoded line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodedSlot {
    /// Chain slot number (`line * 2 + pos`).
    pub slot: usize,
    /// The key.
    pub key: Key,
    /// Its metadata.
    pub meta: ObjectMeta,
    /// Its value.
    pub value: SlotValue,
}

/// A decoded line: the valid slots and the next link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodedLine {
    /// The chain header this line was decoded against.
    pub header: BinHeader,
    /// Line number in the chain: 0 for the bin, k for its k-th link bucket.
    pub line: usize,
    /// For link buckets: the owner word (bin index + 1). 0 for bins.
    pub owner: u64,
    /// Next link-bucket index (0 = end of chain).
    pub next_link: u32,
    /// The line's slots; `None` where the header does not say `Valid`.
    pub slots: [Option<DecodedSlot>; SLOTS_PER_LINE],
}

fn line_words(bytes: &[u8]) -> Result<[u64; LINE_WORDS], DecodeError> {
    if bytes.len() != LINE_BYTES {
        return Err(if bytes.len() < LINE_BYTES {
            DecodeError::Truncated {
                what: "dlht line",
                need: LINE_BYTES,
                have: bytes.len(),
            }
        } else {
            DecodeError::Inconsistent {
                what: "dlht line",
                detail: "trailing bytes",
            }
        });
    }
    let mut w = [0u64; LINE_WORDS];
    for (i, chunk) in bytes.chunks_exact(8).enumerate() {
        w[i] = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
    }
    Ok(w)
}

fn decode_slots(
    w: &[u64; LINE_WORDS],
    header: BinHeader,
    line: usize,
) -> Result<[Option<DecodedSlot>; SLOTS_PER_LINE], DecodeError> {
    let mut out = [None; SLOTS_PER_LINE];
    for (pos, out_slot) in out.iter_mut().enumerate() {
        let slot = line * SLOTS_PER_LINE + pos;
        if header.slots[slot] != SlotState::Valid {
            continue;
        }
        let tag = tags::tag(w[WORD_TAGS], pos);
        let key = Key::new(tags::tag_table(tag), w[word_id(pos)]);
        let meta = ObjectMeta(w[word_meta(pos)]);
        let word = w[word_value(pos)];
        let value = match tags::tag_len_code(tag) {
            len @ 0..=8 => {
                let bytes = word.to_le_bytes();
                if bytes[len as usize..].iter().any(|&b| b != 0) {
                    return Err(DecodeError::Inconsistent {
                        what: "dlht slot",
                        detail: "inline value has bytes past its length",
                    });
                }
                SlotValue::Inline { len, bytes }
            }
            LEN_CODE_OUT_OF_LINE => {
                if word == 0 {
                    return Err(DecodeError::Inconsistent {
                        what: "dlht slot",
                        detail: "null out-of-line address",
                    });
                }
                SlotValue::OutOfLine { addr: word }
            }
            code => {
                return Err(DecodeError::BadTag {
                    what: "dlht value length code",
                    tag: code as u64,
                })
            }
        };
        *out_slot = Some(DecodedSlot {
            slot,
            key,
            meta,
            value,
        });
    }
    Ok(out)
}

/// Decodes a 64-byte bin copied from host memory (its header and its two slots).
///
/// # Errors
/// [`DecodeError`] if `bytes` is not exactly [`LINE_BYTES`] long, a slot state is
/// the unused value 3, or a valid slot has a bad length code, a null out-of-line
/// address or nonzero bytes past an inline value's length. Never panics.
pub fn decode_bin(bytes: &[u8]) -> Result<DecodedLine, DecodeError> {
    let w = line_words(bytes)?;
    let header = BinHeader::from_word(w[WORD_CONTROL])?;
    Ok(DecodedLine {
        header,
        line: 0,
        owner: 0,
        next_link: tags::link(w[WORD_TAGS]),
        slots: decode_slots(&w, header, 0)?,
    })
}

/// Decodes the `line`-th link bucket (1..=[`LINK_BUCKETS_PER_BIN_MAX`]) of the
/// chain of bin `bin`, against that bin's `header` (read before and validated
/// after the copy by the caller).
///
/// # Errors
/// As [`decode_bin`], plus [`DecodeError::TooLarge`] for a `line` outside the
/// chain bound and [`DecodeError::Inconsistent`] if the bucket's owner word is
/// not `bin + 1`.
pub fn decode_link(
    bytes: &[u8],
    header: &BinHeader,
    bin: u64,
    line: usize,
) -> Result<DecodedLine, DecodeError> {
    if line == 0 || line > LINK_BUCKETS_PER_BIN_MAX {
        return Err(DecodeError::TooLarge {
            what: "dlht link line number",
            len: line,
            max: LINK_BUCKETS_PER_BIN_MAX,
        });
    }
    let w = line_words(bytes)?;
    let owner = w[WORD_CONTROL];
    if owner != bin.wrapping_add(1) {
        return Err(DecodeError::Inconsistent {
            what: "dlht link bucket",
            detail: "owner is not this bin",
        });
    }
    Ok(DecodedLine {
        header: *header,
        line,
        owner,
        next_link: tags::link(w[WORD_TAGS]),
        slots: decode_slots(&w, *header, line)?,
    })
}

/// Decodes an out-of-line value record (`len: u64` little endian, then `len`
/// bytes) and returns the value bytes.
///
/// # Errors
/// [`DecodeError::Truncated`] if `bytes` is shorter than the record says,
/// [`DecodeError::TooLarge`] if the length exceeds [`DLHT_VALUE_BYTES_MAX`],
/// [`DecodeError::Inconsistent`] if the length would have fit inline.
pub fn decode_out_of_line(bytes: &[u8]) -> Result<&[u8], DecodeError> {
    let mut r = crate::Reader::new(bytes, "dlht out-of-line value");
    let len = r.u64()?;
    if len > DLHT_VALUE_BYTES_MAX as u64 {
        return Err(DecodeError::TooLarge {
            what: "dlht out-of-line value",
            len: usize::try_from(len).unwrap_or(usize::MAX),
            max: DLHT_VALUE_BYTES_MAX,
        });
    }
    if len as usize <= DLHT_VALUE_INLINE_BYTES_MAX {
        return Err(DecodeError::Inconsistent {
            what: "dlht out-of-line value",
            detail: "length fits inline",
        });
    }
    r.take(len as usize)
}

#[cfg(test)]
mod tests;

/// DMA address space of a DLHT as a NIC runtime reads it (the host exposes the
/// current generation through it).
///
/// A byte offset is `log2(bin_count) << DMA_BINS_SHIFT | line · 64`, where line 0
/// is the [`DmaDescriptor`](dma::DmaDescriptor), lines `1..=bin_count` the bins, and line
/// `bin_count + i` link bucket `i`. The bin count in the offset lets the host
/// refuse a read made against another table size (a resize happened): the
/// reader then re-reads the descriptor.
pub mod dma;
