//! Local DMA engine: the NIC runtime shares the host's address space (dedicated
//! host cores, or a simulation), so a DMA is a word-wise copy. Requests still
//! complete asynchronously — at the first `poll` at least `latency_ns` after
//! submission — so the protocol engine is written exactly as for a real NIC.

use super::{
    DmaCompletion, DmaDone, DmaEngine, DmaError, DmaRead, HostMemory, DMA_APPENDS_INFLIGHT_MAX,
    DMA_READS_INFLIGHT_MAX, DMA_VECTOR_LEN_MAX,
};
use crate::Nanos;
use splitkv_layout::ring::{RingError, RingProducer};
use std::collections::VecDeque;
use std::sync::Arc;

/// Completion-buffer bytes reserved at start-up: a poll's reads of 16 value
/// copies of 4 KiB; more grow the buffer once.
const READ_DATA_BYTES_RESERVED: usize = 64 * 1024;

/// Entry buffers kept for reuse after their appends completed.
pub const APPEND_SPARES_MAX: usize = 256;

/// Bytes of entry buffers kept for reuse: a buffer is kept only while the
/// spares hold less than this, so a burst of 64 KiB entries (16 values of
/// 4 KiB) does not pin 256 × 64 KiB of memory.
pub const APPEND_SPARE_BYTES_MAX: usize = 1 << 20;

#[derive(Debug)]
struct PendingRead {
    due: Nanos,
    token: u64,
    reads: [DmaRead; DMA_VECTOR_LEN_MAX],
    n: u8,
}

#[derive(Debug)]
struct PendingAppend {
    due: Nanos,
    token: u64,
    entry: Vec<u8>,
}

/// A DMA engine over host memory in the same address space.
#[derive(Debug)]
pub struct LocalDma {
    table: Arc<dyn HostMemory>,
    log: RingProducer,
    latency_ns: Nanos,
    reads: VecDeque<PendingRead>,
    appends: VecDeque<PendingAppend>,
    spare: Vec<Vec<u8>>,
    /// Capacity of the buffers in `spare`, in bytes.
    spare_bytes: usize,
    data: Vec<u8>,
    log_full_stalls: u64,
    /// Prefetch each read vector's lines when it is submitted.
    prefetch: bool,
}

impl LocalDma {
    /// An engine reading the host table through `table` and appending to the host log through `log`;
    /// each request completes no earlier than `latency_ns` after submission.
    pub fn new(table: Arc<dyn HostMemory>, log: RingProducer, latency_ns: Nanos) -> LocalDma {
        LocalDma {
            table,
            log,
            latency_ns,
            reads: VecDeque::with_capacity(256),
            appends: VecDeque::with_capacity(256),
            spare: Vec::new(),
            spare_bytes: 0,
            data: Vec::with_capacity(READ_DATA_BYTES_RESERVED),
            log_full_stalls: 0,
            prefetch: true,
        }
    }

    /// Whether [`DmaEngine::submit_read`] prefetches the vector's lines
    /// ([`HostMemory::prefetch`]) so the copy at the next poll finds them in
    /// cache (default on). Off, every copy takes its misses one after another.
    pub fn set_prefetch(&mut self, on: bool) {
        self.prefetch = on;
    }

    /// Bytes of entry buffers kept for reuse: at most
    /// [`APPEND_SPARE_BYTES_MAX`] (plus nothing: a buffer that would exceed it
    /// is dropped).
    pub fn spare_bytes(&self) -> usize {
        self.spare_bytes
    }

    /// Times a log append found the host log full and waited.
    pub fn log_full_stalls(&self) -> u64 {
        self.log_full_stalls
    }
}

impl DmaEngine for LocalDma {
    fn submit_read(&mut self, now: Nanos, token: u64, reads: &[DmaRead]) -> Result<(), DmaError> {
        if reads.is_empty() || reads.len() > DMA_VECTOR_LEN_MAX {
            return Err(DmaError::VectorLength(reads.len()));
        }
        if self.reads.len() >= DMA_READS_INFLIGHT_MAX {
            return Err(DmaError::QueueFull);
        }
        let mut p = PendingRead {
            due: now + self.latency_ns,
            token,
            reads: [DmaRead::default(); DMA_VECTOR_LEN_MAX],
            n: reads.len() as u8,
        };
        p.reads[..reads.len()].copy_from_slice(reads);
        if self.prefetch {
            // Dandelion §6 at the DMA layer: every vector submitted before
            // the next poll has its lines on the way when the poll copies it.
            for r in reads {
                self.table.prefetch(r.offset, r.len);
            }
        }
        self.reads.push_back(p);
        Ok(())
    }

    fn submit_log_append(&mut self, now: Nanos, token: u64, entry: &[u8]) -> Result<(), DmaError> {
        if self.appends.len() >= DMA_APPENDS_INFLIGHT_MAX {
            return Err(DmaError::QueueFull);
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        self.spare_bytes -= buf.capacity();
        buf.clear();
        buf.extend_from_slice(entry);
        self.appends.push_back(PendingAppend {
            due: now + self.latency_ns,
            token,
            entry: buf,
        });
        Ok(())
    }

    fn poll(&mut self, now: Nanos, out: &mut Vec<DmaCompletion>) {
        self.data.clear();
        while let Some(p) = self.reads.front() {
            if p.due > now {
                break;
            }
            let p = self.reads.pop_front().expect("front exists");
            let start = self.data.len();
            let mut result = Ok(());
            for r in &p.reads[..p.n as usize] {
                let at = self.data.len();
                self.data.resize(at + r.len, 0);
                // Acquire loads in address order: torn-read checks (Robinhood's
                // slot seqlock, DLHT's header re-read) rely on it on weakly
                // ordered CPUs.
                if let Err(e) = self.table.read(r.offset, &mut self.data[at..]) {
                    result = Err(DmaError::Memory(e));
                    break;
                }
            }
            let len = self.data.len() - start;
            out.push(DmaCompletion {
                token: p.token,
                result: result.map(|()| DmaDone::Read { start, len }),
            });
        }
        while let Some(p) = self.appends.front() {
            if p.due > now {
                break;
            }
            match self.log.try_push(&p.entry) {
                Ok(tail) => {
                    let p = self.appends.pop_front().expect("front exists");
                    out.push(DmaCompletion {
                        token: p.token,
                        result: Ok(DmaDone::Appended { tail }),
                    });
                    let bytes = p.entry.capacity();
                    if self.spare.len() < APPEND_SPARES_MAX
                        && self.spare_bytes + bytes <= APPEND_SPARE_BYTES_MAX
                    {
                        self.spare_bytes += bytes;
                        self.spare.push(p.entry);
                    }
                }
                Err(RingError::Full) => {
                    // Head-of-line: later appends wait too, so log order is submission order.
                    self.log_full_stalls += 1;
                    break;
                }
                Err(e) => {
                    let p = self.appends.pop_front().expect("front exists");
                    out.push(DmaCompletion {
                        token: p.token,
                        result: Err(DmaError::Log(e)),
                    });
                }
            }
        }
    }

    fn data(&self) -> &[u8] {
        &self.data
    }

    fn inflight(&self) -> usize {
        self.reads.len() + self.appends.len()
    }
}
