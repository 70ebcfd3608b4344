//! A generation's link-bucket pool (Dandelion §6): who may take a link
//! bucket, and the proof that a resize's copies always find one.
//!
//! Lines are handed out by a bump counter and by a free list of lines given
//! back: a thread that loses the race to install a link bucket
//! (`Gen::extend_chain`) returns its line, so lost races consume nothing.
//! Installed link buckets stay with their chain until the bin is moved.
//!
//! # The bound
//!
//! A generation `G'` built by a resize from `G` starts with every bin
//! `Pending`. While it is being filled, two kinds of threads take its lines:
//!
//! - **Copies** (`Draw::Copy`). A copy adds line `k` to a destination chain
//!   only when every slot of lines `0..k` is valid (no reservation) and its
//!   key is absent. Valid slots of a `Pending` bin never change, so the line
//!   is needed: a destination chain of `m` keys gets `max(1, ⌈m/2⌉)` lines
//!   exactly. A source chain of `L` lines holds `K ≤ 2L` keys; a rehash sends
//!   them to one chain (`⌈K/2⌉ − 1 ≤ L − 1` link buckets), a doubling splits
//!   them `K = K₁ + K₂` over two (`⌈K₁/2⌉ + ⌈K₂/2⌉ − 2 ≤ K/2 − 1 ≤ L − 1`
//!   if both are non-empty). So the copies out of `G` need at most as many
//!   link buckets as `G`'s chains hold, at most `G`'s pool lines: `R`, the
//!   lines *reserved* for copies.
//! - **Writers** into destination bins that are already open
//!   (`Draw::Filling`): at most `lines − R` links at a time. A writer that
//!   finds this share used up finishes the resize (moves every remaining
//!   bin) and tries again in the new current generation.
//!
//! Every line is either in the free list, in a chain, or held for a moment by
//! a thread between taking it and installing or returning it. If a copy finds
//! the pool empty, writers hold at most `lines − R`, so copies hold at least
//! `R`; the copy needs a line none of them installed, so copies have
//! installed at most `R − 1`, and another copier holds a line it is about to
//! install or return: the copy waits for that short step and never fails.
//! A stale copier (its destination opened meanwhile) takes a line only if
//! the line it wants is still missing, which proves the bin is still
//! `Pending` (its key needs that line), so no copy takes a line after the
//! generation becomes current. From then on writers draw from the whole pool
//! (`Draw::Current`), and an empty pool starts the next resize.
//!
//! `Gen::new` sizes a pool `bins + bins/8 + LINK_POOL_SLACK_LINES_MIN` lines,
//! never fewer than `R` (the source's pool): a same-size rehash reserves all of
//! it for the copies, a doubling a little over half.

use super::bin::ExtendError;
use crate::table::sync::{AtomicU64, AtomicUsize, Lines, Ordering};
use crossbeam::utils::CachePadded;
use splitkv_layout::dlht_layout::WORD_CONTROL;

/// Which share of a generation's pool a request for a link bucket draws from
/// (see the module docs).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Draw {
    /// A resize's copy into this generation, still `Pending`: the whole pool.
    Copy,
    /// A write into this generation while it is the current one: the whole pool.
    Current,
    /// A write into an open bin of this generation while a resize still
    /// fills it: the lines not reserved for the copies.
    Filling,
}

/// The allocation state of one generation's link-bucket lines (the lines are
/// `Gen::links`; index 0 is never handed out).
pub(crate) struct LinkPool {
    /// Next never-used index (starts at 1; may run past the end).
    next: CachePadded<AtomicUsize>,
    /// Lines given back: a stack whose top index is the low 32 bits (0 =
    /// empty), with a count of changes in the high 32 bits so that a pop
    /// cannot succeed on a top that was popped and pushed again meanwhile
    /// (ABA). A free line's owner word holds the index below it.
    free: CachePadded<AtomicU64>,
    /// Links that writers took with [`Draw::Filling`] and have not returned.
    filling: CachePadded<AtomicUsize>,
    /// Bound on `filling`: the lines not reserved for copies.
    filling_max: usize,
}

