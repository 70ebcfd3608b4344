//! The NIC object cache (Xenic §4.1.3) with ScaleStore's epoch-based LRU
//! approximation and sampling eviction (ScaleStore §4.1).
//!
//! - A global epoch grows by one every [`ObjectCache::epoch_accesses`] accesses
//!   (a count, not a clock, so the simulator stays deterministic); each access
//!   stamps the entry with the current epoch only if it is newer (one branch).
//! - When the cache holds more than its capacity, eviction samples
//!   [`EVICTION_SAMPLE`] entries at random, takes the epoch at the
//!   [`EVICTION_FRACTION_PCT`] percentile of the sample as a threshold, and
//!   evicts sampled entries at or below it, oldest first, at most that share
//!   of the sample per round.
//! - Entries pinned by committed-but-unapplied writes (Xenic §4.2 steps 6–7) are
//!   never evicted; they are unpinned when the host acknowledges the log
//!   position that holds them, and then age like any other entry.

use splitkv_layout::{FixedState, Key, ObjectMeta};
use std::collections::VecDeque;

/// Entries sampled per eviction round (ScaleStore samples N pages).
pub const EVICTION_SAMPLE: usize = 32;
/// Share of a sample, by oldest epoch, evicted per round (%).
pub const EVICTION_FRACTION_PCT: usize = 10;
/// Eviction rounds per insertion before giving up (all sampled entries pinned).
pub const EVICTION_ROUNDS_MAX: usize = 8;

/// Pin position of an object whose log append has not completed yet.
pub const PIN_PENDING: u64 = u64::MAX;
const UNPINNED: u64 = 0;

/// A cached object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedObject {
    /// Version and flags.
    pub meta: ObjectMeta,
    /// The value.
    pub value: Vec<u8>,
    /// Host-log position the host must apply before the entry may be evicted
    /// (0: not pinned; [`PIN_PENDING`]: append not completed).
    pub pin_until: u64,
    /// Epoch of the last access.
    pub last_epoch: u64,
    /// Position in the dense key array (for sampling).
    slot: u32,
}

impl CachedObject {
    /// Whether the host may not yet hold this value.
    pub fn is_pinned(&self) -> bool {
        self.pin_until != UNPINNED
    }
}

/// Cache counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered by the cache.
    pub hits: u64,
    /// Lookups that missed.
    pub misses: u64,
    /// Entries evicted.
    pub evictions: u64,
    /// Eviction rounds run.
    pub eviction_rounds: u64,
    /// Insertions skipped because every sampled entry was pinned.
    pub eviction_stalls: u64,
}

/// Capacity-bounded object cache.
#[derive(Debug)]
pub struct ObjectCache {
    map: hashbrown::HashMap<Key, CachedObject, FixedState>,
    keys: Vec<Key>,
    capacity: usize,
    epoch: u64,
    accesses: u64,
    epoch_accesses: u64,
    rng: u64,
    pins: VecDeque<(u64, Key)>,
    pinned: usize,
    stats: CacheStats,
}

