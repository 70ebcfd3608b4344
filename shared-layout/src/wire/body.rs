//! Message bodies: [`Body`] and [`ReplyStatus`] (the validated lists they
//! borrow are in `lists.rs`).

use super::lists::{check_count, read_items};
pub use super::lists::{Item, ItemIter, ItemList, KeyList, VersionList};
use super::{MsgKind, NodeMask, ONE_WRITE_ARGS_BYTES_MAX, ONE_WRITE_RESULT_BYTES_MAX};
use crate::error::{DecodeError, Reader};
use crate::host_nic::TxStatus;
use crate::key::{Key, KEY_BYTES};
use crate::TxId;

/// A server's answer to EXECUTE, VALIDATE, LOG or COMMIT: `Ok`, or why it
/// refused (a rule the fuzz targets check: never a silent drop, never a wrong
/// reason). One byte on the wire; a coordinator turns a refusal into the
/// transaction's abort reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ReplyStatus {
    /// Done: all keys read and write-set keys locked (EXECUTE), every read
    /// unchanged (VALIDATE), records appended to the host log (LOG, COMMIT).
    Ok = 0,
    /// A key was locked by another transaction (no-wait: the transaction aborts).
    LockConflict = 1,
    /// A read-set key changed or was locked since it was read (Xenic §4.2 step 3).
    ValidationFailed = 2,
    /// The replica has no room for a key the transaction inserts.
    TableFull = 3,
    /// A value over the node's limit, or a response that cannot fit a packet.
    TooLarge = 4,
    /// Host memory could not be read or the host log could not be written
    /// (a DMA or host-decode failure), never reported as a conflict.
    HostFailure = 5,
    /// No free server slot for the request.
    Busy = 6,
    /// The request broke a protocol rule (metadata with a planted LOCKED
    /// bit, DELETED with a value, a version at `VERSION_MAX`, a COMMIT for a key the
    /// transaction does not hold locked).
    Malformed = 7,
    /// The node's NIC runtime restarted and is rebuilding its volatile state
    /// (locks, cache; the NIC restart's rebuild): it serves no EXECUTE or
    /// VALIDATE, and answers a LOG it does not hold with this, rather than
    /// serve stale locks.
    Unavailable = 8,
}

impl ReplyStatus {
    /// Every status, in wire-value order.
    pub const ALL: [ReplyStatus; 9] = [
        ReplyStatus::Ok,
        ReplyStatus::LockConflict,
        ReplyStatus::ValidationFailed,
        ReplyStatus::TableFull,
        ReplyStatus::TooLarge,
        ReplyStatus::HostFailure,
        ReplyStatus::Busy,
        ReplyStatus::Malformed,
        ReplyStatus::Unavailable,
    ];

    /// The status with wire value `tag`.
    ///
    /// # Errors
    /// [`DecodeError::BadTag`] for an unknown value.
    pub fn from_u8(tag: u8) -> Result<ReplyStatus, DecodeError> {
        ReplyStatus::ALL
            .get(tag as usize)
            .copied()
            .ok_or(DecodeError::BadTag {
                what: "reply status",
                tag: tag as u64,
            })
    }

    /// Whether the request was done.
    pub fn is_ok(self) -> bool {
        self == ReplyStatus::Ok
    }
}

