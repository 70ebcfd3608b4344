//! Host memory as the NIC runtime sees it: a cache-line aligned region of 64-bit
//! words, shared between the host (which owns it) and the DMA engine.
//!
//! Every access is an atomic word access, so a host writer and a concurrent DMA
//! reader never form a data race in Rust's memory model; ordering between them is
//! carried by the protocols built on top (ring indices with Release/Acquire, slot
//! seqlocks). Relaxed word accesses compile to plain loads and stores on x86 and Arm.
//!
//! Offsets are in bytes from the start of the region. Word accessors need 8-byte
//! aligned offsets; byte copies need an 8-byte aligned start and may end anywhere.
//!
//! # Backings
//!
//! A region is a base pointer and a length in words, plus an owner that keeps the
//! memory alive; the accessors read only the pointer and the length, whatever
//! the owner is. Two owners exist:
//!
//! - the heap ([`Region::new`]): zeroed cache lines this process allocates;
//! - memory mapped by someone else ([`Region::from_memory`]): any
//!   [`RegionMemory`], such as a shared mapping of a sealed memfd that the
//!   application ring API (L5 §III-A.1) places between two processes. This crate
//!   makes no system call: the crate that maps the memory owns the mapping.
//!
//! Under `--cfg loom` the words are loom atomics ([`crate::sync`]), stored as a
//! plain `Arc<[AtomicU64]>` (loom atomics are not plain memory, so the
//! cache-line array below cannot be reinterpreted as words); regions must then
//! be created inside a loom model, and only the heap backing exists.

use crate::sync::{AtomicU64, Ordering};
#[cfg(not(loom))]
use std::ptr::NonNull;
use std::sync::Arc;

/// Bytes in one cache line; regions and ring indices are aligned to it.
pub const CACHE_LINE_BYTES: usize = 64;

#[cfg(not(loom))]
#[repr(C, align(64))]
struct Line([AtomicU64; CACHE_LINE_BYTES / 8]);

/// Out-of-range or misaligned access to a [`Region`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("region access at byte {offset} (+{len} B) outside a {region_bytes} B region or not 8-byte aligned")]
pub struct RegionError {
    /// Requested start offset in bytes.
    pub offset: usize,
    /// Requested length in bytes.
    pub len: usize,
    /// Size of the region in bytes.
    pub region_bytes: usize,
}

/// Memory that some other code made (typically a shared mapping) and that a
/// [`Region`] can sit over: a base address and a length in bytes that stay
/// fixed and valid for as long as the value lives. The value is the owner:
/// dropping the last [`Region`] over it drops it (which may unmap it).
///
/// Implementing the trait is safe; what makes a region sound is promised at
/// [`Region::from_memory`], which is `unsafe`. (`RefUnwindSafe` keeps
/// [`Region`] unwind safe whatever its backing.)
pub trait RegionMemory: Send + Sync + std::panic::RefUnwindSafe {
    /// Address of the first byte; must be [`CACHE_LINE_BYTES`]-aligned and the
    /// same on every call.
    fn base(&self) -> *mut u8;
    /// Length in bytes; must be a nonzero multiple of [`CACHE_LINE_BYTES`] and
    /// the same on every call.
    fn len_bytes(&self) -> usize;
}

/// Why [`Region::from_memory`] refused a [`RegionMemory`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RegionMemoryError {
    /// The base address is null or not [`CACHE_LINE_BYTES`]-aligned.
    #[error("region memory at address {address:#x} is not {CACHE_LINE_BYTES}-byte aligned")]
    Misaligned {
        /// The base address offered.
        address: usize,
    },
    /// The length is zero or not a multiple of [`CACHE_LINE_BYTES`].
    #[error("region memory of {len_bytes} B is empty or not a multiple of {CACHE_LINE_BYTES} B")]
    BadLength {
        /// The length offered, in bytes.
        len_bytes: usize,
    },
}

