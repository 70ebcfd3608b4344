//! Non-blocking resize (Dandelion §6): the table moves into a new generation
//! while reads and writes go on. The new generation has twice the bins
//! (growth) or the same number (a rehash that compacts chains: link buckets
//! stay attached to their bin until the bin is moved, so a workload that
//! deletes and inserts forever slowly uses up the link pool even at a steady
//! size; a rehash returns the unused ones).
//!
//! 1. **Allocate.** A thread that needs room (a full chain, an exhausted link
//!    pool, or the load bound) claims the generation's `resize_claim` and
//!    allocates the next generation with every bin `Pending`, then publishes it
//!    in `next`. Only inserts that found no room wait for this step; every other
//!    operation proceeds.
//! 2. **Move.** Bins are moved in chunks handed out by `move_cursor`; every
//!    write operation that sees a resize under way moves one chunk, and any
//!    thread that touches a `Frozen` bin moves that bin before going on. Moving
//!    bin `b` of `n`: freeze its header (`Live → Frozen`, one CAS; writers whose
//!    reservation is in the bin then fail to publish and retry in the next
//!    generation), copy every valid slot into its destination bin (`b`, or
//!    `b + n` when doubling; still `Pending`) with insert-if-absent, open the
//!    destinations (`Pending → Live`), then mark `b` `Moved`. Any number of
//!    threads may move the same bin at once: the frozen source never changes,
//!    copies are idempotent, and a copier whose destination is already open
//!    stops (so a slow copier cannot bring back a key deleted after the move).
//! 3. **Switch.** The thread whose `Frozen → Moved` CAS completes the last bin
//!    makes the next generation current and retires the old one through the
//!    epoch reclaimer (threads still reading it stay safe).
//!
//! Readers read `Frozen` bins in place (their contents are final) and follow
//! `Moved` bins to the next generation. Out-of-line values are not copied: the
//! new slot points at the same record, which from then on belongs to the new
//! generation.
//!
//! A destination chain never overflows: it receives a subset of one source
//! chain (at most [`SLOTS_PER_CHAIN_MAX`] keys). The copies never run out of
//! link buckets: they need at most as many as the source's chains hold, and
//! the new generation keeps that many (the source's pool size) for them while
//! it is being filled; writes into bins already moved take only the rest of
//! its pool, and a write that finds the rest used up finishes the resize
//! before it goes on (`pool.rs` has the bound and its proof).

use super::bin::{Cursor, ExtendError, Find, Gen};
use super::pool::Draw;
use super::{
    Dlht, DlhtError, LOAD_KEYS_PER_BIN_MAX_DEN, LOAD_KEYS_PER_BIN_MAX_NUM,
    REHASH_LOAD_KEYS_PER_BIN_MAX_NUM,
};
use crate::table::sync::{fence, spin_wait, Guard, Ordering};
use splitkv_layout::dlht_layout::{
    header, tags, word_id, word_meta, word_value, BinState, SlotState, SLOTS_PER_CHAIN_MAX,
    SLOTS_PER_LINE, WORD_TAGS,
};
use splitkv_layout::Key;

/// Bins a helper claims at a time from a generation's `move_cursor`.
pub(crate) const MOVE_CHUNK_BINS: usize = 64;

/// Why a resize starts; decides the new size (see [`Dlht::next_bin_count`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GrowCause {
    /// A chain is at its bound with no free slot: only more bins split it.
    ChainFull,
    /// The link-bucket pool is used up.
    PoolExhausted,
    /// The average load passed its bound.
    Load,
    /// [`Dlht::begin_resize`].
    Explicit,
    /// [`Dlht::begin_rehash`].
    Rehash,
}

