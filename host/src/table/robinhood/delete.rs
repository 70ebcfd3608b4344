//! Delete without tombstones (Xenic §4.1.2): overflow swap into the freed
//! slot, else backward shift of the following run, under the home segments'
//! move sequences.

use super::slots::{is_occupied, write_slot, EMPTY_SLOT_WORDS};
use super::RobinhoodTable;
use crate::table::sync::Ordering::{Relaxed, Release};
use splitkv_layout::robinhood_layout::{encode_link, HEADER_LINK_OFFSET, SLOT_INFO_OFFSET};

impl RobinhoodTable {
    // ---- delete ------------------------------------------------------------

    /// Empties main slot `pos`: overflow swap if possible, else backward shift
    /// of the following run (then overflow swap into the slot it frees).
    pub(super) fn remove_main(&mut self, pos: usize) {
        self.remove_main_moving(pos);
        self.moves_close();
    }

    /// [`RobinhoodTable::remove_main`] without closing the move sequences.
    pub(super) fn remove_main_moving(&mut self, pos: usize) {
        if self.overflow_swap_into(pos) {
            return;
        }
        let mut next = pos + 1;
        while next < self.layout.main_slots() {
            match self.main_home(next) {
                Some(home) if home < next => {
                    // The object is in two slots until the next copy (or the
                    // final clear) overwrites `next`: its segment stays odd
                    // until the whole delete is done.
                    self.moves_open(self.layout.segment_of(home));
                    self.copy_slot(
                        self.layout.slot_offset(next),
                        self.layout.slot_offset(next - 1),
                    );
                    self.stats.moved_by_shifts += 1;
                    next += 1;
                }
                _ => break,
            }
        }
        let hole = next - 1;
        if hole != pos && self.overflow_swap_into(hole) {
            return;
        }
        write_slot(
            &self.region,
            &self.layout,
            self.layout.slot_offset(hole),
            &EMPTY_SLOT_WORDS,
        );
    }

    /// Homes `[lo, hi]` an object may have to be placed in main slot `pos`
    /// (whose current content is being discarded) without breaking the
    /// invariants: within `d_max` before `pos`, no earlier than the home of the
    /// object at `pos - 1` (or exactly `pos` if that slot is empty), and no later
    /// than the home of the object at `pos + 1`.
    pub(super) fn home_window(&self, pos: usize) -> Option<(usize, usize)> {
        let mut hi = pos.min(self.layout.home_slots() - 1);
        if pos + 1 < self.layout.main_slots() {
            if let Some(next_home) = self.main_home(pos + 1) {
                hi = hi.min(next_home);
            }
        }
        let lo = match pos.checked_sub(1).and_then(|prev| self.main_home(prev)) {
            Some(prev_home) => prev_home.max(pos.saturating_sub(self.layout.d_max())),
            None => pos,
        };
        (lo <= hi).then_some((lo, hi))
    }

    /// Moves an overflow object that may legally live in main slot `pos` there
    /// (Xenic §4.1.2 "swaps an overflow element over the deleted element").
    /// Returns whether one was moved.
    pub(super) fn overflow_swap_into(&mut self, pos: usize) -> bool {
        if self.overflow_len == 0 {
            return false;
        }
        let Some((lo, hi)) = self.home_window(pos) else {
            return false;
        };
        for segment in self.layout.segment_of(lo)..=self.layout.segment_of(hi) {
            if self.segment_count(segment) == 0 {
                continue;
            }
            let mut link = self.segment_link(segment);
            while let Some(bucket) = link {
                for index in 0..self.layout.bucket_slots() {
                    let offset = self.layout.bucket_slot_offset(bucket, index);
                    let info = self.region.load(offset + SLOT_INFO_OFFSET, Relaxed);
                    if !is_occupied(info) {
                        continue;
                    }
                    let home = self.layout.home_slot(&self.key_at(offset, info));
                    if (lo..=hi).contains(&home) {
                        // Into the main array first, out of the bucket second.
                        self.moves_open(segment);
                        self.copy_slot(offset, self.layout.slot_offset(pos));
                        self.max_displacement_seen = self.max_displacement_seen.max(pos - home);
                        self.overflow_remove(segment, bucket, index);
                        self.stats.overflow_swaps += 1;
                        return true;
                    }
                }
                link = self.bucket_link(bucket);
            }
        }
        false
    }

    /// Clears slot `index` of `bucket` in `segment`'s chain; unlinks the bucket
    /// and returns it to the pool if it empties. The bucket's link word is kept
    /// until reuse, so a reader inside it still reaches the rest of the chain.
    pub(super) fn overflow_remove(&mut self, segment: usize, bucket: usize, index: usize) {
        write_slot(
            &self.region,
            &self.layout,
            self.layout.bucket_slot_offset(bucket, index),
            &EMPTY_SLOT_WORDS,
        );
        let count = self.bucket_count(bucket) - 1;
        self.set_bucket_count(bucket, count);
        self.set_segment_count(segment, self.segment_count(segment) - 1);
        self.overflow_len -= 1;
        if count > 0 {
            return;
        }
        let mut prev_header = self.layout.segment_header_offset(segment);
        let mut link = self.segment_link(segment);
        while link != Some(bucket) {
            let b = link.expect("an emptied bucket is in its segment's chain");
            prev_header = self.layout.bucket_header_offset(b);
            link = self.bucket_link(b);
        }
        let next = encode_link(self.bucket_link(bucket));
        self.region
            .store(prev_header + HEADER_LINK_OFFSET, next, Release);
        self.free_buckets.push_back(bucket);
    }
}
