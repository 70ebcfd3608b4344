//! DLHT, the Dandelion hash table (Dandelion §6): closed addressing with bounded
//! cache-line chaining, lock-free Get/Put/Insert/Delete, deletes that free their
//! slot at once, a non-blocking resize, small values inline, and a batch API
//! that prefetches every request's bin before executing any.
//!
//! # Layout
//!
//! A bin is one 64-byte line: a header word (a version plus a 2-bit state per
//! chain slot), a tags word, and two slots of three words each — key id,
//! [`ObjectMeta`], value word. A chain is a bin plus at most
//! [`LINK_BUCKETS_PER_BIN_MAX`] link buckets of the same shape, so a key is
//! `(table: u32, id: u64)` stored as a 12-bit table id (in the tag) and the full
//! id; tables above [`TABLE_ID_MAX`] are refused with
//! [`DlhtError::KeyOutOfRange`]. Values of up to 8 bytes live in the value word;
//! longer ones (up to [`DLHT_VALUE_BYTES_MAX`]) in a separate record the value word
//! points to. A Get of a key in its bin reads one cache line (plus the record
//! for a long value). The byte format is `splitkv_layout::dlht_layout`.
//!
//! # Concurrency
//!
//! Every slot change is one CAS of the chain's header (`bin.rs`); readers read
//! header, slot, header and retry if it changed (the header's 30-bit version
//! would have to wrap exactly during one read to fool them). A resize moves
//! bins into a new generation, twice as large or (to reclaim link buckets) the
//! same size, while operations go on (`resize.rs`). Records and old
//! generations are freed through `crossbeam-epoch`. All atomics come from
//! `table/sync.rs`, so `scripts/loom` model-checks this code with loom.
//!
//! A write searches the chain under header `h` and reserves a free slot with a
//! CAS from `h`, which validates the search; if the header is still the one
//! its reservation produced, it publishes with a second CAS without searching
//! again (`Dlht::write_at`). The key count is striped per thread, so writers on
//! different threads do not contend on one counter line, and the generation
//! pointer every operation reads sits on a line of its own.
//!
//! Progress: Gets never wait. Writes are lock-free with two exceptions, both
//! waits on another thread's short step rather than on a lock: a write that
//! finds no room while another thread allocates the next generation waits for
//! that allocation, and a thread copying a bin into a destination chain whose
//! every free slot (or every link bucket the copies may use) is held by other
//! copiers waits for one of them.
//!
//! Link buckets come from a fixed pool per generation (`pool.rs`): a resize
//! keeps enough of the new pool for its copies (a bound proved there), writes
//! into bins already moved use only the rest, and a thread that loses the
//! race to install a link bucket gives it back, so a resize never runs out.
//!
//! # Memory and DMA readers
//!
//! Bins are not kept in a `splitkv_layout::Region`: a resize replaces the whole
//! bin array, and loom needs its own atomic type. Each generation is one
//! 64-byte aligned array of bins and one of link buckets, in the byte format of
//! `splitkv_layout::dlht_layout`. A DMA reader gets the current arrays' host
//! addresses and sizes from [`Dlht::dma_view`], reads bin `bin_index(key, bins)`
//! at `bins_addr + 64 * bin` (link bucket `i` at `links_addr + 64 * i`), reads the
//! header again to validate its copy, and fetches a new view when it finds the
//! bin `Moved`. [`Dlht::copy_bin`] and [`Dlht::copy_link`] perform such reads.

mod access;
mod batch;
mod bin;
pub mod dma;
mod iter;
mod pool;
mod resize;
#[cfg(all(test, not(loom)))]
mod tests;
mod value;
mod write;

pub use batch::{Request, BATCH_CHUNK_MAX};
pub use iter::Iter;
pub use splitkv_layout::dlht_layout::{
    DLHT_VALUE_BYTES_MAX, DLHT_VALUE_INLINE_BYTES_MAX, LINK_BUCKETS_PER_BIN_MAX, TABLE_ID_MAX,
};

