//! The result of a committed [`Txn`]: which branch ran and, for each get of
//! that branch in order, whether the key was found and its version and value.
//! It is the body of a committed [`crate::app::Outcome`] of a
//! [`crate::app::Request::Txn`], and what the built-in procedure returns to
//! the host in a host↔NIC `TxOutcome`.
//!
//! # Encoding (little endian)
//!
//! | bytes | field |
//! |---|---|
//! | 0 | `branch: u8` (`0` success, `1` failure) |
//! | 1 | `get_count: u8` ≤ [`TXN_BRANCH_GETS_MAX`] |
//! | 2.. | per get: `found: u8` (0/1), `version: u64`, `len: u32`, `len` value bytes |
//!
//! A get that found nothing has version 0 and length 0 (anything else is
//! [`DecodeError::Inconsistent`]); a found key's version is at most
//! [`crate::VERSION_MAX`] and its value at most [`VALUE_BYTES_MAX`] bytes.
//! The largest result, [`TXN_RESULT_BYTES_MAX`], fits a host↔NIC outcome
//! ([`RESULT_BYTES_MAX`], asserted at compile time).

use super::{check_version, Txn, TXN_BRANCH_GETS_MAX};
use crate::app::{check_len, AppEncodeError, SliceWriter};
use crate::error::{DecodeError, Reader};
use crate::host_nic::RESULT_BYTES_MAX;
use crate::VALUE_BYTES_MAX;

/// Bytes of one get's entry without its value.
pub const GET_RESULT_HEADER_BYTES: usize = 1 + 8 + 4;

/// Largest encoded [`TxnResult`], in bytes: 2 + [`TXN_BRANCH_GETS_MAX`] ×
/// ([`GET_RESULT_HEADER_BYTES`] + [`VALUE_BYTES_MAX`]) = 65 746.
pub const TXN_RESULT_BYTES_MAX: usize =
    2 + TXN_BRANCH_GETS_MAX * (GET_RESULT_HEADER_BYTES + VALUE_BYTES_MAX);

// The result of the largest transaction fits the outcome that carries it.
const _: () = assert!(TXN_RESULT_BYTES_MAX <= RESULT_BYTES_MAX);

/// Which branch of a [`Txn`] ran.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Branch {
    /// Every compare held.
    Success = 0,
    /// Some compare failed (the transaction still committed).
    Failure = 1,
}

/// What one get read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GetResult<'a> {
    /// The key is absent (never written, or deleted).
    NotFound,
    /// The key's version and value.
    Found {
        /// The key's version (at most [`crate::VERSION_MAX`]).
        version: u64,
        /// The key's value (at most [`VALUE_BYTES_MAX`] bytes).
        value: &'a [u8],
    },
}

/// A decoded, validated transaction result: a view over its encoding (module
/// docs) that yields the gets without copying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnResult<'a> {
    bytes: &'a [u8],
    branch: Branch,
    get_count: u8,
}

impl<'a> TxnResult<'a> {
    /// Decodes a result that spans exactly `bytes`, borrowing its values.
    ///
    /// # Errors
    /// [`DecodeError::Truncated`] for missing bytes; [`DecodeError::BadTag`]
    /// for a branch other than 0/1 or a `found` flag other than 0/1;
    /// [`DecodeError::TooLarge`] for more than [`TXN_BRANCH_GETS_MAX`] gets, a
    /// value over [`VALUE_BYTES_MAX`] or a version over
    /// [`crate::VERSION_MAX`]; [`DecodeError::Inconsistent`] for a not-found
    /// get with a version or value, or trailing bytes.
    pub fn decode(bytes: &'a [u8]) -> Result<TxnResult<'a>, DecodeError> {
        let mut r = Reader::new(bytes, "TxnResult");
        let branch = match r.u8()? {
            0 => Branch::Success,
            1 => Branch::Failure,
            tag => {
                return Err(DecodeError::BadTag {
                    what: "TxnResult branch",
                    tag: tag as u64,
                })
            }
        };
        let get_count = r.u8()?;
        check_len("TxnResult gets", get_count as usize, TXN_BRANCH_GETS_MAX)?;
        for _ in 0..get_count {
            read_get(&mut r)?;
        }
        r.finish()?;
        Ok(TxnResult {
            bytes,
            branch,
            get_count,
        })
    }

    /// Appends the encoding of a result to `out`.
    ///
    /// # Errors
    /// [`AppEncodeError::Invalid`] for more than [`TXN_BRANCH_GETS_MAX`] gets,
    /// a value over [`VALUE_BYTES_MAX`] or a version over
    /// [`crate::VERSION_MAX`]; nothing is appended then.
    pub fn encode(
        branch: Branch,
        gets: &[GetResult<'_>],
        out: &mut Vec<u8>,
    ) -> Result<(), AppEncodeError> {
        check_len("TxnResult gets", gets.len(), TXN_BRANCH_GETS_MAX)?;
        let mut len = 2;
        for g in gets {
            len += GET_RESULT_HEADER_BYTES;
            if let GetResult::Found { version, value } = g {
                check_version("TxnResult version", *version)?;
                check_len("TxnResult value", value.len(), VALUE_BYTES_MAX)?;
                len += value.len();
            }
        }
        super::super::append_with(out, len, |buf| {
            let mut w = SliceWriter::new(buf);
            w.put(&[branch as u8, gets.len() as u8]);
            for g in gets {
                let (found, version, value): (u8, u64, &[u8]) = match *g {
                    GetResult::NotFound => (0, 0, &[]),
                    GetResult::Found { version, value } => (1, version, value),
                };
                w.put(&[found]);
                w.put(&version.to_le_bytes());
                w.put(&(value.len() as u32).to_le_bytes());
                w.put(value);
            }
            Ok(w.position())
        })
    }

    /// The branch that ran.
    pub fn branch(&self) -> Branch {
        self.branch
    }

    /// Number of gets.
    pub fn get_count(&self) -> usize {
        self.get_count as usize
    }

    /// The gets, in the order of the branch's get operations.
    pub fn gets(&self) -> impl Iterator<Item = GetResult<'a>> + 'a {
        let mut r = Reader::new(self.bytes, "TxnResult");
        // Validated at decode: every read below succeeds.
        let _ = r.take(2);
        (0..self.get_count).map_while(move |_| read_get(&mut r).ok())
    }

    /// The encoding (module docs).
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Checks that this is a result `txn` can have: as many gets as the
    /// branch that ran has get operations.
    ///
    /// # Errors
    /// [`DecodeError::Inconsistent`] otherwise.
    pub fn check_against(&self, txn: &Txn<'_>) -> Result<(), DecodeError> {
        if txn.get_count(self.branch) != self.get_count() {
            return Err(DecodeError::Inconsistent {
                what: "TxnResult",
                detail: "get count differs from the branch's gets",
            });
        }
        Ok(())
    }
}

fn read_get<'a>(r: &mut Reader<'a>) -> Result<GetResult<'a>, DecodeError> {
    let found = r.u8()?;
    let version = r.u64()?;
    let len = r.u32()? as usize;
    match found {
        0 if version == 0 && len == 0 => Ok(GetResult::NotFound),
        0 => Err(DecodeError::Inconsistent {
            what: "TxnResult get",
            detail: "not found with a version or value",
        }),
        1 => {
            check_version("TxnResult version", version)?;
            check_len("TxnResult value", len, VALUE_BYTES_MAX)?;
            Ok(GetResult::Found {
                version,
                value: r.take(len)?,
            })
        }
        tag => Err(DecodeError::BadTag {
            what: "TxnResult found flag",
            tag: tag as u64,
        }),
    }
}
