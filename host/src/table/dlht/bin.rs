//! One table generation and the slot state machine of its bins (Dandelion §6).
//!
//! A chain (a bin and its link buckets) has one header word; every change to
//! any of its slots is one compare-and-swap of that header, which also bumps its
//! version. Slot states (`splitkv_layout::dlht_layout::SlotState`):
//!
//! ```text
//!            reserve (CAS)             publish (CAS)
//!   Empty ─────────────────► Reserved ──────────────► Valid
//!     ▲                         │                       │
//!     └──── abandon (CAS) ◄─────┘                       │
//!     └────────────── delete, or replaced by a Put (CAS) ┘
//! ```
//!
//! - Only the thread that reserved a slot writes its words (tag, key id, meta,
//!   value word), between its reserve and its publish; a `Valid` slot's words
//!   never change, so a reader that sees the same header before and after
//!   reading a `Valid` slot has read one consistent slot (a seqlock in which no
//!   writer ever holds the lock: writers fill slots nobody is reading).
//! - A publish CAS re-checks, against the same header word, that the key is
//!   (insert: not) present, so duplicates cannot appear. A Put writes the new
//!   copy into a fresh slot and, in the same CAS, frees the old one
//!   (copy-on-write), so readers never see a half-written value.
//! - A delete frees its slot in its CAS: no tombstone remains.
//! - A stalled writer holds only its own reserved slot; no other operation on
//!   the chain waits for it, so the state machine is lock-free (a failed CAS
//!   means another operation's CAS succeeded).
//!
//! Headers of bins in state `Frozen` (being moved by a resize) never change
//! again except to `Moved`: writers do not publish or abandon into them.

use super::pool::{Draw, LinkPool};
use crate::table::sync::{fence, AtomicPtr, AtomicU64, AtomicUsize, Line, Lines, Ordering};
use crossbeam::utils::CachePadded;
use splitkv_layout::dlht_layout::{
    header, tags, word_id, word_meta, word_value, BinState, SlotState, LINES_PER_CHAIN_MAX,
    LINE_BYTES, LINK_INDEX_MAX, SLOTS_PER_LINE, WORD_CONTROL, WORD_TAGS,
};
use splitkv_layout::Key;

/// Link buckets in a generation's pool beyond one per bin and one per eight
/// bins: so that the smallest tables (one or two bins) still have room for
/// a few link buckets.
pub(crate) const LINK_POOL_SLACK_LINES_MIN: usize = 2;

/// One table generation: `bins` (a power of two) and its link-bucket pool.
/// A resize creates the next generation (twice as large, or the same size to
/// reclaim link buckets) and moves every bin into it; see `resize.rs`.
/// Out-of-line value records are owned by the table, not by a generation: a
/// move shares them between the old and the new slot.
pub(crate) struct Gen {
    /// The bins; bin `b`'s header is word 0 of `bins[b]`.
    pub(crate) bins: Lines,
    /// Link-bucket pool; index 0 is never used (it means "no link").
    pub(crate) links: Lines,
    /// Who may take which of `links` (see `pool.rs`). Its counters are
    /// padded, like the resize counters below: chain extensions write them,
    /// and every operation reads `bins` and `links` on the line before.
    pub(crate) pool: LinkPool,
    /// The next generation, once a resize has allocated it.
    pub(crate) next: AtomicPtr<Gen>,
    /// 0 until one thread claims the right to allocate `next`.
    pub(crate) resize_claim: CachePadded<AtomicUsize>,
    /// Next bin to hand out to a thread helping the resize (chunks of bins).
    pub(crate) move_cursor: CachePadded<AtomicUsize>,
    /// Bins whose move has completed (`Moved`); the thread that makes this
    /// equal to the bin count makes `next` the table's current generation.
    pub(crate) moved: CachePadded<AtomicUsize>,
}

/// What a search of a chain found under one header word.
pub(crate) enum Find<'g> {
    /// The key is in chain slot `slot`, in `line` at position `pos`, with this tag.
    Found {
        slot: usize,
        line: &'g Line,
        pos: usize,
        tag: u16,
    },
    /// No valid slot holds the key.
    Absent,
    /// A link the header says exists could not be followed: the header changed
    /// under us (the caller re-reads it).
    Torn,
}

/// Why a chain could not get another link bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExtendError {
    /// Every slot of the chain's [`LINES_PER_CHAIN_MAX`] lines is taken.
    ChainFull,
    /// The generation's link pool is used up.
    PoolExhausted,
    /// The generation is still being filled by a resize, and the writers'
    /// share of its pool is used up (the rest is reserved for the copies):
    /// finish the resize first (see `pool.rs`).
    Filling,
}

