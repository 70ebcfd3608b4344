//! Opportunistic batching (Dandelion §5.1): messages to the same destination share
//! a packet, up to the MTU and [`MESSAGES_PER_PACKET_MAX`] messages. A packet is
//! sealed when the next message does not fit or when the iteration ends — never
//! held back to fill up ("batch at your own pace").

use super::OutPacket;
use crate::placement::NODES_MAX;
use splitkv_layout::wire::{
    BodyWriter, Flow, MsgHeader, MsgKind, NodeId, PacketHeader, MESSAGES_PER_PACKET_MAX,
    MSG_HEADER_BYTES, PACKET_HEADER_BYTES,
};
use std::collections::VecDeque;

/// A message that cannot be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// The message is larger than an empty packet can carry.
    #[error("message of {len} B does not fit a {mtu} B packet")]
    TooLarge {
        /// Message bytes including its header.
        len: usize,
        /// Packet size limit.
        mtu: usize,
    },
    /// No such destination.
    #[error("no node {0}")]
    BadDestination(NodeId),
}

/// Counters of what the batcher sealed for the network (loopback excluded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchStats {
    /// Packets sealed for other nodes.
    pub packets: u64,
    /// Messages in those packets.
    pub messages: u64,
    /// Bytes in those packets.
    pub bytes: u64,
    /// Messages to this node itself (delivered without the transport).
    pub loopback_messages: u64,
}

#[derive(Debug, Default)]
struct Open {
    bytes: Vec<u8>,
    count: u16,
}

/// Per-destination packet assembly for one node.
#[derive(Debug)]
pub struct Batcher {
    node: NodeId,
    nodes: usize,
    epoch: u32,
    mtu: usize,
    open: Vec<Open>,
    ready: VecDeque<OutPacket>,
    loopback: Vec<Vec<u8>>,
    spare: Vec<Vec<u8>>,
    stats: BatchStats,
}

impl Batcher {
    /// Largest packet this batcher seals, in bytes.
    pub fn mtu(&self) -> usize {
        self.mtu
    }

    /// A batcher for `node` in a cluster of `nodes`, sealing packets of at most `mtu` bytes.
    ///
    /// # Panics
    /// If `nodes > NODES_MAX` or `mtu` cannot hold one header.
    pub fn new(node: NodeId, nodes: usize, mtu: usize) -> Batcher {
        assert!(nodes <= NODES_MAX && (node as usize) < nodes);
        assert!(mtu > PACKET_HEADER_BYTES + MSG_HEADER_BYTES);
        Batcher {
            node,
            nodes,
            epoch: 0,
            mtu,
            open: (0..nodes).map(|_| Open::default()).collect(),
            ready: VecDeque::with_capacity(64),
            loopback: Vec::new(),
            spare: Vec::new(),
            stats: BatchStats::default(),
        }
    }

    /// Sets the epoch stamped on messages from now on.
    pub fn set_epoch(&mut self, epoch: u32) {
        self.epoch = epoch;
    }

    /// Counters so far.
    pub fn stats(&self) -> BatchStats {
        self.stats
    }

    /// Queues the body in `w` for `dest` (Dandelion's `try_insert(dest, flow, msg)`;
    /// the flow follows from the kind).
    pub fn try_insert(&mut self, dest: NodeId, w: &BodyWriter) -> Result<(), BatchError> {
        self.try_insert_raw(dest, w.kind().flow(), w.kind(), w.bytes())
    }

    /// Queues the same body for every node in `dests` (`try_insert_mcast`).
    pub fn try_insert_mcast(&mut self, dests: &[NodeId], w: &BodyWriter) -> Result<(), BatchError> {
        for &d in dests {
            self.try_insert(d, w)?;
        }
        Ok(())
    }