/// Low 32 bits of [`LinkPool::free`]: the top line's index.
const FREE_INDEX_MASK: u64 = u32::MAX as u64;
/// One step of the change count in [`LinkPool::free`].
const FREE_COUNT_ONE: u64 = 1 << 32;

impl LinkPool {
    /// The state of a pool of `lines` lines (not counting line 0), of which
    /// `reserved` are held back for copies while the generation is filled.
    pub(crate) fn new(lines: usize, reserved: usize) -> LinkPool {
        assert!(
            reserved <= lines,
            "a pool of {lines} lines cannot reserve {reserved} for copies"
        );
        LinkPool {
            next: CachePadded::new(AtomicUsize::new(1)),
            free: CachePadded::new(AtomicU64::new(0)),
            filling: CachePadded::new(AtomicUsize::new(0)),
            filling_max: lines - reserved,
        }
    }

    /// Lines handed out at least once (including lines now in the free list).
    pub(crate) fn used(&self, links: &Lines) -> usize {
        (self.next.load(Ordering::Relaxed) - 1).min(links.len() - 1)
    }

    /// Takes a line for `draw`: a returned one if any, else a fresh one.
    ///
    /// # Errors
    /// [`ExtendError::Filling`] if a [`Draw::Filling`] finds its share (or the
    /// pool) used up, [`ExtendError::PoolExhausted`] if another draw finds the
    /// pool used up.
    #[inline]
    pub(crate) fn take(&self, links: &Lines, draw: Draw) -> Result<usize, ExtendError> {
        if draw == Draw::Filling && self.filling.fetch_add(1, Ordering::Relaxed) >= self.filling_max
        {
            self.filling.fetch_sub(1, Ordering::Relaxed);
            return Err(ExtendError::Filling);
        }
        if let Some(idx) = self.pop(links) {
            return Ok(idx);
        }
        let idx = self.next.fetch_add(1, Ordering::Relaxed);
        if idx < links.len() {
            return Ok(idx);
        }
        if draw == Draw::Filling {
            self.filling.fetch_sub(1, Ordering::Relaxed);
            return Err(ExtendError::Filling);
        }
        Err(ExtendError::PoolExhausted)
    }

    /// Gives back line `idx`, taken for `draw` and never installed.
    pub(crate) fn give_back(&self, links: &Lines, idx: usize, draw: Draw) {
        debug_assert!(idx > 0 && idx < links.len());
        let mut top = self.free.load(Ordering::Relaxed);
        loop {
            links[idx].w[WORD_CONTROL].store(top & FREE_INDEX_MASK, Ordering::Relaxed);
            let new = (top & !FREE_INDEX_MASK).wrapping_add(FREE_COUNT_ONE) | idx as u64;
            // Release: a popper that reads `new` sees the owner word above.
            match self
                .free
                .compare_exchange_weak(top, new, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => top = now,
            }
        }
        if draw == Draw::Filling {
            self.filling.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Pops a returned line, if any.
    #[inline]
    fn pop(&self, links: &Lines) -> Option<usize> {
        let mut top = self.free.load(Ordering::Acquire);
        loop {
            let idx = (top & FREE_INDEX_MASK) as usize;
            if idx == 0 {
                return None;
            }
            // Another popper may take `idx` and write its owner word before our
            // CAS fails; the change count makes that CAS fail.
            let below = links[idx].w[WORD_CONTROL].load(Ordering::Relaxed);
            let new = (top & !FREE_INDEX_MASK).wrapping_add(FREE_COUNT_ONE) | below;
            match self
                .free
                .compare_exchange_weak(top, new, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => return Some(idx),
                Err(now) => top = now,
            }
        }
    }
}
