//! The NIC object cache, organised as one index entry per host segment
//! (Xenic §4.1.3), with ScaleStore's epoch-based LRU approximation and
//! sampling eviction (ScaleStore §4.1).
//!
//! # Shape
//!
//! - **Segment entries.** `entries[i]` is the cache part of the NIC index entry
//!   of host segment `i` ([`SegmentEntry`], 32 bytes, line-aligned): a fixed
//!   set of [`SEGMENT_CACHE_POSITIONS`] = 4 inline cache positions, the number
//!   of positions in use, and the head of a chain of overflow pages. Which
//!   entry a key belongs to is the [`Segmentation`]: for the Robinhood table
//!   the host's own segment (`home >> log2(segment_slots)`); for the DLHT,
//!   which has no segments, one of `2^b` ranges of the key hash, about one
//!   entry per two objects of capacity.
//! - **Positions.** A position is a one-byte tag (hash bits the segmentation
//!   does not use, so most non-matching keys are skipped without touching
//!   their object; compared eight at a time as one word) and a `u32` handle
//!   into the object slab. An entry's positions are dense: positions `0..len`
//!   are in use, the inline ones first, then [`OVERFLOW_PAGE_POSITIONS`] = 8
//!   per overflow page in chain order; removing an object moves the entry's
//!   last position into the hole, and an overflow page left empty goes back
//!   to the pool at once.
//! - **Overflow pages** (44 bytes) come from one shared page pool. Because
//!   chains are dense, an entry with `n > 4` objects uses `ceil((n - 4) / 8)
//!   <= n / 5` pages, so pages in use never exceed `objects / 5`; the pool is
//!   preallocated to `slab_slots / 4 + 1` pages and only grows with the slab.
//! - **Object slab.** `objects[h]` is a [`CachedObject`], one 64-byte line:
//!   key, metadata, a reusable value buffer (cleared and refilled, so a slot
//!   allocates only the first time it holds a longer value), pin, last-access
//!   epoch and its position in its entry (the back pointer eviction needs).
//!   Free slots are on a LIFO free list.
//!
//! A hit reads the entry's line, then the object's line. Memory: 32 bytes per
//! host segment (2 bytes per home slot at 16 slots per segment), 64 bytes per
//! object slot plus its value buffer, 11 bytes per slot for the page pool.
//!
//! # Bounds
//!
//! - At most `capacity` objects, unless every cached object is pinned:
//!   committed writes are never refused, so pinned objects may exceed the
//!   capacity; when they are unpinned the cache evicts back down to it.
//!   The slab (and the page pool with it) grows only in that case.
//! - Preallocated at start-up: `min(capacity, 2^20) + 16` object slots and a
//!   quarter as many overflow pages; no allocation per insert in steady state.
//!
//! # Eviction (ScaleStore §4.1)
//!
//! - A global epoch grows by one every [`ObjectCache::epoch_accesses`] accesses
//!   (a count, not a clock, so the simulator stays deterministic); each access
//!   stamps the object with the current epoch only if it is newer (one branch).
//! - To make room, eviction samples [`EVICTION_SAMPLE`] random object slots
//!   (ScaleStore samples frames of its translation table; sampling entries
//!   instead would mostly find empty ones when the host table is much larger
//!   than the cache, while the slab is nearly full whenever eviction runs),
//!   takes the epoch at
//!   the [`EVICTION_FRACTION_PCT`] percentile of the unpinned ones as a
//!   threshold, and evicts sampled objects at or below it, oldest first, at most
//!   that share of the sample per round. If [`EVICTION_ROUNDS_MAX`] rounds find
//!   nothing (almost everything pinned), a sweep of the slab from a rotating
//!   cursor evicts the first unpinned object, so eviction fails only when every
//!   cached object is pinned.
//! - Objects pinned by committed-but-unapplied writes (Xenic §4.2 steps 6–7) are
//!   never evicted; they are unpinned when the host acknowledges the log
//!   position that holds them, and then age like any other object.

use splitkv_layout::{Key, ObjectMeta};
use std::collections::VecDeque;

/// Objects sampled per eviction round (ScaleStore samples N pages).
pub const EVICTION_SAMPLE: usize = 32;
/// Share of a sample, by oldest epoch, evicted per round (%).
pub const EVICTION_FRACTION_PCT: usize = 10;
/// Sampling rounds per eviction before the sweep fallback.
pub const EVICTION_ROUNDS_MAX: usize = 8;