/// Who keeps a region's memory alive. Never read on the access paths.
#[cfg(not(loom))]
#[derive(Clone)]
enum Owner {
    /// Cache lines allocated by [`Region::new`].
    Heap(#[allow(dead_code)] Arc<[Line]>),
    /// Memory handed to [`Region::from_memory`].
    Memory(#[allow(dead_code)] Arc<dyn RegionMemory>),
}

/// A shared, cache-line aligned block of memory seen as atomic 64-bit words:
/// zero-initialised heap memory ([`Region::new`]) or memory mapped elsewhere
/// ([`Region::from_memory`]). Cloning shares the same memory (the owner is
/// reference counted).
#[derive(Clone)]
pub struct Region {
    /// First word; valid for `len_words` words while `_owner` lives.
    #[cfg(not(loom))]
    words: NonNull<AtomicU64>,
    #[cfg(not(loom))]
    len_words: usize,
    #[cfg(not(loom))]
    _owner: Owner,
    /// Under loom: the words themselves, `CACHE_LINE_BYTES / 8` per line.
    #[cfg(loom)]
    words: Arc<[AtomicU64]>,
}

// SAFETY: a `Region` is a shared reference to atomic words plus the owner that
// keeps them alive. Both owners are `Send + Sync` (`Arc<[Line]>` of atomics,
// `Arc<dyn RegionMemory>` with `RegionMemory: Send + Sync`), and every access
// through the pointer is atomic, so sharing or sending a region across threads
// is as safe as sharing `&[AtomicU64]` with its owner.
#[cfg(not(loom))]
unsafe impl Send for Region {}
#[cfg(not(loom))]
// SAFETY: as for `Send` above.
unsafe impl Sync for Region {}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Region({} B)", self.len_bytes())
    }
}

impl Region {
    /// Allocates a zeroed region of at least `bytes` bytes (rounded up to a whole
    /// cache line; at least one line).
    pub fn new(bytes: usize) -> Region {
        let n = bytes.div_ceil(CACHE_LINE_BYTES).max(1);
        #[cfg(not(loom))]
        {
            let lines: Arc<[Line]> = (0..n).map(|_| Line(Default::default())).collect();
            // `Line` is `repr(C)` with only `AtomicU64` fields and no padding,
            // so `n` lines are exactly `8 n` contiguous `AtomicU64`s. The
            // pointer comes from the whole slice, so it may reach every line.
            let words = NonNull::from(&*lines).cast::<AtomicU64>();
            Region {
                words,
                len_words: n * (CACHE_LINE_BYTES / 8),
                _owner: Owner::Heap(lines),
            }
        }
        #[cfg(loom)]
        {
            let words = (0..n * (CACHE_LINE_BYTES / 8))
                .map(|_| AtomicU64::new(0))
                .collect();
            Region { words }
        }
    }

    /// A region over `memory` (for instance a shared mapping another crate
    /// made), [`RegionMemory::len_bytes`] bytes long. The memory is not
    /// cleared. The region and its clones keep `memory` alive. Not available
    /// under `--cfg loom` (loom atomics are not plain memory).
    ///
    /// # Errors
    /// [`RegionMemoryError::Misaligned`] if the base is null or not
    /// [`CACHE_LINE_BYTES`]-aligned; [`RegionMemoryError::BadLength`] if the
    /// length is zero or not a multiple of [`CACHE_LINE_BYTES`].
    ///
    /// # Safety
    /// For as long as `memory` lives, `[base, base + len_bytes)` must stay
    /// mapped, readable and writable (a shared file mapping must not be
    /// truncated under it: seal it against shrinking first), and this process
    /// must access those bytes only with atomic operations (through regions or
    /// atomics), never through ordinary references. Other processes may write
    /// the bytes in any way: every 64-bit pattern is a valid `AtomicU64`, and
    /// the formats built on regions validate what they read.
    #[cfg(not(loom))]
    pub unsafe fn from_memory(memory: Arc<dyn RegionMemory>) -> Result<Region, RegionMemoryError> {
        let base = memory.base();
        let len_bytes = memory.len_bytes();
        let Some(words) = NonNull::new(base.cast::<AtomicU64>()) else {
            return Err(RegionMemoryError::Misaligned { address: 0 });
        };
        if !(base as usize).is_multiple_of(CACHE_LINE_BYTES) {
            return Err(RegionMemoryError::Misaligned {
                address: base as usize,
            });
        }
        if len_bytes == 0 || !len_bytes.is_multiple_of(CACHE_LINE_BYTES) {
            return Err(RegionMemoryError::BadLength { len_bytes });
        }
        Ok(Region {
            words,
            len_words: len_bytes / 8,
            _owner: Owner::Memory(memory),
        })
    }

    /// Size in bytes (a multiple of [`CACHE_LINE_BYTES`]).
    #[cfg(not(loom))]
    #[inline]
    pub fn len_bytes(&self) -> usize {
        self.len_words * 8
    }

    /// Size in bytes (a multiple of [`CACHE_LINE_BYTES`]).
    #[cfg(loom)]
    #[inline]
    pub fn len_bytes(&self) -> usize {
        self.words.len() * 8
    }

    #[cfg(loom)]
    #[inline]
    fn words(&self) -> &[AtomicU64] {
        &self.words
    }

    #[cfg(not(loom))]
    #[inline]
    fn words(&self) -> &[AtomicU64] {
        // SAFETY: `words` points to `len_words` atomic words that the owner
        // keeps alive at least as long as `self` (see `new` and `from_memory`).
        unsafe { std::slice::from_raw_parts(self.words.as_ptr(), self.len_words) }
    }