impl Dlht {
    /// The generation after `g`, allocating it if this thread wins the claim
    /// (sized by [`Dlht::next_bin_count`] for `cause`). With `wait`, waits for
    /// another thread's allocation; without, returns `Ok(None)` if another
    /// thread is allocating.
    ///
    /// Only the current generation grows: if `g` is newer, this thread first
    /// finishes the older migration.
    ///
    /// # Errors
    /// [`DlhtError::Full`] if `cause` needs more bins than the bin bound allows.
    pub(crate) fn grow<'g>(
        &self,
        g: &'g Gen,
        guard: &'g Guard,
        wait: bool,
        cause: GrowCause,
    ) -> Result<Option<&'g Gen>, DlhtError> {
        loop {
            if let Some(next) = g.next_gen() {
                return Ok(Some(next));
            }
            let cur = self.current(guard);
            if std::ptr::eq(cur, g) {
                break;
            }
            // `g` is the generation after `cur`, still being filled.
            self.finish_resize_of(cur, guard);
        }
        let bins = self.next_bin_count(g, cause)?;
        if g.resize_claim
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            let next = Box::into_raw(Box::new(Gen::new(bins, Some(g))));
            g.next.store(next, Ordering::Release);
            return Ok(g.next_gen());
        }
        if !wait {
            return Ok(None);
        }
        loop {
            if let Some(next) = g.next_gen() {
                return Ok(Some(next));
            }
            spin_wait();
        }
    }

    /// Bins of the generation after `g` when a resize starts for `cause`:
    /// double, except that an exhausted link pool at a low load (at most
    /// [`REHASH_LOAD_KEYS_PER_BIN_MAX_NUM`]/2 keys per bin), or at the bin bound
    /// with a load within the load bound, rehashes at the same size.
    ///
    /// # Errors
    /// [`DlhtError::Full`] when doubling is needed but passes the bin bound.
    fn next_bin_count(&self, g: &Gen, cause: GrowCause) -> Result<usize, DlhtError> {
        let n = g.bin_count();
        let len = self.len();
        let full = DlhtError::Full {
            bins_max: self.hot.bins_max,
        };
        let can_double = n.checked_mul(2).is_some_and(|d| d <= self.hot.bins_max);
        let bins = match cause {
            GrowCause::ChainFull | GrowCause::Load | GrowCause::Explicit => {
                if can_double {
                    2 * n
                } else {
                    return Err(full);
                }
            }
            GrowCause::Rehash => n,
            GrowCause::PoolExhausted => {
                let low = len * 2 <= n * REHASH_LOAD_KEYS_PER_BIN_MAX_NUM;
                let within = len * LOAD_KEYS_PER_BIN_MAX_DEN <= n * LOAD_KEYS_PER_BIN_MAX_NUM;
                if low || (!can_double && within) {
                    n
                } else if can_double {
                    2 * n
                } else {
                    return Err(full);
                }
            }
        };
        Ok(bins)
    }

    /// Moves up to `max_chunks` chunks of `g`'s bins (fewer if none are left
    /// to hand out). Returns the number of bins this call moved.
    pub(crate) fn help_resize_of(&self, g: &Gen, guard: &Guard, max_chunks: usize) -> usize {
        let n = g.bin_count();
        let mut moved = 0;
        for _ in 0..max_chunks {
            if g.move_cursor.load(Ordering::Relaxed) >= n {
                break;
            }
            let start = g.move_cursor.fetch_add(MOVE_CHUNK_BINS, Ordering::Relaxed);
            if start >= n {
                break;
            }
            for b in start..n.min(start + MOVE_CHUNK_BINS) {
                self.move_bin(g, b, guard);
                moved += 1;
            }
        }
        moved
    }

    /// Completes the migration out of `g` (moving any bin not yet moved, even
    /// ones another thread claimed and has not finished) and makes the next
    /// generation current.
    pub(crate) fn finish_resize_of(&self, g: &Gen, guard: &Guard) {
        self.help_resize_of(g, guard, usize::MAX);
        for b in 0..g.bin_count() {
            if header::bin_state(g.header(b).load(Ordering::Acquire)) != BinState::Moved {
                self.move_bin(g, b, guard);
            }
        }
        self.switch_from(g, guard);
    }

    /// Makes `g.next` current if `g` is, and retires `g`.
    fn switch_from(&self, g: &Gen, guard: &Guard) {
        let next = g.next.load(Ordering::Acquire);
        debug_assert!(!next.is_null());
        let old = g as *const Gen as *mut Gen;
        if self
            .hot
            .current
            .compare_exchange(old, next, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.resizes.fetch_add(1, Ordering::Relaxed);
            let addr = old as usize;
            // SAFETY: `old` is no longer reachable from the table (threads that
            // pin from now on start at `next`), and only the thread whose CAS
            // unlinked it retires it. It was made by `Box::into_raw`.
            unsafe {
                guard.defer_free(&self.retired, move || drop(Box::from_raw(addr as *mut Gen)));
            }
            // A generation is the size of the whole table: do not leave it in
            // this thread's local bag until 64 more objects are retired.
            guard.flush();
        }
    }

    /// Moves bin `b` of `g` into `g`'s next generation (or helps the threads
    /// already moving it); returns once the bin is `Moved`.
    pub(crate) fn move_bin(&self, g: &Gen, b: usize, guard: &Guard) {
        let next = g
            .next_gen()
            .expect("a bin is moved only once the next generation exists");
        let n = g.bin_count();
        // 1 (rehash) or 2 (doubling) destinations: `b + k n`.
        let fan_out = next.bin_count() / n;
        debug_assert!(fan_out == 1 || fan_out == 2);
        // Freeze.
        let mut h = g.header(b).load(Ordering::Acquire);
        loop {
            match header::bin_state(h) {
                BinState::Moved => return,
                BinState::Frozen => break,
                BinState::Live => {
                    match g.cas_header(b, h, header::with_bin_state(h, BinState::Frozen)) {
                        Ok(frozen) => {
                            h = frozen;
                            break;
                        }
                        Err(now) => h = now,
                    }
                }
                BinState::Pending => {
                    unreachable!("a generation grows only after its own bins are all open")
                }
            }
        }
        // Copy. The frozen chain's slots and links no longer change; the Acquire
        // load (or our CAS) of `h` made the writes that filled them visible.
        let mut cur = Cursor::new(g, b);
        let mut valid = header::valid_mask(h);
        while valid != 0 {
            let slot = valid.trailing_zeros() as usize;
            valid &= valid - 1;
            let line = cur
                .line(slot / SLOTS_PER_LINE)
                .expect("a frozen chain has every line its header uses");
            let pos = slot % SLOTS_PER_LINE;
            let tag = tags::tag(line.w[WORD_TAGS].load(Ordering::Acquire), pos);
            let key = Key::new(
                tags::tag_table(tag),
                line.w[word_id(pos)].load(Ordering::Relaxed),
            );
            let meta = line.w[word_meta(pos)].load(Ordering::Relaxed);
            let word = line.w[word_value(pos)].load(Ordering::Relaxed);
            let d = next.bin_of(&key);
            debug_assert_eq!(d % n, b, "bin {b} of {n} cannot send a key to {d}");
            copy_into(next, d, &key, tag, meta, word);
        }
        // Open the destinations, then retire the source bin.
        for k in 0..fan_out {
            open(next, b + k * n);
        }
        match g.cas_header(b, h, header::with_bin_state(h, BinState::Moved)) {
            Ok(_) => {
                if g.moved.fetch_add(1, Ordering::AcqRel) + 1 == n {
                    self.switch_from(g, guard);
                }
            }
            Err(now) => debug_assert_eq!(header::bin_state(now), BinState::Moved),
        }
    }
}

