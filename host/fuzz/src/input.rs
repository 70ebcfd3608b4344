//! Fuzz bytes as a stream of choices.

/// Reads choices from the front of a fuzz input; every read past the end
/// yields `None`, so a short input simply ends the run.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    /// A cursor over `data`.
    pub fn new(data: &'a [u8]) -> Input<'a> {
        Input { data }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.data.len()
    }

    /// The next `n` bytes, or `None` if fewer remain.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.data.len() < n {
            return None;
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Some(head)
    }

    /// One byte.
    pub fn u8(&mut self) -> Option<u8> {
        self.bytes(1).map(|b| b[0])
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self) -> Option<u16> {
        self.bytes(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self) -> Option<u64> {
        self.bytes(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    /// A chunk framed as `len: u16` little endian, then `len` bytes; a chunk
    /// cut short by the end of the input is returned as far as it goes.
    pub fn chunk(&mut self) -> Option<&'a [u8]> {
        let len = self.u16()? as usize;
        let n = len.min(self.data.len());
        self.bytes(n)
    }
}

/// Appends `bytes` framed as an [`Input::chunk`].
///
/// # Panics
/// If `bytes` is longer than `u16::MAX` (seed generation only).
pub fn push_chunk(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = u16::try_from(bytes.len()).expect("chunk over 64 KiB");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(bytes);
}