    /// Queues an encoded body of `kind` on `flow` for `dest`.
    pub fn try_insert_raw(
        &mut self,
        dest: NodeId,
        flow: Flow,
        kind: MsgKind,
        body: &[u8],
    ) -> Result<(), BatchError> {
        let d = dest as usize;
        if d >= self.nodes {
            return Err(BatchError::BadDestination(dest));
        }
        let len = MSG_HEADER_BYTES + body.len();
        if PACKET_HEADER_BYTES + len > self.mtu {
            return Err(BatchError::TooLarge { len, mtu: self.mtu });
        }
        let full = {
            let o = &self.open[d];
            o.count > 0
                && (o.bytes.len() + len > self.mtu || o.count as usize >= MESSAGES_PER_PACKET_MAX)
        };
        if full {
            self.seal(d);
        }
        if self.open[d].count == 0 {
            let mut bytes = self
                .spare
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(self.mtu));
            bytes.clear();
            PacketHeader {
                src: self.node,
                dst: dest,
                epoch: self.epoch,
                ..PacketHeader::default()
            }
            .encode(&mut bytes);
            self.open[d].bytes = bytes;
        }
        let o = &mut self.open[d];
        MsgHeader {
            flow,
            kind,
            flags: 0,
            len: body.len() as u32,
        }
        .encode(&mut o.bytes);
        o.bytes.extend_from_slice(body);
        o.count += 1;
        Ok(())
    }

    fn seal(&mut self, d: usize) {
        let o = &mut self.open[d];
        if o.count == 0 {
            return;
        }
        let mut bytes = std::mem::take(&mut o.bytes);
        let count = std::mem::replace(&mut o.count, 0);
        let len = (bytes.len() - PACKET_HEADER_BYTES) as u32;
        PacketHeader::patch_count_len(&mut bytes, count, len);
        if d == self.node as usize {
            self.stats.loopback_messages += count as u64;
            self.loopback.push(bytes);
        } else {
            self.stats.packets += 1;
            self.stats.messages += count as u64;
            self.stats.bytes += bytes.len() as u64;
            self.ready.push_back(OutPacket {
                dst: d as NodeId,
                bytes,
            });
        }
    }

    /// Seals every open packet (end of an iteration).
    pub fn flush(&mut self) {
        for d in 0..self.nodes {
            self.seal(d);
        }
    }

    /// Sealed packets for the transport, oldest first.
    pub fn ready(&mut self) -> &mut VecDeque<OutPacket> {
        &mut self.ready
    }

    /// Moves sealed packets addressed to this node into `out`.
    pub fn take_loopback(&mut self, out: &mut Vec<Vec<u8>>) {
        out.append(&mut self.loopback);
    }

    /// An empty buffer for one packet, reused when one is spare.
    pub fn spare_buffer(&mut self) -> Vec<u8> {
        let mut b = self
            .spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(self.mtu));
        b.clear();
        b
    }

    /// Returns a consumed packet buffer for reuse.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        if self.spare.len() < 256 && buf.capacity() >= self.mtu {
            self.spare.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use splitkv_layout::wire::{decode_packet, Body};

    fn ack(w: &mut BodyWriter, tx: u64) {
        w.ack(MsgKind::LogAck, tx, splitkv_layout::wire::ReplyStatus::Ok);
    }

    #[test]
    fn batches_per_destination_and_seals_on_flush() {
        let mut b = Batcher::new(0, 3, 1500);
        let mut w = BodyWriter::new();
        for tx in 0..10 {
            ack(&mut w, tx);
            b.try_insert(1 + (tx % 2) as u16, &w).unwrap();
        }
        assert!(
            b.ready().is_empty(),
            "nothing is sent before the iteration ends"
        );
        b.flush();
        assert_eq!(b.ready().len(), 2);
        for p in b.ready().iter() {
            let (h, msgs) = decode_packet(&p.bytes).unwrap();
            assert_eq!(h.count, 5);
            let bodies: Vec<_> = msgs.map(|m| m.unwrap().1).collect();
            assert!(bodies.iter().all(|b| matches!(b, Body::LogAck { .. })));
        }
        assert_eq!(b.stats().packets, 2);
        assert_eq!(b.stats().messages, 10);
    }

    #[test]
    fn message_count_bound_starts_a_new_packet() {
        let mut b = Batcher::new(0, 2, 64 * 1024);
        let mut w = BodyWriter::new();
        for tx in 0..(MESSAGES_PER_PACKET_MAX as u64 + 1) {
            ack(&mut w, tx);
            b.try_insert(1, &w).unwrap();
        }
        b.flush();
        let counts: Vec<_> = b
            .ready()
            .iter()
            .map(|p| decode_packet(&p.bytes).unwrap().0.count)
            .collect();
        assert_eq!(counts, vec![MESSAGES_PER_PACKET_MAX as u16, 1]);
    }

    #[test]
    fn mtu_bound_starts_a_new_packet_and_rejects_giants() {
        let mtu = PACKET_HEADER_BYTES + 2 * (MSG_HEADER_BYTES + 8 + 1);
        let mut b = Batcher::new(0, 2, mtu);
        let mut w = BodyWriter::new();
        for tx in 0..3 {
            ack(&mut w, tx);
            b.try_insert(1, &w).unwrap();
        }
        b.flush();
        assert_eq!(b.ready().len(), 2);
        assert!(b.ready().iter().all(|p| p.bytes.len() <= mtu));
        let big = vec![0u8; mtu];
        assert!(matches!(
            b.try_insert_raw(1, Flow::Commit, MsgKind::LogAck, &big),
            Err(BatchError::TooLarge { .. })
        ));
        assert_eq!(b.try_insert(5, &w), Err(BatchError::BadDestination(5)));
    }

    #[test]
    fn loopback_bypasses_network_stats() {
        let mut b = Batcher::new(1, 2, 1500);
        let mut w = BodyWriter::new();
        ack(&mut w, 9);
        b.try_insert(1, &w).unwrap();
        b.flush();
        assert!(b.ready().is_empty());
        let mut out = Vec::new();
        b.take_loopback(&mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(b.stats().packets, 0);
        assert_eq!(b.stats().loopback_messages, 1);
    }
}
