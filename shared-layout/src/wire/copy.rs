//! Re-replication messages: what a shard's primary tells a node
//! being copied about the snapshot stream. The snapshot's objects
//! themselves travel as ordinary LOG and COMMIT messages (their records are
//! appended to the new backup's host log and applied newest-version-wins,
//! so a snapshot object never overwrites a newer forwarded write); this
//! message closes the stream.
//!
//! These travel on [`super::Flow::Recovery`] as [`super::MsgKind::Copy`].
//! A message is self-describing (its first byte is a tag).
//!
//! Encoding (little-endian):
//!
//! | message | bytes |
//! |---|---|
//! | Done | tag u8 = 1, epoch u32, shard u16, objects u32 |

use crate::error::{DecodeError, Reader};

/// Encoded size of every [`CopyMsg`] (bytes).
pub const COPY_MESSAGE_BYTES: usize = 1 + 4 + 2 + 4;

/// One re-replication message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyMsg {
    /// Every object of `shard`'s snapshot for the copy begun in `epoch` was
    /// sent and acknowledged (appended to the receiver's host log):
    /// `objects` of them.
    Done {
        /// The epoch (configuration) the copy belongs to; a copy of an
        /// earlier epoch was abandoned and does not count.
        epoch: u32,
        /// The shard copied.
        shard: u16,
        /// Objects sent.
        objects: u32,
    },
}

impl CopyMsg {
    /// The epoch the message belongs to.
    pub fn epoch(&self) -> u32 {
        match self {
            CopyMsg::Done { epoch, .. } => *epoch,
        }
    }

    /// Appends the encoding ([`COPY_MESSAGE_BYTES`] bytes) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            CopyMsg::Done {
                epoch,
                shard,
                objects,
            } => {
                out.push(1);
                out.extend_from_slice(&epoch.to_le_bytes());
                out.extend_from_slice(&shard.to_le_bytes());
                out.extend_from_slice(&objects.to_le_bytes());
            }
        }
    }

    /// Decodes a message that spans exactly `bytes`.
    ///
    /// # Errors
    /// [`DecodeError`] for truncated input, an unknown tag, or trailing bytes.
    pub fn decode(bytes: &[u8]) -> Result<CopyMsg, DecodeError> {
        let mut r = Reader::new(bytes, "copy message");
        let msg = match r.u8()? {
            1 => CopyMsg::Done {
                epoch: r.u32()?,
                shard: r.u16()?,
                objects: r.u32()?,
            },
            tag => {
                return Err(DecodeError::BadTag {
                    what: "copy message",
                    tag: tag as u64,
                })
            }
        };
        r.finish()?;
        Ok(msg)
    }
}
