//! The Dnl skeleton's requests at a server (Get, Lock, Replicate, Unlock,
//! Readable; `protocol/skeleton.rs`): not served yet. No coordinator sends
//! them, so one that arrives broke the protocol: it is refused with
//! [`ReplyStatus::Malformed`] in its own reply kind (never a silent drop,
//! never a panic) and counted in [`ServerStats::malformed`](super::ServerStats::malformed).

use super::Server;
use crate::protocol::Io;
use splitkv_layout::wire::{Body, MsgKind, NodeId, ReplyStatus};

impl Server {
    /// Refuses a Dnl request `body` from `src` with `Malformed` (counted);
    /// any other body is left alone. Returns whether it was a Dnl request.
    pub fn refuse_dnl(&mut self, io: &mut Io, src: NodeId, body: &Body<'_>) -> bool {
        let (tx_id, status) = (body.tx_id(), ReplyStatus::Malformed);
        match body {
            Body::Get { .. } => io.w.begin_get_resp(tx_id, status, 0),
            Body::Lock { .. } => io.w.ack(MsgKind::LockResp, tx_id, status),
            Body::Replicate { .. } => io.w.ack(MsgKind::ReplicateAck, tx_id, status),
            Body::Unlock { .. } => io.w.ack(MsgKind::UnlockAck, tx_id, status),
            Body::Readable { .. } => io.w.ack(MsgKind::ReadableAck, tx_id, status),
            _ => return false,
        }
        self.stats.malformed += 1;
        io.send(src);
        true
    }
}
