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
//! Under `--cfg loom` the words are loom atomics ([`crate::sync`]), stored as a
//! plain `Arc<[AtomicU64]>` (loom atomics are not plain memory, so the
//! cache-line array below cannot be reinterpreted as words); regions must then
//! be created inside a loom model.

use crate::sync::{AtomicU64, Ordering};
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

/// A shared, zero-initialised, cache-line aligned block of host memory.
/// Cloning shares the same memory (it is reference counted).
#[derive(Clone)]
pub struct Region {
    #[cfg(not(loom))]
    lines: Arc<[Line]>,
    /// Under loom: the words themselves, `CACHE_LINE_BYTES / 8` per line.
    #[cfg(loom)]
    words: Arc<[AtomicU64]>,
}

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
            Region { lines }
        }
        #[cfg(loom)]
        {
            let words = (0..n * (CACHE_LINE_BYTES / 8))
                .map(|_| AtomicU64::new(0))
                .collect();
            Region { words }
        }
    }

    /// Size in bytes (a multiple of [`CACHE_LINE_BYTES`]).
    #[cfg(not(loom))]
    #[inline]
    pub fn len_bytes(&self) -> usize {
        self.lines.len() * CACHE_LINE_BYTES
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
        // SAFETY: `Line` is `repr(C)` with only `AtomicU64` fields and no padding,
        // so `n` lines are exactly `8 n` contiguous `AtomicU64`s.
        unsafe {
            std::slice::from_raw_parts(
                self.lines.as_ptr() as *const AtomicU64,
                self.lines.len() * (CACHE_LINE_BYTES / 8),
            )
        }
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

    #[test]
    fn rejects_out_of_range_and_misaligned() {
        let r = Region::new(64);
        assert!(r.read_bytes(60, &mut [0u8; 8]).is_err());
        assert!(r.write_bytes(3, &[0u8; 1]).is_err());
        assert!(r.check(usize::MAX - 7, 16).is_err());
        assert!(r.check(56, 8).is_ok());
    }
}
