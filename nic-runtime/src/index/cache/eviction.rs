//! ScaleStore's epoch-based LRU approximation and sampling eviction
//! (ScaleStore §4.1) for the NIC object cache: the access-count epoch, the
//! seeded sampler, and eviction with its sweep fallback. See the parent
//! module's docs, "Eviction".

use super::{ObjectCache, EVICTION_FRACTION_PCT, EVICTION_ROUNDS_MAX, EVICTION_SAMPLE};

impl ObjectCache {
    #[inline]
    pub(super) fn tick(&mut self) {
        // A countdown, not `accesses % epoch_accesses`: no division per access.
        self.accesses_left -= 1;
        if self.accesses_left == 0 {
            self.accesses_left = self.epoch_accesses;
            self.epoch = self.epoch.wrapping_add(1);
        }
    }

    fn next_rand(&mut self) -> u64 {
        // xorshift64*: deterministic, no allocation.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Evicts at least one unpinned object; false if every cached object is pinned.
    pub(super) fn evict(&mut self) -> bool {
        if self.pinned >= self.len {
            return false;
        }
        let mut sample = [(0u32, 0u32); EVICTION_SAMPLE];
        let slots = self.objects.len() as u64;
        for _ in 0..EVICTION_ROUNDS_MAX {
            self.stats.eviction_rounds += 1;
            let mut n = 0;
            for _ in 0..EVICTION_SAMPLE {
                let h = (self.next_rand() % slots) as usize;
                let o = &self.objects[h];
                if !o.is_free() && !o.is_pinned() {
                    sample[n] = (o.last_epoch, h as u32);
                    n += 1;
                }
            }
            if n == 0 {
                continue;
            }
            let sample = &mut sample[..n];
            // By epoch only: ties stay in (random) sample order, not slot order.
            sample.sort_unstable_by_key(|s| s.0);
            let quota = (n * EVICTION_FRACTION_PCT / 100).max(1);
            let threshold = sample[quota - 1].0;
            let mut evicted = 0;
            for &(epoch, h) in sample.iter() {
                // Oldest first, at most the quota: objects tied with the threshold
                // epoch beyond it stay (they may be hot in the current epoch).
                if epoch > threshold || evicted >= quota {
                    break;
                }
                // The same slot may be sampled twice.
                let o = &self.objects[h as usize];
                if !o.is_free() && !o.is_pinned() {
                    self.remove(h as usize);
                    evicted += 1;
                }
            }
            if evicted > 0 {
                self.stats.evictions += evicted as u64;
                return true;
            }
        }
        // Almost everything is pinned: sweep for the first unpinned object.
        self.stats.eviction_rounds += 1;
        for _ in 0..self.objects.len() {
            let h = self.sweep;
            self.sweep = (self.sweep + 1) % self.objects.len();
            let o = &self.objects[h];
            if !o.is_free() && !o.is_pinned() {
                self.remove(h);
                self.stats.evictions += 1;
                return true;
            }
        }
        unreachable!("pinned < len, so some cached object is unpinned")
    }
}
