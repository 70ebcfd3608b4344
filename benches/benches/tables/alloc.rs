//! The global allocator: huge pages for the large tables.

use super::sizes::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

// ---- huge pages ------------------------------------------------------------------

/// Allocations of at least this many bytes are 2 MiB aligned and, with
/// `SPLITKV_BENCH_HUGEPAGES=1`, advised to use transparent huge pages.
pub(crate) const HUGE_ALLOC_MIN_BYTES: usize = 64 << 20;
/// Size and alignment of an x86-64 huge page.
pub(crate) const HUGE_PAGE_BYTES: usize = 2 << 20;
/// Set from `SPLITKV_BENCH_HUGEPAGES` at start-up.
pub(crate) static HUGE_PAGES: AtomicBool = AtomicBool::new(false);

/// The system allocator, except that large blocks are aligned to 2 MiB and
/// (when [`HUGE_PAGES`] is set) `madvise`d for transparent huge pages before
/// anything touches them. The size alone decides the alignment, so `dealloc`
/// always sees the layout `alloc` used.
pub(crate) struct HugePageAlloc;

impl HugePageAlloc {
    fn adjust(layout: Layout) -> Layout {
        if layout.size() >= HUGE_ALLOC_MIN_BYTES {
            Layout::from_size_align(layout.size(), layout.align().max(HUGE_PAGE_BYTES))
                .expect("a 2 MiB alignment is valid")
        } else {
            layout
        }
    }

    fn advise(ptr: *mut u8, layout: Layout) {
        #[cfg(target_os = "linux")]
        if !ptr.is_null() && layout.size() >= HUGE_ALLOC_MIN_BYTES && HUGE_PAGES.load(Relaxed) {
            // SAFETY: `ptr .. ptr + size` is the block just allocated; madvise
            // only changes how the kernel backs it (an error is harmless).
            unsafe { libc::madvise(ptr.cast(), layout.size(), libc::MADV_HUGEPAGE) };
        }
    }
}

// SAFETY: every block comes from `System` with the layout `adjust` gives, and is
// returned to it with the same layout.
unsafe impl GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let layout = Self::adjust(layout);
        let ptr = unsafe { System.alloc(layout) };
        Self::advise(ptr, layout);
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let layout = Self::adjust(layout);
        let ptr = unsafe { System.alloc_zeroed(layout) };
        Self::advise(ptr, layout);
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, Self::adjust(layout)) }
    }
}

#[global_allocator]
pub(crate) static ALLOC: HugePageAlloc = HugePageAlloc;

/// Reads `SPLITKV_BENCH_HUGEPAGES` once, before any table is built.
pub(crate) fn init_huge_pages() {
    HUGE_PAGES.store(env_usize("SPLITKV_BENCH_HUGEPAGES", 0) != 0, Relaxed);
}
