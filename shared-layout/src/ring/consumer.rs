//! The consuming end of a ring ([`RingConsumer`]).

use super::*;

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
