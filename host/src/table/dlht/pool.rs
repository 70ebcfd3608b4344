//! A generation's link-bucket pool (Dandelion §6).
//!
//! Lines are handed out by a bump counter and by a free list of lines given
//! back: a thread that loses the race to install a link bucket
//! (`Gen::extend_chain`) returns its line, so lost races consume nothing.
//! Installed link buckets stay with their chain until the bin is moved.

use super::bin::ExtendError;
use crate::table::sync::{AtomicU64, AtomicUsize, Lines, Ordering};
use crossbeam::utils::CachePadded;
use splitkv_layout::dlht_layout::WORD_CONTROL;

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
}

/// Low 32 bits of [`LinkPool::free`]: the top line's index.
const FREE_INDEX_MASK: u64 = u32::MAX as u64;
/// One step of the change count in [`LinkPool::free`].
const FREE_COUNT_ONE: u64 = 1 << 32;

impl LinkPool {
    /// The state of a fresh pool.
    pub(crate) fn new() -> LinkPool {
        LinkPool {
            next: CachePadded::new(AtomicUsize::new(1)),
            free: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// Lines handed out at least once (including lines now in the free list).
    pub(crate) fn used(&self, links: &Lines) -> usize {
        (self.next.load(Ordering::Relaxed) - 1).min(links.len() - 1)
    }

    /// Takes a line: a returned one if any, else a fresh one.
    ///
    /// # Errors
    /// [`ExtendError::PoolExhausted`] if the pool is used up.
    #[inline]
    pub(crate) fn take(&self, links: &Lines) -> Result<usize, ExtendError> {
        if let Some(idx) = self.pop(links) {
            return Ok(idx);
        }
        let idx = self.next.fetch_add(1, Ordering::Relaxed);
        if idx < links.len() {
            return Ok(idx);
        }
        Err(ExtendError::PoolExhausted)
    }

    /// Gives back line `idx`, taken and never installed.
    pub(crate) fn give_back(&self, links: &Lines, idx: usize) {
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
