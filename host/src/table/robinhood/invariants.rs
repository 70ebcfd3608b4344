//! The Robinhood table's structural invariants, checked by a full scan (tests).

use super::RobinhoodTable;
use crate::table::sync::Ordering::Relaxed;
use splitkv_layout::robinhood_layout::{
    decode_slot_info, encode_slot_info, BLOCK_STATE_USED, HEADER_MOVES_OFFSET, SLOT_INFO_OFFSET,
    SLOT_KEY_ID_OFFSET, SLOT_META_OFFSET, SLOT_VALUE_OFFSET,
};
use splitkv_layout::Key;
use std::collections::HashSet;

/// What a full scan has seen so far: keys, value blocks referenced and buckets
/// linked (or free), to find duplicates and leaks.
struct Scan {
    keys: HashSet<Key>,
    /// Per value block: referenced by a slot or on the free list.
    block_seen: Vec<bool>,
    /// Per bucket: linked into a chain or on the free list.
    bucket_seen: Vec<bool>,
    /// Scratch for values read.
    value: Vec<u8>,
}

impl Scan {
    /// Records `key`; an error if it was seen before.
    fn key(&mut self, key: Key) -> Result<(), String> {
        if !self.keys.insert(key) {
            return Err(format!("{key:?} stored twice"));
        }
        Ok(())
    }
}

impl RobinhoodTable {
    /// Checks every structural invariant by a full scan (O(table size); for
    /// tests): seqlocks closed; every main object within `d_max` of its home with
    /// the slots from its home occupied by objects whose homes are not larger;
    /// overflow objects in their home segment's chain; header counts, `len`,
    /// `overflow_len` and the free list consistent; no key stored twice.
    ///
    /// # Errors
    /// A description of the first violation found.
    pub fn check_invariants(&self) -> Result<(), String> {
        let l = &self.layout;
        self.check_move_sequences()?;
        let mut scan = Scan {
            keys: HashSet::new(),
            block_seen: vec![false; l.value_blocks()],
            bucket_seen: vec![false; l.buckets()],
            value: Vec::new(),
        };
        let main_len = self.check_main(&mut scan)?;
        let mut overflow_len = 0;
        for segment in 0..l.segments() {
            overflow_len += self.check_chain(segment, &mut scan)?;
        }
        self.check_free_lists(&mut scan)?;
        if overflow_len != self.overflow_len || main_len + overflow_len != self.len {
            return Err(format!(
                "counted {main_len} main + {overflow_len} overflow, recorded len {} overflow {}",
                self.len, self.overflow_len
            ));
        }
        Ok(())
    }

    /// Every segment's move sequence is even (no delete left half done).
    fn check_move_sequences(&self) -> Result<(), String> {
        let l = &self.layout;
        for segment in 0..l.segments() {
            let offset = l.segment_header_offset(segment) + HEADER_MOVES_OFFSET;
            let moves = self.region.load(offset, Relaxed);
            if moves & 1 != 0 {
                return Err(format!(
                    "segment {segment}: move sequence left odd ({moves})"
                ));
            }
        }
        Ok(())
    }

    /// The slot at `offset` has a closed seqlock.
    fn check_seq(&self, offset: usize) -> Result<(), String> {
        let head = self.region.load(offset, Relaxed);
        let tail = self
            .region
            .load(offset + self.layout.slot_seq_tail_offset(), Relaxed);
        if head != tail || head & 1 != 0 {
            return Err(format!("slot at byte {offset}: open seqlock {head}/{tail}"));
        }
        Ok(())
    }

    /// If the slot at `offset` refers to a value block: the block is referenced
    /// by no other slot, its seqlock is closed at the sequence the slot expects,
    /// and its info, key and meta words match the slot's.
    fn check_block(&self, offset: usize, scan: &mut Scan) -> Result<(), String> {
        let Some(block) = self.block_of(offset) else {
            return Ok(());
        };
        if std::mem::replace(&mut scan.block_seen[block], true) {
            return Err(format!("value block {block} referenced twice"));
        }
        let l = &self.layout;
        let at = l.value_block_offset(block);
        let head = self.region.load(at, Relaxed);
        let tail = self
            .region
            .load(at + l.value_block_seq_tail_offset(), Relaxed);
        let seq = self.region.load(offset + SLOT_VALUE_OFFSET + 8, Relaxed);
        if head != tail || head != seq {
            return Err(format!(
                "value block {block}: seqlock {head}/{tail}, slot expects {seq}"
            ));
        }
        for word in [SLOT_INFO_OFFSET, SLOT_KEY_ID_OFFSET, SLOT_META_OFFSET] {
            let mut slot_word = self.region.load(offset + word, Relaxed);
            if word == SLOT_INFO_OFFSET {
                let (table, len, _) = decode_slot_info(slot_word);
                slot_word = encode_slot_info(table, len, BLOCK_STATE_USED);
            }
            if self.region.load(at + word, Relaxed) != slot_word {
                return Err(format!(
                    "value block {block}: word at {word} differs from its slot's"
                ));
            }
        }
        Ok(())
    }

