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

/// Gathers byte slices into whole little-endian words stored (Relaxed) at
/// increasing 8-aligned offsets; the last partial word is zero-filled.
struct WordWriter<'r> {
    region: &'r Region,
    offset: usize,
    word: [u8; 8],
    fill: usize,
}

impl<'r> WordWriter<'r> {
    fn new(region: &'r Region, offset: usize) -> Self {
        WordWriter {
            region,
            offset,
            word: [0; 8],
            fill: 0,
        }
    }

    fn flush_word(&mut self) {
        self.region.store(
            self.offset,
            u64::from_le_bytes(self.word),
            Ordering::Relaxed,
        );
        self.offset += 8;
        self.word = [0; 8];
        self.fill = 0;
    }

    fn write(&mut self, mut bytes: &[u8]) {
        if self.fill > 0 {
            let n = (8 - self.fill).min(bytes.len());
            self.word[self.fill..self.fill + n].copy_from_slice(&bytes[..n]);
            self.fill += n;
            bytes = &bytes[n..];
            if self.fill < 8 {
                return;
            }
            self.flush_word();
        }
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(chunk);
            self.region
                .store(self.offset, u64::from_le_bytes(w), Ordering::Relaxed);
            self.offset += 8;
        }
        let rest = chunks.remainder();
        self.word[..rest.len()].copy_from_slice(rest);
        self.fill = rest.len();
    }

    fn finish(mut self) {
        if self.fill > 0 {
            self.flush_word();
        }
    }
}

/// The producing end of a ring (L5 §III-A.2): appends entries and publishes them
/// with a Release store of `tail`. It caches the consumer's `head` and reloads it
/// (Acquire) only when the cached value shows too little free space.
///
/// Exactly one producer may be attached to a ring at a time; it is `Send` but not
/// `Clone`.
#[derive(Debug)]
pub struct RingProducer {
    ring: RingLayout,
    /// Bytes produced so far (local copy of the shared `tail`, which only we write).
    tail: u64,
    /// Last `head` loaded from shared memory.
    head_cache: u64,
    /// Set when the consumer's `head` was found corrupt; every later call fails.
    poisoned: Option<&'static str>,
}

impl RingProducer {
    /// Attaches the producing end of the ring whose header is at byte `offset` of
    /// `region` (written by [`init_ring`]), continuing from the `tail` stored there.
    ///
    /// # Errors
    /// [`RingError::BadHeader`] for a misaligned offset, bad magic, bad capacity or
    /// inconsistent `head`/`tail`; [`RingError::Region`] if the ring does not fit.
    pub fn attach(region: Region, offset: usize) -> Result<RingProducer, RingError> {
        let Attached { layout, head, tail } = RingLayout::attach(region, offset)?;
        Ok(RingProducer {
            ring: layout,
            tail,
            head_cache: head,
            poisoned: None,
        })
    }

    /// Appends one entry holding `payload` and publishes it. Returns the ring's
    /// produced-bytes counter (`tail`) after this entry: once the consumer's
    /// [`RingConsumer::consumed_bytes`] is at least this value, the entry has been
    /// consumed (the host log acknowledgement, Xenic §4.2 step 7, relies on this).
    ///
    /// # Errors
    /// [`RingError::TooLarge`] if the payload exceeds [`Self::payload_bytes_max`]
    /// (nothing is written); [`RingError::Full`] if there is no room yet (a padding
    /// entry may have been published, which changes nothing visible to callers);
    /// [`RingError::Corrupt`] if the consumer's `head` is invalid.
    pub fn try_push(&mut self, payload: &[u8]) -> Result<u64, RingError> {
        self.try_push_parts(&[payload])
    }

    /// Like [`Self::try_push`], with the payload of one entry gathered from the
    /// concatenation of `parts` (no intermediate copy).
    ///
    /// # Errors
    /// As [`Self::try_push`], with the total length of `parts` as the payload length.
    pub fn try_push_parts(&mut self, parts: &[&[u8]]) -> Result<u64, RingError> {
        if let Some(why) = self.poisoned {
            return Err(RingError::Corrupt(why));
        }
        let len = parts
            .iter()
            .try_fold(0usize, |sum, p| sum.checked_add(p.len()))
            .unwrap_or(usize::MAX);
        let max = self.payload_bytes_max();
        if len > max {
            return Err(RingError::TooLarge { len, max });
        }
        let entry_bytes = ring_entry_bytes(len) as u64;
        let capacity = self.ring.capacity();
        let mut pos = self.ring.position(self.tail);
        let to_end = capacity - pos;
        if entry_bytes > to_end {
            // Wrap: a padding entry covers the rest of the data area. It is
            // written as soon as it fits, even if the entry itself does not fit
            // yet, so the consumer can drain it and free the start of the area.
            if !self.has_free(to_end)? {
                return Err(RingError::Full);
            }
            self.ring.region.store(
                self.ring.data_offset(pos),
                RING_PAD_MARKER,
                Ordering::Relaxed,
            );
            self.tail = self.tail.wrapping_add(to_end);
            pos = 0;
            if !self.has_free(entry_bytes)? {
                self.ring.store_index(TAIL_OFFSET, self.tail);
                return Err(RingError::Full);
            }
        } else if !self.has_free(entry_bytes)? {
            return Err(RingError::Full);
        }
        debug_assert!(pos + entry_bytes <= capacity);
        let at = self.ring.data_offset(pos);
        self.ring.region.store(at, len as u64, Ordering::Relaxed);
        let mut writer = WordWriter::new(&self.ring.region, at + RING_LEN_WORD_BYTES);
        for part in parts {
            writer.write(part);
        }
        writer.finish();
        self.tail = self.tail.wrapping_add(entry_bytes);
        // Publish: the length word and payload above happen-before this store.
        self.ring.store_index(TAIL_OFFSET, self.tail);
        Ok(self.tail)
    }