/// Makes a destination bin `Live` (idempotent).
fn open(next: &Gen, d: usize) {
    let mut h = next.header(d).load(Ordering::Acquire);
    while header::bin_state(h) == BinState::Pending {
        match next.cas_header(d, h, header::with_bin_state(h, BinState::Live)) {
            Ok(_) => return,
            Err(now) => h = now,
        }
    }
}

/// Inserts a copy of one frozen slot into the `Pending` destination bin `d`
/// unless it is already there (another copier was first) or `d` is already
/// open (the move is complete).
fn copy_into(next: &Gen, d: usize, key: &Key, tag: u16, meta: u64, word: u64) {
    let mut mine: Option<usize> = None;
    loop {
        let h = next.header(d).load(Ordering::Acquire);
        if header::bin_state(h) != BinState::Pending {
            if let Some(s) = mine {
                next.abandon(d, s);
            }
            return;
        }
        match next.find(d, h, key) {
            Find::Found { .. } => {
                // In a `Pending` bin keys are only ever added (all copies of the
                // same frozen slot), so a found key stays found.
                if let Some(s) = mine {
                    next.abandon(d, s);
                }
                return;
            }
            Find::Torn => {
                spin_wait();
                continue;
            }
            Find::Absent => {}
        }
        if let Some(s) = mine {
            debug_assert_eq!(header::slot_bits(h, s), SlotState::Reserved as u64);
            // The key checks above read slot words; order them before the CAS
            // that validates them.
            fence(Ordering::Acquire);
            if next
                .cas_header(d, h, header::with_slot(h, s, SlotState::Valid))
                .is_ok()
            {
                return;
            }
            continue;
        }
        match next.pick_empty(d, h) {
            Some((s, line, pos)) => {
                if next
                    .cas_header(d, h, header::with_slot(h, s, SlotState::Reserved))
                    .is_ok()
                {
                    Gen::fill_slot(line, pos, tag, key.id, meta, word);
                    mine = Some(s);
                }
            }
            None if header::reserved_mask(h) != 0 => {
                // Another copier holds a slot for a moment (it publishes or gives
                // it back next).
                spin_wait();
            }
            None => match next.extend_chain(d, h, Draw::Copy) {
                Ok(()) => {}
                Err(ExtendError::ChainFull) => unreachable!(
                    "a destination chain holds at most the {SLOTS_PER_CHAIN_MAX} keys of one source chain"
                ),
                // The copies' share of the pool is never used up (`pool.rs`):
                // another copier holds the line it will install or give back.
                Err(ExtendError::PoolExhausted | ExtendError::Filling) => spin_wait(),
            },
        }
    }
}