    /// Checks that `[offset, offset + len)` is inside the region and `offset` is
    /// 8-byte aligned.
    #[inline]
    pub fn check(&self, offset: usize, len: usize) -> Result<(), RegionError> {
        let ok = offset.is_multiple_of(8)
            && offset
                .checked_add(len)
                .is_some_and(|end| end <= self.len_bytes());
        if ok {
            Ok(())
        } else {
            Err(RegionError {
                offset,
                len,
                region_bytes: self.len_bytes(),
            })
        }
    }

    /// The atomic word at byte `offset`.
    ///
    /// # Panics
    /// If the offset is misaligned or out of range (a caller bug; validate
    /// untrusted offsets with [`Region::check`] first).
    #[inline]
    pub fn word(&self, offset: usize) -> &AtomicU64 {
        debug_assert_eq!(offset % 8, 0, "misaligned word offset {offset}");
        &self.words()[offset / 8]
    }

    /// Hints the CPU to bring the cache line holding byte `offset` into all
    /// cache levels (x86-64 `prefetcht0`; a no-op on other architectures and
    /// under loom).
    /// Batched table operations (Dandelion §6) call it for every request's
    /// home slot before executing any of them, so the requests' cache misses
    /// overlap instead of following one another.
    ///
    /// Safe: a prefetch never faults and changes no memory; it only affects
    /// timing.
    ///
    /// `offset` may be any byte offset inside the region (it need not be
    /// 8-byte aligned).
    ///
    /// # Panics
    /// If `offset` is out of range (like [`Region::word`]).
    #[inline]
    pub fn prefetch(&self, offset: usize) {
        let word = self.word(offset & !7);
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        // SAFETY: `_mm_prefetch` only hints the cache hierarchy; it does not
        // access memory architecturally and cannot fault, and `word` is a
        // valid reference into the region anyway.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(word as *const AtomicU64 as *const i8);
        }
        #[cfg(not(all(target_arch = "x86_64", not(loom))))]
        let _ = word;
    }

    /// Loads the word at `offset`.
    #[inline]
    pub fn load(&self, offset: usize, order: Ordering) -> u64 {
        self.word(offset).load(order)
    }

    /// Stores the word at `offset`.
    #[inline]
    pub fn store(&self, offset: usize, value: u64, order: Ordering) {
        self.word(offset).store(value, order)
    }

    /// Copies `dst.len()` bytes starting at `offset` out of the region, word by
    /// word (relaxed) in increasing address order — the order a DMA read uses.
    pub fn read_bytes(&self, offset: usize, dst: &mut [u8]) -> Result<(), RegionError> {
        self.check(offset, dst.len())?;
        let words = &self.words()[offset / 8..];
        let mut chunks = dst.chunks_exact_mut(8);
        let mut i = 0;
        for chunk in &mut chunks {
            chunk.copy_from_slice(&words[i].load(Ordering::Relaxed).to_le_bytes());
            i += 1;
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let w = words[i].load(Ordering::Relaxed).to_le_bytes();
            rest.copy_from_slice(&w[..rest.len()]);
        }
        Ok(())
    }

    /// Copies `src` into the region at `offset`, word by word (relaxed) in
    /// increasing address order. A trailing partial word keeps its other bytes.
    pub fn write_bytes(&self, offset: usize, src: &[u8]) -> Result<(), RegionError> {
        self.check(offset, src.len())?;
        let words = &self.words()[offset / 8..];
        let mut chunks = src.chunks_exact(8);
        let mut i = 0;
        for chunk in &mut chunks {
            words[i].store(
                u64::from_le_bytes(chunk.try_into().unwrap()),
                Ordering::Relaxed,
            );
            i += 1;
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = words[i].load(Ordering::Relaxed).to_le_bytes();
            w[..rest.len()].copy_from_slice(rest);
            words[i].store(u64::from_le_bytes(w), Ordering::Relaxed);
        }
        Ok(())
    }
}