    /// Whether `bytes` more can be produced now, reloading `head` if the cached
    /// value says no.
    fn has_free(&mut self, bytes: u64) -> Result<bool, RingError> {
        let capacity = self.ring.capacity();
        if capacity - self.tail.wrapping_sub(self.head_cache) >= bytes {
            return Ok(true);
        }
        self.reload_head()?;
        Ok(capacity - self.tail.wrapping_sub(self.head_cache) >= bytes)
    }

    fn reload_head(&mut self) -> Result<(), RingError> {
        let head = self.ring.load_index(HEAD_OFFSET);
        // head must lie in [head_cache, tail] (modulo 2^64) and be 8-aligned.
        if head & 7 != 0
            || head.wrapping_sub(self.head_cache) > self.tail.wrapping_sub(self.head_cache)
        {
            let why = "consumer head moved backwards, past tail, or is misaligned";
            self.poisoned = Some(why);
            return Err(RingError::Corrupt(why));
        }
        self.head_cache = head;
        Ok(())
    }

    /// Free bytes in the data area right now (reloads `head`). An entry needs
    /// [`ring_entry_bytes`]`(len)` contiguous bytes, plus padding if it would cross
    /// the end, so a push of that size can still be `Full`. 0 once corrupt.
    pub fn free_bytes(&mut self) -> usize {
        if self.poisoned.is_some() || self.reload_head().is_err() {
            return 0;
        }
        (self.ring.capacity() - self.tail.wrapping_sub(self.head_cache)) as usize
    }

    /// Bytes in the data area (a power of two).
    pub fn capacity_bytes(&self) -> usize {
        self.ring.capacity_bytes
    }

    /// Largest payload this ring accepts, in bytes ([`ring_payload_bytes_max`]).
    pub fn payload_bytes_max(&self) -> usize {
        ring_payload_bytes_max(self.ring.capacity_bytes)
    }

    /// Bytes produced so far, padding included (the value the last successful
    /// push returned, or the stored `tail` at attach).
    pub fn produced_bytes(&self) -> u64 {
        self.tail
    }
}

/// The consuming end of a ring (L5 §III-A.2): reads entries after an Acquire
/// load of `tail`, and frees them with a Release store of `head`. It caches the
/// producer's `tail` and reloads it only when it has consumed up to the cached
/// value. Everything read from shared memory is validated.
///
/// Exactly one consumer may be attached to a ring at a time; it is `Send` but not
/// `Clone`.
#[derive(Debug)]
pub struct RingConsumer {
    ring: RingLayout,
    /// Bytes consumed so far (local copy of the shared `head`, which only we write).
    head: u64,
    /// Last valid `tail` loaded from shared memory.
    tail_cache: u64,
    /// Set when shared memory was found corrupt; every later call fails.
    poisoned: Option<&'static str>,
}

impl RingConsumer {
    /// Attaches the consuming end of the ring whose header is at byte `offset` of
    /// `region` (written by [`init_ring`]), continuing from the `head` stored there.
    ///
    /// # Errors
    /// As [`RingProducer::attach`].
    pub fn attach(region: Region, offset: usize) -> Result<RingConsumer, RingError> {
        let Attached { layout, head, tail } = RingLayout::attach(region, offset)?;
        Ok(RingConsumer {
            ring: layout,
            head,
            tail_cache: tail,
            poisoned: None,
        })
    }

    fn corrupt(&mut self, why: &'static str) -> RingError {
        self.poisoned = Some(why);
        RingError::Corrupt(why)
    }

    /// Reloads `tail` (Acquire) and validates it; returns whether anything is
    /// unconsumed.
    fn reload_tail(&mut self) -> Result<bool, RingError> {
        let tail = self.ring.load_index(TAIL_OFFSET);
        if tail & 7 != 0 {
            return Err(self.corrupt("producer tail is not a multiple of 8"));
        }
        // Counters are compared modulo 2^64: a "negative" step is backwards.
        if (tail.wrapping_sub(self.tail_cache) as i64) < 0 {
            return Err(self.corrupt("producer tail moved backwards"));
        }
        let ahead = tail.wrapping_sub(self.head);
        if ahead > self.ring.capacity() {
            return Err(self.corrupt("producer tail is beyond head + capacity"));
        }
        self.tail_cache = tail;
        Ok(ahead > 0)
    }

