//! The one place the host tables get their synchronisation primitives from
//! (tokio's loom-shim pattern). The atomics and fences are those of
//! [`splitkv_layout::sync`], the workspace's one loom shim: `std`'s normally,
//! `loom`'s under `--cfg loom`, so `scripts/loom` model-checks the Robinhood
//! table and the DLHT without touching any call site, and a fence of the host
//! table's slot seqlock is the same fence the region's readers are checked
//! against. (A crate cannot share another crate's private module, so the host
//! re-exports the layout crate's public shim here rather than keeping a second
//! copy of it.)
//!
//! Also here, because they differ between the two builds and only the DLHT
//! needs them:
//! - [`Line`] allocation (all-zero words; lazily committed pages under `std`);
//! - memory reclamation ([`pin`], [`Guard::defer_free`]): `crossbeam-epoch`
//!   normally; under loom a guard is a no-op and retired objects are kept until
//!   the table is dropped, so loom explores our atomics rather than the epoch
//!   collector's (which uses `std` atomics loom cannot see);
//! - [`spin_wait`] and [`prefetch`].

pub(crate) use splitkv_layout::sync::{
    fence, spin_wait, AtomicIsize, AtomicPtr, AtomicU64, AtomicUsize, Ordering,
};

use splitkv_layout::dlht_layout::LINE_WORDS;

/// One 64-byte line (a bin or a link bucket) as eight atomic words; the word
/// meanings are in `splitkv_layout::dlht_layout`.
#[repr(C, align(64))]
pub(crate) struct Line {
    pub(crate) w: [AtomicU64; LINE_WORDS],
}

/// An owned, zero-initialised array of [`Line`]s.
///
/// Under `std` it is one allocation made with 16-byte alignment and aligned to
/// 64 bytes by hand: `System::alloc_zeroed` takes the `calloc` path only for
/// alignments up to 16 (larger ones are allocated and then zeroed with
/// `memset`, which commits every page). With `calloc`, pages of a large pool
/// that the table never touches (the unused tail of a link-bucket pool) stay
/// uncommitted.
#[cfg(not(loom))]
pub(crate) struct Lines {
    /// First line (64-byte aligned, inside the allocation).
    ptr: std::ptr::NonNull<Line>,
    n: usize,
    /// What was allocated (base pointer and layout), to free it.
    base: *mut u8,
    layout: std::alloc::Layout,
}

// SAFETY: `Lines` owns its allocation, and `Line` (atomic words) is Send + Sync.
#[cfg(not(loom))]
unsafe impl Send for Lines {}
// SAFETY: as above; shared access goes through atomics only.
#[cfg(not(loom))]
unsafe impl Sync for Lines {}

#[cfg(not(loom))]
impl std::ops::Deref for Lines {
    type Target = [Line];
    fn deref(&self) -> &[Line] {
        // SAFETY: `ptr` points to `n` initialised (all-zero bytes are a valid
        // `Line`) lines inside the live allocation.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.n) }
    }
}

#[cfg(not(loom))]
impl Drop for Lines {
    fn drop(&mut self) {
        // SAFETY: `base` came from `alloc_zeroed(self.layout)` and is freed once.
        unsafe { std::alloc::dealloc(self.base, self.layout) }
    }
}

/// Allocates `n` zeroed lines (lazily committed pages under `std`, see [`Lines`]).
#[cfg(not(loom))]
pub(crate) fn alloc_lines(n: usize) -> Lines {
    assert!(n > 0, "a line array is never empty");
    let bytes = n
        .checked_mul(std::mem::size_of::<Line>())
        .and_then(|b| b.checked_add(std::mem::align_of::<Line>()))
        .expect("line array size overflows");
    let layout = std::alloc::Layout::from_size_align(bytes, 16).expect("line array size overflows");
    // SAFETY: `layout` has nonzero size. The first 64-byte boundary at or after
    // `base` leaves room for `n` lines because we asked for one line extra, and
    // all-zero bytes are a valid `Line`.
    unsafe {
        let base = std::alloc::alloc_zeroed(layout);
        if base.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        let offset = base.align_offset(std::mem::align_of::<Line>());
        let ptr = std::ptr::NonNull::new_unchecked(base.add(offset) as *mut Line);
        Lines {
            ptr,
            n,
            base,
            layout,
        }
    }
}

