//! Outcome ring entries, node → client: how the request with `req_id` ended.
//!
//! | bytes (little endian) | field |
//! |---|---|
//! | 0 | tag `0xA1` |
//! | 1..9 | `req_id: u64`, the request's |
//! | 9 | `status: u8` ([`Status`] code) |
//! | 10 | `detail: u8` (the [`AbortReason`] or [`UnavailableReason`]; 0 for other statuses) |
//! | 11..15 | `len: u32`, then `len` body bytes |
//!
//! | status | code | detail | body |
//! |---|---|---|---|
//! | [`Status::Committed`] | 0 | 0 | the result, ≤ [`RESULT_BYTES_MAX`]: a [`GetValue`] for a get, empty for put, insert and delete, a [`crate::app::TxnResult`] for a transaction, the procedure's output for a call |
//! | [`Status::Aborted`] | 1 | [`AbortReason`] | reason text |
//! | [`Status::KeyNotFound`] | 2 | 0 | reason text |
//! | [`Status::TooLarge`] | 3 | 0 | reason text |
//! | [`Status::UnknownProcedure`] | 4 | 0 | reason text |
//! | [`Status::Rejected`] | 5 | 0 | reason text |
//! | [`Status::Unavailable`] | 6 | [`UnavailableReason`] | reason text |
//! | [`Status::OutcomeUnknown`] | 7 | 0 | reason text |
//!
//! A reason text is UTF-8 of at most [`OUTCOME_REASON_BYTES_MAX`] bytes (may be
//! empty), for logs and people, never parsed. A detail that does not belong
//! to its status, or a body that is not valid for it, is
//! [`DecodeError::Inconsistent`].
//!
//! # Compare failed versus a failed compare
//!
//! [`AbortReason::CompareFailed`] is the outcome of a single-key conditional
//! call whose condition does not hold: an [`crate::app::Request::Insert`] of a
//! key that exists. Nothing is written. A [`crate::app::Txn`] never ends so:
//! in etcd's shape a failed compare selects the failure branch, which commits
//! ([`Status::Committed`] with [`crate::app::Branch::Failure`] in the result).
//! A get or delete of an absent key is [`Status::KeyNotFound`], not an abort:
//! there was no conflict and retrying gives the same answer until someone
//! writes the key.
//!
//! "Not connected" is not an outcome: a client with no connection has no
//! ring to read one from; the client library reports it itself.

use super::{check_len, AppEncodeError, SliceWriter};
use crate::error::{DecodeError, Reader};
use crate::host_nic::{TxStatus, RESULT_BYTES_MAX};
use crate::ring::RING_ENTRY_BYTES_MAX;
use crate::VALUE_BYTES_MAX;

/// Kind tag of an encoded [`Outcome`].
pub const TAG_OUTCOME: u8 = 0xA1;

/// Bytes of an [`Outcome`] without its body.
pub const OUTCOME_HEADER_BYTES: usize = 1 + 8 + 1 + 1 + 4;

/// Largest reason text of an outcome that did not commit, in bytes.
pub const OUTCOME_REASON_BYTES_MAX: usize = 256;

/// Largest encoded [`Outcome`], in bytes: header plus a committed result of
/// [`RESULT_BYTES_MAX`].
pub const OUTCOME_BYTES_MAX: usize = OUTCOME_HEADER_BYTES + RESULT_BYTES_MAX;

const _: () = assert!(OUTCOME_BYTES_MAX <= RING_ENTRY_BYTES_MAX);
const _: () = assert!(OUTCOME_REASON_BYTES_MAX <= RESULT_BYTES_MAX);

/// Why a transaction or call aborted: nothing it wrote is visible.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AbortReason {
    /// A key was locked by another transaction (no-wait locking, Dandelion
    /// §4.2.2). Retrying may commit.
    LockConflict = 0,
    /// A key read changed before commit-time validation (Xenic §4.2 step 3).
    /// Retrying may commit.
    ValidationFailed = 1,
    /// The procedure chose to abort; retrying gives the same answer.
    UserAbort = 2,
    /// A single-key conditional call's condition did not hold (module docs).
    CompareFailed = 3,
    /// A replica had no room to insert a key the call creates.
    TableFull = 4,
    /// A replica could not read its host table or write its host log.
    HostFailure = 5,
}