use super::Upserted;
use crate::table::sync::{
    self, pin, AtomicIsize, AtomicPtr, AtomicUsize, Guard, Ordering, Retired,
};
use bin::Gen;
use crossbeam::utils::CachePadded;
use resize::GrowCause;
use splitkv_layout::dlht_layout::{
    header, tags, word_meta, word_value, LEN_CODE_OUT_OF_LINE, LINE_BYTES, SLOTS_PER_LINE,
    WORD_TAGS,
};
use splitkv_layout::{Key, ObjectMeta};
use write::{Mode, Wrote};

/// Keys per bin (on average) above which an insert starts a resize: 5/2.
pub const LOAD_KEYS_PER_BIN_MAX_NUM: usize = 5;
/// Denominator of the load bound (see [`LOAD_KEYS_PER_BIN_MAX_NUM`]).
pub const LOAD_KEYS_PER_BIN_MAX_DEN: usize = 2;
/// Twice the load (keys per bin) up to which an exhausted link pool leads to a
/// same-size rehash (which returns unused link buckets) rather than doubling:
/// 3/2 keys per bin.
pub const REHASH_LOAD_KEYS_PER_BIN_MAX_NUM: usize = 3;
/// Default bound on the number of bins (2^31 bins = 128 GiB of bins).
pub const BINS_MAX_DEFAULT: usize = 1 << 31;

/// Errors of DLHT writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DlhtError {
    /// The value is longer than [`DLHT_VALUE_BYTES_MAX`].
    #[error("value of {len} B exceeds the DLHT maximum of {max} B")]
    ValueTooLarge {
        /// Value length in bytes.
        len: usize,
        /// The bound in bytes.
        max: usize,
    },
    /// The key's table id does not fit a slot tag (more than [`TABLE_ID_MAX`]).
    #[error("key table id {table} exceeds the DLHT maximum {max}")]
    KeyOutOfRange {
        /// The key's table id.
        table: u32,
        /// The largest storable table id.
        max: u32,
    },
    /// No room for the key and no way to make it: its chain is at its bound
    /// ([`LINK_BUCKETS_PER_BIN_MAX`] link buckets, no free slot), or the link
    /// pool is used up at a load above the load bound, and the table cannot
    /// double without passing its bin bound.
    #[error(
        "DLHT full: chain or link pool exhausted and the table is at its bound of {bins_max} bins"
    )]
    Full {
        /// The configured bin bound.
        bins_max: usize,
    },
}

/// How to size a [`Dlht`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DlhtConfig {
    /// Keys the table should hold before its first resize; the table starts
    /// with `next_power_of_two(ceil(capacity_keys / 2))` bins (at least 1).
    pub capacity_keys: usize,
    /// The table never grows past this many bins (rounded down to a power of
    /// two); beyond it, writes that find no room fail with [`DlhtError::Full`].
    pub bins_max: usize,
}

impl Default for DlhtConfig {
    fn default() -> DlhtConfig {
        DlhtConfig {
            capacity_keys: 1024,
            bins_max: BINS_MAX_DEFAULT,
        }
    }
}

/// Where the current generation's lines are in host memory (for a DMA reader;
/// see the module docs). The addresses stay valid only while this generation
/// is current: once a resize completes, the old arrays are freed as soon as no
/// pinned host thread can still read them, and a DMA reader holds no pin. A
/// DMA user must fetch a new view when it finds a `Moved` bin and must not read
/// through a view across a completed resize (this table does not yet make DMA
/// readers wait for reclamation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaView {
    /// Host address of bin 0; bin `b` is at `bins_addr + 64 * b`.
    pub bins_addr: usize,
    /// Number of bins (a power of two).
    pub bin_count: usize,
    /// Host address of link bucket 0 (unused); bucket `i` is at `links_addr + 64 * i`.
    pub links_addr: usize,
    /// Number of link-bucket lines in the pool, including the unused line 0.
    pub link_lines: usize,
}