/// A decoded message body, borrowing from the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    /// See [`MsgKind::Execute`].
    Execute {
        /// Transaction id.
        tx_id: TxId,
        /// Keys to read without locking.
        reads: KeyList<'a>,
        /// Keys to lock and read.
        locks: KeyList<'a>,
    },
    /// See [`MsgKind::ExecuteResp`]. On `Ok`, items are the reads then the locks, in request order.
    ExecuteResp {
        /// Transaction id.
        tx_id: TxId,
        /// Outcome.
        status: ReplyStatus,
        /// Values read.
        items: ItemList<'a>,
    },
    /// See [`MsgKind::Validate`].
    Validate {
        /// Transaction id.
        tx_id: TxId,
        /// Keys with the versions the transaction read.
        items: VersionList<'a>,
    },
    /// See [`MsgKind::ValidateResp`].
    ValidateResp {
        /// Transaction id.
        tx_id: TxId,
        /// `Ok` if every version was unchanged and unlocked; else why not.
        status: ReplyStatus,
    },
    /// See [`MsgKind::Log`].
    Log {
        /// Transaction id.
        tx_id: TxId,
        /// Every shard the transaction writes (crash recovery's evidence,
        /// FaRM's LOCK records carry the same); empty when the sender did
        /// not say.
        write_shards: NodeMask,
        /// New values with their new versions.
        items: ItemList<'a>,
    },
    /// See [`MsgKind::LogAck`].
    LogAck {
        /// Transaction id.
        tx_id: TxId,
        /// `Ok` once the records are in the host log; else why they are not.
        status: ReplyStatus,
    },
    /// See [`MsgKind::Commit`].
    Commit {
        /// Transaction id.
        tx_id: TxId,
        /// New values with their new versions.
        items: ItemList<'a>,
    },
    /// See [`MsgKind::CommitAck`].
    CommitAck {
        /// Transaction id.
        tx_id: TxId,
        /// `Ok` once installed and in the host log; else why not.
        status: ReplyStatus,
    },
    /// See [`MsgKind::Abort`].
    Abort {
        /// Transaction id.
        tx_id: TxId,
        /// Keys whose locks to release.
        keys: KeyList<'a>,
    },
    /// See [`MsgKind::AbortLog`].
    AbortLog {
        /// Transaction id.
        tx_id: TxId,
    },
    /// See [`MsgKind::AbortLogAck`].
    AbortLogAck {
        /// Transaction id.
        tx_id: TxId,
        /// `Ok` once the abort is recorded there (or was already); else why not.
        status: ReplyStatus,
    },
    /// See [`MsgKind::GetOne`].
    GetOne {
        /// The caller's request id (echoed in the reply).
        tx_id: TxId,
        /// The key to read.
        key: Key,
    },
    /// See [`MsgKind::GetOneResp`]. On `Ok`, one item: the key with its
    /// committed metadata and value (`DELETED` set and no value when absent);
    /// otherwise none.
    GetOneResp {
        /// The caller's request id.
        tx_id: TxId,
        /// `Ok`, or why not (`LockConflict`: locked, retry).
        status: ReplyStatus,
        /// The value read (0 or 1 item).
        items: ItemList<'a>,
    },
    /// See [`MsgKind::WriteOne`].
    WriteOne {
        /// The caller's request id (echoed in the reply).
        tx_id: TxId,
        /// The one-key transaction's arguments (≤ [`ONE_WRITE_ARGS_BYTES_MAX`]).
        args: &'a [u8],
    },
    /// See [`MsgKind::WriteOneResp`].
    WriteOneResp {
        /// The caller's request id.
        tx_id: TxId,
        /// How the primary's transaction ended.
        status: TxStatus,
        /// Its result (≤ [`ONE_WRITE_RESULT_BYTES_MAX`]).
        result: &'a [u8],
    },
    /// See [`MsgKind::Get`].
    Get {
        /// Transaction id.
        tx_id: TxId,
        /// Keys to read (lock-free).
        keys: KeyList<'a>,
    },
    /// See [`MsgKind::GetResp`]. On `Ok`, one item per key, in request order.
    GetResp {
        /// Transaction id.
        tx_id: TxId,
        /// Outcome.
        status: ReplyStatus,
        /// Bit `i`: item `i` was unlocked and readable when read.
        clean: u64,
        /// Values read.
        items: ItemList<'a>,
    },
    /// See [`MsgKind::Lock`].
    Lock {
        /// Transaction id.
        tx_id: TxId,
        /// Every shard whose keys the transaction locks (recovery's evidence).
        lock_shards: NodeMask,
        /// Keys to lock with the versions the transaction read.
        reads: VersionList<'a>,
        /// Written keys at this node (locked too), with their new values.
        items: ItemList<'a>,
    },
    /// See [`MsgKind::LockResp`].
    LockResp {
        /// Transaction id.
        tx_id: TxId,
        /// `Ok` once locked, checked and logged; else why not.
        status: ReplyStatus,
    },
    /// See [`MsgKind::Replicate`].
    Replicate {
        /// Transaction id.
        tx_id: TxId,
        /// Every shard the transaction writes (recovery's evidence).
        write_shards: NodeMask,
        /// New values with their new versions (none at a primary that holds
        /// them from its Lock).
        items: ItemList<'a>,
    },
    /// See [`MsgKind::ReplicateAck`].
    ReplicateAck {
        /// Transaction id.
        tx_id: TxId,
        /// `Ok` once in the host log; else why not.
        status: ReplyStatus,
    },
    /// See [`MsgKind::Unlock`].
    Unlock {
        /// Transaction id.
        tx_id: TxId,
        /// Whether the transaction committed (install) or aborted (drop).
        commit: bool,
        /// Keys locked and not written here: released.
        keys: KeyList<'a>,
        /// Written keys here: installed on commit, then released.
        items: ItemList<'a>,
    },
    /// See [`MsgKind::UnlockAck`].
    UnlockAck {
        /// Transaction id.
        tx_id: TxId,
        /// `Ok` once decided and released there; else why not.
        status: ReplyStatus,
    },
    /// See [`MsgKind::Readable`].
    Readable {
        /// Transaction id.
        tx_id: TxId,
        /// The backup's written keys with their new values.
        items: ItemList<'a>,
    },
    /// See [`MsgKind::ReadableAck`].
    ReadableAck {
        /// Transaction id.
        tx_id: TxId,
        /// `Ok` once installed; else why not.
        status: ReplyStatus,
    },
}

