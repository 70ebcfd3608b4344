//! The NIC index (Xenic §4.1.3): everything the NIC runtime knows about the
//! host table without reading it, organised as one **index entry per host
//! segment**.
//!
//! Index entry `i` describes host segment `i` (Robinhood: home slots
//! `i * segment_slots ..`, i.e. `segment = home >> log2(segment_slots)`; DLHT:
//! the `i`-th of `2^b` equal ranges of the key hash, see
//! [`cache::Segmentation`]). Its parts live in parallel arrays indexed by `i`:
//!
//! - `cache.entries[i]` — a [`cache::SegmentEntry`] (32 B): a fixed set of
//!   [`cache::SEGMENT_CACHE_POSITIONS`] = 4 inline cache positions of objects
//!   of this segment, and a chain of overflow pages of
//!   [`cache::OVERFLOW_PAGE_POSITIONS`] = 8 positions from a shared,
//!   preallocated page pool. Each cached object carries its version metadata
//!   and its pin (objects written by committed but not yet applied
//!   transactions are pinned, Xenic §4.2 steps 6–7). The cache is bounded by a
//!   global object capacity (`cache_objects`), kept by ScaleStore's
//!   epoch-based LRU with sampling eviction (ScaleStore §4.1); see [`cache`].
//! - `hints[i]` — the known displacement d_i and the segment's overflow
//!   address ([`hints::SegmentHints`], 6 B), which let a [`robinhood_lookup`] find a key
//!   in the host table with one DMA read in the common case. They stay a
//!   separate array because the lookup state machine and the host-side lookup
//!   report use them without a cache; the DLHT has no displacement, so its
//!   index has no hints.
//!
//! Lock metadata of keys in active transactions (held only here, Xenic §4.2.1
//! (a)) is a hashed map beside the entries: a lock may be taken on a key that
//! is not cached, and keeping locks out of the positions keeps the capacity
//! bound and eviction free of lock state. Commit stamps that guard clean cache
//! fills are [`STAMP_BUCKETS`] counters by hash.

pub mod cache;
pub mod dlht_lookup;
pub mod hints;
pub mod robinhood_lookup;

use crate::dma::DmaRead;
use cache::{CacheStats, ObjectCache, PagePoolStats, Segmentation};
use dlht_lookup::DlhtLookup;
use hints::SegmentHints;
pub use robinhood_lookup::LookupError;
use robinhood_lookup::RobinhoodLookup;
use splitkv_layout::robinhood_layout::TableLayout;
use splitkv_layout::{FixedState, Key, ObjectMeta, TxId};

/// Which host table a node keeps its data in: the one table-kind enum of
/// splitkv (the host re-exports it as `splitkv_host::table::TableKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TableKind {
    /// Xenic's Robinhood table (Xenic §4.1.2).
    #[default]
    Robinhood,
    /// Dandelion's DLHT (Dandelion §6).
    Dlht,
}

/// What the NIC runtime finds in host memory when it reads the host table by
/// DMA: the table's kind and, for the Robinhood table, its layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostTableLayout {
    /// Xenic's Robinhood table (Xenic §4.1.2) with this layout.
    Robinhood(TableLayout),
    /// Dandelion's DLHT (Dandelion §6), read through its DMA address space.
    Dlht,
}

impl HostTableLayout {
    /// The table's kind.
    pub fn kind(&self) -> TableKind {
        match self {
            HostTableLayout::Robinhood(_) => TableKind::Robinhood,
            HostTableLayout::Dlht => TableKind::Dlht,
        }
    }
}

/// Buckets of the commit stamps that guard clean cache fills.
pub const STAMP_BUCKETS: usize = 4096;

/// A host-table lookup of either kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableLookup {
    /// In a Robinhood table.
    Robinhood(RobinhoodLookup),
    /// In a DLHT.
    Dlht(DlhtLookup),
}