/// The Dandelion hash table (Dandelion §6). `Send + Sync`; every operation
/// takes `&self`; see the module docs for the layout, the progress guarantees
/// and the bounds.
pub struct Dlht {
    /// Read by every operation: kept on a line of its own (with the fields
    /// that never change), away from the counters that writers update.
    hot: CachePadded<Hot>,
    len: LenStripes,
    record_bytes: AtomicUsize,
    resizes: AtomicUsize,
    retired: Retired,
}

/// The fields every operation reads.
struct Hot {
    current: AtomicPtr<Gen>,
    bins_max: usize,
}

/// Stripes of the key count: a thread adds to its own stripe (threads are
/// spread over the stripes round robin), so inserts and deletes on different
/// threads do not fight over one counter line. [`Dlht::len`] sums them.
const LEN_STRIPES: usize = 8;
/// Above this load bound (keys), an insert compares the summed count with the
/// bound only when its own stripe reaches a multiple of
/// [`LEN_CHECK_EVERY_INSERTS`]; at or below it, after every insert. The bound
/// is a growth trigger, not a capacity limit (a full chain or link pool also
/// grows the table), so being late by up to `LEN_STRIPES ·
/// LEN_CHECK_EVERY_INSERTS` keys (at most 1/16 of the bound) is harmless.
const LEN_EXACT_CHECK_LIMIT_MAX: usize = 8192;
/// See [`LEN_EXACT_CHECK_LIMIT_MAX`] (a power of two).
const LEN_CHECK_EVERY_INSERTS: usize = 64;

struct LenStripes {
    stripes: [CachePadded<AtomicIsize>; LEN_STRIPES],
}

impl LenStripes {
    fn new() -> LenStripes {
        LenStripes {
            stripes: std::array::from_fn(|_| CachePadded::new(AtomicIsize::new(0))),
        }
    }

    /// Adds `delta` to this thread's stripe; returns the stripe's new value.
    #[inline]
    fn add(&self, delta: isize) -> isize {
        self.stripes[sync::thread_stripe(LEN_STRIPES)].fetch_add(delta, Ordering::Relaxed) + delta
    }

    /// The sum of all stripes (exact when no write is in flight).
    fn sum(&self) -> isize {
        self.stripes.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }
}

impl std::fmt::Debug for Dlht {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dlht")
            .field("len", &self.len())
            .field("bins", &self.bin_count())
            .finish()
    }
}

impl Dlht {
    /// A table sized for `capacity_keys` keys before its first resize (see
    /// [`DlhtConfig::capacity_keys`]), with the default bin bound.
    pub fn with_capacity(capacity_keys: usize) -> Dlht {
        Dlht::with_config(DlhtConfig {
            capacity_keys,
            ..DlhtConfig::default()
        })
    }

    /// A table with explicit sizing.
    ///
    /// # Panics
    /// If `bins_max` is 0.
    pub fn with_config(cfg: DlhtConfig) -> Dlht {
        assert!(cfg.bins_max > 0, "bins_max must be positive");
        let bins_max = 1usize << (usize::BITS - 1 - cfg.bins_max.leading_zeros());
        let bins = cfg
            .capacity_keys
            .div_ceil(SLOTS_PER_LINE)
            .max(1)
            .checked_next_power_of_two()
            .unwrap_or(bins_max)
            .min(bins_max);
        Dlht {
            hot: CachePadded::new(Hot {
                current: AtomicPtr::new(Box::into_raw(Box::new(Gen::new(bins, None)))),
                bins_max,
            }),
            len: LenStripes::new(),
            record_bytes: AtomicUsize::new(0),
            resizes: AtomicUsize::new(0),
            retired: Retired::default(),
        }
    }