impl ObjectCache {
    /// A cache of at most `capacity` unpinned objects (pinned ones may exceed
    /// it: they cannot be dropped), advancing its epoch every `epoch_accesses`
    /// accesses; `seed` drives sampling.
    pub fn new(capacity: usize, epoch_accesses: u64, seed: u64) -> ObjectCache {
        ObjectCache {
            map: hashbrown::HashMap::with_capacity_and_hasher(
                capacity.min(1 << 20) + 16,
                FixedState,
            ),
            keys: Vec::with_capacity(capacity.min(1 << 20) + 16),
            capacity,
            epoch: 1,
            accesses: 0,
            epoch_accesses: epoch_accesses.max(1),
            rng: seed | 1,
            pins: VecDeque::new(),
            pinned: 0,
            stats: CacheStats::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Accesses per epoch.
    pub fn epoch_accesses(&self) -> u64 {
        self.epoch_accesses
    }

    /// Current global epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Objects cached.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Objects pinned by unapplied writes.
    pub fn pinned(&self) -> usize {
        self.pinned
    }

    fn tick(&mut self) {
        self.accesses += 1;
        if self.accesses.is_multiple_of(self.epoch_accesses) {
            self.epoch += 1;
        }
    }

    /// Looks `key` up, stamping it with the current epoch on a hit.
    #[inline]
    pub fn get(&mut self, key: &Key) -> Option<&CachedObject> {
        self.tick();
        let epoch = self.epoch;
        match self.map.get_mut(key) {
            Some(e) => {
                self.stats.hits += 1;
                if epoch > e.last_epoch {
                    e.last_epoch = epoch;
                }
                Some(e)
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// Looks `key` up without counting an access.
    #[inline]
    pub fn peek(&self, key: &Key) -> Option<&CachedObject> {
        self.map.get(key)
    }

    fn entry(&mut self, key: Key, meta: ObjectMeta) -> &mut CachedObject {
        let epoch = self.epoch;
        let keys = &mut self.keys;
        self.map.entry(key).or_insert_with(|| {
            keys.push(key);
            CachedObject {
                meta,
                value: Vec::new(),
                pin_until: UNPINNED,
                last_epoch: epoch,
                slot: (keys.len() - 1) as u32,
            }
        })
    }

    /// Caches a clean object read from host memory, unless a newer version is
    /// already cached. May evict others to stay within capacity.
    pub fn insert_clean(&mut self, key: Key, meta: ObjectMeta, value: &[u8]) {
        if let Some(e) = self.map.get(&key) {
            if e.meta.version() >= meta.version() {
                return;
            }
        } else if self.map.len() >= self.capacity && !self.evict() {
            self.stats.eviction_stalls += 1;
            return;
        }
        let e = self.entry(key, meta);
        if !e.is_pinned() {
            e.meta = meta;
            e.value.clear();
            e.value.extend_from_slice(value);
        }
    }

    /// Installs a committed write, pinned until [`ObjectCache::set_pin`] and
    /// [`ObjectCache::unpin_applied`] release it. Never refused.
    pub fn install_committed(&mut self, key: Key, meta: ObjectMeta, value: &[u8]) {
        if !self.map.contains_key(&key) && self.map.len() >= self.capacity {
            self.evict();
        }
        let e = self.entry(key, meta);
        let was_pinned = e.is_pinned();
        e.meta = meta;
        e.value.clear();
        e.value.extend_from_slice(value);
        e.pin_until = PIN_PENDING;
        if !was_pinned {
            self.pinned += 1;
        }
    }

    /// The committed write of `key` at `version` is in the host log before `pos`.
    pub fn set_pin(&mut self, key: Key, version: u64, pos: u64) {
        if let Some(e) = self.map.get_mut(&key) {
            if e.meta.version() == version && e.pin_until == PIN_PENDING {
                e.pin_until = pos.max(1);
                self.pins.push_back((pos, key));
            }
        }
    }

    /// The host applied its log up to `applied`: unpin entries at or below it.
    /// Returns how many were unpinned.
    pub fn unpin_applied(&mut self, applied: u64) -> usize {
        let mut n = 0;
        while let Some(&(pos, key)) = self.pins.front() {
            if pos > applied {
                break;
            }
            self.pins.pop_front();
            if let Some(e) = self.map.get_mut(&key) {
                if e.pin_until != PIN_PENDING && e.pin_until <= applied {
                    e.pin_until = UNPINNED;
                    self.pinned -= 1;
                    n += 1;
                }
            }
        }
        n
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

    fn remove(&mut self, key: &Key) {
        if let Some(e) = self.map.remove(key) {
            let slot = e.slot as usize;
            self.keys.swap_remove(slot);
            if slot < self.keys.len() {
                let moved = self.keys[slot];
                self.map
                    .get_mut(&moved)
                    .expect("dense keys mirror the map")
                    .slot = slot as u32;
            }
        }
    }

    /// One or more sampling rounds until an entry was evicted; false if every
    /// sample was pinned.
    fn evict(&mut self) -> bool {
        let mut sample = [(0u64, Key::default()); EVICTION_SAMPLE];
        for _ in 0..EVICTION_ROUNDS_MAX {
            self.stats.eviction_rounds += 1;
            let mut n = 0;
            for _ in 0..EVICTION_SAMPLE {
                if self.keys.is_empty() {
                    break;
                }
                let r = self.next_rand();
                let k = self.keys[(r % self.keys.len() as u64) as usize];
                let e = &self.map[&k];
                if !e.is_pinned() {
                    sample[n] = (e.last_epoch, k);
                    n += 1;
                }
            }
            if n == 0 {
                continue;
            }
            let sample = &mut sample[..n];
            sample.sort_unstable_by_key(|s| s.0);
            let quota = (n * EVICTION_FRACTION_PCT / 100).max(1);
            let threshold = sample[quota - 1].0;
            let mut evicted = 0;
            for &(epoch, k) in sample.iter() {
                // Oldest first, at most the quota: entries tied with the threshold
                // epoch beyond it stay (they may be hot in the current epoch).
                if epoch > threshold || evicted as usize >= quota {
                    break;
                }
                if self.map.get(&k).is_some_and(|e| !e.is_pinned()) {
                    self.remove(&k);
                    evicted += 1;
                }
            }
            if evicted > 0 {
                self.stats.evictions += evicted;
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(i: u64) -> Key {
        Key::new(0, i)
    }

    #[test]
    fn capacity_bound_holds_and_pinned_entries_survive() {
        let mut c = ObjectCache::new(100, 10, 7);
        for i in 0..10 {
            c.install_committed(k(i), ObjectMeta(1), b"p");
        }
        for i in 10..1000 {
            c.insert_clean(k(i), ObjectMeta(1), b"c");
            assert!(c.len() <= 100);
        }
        for i in 0..10 {
            assert!(
                c.peek(&k(i)).is_some_and(|e| e.is_pinned()),
                "pinned {i} evicted"
            );
        }
        assert!(c.stats().evictions >= 900);
        assert_eq!(c.pinned(), 10);
    }

    #[test]
    fn recently_used_entries_outlive_cold_ones() {
        let mut c = ObjectCache::new(200, 50, 3);
        for i in 0..200 {
            c.insert_clean(k(i), ObjectMeta(1), b"x");
        }
        // Keep keys 0..20 hot across many epochs while streaming cold keys through.
        for round in 0..200u64 {
            for i in 0..20 {
                c.get(&k(i));
            }
            c.insert_clean(k(1_000 + round), ObjectMeta(1), b"x");
        }
        let hot_left = (0..20).filter(|&i| c.peek(&k(i)).is_some()).count();
        let cold_left = (20..200).filter(|&i| c.peek(&k(i)).is_some()).count();
        assert!(hot_left >= 18, "hot entries kept: {hot_left}/20");
        assert!(
            cold_left < 180,
            "some cold entries went: {cold_left}/180 left"
        );
    }

    #[test]
    fn unpin_follows_log_positions_and_newer_writes() {
        let mut c = ObjectCache::new(10, 10, 1);
        c.install_committed(k(1), ObjectMeta(2), b"v2");
        assert_eq!(
            c.unpin_applied(u64::MAX - 1),
            0,
            "a pending append stays pinned"
        );
        c.set_pin(k(1), 2, 100);
        c.install_committed(k(1), ObjectMeta(3), b"v3");
        assert_eq!(c.unpin_applied(100), 0, "the newer write keeps it pinned");
        c.set_pin(k(1), 3, 200);
        assert_eq!(c.unpin_applied(200), 1);
        let e = c.peek(&k(1)).unwrap();
        assert!(!e.is_pinned());
        assert_eq!(e.value, b"v3", "unpinned entries stay cached");
        c.insert_clean(k(1), ObjectMeta(2), b"old");
        assert_eq!(
            c.peek(&k(1)).unwrap().value,
            b"v3",
            "an older clean read never replaces a newer entry"
        );
    }

    #[test]
    fn all_pinned_cache_refuses_clean_inserts_but_takes_commits() {
        let mut c = ObjectCache::new(4, 10, 1);
        for i in 0..4 {
            c.install_committed(k(i), ObjectMeta(1), b"p");
        }
        c.insert_clean(k(9), ObjectMeta(1), b"c");
        assert!(c.peek(&k(9)).is_none());
        assert_eq!(c.stats().eviction_stalls, 1);
        c.install_committed(k(10), ObjectMeta(1), b"p");
        assert!(c.peek(&k(10)).is_some(), "commits are never refused");
    }
}
