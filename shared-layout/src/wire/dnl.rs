//! Decoding of the Dnl kinds' bodies ([`MsgKind::Get`] …
//! [`MsgKind::ReadableAck`]; the table in the module docs of `wire`): the
//! key, item and version lists of the Xenic kinds, in new combinations.

use super::body::{Body, KeyList, ReplyStatus, VersionList};
use super::lists::{check_count, read_items, read_n_items};
use super::{MsgKind, NodeMask};
use crate::error::{DecodeError, Reader};
use crate::key::KEY_BYTES;
use crate::TxId;

/// Decodes the rest of a Dnl body of `kind` (its `tx_id` read) from `r`;
/// the caller checks that nothing is left.
///
/// # Errors
/// [`DecodeError`] for a short body, a count over
/// [`super::ITEMS_PER_MESSAGE_MAX`], an unknown status, a commit flag other
/// than 0 or 1, or a value over the limit; `BadTag` for a kind that is not
/// a Dnl kind.
pub(super) fn decode<'a>(
    kind: MsgKind,
    tx_id: TxId,
    r: &mut Reader<'a>,
) -> Result<Body<'a>, DecodeError> {
    let status =
        |r: &mut Reader<'a>| -> Result<ReplyStatus, DecodeError> { ReplyStatus::from_u8(r.u8()?) };
    Ok(match kind {
        MsgKind::Get => {
            let n = r.u16()? as usize;
            check_count(n)?;
            Body::Get {
                tx_id,
                keys: KeyList {
                    bytes: r.take(n * KEY_BYTES)?,
                },
            }
        }
        MsgKind::GetResp => {
            let status = status(r)?;
            let clean = r.u64()?;
            Body::GetResp {
                tx_id,
                status,
                clean,
                items: read_items(r)?,
            }
        }
        MsgKind::Lock => {
            let lock_shards = NodeMask(r.u16()?);
            let n_reads = r.u16()? as usize;
            let n_items = r.u16()? as usize;
            check_count(n_reads + n_items)?;
            let reads = VersionList {
                bytes: r.take(n_reads * (KEY_BYTES + 8))?,
            };
            Body::Lock {
                tx_id,
                lock_shards,
                reads,
                items: read_n_items(r, n_items)?,
            }
        }
        MsgKind::Replicate => Body::Replicate {
            tx_id,
            write_shards: NodeMask(r.u16()?),
            items: read_items(r)?,
        },
        MsgKind::Unlock => {
            let commit = match r.u8()? {
                0 => false,
                1 => true,
                tag => {
                    return Err(DecodeError::BadTag {
                        what: "Unlock commit flag",
                        tag: tag as u64,
                    })
                }
            };
            let n_keys = r.u16()? as usize;
            let n_items = r.u16()? as usize;
            check_count(n_keys + n_items)?;
            let keys = KeyList {
                bytes: r.take(n_keys * KEY_BYTES)?,
            };
            Body::Unlock {
                tx_id,
                commit,
                keys,
                items: read_n_items(r, n_items)?,
            }
        }
        MsgKind::Readable => Body::Readable {
            tx_id,
            items: read_items(r)?,
        },
        MsgKind::LockResp => Body::LockResp {
            tx_id,
            status: status(r)?,
        },
        MsgKind::ReplicateAck => Body::ReplicateAck {
            tx_id,
            status: status(r)?,
        },
        MsgKind::UnlockAck => Body::UnlockAck {
            tx_id,
            status: status(r)?,
        },
        MsgKind::ReadableAck => Body::ReadableAck {
            tx_id,
            status: status(r)?,
        },
        _ => {
            return Err(DecodeError::BadTag {
                what: "Dnl message kind",
                tag: kind as u64,
            })
        }
    })
}
