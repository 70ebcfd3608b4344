//! Request ring entries, client → node: one [`Request`] per entry of the
//! connection's request ring (L5 §III-A.2).
//!
//! | request | bytes (little endian) |
//! |---|---|
//! | [`Request::Get`] | tag `0x21`, `req_id: u64`, `key` (12 B) |
//! | [`Request::Put`] | tag `0x22`, `req_id: u64`, `key`, `len: u32` ≤ [`VALUE_BYTES_MAX`], value |
//! | [`Request::Insert`] | tag `0x23`, `req_id: u64`, `key`, `len: u32` ≤ [`VALUE_BYTES_MAX`], value |
//! | [`Request::Delete`] | tag `0x24`, `req_id: u64`, `key` |
//! | [`Request::Txn`] | tag `0x25`, `req_id: u64`, `len: u32` ≤ [`TXN_BYTES_MAX`], a [`Txn`] |
//! | [`Request::Call`] | tag `0x26`, `req_id: u64`, `procedure: u32`, `len: u32` ≤ [`ARGS_BYTES_MAX`], args |
//!
//! `req_id` is the client's and comes back in the [`crate::app::Outcome`];
//! the node does not interpret it. `procedure` is an id the handshake
//! resolved from a name ([`crate::app::Welcome`]); the reserved id
//! [`PROCEDURE_ID_UNKNOWN`] is contradictory in a call
//! ([`DecodeError::Inconsistent`]).
//!
//! The single-key calls are Dandelion §3's `GetOne`, `PutOne`, `InsertOne`
//! and `DeleteOne`: a get with no commit phase (a key that is locked or not
//! yet readable, Dandelion §4.2.1, answers
//! [`crate::app::AbortReason::LockConflict`], which is retryable, rather than
//! wait); a put that writes the key
//! whether or not it exists; an insert that writes it only if it is absent
//! (else the outcome is [`crate::app::AbortReason::CompareFailed`]); a delete
//! of a present key (else [`crate::app::Status::KeyNotFound`]).

use super::handshake::PROCEDURE_ID_UNKNOWN;
use super::txn::{Txn, TXN_BYTES_MAX};
use super::{check_len, AppEncodeError, SliceWriter};
use crate::error::{DecodeError, Reader};
use crate::host_nic::ARGS_BYTES_MAX;
use crate::ring::RING_ENTRY_BYTES_MAX;
use crate::{Key, KEY_BYTES, VALUE_BYTES_MAX};

/// Kind tag of [`Request::Get`].
pub const TAG_GET: u8 = 0x21;
/// Kind tag of [`Request::Put`].
pub const TAG_PUT: u8 = 0x22;
/// Kind tag of [`Request::Insert`].
pub const TAG_INSERT: u8 = 0x23;
/// Kind tag of [`Request::Delete`].
pub const TAG_DELETE: u8 = 0x24;
/// Kind tag of [`Request::Txn`].
pub const TAG_TXN: u8 = 0x25;
/// Kind tag of [`Request::Call`].
pub const TAG_CALL: u8 = 0x26;

/// Bytes before a request's kind-specific fields: tag and `req_id`.
pub const REQUEST_HEADER_BYTES: usize = 1 + 8;

/// Largest encoded [`Request`], in bytes: a call with [`ARGS_BYTES_MAX`] of
/// arguments (a [`Txn`] is at most as large, [`TXN_BYTES_MAX`]).
pub const REQUEST_BYTES_MAX: usize = REQUEST_HEADER_BYTES + 4 + 4 + ARGS_BYTES_MAX;

const _: () = assert!(TXN_BYTES_MAX <= ARGS_BYTES_MAX);
const _: () = assert!(REQUEST_BYTES_MAX <= RING_ENTRY_BYTES_MAX);
const _: () = assert!(ARGS_BYTES_MAX <= u32::MAX as usize);

