//! Slot encoding and decoding: the info word, overflow links, out-of-line value
//! references, the seqlocked slot image, and scans of copied slot runs.

use super::*;
use crate::sync::Ordering;
use crate::{DecodeError, Key, ObjectMeta, Reader, Region, RegionError};

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
