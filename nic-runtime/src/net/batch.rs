//! Opportunistic batching (Dandelion §5.1): messages to the same destination
//! share a packet, up to the MTU and [`MESSAGES_PER_PACKET_MAX`] messages. A
//! packet is sealed when the next message does not fit or when the iteration
//! ends — never held back to fill up ("batch at your own pace"). With
//! batching off ([`Batcher::new`]'s `batching`), every message is sealed in a
//! packet of its own, for measurement.
//!
//! A message body longer than an empty packet carries is split into
//! [`MSG_FLAG_FRAG_MORE`] fragments that fill consecutive packets to its
//! destination ([`super::fragment`] reassembles them); a body is at most
//! [`MESSAGE_BYTES_MAX`] bytes.
//!
//! Packets to other nodes are written straight into buffers the transport
//! lends when it lends any ([`Batcher::set_tx_lender`], [`super::txbuf`]),
//! so appending a body is the one copy of its bytes on the send path; with
//! no lender, or none free, into heap buffers the batcher reuses.
//!
//! Sealed packets wait in a per-destination **backlog** until the session
//! layer ([`super::session`]) numbers them into its window. The backlog is
//! bounded ([`SessionConfig::backlog_packets`](super::session::SessionConfig));
//! a message that would pass the bound is refused
//! ([`BatchError::BacklogFull`]) and nothing of it is queued. Why the
//! protocol never meets that refusal: the runtime stops admitting new
//! transactions once any backlog passes [`BACKLOG_HIGH_WATER_PERCENT`] of the
//! bound ([`Batcher::congested`]); below the mark, what can still be queued
//! is bounded by the transactions already in flight (each has at most one
//! request outstanding per peer, and each request gets one reply). With the
//! default bound of 8192 packets and a 9000-byte MTU that leaves 4096 packets
//! (over 30 MB) of headroom per peer; should a refusal still happen, the
//! runtime stops the node with a typed fault (`Io::send`), never a panic.

use super::txbuf::{PacketBuf, TxLender};
use crate::placement::NODES_MAX;
use splitkv_layout::wire::{
    BodyWriter, Flow, MsgHeader, MsgKind, NodeId, PacketHeader, MESSAGES_PER_PACKET_MAX,
    MESSAGE_BYTES_MAX, MSG_FLAG_FRAG_MORE, MSG_HEADER_BYTES, PACKET_HEADER_BYTES,
};
use std::collections::VecDeque;

/// Share of the backlog bound (percent) at which [`Batcher::congested`]
/// says so and the runtime stops admitting new transactions.
pub const BACKLOG_HIGH_WATER_PERCENT: usize = 50;
/// Most spare packet buffers kept for reuse.
pub const SPARE_BUFFERS_MAX: usize = 512;

/// A message that cannot be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// The body is larger than any message may be.
    #[error("message body of {len} B exceeds the {max} B message limit")]
    TooLarge {
        /// Body bytes.
        len: usize,
        /// The limit ([`MESSAGE_BYTES_MAX`]).
        max: usize,
    },
    /// No such destination.
    #[error("no node {0}")]
    BadDestination(NodeId),
    /// The backlog of sealed packets toward `dest` has no room for the
    /// packets this message needs.
    #[error("backlog toward node {dest} full ({backlog} packets queued, bound {max})")]
    BacklogFull {
        /// Destination.
        dest: NodeId,
        /// Packets queued toward it.
        backlog: usize,
        /// The bound.
        max: usize,
    },
}

/// Counters of what the batcher sealed for the network (loopback excluded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchStats {
    /// Packets sealed for other nodes.
    pub packets: u64,
    /// Messages (fragments counted one by one) in those packets.
    pub messages: u64,
    /// Bytes in those packets, headers included.
    pub bytes: u64,
    /// Those packets no larger than the transport's inline limit
    /// ([`Transport::inline_bytes_max`](super::Transport::inline_bytes_max);
    /// always 0 on a transport without one).
    pub inline_packets: u64,
    /// Messages too large for one packet, sent as fragments.
    pub fragmented_messages: u64,
    /// Fragments sent for them.
    pub fragments: u64,
    /// Messages to this node itself (delivered without the transport).
    pub loopback_messages: u64,
    /// Packets (of `packets`) written in place in a buffer the transport
    /// lent ([`Batcher::set_tx_lender`]); the rest were written to heap
    /// buffers, which the transport copies.
    pub lent_packets: u64,
}