/// What a [`TableLookup`] needs next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next<'a> {
    /// Issue this DMA vector (first `n` elements) and feed its bytes.
    Read([DmaRead; 2], usize),
    /// Found.
    Found {
        /// Metadata.
        meta: ObjectMeta,
        /// Value, borrowed from the bytes just fed.
        value: &'a [u8],
    },
    /// Not in the table.
    Absent,
    /// Failed.
    Failed(LookupError),
}

impl Next<'static> {
    /// A read of one element: `len` bytes at byte `offset`.
    pub fn single_read(offset: usize, len: usize) -> Next<'static> {
        Next::Read([DmaRead { offset, len }, DmaRead::default()], 1)
    }
}

impl TableLookup {
    /// Starts a lookup of `key` in the host table `index` describes.
    pub fn start(index: &NicIndex, key: Key) -> (TableLookup, Next<'static>) {
        match index.kind {
            HostTableLayout::Robinhood(layout) => {
                let (l, s) = RobinhoodLookup::start(&layout, &index.hints, key);
                (TableLookup::Robinhood(l), s)
            }
            HostTableLayout::Dlht => {
                let (l, s) = DlhtLookup::start(key, index.dlht_bins);
                (TableLookup::Dlht(l), s)
            }
        }
    }

    /// Feeds the bytes of the last read.
    pub fn advance<'a>(&mut self, index: &mut NicIndex, data: &'a [u8]) -> Next<'a> {
        match (self, index.kind) {
            (TableLookup::Robinhood(l), HostTableLayout::Robinhood(layout)) => {
                l.advance(&layout, &mut index.hints, data)
            }
            (TableLookup::Dlht(l), HostTableLayout::Dlht) => {
                let step = l.advance(data);
                index.dlht_bins = l.bin_count();
                step
            }
            _ => Next::Failed(LookupError::Torn),
        }
    }

    /// The host refused the last read as stale (a resize): start over.
    pub fn restart(&mut self, index: &NicIndex) -> Next<'static> {
        match self {
            TableLookup::Robinhood(l) => {
                let (fresh, s) = RobinhoodLookup::start(
                    match &index.kind {
                        HostTableLayout::Robinhood(layout) => layout,
                        HostTableLayout::Dlht => return Next::Failed(LookupError::Torn),
                    },
                    &index.hints,
                    l.key(),
                );
                *l = fresh;
                s
            }
            TableLookup::Dlht(l) => l.restart(),
        }
    }
}

pub use cache::{CachedObject, PIN_PENDING};

/// Default cache capacity in objects.
pub const CACHE_OBJECTS_DEFAULT: usize = 1 << 16;
/// Default accesses per cache epoch.
pub const CACHE_EPOCH_ACCESSES_DEFAULT: u64 = 4096;

/// Lock, cache and hint metadata of one node's NIC runtime: one index entry
/// per host segment (cache positions and hints), plus locks and commit stamps.
#[derive(Debug)]
pub struct NicIndex {
    kind: HostTableLayout,
    dlht_bins: usize,
    locks: hashbrown::HashMap<Key, TxId, FixedState>,
    /// Keys whose READABLE bit a Dnl Replicate lowered at this backup, with
    /// the transaction that lowered it last (the spec's `nr[n][k]`,
    /// Dandelion §4.3); absent = readable.
    unreadable: hashbrown::HashMap<Key, TxId, FixedState>,
    cache: ObjectCache,
    hints: SegmentHints,
    segment_commits: Vec<u32>,
    /// What [`NicIndex::new`] was given, for [`NicIndex::fresh`].
    cache_objects: usize,
    seed: u64,
}

