//! The Dnl stack of one node (Dandelion §5): the batcher ([`super::batch`],
//! with fragmentation) above the sessions ([`super::session`]) above a
//! [`Transport`]. The protocol queues messages with [`Stack::try_insert`];
//! the runtime passes each received packet through [`Stack::receive`]
//! (session checks) and, at the end of each iteration, calls
//! [`Stack::flush`] (seal, number, send, acknowledge, retransmit).
//! Reassembly of fragments happens in the runtime with a
//! [`super::fragment::Reassembly`], so that a reassembled body can be
//! dispatched while the stack takes the replies.
//!
//! Every transport gets the same message layout. A transport's inline limit
//! ([`Transport::inline_bytes_max`], Dandelion §5.2–5.3) is counted against
//! in the statistics (packets small enough to be inlined); the kernel-bypass
//! transports use it per packet when they send.

use super::batch::{BatchError, BatchStats, Batcher};
use super::fragment::FragmentStats;
use super::session::{SessionConfig, SessionConfigError, SessionEvent, SessionStats, Sessions};
use super::{PacketBuf, Transport, TxLender};
use crate::placement::NODES_MAX;
use crate::Nanos;
use splitkv_layout::wire::{
    BodyWriter, Flow, Messages, MsgKind, NodeId, PacketHeader, MSG_HEADER_BYTES,
    PACKET_HEADER_BYTES,
};

/// Cluster id of a node that is not told one.
pub const CLUSTER_ID_DEFAULT: u32 = 1;
/// Incarnation of a node that is not told one (the first start).
pub const INCARNATION_DEFAULT: u32 = 1;
/// Smallest MTU the stack works with: a header, a message header and 64
/// body bytes per fragment.
pub const STACK_MTU_MIN: usize = PACKET_HEADER_BYTES + MSG_HEADER_BYTES + 64;

/// How one node's network stack is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackConfig {
    /// The cluster's id: packets carrying another are dropped.
    pub cluster_id: u32,
    /// This node's incarnation (≥ 1; a restarted node uses a larger one, so
    /// its peers open fresh sessions instead of taking its packets for
    /// duplicates).
    pub incarnation: u32,
    /// Batching on (Dandelion §5.1) or off (one message per packet, for
    /// measurement).
    pub batching: bool,
    /// Whether packets are filled in place in buffers the transport lends,
    /// when it lends any (the reserve/commit path, [`super::txbuf`]);
    /// `false` writes them to heap buffers the transport copies (the path
    /// before lending, kept for measurement). Applied by whoever joins the
    /// stack to its transport ([`Stack::attach_lender`]).
    pub fill_in_place: bool,
    /// Session limits and timers.
    pub session: SessionConfig,
}

impl Default for StackConfig {
    fn default() -> StackConfig {
        StackConfig {
            cluster_id: CLUSTER_ID_DEFAULT,
            incarnation: INCARNATION_DEFAULT,
            batching: true,
            fill_in_place: true,
            session: SessionConfig::default(),
        }
    }
}

/// A stack that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StackError {
    /// Bad session limits.
    #[error(transparent)]
    Session(#[from] SessionConfigError),
    /// Incarnation 0 means "unknown" on the wire.
    #[error("incarnation must be at least 1")]
    Incarnation,
    /// The transport's packets are too small.
    #[error("MTU of {mtu} B below the {STACK_MTU_MIN} B minimum")]
    Mtu {
        /// The transport's MTU.
        mtu: usize,
    },
    /// Node id or count out of range.
    #[error("node {node} of {nodes} (at most {NODES_MAX})")]
    Node {
        /// The node.
        node: NodeId,
        /// Cluster size.
        nodes: usize,
    },
}

/// Network counters of one node (Dandelion Figure 6's payload and header
/// bytes among them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetStats {
    /// What the batcher sealed: packets, messages, fragments, loopback.
    pub batch: BatchStats,
    /// What the sessions sent, received, dropped, retransmitted.
    pub sessions: SessionStats,
    /// Fragmented messages reassembled or discarded.
    pub fragments: FragmentStats,
}

impl NetStats {
    /// Messages per sealed network packet (0 before the first).
    pub fn messages_per_packet(&self) -> f64 {
        if self.batch.packets == 0 {
            0.0
        } else {
            self.batch.messages as f64 / self.batch.packets as f64
        }
    }
}

/// Batcher and sessions of one node.
#[derive(Debug)]
pub struct Stack {
    batcher: Batcher,
    sessions: Sessions,
}

impl Stack {
    /// The stack of `node` in a cluster of `nodes`, over a transport with
    /// packets of `mtu` bytes that is `lossy` or not.
    ///
    /// # Errors
    /// [`StackError`] for a bad configuration, MTU or node id.
    pub fn new(
        node: NodeId,
        nodes: usize,
        mtu: usize,
        lossy: bool,
        cfg: &StackConfig,
    ) -> Result<Stack, StackError> {
        if nodes > NODES_MAX || node as usize >= nodes {
            return Err(StackError::Node { node, nodes });
        }
        if mtu < STACK_MTU_MIN {
            return Err(StackError::Mtu { mtu });
        }
        if cfg.incarnation == 0 {
            return Err(StackError::Incarnation);
        }
        let sessions = Sessions::new(
            node,
            nodes,
            cfg.cluster_id,
            cfg.incarnation,
            lossy,
            cfg.session,
        )?;
        let template = PacketHeader {
            cluster_id: cfg.cluster_id,
            src: node,
            src_incarnation: cfg.incarnation,
            ..PacketHeader::default()
        };
        let batcher = Batcher::new(
            template,
            nodes,
            mtu,
            cfg.batching,
            cfg.session.backlog_packets,
        );
        Ok(Stack { batcher, sessions })
    }