#[derive(Debug, Default)]
struct Open {
    bytes: PacketBuf,
    count: u16,
}

/// Per-destination packet assembly for one node.
#[derive(Debug)]
pub struct Batcher {
    template: PacketHeader,
    nodes: usize,
    mtu: usize,
    batching: bool,
    backlog_max: usize,
    open: Vec<Open>,
    /// Sealed packets per destination; this node's own entry is the loopback.
    sealed: Vec<VecDeque<PacketBuf>>,
    spare: Vec<Vec<u8>>,
    stats: BatchStats,
    inline_bytes_max: usize,
    lender: Option<&'static dyn TxLender>,
}

impl Batcher {
    /// A batcher for `template.src` in a cluster of `nodes`, sealing packets
    /// of at most `mtu` bytes whose headers start from `template` (cluster id,
    /// source, incarnation, epoch), with at most `backlog_max` sealed packets
    /// waiting per destination, and `batching` on or off.
    ///
    /// # Panics
    /// If `nodes > NODES_MAX`, the source is not below `nodes`, `backlog_max`
    /// is 0 or `mtu` cannot hold a header and some body (callers check).
    pub fn new(
        template: PacketHeader,
        nodes: usize,
        mtu: usize,
        batching: bool,
        backlog_max: usize,
    ) -> Batcher {
        assert!(nodes <= NODES_MAX && (template.src as usize) < nodes && backlog_max > 0);
        assert!(mtu > PACKET_HEADER_BYTES + MSG_HEADER_BYTES + 16);
        Batcher {
            template,
            nodes,
            mtu,
            batching,
            backlog_max,
            open: (0..nodes).map(|_| Open::default()).collect(),
            sealed: (0..nodes).map(|_| VecDeque::new()).collect(),
            spare: Vec::new(),
            stats: BatchStats::default(),
            inline_bytes_max: 0,
            lender: None,
        }
    }

    /// Writes packets to other nodes into buffers `lender` lends from now
    /// on (`None`: heap buffers, which the transport copies — the path
    /// before lending, kept for measurement). A lender whose buffers are
    /// smaller than the MTU is not used. Returns whether packets are now
    /// filled in lent buffers.
    pub fn set_tx_lender(&mut self, lender: Option<&'static dyn TxLender>) -> bool {
        self.lender = lender.filter(|l| l.capacity() >= self.mtu);
        self.lender.is_some()
    }

    /// Largest packet this batcher seals, in bytes.
    pub fn mtu(&self) -> usize {
        self.mtu
    }

    /// Whether messages share packets (false: one message per packet).
    pub fn batching(&self) -> bool {
        self.batching
    }

    /// Sets the epoch stamped on packets sealed from now on.
    pub fn set_epoch(&mut self, epoch: u32) {
        self.template.epoch = epoch;
    }

    /// Sets the transport's inline limit in bytes (0: none), against which
    /// sealed packets are counted in [`BatchStats::inline_packets`].
    pub fn set_inline_bytes_max(&mut self, bytes: usize) {
        self.inline_bytes_max = bytes;
    }

    /// Counters so far.
    pub fn stats(&self) -> BatchStats {
        self.stats
    }

    /// Queues the body in `w` for `dest` (Dandelion's `try_insert(dest, flow, msg)`;
    /// the flow follows from the kind).
    ///
    /// # Errors
    /// See [`Batcher::try_insert_raw`].
    pub fn try_insert(&mut self, dest: NodeId, w: &BodyWriter) -> Result<(), BatchError> {
        self.try_insert_raw(dest, w.kind().flow(), w.kind(), w.bytes())
    }