impl NicIndex {
    /// An empty index for a host table of `kind`, caching at most
    /// `cache_objects` objects (more only while all cached objects are pinned).
    pub fn new(kind: HostTableLayout, cache_objects: usize, seed: u64) -> NicIndex {
        NicIndex {
            kind,
            dlht_bins: 0,
            locks: hashbrown::HashMap::with_hasher(FixedState),
            unreadable: hashbrown::HashMap::with_hasher(FixedState),
            cache: ObjectCache::new(
                match kind {
                    HostTableLayout::Robinhood(layout) => Segmentation::robinhood(&layout),
                    HostTableLayout::Dlht => Segmentation::hash_range_for(cache_objects),
                },
                cache_objects,
                CACHE_EPOCH_ACCESSES_DEFAULT,
                seed,
            ),
            hints: match kind {
                HostTableLayout::Robinhood(layout) => SegmentHints::new(&layout),
                HostTableLayout::Dlht => SegmentHints::none(),
            },
            segment_commits: vec![0; STAMP_BUCKETS],
            cache_objects,
            seed,
        }
    }

    /// An empty index like this one (same host table, capacity and seed):
    /// what a restarted NIC runtime starts from (the NIC restart after a
    /// NIC-runtime-only crash). Everything here is volatile (module docs):
    /// locks come back from their coordinators (`recovery::restart`), cached
    /// objects and versions from the host table by DMA as keys are read again,
    /// and the displacement hints d_i are learnt again by the lookups, which
    /// start from d_i = 0 and read further on a miss (Xenic §4.1.3), so a lost
    /// hint costs a longer read, never a wrong one.
    pub fn fresh(&self) -> NicIndex {
        NicIndex::new(self.kind, self.cache_objects, self.seed)
    }

    /// The kind of host table this index describes.
    pub fn kind(&self) -> HostTableLayout {
        self.kind
    }

    /// Locks `key` for `tx_id` (no-wait). True if now held by `tx_id`.
    #[inline]
    pub fn try_lock(&mut self, key: Key, tx_id: TxId) -> bool {
        *self.locks.entry(key).or_insert(tx_id) == tx_id
    }

    /// Releases `key` if `tx_id` holds it; true if it did.
    #[inline]
    pub fn unlock(&mut self, key: &Key, tx_id: TxId) -> bool {
        match self.locks.get(key) {
            Some(&h) if h == tx_id => {
                self.locks.remove(key);
                true
            }
            _ => false,
        }
    }

    /// Releases every lock whose holder `release` picks (crash recovery)
    /// and appends each released `(key, holder)` to `out`.
    pub fn unlock_where(
        &mut self,
        mut release: impl FnMut(TxId) -> bool,
        out: &mut Vec<(Key, TxId)>,
    ) {
        self.locks.retain(|k, &mut h| {
            let keep = !release(h);
            if !keep {
                out.push((*k, h));
            }
            keep
        });
    }

    /// The transaction holding `key`'s lock.
    #[inline]
    pub fn lock_holder(&self, key: &Key) -> Option<TxId> {
        self.locks.get(key).copied()
    }

    /// Locks currently held.
    pub fn locks_held(&self) -> usize {
        self.locks.len()
    }

    /// Lowers `key`'s READABLE bit on behalf of `tx_id` (a Dnl Replicate at
    /// a backup, TLA `Replicate`; Dandelion §4.3): a later lowering by
    /// another transaction replaces it, as the spec's `nr` does.
    #[inline]
    pub fn lower_readable(&mut self, key: Key, tx_id: TxId) {
        self.unreadable.insert(key, tx_id);
    }

    /// Raises `key`'s READABLE bit if `tx_id` lowered it last (a Dnl
    /// Readable, TLA `Readable`); true if it did.
    #[inline]
    pub fn raise_readable(&mut self, key: &Key, tx_id: TxId) -> bool {
        match self.unreadable.get(key) {
            Some(&h) if h == tx_id => {
                self.unreadable.remove(key);
                true
            }
            _ => false,
        }
    }

    /// Raises every READABLE bit `tx_id` lowered last and appends those
    /// keys to `out` (crash recovery decided `tx_id`; TLA `Crash` clears
    /// `nr`). Linear in the keys lowered now.
    pub fn raise_readable_of(&mut self, tx_id: TxId, out: &mut Vec<Key>) {
        self.unreadable.retain(|k, h| {
            let raise = *h == tx_id;
            if raise {
                out.push(*k);
            }
            !raise
        });
    }

