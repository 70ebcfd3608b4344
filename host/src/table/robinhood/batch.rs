//! Batches of the Robinhood table (Dandelion §6): software prefetch of every
//! request's probe slots, then the requests in order.

use super::{RobinhoodError, RobinhoodTable};

use crate::table::Request;
use splitkv_layout::robinhood_layout::SLOT_INFO_OFFSET;
use splitkv_layout::{Key, ObjectMeta, CACHE_LINE_BYTES};

impl RobinhoodTable {
    // ---- batches (Dandelion §6) ---------------------------------------------

    /// Number of consecutive probe slots, from the home slot on, whose cache
    /// lines [`RobinhoodTable::prefetch`] fetches now. Unless set with
    /// [`RobinhoodTable::set_prefetch_slots`], it follows the main array's
    /// occupancy α: a successful lookup reads `(1 + 1/(1 − α)) / 2` slots on
    /// average (as for linear probing), rounded up and clamped to
    /// `1 ..= d_max + 1` — 2 slots at α = 0.5, 6 at α = 0.9. Prefetching only
    /// the home slot leaves the rest of a displaced key's probe to miss one
    /// line after another (benches/README.md has the measurement).
    pub fn prefetch_slots(&self) -> usize {
        let most = self.layout.d_max() + 1;
        if let Some(slots) = self.prefetch_slots {
            return slots;
        }
        let home = self.layout.home_slots();
        let free = home.saturating_sub(self.len - self.overflow_len);
        if free == 0 {
            return most;
        }
        (1 + home.div_ceil(free)).div_ceil(2).clamp(1, most)
    }

    /// Fixes the number of probe slots a prefetch covers (clamped to
    /// `1 ..= d_max + 1`), or with `None` returns to following the occupancy
    /// ([`RobinhoodTable::prefetch_slots`]). More slots cover the probes of
    /// displaced keys at the price of more memory traffic per request.
    pub fn set_prefetch_slots(&mut self, slots: Option<usize>) {
        self.prefetch_slots = slots.map(|n| n.clamp(1, self.layout.d_max() + 1));
    }

    /// Issues software prefetches for the cache lines of `key`'s first
    /// [`RobinhoodTable::prefetch_slots`] probe slots (its home slot and the
    /// next ones, from the home slot's info word on), so that a lookup issued a
    /// little later finds them in cache. Changes nothing; a no-op on targets
    /// without a prefetch instruction ([`Region::prefetch`](splitkv_layout::Region::prefetch)).
    #[inline]
    pub fn prefetch(&self, key: &Key) {
        self.prefetch_slots_of(key, self.prefetch_slots());
    }

    /// [`RobinhoodTable::prefetch`] with the slot count computed once per batch.
    #[inline]
    pub(super) fn prefetch_slots_of(&self, key: &Key, slots: usize) {
        let home_offset = self.layout.slot_offset(self.layout.home_slot(key));
        let first = home_offset + SLOT_INFO_OFFSET;
        // Up to the last value byte of the last slot (its `seq_tail` is not read).
        let last = home_offset + slots * self.layout.slot_bytes() - 9;
        let mut line = first & !(CACHE_LINE_BYTES - 1);
        while line <= last {
            self.region.prefetch(line);
            line += CACHE_LINE_BYTES;
        }
    }

    /// Executes a batch of requests (Dandelion §6): first prefetches every
    /// request's home slot and the probe slots after it
    /// ([`RobinhoodTable::prefetch`]), then executes the
    /// requests in slice order and stores each one's result in it. Results and
    /// the final table equal those of issuing the same operations one at a
    /// time; a failed upsert (its `result` holds the [`RobinhoodError`]) does not
    /// stop the requests after it.
    ///
    /// Allocation-free as long as each Get's `value` buffer has capacity for the
    /// table's `value_bytes_max`. Batches of a few tens of requests suit the
    /// hardware: the prefetched lines must still be in L1/L2 when their request
    /// runs (Dandelion Figure 7 uses up to 32).
    pub fn batch(&mut self, reqs: &mut [Request<'_>]) {
        self.apply_batch(reqs);
    }

    /// [`RobinhoodTable::batch`] with the errors of failed upserts converted
    /// into `E` (the host tables' one request type, [`Request`], is generic in
    /// its error: [`crate::table::HostTable::batch`] runs either table's batch
    /// with [`crate::table::HostTableError`]).
    pub fn apply_batch<E: From<RobinhoodError>>(&mut self, reqs: &mut [Request<'_, E>]) {
        let slots = self.prefetch_slots();
        for req in reqs.iter() {
            self.prefetch_slots_of(req.key(), slots);
        }
        for req in reqs.iter_mut() {
            match req {
                Request::Get { key, value, result } => *result = self.get(key, value),
                Request::Upsert {
                    key,
                    meta,
                    value,
                    only_if_newer,
                    result,
                } => {
                    let done = self.upsert_with(*key, *meta, value, *only_if_newer);
                    *result = Some(done.map_err(E::from));
                }
                Request::Remove { key, result } => *result = self.remove(key),
            }
        }
    }

    /// Read-only batch of Gets (Dandelion §6), usable through `&self`: prefetches
    /// every key's home slot and the probe slots after it, then looks the keys up in order. For each `i`,
    /// `metas[i]` and `values[i]` get what [`RobinhoodTable::get`] of `keys[i]`
    /// would return and fill in.
    ///
    /// # Panics
    /// If the three slices do not have the same length.
    pub fn get_batch(
        &self,
        keys: &[Key],
        values: &mut [Vec<u8>],
        metas: &mut [Option<ObjectMeta>],
    ) {
        assert_eq!(
            keys.len(),
            values.len(),
            "get_batch: keys and values differ in length"
        );
        assert_eq!(
            keys.len(),
            metas.len(),
            "get_batch: keys and metas differ in length"
        );
        let slots = self.prefetch_slots();
        for key in keys {
            self.prefetch_slots_of(key, slots);
        }
        for ((key, value), meta) in keys.iter().zip(values.iter_mut()).zip(metas.iter_mut()) {
            *meta = self.get(key, value);
        }
    }
}