impl AbortReason {
    /// Every reason, in wire-value order.
    pub const ALL: [AbortReason; 6] = [
        AbortReason::LockConflict,
        AbortReason::ValidationFailed,
        AbortReason::UserAbort,
        AbortReason::CompareFailed,
        AbortReason::TableFull,
        AbortReason::HostFailure,
    ];

    /// Whether the call lost to a concurrent one: worth retrying unchanged.
    pub fn is_conflict(self) -> bool {
        matches!(
            self,
            AbortReason::LockConflict | AbortReason::ValidationFailed
        )
    }
}

/// Why the node could not run a call now; retrying later may succeed.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnavailableReason {
    /// A replica the call needs failed or is recovering (a recovery epoch).
    Recovering = 0,
    /// The node's NIC runtime is restarting (a NIC-only crash, DESIGN.md).
    NicRestarting = 1,
    /// The node is draining before it stops and takes no new calls.
    Draining = 2,
}

impl UnavailableReason {
    /// Every reason, in wire-value order.
    pub const ALL: [UnavailableReason; 3] = [
        UnavailableReason::Recovering,
        UnavailableReason::NicRestarting,
        UnavailableReason::Draining,
    ];
}

/// How a request ended (module docs for each status's body).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Committed; the body is the result.
    Committed,
    /// Aborted; nothing was written.
    Aborted(AbortReason),
    /// A get or delete named an absent key; nothing was written.
    KeyNotFound,
    /// Not run: a value, the arguments or the result exceed a limit of the
    /// node (its `value_bytes_max`) or of this format.
    TooLarge,
    /// Not run: no procedure has the call's id.
    UnknownProcedure,
    /// Not run: the procedure refused its arguments (they do not decode, or
    /// it writes outside its declared write set).
    Rejected,
    /// Not run, or aborted before its commit point: the node cannot serve.
    Unavailable(UnavailableReason),
    /// May or may not have committed (the coordinator lost a replica after
    /// replication began): never resubmit blindly.
    OutcomeUnknown,
}

impl Status {
    /// Every status, in wire order (codes, then details).
    pub const ALL: [Status; 15] = [
        Status::Committed,
        Status::Aborted(AbortReason::LockConflict),
        Status::Aborted(AbortReason::ValidationFailed),
        Status::Aborted(AbortReason::UserAbort),
        Status::Aborted(AbortReason::CompareFailed),
        Status::Aborted(AbortReason::TableFull),
        Status::Aborted(AbortReason::HostFailure),
        Status::KeyNotFound,
        Status::TooLarge,
        Status::UnknownProcedure,
        Status::Rejected,
        Status::Unavailable(UnavailableReason::Recovering),
        Status::Unavailable(UnavailableReason::NicRestarting),
        Status::Unavailable(UnavailableReason::Draining),
        Status::OutcomeUnknown,
    ];

    /// The `(status, detail)` bytes of the encoding.
    pub fn to_code(self) -> (u8, u8) {
        match self {
            Status::Committed => (0, 0),
            Status::Aborted(r) => (1, r as u8),
            Status::KeyNotFound => (2, 0),
            Status::TooLarge => (3, 0),
            Status::UnknownProcedure => (4, 0),
            Status::Rejected => (5, 0),
            Status::Unavailable(r) => (6, r as u8),
            Status::OutcomeUnknown => (7, 0),
        }
    }

    /// The status of `(status, detail)` bytes.
    ///
    /// # Errors
    /// [`DecodeError::BadTag`] for an unknown status or detail code,
    /// [`DecodeError::Inconsistent`] for a non-zero detail on a status that
    /// has none.
    pub fn from_code(code: u8, detail: u8) -> Result<Status, DecodeError> {
        let bad_detail = DecodeError::BadTag {
            what: "outcome status detail",
            tag: detail as u64,
        };
        let status = match code {
            1 => {
                return AbortReason::ALL
                    .get(detail as usize)
                    .map(|r| Status::Aborted(*r))
                    .ok_or(bad_detail)
            }
            6 => {
                return UnavailableReason::ALL
                    .get(detail as usize)
                    .map(|r| Status::Unavailable(*r))
                    .ok_or(bad_detail)
            }
            0 => Status::Committed,
            2 => Status::KeyNotFound,
            3 => Status::TooLarge,
            4 => Status::UnknownProcedure,
            5 => Status::Rejected,
            7 => Status::OutcomeUnknown,
            _ => {
                return Err(DecodeError::BadTag {
                    what: "outcome status",
                    tag: code as u64,
                })
            }
        };
        if detail != 0 {
            return Err(DecodeError::Inconsistent {
                what: "outcome",
                detail: "a detail code on a status that has none",
            });
        }
        Ok(status)
    }

