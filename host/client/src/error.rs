//! Why a call did not commit: one typed error for every way a call of
//! [`crate::KvClient`] ends other than committed, in process and out of
//! process alike.
//!
//! Most variants are the node's [`Status`] of the call (the outcome ring's
//! status, `splitkv_layout::app::outcome`); the others the client library
//! reports itself: the connection is gone, the in-flight bound is reached, a
//! wait ran out, the transaction was refused before sending, or the node
//! sent an outcome the client cannot accept (the node is untrusted for the
//! client too: such an outcome is a typed error, never a panic).

use splitkv_layout::app::{AbortReason, Branch, Status, UnavailableReason};
use splitkv_layout::{DecodeError, Key};

/// A submitted call's handle: its request id, unique among the client's
/// calls in flight (echoed by the node in the call's outcome).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub u64);

/// Why a [`crate::Txn`] cannot be sent: a bound of the one-shot transaction
/// (`splitkv_layout::app::txn`) is broken. Checked by the client before
/// anything is sent, so the node never sees it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    /// More compares than `TXN_COMPARES_MAX`.
    #[error("{count} compares exceed the maximum {max}")]
    TooManyCompares {
        /// Compares given.
        count: usize,
        /// The bound.
        max: usize,
    },
    /// More operations in a branch than `TXN_BRANCH_OPS_MAX`.
    #[error("{count} operations in the {branch:?} branch exceed the maximum {max}")]
    TooManyOps {
        /// The branch.
        branch: Branch,
        /// Operations given.
        count: usize,
        /// The bound.
        max: usize,
    },
    /// More gets in a branch than `TXN_BRANCH_GETS_MAX`.
    #[error("{count} gets in the {branch:?} branch exceed the maximum {max}")]
    TooManyGets {
        /// The branch.
        branch: Branch,
        /// Gets given.
        count: usize,
        /// The bound.
        max: usize,
    },
    /// Two operations of one branch name the same key.
    #[error("key {key:?} is named by two operations of the {branch:?} branch")]
    KeyTwiceInBranch {
        /// The branch.
        branch: Branch,
        /// The key.
        key: Key,
    },
    /// Distinct keys written by both branches together exceed
    /// `TXN_WRITES_MAX` (the NIC runtime's write-set bound).
    #[error("{count} distinct written keys exceed the write-set bound {max}")]
    WriteSetTooLarge {
        /// Keys written.
        count: usize,
        /// The bound.
        max: usize,
    },
    /// Distinct compared or read keys that are not written exceed
    /// `TXN_READS_MAX` (the NIC runtime's `READ_SET_MAX`).
    #[error("{count} distinct read-only keys exceed the read-set bound {max}")]
    ReadSetTooLarge {
        /// Keys compared or read and not written.
        count: usize,
        /// The bound.
        max: usize,
    },
    /// A put value or a compared value is longer than the node stores.
    #[error("a value of {len} B exceeds the maximum {max} B")]
    ValueTooLarge {
        /// Bytes given.
        len: usize,
        /// The bound: the node's `value_bytes_max`.
        max: usize,
    },
    /// A compared version is over `splitkv_layout::VERSION_MAX`.
    #[error("compared version {version} exceeds the maximum {max}")]
    VersionTooLarge {
        /// The version given.
        version: u64,
        /// The bound.
        max: u64,
    },
    /// The encoding would exceed `TXN_BYTES_MAX` or the node's argument
    /// bound, or breaks another rule of the format's decoder.
    #[error("the transaction does not encode: {0}")]
    Invalid(DecodeError),
}

