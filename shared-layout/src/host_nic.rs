//! Messages on the host↔NIC rings ("PCIe" in DESIGN.md): transaction requests
//! for shipped procedures (Xenic §4.2.2) and host-log acknowledgements (Xenic §4.2
//! step 7) from host to NIC runtime, transaction outcomes back.
//!
//! One message is one ring entry. Encoding (all integers little endian):
//!
//! | message | bytes |
//! |---|---|
//! | [`TxRequest`] | tag `0x01`, `req_id: u64`, `procedure: u32`, `args_len: u32`, `args` |
//! | [`LogApplied`] | tag `0x02`, `applied_bytes: u64` |
//! | [`TxOutcome`] | tag `0x81`, `req_id: u64`, `status: u8`, `result_len: u32`, `result` |
//!
//! Host→NIC and NIC→host tags are disjoint, so a message put on the wrong ring
//! fails to decode with [`DecodeError::BadTag`]. Decoding borrows byte strings
//! from the input (zero copy) and rejects unknown tags, truncation, lengths over
//! [`ARGS_BYTES_MAX`] / [`RESULT_BYTES_MAX`] and trailing bytes.
//!
//! Both limits hold a transaction of [`TX_VALUES_MAX`] values of
//! [`VALUE_BYTES_MAX`] bytes (the arguments of a procedure that writes 16 keys
//! of 4 KiB, or the result of one that returns 16 such values) plus
//! [`TX_FRAMING_BYTES_MAX`] of keys, lengths and counts; the lengths are `u32`
//! because that exceeds a `u16`.

use crate::error::{DecodeError, Reader};
use crate::ring::RING_ENTRY_BYTES_MAX;
#[cfg(doc)]
use crate::VALUE_BYTES_MAX;
use crate::{TX_VALUES_MAX, TX_VALUE_BYTES_MAX};

/// Bytes an `args` or `result` may carry beside its [`TX_VALUE_BYTES_MAX`]
/// value bytes: keys, lengths and counts (16 keys with an 8-byte id and a
/// 4-byte length each take 192).
pub const TX_FRAMING_BYTES_MAX: usize = 1024;

/// Largest `args` of a [`TxRequest`], in bytes: [`TX_VALUE_BYTES_MAX`] +
/// [`TX_FRAMING_BYTES_MAX`] = 66 560.
pub const ARGS_BYTES_MAX: usize = TX_VALUE_BYTES_MAX + TX_FRAMING_BYTES_MAX;

/// Largest `result` of a [`TxOutcome`], in bytes: [`TX_VALUE_BYTES_MAX`] +
/// [`TX_FRAMING_BYTES_MAX`] = 66 560.
pub const RESULT_BYTES_MAX: usize = TX_VALUE_BYTES_MAX + TX_FRAMING_BYTES_MAX;

/// Kind tag of an encoded [`TxRequest`].
pub const TAG_TX_REQUEST: u8 = 0x01;
/// Kind tag of an encoded [`LogApplied`].
pub const TAG_LOG_APPLIED: u8 = 0x02;
/// Kind tag of an encoded [`TxOutcome`].
pub const TAG_TX_OUTCOME: u8 = 0x81;

/// Encoded bytes of a [`TxRequest`] without its `args`.
pub const TX_REQUEST_HEADER_BYTES: usize = 1 + 8 + 4 + 4;
/// Encoded bytes of a [`LogApplied`].
pub const LOG_APPLIED_BYTES: usize = 1 + 8;
/// Encoded bytes of a [`TxOutcome`] without its `result`.
pub const TX_OUTCOME_HEADER_BYTES: usize = 1 + 8 + 1 + 4;

/// Largest encoded [`HostToNic`] message, in bytes.
pub const HOST_TO_NIC_BYTES_MAX: usize = TX_REQUEST_HEADER_BYTES + ARGS_BYTES_MAX;
/// Largest encoded [`NicToHost`] message, in bytes.
pub const NIC_TO_HOST_BYTES_MAX: usize = TX_OUTCOME_HEADER_BYTES + RESULT_BYTES_MAX;

