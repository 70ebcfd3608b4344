//! Insert of a new key (Xenic §4.1.2): the planned swap chain written from
//! its free end back, or the overflow chain when `d_max` would be exceeded.

use super::slots::{is_occupied, write_slot};
use super::{RobinhoodError, RobinhoodTable};
use crate::table::sync::Ordering::{Relaxed, Release};
use splitkv_layout::robinhood_layout::{
    encode_link, HEADER_COUNT_OFFSET, HEADER_LINK_OFFSET, SLOT_INFO_OFFSET,
};

impl RobinhoodTable {
    // ---- insert ------------------------------------------------------------

    /// Plans the Robinhood insert of a new key with home `home` into
    /// `self.chain` without writing anything: the chain is the slots
    /// `p0 < … < pk` where the new object lands (`p0`), where each displaced
    /// object lands, and the free slot `pk`. Returns the largest displacement in
    /// the plan, or `None` if some object would exceed `d_max`.
    pub(super) fn plan_insert(&mut self, home: usize) -> Option<usize> {
        self.chain.clear();
        let d_max = self.layout.d_max();
        let mut carried_home = home;
        let mut max_displacement = 0;
        for pos in home.. {
            let displacement = pos - carried_home;
            if displacement > d_max {
                self.chain.clear();
                return None;
            }
            // Every carried object has home < home_slots and displacement <= d_max,
            // so `pos` stays inside the main array: the tail slots absorb the end.
            match self.main_home(pos) {
                None => {
                    self.chain.push(pos);
                    return Some(max_displacement.max(displacement));
                }
                Some(other_home) if pos - other_home < displacement => {
                    self.chain.push(pos);
                    max_displacement = max_displacement.max(displacement);
                    carried_home = other_home;
                }
                Some(_) => {}
            }
        }
        unreachable!("the probe ends within d_max slots")
    }

    /// Writes the planned chain, from the free end back to the new object's
    /// slot (see the module docs for why this order).
    pub(super) fn apply_chain(&mut self) {
        for j in (1..self.chain.len()).rev() {
            let (from, to) = (self.chain[j - 1], self.chain[j]);
            self.copy_slot(self.layout.slot_offset(from), self.layout.slot_offset(to));
        }
        self.stats.moved_by_inserts += self.chain.len() as u64 - 1;
        write_slot(
            &self.region,
            &self.layout,
            self.layout.slot_offset(self.chain[0]),
            &self.new_words,
        );
    }

    /// Stores the object in `self.new_words` (home `home`) in its segment's
    /// overflow chain: first free slot of a bucket in the chain, else a fresh
    /// bucket from the pool appended to the chain.
    pub(super) fn overflow_insert(&mut self, home: usize) -> Result<(), RobinhoodError> {
        let segment = self.layout.segment_of(home);
        let mut tail_header = self.layout.segment_header_offset(segment);
        let mut link = self.segment_link(segment);
        let slot = loop {
            let Some(bucket) = link else {
                let bucket = self.free_buckets.pop_front().ok_or(RobinhoodError::Full)?;
                // A reader of the bucket's former segment may still be inside
                // it and would lose its way: warn it through that segment.
                let former = std::mem::replace(&mut self.bucket_owner[bucket], segment);
                if former != usize::MAX {
                    self.moves_open(former);
                }
                write_slot(
                    &self.region,
                    &self.layout,
                    self.layout.bucket_slot_offset(bucket, 0),
                    &self.new_words,
                );
                let header = self.layout.bucket_header_offset(bucket);
                self.region
                    .store(header + HEADER_LINK_OFFSET, encode_link(None), Relaxed);
                self.region.store(header + HEADER_COUNT_OFFSET, 1, Relaxed);
                // Publish the filled bucket only now (Release) at the chain's end.
                self.region.store(
                    tail_header + HEADER_LINK_OFFSET,
                    encode_link(Some(bucket)),
                    Release,
                );
                self.moves_close();
                break None;
            };
            let count = self.bucket_count(bucket);
            if count < self.layout.bucket_slots() {
                let index = (0..self.layout.bucket_slots())
                    .find(|&i| {
                        let offset = self.layout.bucket_slot_offset(bucket, i);
                        !is_occupied(self.region.load(offset + SLOT_INFO_OFFSET, Relaxed))
                    })
                    .expect("bucket count says a slot is free");
                break Some((bucket, index, count));
            }
            tail_header = self.layout.bucket_header_offset(bucket);
            link = self.bucket_link(bucket);
        };
        if let Some((bucket, index, count)) = slot {
            write_slot(
                &self.region,
                &self.layout,
                self.layout.bucket_slot_offset(bucket, index),
                &self.new_words,
            );
            self.set_bucket_count(bucket, count + 1);
        }
        self.set_segment_count(segment, self.segment_count(segment) + 1);
        self.overflow_len += 1;
        self.stats.overflow_inserts += 1;
        Ok(())
    }
}
