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
//!    block (Xenic §4.1.2): one more read fetches the block. A block whose
//!    seqlock, sequence, key or meta does not match the slot was freed and
//!    reused meanwhile: the lookup starts over from step 1 (each restart counts
//!    against [`TORN_RETRIES_MAX`] too).
//!
//! A [`Lookup`] is a pure state machine over bytes: the server feeds it DMA
//! completions, and the Table 2 report feeds it direct copies.

use super::hints::{OverflowHint, SegmentHints};
use super::Next;
use splitkv_layout::table::{
    decode_value_block, find_in_bucket, BlockRead, SegmentHeader, SlotRead, SlotValue, TableLayout,
    ValueRef, HEADER_BYTES,
};
use splitkv_layout::{DecodeError, Key, ObjectMeta};

/// Extra slots read past the known displacement (Xenic §4.1.3 sets k = 1).
pub const LOOKUP_K: usize = 1;
/// Re-reads of a torn slot (or restarts after a reused value block) before
/// the lookup fails.
pub const TORN_RETRIES_MAX: u32 = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Main-array slots at displacements `from ..= to`.
    Main { from: usize, to: usize },
    /// The segment header.
    Header,
    /// Overflow bucket; `confirmed` if its chain head came from a fresh header.
    Bucket { bucket: usize, confirmed: bool },
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
}

/// One key's lookup in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lookup {
    key: Key,
    home: usize,
    segment: usize,
    stage: Stage,
    torn: u32,
    /// DMA reads issued so far (round trips).
    pub reads: u32,
    /// Slots (objects) transferred so far.
    pub slots_read: u32,
}

impl Lookup {
    /// Starts a lookup of `key`; the first step is always a read.
    pub fn start(layout: &TableLayout, hints: &SegmentHints, key: Key) -> (Lookup, Next<'static>) {
        let home = layout.home_slot(&key);
        let segment = layout.segment_of(home);
        let mut l = Lookup {
            key,
            home,
            segment,
            stage: Stage::Header,
            torn: 0,
            reads: 0,
            slots_read: 0,
        };
        l.stage = l.first_stage(layout, hints);
        let step = l.issue(layout);
        (l, step)
    }

    /// The main-array read a lookup starts with: `d_i + k` slots.
    fn first_stage(&self, layout: &TableLayout, hints: &SegmentHints) -> Stage {
        let to = (hints.d_known(self.segment) + LOOKUP_K).min(layout.d_max());
        Stage::Main { from: 0, to }
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
            Stage::Main { from, to } => {
                self.slots_read += (to - from + 1) as u32;
                Next::single_read(
                    layout.slot_offset(self.home + from),
                    (to - from + 1) * layout.slot_bytes(),
                )
            }
            Stage::Header => {
                Next::single_read(layout.segment_header_offset(self.segment), HEADER_BYTES)
            }
            Stage::Bucket { bucket, .. } => {
                self.slots_read += layout.bucket_slots() as u32;
                Next::single_read(layout.bucket_header_offset(bucket), layout.bucket_bytes())
            }
            Stage::Block { value_ref, .. } => Next::single_read(
                layout.value_block_offset(value_ref.block),
                layout.value_block_bytes(),
            ),
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
            Stage::Main { from, to } => {
                let sb = layout.slot_bytes();
                if data.len() != (to - from + 1) * sb {
                    return Next::Failed(LookupError::Decode(DecodeError::Inconsistent {
                        what: "probe range",
                        detail: "length",
                    }));
                }
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
                    };
                    return self.issue(layout);
                }
                self.enter_overflow(layout, hints)
            }
            Stage::Header => match SegmentHeader::decode(layout, data) {
                Ok(h) => {
                    hints.set_overflow(self.segment, h.overflow_head);
                    match h.overflow_head {
                        None => Next::Absent,
                        Some(bucket) => {
                            self.stage = Stage::Bucket {
                                bucket,
                                confirmed: true,
                            };
                            self.issue(layout)
                        }
                    }
                }
                Err(e) => Next::Failed(e.into()),
            },
            Stage::Bucket { confirmed, .. } => match find_in_bucket(layout, data, &self.key) {
                Ok((_, Some(SlotRead::Object { meta, value, .. }))) => {
                    self.found(layout, meta, value)
                }
                Ok((_, Some(SlotRead::Torn))) => self.retry_torn(layout),
                Ok((h, _)) => match (h.next, confirmed) {
                    (Some(next), _) => {
                        self.stage = Stage::Bucket {
                            bucket: next,
                            confirmed,
                        };
                        self.issue(layout)
                    }
                    (None, true) => Next::Absent,
                    (None, false) => {
                        self.stage = Stage::Header;
                        self.issue(layout)
                    }
                },
                Err(e) => Next::Failed(e.into()),
            },
            Stage::Block {
                value_ref,
                len,
                meta,
            } => match decode_value_block(layout, data, &self.key, meta, len, value_ref) {
                Ok(BlockRead::Value(value)) => Next::Found { meta, value },
                Ok(BlockRead::Torn | BlockRead::Stale) => {
                    // The block was freed and reused after the slot was read:
                    // the slot has changed too, so look the key up again.
                    self.stage = self.first_stage(layout, hints);
                    self.retry_torn(layout)
                }
                Err(e) => Next::Failed(e.into()),
            },
        }
    }
}
