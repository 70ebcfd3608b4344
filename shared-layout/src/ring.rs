//! Single-producer/single-consumer ring of variable-size messages inside a
//! caller-provided [`Region`]: the host↔NIC rings ("PCIe"), the host log and the
//! application ring API are all instances of it.
//!
//! The message discipline follows L5 §III-A.2 ("Ring Buffer Management"): a size
//! word followed by the message bytes, with the bytes written before the size is
//! made visible. Two changes make it portable and checkable:
//!
//! - visibility is carried by a monotone producer counter (`tail`) stored with
//!   Release after the entry is written and loaded with Acquire by the consumer,
//!   so the ring is correct on weakly ordered Arm SoCs, not only under x86 TSO,
//!   and the consumer never has to zero consumed memory to poll it;
//! - instead of L5's double virtual mapping, an entry that would cross the end
//!   of the data area is preceded by a padding entry that sends the consumer back
//!   to the start.
//!
//! # Layout
//!
//! At a 64-byte aligned byte `offset` in the region (all words little endian):
//!
//! | bytes from `offset` | contents |
//! |---|---|
//! | 0..8 | [`RING_MAGIC`] |
//! | 8..16 | capacity of the data area in bytes (power of two in [[`RING_CAPACITY_MIN_BYTES`], [`RING_CAPACITY_MAX_BYTES`]]) |
//! | 64..72 | `tail`: bytes ever produced (written only by the producer) |
//! | 128..136 | `head`: bytes ever consumed (written only by the consumer) |
//! | 192..192 + capacity | data area |
//!
//! The three header words sit on separate cache lines so the two sides do not
//! false-share. An entry at data position `tail mod capacity` is a length word
//! (payload bytes in the low 32 bits, high 32 bits zero) followed by the payload,
//! zero-padded to a multiple of 8 bytes; see [`ring_entry_bytes`]. The length word
//! [`RING_PAD_MARKER`] is a padding entry: it covers the rest of the data area and
//! the next entry starts at data position 0. An entry never straddles the end of
//! the data area.
//!
//! The consumer treats everything it loads from shared memory as untrusted and
//! returns [`RingError::Corrupt`] for anything the producer could not have written;
//! after that, both ends stay failed ("poisoned"): nothing more is read or written.

use crate::region::{Region, RegionError, CACHE_LINE_BYTES};
use crate::sync::Ordering;

mod consumer;
mod producer;

pub use consumer::RingConsumer;
pub use producer::RingProducer;

/// Bytes of ring header before the data area: magic and capacity, `tail`, `head`,
/// each on its own cache line.
pub const RING_HEADER_BYTES: usize = 3 * CACHE_LINE_BYTES;

/// Largest payload of one ring entry, in bytes: room for the largest host↔NIC
/// message and host-log entry, a transaction of 16 values of 4 KiB
/// ([`crate::TX_VALUE_BYTES_MAX`]) with its framing. A ring whose capacity is
/// smaller carries at most [`ring_payload_bytes_max`] bytes per entry.
pub const RING_ENTRY_BYTES_MAX: usize = 128 * 1024;

/// Smallest data-area capacity in bytes.
pub const RING_CAPACITY_MIN_BYTES: usize = 64;

/// Largest data-area capacity in bytes (1 GiB).
pub const RING_CAPACITY_MAX_BYTES: usize = 1 << 30;

/// Magic word at the start of an initialised ring header ("SKVRING1" in ASCII).
pub const RING_MAGIC: u64 = u64::from_le_bytes(*b"SKVRING1");

/// Bytes of the length word that starts every entry.
pub const RING_LEN_WORD_BYTES: usize = 8;

/// Length word of a padding entry: skip to the start of the data area.
pub const RING_PAD_MARKER: u64 = u64::MAX;

const MAGIC_OFFSET: usize = 0;
const CAPACITY_OFFSET: usize = 8;
const TAIL_OFFSET: usize = CACHE_LINE_BYTES;
const HEAD_OFFSET: usize = 2 * CACHE_LINE_BYTES;
const DATA_OFFSET: usize = RING_HEADER_BYTES;

