//! Packet and message headers (format v2), message kinds and flows, and
//! [`decode_packet`].
//!
//! The packet header carries what the session layer below the batching layer
//! needs (Dandelion §5.3; eRPC-style sessions): the cluster id, the sender's
//! id, incarnation and membership epoch, the receiver's incarnation as the
//! sender knows it, and a packet number with a cumulative acknowledgement.
//! Messages inherit the packet's source and epoch.

use super::{
    Body, NodeId, MESSAGES_PER_PACKET_MAX, MSG_HEADER_BYTES, PACKET_BYTES_MAX,
    PACKET_FORMAT_VERSION, PACKET_HEADER_BYTES, PACKET_MAGIC,
};
use crate::error::{DecodeError, Reader};

/// Packet flag: a standalone acknowledgement. It carries no messages
/// (`count == 0`, `len == 0`) and consumes no packet number (its `seq` is
/// ignored).
pub const PACKET_FLAG_ACK_ONLY: u8 = 1;
/// Every packet flag bit this format defines; any other bit is refused.
pub const PACKET_FLAGS_KNOWN: u8 = PACKET_FLAG_ACK_ONLY;
/// Message flag: the body continues in the next message from the same sender
/// (a fragment; the last fragment has the flag clear).
pub const MSG_FLAG_FRAG_MORE: u8 = 1;
/// Every message flag bit this format defines; any other bit is refused.
pub const MSG_FLAGS_KNOWN: u8 = MSG_FLAG_FRAG_MORE;

/// The cluster id a packet of cluster `cluster_id` carries in its
/// `generation`th life (a cluster's lives: `splitkv_host::membership_etcd`,
/// "Lifecycle"): `cluster_id` itself in the first generation (so a
/// static cluster's packets are unchanged), and for later ones
/// `cluster_id` XOR `(generation - 1)` times an odd constant — a bijection
/// of the generation, so two generations of one cluster never share an id
/// and a straggler of an earlier generation is dropped as another
/// cluster's.
pub const fn generation_cluster_id(cluster_id: u32, generation: u32) -> u32 {
    cluster_id ^ generation.wrapping_sub(1).wrapping_mul(0x9E37_79B1)
}

/// Header opening a packet: 40 bytes, little-endian, in this field order:
/// magic u32 ([`PACKET_MAGIC`]), format version u8
/// ([`PACKET_FORMAT_VERSION`]), flags u8, count u16, cluster_id u32, src u16,
/// dst u16, src_incarnation u32, dst_incarnation u32, epoch u32, seq u32,
/// ack u32, len u32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacketHeader {
    /// [`PACKET_FLAG_ACK_ONLY`] or 0.
    pub flags: u8,
    /// Number of messages that follow (1..=[`MESSAGES_PER_PACKET_MAX`]; 0 only
    /// with [`PACKET_FLAG_ACK_ONLY`]).
    pub count: u16,
    /// Cluster this packet belongs to; other clusters' packets are dropped.
    pub cluster_id: u32,
    /// Sending node.
    pub src: NodeId,
    /// Destination node.
    pub dst: NodeId,
    /// The sender's incarnation (grows each time the node restarts).
    pub src_incarnation: u32,
    /// The receiver's incarnation the packet is for (≥ 1 once the session
    /// numbers it; only that process takes it).
    pub dst_incarnation: u32,
    /// The sender's membership epoch; every message inside inherits it.
    pub epoch: u32,
    /// Packet number within the session (ignored on an ack-only packet).
    pub seq: u32,
    /// Cumulative acknowledgement: every packet number below it was received.
    pub ack: u32,
    /// Bytes of messages that follow the header.
    pub len: u32,
}

/// Byte offsets of the header fields.
const OFF_VERSION: usize = 4;
const OFF_FLAGS: usize = 5;
const OFF_COUNT: usize = 6;
const OFF_CLUSTER: usize = 8;
const OFF_SRC: usize = 12;
const OFF_DST: usize = 14;
const OFF_SRC_INCARNATION: usize = 16;
const OFF_DST_INCARNATION: usize = 20;
const OFF_EPOCH: usize = 24;
const OFF_SEQ: usize = 28;
const OFF_ACK: usize = 32;
const OFF_LEN: usize = 36;
const _: () = assert!(OFF_LEN + 4 == PACKET_HEADER_BYTES);

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