    /// Whether the call committed.
    pub fn is_committed(self) -> bool {
        self == Status::Committed
    }

    /// Whether retrying the same call may end differently: a conflict, or
    /// the node unavailable.
    pub fn is_retryable(self) -> bool {
        match self {
            Status::Aborted(r) => r.is_conflict(),
            Status::Unavailable(_) => true,
            _ => false,
        }
    }

    /// The host↔NIC status this corresponds to, if the NIC runtime reports
    /// it: every status but [`Status::KeyNotFound`] and
    /// [`AbortReason::CompareFailed`] (single-key outcomes the NIC runtime's
    /// procedures do not have). Several map to one: an unknown procedure is
    /// a [`TxStatus::Rejected`], every [`UnavailableReason`] a
    /// [`TxStatus::Unavailable`].
    pub fn to_tx_status(self) -> Option<TxStatus> {
        Some(match self {
            Status::Committed => TxStatus::Committed,
            Status::Aborted(AbortReason::LockConflict) => TxStatus::LockConflict,
            Status::Aborted(AbortReason::ValidationFailed) => TxStatus::ValidationFailed,
            Status::Aborted(AbortReason::UserAbort) => TxStatus::UserAborted,
            Status::Aborted(AbortReason::TableFull) => TxStatus::TableFull,
            Status::Aborted(AbortReason::HostFailure) => TxStatus::HostFailure,
            Status::Aborted(AbortReason::CompareFailed) | Status::KeyNotFound => return None,
            Status::TooLarge => TxStatus::TooLarge,
            Status::UnknownProcedure | Status::Rejected => TxStatus::Rejected,
            Status::Unavailable(_) => TxStatus::Unavailable,
            Status::OutcomeUnknown => TxStatus::Unknown,
        })
    }
}

impl From<TxStatus> for Status {
    /// The status an application sees for a host↔NIC outcome. One to one:
    /// `Status::from(t).to_tx_status() == Some(t)` for every `t`. A
    /// [`TxStatus::Rejected`] becomes [`Status::Rejected`] (the node resolves
    /// unknown procedure ids before they reach the NIC runtime), a
    /// [`TxStatus::Unavailable`] becomes [`UnavailableReason::Recovering`].
    fn from(t: TxStatus) -> Status {
        match t {
            TxStatus::Committed => Status::Committed,
            TxStatus::LockConflict => Status::Aborted(AbortReason::LockConflict),
            TxStatus::UserAborted => Status::Aborted(AbortReason::UserAbort),
            TxStatus::Rejected => Status::Rejected,
            TxStatus::ValidationFailed => Status::Aborted(AbortReason::ValidationFailed),
            TxStatus::TableFull => Status::Aborted(AbortReason::TableFull),
            TxStatus::TooLarge => Status::TooLarge,
            TxStatus::Unavailable => Status::Unavailable(UnavailableReason::Recovering),
            TxStatus::HostFailure => Status::Aborted(AbortReason::HostFailure),
            TxStatus::Unknown => Status::OutcomeUnknown,
        }
    }
}

/// One outcome ring entry (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome<'a> {
    /// The request's `req_id`.
    pub req_id: u64,
    /// How it ended.
    pub status: Status,
    /// The result (committed) or a reason text (module docs).
    pub body: &'a [u8],
}

impl<'a> Outcome<'a> {
    /// Bytes [`Outcome::encode`] appends.
    pub fn encoded_len(&self) -> usize {
        OUTCOME_HEADER_BYTES + self.body.len()
    }