/// One request ring entry (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<'a> {
    /// Read one key, with no commit phase (Dandelion `GetOne`).
    Get {
        /// Echoed in the outcome.
        req_id: u64,
        /// The key read.
        key: Key,
    },
    /// Write one key, creating it if absent (Dandelion `PutOne`).
    Put {
        /// Echoed in the outcome.
        req_id: u64,
        /// The key written.
        key: Key,
        /// The new value, at most [`VALUE_BYTES_MAX`] bytes.
        value: &'a [u8],
    },
    /// Create one key that must be absent (Dandelion `InsertOne`).
    Insert {
        /// Echoed in the outcome.
        req_id: u64,
        /// The key created.
        key: Key,
        /// Its value, at most [`VALUE_BYTES_MAX`] bytes.
        value: &'a [u8],
    },
    /// Delete one key that must be present (Dandelion `DeleteOne`).
    Delete {
        /// Echoed in the outcome.
        req_id: u64,
        /// The key deleted.
        key: Key,
    },
    /// Run a one-shot transaction.
    Txn {
        /// Echoed in the outcome.
        req_id: u64,
        /// The transaction (validated).
        txn: Txn<'a>,
    },
    /// Run a registered procedure (Xenic §4.2.2).
    Call {
        /// Echoed in the outcome.
        req_id: u64,
        /// The procedure's id, from the handshake.
        procedure: u32,
        /// Its arguments (opaque here), at most [`ARGS_BYTES_MAX`] bytes.
        args: &'a [u8],
    },
}

impl<'a> Request<'a> {
    /// The request's id.
    pub fn req_id(&self) -> u64 {
        match *self {
            Request::Get { req_id, .. }
            | Request::Put { req_id, .. }
            | Request::Insert { req_id, .. }
            | Request::Delete { req_id, .. }
            | Request::Txn { req_id, .. }
            | Request::Call { req_id, .. } => req_id,
        }
    }

    /// Bytes [`Request::encode`] appends.
    pub fn encoded_len(&self) -> usize {
        REQUEST_HEADER_BYTES
            + match self {
                Request::Get { .. } | Request::Delete { .. } => KEY_BYTES,
                Request::Put { value, .. } | Request::Insert { value, .. } => {
                    KEY_BYTES + 4 + value.len()
                }
                Request::Txn { txn, .. } => 4 + txn.encoded_len(),
                Request::Call { args, .. } => 4 + 4 + args.len(),
            }
    }

    /// Checks the bounds [`Request::decode`] enforces.
    fn check(&self) -> Result<(), DecodeError> {
        match self {
            Request::Put { value, .. } | Request::Insert { value, .. } => {
                check_len("request value", value.len(), VALUE_BYTES_MAX)
            }
            Request::Call {
                procedure, args, ..
            } => {
                check_procedure(*procedure)?;
                check_len("Call args", args.len(), ARGS_BYTES_MAX)
            }
            // A `Txn` is valid by construction.
            Request::Get { .. } | Request::Delete { .. } | Request::Txn { .. } => Ok(()),
        }
    }

    /// Writes the encoding (module docs) at the start of `out`, for a ring
    /// slot the caller reserved; returns the bytes written,
    /// [`Request::encoded_len`].
    ///
    /// # Errors
    /// [`AppEncodeError::Invalid`] for a value over [`VALUE_BYTES_MAX`], args
    /// over [`ARGS_BYTES_MAX`] or the reserved procedure id;
    /// [`AppEncodeError::BufferTooSmall`] if `out` is shorter than the
    /// encoding. Nothing is written then.
    pub fn encode_into(&self, out: &mut [u8]) -> Result<usize, AppEncodeError> {
        self.check()?;
        let need = self.encoded_len();
        if out.len() < need {
            return Err(AppEncodeError::BufferTooSmall {
                need,
                have: out.len(),
            });
        }
        let mut w = SliceWriter::new(&mut out[..need]);
        let (tag, req_id) = (self.tag(), self.req_id());
        w.put(&[tag]);
        w.put(&req_id.to_le_bytes());
        match self {
            Request::Get { key, .. } | Request::Delete { key, .. } => w.key(key),
            Request::Put { key, value, .. } | Request::Insert { key, value, .. } => {
                w.key(key);
                w.put(&(value.len() as u32).to_le_bytes());
                w.put(value);
            }
            Request::Txn { txn, .. } => {
                w.put(&(txn.encoded_len() as u32).to_le_bytes());
                w.put(txn.as_bytes());
            }
            Request::Call {
                procedure, args, ..
            } => {
                w.put(&procedure.to_le_bytes());
                w.put(&(args.len() as u32).to_le_bytes());
                w.put(args);
            }
        }
        Ok(w.position())
    }

