//! Message bodies: [`Body`], [`ReplyStatus`] and the validated key, item and
//! version lists with their iterators.

use super::{
    MsgKind, NodeMask, ITEMS_PER_MESSAGE_MAX, ONE_WRITE_ARGS_BYTES_MAX, ONE_WRITE_RESULT_BYTES_MAX,
};
use crate::error::{DecodeError, Reader};
use crate::host_nic::TxStatus;
use crate::key::{Key, KEY_BYTES};
use crate::meta::ObjectMeta;
use crate::{TxId, VALUE_BYTES_MAX};

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
    /// The request broke a protocol rule (metadata with planted LOCKED or
    /// DELETED bits, a version at `VERSION_MAX`, a COMMIT for a key the
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

/// A validated list of keys inside a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyList<'a> {
    bytes: &'a [u8],
}

impl<'a> KeyList<'a> {
    /// Number of keys.
    pub fn len(&self) -> usize {
        self.bytes.len() / KEY_BYTES
    }
    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    /// The keys in order.
    pub fn iter(&self) -> impl Iterator<Item = Key> + 'a {
        self.bytes
            .chunks_exact(KEY_BYTES)
            .map(|c| Key::decode(c).expect("validated"))
    }
}

/// One item: a key with metadata and a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Item<'a> {
    /// The key.
    pub key: Key,
    /// Version and flags.
    pub meta: ObjectMeta,
    /// The value bytes (≤ [`VALUE_BYTES_MAX`]).
    pub value: &'a [u8],
}

/// A validated list of items inside a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemList<'a> {
    bytes: &'a [u8],
    count: usize,
}

impl<'a> ItemList<'a> {
    /// Number of items.
    pub fn len(&self) -> usize {
        self.count
    }
    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// The items in order.
    pub fn iter(&self) -> ItemIter<'a> {
        ItemIter {
            r: Reader::new(self.bytes, "item"),
            left: self.count,
        }
    }
}

/// Iterator over an [`ItemList`].
#[derive(Debug, Clone)]
pub struct ItemIter<'a> {
    r: Reader<'a>,
    left: usize,
}

impl<'a> Iterator for ItemIter<'a> {
    type Item = Item<'a>;
    fn next(&mut self) -> Option<Item<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        Some(read_item(&mut self.r).expect("validated at decode"))
    }
}

fn read_item<'a>(r: &mut Reader<'a>) -> Result<Item<'a>, DecodeError> {
    let key = r.key()?;
    let meta = ObjectMeta(r.u64()?);
    let len = r.u16()? as usize;
    if len > VALUE_BYTES_MAX {
        return Err(DecodeError::TooLarge {
            what: "item value",
            len,
            max: VALUE_BYTES_MAX,
        });
    }
    let value = r.take(len)?;
    Ok(Item { key, meta, value })
}

/// A validated list of `(key, version)` pairs (VALIDATE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionList<'a> {
    bytes: &'a [u8],
}

impl<'a> VersionList<'a> {
    /// Number of pairs.
    pub fn len(&self) -> usize {
        self.bytes.len() / (KEY_BYTES + 8)
    }
    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    /// The pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = (Key, u64)> + 'a {
        self.bytes.chunks_exact(KEY_BYTES + 8).map(|c| {
            let key = Key::decode(c).expect("validated");
            let v = u64::from_le_bytes(c[KEY_BYTES..].try_into().expect("validated"));
            (key, v)
        })
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
            | Body::WriteOneResp { tx_id, .. } => tx_id,
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

fn check_count(n: usize) -> Result<(), DecodeError> {
    if n > ITEMS_PER_MESSAGE_MAX {
        Err(DecodeError::TooLarge {
            what: "item count",
            len: n,
            max: ITEMS_PER_MESSAGE_MAX,
        })
    } else {
        Ok(())
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

fn read_items<'a>(r: &mut Reader<'a>) -> Result<ItemList<'a>, DecodeError> {
    let n = r.u16()? as usize;
    check_count(n)?;
    let start = r.position();
    let mut probe = r.clone();
    for _ in 0..n {
        read_item(&mut probe)?;
    }
    let len = probe.position() - start;
    Ok(ItemList {
        bytes: r.take(len)?,
        count: n,
    })
}