const _: () = assert!(HOST_TO_NIC_BYTES_MAX <= RING_ENTRY_BYTES_MAX);
const _: () = assert!(NIC_TO_HOST_BYTES_MAX <= RING_ENTRY_BYTES_MAX);
const _: () = assert!(ARGS_BYTES_MAX <= u32::MAX as usize && RESULT_BYTES_MAX <= u32::MAX as usize);
// A full-size transaction's values fit, with room for their keys.
const _: () = assert!(TX_VALUES_MAX * (8 + 4) <= TX_FRAMING_BYTES_MAX);

/// How a transaction ended, as reported to the host: committed, or why not.
///
/// The application needs the reason to decide what to do next: a conflict
/// ([`TxStatus::is_conflict`]) is worth retrying as it is, a user abort gives
/// the same answer again, the rest need a change first (smaller values, a
/// larger table, a live node).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxStatus {
    /// Committed; the result is final.
    Committed = 0,
    /// Aborted: a key of the transaction was locked by another transaction
    /// (no-wait locking, Dandelion §4.2.2). Retrying may commit.
    LockConflict = 1,
    /// The procedure itself chose to abort; retrying gives the same answer.
    UserAborted = 2,
    /// Not run: unknown procedure id, malformed arguments, or writes outside
    /// the declared write set. The result holds a short reason.
    Rejected = 3,
    /// Aborted: a key of the read set changed (or was locked) between its read
    /// and commit-time validation (Xenic §4.2, step 3). Retrying may commit.
    ValidationFailed = 4,
    /// Aborted: a replica had no room to insert a key the transaction creates.
    TableFull = 5,
    /// Not run: a value, or the transaction's messages, exceed a limit of the
    /// node or the wire. The result holds a short reason.
    TooLarge = 6,
    /// Aborted: a replica the transaction needs is unavailable (failed, or
    /// recovering). Retrying later may commit.
    Unavailable = 7,
    /// Aborted: a replica could not read its host table or write its host
    /// log (a DMA or host-decode failure), never reported as a conflict.
    HostFailure = 8,
    /// Outcome unknown: the coordinator stopped hearing from a replica after
    /// the write set was sent for logging (Xenic §4.2 step 4) and before the
    /// commit point was known reached, so recovery may still commit it (as
    /// FoundationDB's `commit_unknown_result`). Never resubmit it blindly: it
    /// may have committed; a history records it as indeterminate (`info`).
    Unknown = 9,
}

impl TxStatus {
    /// Every status, in wire-value order.
    pub const ALL: [TxStatus; 10] = [
        TxStatus::Committed,
        TxStatus::LockConflict,
        TxStatus::UserAborted,
        TxStatus::Rejected,
        TxStatus::ValidationFailed,
        TxStatus::TableFull,
        TxStatus::TooLarge,
        TxStatus::Unavailable,
        TxStatus::HostFailure,
        TxStatus::Unknown,
    ];

    /// The status with wire value `tag`, if any.
    pub fn from_u8(tag: u8) -> Option<TxStatus> {
        TxStatus::ALL.get(tag as usize).copied()
    }

    /// Whether the transaction lost to a concurrent one (lock conflict or
    /// failed validation): the case a client retries unchanged.
    pub fn is_conflict(self) -> bool {
        matches!(self, TxStatus::LockConflict | TxStatus::ValidationFailed)
    }

    /// Whether the transaction may or may not have committed
    /// ([`TxStatus::Unknown`]): neither a commit nor an abort.
    pub fn is_indeterminate(self) -> bool {
        self == TxStatus::Unknown
    }

    /// A short lower-case name for reports ("lock conflict", "table full").
    pub fn name(self) -> &'static str {
        match self {
            TxStatus::Committed => "committed",
            TxStatus::LockConflict => "lock conflict",
            TxStatus::UserAborted => "user abort",
            TxStatus::Rejected => "rejected",
            TxStatus::ValidationFailed => "validation failed",
            TxStatus::TableFull => "table full",
            TxStatus::TooLarge => "too large",
            TxStatus::Unavailable => "unavailable",
            TxStatus::HostFailure => "host failure",
            TxStatus::Unknown => "unknown outcome",
        }
    }
}

