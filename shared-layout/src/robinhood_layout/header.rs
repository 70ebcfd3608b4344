//! Segment and overflow-bucket headers (64 bytes each).

use super::*;
use crate::{DecodeError, Reader};

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
pub(super) fn decode_header(
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

pub(super) fn encode_header(link: Option<usize>, count: u32, word2: u64) -> [u8; HEADER_BYTES] {
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