/// Lines per 4 KiB page: the stride at which [`Gen::new`] write-faults a
/// fresh generation's bins.
const BIN_PREFAULT_STRIDE_LINES: usize = 4096 / LINE_BYTES;

impl Gen {
    /// A generation of `bin_count` bins (a power of two) with a pool of
    /// `bin_count + bin_count / 8 + LINK_POOL_SLACK_LINES_MIN` link buckets,
    /// and at least `reserved_links`. The destination of a resize (`Some`)
    /// has every bin `Pending` and keeps the link buckets of the source's
    /// pool (`reserved_links`, the most its copies can need; `pool.rs`) for
    /// the copies while it is being filled.
    pub(crate) fn new(bin_count: usize, resize_of: Option<&Gen>) -> Gen {
        assert!(bin_count.is_power_of_two(), "bin count {bin_count}");
        let reserved_links = resize_of.map_or(0, |g| g.links.len() - 1);
        let pool = (bin_count + bin_count / 8 + LINK_POOL_SLACK_LINES_MIN).max(reserved_links);
        assert!(pool as u64 <= LINK_INDEX_MAX, "link pool too large");
        let pending = resize_of.is_some();
        let bins = crate::table::sync::alloc_lines(bin_count);
        if pending {
            let h = header::with_bin_state(0, BinState::Pending);
            for line in bins.iter() {
                line.w[WORD_CONTROL].store(h, Ordering::Relaxed);
            }
        } else {
            // The lines come lazily zeroed (calloc's mmap path). Left alone,
            // the first operation on each page would read-fault the shared zero
            // page and then write-fault a copy of it, and replacing that
            // mapping flushes the TLB of every other core running the process
            // (an IPI per page): with 2 threads inserting into a fresh table
            // that was 52% of the samples (`ptep_clear_flush`). Write-fault
            // every page of the bins now, before the table is shared. The
            // link pool stays lazy: its lines are taken in order and written
            // before anyone reads them.
            for line in bins.iter().step_by(BIN_PREFAULT_STRIDE_LINES) {
                line.w[WORD_CONTROL].store(0, Ordering::Relaxed);
            }
        }
        Gen {
            bins,
            links: crate::table::sync::alloc_lines(pool + 1),
            pool: LinkPool::new(pool, reserved_links),
            next: AtomicPtr::new(std::ptr::null_mut()),
            resize_claim: CachePadded::new(AtomicUsize::new(0)),
            move_cursor: CachePadded::new(AtomicUsize::new(0)),
            moved: CachePadded::new(AtomicUsize::new(0)),
        }
    }

    /// Number of bins.
    #[inline]
    pub(crate) fn bin_count(&self) -> usize {
        self.bins.len()
    }

    /// The bin of `key` in this generation.
    #[inline]
    pub(crate) fn bin_of(&self, key: &Key) -> usize {
        splitkv_layout::dlht_layout::bin_index(key, self.bins.len())
    }

    /// Bin `b` (`b < bin_count()`; every caller takes `b` from `bin_of`, a
    /// hash masked to the power-of-two bin count, or from a loop over bins).
    #[inline(always)]
    pub(crate) fn bin(&self, b: usize) -> &Line {
        debug_assert!(b < self.bins.len());
        // SAFETY: `b < bins.len()`, as above (checked in debug builds).
        unsafe { self.bins.get_unchecked(b) }
    }

    /// Bin `b`'s header word.
    #[inline(always)]
    pub(crate) fn header(&self, b: usize) -> &AtomicU64 {
        &self.bin(b).w[WORD_CONTROL]
    }

    /// Link buckets handed out so far (including ones given back after a
    /// lost install race, which wait in the pool's free list).
    pub(crate) fn links_used(&self) -> usize {
        self.pool.used(&self.links)
    }

    /// The next generation, if a resize has allocated it.
    #[inline]
    pub(crate) fn next_gen(&self) -> Option<&Gen> {
        let p = self.next.load(Ordering::Acquire);
        // SAFETY: `next` is set once, to a fully built generation (Release), and
        // a generation is freed only after the table stopped pointing at it and
        // every thread pinned before that has unpinned; our caller is pinned and
        // reached `self` through the table, so `next` outlives this borrow.
        unsafe { p.as_ref() }
    }

    /// Compare-and-swap of bin `b`'s header from `old` to `new` (with its
    /// version bumped). AcqRel: publishes the slot words written before it and
    /// sees those published before `old`.
    #[inline]
    pub(crate) fn cas_header(&self, b: usize, old: u64, new: u64) -> Result<u64, u64> {
        let new = header::bumped(new);
        self.header(b)
            .compare_exchange(old, new, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| new)
    }

