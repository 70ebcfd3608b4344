//! Step 1 of [`NicRuntime::run_iteration`]: packets from the transport
//! and the loopback, each checked by its session and its messages
//! dispatched in place (zero copy; fragments reassembled) to the role that
//! takes them — recovery, re-replication's copies, a NIC restart's rebuild,
//! the server or the coordinator.

use super::{NicRuntime, RecoveryRuntime, RestartState, RX_BURST_MAX};
use crate::index::NicIndex;
use crate::net::fragment::Reassembly;
use crate::procedure::ProcedureRegistry;
use crate::protocol::coordinator::Coordinator;
use crate::protocol::server::{refuse_get_one, Server};
use crate::protocol::single_key::SingleKey;
use crate::protocol::Io;
use crate::recovery::restart;
use crate::recovery::wiring::admission;
use crate::Nanos;
use splitkv_layout::wire::{
    decode_packet, Body, Messages, MsgKind, NodeId, PacketHeader, ReplyStatus,
};

impl NicRuntime {
    /// Step 1: network packets, each lent by the transport and dispatched in
    /// place, then loopback packets.
    pub(super) fn poll_network(&mut self, now: Nanos) -> bool {
        let mut d = Dispatch {
            to: Handlers {
                io: &mut self.io,
                index: &mut self.index,
                server: &mut self.server,
                coordinator: &mut self.coordinator,
                single: &mut self.single,
                procedures: &self.procedures,
                bad: &mut self.bad_packets,
                recovery: &mut self.recovery,
                copies: &mut self.copies,
                restart: &mut self.restart,
                admission: &mut self.admission,
            },
            reassembly: &mut self.reassembly,
        };
        let mut work = self.transport.rx_burst(now, RX_BURST_MAX, &mut |p| {
            if let Some((h, msgs)) = d.to.io.net.receive(now, p) {
                d.messages(&h, msgs);
            }
        }) > 0;
        while let Some(pkt) = d.to.io.net.pop_loopback() {
            work = true;
            match decode_packet(&pkt) {
                Ok((h, msgs)) => d.messages(&h, msgs),
                Err(_) => *d.to.bad += 1,
            }
            d.to.io.net.recycle(pkt);
        }
        work
    }
}

/// The parts of a runtime that received messages reach, borrowed apart so a
/// packet lent by the transport can be dispatched in place.
struct Dispatch<'r> {
    to: Handlers<'r>,
    reassembly: &'r mut Reassembly,
}

/// The roles messages are dispatched to.
struct Handlers<'r> {
    io: &'r mut Io,
    index: &'r mut NicIndex,
    server: &'r mut Server,
    coordinator: &'r mut Coordinator,
    single: &'r mut SingleKey,
    procedures: &'r ProcedureRegistry,
    bad: &'r mut u64,
    recovery: &'r mut RecoveryRuntime,
    copies: &'r mut crate::recovery::rereplication::Copies,
    restart: &'r mut RestartState,
    admission: &'r mut admission::Admission,
}

impl Dispatch<'_> {
    /// Dispatches every message of an accepted packet (source and epoch are
    /// the packet's), reassembling fragments; stops at the first message that
    /// does not decode.
    fn messages(&mut self, h: &PacketHeader, mut msgs: Messages<'_>) {
        while let Some(m) = msgs.next_raw() {
            let Ok((mh, raw)) = m else {
                *self.to.bad += 1;
                return;
            };
            let whole = match self
                .reassembly
                .on_message(h.src, h.src_incarnation, &mh, raw)
            {
                Ok(Some(x)) => x,
                Ok(None) => continue,
                Err(_) => {
                    *self.to.bad += 1;
                    continue;
                }
            };
            if whole.0 == MsgKind::Recovery {
                if !self.to.recovery.on_wire(h.src, whole.1) {
                    *self.to.bad += 1;
                }
                continue;
            }
            if self.to.admission.waiting() {
                // Not admitted yet: answer nothing, as the crashed process
                // would (recovery messages are queued for the epoch that
                // admits this node, whose configuration may come later).
                self.to.admission.count_drop();
                continue;
            }
            if whole.0 == MsgKind::Copy {
                if !self.to.copies.on_wire(h.src, whole.1) {
                    *self.to.bad += 1;
                }
                continue;
            }
            if whole.0 == MsgKind::Rebuild {
                let parts = restart::Parts {
                    io: self.to.io,
                    index: self.to.index,
                    server: self.to.server,
                    coordinator: self.to.coordinator,
                    recovering: self.to.recovery.paused(),
                };
                if !self.to.restart.on_wire(h.src, h.epoch, whole.1, parts) {
                    *self.to.bad += 1;
                }
                continue;
            }
            match Body::decode(whole.0, whole.1) {
                Ok(body) => self.to.message(h.src, &body),
                Err(_) => {
                    *self.to.bad += 1;
                    return;
                }
            }
        }
    }
}

