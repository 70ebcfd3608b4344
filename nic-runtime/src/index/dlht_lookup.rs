//! Finding a key in a host DLHT by DMA (Dandelion §6 layout, read the way a
//! NIC reads host memory).
//!
//! 1. Read the table descriptor once, for the bin count.
//! 2. Read the key's bin in one DMA vector of two elements: the 64-byte line,
//!    then its header word again. The copy is consistent if both header words
//!    agree — the lock-free reader's "header, slots, header" check, done in one
//!    round trip because a vector's elements execute in order.
//! 3. Follow link buckets the same way, each read paired with the bin's header
//!    word, which must still equal the one the chain was decoded against.
//!
//! A bin that was moved by a resize sends the lookup back to the descriptor.
//! Values longer than 8 bytes live out of line in host memory this NIC cannot
//! address yet: such a lookup fails (the transaction aborts).

use super::LookupError;
use super::Next;
use crate::dma::DmaRead;
use splitkv_layout::dlht_layout::{
    bin_index, decode_bin, decode_link, dma, word_value, BinHeader, BinState, DecodedLine,
    SlotValue, LINE_BYTES,
};
use splitkv_layout::{DecodeError, Key};

/// Re-reads of torn copies (a line that changed between its two reads, a
/// chain that changed under the walk) before a lookup fails.
pub const DLHT_RETRIES_MAX: u32 = 64;
/// Restarts from the descriptor while the host resizes the table (a bin
/// moved or pending, a stale address refused) before a lookup fails: many
/// more than [`DLHT_RETRIES_MAX`], since a resize stays in progress for as
/// long as the host thread doing it is descheduled, while the NIC retries
/// about once per DMA round trip (65 536 round trips: tens of milliseconds
/// with local DMA).
pub const DLHT_RESIZE_RETRIES_MAX: u32 = 1 << 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Descriptor,
    Bin,
    Link { line: usize, index: u32 },
}

/// One key's DLHT lookup in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DlhtLookup {
    key: Key,
    bin_count: usize,
    bin: usize,
    header: u64,
    stage: Stage,
    retries: u32,
    resize_retries: u32,
    /// DMA vectors issued (round trips).
    pub reads: u32,
}

fn header_word(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"))
}

impl DlhtLookup {
    /// Starts a lookup of `key`, given the bin count last seen (0 if unknown).
    pub fn start(key: Key, bin_count: usize) -> (DlhtLookup, Next<'static>) {
        let mut l = DlhtLookup {
            key,
            bin_count,
            bin: 0,
            header: 0,
            stage: Stage::Descriptor,
            retries: 0,
            resize_retries: 0,
            reads: 0,
        };
        if bin_count.is_power_of_two() {
            l.bin = bin_index(&key, bin_count);
            l.stage = Stage::Bin;
        }
        let step = l.issue();
        (l, step)
    }

    /// The bin count this lookup learned (to remember for the next one).
    pub fn bin_count(&self) -> usize {
        self.bin_count
    }

