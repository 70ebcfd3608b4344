//! The DLHT's DMA address space (`splitkv_layout::dlht_layout::dma`): what a
//! NIC runtime's DMA engine reads when the host table is a DLHT.
//!
//! Reads copy words with Acquire loads in address order, so the NIC's "line,
//! then header again" vector validates a copy exactly as a lock-free host
//! reader does. A read addressed with another bin count than the current
//! generation's is refused as stale (a resize happened); the NIC then re-reads
//! the descriptor.

use super::Dlht;
use crate::table::sync::{pin, Ordering};
use splitkv_layout::dlht_layout::dma::{split, DmaDescriptor};
use splitkv_layout::dlht_layout::LINE_BYTES;
use splitkv_layout::RegionError;
use splitkv_nic::dma::{HostMemory, HostMemoryError};
use std::sync::Arc;

/// A DLHT seen as host memory by a DMA engine.
#[derive(Debug, Clone)]
pub struct DlhtDma {
    table: Arc<Dlht>,
}

impl DlhtDma {
    /// Exposes `table` to DMA readers.
    pub fn new(table: Arc<Dlht>) -> DlhtDma {
        DlhtDma { table }
    }
}

fn out_of_bounds(offset: usize, len: usize) -> HostMemoryError {
    HostMemoryError::OutOfBounds(RegionError {
        offset,
        len,
        region_bytes: 0,
    })
}

impl HostMemory for DlhtDma {
    fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), HostMemoryError> {
        let within = offset % LINE_BYTES;
        if !within.is_multiple_of(8)
            || !dst.len().is_multiple_of(8)
            || within + dst.len() > LINE_BYTES
        {
            return Err(out_of_bounds(offset, dst.len()));
        }
        let guard = pin();
        let g = self.table.current(&guard);
        let Some((bins, line)) = split(offset - within) else {
            let d = DmaDescriptor {
                bin_count: g.bin_count(),
                link_lines: g.links.len(),
            }
            .encode();
            dst.copy_from_slice(&d[within..within + dst.len()]);
            return Ok(());
        };
        if bins != g.bin_count() {
            return Err(HostMemoryError::Stale);
        }
        let src = if line >= 1 && line <= bins {
            &g.bins[line - 1]
        } else {
            g.links
                .get(line - bins)
                .filter(|_| line > bins)
                .ok_or_else(|| out_of_bounds(offset, dst.len()))?
        };
        for (i, chunk) in dst.chunks_exact_mut(8).enumerate() {
            chunk.copy_from_slice(&src.w[within / 8 + i].load(Ordering::Acquire).to_le_bytes());
        }
        Ok(())
    }

    /// Prefetches the one line a read at `offset` touches (DLHT reads never
    /// span lines), if it belongs to the current generation.
    fn prefetch(&self, offset: usize, _len: usize) {
        let guard = pin();
        let g = self.table.current(&guard);
        let Some((bins, line)) = split(offset - offset % LINE_BYTES) else {
            return;
        };
        if bins != g.bin_count() || line == 0 {
            return;
        }
        let src = if line <= bins {
            &g.bins[line - 1]
        } else {
            match g.links.get(line - bins) {
                Some(l) => l,
                None => return,
            }
        };
        crate::table::sync::prefetch(src);
    }
}
