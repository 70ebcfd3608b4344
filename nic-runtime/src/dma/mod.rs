//! The DMA engine: the NIC runtime's only access to host memory (Xenic §3.5,
//! §4.3.1). Reads are submitted as vectors of at most [`DMA_VECTOR_LEN_MAX`]
//! elements and complete asynchronously; each completion carries the token the
//! submitter chose, which names the continuation to resume. Host-log appends are
//! a second kind of request: the entry is written, then the log's tail is
//! published, in submission order.

pub mod local;

use splitkv_layout::Region;

use crate::Nanos;
use splitkv_layout::ring::RingError;
use splitkv_layout::RegionError;

/// Most elements in one DMA vector (Xenic §3.5).
pub const DMA_VECTOR_LEN_MAX: usize = 15;
/// Most read vectors in flight in one engine.
pub const DMA_READS_INFLIGHT_MAX: usize = 4096;
/// Most log appends queued in one engine.
pub const DMA_APPENDS_INFLIGHT_MAX: usize = 4096;

/// One element of a read vector: `len` bytes at byte `offset` of the host table region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DmaRead {
    /// Byte offset in the host table region (8-byte aligned).
    pub offset: usize,
    /// Bytes to read.
    pub len: usize,
}

/// Host memory as a DMA engine sees it: a byte-addressed space the host
/// exposes (a [`Region`] for the Robinhood table; the DLHT's current generation
/// through the host's adapter). Reads copy in increasing address order with
/// Acquire loads, the order a DMA engine uses and lock-free readers rely on.
pub trait HostMemory: Send + Sync + std::fmt::Debug {
    /// Copies `dst.len()` bytes at `offset` into `dst`.
    fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), HostMemoryError>;

    /// Hints that `len` bytes at `offset` will be read soon: a software
    /// prefetch of (at most [`PREFETCH_LINES_MAX`] of) their cache lines, so
    /// that a [`local::LocalDma`] that prefetches every vector when it is
    /// submitted and copies it at the next poll overlaps the misses of all
    /// reads submitted in between (Dandelion §6's batch-then-execute, at the
    /// DMA layer). Never fails; out-of-range offsets are ignored. The default
    /// does nothing.
    fn prefetch(&self, offset: usize, len: usize) {
        let _ = (offset, len);
    }
}

/// Most cache lines [`HostMemory::prefetch`] touches per element: enough for
/// the largest out-of-line value copy, the head of a value block up to the end
/// of a [`VALUE_BYTES_MAX`](splitkv_layout::VALUE_BYTES_MAX) value (32 + 4096
/// bytes, 65 lines). A Robinhood probe of `d_i + k` small slots is 2–4 lines.
pub const PREFETCH_LINES_MAX: usize = 65;

const _: () = assert!(
    PREFETCH_LINES_MAX * splitkv_layout::CACHE_LINE_BYTES
        >= splitkv_layout::robinhood_layout::SLOT_VALUE_OFFSET + splitkv_layout::VALUE_BYTES_MAX
);

/// A read host memory refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostMemoryError {
    /// Outside the region, or misaligned.
    #[error(transparent)]
    OutOfBounds(#[from] RegionError),
    /// Addressed to a table layout the host no longer has (resized): read the
    /// table's descriptor again.
    #[error("stale address: the host table was resized")]
    Stale,
}

impl HostMemory for Region {
    fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), HostMemoryError> {
        Ok(splitkv_layout::robinhood_layout::read_acquire(
            self, offset, dst,
        )?)
    }

    fn prefetch(&self, offset: usize, len: usize) {
        let end = offset.saturating_add(len).min(self.len_bytes());
        let first = offset & !(splitkv_layout::CACHE_LINE_BYTES - 1);
        for line in (first..end)
            .step_by(splitkv_layout::CACHE_LINE_BYTES)
            .take(PREFETCH_LINES_MAX)
        {
            Region::prefetch(self, line);
        }
    }
}

/// Copies the elements of a read vector, in order, into `out` (cleared
/// first), back to back: the bytes a [`DmaEngine`] completion delivers. For
/// tools and tests that drive a lookup state machine without an engine.
///
/// # Errors
/// The first element `mem` refuses (`out` then holds the elements before it).
pub fn read_vector(
    mem: &dyn HostMemory,
    reads: &[DmaRead],
    out: &mut Vec<u8>,
) -> Result<(), HostMemoryError> {
    out.clear();
    for r in reads {
        let at = out.len();
        out.resize(at + r.len, 0);
        mem.read(r.offset, &mut out[at..])?;
    }
    Ok(())
}

/// Why a DMA request was refused or failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DmaError {
    /// More than [`DMA_VECTOR_LEN_MAX`] elements, or none.
    #[error("DMA vector of {0} elements (1..={DMA_VECTOR_LEN_MAX} allowed)")]
    VectorLength(usize),
    /// Too many requests in flight; resubmit later.
    #[error("DMA queue full")]
    QueueFull,
    /// Host memory refused a read.
    #[error(transparent)]
    Memory(#[from] HostMemoryError),
    /// The host log refused the entry for a reason other than being full.
    #[error("host log: {0}")]
    Log(RingError),
}

/// What a completed request produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DmaDone {
    /// A read vector completed; its bytes (elements concatenated) are at
    /// `start..start + len` of [`DmaEngine::data`].
    Read {
        /// Start in the engine's completion buffer.
        start: usize,
        /// Total bytes.
        len: usize,
    },
    /// A log entry was appended; the host log's produced-bytes counter after it is `tail`.
    Appended {
        /// Log position just past the entry (compare with the host's `LogApplied`).
        tail: u64,
    },
}

/// A finished request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DmaCompletion {
    /// The submitter's token.
    pub token: u64,
    /// Result.
    pub result: Result<DmaDone, DmaError>,
}

/// A DMA engine (local memcpy, simulated latency, or RDMA verbs).
pub trait DmaEngine: Send {
    /// Submits a read vector at time `now`.
    fn submit_read(&mut self, now: Nanos, token: u64, reads: &[DmaRead]) -> Result<(), DmaError>;

    /// Submits a host-log append of one entry at time `now`. Appends complete in
    /// submission order; an entry is retried inside the engine while the log is full.
    fn submit_log_append(&mut self, now: Nanos, token: u64, entry: &[u8]) -> Result<(), DmaError>;

    /// Moves completions due by `now` into `out`. Their read data stays valid
    /// until the next call.
    fn poll(&mut self, now: Nanos, out: &mut Vec<DmaCompletion>);

    /// The completion buffer that [`DmaDone::Read`] ranges point into.
    fn data(&self) -> &[u8];

    /// Requests submitted and not yet completed.
    fn inflight(&self) -> usize;
}
