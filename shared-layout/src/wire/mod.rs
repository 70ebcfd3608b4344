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

mod body;
mod packet;
#[cfg(test)]
mod tests;
mod writer;

pub use body::{Body, Item, ItemIter, ItemList, KeyList, ReplyStatus, VersionList};
pub use packet::{decode_packet, Flow, Messages, MsgHeader, MsgKind, PacketHeader};
pub use writer::BodyWriter;

use crate::key::KEY_BYTES;

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