/// Why a call did not commit (module docs). [`CallError::is_retryable`] says
/// whether sending the same call again may commit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The node aborted the call: nothing it wrote is visible. A conflict
    /// ([`AbortReason::is_conflict`]) is worth retrying; a user abort or a
    /// failed insert compare ([`AbortReason::CompareFailed`]) is not.
    #[error("aborted ({reason:?}): {detail}")]
    Aborted {
        /// Why.
        reason: AbortReason,
        /// The node's reason text (for people, never parsed).
        detail: String,
    },
    /// A get or delete named an absent key; nothing was written.
    #[error("key not found")]
    KeyNotFound,
    /// A value, the arguments or the result exceed a limit of the node
    /// (its `AppLimits`) or of the format; checked by the client before
    /// sending where it can, else reported by the node. Nothing was written.
    #[error("too large: {detail}")]
    TooLarge {
        /// What was too large.
        detail: String,
    },
    /// No procedure has this name or id: a name the node did not resolve at
    /// connection time, or an id the node does not know.
    #[error("unknown procedure {name}")]
    UnknownProcedure {
        /// The name the client could not resolve, or the node's reason text
        /// when the node did not know the id.
        name: String,
    },
    /// The node refused the call: the procedure refused its arguments, or
    /// the node cannot run this kind of call.
    #[error("rejected: {detail}")]
    Rejected {
        /// The node's reason text.
        detail: String,
    },
    /// The connection is gone (the node's socket closed, its rings are
    /// unusable, or the in-process cluster stopped): the outcomes of calls
    /// in flight are unknown.
    #[error("not connected: {detail}")]
    NotConnected {
        /// Why.
        detail: String,
    },
    /// The node cannot serve now (recovering, NIC runtime restarting,
    /// draining); retrying later may commit.
    #[error("node unavailable ({reason:?}): {detail}")]
    Unavailable {
        /// Why.
        reason: UnavailableReason,
        /// The node's reason text.
        detail: String,
    },
    /// The call may or may not have committed: never resubmit it blindly.
    #[error("outcome unknown: {detail}")]
    OutcomeUnknown {
        /// The node's reason text.
        detail: String,
    },
    /// The granted bound of calls in flight (`AppLimits::in_flight_max`) is
    /// reached: collect outcomes ([`crate::KvClient::poll_one`],
    /// [`crate::KvClient::wait`]) and submit again. Nothing was sent.
    #[error("{max} calls in flight already (the granted bound)")]
    InFlightFull {
        /// The bound.
        max: u32,
    },
    /// The request ring stayed full: the node is not taking requests fast
    /// enough. Nothing was sent; retry later.
    #[error("request ring full")]
    Busy,
    /// The wait for this call's outcome reached its deadline; the call is
    /// still in flight and its ticket still valid.
    #[error("timed out waiting for call {ticket:?}")]
    TimedOut {
        /// The call waited for.
        ticket: Ticket,
    },
    /// No call in flight has this ticket (never submitted, or its outcome
    /// was handed out already).
    #[error("no call in flight has ticket {ticket:?}")]
    UnknownTicket {
        /// The ticket given.
        ticket: Ticket,
    },
    /// The transaction breaks a bound; nothing was sent.
    #[error(transparent)]
    InvalidTxn(#[from] TxnError),
    /// The node sent an outcome entry that does not decode, or a body that
    /// does not fit the call (for `req_id`, if it decoded that far). The
    /// entry is consumed; the call it names, if any, ends with this error.
    #[error("bad outcome from the node (request {req_id:?}): {error}")]
    BadOutcome {
        /// The request id of the entry, if it decoded.
        req_id: Option<u64>,
        /// What is wrong with it.
        error: DecodeError,
    },
    /// The node sent an outcome for a request id that matches no call in
    /// flight. The entry is consumed and ignored otherwise.
    #[error("outcome for request {req_id}, which no call in flight has")]
    UnmatchedOutcome {
        /// The request id in the entry.
        req_id: u64,
    },
}

impl CallError {
    /// The error for a call the node ended with `status` (not committed) and
    /// reason text `detail`; `None` for [`Status::Committed`].
    pub fn from_status(status: Status, detail: &str) -> Option<CallError> {
        let detail = detail.to_owned();
        Some(match status {
            Status::Committed => return None,
            Status::Aborted(reason) => CallError::Aborted { reason, detail },
            Status::KeyNotFound => CallError::KeyNotFound,
            Status::TooLarge => CallError::TooLarge { detail },
            Status::UnknownProcedure => CallError::UnknownProcedure { name: detail },
            Status::Rejected => CallError::Rejected { detail },
            Status::Unavailable(reason) => CallError::Unavailable { reason, detail },
            Status::OutcomeUnknown => CallError::OutcomeUnknown { detail },
        })
    }

    /// Whether sending the same call again may commit: a conflict abort,
    /// the node unavailable, the in-flight bound or a full ring. Never for
    /// [`CallError::OutcomeUnknown`] (it may have committed).
    pub fn is_retryable(&self) -> bool {
        match self {
            CallError::Aborted { reason, .. } => reason.is_conflict(),
            CallError::Unavailable { .. } | CallError::InFlightFull { .. } | CallError::Busy => {
                true
            }
            _ => false,
        }
    }

    /// A [`CallError::BadOutcome`] for `req_id`.
    pub(crate) fn bad(req_id: u64, error: DecodeError) -> CallError {
        CallError::BadOutcome {
            req_id: Some(req_id),
            error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_but_committed_is_an_error_and_only_conflicts_and_unavailable_retry() {
        for s in Status::ALL {
            let e = CallError::from_status(s, "why");
            assert_eq!(e.is_none(), s.is_committed(), "{s:?}");
            if let Some(e) = e {
                assert_eq!(e.is_retryable(), s.is_retryable(), "{s:?}");
            }
        }
    }
}
