//! The one error type every decoder in this crate returns for bad bytes.

/// Why a byte string is not a valid encoding. Decoders return this for any
/// malformed, truncated or oversized input; they never panic on bad bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Fewer bytes than the format needs.
    #[error("truncated {what}: need {need} B, have {have} B")]
    Truncated {
        /// What was being decoded.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// An enum tag (message kind, record kind, status) with no meaning.
    #[error("unknown {what} tag {tag}")]
    BadTag {
        /// Which field.
        what: &'static str,
        /// The value found.
        tag: u64,
    },
    /// A length or count field over its bound.
    #[error("{what} of {len} exceeds the maximum {max}")]
    TooLarge {
        /// Which field.
        what: &'static str,
        /// The value found.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// A magic number or format version that does not match.
    #[error("bad magic in {what}: {found:#x}")]
    BadMagic {
        /// What was being decoded.
        what: &'static str,
        /// The value found.
        found: u64,
    },
    /// Bytes left over after a complete encoding, or fields that contradict each other.
    #[error("inconsistent {what}: {detail}")]
    Inconsistent {
        /// What was being decoded.
        what: &'static str,
        /// Which check failed.
        detail: &'static str,
    },
}

/// A little-endian cursor over untrusted bytes. Every read is bounds-checked and
/// returns [`DecodeError::Truncated`] instead of panicking.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// A reader over `bytes`; `what` names the format in errors.
    pub fn new(bytes: &'a [u8], what: &'static str) -> Reader<'a> {
        Reader {
            bytes,
            pos: 0,
            what,
        }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// Takes the next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.remaining() < n {
            return Err(DecodeError::Truncated {
                what: self.what,
                need: self.pos + n,
                have: self.bytes.len(),
            });
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Reads a `u8`.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    /// Reads a little-endian `u16`.
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().unwrap()))
    }
    /// Reads a little-endian `u32`.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    /// Reads a little-endian `u64`.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    /// Reads a [`crate::TxId`] ([`crate::TX_ID_BYTES`] bytes; every pattern
    /// is an id).
    pub fn tx_id(&mut self) -> Result<crate::TxId, DecodeError> {
        Ok(crate::TxId::from_le_bytes(
            self.take(crate::TX_ID_BYTES)?.try_into().unwrap(),
        ))
    }
    /// Reads a [`crate::Key`].
    pub fn key(&mut self) -> Result<crate::Key, DecodeError> {
        let b = self.take(crate::KEY_BYTES)?;
        Ok(crate::Key::decode(b).expect("length checked"))
    }

    /// Fails with [`DecodeError::Inconsistent`] unless every byte was consumed.
    pub fn finish(&self) -> Result<(), DecodeError> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(DecodeError::Inconsistent {
                what: self.what,
                detail: "trailing bytes",
            })
        }
    }
}
