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

use splitkv_layout::table::TableLayout;
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

/// Pin position of an object whose log append has not completed yet.
pub const PIN_PENDING: u64 = u64::MAX;
const UNPINNED: u64 = 0;
/// No page / no object.
const NONE: u32 = u32::MAX;

/// How keys map to segment entries, and which hash bits make a position's tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segmentation {
    /// The Robinhood table's own segments (Xenic §4.1.2): the entry of a key
    /// is `home_slot >> log2(segment_slots)`; the tag is hash bits 56..64,
    /// above any home bits (tables have far fewer than 2^56 home slots).
    Robinhood {
        /// `home_slots - 1`.
        home_mask: u64,
        /// `log2(segment_slots)`.
        segment_shift: u32,
    },
    /// `2^bits` equal ranges of the 64-bit key hash: the entry of a key is the
    /// hash's top `bits` bits. Used for the DLHT, whose bins are the hash's
    /// low bits and change with every resize, while these ranges do not. The
    /// tag is hash bits 0..8.
    HashRange {
        /// log2 of the number of entries (0..=24).
        bits: u32,
    },
}

impl Segmentation {
    /// The Robinhood table's segments.
    pub fn robinhood(layout: &TableLayout) -> Segmentation {
        debug_assert!(layout.home_slots().is_power_of_two());
        debug_assert!(layout.segment_slots().is_power_of_two());
        Segmentation::Robinhood {
            home_mask: layout.home_slots() as u64 - 1,
            segment_shift: layout.segment_slots().trailing_zeros(),
        }
    }

    /// Hash ranges, about one entry per two objects of a cache of `capacity`
    /// (half the inline positions used on average; a power of two, 1 ..= 2^19
    /// entries).
    pub fn hash_range_for(capacity: usize) -> Segmentation {
        let entries = (capacity.min(OBJECTS_PREALLOCATED_MAX) / 2)
            .max(1)
            .next_power_of_two();
        Segmentation::HashRange {
            bits: entries.trailing_zeros(),
        }
    }

    /// Number of segment entries.
    pub fn entries(&self) -> usize {
        match *self {
            Segmentation::Robinhood {
                home_mask,
                segment_shift,
            } => ((home_mask + 1) >> segment_shift) as usize,
            Segmentation::HashRange { bits } => 1 << bits,
        }
    }

    /// Segment entry and tag of `key`.
    #[inline]
    pub fn locate(&self, key: &Key) -> (usize, u8) {
        let h = key.hash64();
        match *self {
            Segmentation::Robinhood {
                home_mask,
                segment_shift,
            } => (((h & home_mask) >> segment_shift) as usize, (h >> 56) as u8),
            Segmentation::HashRange { bits } => {
                let entry = if bits == 0 {
                    0
                } else {
                    (h >> (64 - bits)) as usize
                };
                (entry, h as u8)
            }
        }
    }
}

/// A page of `N` (≤ 8) cache positions: tags (one byte each, compared as one
/// word) and object handles.
#[derive(Debug, Clone, Copy)]
struct Page<const N: usize> {
    tags: [u8; N],
    handles: [u32; N],
}

impl<const N: usize> Page<N> {
    const EMPTY: Page<N> = Page {
        tags: [0; N],
        handles: [NONE; N],
    };

    /// Bit 8i+7 set for each of the first `n` positions whose tag is `tag`.
    #[inline]
    fn matches(&self, tag: u8, n: usize) -> u64 {
        const LO: u64 = 0x7f7f_7f7f_7f7f_7f7f;
        const { assert!(N <= 8) };
        let mut word = [0u8; 8];
        word[..N].copy_from_slice(&self.tags);
        let x = u64::from_le_bytes(word) ^ (tag as u64 * 0x0101_0101_0101_0101);
        // Exact zero-byte detection: the high bit of each byte of `x` that is zero.
        let zero = !(((x & LO) + LO) | x | LO);
        // Only live positions of this page (the word's padding bytes are 0).
        let n = n.min(N);
        let live = if n >= 8 {
            u64::MAX
        } else {
            (1u64 << (8 * n)) - 1
        };
        zero & live
    }
}