impl Handlers<'_> {
    /// Checks a decoded message against this node's limits: a value longer
    /// than the host table stores must never reach the host log.
    fn acceptable(&self, body: &Body<'_>) -> bool {
        let max = self.io.value_bytes_max;
        match body {
            Body::Log { items, .. }
            | Body::Commit { items, .. }
            | Body::Lock { items, .. }
            | Body::Replicate { items, .. }
            | Body::Unlock { items, .. }
            | Body::Readable { items, .. } => items.iter().all(|it| it.value.len() <= max),
            _ => true,
        }
    }

    fn message(&mut self, src: NodeId, body: &Body<'_>) {
        if !self.acceptable(body) {
            // Counted here; the server refuses it with a reply (never a silent drop).
            *self.bad += 1;
        }
        // During a recovery epoch this node's evidence is taken:
        // a LOG arriving now (a retransmission stamped with the new epoch)
        // is refused, so no record appears that the evidence lacks, and the
        // coordinator's transactions wait for recovery's decisions.
        let recovering = self.recovery.paused();
        match self.restart.gate(src, body) {
            restart::Gate::Pass => {}
            restart::Gate::Drop => return,
            restart::Gate::Refuse => return restart::refuse(self.io, src, body),
        }
        // Single-key calls are served only by a node that serves (not
        // recovering, not rebuilding its locks): `protocol/single_key.rs`.
        let serving = !recovering && !self.restart.rebuilding();
        match *body {
            Body::GetOne { tx_id, key } if serving => {
                return self.server.get_one(self.io, self.index, src, tx_id, key)
            }
            Body::GetOne { tx_id, .. } => {
                return refuse_get_one(self.io, src, tx_id, ReplyStatus::Unavailable)
            }
            Body::WriteOne { tx_id, args } => {
                let (io, procs) = (&mut *self.io, self.procedures);
                return self.single.on_write_one(
                    io,
                    self.coordinator,
                    procs,
                    serving,
                    src,
                    tx_id,
                    args,
                );
            }
            Body::GetOneResp { .. } | Body::WriteOneResp { .. } => {
                return self.single.on_reply(self.io, self.coordinator, src, body)
            }
            _ => {}
        }
        match body {
            Body::Log { tx_id, .. } if recovering => self.server.refuse_log(self.io, src, *tx_id),
            // Re-replication's copy transactions.
            Body::LogAck { tx_id, status } | Body::CommitAck { tx_id, status }
                if self.copies.owns(*tx_id) =>
            {
                let commit = matches!(body, Body::CommitAck { .. });
                self.copies.on_ack(self.io, *tx_id, commit, *status)
            }
            Body::Execute { .. }
            | Body::Validate { .. }
            | Body::Log { .. }
            | Body::Commit { .. }
            | Body::Abort { .. }
            | Body::AbortLog { .. }
            // The Dnl skeleton's requests (`protocol/server/dnl.rs`).
            | Body::Get { .. }
            | Body::Lock { .. }
            | Body::Replicate { .. }
            | Body::Unlock { .. }
            | Body::Readable { .. } => self.server.handle(self.io, self.index, src, body),
            _ if recovering => self.coordinator.count_frozen_response(),
            _ => self
                .coordinator
                .on_response(self.io, self.procedures, src, body),
        }
    }
}