    /// Whether `key` may serve reads here: its READABLE bit is up.
    #[inline]
    pub fn is_readable(&self, key: &Key) -> bool {
        self.unreadable.is_empty() || !self.unreadable.contains_key(key)
    }

    /// The transaction that lowered `key`'s READABLE bit, if it is down.
    #[inline]
    pub fn unreadable_by(&self, key: &Key) -> Option<TxId> {
        self.unreadable.get(key).copied()
    }

    /// Prefetches `key`'s segment entry: call for every key of a request
    /// before looking any up, so that their cache misses overlap.
    #[inline]
    pub fn prefetch(&self, key: &Key) {
        self.cache.prefetch(key);
    }

    /// The cached object of `key` (an access for the LRU).
    #[inline]
    pub fn cached(&mut self, key: &Key) -> Option<&CachedObject> {
        self.cache.get(key)
    }

    /// The cached object of `key`, without counting an access.
    #[inline]
    pub fn peek(&self, key: &Key) -> Option<&CachedObject> {
        self.cache.peek(key)
    }

    fn segment(&self, key: &Key) -> usize {
        (key.hash64() >> 52) as usize % STAMP_BUCKETS
    }

    /// A stamp to pass to [`NicIndex::cache_clean`] for a host read of `key`
    /// started now.
    #[inline]
    pub fn read_stamp(&self, key: &Key) -> u32 {
        self.segment_commits[self.segment(key)]
    }

    /// Caches an object read from host memory, unless a commit to its stamp
    /// bucket happened since the read started (`stamp` from [`NicIndex::read_stamp`]):
    /// then the host copy may be older than what the NIC already dropped.
    pub fn cache_clean(&mut self, key: Key, meta: ObjectMeta, value: &[u8], stamp: u32) {
        if self.segment_commits[self.segment(&key)] == stamp {
            self.cache.insert_clean(key, meta, value);
        }
    }

    /// Installs a committed (or replicated) write, pinned until the host
    /// applies it; returns false (nothing changed) if a newer version of `key`
    /// is cached: a version never moves backwards.
    pub fn install_committed(&mut self, key: Key, meta: ObjectMeta, value: &[u8]) -> bool {
        let s = self.segment(&key);
        self.segment_commits[s] = self.segment_commits[s].wrapping_add(1);
        self.cache.install_committed(key, meta, value)
    }

    /// Drops the cached objects whose key `drop` picks (crash recovery:
    /// see [`ObjectCache::forget_where`]); host reads in flight
    /// will not cache what they return. Returns the objects dropped.
    pub fn forget_where(&mut self, drop: impl FnMut(&Key) -> bool) -> usize {
        self.segment_commits
            .iter_mut()
            .for_each(|c| *c = c.wrapping_add(1));
        self.cache.forget_where(drop)
    }

    /// Drops `key`'s cached object (see [`NicIndex::forget_where`]);
    /// returns whether one was cached.
    pub fn forget(&mut self, key: &Key) -> bool {
        let s = self.segment(key);
        self.segment_commits[s] = self.segment_commits[s].wrapping_add(1);
        self.cache.forget(key)
    }

    /// The write of `key` at `version` is in the host log before `pos`.
    pub fn set_pin(&mut self, key: Key, version: u64, pos: u64) {
        self.cache.set_pin(key, version, pos);
    }

    /// The host applied its log up to `applied`; returns objects unpinned.
    pub fn unpin_applied(&mut self, applied: u64) -> usize {
        self.cache.unpin_applied(applied)
    }

    /// Objects cached.
    pub fn cached_objects(&self) -> usize {
        self.cache.len()
    }

    /// Objects pinned by unapplied writes.
    pub fn pinned_objects(&self) -> usize {
        self.cache.pinned()
    }

    /// Cache counters.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// Overflow-page accounting of the segment entries.
    pub fn cache_page_pool(&self) -> PagePoolStats {
        self.cache.page_pool()
    }

