//! Wire messages between nodes and the packets that carry them (Dandelion §5.1:
//! many messages per packet), packet format v2.
//!
//! A packet is a [`PacketHeader`] (40 bytes) followed by `count` messages. A
//! message is a [`MsgHeader`] (8 bytes) followed by its body. Everything is
//! little-endian; item lists are validated once at decode time and then
//! iterated without further checks, borrowing from the packet bytes.
//!
//! Packet header (the session layer's fields: Dandelion §5.3, eRPC sessions):
//!
//! | bytes | field | meaning |
//! |---|---|---|
//! | 0..4 | magic u32 | [`PACKET_MAGIC`] (`"SKV2"`) |
//! | 4 | version u8 | [`PACKET_FORMAT_VERSION`] |
//! | 5 | flags u8 | [`PACKET_FLAG_ACK_ONLY`]: no messages, no packet number consumed |
//! | 6..8 | count u16 | messages that follow (≤ [`MESSAGES_PER_PACKET_MAX`]) |
//! | 8..12 | cluster_id u32 | packets of other clusters are dropped |
//! | 12..14 | src u16 | sending node (every message's source) |
//! | 14..16 | dst u16 | receiving node |
//! | 16..20 | src_incarnation u32 | the sender's incarnation |
//! | 20..24 | dst_incarnation u32 | the receiver's incarnation the packet is for (only that process takes it) |
//! | 24..28 | epoch u32 | the sender's membership epoch (every message's epoch) |
//! | 28..32 | seq u32 | packet number within the session |
//! | 32..36 | ack u32 | cumulative: every packet number below it was received |
//! | 36..40 | len u32 | bytes of messages that follow |
//!
//! Message header: flow u8, kind u8, flags u8 ([`MSG_FLAG_FRAG_MORE`]: the body
//! continues in the sender's next message), reserved u8 (0), len u32.
//!
//! | kind | flow | body |
//! |---|---|---|
//! | Execute | execution | tx_id, n_reads u16, n_locks u16, keys |
//! | ExecuteResp | execution | tx_id, status u8, n u16, items |
//! | Validate | commit | tx_id, n u16, (key, version u64)… |
//! | ValidateResp | commit | tx_id, status u8 |
//! | Log | commit | tx_id, write_shards u16 ([`NodeMask`]), n u16, items |
//! | LogAck | commit | tx_id, status u8 |
//! | Commit | commit | tx_id, n u16, items |
//! | CommitAck | commit | tx_id, status u8 |
//! | Abort | commit | tx_id, n u16, keys |
//! | AbortLog | commit | tx_id |
//! | AbortLogAck | commit | tx_id, status u8 |
//! | GetOne | execution | tx_id, key |
//! | GetOneResp | execution | tx_id, status u8, n u16 (0 or 1), items |
//! | WriteOne | execution | tx_id, args_len u32, args (≤ [`ONE_WRITE_ARGS_BYTES_MAX`]) |
//! | WriteOneResp | execution | tx_id, status u8 ([`TxStatus`](crate::host_nic::TxStatus)), result_len u32, result (≤ [`ONE_WRITE_RESULT_BYTES_MAX`]) |
//! | Get | execution | tx_id, n u16, keys |
//! | GetResp | execution | tx_id, status u8, clean u64 (bit i: item i unlocked and readable), n u16, items |
//! | Lock | commit | tx_id, lock_shards u16 ([`NodeMask`]), n_reads u16, n_items u16, (key, version u64)…, items |
//! | LockResp | commit | tx_id, status u8 |
//! | Replicate | commit | tx_id, write_shards u16 ([`NodeMask`]), n u16, items |
//! | ReplicateAck | commit | tx_id, status u8 |
//! | Unlock | commit | tx_id, commit u8 (0 abort, 1 commit), n_keys u16, n_items u16, keys, items |
//! | UnlockAck | commit | tx_id, status u8 |
//! | Readable | commit | tx_id, n u16, items |
//! | ReadableAck | commit | tx_id, status u8 |
//!
//! The Dnl kinds (Get … ReadableAck) are the steps of the Dandelion
//! skeleton (`splitkv_nic::protocol::skeleton`), served by
//! `splitkv_nic::protocol::server` (`server/dnl.rs`). A Lock's `items` are
//! written keys that its `(key, version)` list names too (every key it
//! locks has its version checked).
//!
//! The single-key kinds' `tx_id` is the *caller's* request id (its node,
//! a slot of its single-key table, a generation), not a transaction of the
//! commit protocol: the primary echoes it and keeps no per-id state
//! (`splitkv_nic::protocol::single_key`).
//!
//! Recovery messages (evidence and decisions, kind `Recovery` on the
//! recovery flow) have a self-describing encoding of their own: see
//! [`RecoveryMsg`].
//!
//! Every body starts with its transaction's `tx_id`, a [`crate::TxId`] in
//! [`crate::TX_ID_BYTES`] (8) bytes.
//! Every status byte is a [`ReplyStatus`]: `Ok` or the reason of a refusal.
//! An item is `key (12 B), meta u64, value_len u16, value`. A body longer
//! than one packet carries travels as fragments (at most
//! [`MESSAGE_BYTES_MAX`] bytes in all, reassembled by the receiver's
//! session layer).

mod body;
mod copy;
mod dnl;
mod lists;
mod packet;
mod rebuild;
mod recovery;
#[cfg(test)]
mod tests;
mod writer;

