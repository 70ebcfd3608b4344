//! Finding a key in the host Robinhood table by DMA (Xenic §4.1.3).
//!
//! 1. Read `d_i + k` slots past the key's home (k = [`LOOKUP_K`] = 1), d_i being
//!    the segment's known displacement, capped at D_m.
//! 2. If the key is not there, one adjacent read of the rest, up to D_m.
//! 3. Then the segment's overflow chain: straight to the bucket if its head is
//!    known, else the segment header first.
//!
//! Every slot read teaches the hints: each object seen updates d_i of its own
//! home segment. A key is reported absent only after a fresh segment header
//! confirmed the chain that was searched, so a stale overflow hint costs a read,
//! not a wrong answer. Torn slots are read again, up to [`TORN_RETRIES_MAX`].
//! 4. If the key's slot holds a value over 256 B, it refers to a value-heap
//!    block (Xenic §4.1.2): one more read, a two-element vector, fetches the
//!    block's head up to the end of the value and its tail word
//!    ([`TableLayout::value_block_reads`]), so a short value in a heap of 4 KiB
//!    blocks does not cost a 4 KiB copy. A block whose
//!    seqlock, sequence, key or meta does not match the slot was freed and
//!    reused meanwhile: the lookup starts over from step 1 (each restart counts
//!    against [`TORN_RETRIES_MAX`] too).
//!
//! Deletes move objects against the reader's direction (Robinhood backward
//! shift, overflow swap; `host/src/table/robinhood/`), which could make a
//! present key look absent. So the first read is a two-element vector: the home
//! segment's move sequence word, then the slots (elements execute in order).
//! "Absent" also needs a header read after the last slot read that shows the
//! same even sequence; otherwise the lookup starts over, up to
//! [`MOVED_RESTARTS_MAX`] times. Found objects need no such check.
//!
//! An overflow chain is walked for at most as many links as the table has
//! buckets: more means a cycle, which intact host memory never holds (garbage
//! bytes, or a chain relinked under the walk), and the lookup fails with
//! [`LookupError::ChainTooLong`] instead of reading forever.
//!
//! A [`RobinhoodLookup`] is a pure state machine over bytes: the server feeds it DMA
//! completions, and the Table 2 report feeds it direct copies.

use super::hints::{OverflowHint, SegmentHints};
use super::Next;
use crate::dma::DmaRead;
use splitkv_layout::robinhood_layout::{
    decode_value_block_copy, find_in_bucket, BlockRead, SegmentHeader, SlotRead, SlotValue,
    TableLayout, ValueRef, HEADER_BYTES, HEADER_MOVES_OFFSET,
};
use splitkv_layout::{DecodeError, Key, ObjectMeta};

/// Extra slots read past the known displacement (Xenic §4.1.3 sets k = 1).
pub const LOOKUP_K: usize = 1;
/// Re-reads of a torn slot (or restarts after a reused value block) before
/// the lookup fails.
pub const TORN_RETRIES_MAX: u32 = 64;
/// Fresh starts after a concurrent delete moved objects of the key's segment,
/// before the lookup fails.
pub const MOVED_RESTARTS_MAX: u32 = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Main-array slots at displacements `from ..= to`, preceded by the home
    /// segment's move sequence word if `moves` (the first read).
    Main { from: usize, to: usize, moves: bool },
    /// The segment header.
    Header,
    /// Overflow bucket; `confirmed` if its chain head came from a fresh header.
    Bucket { bucket: usize, confirmed: bool },
    /// The home segment's move sequence word, read after the last bucket.
    Confirm,
    /// The value block an intact slot of the key referred to.
    Block {
        value_ref: ValueRef,
        len: usize,
        meta: ObjectMeta,
    },
}

/// Why a lookup failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// Table bytes that do not decode.
    #[error("host table bytes do not decode: {0}")]
    Decode(#[from] DecodeError),
    /// A slot stayed torn, or a value block kept being reused, for
    /// [`TORN_RETRIES_MAX`] reads.
    #[error("slot stayed torn")]
    Torn,
    /// Deletes kept moving objects of the key's segment for
    /// [`MOVED_RESTARTS_MAX`] fresh starts.
    #[error("objects kept moving under the lookup")]
    Moving,
    /// An overflow chain had more links than the table has buckets (a cycle:
    /// corrupt host memory, or a chain relinked under the walk).
    #[error("overflow chain longer than the table's {buckets} buckets")]
    ChainTooLong {
        /// Buckets in the table.
        buckets: usize,
    },
}

/// One key's lookup in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RobinhoodLookup {
    key: Key,
    home: usize,
    segment: usize,
    stage: Stage,
    torn: u32,
    /// Fresh starts after a changed move sequence.
    restarts: u32,
    /// The home segment's move sequence seen by the first read.
    moves_seen: u64,
    /// Overflow links followed in the current chain walk.
    links: usize,
    /// DMA reads issued so far (round trips).
    pub reads: u32,
    /// Slots (objects) transferred so far.
    pub slots_read: u32,
}

