//! Slot, value-block and header access of the Robinhood table: the seqlocked
//! writes of `splitkv_layout::robinhood_layout` (Xenic §4.1.2), object reads, and the
//! segment and bucket header words (chain links, counts, move sequences).

use super::RobinhoodTable;

use crate::table::sync::fence;
use crate::table::sync::Ordering::{Relaxed, Release};
use splitkv_layout::robinhood_layout::{
    decode_slot_info, encode_slot_info, TableLayout, BLOCK_STATE_USED, HEADER_COUNT_OFFSET,
    HEADER_LINK_OFFSET, HEADER_MOVES_OFFSET, SLOT_FIXED_DATA_WORDS, SLOT_INFO_OFFSET,
    SLOT_KEY_ID_OFFSET, SLOT_META_OFFSET, SLOT_STATE_EMPTY, SLOT_STATE_OCCUPIED,
    SLOT_STATE_OUT_OF_LINE, SLOT_VALUE_OFFSET, VALUE_REF_WORDS,
};
use splitkv_layout::{Key, ObjectMeta, Region};

/// Data words of an empty slot: info (state 0), key id, meta.
pub(super) const EMPTY_SLOT_WORDS: [u64; SLOT_FIXED_DATA_WORDS] = [0; SLOT_FIXED_DATA_WORDS];

/// Writes one slot's data words (`data`: info, id, meta, value words; the rest
/// of the slot keeps its bytes) with the slot seqlock protocol of
/// `splitkv_layout::robinhood_layout`: `seq_tail ← s+1`, fence, data, fence,
/// `seq_tail ← s+2`, `seq_head ← s+2` (Release).
pub(super) fn write_slot(region: &Region, layout: &TableLayout, offset: usize, data: &[u64]) {
    debug_assert!((SLOT_FIXED_DATA_WORDS..=layout.slot_data_words()).contains(&data.len()));
    write_seqlocked(region, offset, layout.slot_seq_tail_offset(), data);
}

/// Writes a value block's data words with the same seqlock protocol as
/// [`write_slot`]; returns the block's new (even) sequence number.
pub(super) fn write_block(
    region: &Region,
    layout: &TableLayout,
    block: usize,
    data: &[u64],
) -> u64 {
    debug_assert!(data.len() <= layout.value_block_bytes() / 8 - 2);
    let offset = layout.value_block_offset(block);
    write_seqlocked(region, offset, layout.value_block_seq_tail_offset(), data)
}

/// The seqlock write shared by slots and value blocks: `tail_offset` is the
/// byte offset of `seq_tail` inside the record at `offset`. Returns the new
/// sequence number.
fn write_seqlocked(region: &Region, offset: usize, tail_offset: usize, data: &[u64]) -> u64 {
    let tail = offset + tail_offset;
    // Only this writer stores sequence words, so its own relaxed load is current.
    let seq = region.load(offset, Relaxed);
    debug_assert_eq!(seq % 2, 0, "slot at {offset} left mid-write");
    debug_assert_eq!(
        seq,
        region.load(tail, Relaxed),
        "slot at {offset} left mid-write"
    );
    region.store(tail, seq + 1, Relaxed);
    fence(Release);
    for (i, &word) in data.iter().enumerate() {
        region.store(offset + 8 + 8 * i, word, Relaxed);
    }
    fence(Release);
    region.store(tail, seq + 2, Relaxed);
    region.store(offset, seq + 2, Release);
    seq + 2
}

/// Loads the data words of the slot at `offset` that carry information (info,
/// id, meta and the inline value's words or the out-of-line reference) into `out`.
pub(super) fn load_slot_words(region: &Region, offset: usize, out: &mut Vec<u64>) {
    out.clear();
    let info = region.load(offset + SLOT_INFO_OFFSET, Relaxed);
    let (_, value_len, state) = decode_slot_info(info);
    let value_words = match state {
        SLOT_STATE_OUT_OF_LINE => VALUE_REF_WORDS,
        _ => (value_len as usize).div_ceil(8),
    };
    for i in 0..SLOT_FIXED_DATA_WORDS + value_words {
        out.push(region.load(offset + 8 + 8 * i, Relaxed));
    }
}

#[inline]
pub(super) fn is_occupied(info: u64) -> bool {
    decode_slot_info(info).2 != SLOT_STATE_EMPTY
}

/// Appends `value` to `words` as little-endian words, the last one zero-padded.
pub(super) fn push_value_words(words: &mut Vec<u64>, value: &[u8]) {
    for chunk in value.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        words.push(u64::from_le_bytes(word));
    }
}

impl RobinhoodTable {
    // ---- slot access -------------------------------------------------------

    /// Reads the slot at `offset`: its key if occupied (then `value` holds the
    /// value) and its meta word.
    pub(super) fn read_object(
        &self,
        offset: usize,
        value: &mut Vec<u8>,
    ) -> (Option<Key>, ObjectMeta) {
        value.clear();
        let (table, value_len, state) =
            decode_slot_info(self.region.load(offset + SLOT_INFO_OFFSET, Relaxed));
        let meta = ObjectMeta(self.region.load(offset + SLOT_META_OFFSET, Relaxed));
        if state == SLOT_STATE_EMPTY {
            return (None, meta);
        }
        let id = self.region.load(offset + SLOT_KEY_ID_OFFSET, Relaxed);
        value.resize(value_len as usize, 0);
        let at = match self.block_of(offset) {
            Some(block) => self.layout.value_block_offset(block) + SLOT_VALUE_OFFSET,
            None => offset + SLOT_VALUE_OFFSET,
        };
        self.region
            .read_bytes(at, value)
            .expect("slot and block lie inside the region");
        (Some(Key::new(table, id)), meta)
    }