    /// Searches bin `b`'s chain for `key` among the slots `h` says are valid.
    /// The caller validates the answer (re-reads the header after an Acquire
    /// fence, or uses `h` as the expected value of a CAS).
    ///
    /// One line at a time: one tags-word load per line, both slots compared
    /// without short-circuiting (`&`, not `&&`; where a key sits is random, and
    /// a data-dependent branch per slot would be mispredicted about half the
    /// time, which costs more than loading two ids from a line already read),
    /// and the next link followed only while `h` says a later slot is valid.
    #[inline(always)]
    pub(crate) fn find(&self, b: usize, h: u64, key: &Key) -> Find<'_> {
        const _: () = assert!(SLOTS_PER_LINE == 2);
        let mut line = self.bin(b);
        let mut first = 0;
        loop {
            let tw = line.w[WORD_TAGS].load(Ordering::Acquire);
            let (hit0, hit1) = line_hits(line, tw, h, first, key);
            if hit0 | hit1 {
                let pos = usize::from(!hit0);
                return Find::Found {
                    slot: first + pos,
                    line,
                    pos,
                    tag: tags::tag(tw, pos),
                };
            }
            first += SLOTS_PER_LINE;
            // Slot states exist for the whole chain only, so this is false
            // once `first` reaches `SLOTS_PER_CHAIN_MAX`: at most
            // `LINES_PER_CHAIN_MAX` lines.
            if !header::any_valid_from(h, first) {
                return Find::Absent;
            }
            let idx = tags::link(tw) as usize;
            if idx == 0 || idx >= self.links.len() {
                return Find::Torn;
            }
            line = &self.links[idx];
        }
    }

    /// The lowest chain slot of bin `b` that `h` says is empty and whose line
    /// exists.
    #[inline(always)]
    pub(crate) fn pick_empty(&self, b: usize, h: u64) -> Option<(usize, &Line, usize)> {
        let empty = header::empty_mask(h);
        if empty == 0 {
            return None;
        }
        let slot = empty.trailing_zeros() as usize;
        if slot < SLOTS_PER_LINE {
            return Some((slot, self.bin(b), slot));
        }
        // Lines exist as a prefix of the chain: if the lowest empty slot's line
        // is missing, so are the lines of every higher one.
        let line = Cursor::new(self, b).line(slot / SLOTS_PER_LINE)?;
        Some((slot, line, slot % SLOTS_PER_LINE))
    }

    /// Adds the line that bin `b`'s chain lacks under header `h` (the line of
    /// its lowest empty slot, which the caller found missing), unless another
    /// thread added it since. Lock-free: the install is one CAS on the tags
    /// word of the line before it; a thread that loses that race gives its
    /// line back to the pool. `draw` says which share of the pool the line
    /// comes from (see `pool.rs`).
    #[inline]
    pub(crate) fn extend_chain(&self, b: usize, h: u64, draw: Draw) -> Result<(), ExtendError> {
        self.extend_chain_racing(b, h, draw, || {})
    }

    /// [`Gen::extend_chain`], calling `between` after taking a line from the
    /// pool and before installing it (a test races another extension there).
    #[inline(always)]
    pub(crate) fn extend_chain_racing(
        &self,
        b: usize,
        h: u64,
        draw: Draw,
        between: impl FnOnce(),
    ) -> Result<(), ExtendError> {
        let empty = header::empty_mask(h);
        if empty == 0 {
            return Err(ExtendError::ChainFull);
        }
        let k = empty.trailing_zeros() as usize / SLOTS_PER_LINE;
        let mut cur = Cursor::new(self, b);
        if cur.line(k).is_some() {
            return Ok(());
        }
        // Lines exist as a prefix of the chain, and slot `2k - 1` is not empty.
        let Some(last) = k.checked_sub(1).and_then(|k| cur.line(k)) else {
            debug_assert!(
                false,
                "bin {b}: line {k} is missing but so is the one before it"
            );
            return Ok(());
        };
        let idx = self.pool.take(&self.links, draw)?;
        between();
        if !self.install_link(b, last, idx) {
            self.pool.give_back(&self.links, idx, draw);
        }
        Ok(())
    }

    /// Installs line `idx` (taken from the pool) after `last`, the last line of
    /// bin `b`'s chain. Returns `false` if another thread installed a line
    /// there first (`idx` is then still the caller's).
    fn install_link(&self, b: usize, last: &Line, idx: usize) -> bool {
        // Owner word first (published by the Release install below).
        self.links[idx].w[WORD_CONTROL].store(b as u64 + 1, Ordering::Relaxed);
        let tw = &last.w[WORD_TAGS];
        let mut w = tw.load(Ordering::Acquire);
        loop {
            if tags::link(w) != 0 {
                return false;
            }
            match tw.compare_exchange_weak(
                w,
                tags::with_link(w, idx as u32),
                Ordering::Release,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(now) => w = now,
            }
        }
    }

    /// Writes a reserved slot's words. The caller holds the reservation of
    /// chain slot at (`line`, `pos`) in a header it changed with a CAS.
    #[inline]
    pub(crate) fn fill_slot(line: &Line, pos: usize, tag: u16, id: u64, meta: u64, value: u64) {
        // Readers that read any of the words below and then the header must see
        // our reservation: order the reservation CAS before these stores.
        fence(Ordering::Release);
        let tw = &line.w[WORD_TAGS];
        let old = tags::tag(tw.load(Ordering::Relaxed), pos);
        // Only the reserving thread changes these 16 bits, so xor with
        // (old ^ new) sets them without disturbing the neighbour's tag or link.
        let flip = ((old ^ tag) as u64) << (16 * pos);
        if flip != 0 {
            tw.fetch_xor(flip, Ordering::Relaxed);
        }
        line.w[word_id(pos)].store(id, Ordering::Relaxed);
        line.w[word_meta(pos)].store(meta, Ordering::Relaxed);
        line.w[word_value(pos)].store(value, Ordering::Relaxed);
    }

    /// Gives back a reservation of chain slot `slot` of bin `b` that will not be
    /// published. Leaves it alone if the bin is frozen or moved (the bin is dead;
    /// its header must not change any more).
    pub(crate) fn abandon(&self, b: usize, slot: usize) {
        let mut h = self.header(b).load(Ordering::Acquire);
        loop {
            debug_assert_eq!(header::slot_bits(h, slot), SlotState::Reserved as u64);
            match header::bin_state(h) {
                BinState::Frozen | BinState::Moved => return,
                BinState::Live | BinState::Pending => {}
            }
            match self.cas_header(b, h, header::with_slot(h, slot, SlotState::Empty)) {
                Ok(_) => return,
                Err(now) => h = now,
            }
        }
    }
}