    /// Skips padding and returns the data-area position and length word of the
    /// next message entry, if one has been produced.
    fn next_entry(&mut self) -> Result<Option<(u64, u64)>, RingError> {
        if let Some(why) = self.poisoned {
            return Err(RingError::Corrupt(why));
        }
        // At most one padding entry precedes a message: after it we are at data
        // position 0, where padding is invalid.
        for _ in 0..2 {
            if self.head == self.tail_cache && !self.reload_tail()? {
                return Ok(None);
            }
            let pos = self.ring.position(self.head);
            let word = self
                .ring
                .region
                .load(self.ring.data_offset(pos), Ordering::Relaxed);
            if word != RING_PAD_MARKER {
                return Ok(Some((pos, word)));
            }
            if pos == 0 {
                return Err(self.corrupt("padding entry at the start of the data area"));
            }
            let skip = self.ring.capacity() - pos;
            if skip > self.tail_cache.wrapping_sub(self.head) {
                return Err(self.corrupt("padding entry extends past the produced bytes"));
            }
            self.head = self.head.wrapping_add(skip);
            self.ring.store_index(HEAD_OFFSET, self.head);
        }
        Err(self.corrupt("padding entry followed by padding"))
    }

    /// Pops the next entry's payload into `out` (cleared first; its capacity is
    /// reused). Returns `Ok(false)` if no entry is available, `Ok(true)` otherwise;
    /// `out.len()` is then at most [`RING_ENTRY_BYTES_MAX`]. Releases the entry's
    /// bytes to the producer (Release store of `head`) before returning.
    ///
    /// # Errors
    /// [`RingError::Corrupt`] if the shared indices or the entry's length word are
    /// impossible (tail moving backwards or past head + capacity, a length over
    /// [`RING_ENTRY_BYTES_MAX`] or past the produced bytes, an entry crossing the
    /// end of the data area, misplaced padding). The consumer then stays failed.
    pub fn try_pop(&mut self, out: &mut Vec<u8>) -> Result<bool, RingError> {
        out.clear();
        let Some((pos, word)) = self.next_entry()? else {
            return Ok(false);
        };
        if word >> 32 != 0 {
            return Err(self.corrupt("length word has nonzero high bits"));
        }
        let len = word as usize;
        if len > RING_ENTRY_BYTES_MAX {
            return Err(self.corrupt("entry length exceeds RING_ENTRY_BYTES_MAX"));
        }
        let entry_bytes = ring_entry_bytes(len) as u64;
        if entry_bytes > self.tail_cache.wrapping_sub(self.head) {
            return Err(self.corrupt("entry extends past the produced bytes"));
        }
        if pos + entry_bytes > self.ring.capacity() {
            return Err(self.corrupt("entry crosses the end of the data area"));
        }
        out.resize(len, 0);
        let at = self.ring.data_offset(pos) + RING_LEN_WORD_BYTES;
        if let Err(e) = self.ring.region.read_bytes(at, out) {
            // Unreachable: attach checked that the data area is in the region.
            out.clear();
            return Err(e.into());
        }
        self.head = self.head.wrapping_add(entry_bytes);
        // Release: our reads of the entry happen-before the producer reuses it.
        self.ring.store_index(HEAD_OFFSET, self.head);
        Ok(true)
    }

    /// Whether no entry is available now (reloads `tail` if needed, and consumes
    /// a trailing padding entry). Returns `false` if the ring is corrupt, so that
    /// the caller's next [`Self::try_pop`] reports the error.
    pub fn is_empty(&mut self) -> bool {
        matches!(self.next_entry(), Ok(None))
    }

    /// Bytes consumed so far, padding included: monotone, and comparable with the
    /// values [`RingProducer::try_push`] returns (an entry is consumed once this is
    /// at least the value its push returned).
    pub fn consumed_bytes(&self) -> u64 {
        self.head
    }

    /// Bytes in the data area (a power of two).
    pub fn capacity_bytes(&self) -> usize {
        self.ring.capacity_bytes
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
    fn word_writer_gathers_unaligned_parts() {
        let region = Region::new(64);
        region.write_bytes(0, &[0xff; 64]).unwrap();
        let mut w = WordWriter::new(&region, 8);
        w.write(&[1, 2, 3]);
        w.write(&[]);
        w.write(&[4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
        w.write(&[14]);
        w.finish();
        let mut out = [0u8; 32];
        region.read_bytes(0, &mut out).unwrap();
        let mut expected = [0u8; 32];
        expected[..8].copy_from_slice(&[0xff; 8]);
        for (i, b) in expected[8..22].iter_mut().enumerate() {
            *b = i as u8 + 1;
        }
        expected[24..].copy_from_slice(&[0xff; 8]);
        assert_eq!(out, expected);
    }

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