const _: () = assert!(TxStatus::ALL.len() == TxStatus::Unknown as usize + 1);

/// Host → NIC: run registered procedure `procedure` with `args` as a transaction
/// (function shipping, Xenic §4.2.2). `args` is at most [`ARGS_BYTES_MAX`] bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxRequest<'a> {
    /// Host-chosen id, echoed in the [`TxOutcome`].
    pub req_id: u64,
    /// Registered procedure id.
    pub procedure: u32,
    /// Procedure arguments (opaque to this layer), at most [`ARGS_BYTES_MAX`] bytes.
    pub args: &'a [u8],
}

/// NIC → host: the outcome of the [`TxRequest`] with the same `req_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxOutcome<'a> {
    /// The request's `req_id`.
    pub req_id: u64,
    /// How the transaction ended.
    pub status: TxStatus,
    /// Procedure output (opaque to this layer), at most [`RESULT_BYTES_MAX`] bytes.
    pub result: &'a [u8],
}

/// Host → NIC: host workers have applied the host log up to this point (Xenic
/// §4.2 step 7), so the NIC runtime may reclaim that log space and unpin the
/// cached objects of the records before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogApplied {
    /// Host-log position, in the log ring's produced-bytes units (the value
    /// [`crate::ring::RingProducer::try_push`] returned for the last applied entry).
    pub applied_bytes: u64,
}

/// A message on the host → NIC ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostToNic<'a> {
    /// Run a shipped procedure.
    TxRequest(TxRequest<'a>),
    /// Host-log acknowledgement.
    LogApplied(LogApplied),
}

/// A message on the NIC → host ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NicToHost<'a> {
    /// A transaction finished.
    TxOutcome(TxOutcome<'a>),
}

impl HostToNic<'_> {
    /// Appends the encoding (module docs) to `out`; [`Self::encoded_len`] bytes.
    ///
    /// # Panics
    /// If a [`TxRequest`]'s `args` exceed [`ARGS_BYTES_MAX`] (callers validate first).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.reserve(self.encoded_len());
        match self {
            HostToNic::TxRequest(r) => {
                assert!(
                    r.args.len() <= ARGS_BYTES_MAX,
                    "TxRequest args over ARGS_BYTES_MAX"
                );
                out.push(TAG_TX_REQUEST);
                out.extend_from_slice(&r.req_id.to_le_bytes());
                out.extend_from_slice(&r.procedure.to_le_bytes());
                out.extend_from_slice(&(r.args.len() as u32).to_le_bytes());
                out.extend_from_slice(r.args);
            }
            HostToNic::LogApplied(a) => {
                out.push(TAG_LOG_APPLIED);
                out.extend_from_slice(&a.applied_bytes.to_le_bytes());
            }
        }
    }

    /// Decodes exactly one message from all of `bytes`, borrowing `args` from it.
    ///
    /// # Errors
    /// [`DecodeError::BadTag`] for an unknown kind tag, [`DecodeError::Truncated`]
    /// for missing bytes, [`DecodeError::TooLarge`] for `args_len` over
    /// [`ARGS_BYTES_MAX`], [`DecodeError::Inconsistent`] for trailing bytes.
    pub fn decode(bytes: &[u8]) -> Result<HostToNic<'_>, DecodeError> {
        let mut r = Reader::new(bytes, "host-to-nic message");
        let msg = match r.u8()? {
            TAG_TX_REQUEST => {
                let req_id = r.u64()?;
                let procedure = r.u32()?;
                let len = r.u32()? as usize;
                if len > ARGS_BYTES_MAX {
                    return Err(DecodeError::TooLarge {
                        what: "TxRequest args",
                        len,
                        max: ARGS_BYTES_MAX,
                    });
                }
                let args = r.take(len)?;
                HostToNic::TxRequest(TxRequest {
                    req_id,
                    procedure,
                    args,
                })
            }
            TAG_LOG_APPLIED => HostToNic::LogApplied(LogApplied {
                applied_bytes: r.u64()?,
            }),
            tag => {
                return Err(DecodeError::BadTag {
                    what: "host-to-nic message kind",
                    tag: tag as u64,
                })
            }
        };
        r.finish()?;
        Ok(msg)
    }

    /// Bytes [`Self::encode`] appends.
    pub fn encoded_len(&self) -> usize {
        match self {
            HostToNic::TxRequest(r) => TX_REQUEST_HEADER_BYTES + r.args.len(),
            HostToNic::LogApplied(_) => LOG_APPLIED_BYTES,
        }
    }
}

