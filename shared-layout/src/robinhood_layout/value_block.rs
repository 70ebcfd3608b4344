//! Value blocks of the value heap (Xenic §4.1.2, values over 256 B out of line):
//! decoding a copied block against the slot that referenced it, and encoding one.

use super::*;
use crate::{DecodeError, Key, ObjectMeta, Reader};

const WHAT: &str = "value block";

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
    check_block(layout, head, data, tail, key, meta, len, value_ref)
}

/// Like [`decode_value_block`], for the copy [`TableLayout::value_block_reads`]
/// makes: the block's first bytes up to the end of a `len`-byte value, then
/// its `seq_tail` word, exactly [`TableLayout::value_block_copy_bytes`]`(len)`
/// bytes (Xenic §4.1.2: the NIC fetches an out-of-line value with one more
/// DMA read; this one reads only the value's own bytes).
///
/// # Errors
/// [`DecodeError::Truncated`] / [`DecodeError::Inconsistent`] if `bytes` is not
/// exactly that long; [`DecodeError::TooLarge`] if `len` exceeds
/// `value_bytes_max`. A mismatch of sequence, key, meta or length is
/// [`BlockRead::Stale`], a torn copy [`BlockRead::Torn`].
pub fn decode_value_block_copy<'a>(
    layout: &TableLayout,
    bytes: &'a [u8],
    key: &Key,
    meta: ObjectMeta,
    len: usize,
    value_ref: ValueRef,
) -> Result<BlockRead<'a>, DecodeError> {
    if len > layout.value_bytes_max {
        return Err(DecodeError::TooLarge {
            what: "value block value_len",
            len,
            max: layout.value_bytes_max,
        });
    }
    let want = layout.value_block_copy_bytes(len);
    if bytes.len() > want {
        return Err(DecodeError::Inconsistent {
            what: WHAT,
            detail: "trailing bytes",
        });
    }
    let mut r = Reader::new(bytes, WHAT);
    let head = r.u64()?;
    let data = r.take(want.saturating_sub(16))?;
    let tail = r.u64()?;
    check_block(layout, head, data, tail, key, meta, len, value_ref)
}

/// The checks both decoders share, on a copy split into `seq_head`, the data
/// words from the info word on (`data`), and `seq_tail`.
#[allow(clippy::too_many_arguments)]
fn check_block<'a>(
    layout: &TableLayout,
    head: u64,
    data: &'a [u8],
    tail: u64,
    key: &Key,
    meta: ObjectMeta,
    len: usize,
    value_ref: ValueRef,
) -> Result<BlockRead<'a>, DecodeError> {
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