    /// The main array: every object within `d_max` of its home, preceded (from
    /// its home on) by objects whose homes are not larger. Returns the objects
    /// counted.
    fn check_main(&self, scan: &mut Scan) -> Result<usize, String> {
        let l = &self.layout;
        let mut main_len = 0;
        for pos in 0..l.main_slots() {
            self.check_seq(l.slot_offset(pos))?;
            self.check_block(l.slot_offset(pos), scan)?;
            let Some(home) = self.main_home(pos) else {
                continue;
            };
            main_len += 1;
            let key = self
                .read_object(l.slot_offset(pos), &mut scan.value)
                .0
                .unwrap();
            scan.key(key)?;
            if home > pos || pos - home > l.d_max() {
                return Err(format!("{key:?} at slot {pos} with home {home}"));
            }
            if pos > home {
                match self.main_home(pos - 1) {
                    Some(h) if h <= home => {}
                    other => {
                        return Err(format!(
                            "slot {pos} (home {home}) preceded by home {other:?}"
                        ))
                    }
                }
            }
        }
        Ok(main_len)
    }

    /// `segment`'s overflow chain: buckets linked once, non-empty, with counts
    /// matching their objects, every object homed in `segment`, and the
    /// segment's count matching the chain's. Returns the objects counted.
    fn check_chain(&self, segment: usize, scan: &mut Scan) -> Result<usize, String> {
        let l = &self.layout;
        let mut count = 0;
        let mut link = self.segment_link(segment);
        while let Some(bucket) = link {
            if std::mem::replace(&mut scan.bucket_seen[bucket], true) {
                return Err(format!("bucket {bucket} linked twice"));
            }
            let mut occupied = 0;
            for index in 0..l.bucket_slots() {
                let offset = l.bucket_slot_offset(bucket, index);
                self.check_seq(offset)?;
                self.check_block(offset, scan)?;
                let Some(key) = self.read_object(offset, &mut scan.value).0 else {
                    continue;
                };
                occupied += 1;
                scan.key(key)?;
                if l.segment_of(l.home_slot(&key)) != segment {
                    return Err(format!("{key:?} in the chain of segment {segment}"));
                }
            }
            if occupied == 0 || occupied != self.bucket_count(bucket) {
                return Err(format!(
                    "bucket {bucket}: {occupied} objects, header {}",
                    self.bucket_count(bucket)
                ));
            }
            count += occupied;
            link = self.bucket_link(bucket);
        }
        if count != self.segment_count(segment) {
            return Err(format!(
                "segment {segment}: {count} objects, header {}",
                self.segment_count(segment)
            ));
        }
        Ok(count)
    }

    /// Every bucket is either linked or free (once), free buckets have a zero
    /// count, and every value block is either referenced or free (once).
    fn check_free_lists(&self, scan: &mut Scan) -> Result<(), String> {
        for &bucket in &self.free_buckets {
            if std::mem::replace(&mut scan.bucket_seen[bucket], true) {
                return Err(format!(
                    "bucket {bucket} both free and linked (or free twice)"
                ));
            }
            if self.bucket_count(bucket) != 0 {
                return Err(format!("free bucket {bucket} has a non-zero count"));
            }
        }
        if let Some(lost) = scan.bucket_seen.iter().position(|&seen| !seen) {
            return Err(format!("bucket {lost} neither free nor linked"));
        }
        for &block in &self.free_blocks {
            if std::mem::replace(&mut scan.block_seen[block], true) {
                return Err(format!(
                    "value block {block} both free and referenced (or free twice)"
                ));
            }
        }
        if let Some(lost) = scan.block_seen.iter().position(|&seen| !seen) {
            return Err(format!("value block {lost} neither free nor referenced"));
        }
        Ok(())
    }
}