/// The inline positions of a segment entry.
type InlinePage = Page<SEGMENT_CACHE_POSITIONS>;
/// The positions of an overflow page.
type PoolPage = Page<OVERFLOW_PAGE_POSITIONS>;

/// Where position `p` of an entry is: page number (0: inline, then the
/// overflow pages in chain order) and index within the page.
#[inline]
fn page_of(p: usize) -> (usize, usize) {
    if p < SEGMENT_CACHE_POSITIONS {
        (0, p)
    } else {
        let q = p - SEGMENT_CACHE_POSITIONS;
        (1 + q / OVERFLOW_PAGE_POSITIONS, q % OVERFLOW_PAGE_POSITIONS)
    }
}

/// An overflow page from the shared pool: positions and the next page.
#[derive(Debug, Clone, Copy)]
struct OverflowPage {
    page: PoolPage,
    next: u32,
}

/// The cache part of the NIC index entry of one host segment (Xenic §4.1.3):
/// [`SEGMENT_CACHE_POSITIONS`] inline positions and a chain of overflow pages.
/// Positions `0..len` are in use. 32 bytes, aligned, so that a lookup reads one
/// line of the entry array.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(32))]
pub struct SegmentEntry {
    inline: InlinePage,
    len: u32,
    overflow_head: u32,
}

impl SegmentEntry {
    const EMPTY: SegmentEntry = SegmentEntry {
        inline: InlinePage::EMPTY,
        len: 0,
        overflow_head: NONE,
    };