pub use body::{Body, Item, ItemIter, ItemList, KeyList, ReplyStatus, VersionList};
pub use copy::{CopyMsg, COPY_MESSAGE_BYTES};
pub use packet::{
    decode_packet, generation_cluster_id, Flow, Messages, MsgHeader, MsgKind, PacketHeader,
    MSG_FLAGS_KNOWN, MSG_FLAG_FRAG_MORE, PACKET_FLAGS_KNOWN, PACKET_FLAG_ACK_ONLY,
};
pub use rebuild::{
    LockEntry, PeerTx, RebuildEncodeError, RebuildMsg, LOCK_ENTRY_BYTES, PEER_TX_BYTES,
    REBUILD_DECISIONS_PER_MESSAGE_MAX, REBUILD_ENTRIES_PER_MESSAGE_MAX, REBUILD_MESSAGE_BYTES_MAX,
};
pub use recovery::{
    CoordEvidence, CoordOutcome, CoordPhase, Decision, NodeMask, RecordEvidence, RecordKind,
    RecoveryEncodeError, RecoveryMsg, RecoveryTag, COORD_EVIDENCE_BYTES, DECISIONS_PER_MESSAGE_MAX,
    DECISION_BYTES, EVIDENCE_ENTRIES_PER_MESSAGE_MAX, MASK_NODES_MAX, RECORD_EVIDENCE_BYTES,
    RECOVERY_MESSAGE_BYTES_MAX, RECOVERY_PARTS_MAX,
};
pub use writer::BodyWriter;

use crate::key::KEY_BYTES;

/// Magic number opening every packet (`"SKV2"`).
pub const PACKET_MAGIC: u32 = u32::from_le_bytes(*b"SKV2");
/// Packet format version; a packet of another version is dropped. Raised
/// with every change to the layout of the packet header or of any message
/// body, so processes of two builds that cannot read each other drop each
/// other's packets (counted) instead of misreading them:
/// 1. the first header;
/// 2. the 40-byte header (incarnations, epoch, cumulative ack);
/// 3. [`RebuildMsg::Report`] carries the newest generation of the
///    restarted node's transaction ids the peer's per-slot fence saw, and
///    [`RecoveryMsg`]'s Evidence and Decisions carry generations too;
/// 4. the single-key kinds ([`MsgKind::GetOne`], [`MsgKind::GetOneResp`],
///    [`MsgKind::WriteOne`], [`MsgKind::WriteOneResp`]): a build without
///    them would refuse their messages one by one, so both drop each
///    other's packets whole instead;
/// 5. the Dnl kinds ([`MsgKind::Get`] … [`MsgKind::ReadableAck`]), and
///    [`RecordKind`]'s `Lock` and `Repl` and [`CoordPhase`]'s `Get`,
///    `Lock`, `Replicate` and `Unlock` in recovery and rebuild messages;
/// 6. LOG and COMMIT items may carry a delete's tombstone (DELETED, the
///    next version, no value), which a build of format 5 refuses as
///    malformed: its transactions would abort one by one, so both drop
///    each other's packets whole instead.
pub const PACKET_FORMAT_VERSION: u8 = 6;
/// Encoded size of a [`PacketHeader`].
pub const PACKET_HEADER_BYTES: usize = 40;
/// Encoded size of a [`MsgHeader`].
pub const MSG_HEADER_BYTES: usize = 8;
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

/// Item count a message is sized for in [`MESSAGE_BYTES_MAX`]: a transaction
/// writing this many keys fits one Commit or Log message.
pub const MESSAGE_SIZING_ITEMS: usize = 16;
/// Value size a message is sized for in [`MESSAGE_BYTES_MAX`] (4 KiB).
pub const MESSAGE_SIZING_VALUE_BYTES: usize = 4096;
/// Largest fixed part of any body (tx_id u64, status u8, GetResp's clean
/// bits u64, counts u16 × 2).
pub const BODY_FIXED_BYTES_MAX: usize = 8 + 1 + 8 + 2 + 2;
/// Largest message body, in bytes, after reassembly: 66 KiB, room for
/// [`MESSAGE_SIZING_ITEMS`] items of [`MESSAGE_SIZING_VALUE_BYTES`] plus the
/// body's fixed part (16 × (22 + 4096) + 21 = 65 909 B). A body longer than
/// one packet carries travels as [`MSG_FLAG_FRAG_MORE`] fragments in
/// consecutive packets to its destination; the receiver refuses a
/// reassembly that would pass this bound.
pub const MESSAGE_BYTES_MAX: usize = 66 * 1024;
const _: () = assert!(
    MESSAGE_BYTES_MAX
        >= MESSAGE_SIZING_ITEMS * (ITEM_FIXED_BYTES + MESSAGE_SIZING_VALUE_BYTES)
            + BODY_FIXED_BYTES_MAX
);
const _: () = assert!(MESSAGE_BYTES_MAX <= u32::MAX as usize);

/// Largest `args` of a [`MsgKind::WriteOne`]: a shipped request's arguments
/// ([`ARGS_BYTES_MAX`](crate::host_nic::ARGS_BYTES_MAX)).
pub const ONE_WRITE_ARGS_BYTES_MAX: usize = crate::host_nic::ARGS_BYTES_MAX;
/// Largest `result` of a [`MsgKind::WriteOneResp`]: a transaction's result
/// ([`RESULT_BYTES_MAX`](crate::host_nic::RESULT_BYTES_MAX)).
pub const ONE_WRITE_RESULT_BYTES_MAX: usize = crate::host_nic::RESULT_BYTES_MAX;
/// Bytes of a WriteOne or WriteOneResp body besides its args or result:
/// tx_id (8), status (1), length (4).
pub const ONE_WRITE_FIXED_BYTES: usize = 8 + 1 + 4;
const _: () = assert!(ONE_WRITE_FIXED_BYTES + ONE_WRITE_ARGS_BYTES_MAX <= MESSAGE_BYTES_MAX);
const _: () = assert!(ONE_WRITE_FIXED_BYTES + ONE_WRITE_RESULT_BYTES_MAX <= MESSAGE_BYTES_MAX);