    /// The object cache (segment entries, pages, slab), for checks.
    pub fn cache(&self) -> &ObjectCache {
        &self.cache
    }

    /// The location hints.
    pub fn hints(&self) -> &SegmentHints {
        &self.hints
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use splitkv_layout::robinhood_layout::TableConfig;

    fn index() -> NicIndex {
        NicIndex::new(
            HostTableLayout::Robinhood(TableLayout::new(&TableConfig::new(1000, 8)).unwrap()),
            100,
            1,
        )
    }

    #[test]
    fn a_fresh_index_forgets_everything_volatile() {
        let mut ix = index();
        let k = Key::new(0, 3);
        assert!(ix.try_lock(k, TxId::from_bits(9)));
        ix.install_committed(k, ObjectMeta(4), b"v");
        let f = ix.fresh();
        assert_eq!((f.locks_held(), f.cached_objects()), (0, 0));
        assert_eq!(f.lock_holder(&k), None);
        assert_eq!(f.kind(), ix.kind());
        assert_eq!(f.hints().segments(), ix.hints().segments());
    }

    #[test]
    fn locks_are_no_wait_and_owned() {
        let mut ix = index();
        let k = Key::new(0, 1);
        assert!(ix.try_lock(k, TxId::from_bits(1)));
        assert!(ix.try_lock(k, TxId::from_bits(1)), "re-lock by holder");
        assert!(!ix.try_lock(k, TxId::from_bits(2)));
        assert!(
            !ix.unlock(&k, TxId::from_bits(2)),
            "only the holder unlocks"
        );
        assert!(ix.unlock(&k, TxId::from_bits(1)));
        assert!(ix.try_lock(k, TxId::from_bits(2)));
        assert_eq!(ix.locks_held(), 1);
    }

    #[test]
    fn entries_follow_the_host_table() {
        let layout = TableLayout::new(&TableConfig::new(1000, 8)).unwrap();
        let rh = NicIndex::new(HostTableLayout::Robinhood(layout), 100, 1);
        assert_eq!(rh.cache().entries(), layout.segments());
        assert_eq!(rh.hints().segments(), layout.segments());
        // The DLHT has no segments: hash ranges, one entry per two objects.
        let mut dl = NicIndex::new(HostTableLayout::Dlht, 256, 1);
        assert_eq!(dl.cache().entries(), 128);
        assert_eq!(dl.hints().segments(), 0);
        for i in 0..2_000u64 {
            let k = Key::new((i % 2) as u32, i);
            let s = dl.read_stamp(&k);
            dl.cache_clean(k, ObjectMeta(1), &i.to_le_bytes(), s);
            assert!(dl.cached_objects() <= 256);
        }
        assert!(dl.cache_stats().evictions >= 2_000 - 256);
        dl.cache().check_invariants().unwrap();
        let kept = (0..2_000u64)
            .filter(|&i| {
                dl.peek(&Key::new((i % 2) as u32, i))
                    .is_some_and(|o| o.value == i.to_le_bytes())
            })
            .count();
        assert_eq!(
            kept,
            dl.cached_objects(),
            "every cached key has its own value"
        );
    }

    #[test]
    fn clean_reads_racing_a_commit_are_not_cached() {
        let mut ix = index();
        let k = Key::new(0, 7);
        let stamp = ix.read_stamp(&k);
        ix.install_committed(k, ObjectMeta(5), b"new");
        ix.set_pin(k, 5, 10);
        ix.unpin_applied(10);
        // The commit was applied and unpinned; a DMA read started before it may be stale.
        ix.cache_clean(Key::new(0, 7), ObjectMeta(4), b"old", stamp);
        assert_eq!(ix.peek(&k).unwrap().value, b"new");
        let other = Key::new(1, 99);
        let s = ix.read_stamp(&other);
        ix.cache_clean(other, ObjectMeta(1), b"x", s);
        assert!(ix.peek(&other).is_some() || ix.segment(&other) == ix.segment(&k));
    }
}
