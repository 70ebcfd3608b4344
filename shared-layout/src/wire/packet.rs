//! Packet and message headers, message kinds and flows, and [`decode_packet`].

use super::{Body, NodeId, MESSAGES_PER_PACKET_MAX, PACKET_BYTES_MAX, PACKET_MAGIC};
use crate::error::{DecodeError, Reader};

/// Header opening a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct PacketHeader {
    /// Sending node.
    pub src: NodeId,
    /// Destination node.
    pub dst: NodeId,
    /// Number of messages that follow (1..=[`MESSAGES_PER_PACKET_MAX`]).
    pub count: u16,
    /// Bytes of messages that follow the header.
    pub len: u32,
}

impl PacketHeader {
    /// Appends the 16-byte encoding.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&PACKET_MAGIC.to_le_bytes());
        out.extend_from_slice(&self.src.to_le_bytes());
        out.extend_from_slice(&self.dst.to_le_bytes());
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
    }

    /// Overwrites `count` and `len` of an encoded header at the start of `packet`.
    ///
    /// # Panics
    /// If `packet` is shorter than [`PACKET_HEADER_BYTES`](super::PACKET_HEADER_BYTES).
    pub fn patch(packet: &mut [u8], count: u16, len: u32) {
        packet[8..10].copy_from_slice(&count.to_le_bytes());
        packet[12..16].copy_from_slice(&len.to_le_bytes());
    }
}

/// Message flows (Dandelion §5.1): each has its own handlers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Flow {
    /// Execution-phase reads and locks.
    Execution = 0,
    /// Commit phase: validation, replication, commit, abort.
    Commit = 1,
    /// Recovery after a membership change.
    Recovery = 2,
}

impl Flow {
    fn from_u8(v: u8) -> Result<Flow, DecodeError> {
        Ok(match v {
            0 => Flow::Execution,
            1 => Flow::Commit,
            2 => Flow::Recovery,
            _ => {
                return Err(DecodeError::BadTag {
                    what: "flow",
                    tag: v as u64,
                })
            }
        })
    }
}

/// Message kinds of Xenic's OCC commit (Xenic §4.2 steps 1–7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MsgKind {
    /// Read the read set and lock the write set at one primary.
    Execute = 1,
    /// Reply to [`MsgKind::Execute`].
    ExecuteResp = 2,
    /// Re-check read versions at one primary.
    Validate = 3,
    /// Reply to [`MsgKind::Validate`].
    ValidateResp = 4,
    /// Replicate the write set to one backup.
    Log = 5,
    /// Reply to [`MsgKind::Log`].
    LogAck = 6,
    /// Install the write set at one primary and unlock.
    Commit = 7,
    /// Reply to [`MsgKind::Commit`].
    CommitAck = 8,
    /// Release the locks a transaction took at one primary.
    Abort = 9,
}

impl MsgKind {
    fn from_u8(v: u8) -> Result<MsgKind, DecodeError> {
        Ok(match v {
            1 => MsgKind::Execute,
            2 => MsgKind::ExecuteResp,
            3 => MsgKind::Validate,
            4 => MsgKind::ValidateResp,
            5 => MsgKind::Log,
            6 => MsgKind::LogAck,
            7 => MsgKind::Commit,
            8 => MsgKind::CommitAck,
            9 => MsgKind::Abort,
            _ => {
                return Err(DecodeError::BadTag {
                    what: "message kind",
                    tag: v as u64,
                })
            }
        })
    }

    /// The flow a kind travels on.
    pub fn flow(self) -> Flow {
        match self {
            MsgKind::Execute | MsgKind::ExecuteResp => Flow::Execution,
            _ => Flow::Commit,
        }
    }
}

/// Header of one message inside a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct MsgHeader {
    /// Sending node.
    pub src: NodeId,
    /// Flow the message belongs to.
    pub flow: Flow,
    /// What the body is.
    pub kind: MsgKind,
    /// Membership epoch the sender was in.
    pub epoch: u32,
    /// Body bytes that follow.
    pub len: u32,
}

impl MsgHeader {
    /// Appends the 12-byte encoding.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.src.to_le_bytes());
        out.push(self.flow as u8);
        out.push(self.kind as u8);
        out.extend_from_slice(&self.epoch.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
    }

    fn decode(r: &mut Reader<'_>) -> Result<MsgHeader, DecodeError> {
        let src = r.u16()?;
        let flow = Flow::from_u8(r.u8()?)?;
        let kind = MsgKind::from_u8(r.u8()?)?;
        let epoch = r.u32()?;
        let len = r.u32()?;
        if kind.flow() != flow {
            return Err(DecodeError::Inconsistent {
                what: "message header",
                detail: "kind on wrong flow",
            });
        }
        Ok(MsgHeader {
            src,
            flow,
            kind,
            epoch,
            len,
        })
    }
}

/// Iterator over the messages of one packet; see [`decode_packet`].
#[derive(Debug, Clone)]
pub struct Messages<'a> {
    r: Reader<'a>,
    left: usize,
    failed: bool,
}

impl<'a> Iterator for Messages<'a> {
    type Item = Result<(MsgHeader, Body<'a>), DecodeError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 || self.failed {
            return None;
        }
        self.left -= 1;
        let res = (|| {
            let h = MsgHeader::decode(&mut self.r)?;
            let body = self.r.take(h.len as usize)?;
            Ok((h, Body::decode(h.kind, body)?))
        })();
        if res.is_err() {
            self.failed = true;
        }
        Some(res)
    }
}

/// Decodes a packet header and returns it with an iterator over its messages.
/// The header is fully checked here (magic, count bound, length matches); each
/// message is checked as it is iterated, and iteration stops after the first error.
pub fn decode_packet(bytes: &[u8]) -> Result<(PacketHeader, Messages<'_>), DecodeError> {
    if bytes.len() > PACKET_BYTES_MAX {
        return Err(DecodeError::TooLarge {
            what: "packet",
            len: bytes.len(),
            max: PACKET_BYTES_MAX,
        });
    }
    let mut r = Reader::new(bytes, "packet header");
    let magic = r.u32()?;
    if magic != PACKET_MAGIC {
        return Err(DecodeError::BadMagic {
            what: "packet",
            found: magic as u64,
        });
    }
    let src = r.u16()?;
    let dst = r.u16()?;
    let count = r.u16()?;
    let _reserved = r.u16()?;
    let len = r.u32()?;
    if count as usize > MESSAGES_PER_PACKET_MAX {
        return Err(DecodeError::TooLarge {
            what: "message count",
            len: count as usize,
            max: MESSAGES_PER_PACKET_MAX,
        });
    }
    if len as usize != r.remaining() {
        return Err(DecodeError::Inconsistent {
            what: "packet",
            detail: "length field does not match",
        });
    }
    let rest = r.take(len as usize)?;
    Ok((
        PacketHeader {
            src,
            dst,
            count,
            len,
        },
        Messages {
            r: Reader::new(rest, "message"),
            left: count as usize,
            failed: false,
        },
    ))
}
