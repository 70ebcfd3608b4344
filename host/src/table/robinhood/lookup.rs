//! Host-side lookup in the Robinhood table (Xenic §4.1.2): the main array's
//! probe with its early stop, then the home segment's overflow chain.

use super::slots::is_occupied;
use super::RobinhoodTable;
use crate::table::sync::Ordering::Relaxed;
use splitkv_layout::robinhood_layout::SLOT_INFO_OFFSET;
use splitkv_layout::Key;

impl RobinhoodTable {
    // ---- lookup ------------------------------------------------------------

    /// Main-array slot of `key` (home `home`). Stops early at an empty slot or at
    /// an object closer to its home than `key` would be there: by the sorted-
    /// cluster invariant `key` cannot lie beyond it.
    pub(super) fn find_main(&self, key: &Key, home: usize) -> Option<usize> {
        for displacement in 0..=self.layout.d_max() {
            let pos = home + displacement;
            let offset = self.layout.slot_offset(pos);
            let info = self.region.load(offset + SLOT_INFO_OFFSET, Relaxed);
            if !is_occupied(info) {
                return None;
            }
            let other = self.key_at(offset, info);
            if other == *key {
                return Some(pos);
            }
            if pos - self.layout.home_slot(&other) < displacement {
                return None;
            }
        }
        None
    }

    /// `(bucket, index)` of `key` (home `home`) in its segment's overflow chain.
    pub(super) fn find_overflow(&self, key: &Key, home: usize) -> Option<(usize, usize)> {
        let segment = self.layout.segment_of(home);
        if self.segment_count(segment) == 0 {
            return None;
        }
        let mut link = self.segment_link(segment);
        while let Some(bucket) = link {
            for index in 0..self.layout.bucket_slots() {
                let offset = self.layout.bucket_slot_offset(bucket, index);
                let info = self.region.load(offset + SLOT_INFO_OFFSET, Relaxed);
                if is_occupied(info) && self.key_at(offset, info) == *key {
                    return Some((bucket, index));
                }
            }
            link = self.bucket_link(bucket);
        }
        None
    }
}