/// Why a ring operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    /// Not enough free space for the entry now; retry after the consumer advances.
    #[error("ring full")]
    Full,
    /// The payload can never fit: over [`RING_ENTRY_BYTES_MAX`] or over what the
    /// ring's capacity allows ([`ring_payload_bytes_max`]).
    #[error("ring entry payload of {len} B exceeds the maximum {max} B")]
    TooLarge {
        /// Payload bytes requested.
        len: usize,
        /// Largest payload this ring accepts, in bytes.
        max: usize,
    },
    /// Shared memory holds something the other side could not have written.
    /// The end that saw it stays failed.
    #[error("ring corrupt: {0}")]
    Corrupt(&'static str),
    /// The ring header or the arguments describing it are invalid (bad magic,
    /// capacity, offset alignment, or inconsistent indices at attach time).
    #[error("bad ring header: {0}")]
    BadHeader(&'static str),
    /// The ring does not fit inside the region.
    #[error(transparent)]
    Region(#[from] RegionError),
}

/// Bytes a ring with a data area of `capacity_bytes` occupies in a region:
/// [`RING_HEADER_BYTES`] + `capacity_bytes` (saturating; capacity is not validated).
pub fn ring_region_bytes(capacity_bytes: usize) -> usize {
    RING_HEADER_BYTES.saturating_add(capacity_bytes)
}

/// Bytes one entry with `payload_bytes` of payload takes in the data area: the
/// length word plus the payload rounded up to 8 bytes (saturating).
pub const fn ring_entry_bytes(payload_bytes: usize) -> usize {
    (payload_bytes.saturating_add(7) & !7).saturating_add(RING_LEN_WORD_BYTES)
}

/// Largest payload, in bytes, a ring with a data area of `capacity_bytes` accepts:
/// the smaller of [`RING_ENTRY_BYTES_MAX`] and `capacity_bytes - 8`.
pub fn ring_payload_bytes_max(capacity_bytes: usize) -> usize {
    RING_ENTRY_BYTES_MAX.min(capacity_bytes.saturating_sub(RING_LEN_WORD_BYTES))
}

fn validate_capacity(capacity_bytes: u64) -> Result<usize, RingError> {
    match usize::try_from(capacity_bytes) {
        Ok(c)
            if c.is_power_of_two()
                && (RING_CAPACITY_MIN_BYTES..=RING_CAPACITY_MAX_BYTES).contains(&c) =>
        {
            Ok(c)
        }
        _ => Err(RingError::BadHeader(
            "capacity is not a power of two in [64 B, 1 GiB]",
        )),
    }
}

fn validate_offset(offset: usize) -> Result<(), RingError> {
    if offset & (CACHE_LINE_BYTES - 1) == 0 {
        Ok(())
    } else {
        Err(RingError::BadHeader(
            "ring offset is not cache-line aligned",
        ))
    }
}

/// Writes an empty ring header for a data area of `capacity_bytes` at byte
/// `offset` of `region`: `head = tail = 0`, then the magic word (Release), so an
/// end that attaches afterwards sees a complete header. The data area is not
/// cleared. Must not run while either end is attached.
///
/// # Errors
/// [`RingError::BadHeader`] if `offset` is not 64-byte aligned or `capacity_bytes`
/// is not a power of two in [[`RING_CAPACITY_MIN_BYTES`], [`RING_CAPACITY_MAX_BYTES`]];
/// [`RingError::Region`] if [`ring_region_bytes`]`(capacity_bytes)` bytes at
/// `offset` do not fit in the region.
pub fn init_ring(region: &Region, offset: usize, capacity_bytes: usize) -> Result<(), RingError> {
    validate_offset(offset)?;
    let capacity = validate_capacity(capacity_bytes as u64)?;
    region.check(offset, ring_region_bytes(capacity))?;
    region.store(offset + MAGIC_OFFSET, 0, Ordering::Release);
    region.store(offset + CAPACITY_OFFSET, capacity as u64, Ordering::Relaxed);
    region.store(offset + TAIL_OFFSET, 0, Ordering::Relaxed);
    region.store(offset + HEAD_OFFSET, 0, Ordering::Relaxed);
    region.store(offset + MAGIC_OFFSET, RING_MAGIC, Ordering::Release);
    Ok(())
}

/// Where a ring lives, as validated at attach time.
#[derive(Debug)]
struct RingLayout {
    region: Region,
    /// Byte offset of the header in the region.
    base: usize,
    capacity_bytes: usize,
}

/// What attach found in the header.
struct Attached {
    layout: RingLayout,
    head: u64,
    tail: u64,
}

impl RingLayout {
    fn attach(region: Region, offset: usize) -> Result<Attached, RingError> {
        validate_offset(offset)?;
        region.check(offset, RING_HEADER_BYTES)?;
        if region.load(offset + MAGIC_OFFSET, Ordering::Acquire) != RING_MAGIC {
            return Err(RingError::BadHeader("bad magic"));
        }
        let capacity_bytes =
            validate_capacity(region.load(offset + CAPACITY_OFFSET, Ordering::Relaxed))?;
        region.check(offset, ring_region_bytes(capacity_bytes))?;
        let tail = region.load(offset + TAIL_OFFSET, Ordering::Acquire);
        let head = region.load(offset + HEAD_OFFSET, Ordering::Acquire);
        if tail & 7 != 0 || head & 7 != 0 {
            return Err(RingError::BadHeader("ring index is not a multiple of 8"));
        }
        if tail.wrapping_sub(head) > capacity_bytes as u64 {
            return Err(RingError::BadHeader(
                "tail is behind head or more than a capacity ahead",
            ));
        }
        Ok(Attached {
            layout: RingLayout {
                region,
                base: offset,
                capacity_bytes,
            },
            head,
            tail,
        })
    }

    #[inline]
    fn capacity(&self) -> u64 {
        self.capacity_bytes as u64
    }

    /// Data-area position of the monotone counter `index`.
    #[inline]
    fn position(&self, index: u64) -> u64 {
        index & (self.capacity() - 1)
    }

    /// Region byte offset of data-area position `pos` (< capacity).
    #[inline]
    fn data_offset(&self, pos: u64) -> usize {
        debug_assert!(pos < self.capacity());
        self.base + DATA_OFFSET + pos as usize
    }

    #[inline]
    fn load_index(&self, field: usize) -> u64 {
        self.region.load(self.base + field, Ordering::Acquire)
    }

    #[inline]
    fn store_index(&self, field: usize, value: u64) {
        self.region
            .store(self.base + field, value, Ordering::Release)
    }
}

/// Allocates a [`Region`] of [`ring_region_bytes`]`(capacity_bytes)`, initialises a
/// ring at offset 0 and attaches both ends. For tests, the simulator and
/// in-process drivers.
///
/// # Errors
/// [`RingError::BadHeader`] if `capacity_bytes` is not a power of two in
/// [[`RING_CAPACITY_MIN_BYTES`], [`RING_CAPACITY_MAX_BYTES`]] (checked before allocating).
pub fn ring_pair(capacity_bytes: usize) -> Result<(RingProducer, RingConsumer), RingError> {
    let capacity = validate_capacity(capacity_bytes as u64)?;
    let region = Region::new(ring_region_bytes(capacity));
    init_ring(&region, 0, capacity)?;
    let producer = RingProducer::attach(region.clone(), 0)?;
    let consumer = RingConsumer::attach(region, 0)?;
    Ok((producer, consumer))
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_sizes() {
        assert_eq!(ring_entry_bytes(0), 8);
        assert_eq!(ring_entry_bytes(1), 16);
        assert_eq!(ring_entry_bytes(8), 16);
        assert_eq!(ring_entry_bytes(9), 24);
        assert_eq!(ring_entry_bytes(usize::MAX), usize::MAX);
        assert_eq!(ring_payload_bytes_max(64), 56);
        assert_eq!(ring_payload_bytes_max(1 << 20), RING_ENTRY_BYTES_MAX);
    }
}