impl NicToHost<'_> {
    /// Appends the encoding (module docs) to `out`; [`Self::encoded_len`] bytes.
    ///
    /// # Panics
    /// If a [`TxOutcome`]'s `result` exceeds [`RESULT_BYTES_MAX`] (callers validate
    /// first).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.reserve(self.encoded_len());
        match self {
            NicToHost::TxOutcome(o) => {
                assert!(
                    o.result.len() <= RESULT_BYTES_MAX,
                    "TxOutcome result over RESULT_BYTES_MAX"
                );
                out.push(TAG_TX_OUTCOME);
                out.extend_from_slice(&o.req_id.to_le_bytes());
                out.push(o.status as u8);
                out.extend_from_slice(&(o.result.len() as u32).to_le_bytes());
                out.extend_from_slice(o.result);
            }
        }
    }

    /// Decodes exactly one message from all of `bytes`, borrowing `result` from it.
    ///
    /// # Errors
    /// [`DecodeError::BadTag`] for an unknown kind or status tag,
    /// [`DecodeError::Truncated`] for missing bytes, [`DecodeError::TooLarge`] for
    /// `result_len` over [`RESULT_BYTES_MAX`], [`DecodeError::Inconsistent`] for
    /// trailing bytes.
    pub fn decode(bytes: &[u8]) -> Result<NicToHost<'_>, DecodeError> {
        let mut r = Reader::new(bytes, "nic-to-host message");
        let msg = match r.u8()? {
            TAG_TX_OUTCOME => {
                let req_id = r.u64()?;
                let raw_status = r.u8()?;
                let status = TxStatus::from_u8(raw_status).ok_or(DecodeError::BadTag {
                    what: "TxOutcome status",
                    tag: raw_status as u64,
                })?;
                let len = r.u32()? as usize;
                if len > RESULT_BYTES_MAX {
                    return Err(DecodeError::TooLarge {
                        what: "TxOutcome result",
                        len,
                        max: RESULT_BYTES_MAX,
                    });
                }
                let result = r.take(len)?;
                NicToHost::TxOutcome(TxOutcome {
                    req_id,
                    status,
                    result,
                })
            }
            tag => {
                return Err(DecodeError::BadTag {
                    what: "nic-to-host message kind",
                    tag: tag as u64,
                })
            }
        };
        r.finish()?;
        Ok(msg)
    }

    /// Bytes [`Self::encode`] appends.
    pub fn encoded_len(&self) -> usize {
        match self {
            NicToHost::TxOutcome(o) => TX_OUTCOME_HEADER_BYTES + o.result.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_request_layout() {
        let msg = HostToNic::TxRequest(TxRequest {
            req_id: 0x0102_0304_0506_0708,
            procedure: 7,
            args: b"ab",
        });
        let mut out = vec![0xee];
        msg.encode(&mut out);
        assert_eq!(
            out,
            [0xee, 0x01, 8, 7, 6, 5, 4, 3, 2, 1, 7, 0, 0, 0, 2, 0, 0, 0, b'a', b'b']
        );
        assert_eq!(msg.encoded_len(), out.len() - 1);
        assert_eq!(HostToNic::decode(&out[1..]), Ok(msg));
    }

    #[test]
    fn misrouted_message_is_bad_tag() {
        let mut out = Vec::new();
        HostToNic::LogApplied(LogApplied { applied_bytes: 64 }).encode(&mut out);
        assert!(matches!(
            NicToHost::decode(&out),
            Err(DecodeError::BadTag { .. })
        ));
    }
}