impl RobinhoodLookup {
    /// Starts a lookup of `key`; the first step is always a read.
    pub fn start(
        layout: &TableLayout,
        hints: &SegmentHints,
        key: Key,
    ) -> (RobinhoodLookup, Next<'static>) {
        let home = layout.home_slot(&key);
        let segment = layout.segment_of(home);
        let mut l = RobinhoodLookup {
            key,
            home,
            segment,
            stage: Stage::Header,
            torn: 0,
            restarts: 0,
            moves_seen: 0,
            links: 0,
            reads: 0,
            slots_read: 0,
        };
        let step = l.first_read(layout, hints);
        (l, step)
    }

    /// (Re)starts at the home slot: move sequence, then `d_i + k` slots.
    fn first_read(&mut self, layout: &TableLayout, hints: &SegmentHints) -> Next<'static> {
        let to = (hints.d_known(self.segment) + LOOKUP_K).min(layout.d_max());
        self.links = 0;
        self.stage = Stage::Main {
            from: 0,
            to,
            moves: true,
        };
        self.issue(layout)
    }

    /// Reports absent if the move sequence `now` (read after every slot read)
    /// equals the even one seen first; otherwise starts over.
    fn absent_if_unmoved(
        &mut self,
        layout: &TableLayout,
        hints: &SegmentHints,
        now: u64,
    ) -> Next<'static> {
        if now == self.moves_seen && now.is_multiple_of(2) {
            return Next::Absent;
        }
        self.restarts += 1;
        if self.restarts > MOVED_RESTARTS_MAX {
            return Next::Failed(LookupError::Moving);
        }
        self.first_read(layout, hints)
    }

    /// The value in a found slot: inline, or one more read for its block.
    fn found<'a>(
        &mut self,
        layout: &TableLayout,
        meta: ObjectMeta,
        value: SlotValue<'a>,
    ) -> Next<'a> {
        match value {
            SlotValue::Inline(value) => Next::Found { meta, value },
            SlotValue::OutOfLine { block, len } => {
                self.stage = Stage::Block {
                    value_ref: block,
                    len,
                    meta,
                };
                self.issue(layout)
            }
        }
    }

    /// The key being looked up.
    pub fn key(&self) -> Key {
        self.key
    }

    fn issue(&mut self, layout: &TableLayout) -> Next<'static> {
        self.reads += 1;
        match self.stage {
            Stage::Main { from, to, moves } => {
                self.slots_read += (to - from + 1) as u32;
                let slots = DmaRead {
                    offset: layout.slot_offset(self.home + from),
                    len: (to - from + 1) * layout.slot_bytes(),
                };
                if moves {
                    Next::Read([self.moves_read(layout), slots], 2)
                } else {
                    Next::Read([slots, DmaRead::default()], 1)
                }
            }
            Stage::Header => {
                Next::single_read(layout.segment_header_offset(self.segment), HEADER_BYTES)
            }
            Stage::Confirm => {
                let r = self.moves_read(layout);
                Next::single_read(r.offset, r.len)
            }
            Stage::Bucket { bucket, .. } => {
                self.slots_read += layout.bucket_slots() as u32;
                Next::single_read(layout.bucket_header_offset(bucket), layout.bucket_bytes())
            }
            Stage::Block { value_ref, len, .. } => {
                let [(at, n), (tail_at, tail_n)] = layout.value_block_reads(value_ref.block, len);
                Next::Read(
                    [
                        DmaRead { offset: at, len: n },
                        DmaRead {
                            offset: tail_at,
                            len: tail_n,
                        },
                    ],
                    2,
                )
            }
        }
    }

    /// The home segment's move sequence word.
    fn moves_read(&self, layout: &TableLayout) -> DmaRead {
        DmaRead {
            offset: layout.segment_header_offset(self.segment) + HEADER_MOVES_OFFSET,
            len: 8,
        }
    }

    fn retry_torn(&mut self, layout: &TableLayout) -> Next<'static> {
        self.torn += 1;
        if self.torn > TORN_RETRIES_MAX {
            Next::Failed(LookupError::Torn)
        } else {
            self.issue(layout)
        }
    }

    fn enter_overflow(&mut self, layout: &TableLayout, hints: &SegmentHints) -> Next<'static> {
        self.stage = match hints.overflow(self.segment) {
            OverflowHint::Head(bucket) => Stage::Bucket {
                bucket,
                confirmed: false,
            },
            OverflowHint::Unknown | OverflowHint::None => Stage::Header,
        };
        self.issue(layout)
    }

    /// Feeds the bytes of the read the last step asked for.
    pub fn advance<'a>(
        &mut self,
        layout: &TableLayout,
        hints: &mut SegmentHints,
        data: &'a [u8],
    ) -> Next<'a> {
        match self.stage {
            Stage::Main { from, to, moves } => {
                self.after_main(layout, hints, data, from, to, moves)
            }
            Stage::Header => self.after_header(layout, hints, data),
            Stage::Bucket { confirmed, .. } => self.after_bucket(layout, data, confirmed),
            Stage::Confirm => match <[u8; 8]>::try_from(data) {
                Ok(word) => self.absent_if_unmoved(layout, hints, u64::from_le_bytes(word)),
                Err(_) => Next::Failed(LookupError::Decode(DecodeError::Inconsistent {
                    what: "move sequence",
                    detail: "length",
                })),
            },
            Stage::Block {
                value_ref,
                len,
                meta,
            } => self.after_block(layout, hints, data, value_ref, len, meta),
        }
    }

    /// After the probe range `from..=to` of the home segment (with the move
    /// sequence word first if `moves`): found, retry a torn slot, read the
    /// rest up to D_m, or go to the overflow chain.
    fn after_main<'a>(
        &mut self,
        layout: &TableLayout,
        hints: &mut SegmentHints,
        data: &'a [u8],
        from: usize,
        to: usize,
        moves: bool,
    ) -> Next<'a> {
        let word = if moves { 8 } else { 0 };
        if data.len() != word + (to - from + 1) * layout.slot_bytes() {
            return Next::Failed(LookupError::Decode(DecodeError::Inconsistent {
                what: "probe range",
                detail: "length",
            }));
        }
        let data = if moves {
            let (seq, slots) = data.split_at(8);
            self.moves_seen = u64::from_le_bytes(seq.try_into().expect("8 bytes"));
            slots
        } else {
            data
        };
        let (found, torn) =
            match hints.observe_slots(layout, self.home + from, data, Some(&self.key)) {
                Ok(x) => x,
                Err(e) => return Next::Failed(e.into()),
            };
        if let Some(SlotRead::Object { meta, value, .. }) = found {
            return self.found(layout, meta, value);
        }
        if torn {
            return self.retry_torn(layout);
        }
        if to < layout.d_max() {
            self.stage = Stage::Main {
                from: to + 1,
                to: layout.d_max(),
                moves: false,
            };
            return self.issue(layout);
        }
        self.enter_overflow(layout, hints)
    }

    /// After the segment header: absent (no overflow chain), or walk the chain.
    fn after_header(
        &mut self,
        layout: &TableLayout,
        hints: &mut SegmentHints,
        data: &[u8],
    ) -> Next<'static> {
        match SegmentHeader::decode(layout, data) {
            Ok(h) => {
                hints.set_overflow(self.segment, h.overflow_head);
                match h.overflow_head {
                    // Read after every slot read: it confirms them too.
                    None => self.absent_if_unmoved(layout, hints, h.moves),
                    Some(bucket) => {
                        // A fresh chain head: the walk starts again from it.
                        self.links = 0;
                        self.stage = Stage::Bucket {
                            bucket,
                            confirmed: true,
                        };
                        self.issue(layout)
                    }
                }
            }
            Err(e) => Next::Failed(e.into()),
        }
    }

    /// After an overflow bucket: found, the next bucket, or confirm absence
    /// (through the move sequence if the chain came from a hint).
    fn after_bucket<'a>(
        &mut self,
        layout: &TableLayout,
        data: &'a [u8],
        confirmed: bool,
    ) -> Next<'a> {
        match find_in_bucket(layout, data, &self.key) {
            Ok((_, Some(SlotRead::Object { meta, value, .. }))) => self.found(layout, meta, value),
            Ok((_, Some(SlotRead::Torn))) => self.retry_torn(layout),
            Ok((h, _)) => {
                if h.next.is_some() {
                    self.links += 1;
                    if self.links > layout.buckets() {
                        return Next::Failed(LookupError::ChainTooLong {
                            buckets: layout.buckets(),
                        });
                    }
                }
                self.stage = match (h.next, confirmed) {
                    (Some(next), _) => Stage::Bucket {
                        bucket: next,
                        confirmed,
                    },
                    (None, true) => Stage::Confirm,
                    (None, false) => Stage::Header,
                };
                self.issue(layout)
            }
            Err(e) => Next::Failed(e.into()),
        }
    }

    /// After an out-of-line value block: the value, or start over if the
    /// block was reused under the read.
    fn after_block<'a>(
        &mut self,
        layout: &TableLayout,
        hints: &mut SegmentHints,
        data: &'a [u8],
        value_ref: ValueRef,
        len: usize,
        meta: ObjectMeta,
    ) -> Next<'a> {
        match decode_value_block_copy(layout, data, &self.key, meta, len, value_ref) {
            Ok(BlockRead::Value(value)) => Next::Found { meta, value },
            Ok(BlockRead::Torn | BlockRead::Stale) => {
                // The block was freed and reused after the slot was read:
                // the slot has changed too, so look the key up again.
                self.torn += 1;
                if self.torn > TORN_RETRIES_MAX {
                    return Next::Failed(LookupError::Torn);
                }
                self.first_read(layout, hints)
            }
            Err(e) => Next::Failed(e.into()),
        }
    }
}