impl PacketHeader {
    /// Appends the 40-byte encoding.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.resize(start + PACKET_HEADER_BYTES, 0);
        self.write(&mut out[start..]);
    }

    /// Writes the 40-byte encoding over the start of `buf` (no allocation).
    ///
    /// # Panics
    /// If `buf` is shorter than [`PACKET_HEADER_BYTES`].
    pub fn write(&self, buf: &mut [u8]) {
        let b = &mut buf[..PACKET_HEADER_BYTES];
        put_u32(b, 0, PACKET_MAGIC);
        b[OFF_VERSION] = PACKET_FORMAT_VERSION;
        b[OFF_FLAGS] = self.flags;
        b[OFF_COUNT..OFF_COUNT + 2].copy_from_slice(&self.count.to_le_bytes());
        put_u32(b, OFF_CLUSTER, self.cluster_id);
        b[OFF_SRC..OFF_SRC + 2].copy_from_slice(&self.src.to_le_bytes());
        b[OFF_DST..OFF_DST + 2].copy_from_slice(&self.dst.to_le_bytes());
        put_u32(b, OFF_SRC_INCARNATION, self.src_incarnation);
        put_u32(b, OFF_DST_INCARNATION, self.dst_incarnation);
        put_u32(b, OFF_EPOCH, self.epoch);
        put_u32(b, OFF_SEQ, self.seq);
        put_u32(b, OFF_ACK, self.ack);
        put_u32(b, OFF_LEN, self.len);
    }

    /// Overwrites `count` and `len` of an encoded header at the start of
    /// `packet` (the batcher seals a packet this way).
    ///
    /// # Panics
    /// If `packet` is shorter than [`PACKET_HEADER_BYTES`].
    pub fn patch_count_len(packet: &mut [u8], count: u16, len: u32) {
        packet[OFF_COUNT..OFF_COUNT + 2].copy_from_slice(&count.to_le_bytes());
        put_u32(packet, OFF_LEN, len);
    }

    /// Overwrites the fields a session sets when it (re)transmits a packet:
    /// the receiver's incarnation, the epoch, the packet number and the
    /// cumulative acknowledgement.
    ///
    /// # Panics
    /// If `packet` is shorter than [`PACKET_HEADER_BYTES`].
    pub fn patch_session(packet: &mut [u8], dst_incarnation: u32, epoch: u32, seq: u32, ack: u32) {
        put_u32(packet, OFF_DST_INCARNATION, dst_incarnation);
        put_u32(packet, OFF_EPOCH, epoch);
        put_u32(packet, OFF_SEQ, seq);
        put_u32(packet, OFF_ACK, ack);
    }

    /// Reads the message count of an encoded header (0 if `packet` is too short).
    pub fn count_of(packet: &[u8]) -> u16 {
        match packet.get(OFF_COUNT..OFF_COUNT + 2) {
            Some(b) => u16::from_le_bytes([b[0], b[1]]),
            None => 0,
        }
    }

    /// Reads the packet number of an encoded header (0 if `packet` is too short).
    pub fn seq_of(packet: &[u8]) -> u32 {
        match packet.get(OFF_SEQ..OFF_SEQ + 4) {
            Some(b) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            None => 0,
        }
    }

    /// Whether this is a standalone acknowledgement.
    pub fn is_ack_only(&self) -> bool {
        self.flags & PACKET_FLAG_ACK_ONLY != 0
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

/// Message kinds of Xenic's OCC commit (Xenic §4.2 steps 1–7), of the
/// single-key calls, and of the Dandelion skeleton's steps (Dandelion §4.2;
/// `splitkv_nic::protocol::skeleton`, not yet sent by any node).
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
    /// A crash-recovery message: its body is a
    /// [`RecoveryMsg`](super::RecoveryMsg) encoding, decoded with
    /// `RecoveryMsg::decode`, not [`Body::decode`](super::Body::decode).
    Recovery = 10,
    /// A NIC-restart rebuild message: its body is a
    /// [`RebuildMsg`](super::RebuildMsg) encoding, decoded with
    /// `RebuildMsg::decode`, not [`Body::decode`](super::Body::decode).
    Rebuild = 11,
    /// A re-replication message: its body is a
    /// [`CopyMsg`](super::CopyMsg) encoding, decoded with `CopyMsg::decode`,
    /// not [`Body::decode`](super::Body::decode).
    Copy = 12,
    /// Round 1 of an abort after LOG (Xenic §4.2.1; `tla/XenicOCCMsgs.tla`
    /// `ABORTLOG`): record the transaction aborted at one replica of a
    /// written key (its pending LOG record is dropped, a later LOG refused);
    /// the locks stay until the plain [`MsgKind::Abort`] of round 2.
    AbortLog = 13,
    /// Reply to [`MsgKind::AbortLog`]: the abort is recorded there.
    AbortLogAck = 14,
    /// A single-key read at the key's primary (Dandelion §3 `GetOne`): no
    /// lock, no commit phase; refused when the key is locked.
    GetOne = 15,
    /// Reply to [`MsgKind::GetOne`]: the key's committed value and version,
    /// or why not.
    GetOneResp = 16,
    /// A single-key write shipped to the key's primary (Dandelion §3
    /// `PutOne`/`InsertOne`), which coordinates it as a transaction of its
    /// own.
    WriteOne = 17,
    /// Reply to [`MsgKind::WriteOne`]: the outcome of the primary's transaction.
    WriteOneResp = 18,
    /// Dnl execution: read keys at a replica, lock-free; values come back
    /// even when locked (Dandelion §4.2.1; TLA `Read`, `ReadLocal`).
    Get = 19,
    /// Reply to [`MsgKind::Get`]: the values read, and which were clean
    /// (unlocked and readable when read).
    GetResp = 20,
    /// Dnl Locking: lock keys no-wait, check the versions read, log the
    /// written values (TLA `Lock`).
    Lock = 21,
    /// Reply to [`MsgKind::Lock`].
    LockResp = 22,
    /// Dnl Replication: log the write set at a replica, after the decision
    /// (TLA `Replicate`).
    Replicate = 23,
    /// Reply to [`MsgKind::Replicate`].
    ReplicateAck = 24,
    /// Dnl Unlocking: install (commit) or drop (abort) and unlock (TLA
    /// `Unlock`).
    Unlock = 25,
    /// Reply to [`MsgKind::Unlock`].
    UnlockAck = 26,
    /// A reported commit's values become visible at a backup that holds
    /// them replicated, and READABLE is raised.
    Readable = 27,
    /// Reply to [`MsgKind::Readable`].
    ReadableAck = 28,
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
            10 => MsgKind::Recovery,
            11 => MsgKind::Rebuild,
            12 => MsgKind::Copy,
            13 => MsgKind::AbortLog,
            14 => MsgKind::AbortLogAck,
            15 => MsgKind::GetOne,
            16 => MsgKind::GetOneResp,
            17 => MsgKind::WriteOne,
            18 => MsgKind::WriteOneResp,
            19 => MsgKind::Get,
            20 => MsgKind::GetResp,
            21 => MsgKind::Lock,
            22 => MsgKind::LockResp,
            23 => MsgKind::Replicate,
            24 => MsgKind::ReplicateAck,
            25 => MsgKind::Unlock,
            26 => MsgKind::UnlockAck,
            27 => MsgKind::Readable,
            28 => MsgKind::ReadableAck,
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
            MsgKind::Execute
            | MsgKind::ExecuteResp
            | MsgKind::GetOne
            | MsgKind::GetOneResp
            | MsgKind::WriteOne
            | MsgKind::WriteOneResp
            | MsgKind::Get
            | MsgKind::GetResp => Flow::Execution,
            MsgKind::Recovery | MsgKind::Rebuild | MsgKind::Copy => Flow::Recovery,
            _ => Flow::Commit,
        }
    }
}