    /// Cached objects of this segment.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether no object of this segment is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Overflow pages this entry's positions need.
    fn pages_needed(len: usize) -> usize {
        len.saturating_sub(SEGMENT_CACHE_POSITIONS)
            .div_ceil(OVERFLOW_PAGE_POSITIONS)
    }
}

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
const _: () = assert!(std::mem::size_of::<SegmentEntry>() == 32);
const _: () = assert!(std::mem::size_of::<OverflowPage>() == 44);

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
    /// counted at their capacity).
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

    #[inline]
    fn tick(&mut self) {
        // A countdown, not `accesses % epoch_accesses`: no division per access.
        self.accesses_left -= 1;
        if self.accesses_left == 0 {
            self.accesses_left = self.epoch_accesses;
            self.epoch = self.epoch.wrapping_add(1);
        }
    }

    /// The overflow page number `page_no` (≥ 1) of `entry`'s chain.
    #[inline]
    fn pool_page(&self, entry: usize, page_no: usize) -> usize {
        let mut p = self.entries[entry].overflow_head;
        for _ in 1..page_no {
            p = self.pages[p as usize].next;
        }
        p as usize
    }

    /// Tag and handle at position `p` of `entry`.
    fn position(&self, entry: usize, p: usize) -> (u8, u32) {
        match page_of(p) {
            (0, i) => {
                let e = &self.entries[entry].inline;
                (e.tags[i], e.handles[i])
            }
            (n, i) => {
                let page = &self.pages[self.pool_page(entry, n)].page;
                (page.tags[i], page.handles[i])
            }
        }
    }

    /// Sets position `p` of `entry` (whose page must be linked).
    fn set_position(&mut self, entry: usize, p: usize, tag: u8, handle: u32) {
        match page_of(p) {
            (0, i) => {
                let e = &mut self.entries[entry].inline;
                e.tags[i] = tag;
                e.handles[i] = handle;
            }
            (n, i) => {
                let q = self.pool_page(entry, n);
                let page = &mut self.pages[q].page;
                page.tags[i] = tag;
                page.handles[i] = handle;
            }
        }
    }

    /// Handle of `key`'s object, if cached.
    #[inline]
    fn find(&self, key: &Key) -> Option<usize> {
        let (entry, tag) = self.segmentation.locate(key);
        let e = &self.entries[entry];
        let len = e.len as usize;
        let mut m = e.inline.matches(tag, len);
        while m != 0 {
            let h = e.inline.handles[(m.trailing_zeros() / 8) as usize] as usize;
            if self.objects[h].key == *key {
                return Some(h);
            }
            m &= m - 1;
        }
        let mut left = len.saturating_sub(SEGMENT_CACHE_POSITIONS);
        let mut next = e.overflow_head;
        while left > 0 {
            let p = &self.pages[next as usize];
            let mut m = p.page.matches(tag, left);
            while m != 0 {
                let h = p.page.handles[(m.trailing_zeros() / 8) as usize] as usize;
                if self.objects[h].key == *key {
                    return Some(h);
                }
                m &= m - 1;
            }
            left = left.saturating_sub(OVERFLOW_PAGE_POSITIONS);
            next = p.next;
        }
        None
    }

    /// Hints the CPU to bring `key`'s segment entry into cache (Dandelion §6
    /// batching): called for every key of a request before any is looked up,
    /// the entries' cache misses overlap. A no-op off x86-64.
    #[inline]
    pub fn prefetch(&self, key: &Key) {
        let (entry, _) = self.segmentation.locate(key);
        let p: *const SegmentEntry = &self.entries[entry];
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch only hints the cache hierarchy; it never faults,
        // and `p` points into `entries` anyway.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(p as *const i8);
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = p;
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

    /// Adds `key` (not cached) to its segment entry; returns its handle.
    fn insert_new(&mut self, key: Key, meta: ObjectMeta) -> usize {
        if self.free_objects.is_empty() {
            // Only while pinned objects exceed the capacity.
            self.grow_objects(self.objects.len() / 4 + 16);
        }
        let h = self.free_objects.pop().expect("slab grown") as usize;
        let (entry, tag) = self.segmentation.locate(&key);
        let position = self.entries[entry].len as usize;
        if position >= SEGMENT_CACHE_POSITIONS
            && (position - SEGMENT_CACHE_POSITIONS).is_multiple_of(OVERFLOW_PAGE_POSITIONS)
        {
            self.link_page(entry, position);
        }
        self.set_position(entry, position, tag, h as u32);
        self.entries[entry].len += 1;
        self.len += 1;
        let epoch = self.epoch;
        let o = &mut self.objects[h];
        debug_assert!(o.is_free());
        o.key = key;
        o.meta = meta;
        o.value.clear();
        o.pin_until = UNPINNED;
        o.last_epoch = epoch;
        o.position = position as u32;
        h
    }

    /// Links a pool page at the end of `entry`'s chain, which currently ends
    /// just before `position`.
    fn link_page(&mut self, entry: usize, position: usize) {
        let p = self
            .free_pages
            .pop()
            .expect("page pool sized for dense chains: objects / 4 + 1 pages");
        self.pages[p as usize].next = NONE;
        let page_no = page_of(position).0;
        if page_no == 1 {
            self.entries[entry].overflow_head = p;
        } else {
            let mut q = self.entries[entry].overflow_head;
            for _ in 2..page_no {
                q = self.pages[q as usize].next;
            }
            debug_assert_eq!(self.pages[q as usize].next, NONE);
            self.pages[q as usize].next = p;
        }
    }

    /// Removes the object `h` (unpinned) from its entry and frees its slot.
    fn remove(&mut self, h: usize) {
        let (entry, position) = {
            let o = &self.objects[h];
            debug_assert!(!o.is_free() && !o.is_pinned());
            (self.segmentation.locate(&o.key).0, o.position as usize)
        };
        let last = self.entries[entry].len as usize - 1;
        if position != last {
            // Keep positions dense: the last one fills the hole.
            let (tag, moved) = self.position(entry, last);
            self.set_position(entry, position, tag, moved);
            self.objects[moved as usize].position = position as u32;
        }
        self.entries[entry].len = last as u32;
        if last >= SEGMENT_CACHE_POSITIONS
            && (last - SEGMENT_CACHE_POSITIONS).is_multiple_of(OVERFLOW_PAGE_POSITIONS)
        {
            self.unlink_last_page(entry, page_of(last).0);
        }
        self.objects[h].position = NONE;
        self.free_objects.push(h as u32);
        self.len -= 1;
    }

    /// Returns `entry`'s overflow page number `page_no` (its last) to the pool.
    fn unlink_last_page(&mut self, entry: usize, page_no: usize) {
        let p = if page_no == 1 {
            let p = self.entries[entry].overflow_head;
            self.entries[entry].overflow_head = NONE;
            p
        } else {
            let mut q = self.entries[entry].overflow_head;
            for _ in 2..page_no {
                q = self.pages[q as usize].next;
            }
            let p = self.pages[q as usize].next;
            self.pages[q as usize].next = NONE;
            p
        };
        debug_assert_eq!(self.pages[p as usize].next, NONE);
        self.free_pages.push(p);
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
        o.value.clear();
        o.value.extend_from_slice(value);
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
        o.value.clear();
        o.value.extend_from_slice(value);
        o.pin_until = PIN_PENDING;
        if !was_pinned {
            self.pinned += 1;
        }
        true
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
    fn evict(&mut self) -> bool {
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

    /// Checks the structure's invariants: every position points at a live
    /// object that points back at it and hashes to its entry; the object
    /// count, pinned count and page accounting (pages in use = pages the
    /// entries' lengths need = pool pages minus free pages) agree; the bound
    /// `len <= capacity || len == pinned` holds. For tests and debugging;
    /// O(entries + slab).
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut total = 0usize;
        let mut pages_needed = 0usize;
        for (i, e) in self.entries.iter().enumerate() {
            let len = e.len as usize;
            total += len;
            pages_needed += SegmentEntry::pages_needed(len);
            let mut chain = 0usize;
            let mut p = e.overflow_head;
            while p != NONE {
                chain += 1;
                if chain > self.pages.len() {
                    return Err(format!("entry {i}: overflow chain cycles"));
                }
                p = self.pages[p as usize].next;
            }
            if chain != SegmentEntry::pages_needed(len) {
                return Err(format!(
                    "entry {i}: {len} positions but {chain} overflow pages"
                ));
            }
            for pos in 0..len {
                let (page_tag, h) = self.position(i, pos);
                let h = h as usize;
                let o = self
                    .objects
                    .get(h)
                    .ok_or_else(|| format!("entry {i} position {pos}: bad handle {h}"))?;
                let (entry, tag) = self.segmentation.locate(&o.key);
                if o.is_free() || o.position as usize != pos || entry != i {
                    return Err(format!("entry {i} position {pos}: back pointer mismatch"));
                }
                if tag != page_tag {
                    return Err(format!("entry {i} position {pos}: wrong tag"));
                }
            }
        }
        let live = self.objects.iter().filter(|o| !o.is_free()).count();
        let pinned = self
            .objects
            .iter()
            .filter(|o| !o.is_free() && o.is_pinned())
            .count();
        if total != self.len || live != self.len {
            return Err(format!(
                "len {} but {total} positions and {live} live objects",
                self.len
            ));
        }
        if live + self.free_objects.len() != self.objects.len() {
            return Err("object free list out of step".into());
        }
        if pinned != self.pinned {
            return Err(format!("pinned {} but {pinned} counted", self.pinned));
        }
        let pool = self.page_pool();
        if pool.in_use != pages_needed {
            return Err(format!(
                "{} pages in use but entries need {pages_needed}",
                pool.in_use
            ));
        }
        if self.len > self.capacity && self.len != self.pinned {
            return Err(format!(
                "{} objects over capacity {} with {} pinned",
                self.len, self.capacity, self.pinned
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(i: u64) -> Key {
        Key::new(0, i)
    }

    /// Few entries, so that objects share entries and overflow pages are used.
    fn cache(capacity: usize, epoch_accesses: u64, seed: u64) -> ObjectCache {
        ObjectCache::new(
            Segmentation::HashRange { bits: 2 },
            capacity,
            epoch_accesses,
            seed,
        )
    }

    #[test]
    fn capacity_bound_holds_and_pinned_entries_survive() {
        let mut c = cache(100, 10, 7);
        for i in 0..10 {
            c.install_committed(k(i), ObjectMeta(1), b"p");
        }
        for i in 10..1000 {
            c.insert_clean(k(i), ObjectMeta(1), b"c");
            assert!(c.len() <= 100);
        }
        c.check_invariants().unwrap();
        for i in 0..10 {
            assert!(
                c.peek(&k(i)).is_some_and(|e| e.is_pinned()),
                "pinned {i} evicted"
            );
        }
        assert!(c.stats().evictions >= 900);
        assert_eq!(c.pinned(), 10);
        assert!(
            c.page_pool().in_use > 0,
            "4 entries of 100 objects overflow"
        );
    }

    #[test]
    fn recently_used_entries_outlive_cold_ones() {
        let mut c = cache(200, 50, 3);
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
        let mut c = cache(10, 10, 1);
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
    fn a_key_pinned_at_two_positions_is_unpinned_once() {
        let mut c = cache(10, 10, 1);
        c.install_committed(k(1), ObjectMeta(1), b"v1");
        c.set_pin(k(1), 1, 5);
        c.install_committed(k(1), ObjectMeta(2), b"v2");
        c.set_pin(k(1), 2, 6);
        c.install_committed(k(2), ObjectMeta(1), b"w");
        assert_eq!(c.pinned(), 2);
        assert_eq!(c.unpin_applied(6), 1);
        assert_eq!(c.pinned(), 1, "k(2) is still pinned");
        c.check_invariants().unwrap();
    }

    #[test]
    fn all_pinned_cache_refuses_clean_inserts_but_takes_commits() {
        let mut c = cache(4, 10, 1);
        for i in 0..4 {
            c.install_committed(k(i), ObjectMeta(1), b"p");
        }
        c.insert_clean(k(9), ObjectMeta(1), b"c");
        assert!(c.peek(&k(9)).is_none());
        assert_eq!(c.stats().eviction_stalls, 1);
        c.install_committed(k(10), ObjectMeta(1), b"p");
        assert!(c.peek(&k(10)).is_some(), "commits are never refused");
        assert_eq!(c.len(), 5);
        c.check_invariants().unwrap();
        // Unpinning one goes back down to the capacity at once.
        c.set_pin(k(0), 1, 8);
        assert_eq!(c.unpin_applied(8), 1);
        assert_eq!(c.len(), 4);
        assert!(c.peek(&k(0)).is_none(), "the only unpinned object went");
        c.check_invariants().unwrap();
    }

    #[test]
    fn one_segment_chains_overflow_pages_and_returns_them() {
        let mut c = ObjectCache::new(Segmentation::HashRange { bits: 0 }, 1000, 10, 5);
        for i in 0..40 {
            c.insert_clean(k(i), ObjectMeta(1), &i.to_le_bytes());
        }
        // 40 positions: 4 inline + 5 overflow pages of 8 (the last one half full).
        assert_eq!(c.entry(0).len(), 40);
        assert_eq!(c.page_pool().in_use, 5);
        for i in 0..40 {
            assert_eq!(c.peek(&k(i)).unwrap().value, i.to_le_bytes());
        }
        for i in (0..40).step_by(2) {
            let h = c.find(&k(i)).unwrap();
            c.remove(h);
            c.check_invariants().unwrap();
        }
        assert_eq!(c.page_pool().in_use, 2, "20 positions: 4 inline + 2 pages");
        for i in (1..40).step_by(2) {
            assert_eq!(c.peek(&k(i)).unwrap().value, i.to_le_bytes());
            assert!(c.peek(&k(i - 1)).is_none());
        }
        for i in (1..40).step_by(2) {
            let h = c.find(&k(i)).unwrap();
            c.remove(h);
        }
        assert_eq!(c.page_pool().in_use, 0);
        assert_eq!(c.page_pool().free, c.page_pool().pages);
        c.check_invariants().unwrap();
    }

    #[test]
    fn tag_match_finds_exactly_the_live_positions() {
        let mut p = PoolPage::EMPTY;
        p.tags = [7, 0, 7, 0x87, 7, 1, 7, 7];
        assert_eq!(p.matches(7, 8).count_ones(), 5);
        assert_eq!(p.matches(7, 3).count_ones(), 2);
        assert_eq!(p.matches(0, 8).count_ones(), 1);
        assert_eq!(p.matches(0x87, 8), 0x80 << 24);
        assert_eq!(p.matches(1, 5), 0);
    }

    #[test]
    fn robinhood_segmentation_is_the_host_segment() {
        use splitkv_layout::table::TableConfig;
        let layout = TableLayout::new(&TableConfig::new(10_000, 8)).unwrap();
        let s = Segmentation::robinhood(&layout);
        assert_eq!(s.entries(), layout.segments());
        for i in 0..1000 {
            let key = Key::new(1, i);
            assert_eq!(s.locate(&key).0, layout.segment_of(layout.home_slot(&key)));
        }
    }
}
