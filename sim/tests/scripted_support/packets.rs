//! The protocol messages of a held packet, as a script matches them.

use splitkv_layout::wire::{decode_packet, Body, MsgKind};
use splitkv_layout::{Key, TxId};

/// One protocol message: kind, transaction id, and the keys of its items
/// (an EXECUTE's locks, a LOG's or COMMIT's writes, the keys a Dnl Get,
/// Validate, Lock, Replicate, Unlock or Readable carries; none for
/// replies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Msg {
    /// Message kind.
    pub kind: MsgKind,
    /// Transaction id (coordinator in the top 16 bits).
    pub tx_id: TxId,
    /// Keys of its items.
    pub keys: Vec<Key>,
}

/// The messages of packet `bytes` (none for an ack-only packet).
///
/// # Panics
/// If the packet or a message does not decode: the cluster under test wrote
/// it, so that is a failure of the test.
pub fn decode_msgs(bytes: &[u8]) -> Vec<Msg> {
    let (_, msgs) = decode_packet(bytes).expect("a held packet decodes");
    msgs.map(|m| {
        let body = m.expect("a held message decodes").1;
        let keys = match &body {
            Body::Execute { locks, .. } => locks.iter().collect(),
            Body::Get { keys, .. } => keys.iter().collect(),
            Body::Validate { items, .. } | Body::Lock { reads: items, .. } => {
                items.iter().map(|(k, _)| k).collect()
            }
            Body::Unlock { keys, items, .. } => {
                keys.iter().chain(items.iter().map(|i| i.key)).collect()
            }
            Body::Log { items, .. }
            | Body::Commit { items, .. }
            | Body::Replicate { items, .. }
            | Body::Readable { items, .. } => items.iter().map(|i| i.key).collect(),
            _ => Vec::new(),
        };
        Msg {
            kind: body.kind(),
            tx_id: body.tx_id(),
            keys,
        }
    })
    .collect()
}

/// Whether `m` is a message of `kind` for a transaction coordinated by
/// `coordinator`.
pub fn is(m: &Msg, kind: MsgKind, coordinator: u16) -> bool {
    m.kind == kind && m.tx_id.coordinator() == coordinator
}