/// Zeroed lines under loom (one boxed slice; loom atomics are not plain memory).
#[cfg(loom)]
pub(crate) type Lines = Box<[Line]>;

/// Allocates `n` zeroed lines (loom atomics are not plain memory).
#[cfg(loom)]
pub(crate) fn alloc_lines(n: usize) -> Lines {
    (0..n)
        .map(|_| Line {
            w: std::array::from_fn(|_| AtomicU64::new(0)),
        })
        .collect()
}

/// Hints the CPU to bring the line at `p` into cache (Dandelion §6 batching).
/// A no-op off x86-64 and under loom.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    // SAFETY: prefetch is a hint; it never faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p as *const i8, core::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    let _ = p;
}

/// This thread's stripe among `stripes` (a power of two or not): threads are
/// numbered round robin on first use. Under loom every thread uses stripe 0
/// (a striped counter is a sum of commutative adds; loom need not explore it).
#[inline(always)]
pub(crate) fn thread_stripe(stripes: usize) -> usize {
    #[cfg(not(loom))]
    {
        use std::cell::Cell;
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        thread_local! {
            static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
        }
        STRIPE.with(|s| {
            let mut i = s.get();
            if i == usize::MAX {
                i = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                s.set(i);
            }
            i % stripes
        })
    }
    #[cfg(loom)]
    {
        let _ = stripes;
        0
    }
}

/// A pinned epoch: memory retired while any guard that was taken earlier is
/// alive is not freed.
#[cfg(not(loom))]
pub(crate) struct Guard(crossbeam::epoch::Guard);

/// Under loom: nothing is freed before the table drops, so a guard is empty.
#[cfg(loom)]
pub(crate) struct Guard;

/// Pins the current thread.
#[inline]
pub(crate) fn pin() -> Guard {
    #[cfg(not(loom))]
    return Guard(crossbeam::epoch::pin());
    #[cfg(loom)]
    return Guard;
}

/// Where retired objects wait under loom until the table drops.
#[derive(Default)]
pub(crate) struct Retired {
    #[cfg(loom)]
    list: std::sync::Mutex<Vec<Box<dyn FnOnce() + Send>>>,
}

impl Retired {
    /// Runs every retired destructor (under loom; a no-op otherwise).
    pub(crate) fn drain(&mut self) {
        #[cfg(loom)]
        for f in self.list.get_mut().unwrap().drain(..) {
            f();
        }
    }
}

impl Guard {
    /// Runs `free` once no thread can still hold a reference obtained before
    /// this call.
    ///
    /// # Safety
    /// The object `free` destroys must already be unreachable for threads that
    /// pin after this call, and `free` must be the only destructor of it.
    #[inline]
    pub(crate) unsafe fn defer_free<F: FnOnce() + Send + 'static>(
        &self,
        retired: &Retired,
        free: F,
    ) {
        #[cfg(not(loom))]
        {
            let _ = retired;
            // SAFETY: forwarded from the caller.
            unsafe { self.0.defer_unchecked(free) };
        }
        #[cfg(loom)]
        retired.list.lock().unwrap().push(Box::new(free));
    }

    /// Hands this thread's retired objects to the global collector now, so a
    /// large object (a whole old generation) is freed as soon as no reader can
    /// hold it, instead of when the thread's local bag fills. A no-op under loom.
    #[inline]
    pub(crate) fn flush(&self) {
        #[cfg(not(loom))]
        self.0.flush();
    }
}