/// Cache positions held inline in every segment entry (Xenic §4.1.3 gives
/// each index entry a fixed number of cache positions). Four keep the
/// entry at 32 bytes, so that the entry array of a host table of 2^20 home
/// slots (2^16 segments) is 2 MiB and mostly stays in the core's L2.
pub const SEGMENT_CACHE_POSITIONS: usize = 4;
/// Cache positions per chained overflow page.
pub const OVERFLOW_PAGE_POSITIONS: usize = 8;
/// Pin-queue entries preallocated (more grow on demand).
const PINS_PREALLOCATED: usize = 1 << 14;
/// Object slots preallocated at most (larger capacities grow on demand).
const OBJECTS_PREALLOCATED_MAX: usize = 1 << 20;

/// Value-buffer capacity, in bytes, a slot keeps whatever it holds: a slot
/// whose buffer is larger gives the excess back when it takes a value of at
/// most a quarter of the buffer (see [`ObjectCache::memory_bytes`]). So a
/// slot that once held a 4 KiB value ([`splitkv_layout::VALUE_BYTES_MAX`])
/// and now holds an 8-byte one does not keep 4 KiB: the slab's value memory
/// stays within `max(VALUE_BUFFER_KEPT_BYTES_MAX, 4 × value length)` per
/// object, and nothing is ever preallocated per object for the value limit.
pub const VALUE_BUFFER_KEPT_BYTES_MAX: usize = 512;

/// Pin position of an object whose log append has not completed yet.
pub const PIN_PENDING: u64 = u64::MAX;
const UNPINNED: u64 = 0;
/// No page / no object.
const NONE: u32 = u32::MAX;

/// Replaces a slot's value with `value`, reusing its buffer (no allocation
/// when the buffer is large enough), but giving back the excess of a buffer
/// over [`VALUE_BUFFER_KEPT_BYTES_MAX`] that is over four times `value`.
#[inline]
fn fill_value(buf: &mut Vec<u8>, value: &[u8]) {
    buf.clear();
    if buf.capacity() > VALUE_BUFFER_KEPT_BYTES_MAX && value.len() <= buf.capacity() / 4 {
        buf.shrink_to(value.len().max(VALUE_BUFFER_KEPT_BYTES_MAX / 4));
    }
    buf.extend_from_slice(value);
}

mod entries;
mod eviction;
#[cfg(test)]
mod tests;

use entries::{OverflowPage, PoolPage};
pub use entries::{SegmentEntry, Segmentation};

/// A cached object: one 64-byte line of the object slab (the key compared on
/// a lookup, the metadata and the value buffer's pointer share it).
#[derive(Debug, Clone, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct CachedObject {
    key: Key,
    /// Version and flags.
    pub meta: ObjectMeta,
    /// The value (a buffer the slot reuses).
    pub value: Vec<u8>,
    /// Host-log position the host must apply before the object may be evicted
    /// (0: not pinned; [`PIN_PENDING`]: append not completed).
    pub pin_until: u64,
    /// Epoch of the last access (the global epoch wraps after 2^32 epochs;
    /// a wrap can only misorder the eviction samples around it).
    pub last_epoch: u32,
    /// Position within its segment entry, or [`NONE`] while the slot is free.
    position: u32,
}

const _: () = assert!(std::mem::size_of::<CachedObject>() == 64);

impl CachedObject {
    const FREE: CachedObject = CachedObject {
        meta: ObjectMeta(0),
        value: Vec::new(),
        pin_until: UNPINNED,
        last_epoch: 0,
        key: Key::new(0, 0),
        position: NONE,
    };

    /// Whether the host may not yet hold this value.
    pub fn is_pinned(&self) -> bool {
        self.pin_until != UNPINNED
    }

    /// The object's key.
    pub fn key(&self) -> Key {
        self.key
    }

    fn is_free(&self) -> bool {
        self.position == NONE
    }
}

/// Cache counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered by the cache.
    pub hits: u64,
    /// Lookups that missed.
    pub misses: u64,
    /// Objects evicted.
    pub evictions: u64,
    /// Eviction rounds run (sampling rounds and sweeps).
    pub eviction_rounds: u64,
    /// Insertions skipped because every cached object was pinned.
    pub eviction_stalls: u64,
    /// Objects installed beyond the capacity because every cached object was pinned.
    pub pinned_over_capacity: u64,
    /// Installs refused because the cache held a newer version (a late or
    /// duplicated write must not move a version backwards).
    pub stale_installs: u64,
    /// Objects dropped by crash recovery ([`ObjectCache::forget_where`]).
    pub forgotten: u64,
}