    /// Queues the same body for every node in `dests` (`try_insert_mcast`):
    /// all or none (room is checked for every destination first).
    ///
    /// # Errors
    /// See [`Batcher::try_insert_raw`].
    pub fn try_insert_mcast(&mut self, dests: &[NodeId], w: &BodyWriter) -> Result<(), BatchError> {
        for &d in dests {
            self.check(d, w.bytes().len())?;
        }
        for &d in dests {
            self.try_insert(d, w)?;
        }
        Ok(())
    }

    /// Packets of room a body of `len` bytes needs toward `dest`, or why not.
    fn check(&self, dest: NodeId, len: usize) -> Result<(), BatchError> {
        let d = dest as usize;
        if d >= self.nodes {
            return Err(BatchError::BadDestination(dest));
        }
        if len > MESSAGE_BYTES_MAX {
            return Err(BatchError::TooLarge {
                len,
                max: MESSAGE_BYTES_MAX,
            });
        }
        let o = &self.open[d];
        let joins_open = self.joins_open(o, len);
        let frags = len.div_ceil(self.fragment_bytes()).max(1);
        // Packets sealed by this message, plus the one left open.
        let needed = if joins_open {
            1
        } else {
            (o.count > 0) as usize + frags
        };
        let backlog = self.sealed[d].len();
        if backlog + needed > self.backlog_max {
            return Err(BatchError::BacklogFull {
                dest,
                backlog,
                max: self.backlog_max,
            });
        }
        Ok(())
    }

    /// Body bytes one fragment carries (an empty packet with one message).
    fn fragment_bytes(&self) -> usize {
        self.mtu - PACKET_HEADER_BYTES - MSG_HEADER_BYTES
    }

    fn joins_open(&self, o: &Open, len: usize) -> bool {
        self.batching
            && o.count > 0
            && o.bytes.len() + MSG_HEADER_BYTES + len <= self.mtu
            && (o.count as usize) < MESSAGES_PER_PACKET_MAX
    }

    /// Queues an encoded body of `kind` on `flow` for `dest`; a body longer
    /// than one packet carries is fragmented.
    ///
    /// # Errors
    /// [`BatchError::BadDestination`], [`BatchError::TooLarge`] (over
    /// [`MESSAGE_BYTES_MAX`]) or [`BatchError::BacklogFull`]; nothing is
    /// queued then.
    pub fn try_insert_raw(
        &mut self,
        dest: NodeId,
        flow: Flow,
        kind: MsgKind,
        body: &[u8],
    ) -> Result<(), BatchError> {
        self.check(dest, body.len())?;
        let d = dest as usize;
        if !self.joins_open(&self.open[d], body.len()) {
            self.seal(d);
        }
        let per = self.fragment_bytes();
        let mut chunks = body.chunks(per).peekable();
        if body.is_empty() {
            self.append(d, flow, kind, 0, &[]);
        }
        let fragmented = body.len() > per;
        while let Some(chunk) = chunks.next() {
            let more = chunks.peek().is_some();
            let flags = if more { MSG_FLAG_FRAG_MORE } else { 0 };
            self.append(d, flow, kind, flags, chunk);
            if more {
                self.seal(d);
            }
            if fragmented && d != self.template.src as usize {
                self.stats.fragments += 1;
            }
        }
        if fragmented && d != self.template.src as usize {
            self.stats.fragmented_messages += 1;
        }
        if !self.batching {
            self.seal(d);
        }
        Ok(())
    }

