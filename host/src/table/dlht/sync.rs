//! The one place the DLHT gets its synchronisation primitives from (tokio's
//! loom-shim pattern): `std` atomics normally, `loom`'s under `--cfg loom`, so
//! `scripts/loom` model-checks the table without touching any call site.
//!
//! Also here, because they differ between the two builds:
//! - [`Line`] allocation (all-zero words; lazily committed pages under `std`);
//! - memory reclamation ([`pin`], [`Guard::defer_free`]): `crossbeam-epoch`
//!   normally; under loom a guard is a no-op and retired objects are kept until
//!   the table is dropped, so loom explores our atomics rather than the epoch
//!   collector's (which uses `std` atomics loom cannot see);
//! - [`spin_wait`] and [`prefetch`].

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    fence, AtomicIsize, AtomicPtr, AtomicU64, AtomicUsize, Ordering,
};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicIsize, AtomicPtr, AtomicU64, AtomicUsize, Ordering,
};

use splitkv_layout::dlht_layout::LINE_WORDS;

/// One 64-byte line (a bin or a link bucket) as eight atomic words; the word
/// meanings are in `splitkv_layout::dlht_layout`.
#[repr(C, align(64))]
pub(crate) struct Line {
    pub(crate) w: [AtomicU64; LINE_WORDS],
}

/// Allocates `n` zeroed lines.
///
/// Under `std` this is one zeroed allocation, so pages the table never touches
/// (the unused tail of a link-bucket pool) are never committed by the OS.
#[cfg(not(loom))]
pub(crate) fn alloc_lines(n: usize) -> Box<[Line]> {
    assert!(n > 0, "a line array is never empty");
    let layout = std::alloc::Layout::array::<Line>(n).expect("line array size overflows");
    // SAFETY: `layout` has nonzero size (n > 0, `Line` is 64 bytes). All-zero
    // bytes are a valid `Line` (eight `AtomicU64`s holding 0), and the pointer
    // came from the global allocator with `Box<[Line]>`'s layout.
    unsafe {
        let p = std::alloc::alloc_zeroed(layout) as *mut Line;
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n))
    }
}

/// Allocates `n` zeroed lines (loom atomics are not plain memory).
#[cfg(loom)]
pub(crate) fn alloc_lines(n: usize) -> Box<[Line]> {
    (0..n)
        .map(|_| Line {
            w: std::array::from_fn(|_| AtomicU64::new(0)),
        })
        .collect()
}

/// Called in retry loops that wait for another thread's short step (the
/// allocation of the next table, another copier's reservation).
#[inline]
pub(crate) fn spin_wait() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    {
        std::hint::spin_loop();
        std::thread::yield_now();
    }
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
}
