//! Segment entries and overflow pages of the NIC object cache (Xenic
//! §4.1.3): how keys map to entries ([`Segmentation`]), the inline and
//! overflow positions of an entry, and the position-level operations of
//! [`ObjectCache`] (find, insert, remove with dense positions, page links).
//! See the parent module's docs for the shape and its bounds.

use super::{ObjectCache, NONE, OBJECTS_PREALLOCATED_MAX};
use super::{OVERFLOW_PAGE_POSITIONS, SEGMENT_CACHE_POSITIONS, UNPINNED};
use splitkv_layout::robinhood_layout::TableLayout;
use splitkv_layout::{Key, ObjectMeta};

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
pub(super) struct Page<const N: usize> {
    pub(super) tags: [u8; N],
    pub(super) handles: [u32; N],
}

impl<const N: usize> Page<N> {
    pub(super) const EMPTY: Page<N> = Page {
        tags: [0; N],
        handles: [NONE; N],
    };

    /// Bit 8i+7 set for each of the first `n` positions whose tag is `tag`.
    #[inline]
    pub(super) fn matches(&self, tag: u8, n: usize) -> u64 {
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
pub(super) type InlinePage = Page<SEGMENT_CACHE_POSITIONS>;
/// The positions of an overflow page.
pub(super) type PoolPage = Page<OVERFLOW_PAGE_POSITIONS>;

/// Where position `p` of an entry is: page number (0: inline, then the
/// overflow pages in chain order) and index within the page.
#[inline]
pub(super) fn page_of(p: usize) -> (usize, usize) {
    if p < SEGMENT_CACHE_POSITIONS {
        (0, p)
    } else {
        let q = p - SEGMENT_CACHE_POSITIONS;
        (1 + q / OVERFLOW_PAGE_POSITIONS, q % OVERFLOW_PAGE_POSITIONS)
    }
}

/// An overflow page from the shared pool: positions and the next page.
#[derive(Debug, Clone, Copy)]
pub(super) struct OverflowPage {
    pub(super) page: PoolPage,
    pub(super) next: u32,
}

/// The cache part of the NIC index entry of one host segment (Xenic §4.1.3):
/// [`SEGMENT_CACHE_POSITIONS`] inline positions and a chain of overflow pages.
/// Positions `0..len` are in use. 32 bytes, aligned, so that a lookup reads one
/// line of the entry array.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(32))]
pub struct SegmentEntry {
    pub(super) inline: InlinePage,
    pub(super) len: u32,
    pub(super) overflow_head: u32,
}

impl SegmentEntry {
    pub(super) const EMPTY: SegmentEntry = SegmentEntry {
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
    pub(super) fn pages_needed(len: usize) -> usize {
        len.saturating_sub(SEGMENT_CACHE_POSITIONS)
            .div_ceil(OVERFLOW_PAGE_POSITIONS)
    }
}

const _: () = assert!(std::mem::size_of::<SegmentEntry>() == 32);
const _: () = assert!(std::mem::size_of::<OverflowPage>() == 44);

impl ObjectCache {
    /// The overflow page number `page_no` (≥ 1) of `entry`'s chain.
    #[inline]
    pub(super) fn pool_page(&self, entry: usize, page_no: usize) -> usize {
        let mut p = self.entries[entry].overflow_head;
        for _ in 1..page_no {
            p = self.pages[p as usize].next;
        }
        p as usize
    }

    /// Tag and handle at position `p` of `entry`.
    pub(super) fn position(&self, entry: usize, p: usize) -> (u8, u32) {
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
    pub(super) fn set_position(&mut self, entry: usize, p: usize, tag: u8, handle: u32) {
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
    pub(super) fn find(&self, key: &Key) -> Option<usize> {
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

    /// Adds `key` (not cached) to its segment entry; returns its handle.
    pub(super) fn insert_new(&mut self, key: Key, meta: ObjectMeta) -> usize {
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
    pub(super) fn link_page(&mut self, entry: usize, position: usize) {
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
    pub(super) fn remove(&mut self, h: usize) {
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
    pub(super) fn unlink_last_page(&mut self, entry: usize, page_no: usize) {
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
