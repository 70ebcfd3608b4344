//! The formats that cross the application boundary: what an application in its
//! own process (through `splitkv-client`) and its node exchange (DESIGN.md,
//! "Process boundaries and placements"; L5 §III–IV for the rings).
//!
//! - [`request`]: request ring entries, client → node: the single-key calls
//!   of Dandelion §3 (`GetOne`, `PutOne`, `InsertOne`, `DeleteOne`), a one-shot
//!   transaction ([`Txn`]) and a call of a registered procedure (Xenic §4.2.2).
//! - [`txn`]: the one-shot transaction in etcd's `Txn` shape (compares, then
//!   the operations of the branch the compares choose) and its result.
//! - [`outcome`]: outcome ring entries, node → client: the request's id, a
//!   typed [`Status`] and a body.
//! - [`handshake`]: the set-up messages on the node's Unix socket (not the
//!   rings): [`Hello`], [`Welcome`], [`Refused`], each carrying
//!   [`APP_LAYOUT_VERSION`].
//! - [`memory`]: where the two rings and their doorbell lines sit in the
//!   memory the client creates, computed from the ring sizes by one function.
//!
//! Everything here is read by the node from memory or a socket the client
//! controls, so every decoder treats its input as hostile: it borrows byte
//! strings from the input (zero copy, no allocation), returns
//! [`DecodeError`] for unknown tags, truncation, lengths
//! and counts over their named bounds, trailing bytes and fields that
//! contradict each other, and never panics. A value that decodes is within
//! every bound the node enforces, so the node refuses an oversized request
//! before running any of it. Encoders check the same bounds and return
//! [`AppEncodeError`] instead of writing an encoding the decoder would refuse.
//!
//! Tags: request kinds are `0x21..=0x26` and the outcome is `0xA1`, disjoint
//! from the host↔NIC messages' tags ([`crate::host_nic`]), so an entry put on
//! the wrong ring fails with [`DecodeError::BadTag`].

pub mod handshake;
pub mod memory;
pub mod outcome;
pub mod request;
pub mod txn;

pub use handshake::{
    AppLimits, HandshakeError, HandshakeMsg, Hello, Refused, RefusedReason, Welcome,
    APP_IN_FLIGHT_MAX, APP_LAYOUT_VERSION, HANDSHAKE_BYTES_MAX, HANDSHAKE_HEADER_BYTES,
    HANDSHAKE_MAGIC, PROCEDURES_PER_HELLO_MAX, PROCEDURE_ID_UNKNOWN, PROCEDURE_NAME_BYTES_MAX,
};
pub use memory::{
    AppMemoryLayout, APP_MEMORY_BYTES_MAX, APP_RING_CAPACITY_MAX_BYTES, APP_RING_CAPACITY_MIN_BYTES,
};
pub use outcome::{
    AbortReason, GetValue, Outcome, Status, UnavailableReason, OUTCOME_BYTES_MAX,
    OUTCOME_HEADER_BYTES, OUTCOME_REASON_BYTES_MAX,
};
pub use request::{Request, REQUEST_BYTES_MAX};
pub use txn::{
    Branch, CmpOp, Compare, Condition, GetResult, Op, Txn, TxnResult, TXN_BRANCH_GETS_MAX,
    TXN_BRANCH_OPS_MAX, TXN_BYTES_MAX, TXN_COMPARES_MAX, TXN_READS_MAX, TXN_RESULT_BYTES_MAX,
    TXN_WRITES_MAX,
};

use crate::DecodeError;

/// Why a value cannot be encoded: the caller broke a bound the decoder
/// enforces, or gave a buffer too small. Nothing is written then.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AppEncodeError {
    /// A field is over its bound or contradicts another; the decoder would
    /// refuse the encoding with this error.
    #[error("cannot encode: {0}")]
    Invalid(#[from] DecodeError),
    /// The caller's buffer is shorter than the encoding.
    #[error("buffer of {have} B is shorter than the {need} B encoding")]
    BufferTooSmall {
        /// Bytes the encoding needs.
        need: usize,
        /// Bytes the buffer has.
        have: usize,
    },
}

/// A bounds check shared by encoders and decoders: `len` of `what` is at most
/// `max`.
pub(crate) fn check_len(what: &'static str, len: usize, max: usize) -> Result<(), DecodeError> {
    if len > max {
        return Err(DecodeError::TooLarge { what, len, max });
    }
    Ok(())
}

/// Writes byte strings at increasing positions of a slice whose length the
/// caller has checked; a write past the end is dropped, never a panic (the
/// callers' length checks make that unreachable).
pub(crate) struct SliceWriter<'b> {
    buf: &'b mut [u8],
    pos: usize,
}

impl<'b> SliceWriter<'b> {
    pub(crate) fn new(buf: &'b mut [u8]) -> SliceWriter<'b> {
        SliceWriter { buf, pos: 0 }
    }

    pub(crate) fn put(&mut self, bytes: &[u8]) {
        if let Some(dst) = self.buf.get_mut(self.pos..self.pos + bytes.len()) {
            dst.copy_from_slice(bytes);
        }
        self.pos += bytes.len();
    }

    pub(crate) fn key(&mut self, key: &crate::Key) {
        let mut k = [0u8; crate::KEY_BYTES];
        key.encode(&mut k);
        self.put(&k);
    }

    pub(crate) fn position(&self) -> usize {
        self.pos
    }
}

/// Appends an encoding of `len` bytes (bounded by the caller's checks) to
/// `out` by running `write` on the new tail; `out` is unchanged when `write`
/// fails.
pub(crate) fn append_with(
    out: &mut Vec<u8>,
    len: usize,
    write: impl FnOnce(&mut [u8]) -> Result<usize, AppEncodeError>,
) -> Result<(), AppEncodeError> {
    let start = out.len();
    out.resize(start + len, 0);
    match write(&mut out[start..]) {
        Ok(_) => Ok(()),
        Err(e) => {
            out.truncate(start);
            Err(e)
        }
    }
}