    #[inline]
    fn current<'g>(&self, _guard: &'g Guard) -> &'g Gen {
        // SAFETY: `current` always points to a live generation; one that is
        // replaced is retired through the epoch reclaimer, so it stays alive while
        // `_guard` (taken before this load) is.
        unsafe { &*self.hot.current.load(Ordering::Acquire) }
    }

    /// Looks `key` up. On a hit, returns its metadata and replaces the contents
    /// of `value_out` with the value; on a miss returns `None` and leaves
    /// `value_out` empty. Never allocates (beyond growing `value_out`).
    pub fn get(&self, key: &Key, value_out: &mut Vec<u8>) -> Option<ObjectMeta> {
        value_out.clear();
        if key.table > TABLE_ID_MAX {
            return None;
        }
        let guard = pin();
        let g = self.current(&guard);
        self.get_at(g, g.bin_of(key), key, value_out)
    }

    /// Inserts `key` if absent. Returns `Ok(false)` (and changes nothing) if it
    /// is present.
    ///
    /// # Errors
    /// [`DlhtError::KeyOutOfRange`], [`DlhtError::ValueTooLarge`],
    /// [`DlhtError::Full`].
    pub fn insert(&self, key: Key, meta: ObjectMeta, value: &[u8]) -> Result<bool, DlhtError> {
        Ok(self.write(key, meta, value, Mode::Insert)? == Wrote::Inserted)
    }

    /// Replaces the metadata and value of `key` if present. Returns `Ok(false)`
    /// (and changes nothing) if it is absent. The new version is written into a
    /// free slot of the chain and swapped in with one CAS.
    ///
    /// # Errors
    /// As [`Dlht::insert`] (`Full` only if the chain has no free slot for the
    /// new copy and the table cannot grow).
    pub fn put(&self, key: Key, meta: ObjectMeta, value: &[u8]) -> Result<bool, DlhtError> {
        Ok(self.write(key, meta, value, Mode::Update)? == Wrote::Updated)
    }

    /// Inserts or replaces `key`. Returns `Ok(true)` if it was inserted,
    /// `Ok(false)` if an existing entry was replaced.
    ///
    /// # Errors
    /// As [`Dlht::insert`].
    pub fn upsert(&self, key: Key, meta: ObjectMeta, value: &[u8]) -> Result<bool, DlhtError> {
        Ok(self.write(key, meta, value, Mode::Upsert)? == Wrote::Inserted)
    }

    /// Inserts `key`, or replaces it if the stored version is older than
    /// `meta.version()`; a stored version at least as new is left alone and
    /// returned as [`Upserted::Stale`]. One lookup: the version check and the
    /// write are validated by the same header word, so the whole operation is
    /// atomic even with other writers (the host log worker applies replicated
    /// records with it; same contract as `RobinhoodTable::upsert_if_newer`).
    ///
    /// # Errors
    /// As [`Dlht::insert`]; a stale write is not an error, even with a value
    /// that is too large.
    pub fn upsert_if_newer(
        &self,
        key: Key,
        meta: ObjectMeta,
        value: &[u8],
    ) -> Result<Upserted, DlhtError> {
        Ok(match self.write(key, meta, value, Mode::UpsertIfNewer)? {
            Wrote::Inserted => Upserted::Inserted,
            Wrote::Updated => Upserted::Updated,
            Wrote::Stale(stored) => Upserted::Stale(stored),
            Wrote::Unchanged => unreachable!("an upsert always writes or is stale"),
        })
    }

    /// Deletes `key`; its slot is free for reuse as soon as this returns.
    /// Returns whether it was present.
    pub fn remove(&self, key: &Key) -> bool {
        if key.table > TABLE_ID_MAX {
            return false;
        }
        let guard = pin();
        let g = self.current_helped(&guard);
        self.remove_at(g, g.bin_of(key), key, &guard)
    }

    /// Number of keys (exact when no write is in flight).
    pub fn len(&self) -> usize {
        self.len.sum().max(0) as usize
    }

    /// Whether the table holds no keys.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls `f` with every key, its metadata and its value. Weakly consistent:
    /// each chain is read atomically; keys written during the walk may or may
    /// not be seen; a key present throughout is seen exactly once.
    pub fn for_each(&self, mut f: impl FnMut(Key, ObjectMeta, &[u8])) {
        let guard = pin();
        let g = self.current(&guard);
        let mut buf = Vec::new();
        for b in 0..g.bin_count() {
            iter::visit_bin(g, b, &mut buf, &mut f);
        }
    }

    /// An iterator over `(key, meta, value)` with the guarantees of
    /// [`Dlht::for_each`]. It keeps the current thread pinned (delaying memory
    /// reclamation) until dropped.
    pub fn iter(&self) -> Iter<'_> {
        Iter::new(self)
    }

    /// Bytes of memory the table uses: the bin arrays of the current (and, during
    /// a resize, the next) generation, the link buckets handed out so far, the
    /// out-of-line records, and the table's own structs. Link-pool lines never
    /// handed out are not counted (they are never touched, so the OS does not
    /// back them with memory).
    pub fn memory_bytes(&self) -> usize {
        let guard = pin();
        let mut g = Some(self.current(&guard));
        let mut bytes = std::mem::size_of::<Dlht>() + self.record_bytes.load(Ordering::Relaxed);
        while let Some(gen) = g {
            bytes +=
                std::mem::size_of::<Gen>() + (gen.bin_count() + 1 + gen.links_used()) * LINE_BYTES;
            g = gen.next_gen();
        }
        bytes
    }

    /// Bins in the current generation.
    pub fn bin_count(&self) -> usize {
        let guard = pin();
        self.current(&guard).bin_count()
    }

    /// Resizes completed so far (doublings and same-size rehashes).
    pub fn resizes_completed(&self) -> usize {
        self.resizes.load(Ordering::Relaxed)
    }

    /// Whether a resize has started and not yet completed.
    pub fn resize_in_progress(&self) -> bool {
        let guard = pin();
        self.current(&guard).next_gen().is_some()
    }

    /// Starts doubling the table now, without moving any bin (writers and
    /// [`Dlht::help_resize`] move them). Returns `Ok(false)` if a resize was
    /// already under way.
    ///
    /// # Errors
    /// [`DlhtError::Full`] if doubling would pass the bin bound.
    pub fn begin_resize(&self) -> Result<bool, DlhtError> {
        let guard = pin();
        let g = self.current(&guard);
        if g.next_gen().is_some() {
            return Ok(false);
        }
        Ok(self.grow(g, &guard, true, GrowCause::Explicit)?.is_some())
    }

    /// Starts a rehash into a generation of the same size, which compacts every
    /// chain and returns link buckets that only deleted keys used (the table
    /// also does this by itself when its link pool runs out at a low load).
    /// Bins move as for [`Dlht::begin_resize`]. Returns `Ok(false)` if a resize
    /// was already under way.
    ///
    /// # Errors
    /// None at present; the `Result` matches [`Dlht::begin_resize`].
    pub fn begin_rehash(&self) -> Result<bool, DlhtError> {
        let guard = pin();
        let g = self.current(&guard);
        if g.next_gen().is_some() {
            return Ok(false);
        }
        Ok(self.grow(g, &guard, true, GrowCause::Rehash)?.is_some())
    }

    /// Moves up to `max_chunks` chunks of bins of a resize under way (nothing if
    /// none is). Returns the number of bins this call moved.
    pub fn help_resize(&self, max_chunks: usize) -> usize {
        let guard = pin();
        let g = self.current(&guard);
        if g.next_gen().is_none() {
            return 0;
        }
        self.help_resize_of(g, &guard, max_chunks)
    }

    /// Completes a resize under way (moving every remaining bin) so the new
    /// generation is current when this returns.
    pub fn finish_resize(&self) {
        let guard = pin();
        loop {
            let g = self.current(&guard);
            if g.next_gen().is_none() {
                return;
            }
            self.finish_resize_of(g, &guard);
        }
    }

    /// Where the current generation's lines are, for a DMA reader.
    pub fn dma_view(&self) -> DmaView {
        let guard = pin();
        let g = self.current(&guard);
        DmaView {
            bins_addr: g.bins.as_ptr() as usize,
            bin_count: g.bin_count(),
            links_addr: g.links.as_ptr() as usize,
            link_lines: g.links.len(),
        }
    }

    /// Copies bin `bin` of the current generation into `out`, word by word in
    /// address order, as a DMA read would (no validation: decode with
    /// `splitkv_layout::dlht_layout::decode_bin` and re-read the header).
    /// Returns `false` if `bin` is out of range.
    pub fn copy_bin(&self, bin: usize, out: &mut [u8; LINE_BYTES]) -> bool {
        let guard = pin();
        let g = self.current(&guard);
        match g.bins.get(bin) {
            Some(line) => {
                copy_line(line, out);
                true
            }
            None => false,
        }
    }

    /// Copies link bucket `index` (1-based) of the current generation into
    /// `out`, as [`Dlht::copy_bin`]. Returns `false` if `index` is out of range.
    pub fn copy_link(&self, index: usize, out: &mut [u8; LINE_BYTES]) -> bool {
        let guard = pin();
        let g = self.current(&guard);
        match g.links.get(index).filter(|_| index > 0) {
            Some(line) => {
                copy_line(line, out);
                true
            }
            None => false,
        }
    }

    /// The current generation, after moving one chunk of a resize under way
    /// (every write calls this first).
    #[inline(always)]
    fn current_helped<'g>(&self, guard: &'g Guard) -> &'g Gen {
        let g = self.current(guard);
        if g.next_gen().is_none() {
            return g;
        }
        self.help_resize_of(g, guard, 1);
        self.current(guard)
    }

    /// Frees an out-of-line record once no pinned thread can still read it.
    fn retire_value(&self, len_code: u8, word: u64, guard: &Guard) {
        if len_code != LEN_CODE_OUT_OF_LINE {
            return;
        }
        // SAFETY: the record was live until our CAS made its slot non-valid.
        let bytes = unsafe { value::record_total_bytes(word) };
        self.record_bytes.fetch_sub(bytes, Ordering::Relaxed);
        // SAFETY: our CAS removed the only valid slot pointing at the record
        // (a resize's copies share it, but the old copy is in a dead bin), so
        // threads pinned from now on cannot find it; we are its only retirer.
        unsafe {
            guard.defer_free(&self.retired, move || value::free_record(word));
        }
    }
}

