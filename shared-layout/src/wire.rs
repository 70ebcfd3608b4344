//! Wire messages between nodes and the packets that carry them (Dandelion §5.1:
//! many messages per packet).
//!
//! A packet is a [`PacketHeader`] followed by `count` messages. A message is a
//! [`MsgHeader`] (source node, epoch, flow, kind, body length) followed by its
//! body. Bodies are little-endian; item lists are validated once at decode time
//! and then iterated without further checks, borrowing from the packet bytes.
//!
//! | kind | flow | body |
//! |---|---|---|
//! | Execute | execution | tx_id, n_reads u16, n_locks u16, keys |
//! | ExecuteResp | execution | tx_id, status u8, n u16, items |
//! | Validate | commit | tx_id, n u16, (key, version u64)… |
//! | ValidateResp | commit | tx_id, status u8 |
//! | Log | commit | tx_id, n u16, items |
//! | LogAck | commit | tx_id, status u8 |
//! | Commit | commit | tx_id, n u16, items |
//! | CommitAck | commit | tx_id, status u8 |
//!
//! Every status byte is a [`ReplyStatus`]: `Ok` or the reason of a refusal.
//! | Abort | commit | tx_id, n u16, keys |
//!
//! An item is `key (12 B), meta u64, value_len u16, value`.

use crate::error::{DecodeError, Reader};
use crate::key::{Key, KEY_BYTES};
use crate::meta::ObjectMeta;
use crate::VALUE_BYTES_MAX;

/// Magic number opening every packet (`"SKV1"`).
pub const PACKET_MAGIC: u32 = u32::from_le_bytes(*b"SKV1");
/// Encoded size of a [`PacketHeader`].
pub const PACKET_HEADER_BYTES: usize = 16;
/// Encoded size of a [`MsgHeader`].
pub const MSG_HEADER_BYTES: usize = 12;
/// Largest packet any transport carries (bytes, headers included).
pub const PACKET_BYTES_MAX: usize = 9000;
/// Most messages in one packet (Dandelion §5.1 batches up to 100).
pub const MESSAGES_PER_PACKET_MAX: usize = 100;
/// Most keys or items in one message.
pub const ITEMS_PER_MESSAGE_MAX: usize = 64;
/// Encoded size of an item without its value bytes.
pub const ITEM_FIXED_BYTES: usize = KEY_BYTES + 8 + 2;

/// Node identifier (0-based index in the cluster, < 1024).
pub type NodeId = u16;

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
    /// If `packet` is shorter than [`PACKET_HEADER_BYTES`].
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

/// A server's answer to EXECUTE, VALIDATE, LOG or COMMIT: `Ok`, or why it
/// refused (issue 9 §4: never a silent drop, never a wrong reason). One byte on
/// the wire; a coordinator turns a refusal into the transaction's abort reason.
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
}

