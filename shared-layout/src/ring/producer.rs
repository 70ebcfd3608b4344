//! The producing end of a ring ([`RingProducer`]) and the word writer it
//! stores entries with.

use super::*;

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
}