/// Header of one message inside a packet: 8 bytes, little-endian: flow u8,
/// kind u8, flags u8, a reserved byte that must be 0, len u32. The source
/// node and the epoch are the packet's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsgHeader {
    /// Flow the message belongs to.
    pub flow: Flow,
    /// What the body is.
    pub kind: MsgKind,
    /// [`MSG_FLAG_FRAG_MORE`] or 0.
    pub flags: u8,
    /// Body bytes that follow (of this fragment, for a fragment).
    pub len: u32,
}

impl MsgHeader {
    /// A whole (unfragmented) message of `kind` with a body of `len` bytes,
    /// on the kind's flow.
    pub fn whole(kind: MsgKind, len: u32) -> MsgHeader {
        MsgHeader {
            flow: kind.flow(),
            kind,
            flags: 0,
            len,
        }
    }

    /// Appends the 8-byte encoding.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_bytes());
    }

    /// The 8-byte encoding (for writers that append to memory other than a
    /// `Vec`, such as a transport's packet buffer).
    pub fn to_bytes(&self) -> [u8; MSG_HEADER_BYTES] {
        let l = self.len.to_le_bytes();
        [
            self.flow as u8,
            self.kind as u8,
            self.flags,
            0,
            l[0],
            l[1],
            l[2],
            l[3],
        ]
    }

    /// Whether the body continues in the sender's next message.
    pub fn frag_more(&self) -> bool {
        self.flags & MSG_FLAG_FRAG_MORE != 0
    }

    fn decode(r: &mut Reader<'_>) -> Result<MsgHeader, DecodeError> {
        let flow = Flow::from_u8(r.u8()?)?;
        let kind = MsgKind::from_u8(r.u8()?)?;
        let flags = r.u8()?;
        let reserved = r.u8()?;
        let len = r.u32()?;
        if flags & !MSG_FLAGS_KNOWN != 0 {
            return Err(DecodeError::BadTag {
                what: "message flags",
                tag: flags as u64,
            });
        }
        if reserved != 0 {
            return Err(DecodeError::Inconsistent {
                what: "message header",
                detail: "reserved byte is not 0",
            });
        }
        if kind.flow() != flow {
            return Err(DecodeError::Inconsistent {
                what: "message header",
                detail: "kind on wrong flow",
            });
        }
        Ok(MsgHeader {
            flow,
            kind,
            flags,
            len,
        })
    }
}