impl<'a> Body<'a> {
    /// The kind of this body.
    pub fn kind(&self) -> MsgKind {
        match self {
            Body::Execute { .. } => MsgKind::Execute,
            Body::ExecuteResp { .. } => MsgKind::ExecuteResp,
            Body::Validate { .. } => MsgKind::Validate,
            Body::ValidateResp { .. } => MsgKind::ValidateResp,
            Body::Log { .. } => MsgKind::Log,
            Body::LogAck { .. } => MsgKind::LogAck,
            Body::Commit { .. } => MsgKind::Commit,
            Body::CommitAck { .. } => MsgKind::CommitAck,
            Body::Abort { .. } => MsgKind::Abort,
            Body::AbortLog { .. } => MsgKind::AbortLog,
            Body::AbortLogAck { .. } => MsgKind::AbortLogAck,
            Body::GetOne { .. } => MsgKind::GetOne,
            Body::GetOneResp { .. } => MsgKind::GetOneResp,
            Body::WriteOne { .. } => MsgKind::WriteOne,
            Body::WriteOneResp { .. } => MsgKind::WriteOneResp,
            Body::Get { .. } => MsgKind::Get,
            Body::GetResp { .. } => MsgKind::GetResp,
            Body::Lock { .. } => MsgKind::Lock,
            Body::LockResp { .. } => MsgKind::LockResp,
            Body::Replicate { .. } => MsgKind::Replicate,
            Body::ReplicateAck { .. } => MsgKind::ReplicateAck,
            Body::Unlock { .. } => MsgKind::Unlock,
            Body::UnlockAck { .. } => MsgKind::UnlockAck,
            Body::Readable { .. } => MsgKind::Readable,
            Body::ReadableAck { .. } => MsgKind::ReadableAck,
        }
    }

    /// The transaction the message belongs to.
    pub fn tx_id(&self) -> TxId {
        match *self {
            Body::Execute { tx_id, .. }
            | Body::ExecuteResp { tx_id, .. }
            | Body::Validate { tx_id, .. }
            | Body::ValidateResp { tx_id, .. }
            | Body::Log { tx_id, .. }
            | Body::LogAck { tx_id, .. }
            | Body::Commit { tx_id, .. }
            | Body::CommitAck { tx_id, .. }
            | Body::Abort { tx_id, .. }
            | Body::AbortLog { tx_id }
            | Body::AbortLogAck { tx_id, .. }
            | Body::GetOne { tx_id, .. }
            | Body::GetOneResp { tx_id, .. }
            | Body::WriteOne { tx_id, .. }
            | Body::WriteOneResp { tx_id, .. }
            | Body::Get { tx_id, .. }
            | Body::GetResp { tx_id, .. }
            | Body::Lock { tx_id, .. }
            | Body::LockResp { tx_id, .. }
            | Body::Replicate { tx_id, .. }
            | Body::ReplicateAck { tx_id, .. }
            | Body::Unlock { tx_id, .. }
            | Body::UnlockAck { tx_id, .. }
            | Body::Readable { tx_id, .. }
            | Body::ReadableAck { tx_id, .. } => tx_id,
        }
    }