/// Page-pool accounting (for checks and reports).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PagePoolStats {
    /// Overflow pages allocated in total.
    pub pages: usize,
    /// Of those, pages on the free list.
    pub free: usize,
    /// Of those, pages linked into some segment entry's chain.
    pub in_use: usize,
}

/// Capacity-bounded object cache, one entry per host segment.
#[derive(Debug)]
pub struct ObjectCache {
    segmentation: Segmentation,
    entries: Vec<SegmentEntry>,
    pages: Vec<OverflowPage>,
    free_pages: Vec<u32>,
    objects: Vec<CachedObject>,
    free_objects: Vec<u32>,
    len: usize,
    capacity: usize,
    epoch: u32,
    accesses_left: u64,
    epoch_accesses: u64,
    rng: u64,
    sweep: usize,
    pins: VecDeque<(u64, Key)>,
    pinned: usize,
    stats: CacheStats,
}

impl ObjectCache {
    /// A cache with the entries of `segmentation`, holding at most `capacity`
    /// objects unless all are pinned, advancing its epoch every
    /// `epoch_accesses` accesses; `seed` drives sampling.
    pub fn new(
        segmentation: Segmentation,
        capacity: usize,
        epoch_accesses: u64,
        seed: u64,
    ) -> ObjectCache {
        let capacity = capacity.max(1);
        let slots = capacity.min(OBJECTS_PREALLOCATED_MAX) + 16;
        let pool = slots / 4 + 1;
        let mut c = ObjectCache {
            segmentation,
            entries: vec![SegmentEntry::EMPTY; segmentation.entries()],
            pages: Vec::with_capacity(pool),
            free_pages: Vec::with_capacity(pool),
            objects: Vec::with_capacity(slots),
            free_objects: Vec::with_capacity(slots),
            len: 0,
            capacity,
            epoch: 1,
            accesses_left: epoch_accesses.max(1),
            epoch_accesses: epoch_accesses.max(1),
            rng: seed | 1,
            sweep: 0,
            // Pins in flight are bounded by unapplied commits, not the capacity.
            pins: VecDeque::with_capacity(slots.min(PINS_PREALLOCATED)),
            pinned: 0,
            stats: CacheStats::default(),
        };
        c.grow_objects(slots);
        c
    }

    /// Adds `n` free object slots and the overflow pages they may need.
    fn grow_objects(&mut self, n: usize) {
        let first = self.objects.len();
        self.objects.resize(first + n, CachedObject::FREE);
        // Free list popped from the back: lowest slots first.
        self.free_objects
            .extend((first..first + n).rev().map(|h| h as u32));
        let pool = self.objects.len() / 4 + 1;
        while self.pages.len() < pool {
            self.free_pages.push(self.pages.len() as u32);
            self.pages.push(OverflowPage {
                page: PoolPage::EMPTY,
                next: NONE,
            });
        }
        assert!(self.objects.len() < NONE as usize, "object slab bound");
    }

