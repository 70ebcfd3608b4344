use crate::DecodeError;

/// Bit position of `log2(bin_count)` in a DMA offset.
pub const DMA_BINS_SHIFT: u32 = 56;
/// Mask of the line-address part of an offset.
pub const DMA_LINE_MASK: usize = (1 << DMA_BINS_SHIFT) - 1;

/// Line 0 of the DMA space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaDescriptor {
    /// Bins of the current generation (a power of two).
    pub bin_count: usize,
    /// Lines in its link-bucket pool (index 0 unused).
    pub link_lines: usize,
}

impl DmaDescriptor {
    /// The 64-byte encoding: words `bin_count`, `link_lines`, then zeros.
    pub fn encode(&self) -> [u8; super::LINE_BYTES] {
        let mut out = [0u8; super::LINE_BYTES];
        out[..8].copy_from_slice(&(self.bin_count as u64).to_le_bytes());
        out[8..16].copy_from_slice(&(self.link_lines as u64).to_le_bytes());
        out
    }

    /// Decodes a descriptor line; the bin count must be a power of two below 2^40.
    pub fn decode(bytes: &[u8]) -> Result<DmaDescriptor, DecodeError> {
        let mut r = crate::Reader::new(bytes, "dlht dma descriptor");
        let bins = r.u64()?;
        let links = r.u64()?;
        if bins == 0 || !bins.is_power_of_two() || bins >= 1 << 40 || links >= 1 << 40 {
            return Err(DecodeError::Inconsistent {
                what: "dlht dma descriptor",
                detail: "bad counts",
            });
        }
        Ok(DmaDescriptor {
            bin_count: bins as usize,
            link_lines: links as usize,
        })
    }
}

/// Offset of `line` in a table of `bin_count` bins.
pub fn offset(bin_count: usize, line: usize) -> usize {
    ((bin_count.trailing_zeros() as usize) << DMA_BINS_SHIFT) | (line * super::LINE_BYTES)
}

/// Offset of the descriptor (valid whatever the table size).
pub const DESCRIPTOR_OFFSET: usize = 0;

/// Splits an offset into (bin count it was made for, line); `None` for the descriptor.
pub fn split(offset: usize) -> Option<(usize, usize)> {
    if offset == DESCRIPTOR_OFFSET {
        return None;
    }
    Some((
        1usize << (offset >> DMA_BINS_SHIFT),
        (offset & DMA_LINE_MASK) / super::LINE_BYTES,
    ))
}