    /// Sets the transport's inline limit in bytes (0: none); see
    /// [`Transport::inline_bytes_max`].
    pub fn set_inline_bytes_max(&mut self, bytes: usize) {
        self.batcher.set_inline_bytes_max(bytes);
    }

    /// Fills packets to other nodes in place in buffers `lender` lends
    /// ([`Transport::tx_lender`]; `None`: heap buffers the transport copies,
    /// the path before lending). Returns whether the lender is used (its
    /// buffers must hold an MTU-sized packet); see [`super::txbuf`].
    pub fn set_tx_lender(&mut self, lender: Option<&'static dyn TxLender>) -> bool {
        self.batcher.set_tx_lender(lender)
    }

    /// Fills packets in place in `transport`'s buffers if `cfg` asks for it
    /// ([`StackConfig::fill_in_place`]) and the transport lends any: see
    /// [`Stack::set_tx_lender`]. Returns whether it does.
    pub fn attach_lender(&mut self, transport: &dyn Transport, cfg: &StackConfig) -> bool {
        self.set_tx_lender(transport.tx_lender().filter(|_| cfg.fill_in_place))
    }

    /// Largest packet, in bytes.
    pub fn mtu(&self) -> usize {
        self.batcher.mtu()
    }

    /// Queues the body in `w` for `dest` (Dandelion §5.1 `try_insert`).
    ///
    /// # Errors
    /// [`BatchError`]: bad destination, body over the message limit, or no
    /// room in the backlog toward `dest` (retry after a flush).
    pub fn try_insert(&mut self, dest: NodeId, w: &BodyWriter) -> Result<(), BatchError> {
        self.batcher.try_insert(dest, w)
    }

    /// Queues the body in `w` for every node of `dests`, all or none.
    ///
    /// # Errors
    /// As [`Stack::try_insert`].
    pub fn try_insert_mcast(&mut self, dests: &[NodeId], w: &BodyWriter) -> Result<(), BatchError> {
        self.batcher.try_insert_mcast(dests, w)
    }

    /// Queues an encoded body.
    ///
    /// # Errors
    /// As [`Stack::try_insert`].
    pub fn try_insert_raw(
        &mut self,
        dest: NodeId,
        flow: Flow,
        kind: MsgKind,
        body: &[u8],
    ) -> Result<(), BatchError> {
        self.batcher.try_insert_raw(dest, flow, kind, body)
    }

    /// See [`Sessions::raise_floor`] (the incarnation a configuration
    /// names; a restarted peer rejoining).
    pub fn raise_floor(&mut self, peer: NodeId, incarnation: u32) {
        self.sessions.raise_floor(peer, incarnation);
    }

    /// See [`Sessions::take_renewed`] (peers whose session was renewed for
    /// a newer incarnation since the last call, a mask by node id).
    pub fn take_renewed(&mut self) -> u32 {
        self.sessions.take_renewed()
    }

    /// See [`Sessions::floor`].
    pub fn floor(&self, peer: NodeId) -> u32 {
        self.sessions.floor(peer)
    }

    /// This node's membership epoch (stamped on every packet sent).
    pub fn epoch(&self) -> u32 {
        self.sessions.epoch()
    }

    /// Raises this node's membership epoch (stamped on every packet; packets
    /// of older epochs are dropped from now on).
    pub fn set_epoch(&mut self, epoch: u32) {
        self.sessions.set_epoch(epoch);
        self.batcher.set_epoch(self.sessions.epoch());
    }

    /// Session checks of one received packet; see [`Sessions::receive`].
    pub fn receive<'a>(
        &mut self,
        now: Nanos,
        bytes: &'a [u8],
    ) -> Option<(PacketHeader, Messages<'a>)> {
        self.sessions.receive(now, bytes)
    }

    /// End of an iteration: seals every open packet, then lets the sessions
    /// number, send, acknowledge and retransmit ([`Sessions::flush`]).
    /// Returns whether anything was done.
    pub fn flush(&mut self, now: Nanos, transport: &mut dyn Transport) -> bool {
        self.batcher.flush();
        let work = self
            .sessions
            .flush(now, transport, self.batcher.backlogs_mut());
        while let Some(b) = self.sessions.spare_buffer() {
            self.batcher.recycle(PacketBuf::Heap(b));
        }
        work
    }

    /// Seals every open packet without sending (tests read the backlogs).
    pub fn seal(&mut self) {
        self.batcher.flush();
    }

    /// The oldest sealed packet addressed to this node itself.
    pub fn pop_loopback(&mut self) -> Option<PacketBuf> {
        self.batcher.pop_loopback()
    }

    /// Returns a consumed packet buffer for reuse.
    pub fn recycle(&mut self, buf: PacketBuf) {
        self.batcher.recycle(buf);
    }

    /// Whether a backlog passed its high-water mark (admission control).
    pub fn congested(&self) -> bool {
        self.batcher.congested()
    }

    /// Whether nothing is queued, unsent or unacknowledged.
    pub fn is_idle(&self) -> bool {
        self.batcher.is_empty() && self.sessions.is_idle()
    }

    /// Moves the session events raised so far into `out`.
    pub fn drain_events(&mut self, out: &mut Vec<SessionEvent>) {
        self.sessions.drain_events(out);
    }

    /// The batcher (its backlogs, for tests and drivers).
    pub fn batcher_mut(&mut self) -> &mut Batcher {
        &mut self.batcher
    }

    /// The sessions.
    pub fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// Batching and session counters (fragment reassembly is the runtime's).
    pub fn stats(&self) -> NetStats {
        NetStats {
            batch: self.batcher.stats(),
            sessions: self.sessions.stats(),
            fragments: FragmentStats::default(),
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_lent;