/// Whether slot 0 and slot 1 of `line` (chain slots `first`, `first + 1`
/// under `h`, tags word `tw`) hold `key`. Branch-free: both ids are loaded.
#[cfg(not(loom))]
#[inline(always)]
fn line_hits(line: &Line, tw: u64, h: u64, first: usize, key: &Key) -> (bool, bool) {
    let id0 = line.w[word_id(0)].load(Ordering::Relaxed);
    let id1 = line.w[word_id(1)].load(Ordering::Relaxed);
    let hit0 = header::is_valid(h, first)
        & (id0 == key.id)
        & (tags::tag_table(tags::tag(tw, 0)) == key.table);
    let hit1 = header::is_valid(h, first + 1)
        & (id1 == key.id)
        & (tags::tag_table(tags::tag(tw, 1)) == key.table);
    (hit0, hit1)
}

/// Under loom, the same answer with short-circuit evaluation: every atomic
/// load is a point where loom interleaves other threads, and ids of slots
/// that are not valid (or of a slot after a hit) cannot change the answer, so
/// loading them only multiplies the executions to explore.
#[cfg(loom)]
#[inline(always)]
fn line_hits(line: &Line, tw: u64, h: u64, first: usize, key: &Key) -> (bool, bool) {
    let hit = |pos: usize| {
        header::is_valid(h, first + pos)
            && tags::tag_table(tags::tag(tw, pos)) == key.table
            && line.w[word_id(pos)].load(Ordering::Relaxed) == key.id
    };
    let hit0 = hit(0);
    (hit0, !hit0 && hit(1))
}

/// Walks one chain's lines lazily, remembering what it has followed.
pub(crate) struct Cursor<'g> {
    gen: &'g Gen,
    lines: [Option<&'g Line>; LINES_PER_CHAIN_MAX],
    known: usize,
}

impl<'g> Cursor<'g> {
    /// A cursor at bin `b` of `gen`.
    #[inline]
    pub(crate) fn new(gen: &'g Gen, b: usize) -> Cursor<'g> {
        let bin = gen.bin(b);
        let mut lines = [None; LINES_PER_CHAIN_MAX];
        lines[0] = Some(bin);
        Cursor {
            gen,
            lines,
            known: 1,
        }
    }

    /// Line `k` of the chain (0 = the bin), or `None` if the chain is shorter.
    #[inline]
    pub(crate) fn line(&mut self, k: usize) -> Option<&'g Line> {
        while self.known <= k {
            let prev = self.lines[self.known - 1]?;
            let idx = tags::link(prev.w[WORD_TAGS].load(Ordering::Acquire)) as usize;
            if idx == 0 || idx >= self.gen.links.len() {
                return None;
            }
            self.lines[self.known] = Some(&self.gen.links[idx]);
            self.known += 1;
        }
        self.lines[k]
    }
}