// Plain unit tests: under loom a region only exists inside a model.
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Regions cross threads and `catch_unwind` boundaries whatever backs them.
    #[allow(dead_code)]
    fn auto_traits() {
        fn check<T: Send + Sync + std::panic::UnwindSafe + std::panic::RefUnwindSafe>() {}
        check::<Region>();
    }

    #[test]
    fn rounds_up_and_is_aligned() {
        let r = Region::new(65);
        assert_eq!(r.len_bytes(), 128);
        assert_eq!(r.word(0) as *const _ as usize % CACHE_LINE_BYTES, 0);
        assert_eq!(Region::new(0).len_bytes(), 64);
    }

    #[test]
    fn byte_copies_round_trip_and_keep_neighbours() {
        let r = Region::new(64);
        r.store(8, u64::MAX, Ordering::Relaxed);
        r.write_bytes(0, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
            .unwrap();
        let mut out = [0u8; 16];
        r.read_bytes(0, &mut out).unwrap();
        assert_eq!(&out[..11], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        assert_eq!(&out[11..], &[0xff; 5]);
    }

    #[test]
    fn prefetch_is_a_hint_only() {
        let r = Region::new(128);
        r.store(64, 7, Ordering::Relaxed);
        r.prefetch(0);
        r.prefetch(68);
        r.prefetch(120);
        assert_eq!(r.load(64, Ordering::Relaxed), 7);
    }

    /// Heap memory handed over as if mapped elsewhere: `len_bytes` bytes at
    /// `skew_bytes` past a 64-byte aligned allocation; flags its drop.
    struct TestMemory {
        alloc: *mut u8,
        layout: std::alloc::Layout,
        skew_bytes: usize,
        len_bytes: usize,
        dropped: Arc<std::sync::atomic::AtomicBool>,
    }

    // SAFETY: the allocation is only ever accessed through atomics.
    unsafe impl Send for TestMemory {}
    // SAFETY: as above.
    unsafe impl Sync for TestMemory {}

    impl TestMemory {
        fn make(
            skew_bytes: usize,
            len_bytes: usize,
        ) -> (Arc<dyn RegionMemory>, Arc<std::sync::atomic::AtomicBool>) {
            let layout = std::alloc::Layout::from_size_align(len_bytes + 64, 64).unwrap();
            // SAFETY: the layout has a nonzero size.
            let alloc = unsafe { std::alloc::alloc_zeroed(layout) };
            assert!(!alloc.is_null());
            let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let memory = TestMemory {
                alloc,
                layout,
                skew_bytes,
                len_bytes,
                dropped: dropped.clone(),
            };
            (Arc::new(memory), dropped)
        }
    }

    impl RegionMemory for TestMemory {
        fn base(&self) -> *mut u8 {
            self.alloc.wrapping_add(self.skew_bytes)
        }
        fn len_bytes(&self) -> usize {
            self.len_bytes
        }
    }

    impl Drop for TestMemory {
        fn drop(&mut self) {
            self.dropped.store(true, Ordering::SeqCst);
            // SAFETY: allocated in `new` with this layout.
            unsafe { std::alloc::dealloc(self.alloc, self.layout) };
        }
    }

    #[test]
    fn external_memory_is_shared_and_kept_alive() {
        let (memory, dropped) = TestMemory::make(0, 256);
        // SAFETY: `TestMemory` stays allocated until dropped and is accessed
        // only through the regions below.
        let a = unsafe { Region::from_memory(memory.clone()) }.unwrap();
        let b = unsafe { Region::from_memory(memory) }.unwrap();
        assert_eq!(a.len_bytes(), 256);
        a.write_bytes(64, b"shared mapping").unwrap();
        let mut out = [0u8; 14];
        b.read_bytes(64, &mut out).unwrap();
        assert_eq!(&out, b"shared mapping");
        b.store(248, 9, Ordering::Release);
        assert_eq!(a.load(248, Ordering::Acquire), 9);
        assert!(a.check(256, 8).is_err());
        let a2 = a.clone();
        drop(a);
        drop(b);
        assert!(
            !dropped.load(Ordering::SeqCst),
            "a clone still holds the memory"
        );
        assert_eq!(a2.load(248, Ordering::Relaxed), 9);
        drop(a2);
        assert!(dropped.load(Ordering::SeqCst));
    }

    #[test]
    fn external_memory_must_be_aligned_and_whole_lines() {
        for (skew, len, want) in [(8, 128, "misaligned"), (0, 100, "length"), (0, 0, "length")] {
            let (memory, dropped) = TestMemory::make(skew, len);
            // SAFETY: as above; refused before any access.
            let err = unsafe { Region::from_memory(memory) }.unwrap_err();
            match (err, want) {
                (RegionMemoryError::Misaligned { address }, "misaligned") => {
                    assert_eq!(address % 64, 8)
                }
                (RegionMemoryError::BadLength { len_bytes }, "length") => {
                    assert_eq!(len_bytes, len)
                }
                other => panic!("unexpected {other:?}"),
            }
            assert!(
                dropped.load(Ordering::SeqCst),
                "a refused owner is released"
            );
        }
    }

    #[test]
    fn rejects_out_of_range_and_misaligned() {
        let r = Region::new(64);
        assert!(r.read_bytes(60, &mut [0u8; 8]).is_err());
        assert!(r.write_bytes(3, &[0u8; 1]).is_err());
        assert!(r.check(usize::MAX - 7, 16).is_err());
        assert!(r.check(56, 8).is_ok());
    }
}