    /// How keys map to segment entries.
    pub fn segmentation(&self) -> Segmentation {
        self.segmentation
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
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Objects cached.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The object bound (exceeded only while every cached object is pinned).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Objects pinned by unapplied writes.
    pub fn pinned(&self) -> usize {
        self.pinned
    }

    /// Segment entries.
    pub fn entries(&self) -> usize {
        self.entries.len()
    }

    /// The segment entry `i`.
    pub fn entry(&self, i: usize) -> &SegmentEntry {
        &self.entries[i]
    }

    /// Overflow-page accounting.
    pub fn page_pool(&self) -> PagePoolStats {
        let free = self.free_pages.len();
        PagePoolStats {
            pages: self.pages.len(),
            free,
            in_use: self.pages.len() - free,
        }
    }

    /// NIC memory the entries, pages and slab take, in bytes (value buffers
    /// counted at their capacity: at most `max(`[`VALUE_BUFFER_KEPT_BYTES_MAX`]`,
    /// 4 × value length)` each, and 0 for a slot that never held a value).
    pub fn memory_bytes(&self) -> usize {
        self.entries.len() * std::mem::size_of::<SegmentEntry>()
            + self.pages.len() * std::mem::size_of::<OverflowPage>()
            + self.objects.len() * std::mem::size_of::<CachedObject>()
            + self
                .objects
                .iter()
                .map(|o| o.value.capacity())
                .sum::<usize>()
    }

    /// Looks `key` up, stamping it with the current epoch on a hit.
    #[inline]
    pub fn get(&mut self, key: &Key) -> Option<&CachedObject> {
        self.tick();
        match self.find(key) {
            Some(h) => {
                self.stats.hits += 1;
                let epoch = self.epoch;
                let o = &mut self.objects[h];
                if epoch > o.last_epoch {
                    o.last_epoch = epoch;
                }
                Some(o)
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
        self.find(key).map(|h| &self.objects[h])
    }

    /// Caches a clean object read from host memory, unless a newer version is
    /// already cached or it is pinned. May evict others to stay within capacity;
    /// skipped (an eviction stall) if every cached object is pinned.
    pub fn insert_clean(&mut self, key: Key, meta: ObjectMeta, value: &[u8]) {
        let h = match self.find(&key) {
            Some(h) => {
                let o = &self.objects[h];
                if o.meta.version() >= meta.version() || o.is_pinned() {
                    return;
                }
                h
            }
            None => {
                if self.len >= self.capacity && !self.evict() {
                    self.stats.eviction_stalls += 1;
                    return;
                }
                self.insert_new(key, meta)
            }
        };
        let o = &mut self.objects[h];
        o.meta = meta;
        fill_value(&mut o.value, value);
    }

    /// Installs a committed write, pinned until [`ObjectCache::set_pin`] and
    /// [`ObjectCache::unpin_applied`] release it; returns whether it did.
    /// Refused (counted in [`CacheStats::stale_installs`]) only if a newer
    /// version of `key` is cached: versions never go backwards (the install
    /// rule of `tla/XenicOCC.tla`). Never refused for room: if every cached
    /// object is pinned, the cache goes over capacity.
    pub fn install_committed(&mut self, key: Key, meta: ObjectMeta, value: &[u8]) -> bool {
        let h = match self.find(&key) {
            Some(h) if self.objects[h].meta.version() > meta.version() => {
                self.stats.stale_installs += 1;
                return false;
            }
            Some(h) => h,
            None => {
                if self.len >= self.capacity && !self.evict() {
                    self.stats.pinned_over_capacity += 1;
                }
                self.insert_new(key, meta)
            }
        };
        let o = &mut self.objects[h];
        let was_pinned = o.is_pinned();
        o.meta = meta;
        fill_value(&mut o.value, value);
        o.pin_until = PIN_PENDING;
        if !was_pinned {
            self.pinned += 1;
        }
        true
    }

    /// Drops every cached object whose key `drop` picks, pinned or not
    /// (crash recovery: a key a recovery decision changed in the
    /// host table, or a shard this node is promoted to serve, is read from
    /// the host table from then on). Returns the objects dropped.
    pub fn forget_where(&mut self, mut drop: impl FnMut(&Key) -> bool) -> usize {
        let mut n = 0;
        for h in 0..self.objects.len() {
            let o = &self.objects[h];
            if !o.is_free() && drop(&o.key) {
                self.forget_at(h);
                n += 1;
            }
        }
        n
    }

    /// Drops `key`'s cached object, pinned or not (see
    /// [`ObjectCache::forget_where`]); returns whether one was cached.
    pub fn forget(&mut self, key: &Key) -> bool {
        self.find(key).map(|h| self.forget_at(h)).is_some()
    }

    fn forget_at(&mut self, h: usize) {
        let o = &mut self.objects[h];
        if o.is_pinned() {
            o.pin_until = UNPINNED;
            self.pinned -= 1;
        }
        self.remove(h);
        self.stats.forgotten += 1;
    }

    /// The committed write of `key` at `version` is in the host log before `pos`.
    pub fn set_pin(&mut self, key: Key, version: u64, pos: u64) {
        if let Some(h) = self.find(&key) {
            let o = &mut self.objects[h];
            if o.meta.version() == version && o.pin_until == PIN_PENDING {
                o.pin_until = pos.max(1);
                self.pins.push_back((pos, key));
            }
        }
    }

    /// The host applied its log up to `applied`: unpin objects at or below it,
    /// then evict back down to the capacity. Returns how many were unpinned.
    pub fn unpin_applied(&mut self, applied: u64) -> usize {
        let mut n = 0;
        while let Some(&(pos, key)) = self.pins.front() {
            if pos > applied {
                break;
            }
            self.pins.pop_front();
            if let Some(h) = self.find(&key) {
                let o = &mut self.objects[h];
                // A key pinned at two positions has two queue items; the
                // first one that releases it leaves the second nothing to do.
                if o.is_pinned() && o.pin_until != PIN_PENDING && o.pin_until <= applied {
                    o.pin_until = UNPINNED;
                    self.pinned -= 1;
                    n += 1;
                }
            }
        }
        while n > 0 && self.len > self.capacity {
            if !self.evict() {
                break;
            }
        }
        n
    }
}