    fn issue(&mut self) -> Next<'static> {
        self.reads += 1;
        let bin_line = 1 + self.bin;
        let header = DmaRead {
            offset: dma::offset(self.bin_count, bin_line),
            len: 8,
        };
        match self.stage {
            Stage::Descriptor => Next::Read(
                [
                    DmaRead {
                        offset: dma::DESCRIPTOR_OFFSET,
                        len: LINE_BYTES,
                    },
                    DmaRead::default(),
                ],
                1,
            ),
            Stage::Bin => Next::Read(
                [
                    DmaRead {
                        offset: dma::offset(self.bin_count, bin_line),
                        len: LINE_BYTES,
                    },
                    header,
                ],
                2,
            ),
            Stage::Link { index, .. } => {
                let line = self.bin_count + index as usize;
                Next::Read(
                    [
                        DmaRead {
                            offset: dma::offset(self.bin_count, line),
                            len: LINE_BYTES,
                        },
                        header,
                    ],
                    2,
                )
            }
        }
    }

    fn retry(&mut self, stage: Stage) -> Next<'static> {
        self.retries += 1;
        if self.retries > DLHT_RETRIES_MAX {
            return Next::Failed(LookupError::Torn);
        }
        self.stage = stage;
        self.issue()
    }

    /// Starts over from the descriptor while a resize is in progress, up to
    /// [`DLHT_RESIZE_RETRIES_MAX`] times.
    fn wait_resize(&mut self) -> Next<'static> {
        self.resize_retries += 1;
        if self.resize_retries > DLHT_RESIZE_RETRIES_MAX {
            return Next::Failed(LookupError::Torn);
        }
        self.stage = Stage::Descriptor;
        self.issue()
    }

    /// Restarts from the descriptor (after the host refused a stale address).
    pub fn restart(&mut self) -> Next<'static> {
        self.wait_resize()
    }

    fn scan<'a>(
        &mut self,
        line: &DecodedLine,
        bytes: &'a [u8],
    ) -> Result<Option<Next<'a>>, LookupError> {
        for s in line.slots.iter().flatten() {
            if s.key == self.key {
                return match s.value {
                    SlotValue::Inline { len, .. } => {
                        let at = word_value(s.slot % 2) * 8;
                        Ok(Some(Next::Found {
                            meta: s.meta,
                            value: &bytes[at..at + len as usize],
                        }))
                    }
                    SlotValue::OutOfLine { .. } => {
                        Err(LookupError::Decode(DecodeError::Inconsistent {
                            what: "dlht slot",
                            detail: "out-of-line value not readable by DMA",
                        }))
                    }
                };
            }
        }
        Ok(None)
    }

    fn next(&mut self, line: &DecodedLine) -> Next<'static> {
        let number = match self.stage {
            Stage::Link { line, .. } => line,
            _ => 0,
        };
        if line.next_link == 0 {
            return Next::Absent;
        }
        self.stage = Stage::Link {
            line: number + 1,
            index: line.next_link,
        };
        self.issue()
    }

    /// Feeds the bytes of the vector the last step asked for.
    pub fn advance<'a>(&mut self, data: &'a [u8]) -> Next<'a> {
        match self.stage {
            Stage::Descriptor => match dma::DmaDescriptor::decode(data) {
                Ok(d) => {
                    self.bin_count = d.bin_count;
                    self.bin = bin_index(&self.key, d.bin_count);
                    self.stage = Stage::Bin;
                    self.issue()
                }
                Err(e) => Next::Failed(e.into()),
            },
            Stage::Bin => {
                if data.len() != LINE_BYTES + 8 {
                    return Next::Failed(
                        DecodeError::Inconsistent {
                            what: "dlht bin read",
                            detail: "length",
                        }
                        .into(),
                    );
                }
                let (line_bytes, again) = data.split_at(LINE_BYTES);
                if header_word(line_bytes) != header_word(again) {
                    return self.retry(Stage::Bin);
                }
                let line = match decode_bin(line_bytes) {
                    Ok(l) => l,
                    Err(e) => return Next::Failed(e.into()),
                };
                match line.header.bin_state {
                    BinState::Moved | BinState::Pending => return self.wait_resize(),
                    BinState::Live | BinState::Frozen => {}
                }
                self.header = header_word(line_bytes);
                match self.scan(&line, line_bytes) {
                    Ok(Some(found)) => found,
                    Ok(None) => self.next(&line),
                    Err(e) => Next::Failed(e),
                }
            }
            Stage::Link { line: number, .. } => {
                if data.len() != LINE_BYTES + 8 {
                    return Next::Failed(
                        DecodeError::Inconsistent {
                            what: "dlht link read",
                            detail: "length",
                        }
                        .into(),
                    );
                }
                let (line_bytes, again) = data.split_at(LINE_BYTES);
                if header_word(again) != self.header {
                    // The chain changed since the bin was read: start over at the bin.
                    return self.retry(Stage::Bin);
                }
                let header = match BinHeader::from_word(self.header) {
                    Ok(h) => h,
                    Err(e) => return Next::Failed(e.into()),
                };
                let line = match decode_link(line_bytes, &header, self.bin as u64, number) {
                    Ok(l) => l,
                    Err(_) => return self.retry(Stage::Bin),
                };
                match self.scan(&line, line_bytes) {
                    Ok(Some(found)) => found,
                    Ok(None) => self.next(&line),
                    Err(e) => Next::Failed(e),
                }
            }
        }
    }
}