    /// The reason text of an outcome that did not commit (empty for a
    /// committed one).
    pub fn reason(&self) -> &'a str {
        if self.status.is_committed() {
            return "";
        }
        std::str::from_utf8(self.body).unwrap_or_default()
    }

    fn check(&self) -> Result<(), DecodeError> {
        if self.status.is_committed() {
            return check_len("outcome result", self.body.len(), RESULT_BYTES_MAX);
        }
        check_len("outcome reason", self.body.len(), OUTCOME_REASON_BYTES_MAX)?;
        if std::str::from_utf8(self.body).is_err() {
            return Err(DecodeError::Inconsistent {
                what: "outcome",
                detail: "reason text is not UTF-8",
            });
        }
        Ok(())
    }

    /// Writes the encoding at the start of `out`; returns the bytes written,
    /// [`Outcome::encoded_len`].
    ///
    /// # Errors
    /// [`AppEncodeError::Invalid`] for a result over [`RESULT_BYTES_MAX`] or
    /// a reason that is not UTF-8 of at most [`OUTCOME_REASON_BYTES_MAX`]
    /// bytes; [`AppEncodeError::BufferTooSmall`]. Nothing is written then.
    pub fn encode_into(&self, out: &mut [u8]) -> Result<usize, AppEncodeError> {
        self.check()?;
        let need = self.encoded_len();
        if out.len() < need {
            return Err(AppEncodeError::BufferTooSmall {
                need,
                have: out.len(),
            });
        }
        let (code, detail) = self.status.to_code();
        let mut w = SliceWriter::new(&mut out[..need]);
        w.put(&[TAG_OUTCOME]);
        w.put(&self.req_id.to_le_bytes());
        w.put(&[code, detail]);
        w.put(&(self.body.len() as u32).to_le_bytes());
        w.put(self.body);
        Ok(w.position())
    }

    /// Appends the encoding to `out`.
    ///
    /// # Errors
    /// As [`Outcome::encode_into`]; nothing is appended then.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), AppEncodeError> {
        self.check()?;
        super::append_with(out, self.encoded_len(), |buf| self.encode_into(buf))
    }

    /// Decodes exactly one outcome from all of `bytes`, borrowing the body.
    ///
    /// # Errors
    /// [`DecodeError::BadTag`] for an unknown kind, status or detail,
    /// [`DecodeError::Truncated`], [`DecodeError::TooLarge`] for a body over
    /// its status's bound, [`DecodeError::Inconsistent`] for a detail on a
    /// status without one, a reason that is not UTF-8, or trailing bytes.
    pub fn decode(bytes: &'a [u8]) -> Result<Outcome<'a>, DecodeError> {
        let mut r = Reader::new(bytes, "outcome");
        let tag = r.u8()?;
        if tag != TAG_OUTCOME {
            return Err(DecodeError::BadTag {
                what: "outcome kind",
                tag: tag as u64,
            });
        }
        let req_id = r.u64()?;
        let code = r.u8()?;
        let detail = r.u8()?;
        let status = Status::from_code(code, detail)?;
        let len = r.u32()? as usize;
        check_len("outcome body", len, RESULT_BYTES_MAX)?;
        let body = r.take(len)?;
        r.finish()?;
        let outcome = Outcome {
            req_id,
            status,
            body,
        };
        outcome.check()?;
        Ok(outcome)
    }
}

/// The body of a committed [`crate::app::Request::Get`]: `version: u64`
/// (≤ [`crate::VERSION_MAX`]), then the value (≤ [`VALUE_BYTES_MAX`] bytes,
/// the rest of the body).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetValue<'a> {
    /// The key's version.
    pub version: u64,
    /// The key's value.
    pub value: &'a [u8],
}

impl<'a> GetValue<'a> {
    /// Bytes of the encoding.
    pub fn encoded_len(&self) -> usize {
        8 + self.value.len()
    }

    /// Appends the encoding to `out`.
    ///
    /// # Errors
    /// [`AppEncodeError::Invalid`] for a version over [`crate::VERSION_MAX`]
    /// or a value over [`VALUE_BYTES_MAX`]; nothing is appended then.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), AppEncodeError> {
        super::txn::check_version("GetValue version", self.version)?;
        check_len("GetValue value", self.value.len(), VALUE_BYTES_MAX)?;
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(self.value);
        Ok(())
    }

    /// Decodes a body that spans exactly `bytes`.
    ///
    /// # Errors
    /// [`DecodeError::Truncated`] under 8 bytes, [`DecodeError::TooLarge`]
    /// for a version or value over its bound.
    pub fn decode(bytes: &'a [u8]) -> Result<GetValue<'a>, DecodeError> {
        let mut r = Reader::new(bytes, "GetValue");
        let version = r.u64()?;
        super::txn::check_version("GetValue version", version)?;
        let value = r.take(r.remaining())?;
        check_len("GetValue value", value.len(), VALUE_BYTES_MAX)?;
        Ok(GetValue { version, value })
    }
}