    /// Appends the encoding (module docs) to `out`.
    ///
    /// # Errors
    /// As [`Request::encode_into`]; nothing is appended then.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), AppEncodeError> {
        self.check()?;
        super::append_with(out, self.encoded_len(), |buf| self.encode_into(buf))
    }

    /// Decodes exactly one request from all of `bytes`, borrowing values,
    /// arguments and the transaction from it. The node copies the entry out
    /// of client memory before calling this (the client may rewrite it).
    ///
    /// # Errors
    /// [`DecodeError::BadTag`] for an unknown kind tag,
    /// [`DecodeError::Truncated`] for missing bytes, [`DecodeError::TooLarge`]
    /// for a value, transaction or arguments over their bounds, every error
    /// of [`Txn::decode`], and [`DecodeError::Inconsistent`] for the reserved
    /// procedure id or trailing bytes.
    pub fn decode(bytes: &'a [u8]) -> Result<Request<'a>, DecodeError> {
        let mut r = Reader::new(bytes, "request");
        let tag = r.u8()?;
        if !(TAG_GET..=TAG_CALL).contains(&tag) {
            return Err(DecodeError::BadTag {
                what: "request kind",
                tag: tag as u64,
            });
        }
        let req_id = r.u64()?;
        let req = match tag {
            TAG_GET => Request::Get {
                req_id,
                key: r.key()?,
            },
            TAG_DELETE => Request::Delete {
                req_id,
                key: r.key()?,
            },
            TAG_PUT | TAG_INSERT => {
                let key = r.key()?;
                let len = r.u32()? as usize;
                check_len("request value", len, VALUE_BYTES_MAX)?;
                let value = r.take(len)?;
                if tag == TAG_PUT {
                    Request::Put { req_id, key, value }
                } else {
                    Request::Insert { req_id, key, value }
                }
            }
            TAG_TXN => {
                let len = r.u32()? as usize;
                check_len("request Txn", len, TXN_BYTES_MAX)?;
                let txn = Txn::decode(r.take(len)?)?;
                Request::Txn { req_id, txn }
            }
            _ => {
                let procedure = r.u32()?;
                check_procedure(procedure)?;
                let len = r.u32()? as usize;
                check_len("Call args", len, ARGS_BYTES_MAX)?;
                Request::Call {
                    req_id,
                    procedure,
                    args: r.take(len)?,
                }
            }
        };
        r.finish()?;
        Ok(req)
    }

    fn tag(&self) -> u8 {
        match self {
            Request::Get { .. } => TAG_GET,
            Request::Put { .. } => TAG_PUT,
            Request::Insert { .. } => TAG_INSERT,
            Request::Delete { .. } => TAG_DELETE,
            Request::Txn { .. } => TAG_TXN,
            Request::Call { .. } => TAG_CALL,
        }
    }
}

fn check_procedure(procedure: u32) -> Result<(), DecodeError> {
    if procedure == PROCEDURE_ID_UNKNOWN {
        return Err(DecodeError::Inconsistent {
            what: "Call",
            detail: "procedure id reserved for an unknown name",
        });
    }
    Ok(())
}