    /// Decodes a body of `kind` that must span exactly `bytes`.
    pub fn decode(kind: MsgKind, bytes: &'a [u8]) -> Result<Body<'a>, DecodeError> {
        let mut r = Reader::new(bytes, "message body");
        let tx_id = r.tx_id()?;
        let body = match kind {
            MsgKind::Execute => {
                let nr = r.u16()? as usize;
                let nl = r.u16()? as usize;
                check_count(nr + nl)?;
                let reads = KeyList {
                    bytes: r.take(nr * KEY_BYTES)?,
                };
                let locks = KeyList {
                    bytes: r.take(nl * KEY_BYTES)?,
                };
                Body::Execute {
                    tx_id,
                    reads,
                    locks,
                }
            }
            MsgKind::ExecuteResp => {
                let status = ReplyStatus::from_u8(r.u8()?)?;
                let items = read_items(&mut r)?;
                Body::ExecuteResp {
                    tx_id,
                    status,
                    items,
                }
            }
            MsgKind::Validate => {
                let n = r.u16()? as usize;
                check_count(n)?;
                Body::Validate {
                    tx_id,
                    items: VersionList {
                        bytes: r.take(n * (KEY_BYTES + 8))?,
                    },
                }
            }
            MsgKind::ValidateResp => Body::ValidateResp {
                tx_id,
                status: ReplyStatus::from_u8(r.u8()?)?,
            },
            MsgKind::Log => Body::Log {
                tx_id,
                write_shards: NodeMask(r.u16()?),
                items: read_items(&mut r)?,
            },
            MsgKind::LogAck => Body::LogAck {
                tx_id,
                status: ReplyStatus::from_u8(r.u8()?)?,
            },
            MsgKind::Commit => Body::Commit {
                tx_id,
                items: read_items(&mut r)?,
            },
            MsgKind::CommitAck => Body::CommitAck {
                tx_id,
                status: ReplyStatus::from_u8(r.u8()?)?,
            },
            MsgKind::Abort => {
                let n = r.u16()? as usize;
                check_count(n)?;
                Body::Abort {
                    tx_id,
                    keys: KeyList {
                        bytes: r.take(n * KEY_BYTES)?,
                    },
                }
            }
            MsgKind::AbortLog => Body::AbortLog { tx_id },
            MsgKind::AbortLogAck => Body::AbortLogAck {
                tx_id,
                status: ReplyStatus::from_u8(r.u8()?)?,
            },
            MsgKind::GetOne => Body::GetOne {
                tx_id,
                key: r.key()?,
            },
            MsgKind::GetOneResp => {
                let status = ReplyStatus::from_u8(r.u8()?)?;
                let items = read_items(&mut r)?;
                if items.len() > 1 {
                    return Err(DecodeError::TooLarge {
                        what: "GetOneResp items",
                        len: items.len(),
                        max: 1,
                    });
                }
                Body::GetOneResp {
                    tx_id,
                    status,
                    items,
                }
            }
            MsgKind::WriteOne => Body::WriteOne {
                tx_id,
                args: read_bytes(&mut r, "WriteOne args", ONE_WRITE_ARGS_BYTES_MAX)?,
            },
            MsgKind::WriteOneResp => {
                let raw = r.u8()?;
                let status = TxStatus::from_u8(raw).ok_or(DecodeError::BadTag {
                    what: "WriteOneResp status",
                    tag: raw as u64,
                })?;
                Body::WriteOneResp {
                    tx_id,
                    status,
                    result: read_bytes(&mut r, "WriteOneResp result", ONE_WRITE_RESULT_BYTES_MAX)?,
                }
            }
            MsgKind::Get
            | MsgKind::GetResp
            | MsgKind::Lock
            | MsgKind::LockResp
            | MsgKind::Replicate
            | MsgKind::ReplicateAck
            | MsgKind::Unlock
            | MsgKind::UnlockAck
            | MsgKind::Readable
            | MsgKind::ReadableAck => super::dnl::decode(kind, tx_id, &mut r)?,
            MsgKind::Recovery | MsgKind::Rebuild | MsgKind::Copy => {
                // Not a transaction body: see `RecoveryMsg::decode`,
                // `RebuildMsg::decode`, `CopyMsg::decode`.
                return Err(DecodeError::BadTag {
                    what: "transaction message kind",
                    tag: kind as u64,
                });
            }
        };
        r.finish()?;
        Ok(body)
    }
}

/// A `u32` length, then that many bytes (at most `max`).
fn read_bytes<'a>(
    r: &mut Reader<'a>,
    what: &'static str,
    max: usize,
) -> Result<&'a [u8], DecodeError> {
    let len = r.u32()? as usize;
    if len > max {
        return Err(DecodeError::TooLarge { what, len, max });
    }
    r.take(len)
}