    /// The value block the slot at `offset` refers to, if its value is out of line.
    #[inline]
    pub(super) fn block_of(&self, offset: usize) -> Option<usize> {
        let info = self.region.load(offset + SLOT_INFO_OFFSET, Relaxed);
        (decode_slot_info(info).2 == SLOT_STATE_OUT_OF_LINE)
            .then(|| self.region.load(offset + SLOT_VALUE_OFFSET, Relaxed) as usize)
    }

    /// Writes `value` of `key` with `meta` into value block `block` (seqlocked);
    /// returns the reference a slot stores: `(block, sequence)`.
    pub(super) fn write_value_block(
        &mut self,
        block: usize,
        key: Key,
        meta: ObjectMeta,
        value: &[u8],
    ) -> (usize, u64) {
        let words = &mut self.block_words;
        words.clear();
        words.push(encode_slot_info(
            key.table,
            value.len() as u16,
            BLOCK_STATE_USED,
        ));
        words.push(key.id);
        words.push(meta.0);
        push_value_words(words, value);
        self.stats.blocks_written += 1;
        (block, write_block(&self.region, &self.layout, block, words))
    }

    /// The key in the slot at `offset`, given its info word.
    #[inline]
    pub(super) fn key_at(&self, offset: usize, info: u64) -> Key {
        Key::new(
            decode_slot_info(info).0,
            self.region.load(offset + SLOT_KEY_ID_OFFSET, Relaxed),
        )
    }

    /// Home slot of the object in main slot `pos`, or `None` if it is empty.
    #[inline]
    pub(super) fn main_home(&self, pos: usize) -> Option<usize> {
        let offset = self.layout.slot_offset(pos);
        let info = self.region.load(offset + SLOT_INFO_OFFSET, Relaxed);
        is_occupied(info).then(|| self.layout.home_slot(&self.key_at(offset, info)))
    }

    /// Encodes the data words of a new object into `self.new_words`: the value
    /// inline, or the reference `(block, sequence)` to its value block.
    pub(super) fn encode_new(
        &mut self,
        key: Key,
        meta: ObjectMeta,
        value: &[u8],
        block: Option<(usize, u64)>,
    ) {
        let words = &mut self.new_words;
        words.clear();
        let state = match block {
            Some(_) => SLOT_STATE_OUT_OF_LINE,
            None => SLOT_STATE_OCCUPIED,
        };
        words.push(encode_slot_info(key.table, value.len() as u16, state));
        words.push(key.id);
        words.push(meta.0);
        match block {
            Some((b, seq)) => words.extend_from_slice(&[b as u64, seq]),
            None => push_value_words(words, value),
        }
    }

    /// Copies the object in the slot at `from` into the slot at `to`.
    pub(super) fn copy_slot(&mut self, from: usize, to: usize) {
        load_slot_words(&self.region, from, &mut self.copy_words);
        write_slot(&self.region, &self.layout, to, &self.copy_words);
    }

    // ---- headers -----------------------------------------------------------

    pub(super) fn link_at(&self, header: usize) -> Option<usize> {
        let word = self.region.load(header + HEADER_LINK_OFFSET, Relaxed);
        word.checked_sub(1).map(|b| b as usize)
    }

    pub(super) fn segment_link(&self, segment: usize) -> Option<usize> {
        self.link_at(self.layout.segment_header_offset(segment))
    }

    pub(super) fn bucket_link(&self, bucket: usize) -> Option<usize> {
        self.link_at(self.layout.bucket_header_offset(bucket))
    }

    pub(super) fn segment_count(&self, segment: usize) -> usize {
        self.region.load(
            self.layout.segment_header_offset(segment) + HEADER_COUNT_OFFSET,
            Relaxed,
        ) as usize
    }

    pub(super) fn bucket_count(&self, bucket: usize) -> usize {
        self.region.load(
            self.layout.bucket_header_offset(bucket) + HEADER_COUNT_OFFSET,
            Relaxed,
        ) as usize
    }

    pub(super) fn set_segment_count(&self, segment: usize, count: usize) {
        let offset = self.layout.segment_header_offset(segment) + HEADER_COUNT_OFFSET;
        self.region.store(offset, count as u64, Release);
    }

    pub(super) fn set_bucket_count(&self, bucket: usize, count: usize) {
        let offset = self.layout.bucket_header_offset(bucket) + HEADER_COUNT_OFFSET;
        self.region.store(offset, count as u64, Release);
    }

    /// Makes `segment`'s move sequence odd before the running operation moves
    /// one of its objects (once per operation). The Release fence orders the
    /// odd value before every slot write that follows, so a reader that copies
    /// any of those writes sees a changed sequence when it re-reads the header.
    pub(super) fn moves_open(&mut self, segment: usize) {
        if self.open_moves.contains(&segment) {
            return;
        }
        let offset = self.layout.segment_header_offset(segment) + HEADER_MOVES_OFFSET;
        let seq = self.region.load(offset, Relaxed);
        debug_assert_eq!(seq % 2, 0, "segment {segment} left mid-move");
        self.region.store(offset, seq + 1, Relaxed);
        fence(Release);
        self.open_moves.push(segment);
    }

    /// Makes every sequence [`RobinhoodTable::moves_open`] opened even again
    /// (Release: the moves happen before the new value).
    pub(super) fn moves_close(&mut self) {
        while let Some(segment) = self.open_moves.pop() {
            let offset = self.layout.segment_header_offset(segment) + HEADER_MOVES_OFFSET;
            let seq = self.region.load(offset, Relaxed);
            self.region.store(offset, seq + 1, Release);
        }
    }
}