    /// Appends one message (or fragment) to `d`'s open packet, opening one.
    fn append(&mut self, d: usize, flow: Flow, kind: MsgKind, flags: u8, body: &[u8]) {
        if self.open[d].count == 0 {
            let mut bytes = self.packet_buffer(d);
            let mut head = [0u8; PACKET_HEADER_BYTES];
            PacketHeader {
                dst: d as NodeId,
                ..self.template
            }
            .write(&mut head);
            let written = bytes.extend_from_slice(&head);
            assert!(written, "a fresh packet buffer holds a header");
            self.open[d].bytes = bytes;
        }
        let o = &mut self.open[d];
        let head = MsgHeader {
            flow,
            kind,
            flags,
            len: body.len() as u32,
        }
        .to_bytes();
        // Room was checked against the MTU (`joins_open`, `fragment_bytes`),
        // which a lent buffer holds (`set_tx_lender`), and nobody else holds
        // an open packet's buffer.
        let written = o.bytes.extend_from_slice(&head) && o.bytes.extend_from_slice(body);
        assert!(written, "an open packet has room for what joins it");
        o.count += 1;
        debug_assert!(o.bytes.len() <= self.mtu);
    }

    fn seal(&mut self, d: usize) {
        let o = &mut self.open[d];
        if o.count == 0 {
            return;
        }
        let mut bytes = std::mem::take(&mut o.bytes);
        let count = std::mem::replace(&mut o.count, 0);
        let len = (bytes.len() - PACKET_HEADER_BYTES) as u32;
        let head = bytes.try_mut().expect("nobody else holds an open packet");
        PacketHeader::patch_count_len(head, count, len);
        if d == self.template.src as usize {
            self.stats.loopback_messages += count as u64;
        } else {
            self.stats.packets += 1;
            self.stats.messages += count as u64;
            self.stats.bytes += bytes.len() as u64;
            self.stats.inline_packets += (bytes.len() <= self.inline_bytes_max) as u64;
            self.stats.lent_packets += bytes.is_lent() as u64;
        }
        self.sealed[d].push_back(bytes);
    }

    /// Seals every open packet (end of an iteration).
    pub fn flush(&mut self) {
        for d in 0..self.nodes {
            self.seal(d);
        }
    }

    /// Whether nothing is open or sealed (loopback included).
    pub fn is_empty(&self) -> bool {
        self.open.iter().all(|o| o.count == 0) && self.sealed.iter().all(|q| q.is_empty())
    }

    /// Whether some destination's backlog passed the high-water mark
    /// ([`BACKLOG_HIGH_WATER_PERCENT`] of the bound).
    pub fn congested(&self) -> bool {
        let mark = self.backlog_max * BACKLOG_HIGH_WATER_PERCENT / 100;
        self.sealed.iter().any(|q| q.len() >= mark.max(1))
    }

    /// Sealed packets waiting toward `dest` (0 for a bad id).
    pub fn backlog(&self, dest: NodeId) -> usize {
        self.sealed.get(dest as usize).map_or(0, |q| q.len())
    }

    /// The per-destination backlogs of sealed packets, indexed by node id
    /// (this node's own entry is the loopback), for the session layer.
    pub fn backlogs_mut(&mut self) -> &mut [VecDeque<PacketBuf>] {
        &mut self.sealed
    }

    /// Takes the oldest sealed packet addressed to this node itself.
    pub fn pop_loopback(&mut self) -> Option<PacketBuf> {
        self.sealed[self.template.src as usize].pop_front()
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

    /// A buffer for a new packet to `d`: lent by the transport when it
    /// lends and `d` is another node (loopback packets never reach the
    /// transport), else a spare heap buffer.
    fn packet_buffer(&mut self, d: usize) -> PacketBuf {
        let lent = match self.lender {
            Some(l) if d != self.template.src as usize => l.reserve(),
            _ => None,
        };
        match lent {
            Some(b) => PacketBuf::Lent(b),
            None => PacketBuf::Heap(self.spare_buffer()),
        }
    }

    /// Returns a consumed packet buffer for reuse (at most
    /// [`SPARE_BUFFERS_MAX`] heap buffers are kept; a lent one goes back
    /// to its lender).
    pub fn recycle(&mut self, buf: PacketBuf) {
        let Some(buf) = buf.into_heap() else {
            return;
        };
        if self.spare.len() < SPARE_BUFFERS_MAX && buf.capacity() >= self.mtu {
            self.spare.push(buf);
        }
    }
}

#[cfg(test)]
mod tests;