const _: () = assert!(MSG_HEADER_BYTES == 8);

/// Iterator over the messages of one packet; see [`decode_packet`]. The
/// iterator decodes each body; [`Messages::next_raw`] yields the body bytes
/// instead (what a receiver reassembling fragments needs).
#[derive(Debug, Clone)]
pub struct Messages<'a> {
    r: Reader<'a>,
    left: usize,
    failed: bool,
}

impl<'a> Messages<'a> {
    /// The next message's header and its body bytes, undecoded (zero copy).
    /// Iteration stops after `count` messages or the first error.
    pub fn next_raw(&mut self) -> Option<Result<(MsgHeader, &'a [u8]), DecodeError>> {
        if self.left == 0 || self.failed {
            return None;
        }
        self.left -= 1;
        let res = MsgHeader::decode(&mut self.r)
            .and_then(|h| self.r.take(h.len as usize).map(|body| (h, body)));
        if res.is_err() {
            self.failed = true;
        }
        Some(res)
    }
}

impl<'a> Iterator for Messages<'a> {
    type Item = Result<(MsgHeader, Body<'a>), DecodeError>;
    fn next(&mut self) -> Option<Self::Item> {
        let res = self
            .next_raw()?
            .and_then(|(h, body)| Ok((h, Body::decode(h.kind, body)?)));
        if res.is_err() {
            self.failed = true;
        }
        Some(res)
    }
}

/// Decodes a packet header and returns it with an iterator over its messages.
///
/// The header is fully checked here: size at most [`PACKET_BYTES_MAX`], the
/// magic, the format version, no unknown flag bits, a count of at most
/// [`MESSAGES_PER_PACKET_MAX`] (at least 1, or exactly 0 with no bytes for an
/// ack-only packet) and a length field equal to the bytes that follow. Each
/// message is checked as it is iterated, and iteration stops after the first
/// error.
///
/// # Errors
/// [`DecodeError::TooLarge`] (packet size, count), [`DecodeError::BadMagic`],
/// [`DecodeError::BadTag`] with `what == "packet format version"` or
/// `"packet flags"`, [`DecodeError::Truncated`], [`DecodeError::Inconsistent`].
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
    let version = r.u8()?;
    if version != PACKET_FORMAT_VERSION {
        return Err(DecodeError::BadTag {
            what: "packet format version",
            tag: version as u64,
        });
    }
    let flags = r.u8()?;
    let h = PacketHeader {
        flags,
        count: r.u16()?,
        cluster_id: r.u32()?,
        src: r.u16()?,
        dst: r.u16()?,
        src_incarnation: r.u32()?,
        dst_incarnation: r.u32()?,
        epoch: r.u32()?,
        seq: r.u32()?,
        ack: r.u32()?,
        len: r.u32()?,
    };
    check_header(&h, r.remaining())?;
    let rest = r.take(h.len as usize)?;
    Ok((
        h,
        Messages {
            r: Reader::new(rest, "message"),
            left: h.count as usize,
            failed: false,
        },
    ))
}

fn check_header(h: &PacketHeader, remaining: usize) -> Result<(), DecodeError> {
    if h.flags & !PACKET_FLAGS_KNOWN != 0 {
        return Err(DecodeError::BadTag {
            what: "packet flags",
            tag: h.flags as u64,
        });
    }
    if h.count as usize > MESSAGES_PER_PACKET_MAX {
        return Err(DecodeError::TooLarge {
            what: "message count",
            len: h.count as usize,
            max: MESSAGES_PER_PACKET_MAX,
        });
    }
    if h.len as usize != remaining {
        return Err(DecodeError::Inconsistent {
            what: "packet",
            detail: "length field does not match",
        });
    }
    let well_formed = if h.is_ack_only() {
        h.count == 0 && h.len == 0
    } else {
        h.count >= 1
    };
    if !well_formed {
        return Err(DecodeError::Inconsistent {
            what: "packet",
            detail: "an ack-only packet carries no messages, any other at least one",
        });
    }
    Ok(())
}
