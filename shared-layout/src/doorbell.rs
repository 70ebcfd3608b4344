//! The doorbell: one cache line in shared memory, placed right after a ring
//! ([`crate::ring`]), on which that ring's consumer sleeps when the ring stays
//! empty, and which the ring's producer rings after publishing an entry. It
//! carries L5's "adaptive polling" (L5 §III-A.3: poll, then yield, then wait) across a
//! process boundary, where the consumer cannot be woken any other way.
//!
//! # Layout
//!
//! At a 64-byte aligned byte `offset` (for a ring with a data area of
//! `capacity` bytes at `ring_offset`, [`doorbell_offset`]`(ring_offset, capacity)`):
//!
//! | bytes from `offset` | contents |
//! |---|---|
//! | 0..8 | the doorbell word (little endian) |
//! | 8..64 | reserved, zero |
//!
//! The word's low 32 bits are the futex word the consumer sleeps on (the
//! address of the word is the address of its low half on little-endian
//! machines); its high 32 bits are zero. Bit [`DOORBELL_SLEEPING`] is set by
//! the consumer before its last check of the ring and cleared by whichever side
//! sees it first: the producer, which then wakes the consumer, or the consumer
//! when it stops waiting. Every other bit is zero. The protocol that uses it
//! (and the argument that no wake-up is lost) lives with the code that sleeps
//! and wakes, in the client crate (`splitkv_client::doorbell`): this crate
//! makes no system call.
//!
//! A reader treats the word as untrusted: a stray bit only costs a spurious
//! wake-up or a sleep that its timeout ends.

use crate::region::{Region, RegionError, CACHE_LINE_BYTES};
use crate::ring::ring_region_bytes;
use crate::sync::Ordering;

/// Bytes of one doorbell: a cache line of its own, so ringing it does not
/// false-share with the ring's indices.
pub const DOORBELL_BYTES: usize = CACHE_LINE_BYTES;

/// Byte offset of the doorbell word inside the doorbell.
pub const DOORBELL_WORD_OFFSET: usize = 0;

/// Bit of the doorbell word: the consumer is asleep or about to sleep, and the
/// producer must wake it.
pub const DOORBELL_SLEEPING: u64 = 1;

/// Bits of the doorbell word the futex compares (its low 32 bits).
pub const DOORBELL_FUTEX_MASK: u64 = 0xffff_ffff;

/// Byte offset of the doorbell of the ring at `ring_offset` whose data area has
/// `capacity_bytes`: the cache line right after the ring (saturating).
pub fn doorbell_offset(ring_offset: usize, capacity_bytes: usize) -> usize {
    ring_offset.saturating_add(ring_region_bytes(capacity_bytes))
}

/// Bytes a ring with a data area of `capacity_bytes` and its doorbell occupy
/// together: [`ring_region_bytes`]`(capacity_bytes)` + [`DOORBELL_BYTES`]
/// (saturating).
pub fn ring_with_doorbell_bytes(capacity_bytes: usize) -> usize {
    ring_region_bytes(capacity_bytes).saturating_add(DOORBELL_BYTES)
}

/// Writes an idle doorbell (every byte zero) at byte `offset` of `region`.
/// Must not run while either side uses it.
///
/// # Errors
/// [`RegionError`] if `offset` is not 8-byte aligned or the doorbell does not
/// fit in the region.
pub fn init_doorbell(region: &Region, offset: usize) -> Result<(), RegionError> {
    region.check(offset, DOORBELL_BYTES)?;
    for word in (0..DOORBELL_BYTES).step_by(8) {
        region.store(offset + word, 0, Ordering::Relaxed);
    }
    region.store(offset + DOORBELL_WORD_OFFSET, 0, Ordering::Release);
    Ok(())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::ring::{init_ring, RING_HEADER_BYTES};

    #[test]
    fn doorbell_follows_its_ring_on_its_own_line() {
        let capacity = 256;
        let at = doorbell_offset(64, capacity);
        assert_eq!(at, 64 + RING_HEADER_BYTES + capacity);
        assert_eq!(at % CACHE_LINE_BYTES, 0);
        assert_eq!(ring_with_doorbell_bytes(capacity), at - 64 + DOORBELL_BYTES);
        let region = Region::new(64 + ring_with_doorbell_bytes(capacity));
        init_ring(&region, 64, capacity).unwrap();
        region.store(at, u64::MAX, Ordering::Relaxed);
        init_doorbell(&region, at).unwrap();
        assert_eq!(region.load(at + DOORBELL_WORD_OFFSET, Ordering::Acquire), 0);
        assert!(init_doorbell(&region, at + 8).is_err());
        assert_eq!(doorbell_offset(usize::MAX, 64), usize::MAX);
    }
}