impl ReplyStatus {
    /// Every status, in wire-value order.
    pub const ALL: [ReplyStatus; 8] = [
        ReplyStatus::Ok,
        ReplyStatus::LockConflict,
        ReplyStatus::ValidationFailed,
        ReplyStatus::TableFull,
        ReplyStatus::TooLarge,
        ReplyStatus::HostFailure,
        ReplyStatus::Busy,
        ReplyStatus::Malformed,
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
        tx_id: u64,
        /// Keys to read without locking.
        reads: KeyList<'a>,
        /// Keys to lock and read.
        locks: KeyList<'a>,
    },
    /// See [`MsgKind::ExecuteResp`]. On `Ok`, items are the reads then the locks, in request order.
    ExecuteResp {
        /// Transaction id.
        tx_id: u64,
        /// Outcome.
        status: ReplyStatus,
        /// Values read.
        items: ItemList<'a>,
    },
    /// See [`MsgKind::Validate`].
    Validate {
        /// Transaction id.
        tx_id: u64,
        /// Keys with the versions the transaction read.
        items: VersionList<'a>,
    },
    /// See [`MsgKind::ValidateResp`].
    ValidateResp {
        /// Transaction id.
        tx_id: u64,
        /// `Ok` if every version was unchanged and unlocked; else why not.
        status: ReplyStatus,
    },
    /// See [`MsgKind::Log`].
    Log {
        /// Transaction id.
        tx_id: u64,
        /// New values with their new versions.
        items: ItemList<'a>,
    },
    /// See [`MsgKind::LogAck`].
    LogAck {
        /// Transaction id.
        tx_id: u64,
        /// `Ok` once the records are in the host log; else why they are not.
        status: ReplyStatus,
    },
    /// See [`MsgKind::Commit`].
    Commit {
        /// Transaction id.
        tx_id: u64,
        /// New values with their new versions.
        items: ItemList<'a>,
    },
    /// See [`MsgKind::CommitAck`].
    CommitAck {
        /// Transaction id.
        tx_id: u64,
        /// `Ok` once installed and in the host log; else why not.
        status: ReplyStatus,
    },
    /// See [`MsgKind::Abort`].
    Abort {
        /// Transaction id.
        tx_id: u64,
        /// Keys whose locks to release.
        keys: KeyList<'a>,
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
        }
    }

    /// The transaction the message belongs to.
    pub fn tx_id(&self) -> u64 {
        match *self {
            Body::Execute { tx_id, .. }
            | Body::ExecuteResp { tx_id, .. }
            | Body::Validate { tx_id, .. }
            | Body::ValidateResp { tx_id, .. }
            | Body::Log { tx_id, .. }
            | Body::LogAck { tx_id, .. }
            | Body::Commit { tx_id, .. }
            | Body::CommitAck { tx_id, .. }
            | Body::Abort { tx_id, .. } => tx_id,
        }
    }

    /// Decodes a body of `kind` that must span exactly `bytes`.
    pub fn decode(kind: MsgKind, bytes: &'a [u8]) -> Result<Body<'a>, DecodeError> {
        let mut r = Reader::new(bytes, "message body");
        let tx_id = r.u64()?;
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

/// Encodes message bodies into a reusable buffer. Each `begin_*` call clears the
/// buffer; item pushes append. Counts are patched as items are added.
///
/// Callers keep counts within [`ITEMS_PER_MESSAGE_MAX`] and values within
/// [`VALUE_BYTES_MAX`]; exceeding them is a caller bug and panics.
#[derive(Debug, Default, Clone)]
pub struct BodyWriter {
    buf: Vec<u8>,
    kind: Option<MsgKind>,
    count_at: usize,
    count: usize,
    second_count_at: usize,
    second_count: usize,
}

impl BodyWriter {
    /// An empty writer.
    pub fn new() -> BodyWriter {
        BodyWriter {
            buf: Vec::with_capacity(1024),
            ..Default::default()
        }
    }

    /// The kind of the body being written.
    ///
    /// # Panics
    /// If no `begin_*` was called.
    pub fn kind(&self) -> MsgKind {
        self.kind.expect("begin a body first")
    }

    /// The encoded body.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    fn begin(&mut self, kind: MsgKind, tx_id: u64) {
        self.buf.clear();
        self.kind = Some(kind);
        self.buf.extend_from_slice(&tx_id.to_le_bytes());
        self.count = 0;
        self.second_count = 0;
    }

    fn open_count(&mut self) {
        self.count_at = self.buf.len();
        self.buf.extend_from_slice(&0u16.to_le_bytes());
    }

    fn bump(&mut self, second: bool) {
        let (at, c) = if second {
            self.second_count += 1;
            (self.second_count_at, self.second_count)
        } else {
            self.count += 1;
            (self.count_at, self.count)
        };
        assert!(
            self.count + self.second_count <= ITEMS_PER_MESSAGE_MAX,
            "too many items"
        );
        self.buf[at..at + 2].copy_from_slice(&(c as u16).to_le_bytes());
    }

    /// Starts an EXECUTE body; then call [`BodyWriter::push_read`] for every read
    /// key and [`BodyWriter::push_lock`] for every lock key, reads first.
    pub fn begin_execute(&mut self, tx_id: u64) {
        self.begin(MsgKind::Execute, tx_id);
        self.open_count();
        self.second_count_at = self.buf.len();
        self.buf.extend_from_slice(&0u16.to_le_bytes());
    }

    /// Adds a read key to an EXECUTE body (before any lock key).
    pub fn push_read(&mut self, key: &Key) {
        debug_assert_eq!(self.kind, Some(MsgKind::Execute));
        assert_eq!(self.second_count, 0, "reads come before locks");
        self.push_key_raw(key);
        self.bump(false);
    }

    /// Adds a lock key to an EXECUTE body.
    pub fn push_lock(&mut self, key: &Key) {
        debug_assert_eq!(self.kind, Some(MsgKind::Execute));
        self.push_key_raw(key);
        self.bump(true);
    }

    fn push_key_raw(&mut self, key: &Key) {
        let at = self.buf.len();
        self.buf.resize(at + KEY_BYTES, 0);
        key.encode(&mut self.buf[at..]);
    }

    /// Starts an EXECUTE response; push items with [`BodyWriter::push_item`].
    pub fn begin_execute_resp(&mut self, tx_id: u64, status: ReplyStatus) {
        self.begin(MsgKind::ExecuteResp, tx_id);
        self.buf.push(status as u8);
        self.open_count();
    }

    /// Starts a VALIDATE body; push pairs with [`BodyWriter::push_version`].
    pub fn begin_validate(&mut self, tx_id: u64) {
        self.begin(MsgKind::Validate, tx_id);
        self.open_count();
    }

    /// Adds a `(key, version)` pair to a VALIDATE body.
    pub fn push_version(&mut self, key: &Key, version: u64) {
        debug_assert_eq!(self.kind, Some(MsgKind::Validate));
        self.push_key_raw(key);
        self.buf.extend_from_slice(&version.to_le_bytes());
        self.bump(false);
    }

    /// Starts a LOG (`kind = Log`) or COMMIT (`kind = Commit`) body.
    ///
    /// # Panics
    /// If `kind` is neither.
    pub fn begin_items(&mut self, kind: MsgKind, tx_id: u64) {
        assert!(
            matches!(kind, MsgKind::Log | MsgKind::Commit),
            "not an item message"
        );
        self.begin(kind, tx_id);
        self.open_count();
    }

    /// Adds an item to an EXECUTE response, LOG or COMMIT body.
    pub fn push_item(&mut self, key: &Key, meta: ObjectMeta, value: &[u8]) {
        assert!(
            value.len() <= VALUE_BYTES_MAX,
            "value too large for the wire"
        );
        self.push_key_raw(key);
        self.buf.extend_from_slice(&meta.0.to_le_bytes());
        self.buf
            .extend_from_slice(&(value.len() as u16).to_le_bytes());
        self.buf.extend_from_slice(value);
        self.bump(false);
    }

    /// Starts an ABORT body; push keys with [`BodyWriter::push_abort_key`].
    pub fn begin_abort(&mut self, tx_id: u64) {
        self.begin(MsgKind::Abort, tx_id);
        self.open_count();
    }

    /// Adds a key to an ABORT body.
    pub fn push_abort_key(&mut self, key: &Key) {
        debug_assert_eq!(self.kind, Some(MsgKind::Abort));
        self.push_key_raw(key);
        self.bump(false);
    }

    /// Writes a complete VALIDATE response.
    pub fn validate_resp(&mut self, tx_id: u64, status: ReplyStatus) {
        self.begin(MsgKind::ValidateResp, tx_id);
        self.buf.push(status as u8);
    }

    /// Writes a complete LOG or COMMIT acknowledgement (`kind` = LogAck or
    /// CommitAck); `status` is `Ok` or why the records were refused.
    ///
    /// # Panics
    /// If `kind` is neither.
    pub fn ack(&mut self, kind: MsgKind, tx_id: u64, status: ReplyStatus) {
        assert!(
            matches!(kind, MsgKind::LogAck | MsgKind::CommitAck),
            "not an ack"
        );
        self.begin(kind, tx_id);
        self.buf.push(status as u8);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn execute_round_trip() {
        let mut w = BodyWriter::new();
        w.begin_execute(77);
        w.push_read(&Key::new(0, 1));
        w.push_lock(&Key::new(1, 2));
        w.push_lock(&Key::new(1, 3));
        let b = Body::decode(MsgKind::Execute, w.bytes()).unwrap();
        match b {
            Body::Execute {
                tx_id,
                reads,
                locks,
            } => {
                assert_eq!(tx_id, 77);
                assert_eq!(reads.iter().collect::<Vec<_>>(), vec![Key::new(0, 1)]);
                assert_eq!(
                    locks.iter().collect::<Vec<_>>(),
                    vec![Key::new(1, 2), Key::new(1, 3)]
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn items_reject_oversized_value_length() {
        let mut w = BodyWriter::new();
        w.begin_items(MsgKind::Log, 1);
        w.push_item(&Key::new(0, 1), ObjectMeta(3), b"abc");
        let mut bytes = w.bytes().to_vec();
        let len_at = 8 + 2 + KEY_BYTES + 8;
        bytes[len_at..len_at + 2].copy_from_slice(&(VALUE_BYTES_MAX as u16 + 1).to_le_bytes());
        assert!(matches!(
            Body::decode(MsgKind::Log, &bytes),
            Err(DecodeError::TooLarge { .. })
        ));
    }
}