/// Copies a line word by word (Relaxed, increasing address order).
fn copy_line(line: &sync::Line, out: &mut [u8; LINE_BYTES]) {
    for (i, chunk) in out.chunks_exact_mut(8).enumerate() {
        chunk.copy_from_slice(&line.w[i].load(Ordering::Relaxed).to_le_bytes());
    }
}

impl Drop for Dlht {
    fn drop(&mut self) {
        self.finish_resize();
        let p = self.hot.current.load(Ordering::Acquire);
        // SAFETY: `&mut self`: no operation is in flight; `p` is the live current
        // generation, made by `Box::into_raw`, and nothing else frees it.
        let g = unsafe { Box::from_raw(p) };
        for line_b in 0..g.bin_count() {
            let h = g.header(line_b).load(Ordering::Acquire);
            let mut cur = bin::Cursor::new(&g, line_b);
            let mut valid = header::valid_mask(h);
            while valid != 0 {
                let s = valid.trailing_zeros() as usize;
                valid &= valid - 1;
                let Some(line) = cur.line(s / SLOTS_PER_LINE) else {
                    continue;
                };
                let pos = s % SLOTS_PER_LINE;
                let tag = tags::tag(line.w[WORD_TAGS].load(Ordering::Acquire), pos);
                if tags::tag_len_code(tag) == LEN_CODE_OUT_OF_LINE {
                    // SAFETY: the current generation's valid slots own their
                    // records, and no thread can read them any more.
                    unsafe { value::free_record(line.w[word_value(pos)].load(Ordering::Relaxed)) };
                }
            }
        }
        drop(g);
        self.retired.drain();
    }
}
