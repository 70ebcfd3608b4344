//! Networking: the Dnl stack ([`stack`], Dandelion §5) — the batching layer
//! ([`batch`], with fragmentation of large messages; [`fragment`] reassembles
//! them) above reliable sessions ([`session`]: packet numbers, window,
//! cumulative acknowledgements, retransmission, duplicate suppression,
//! failure after silence) — above a narrow transport interface
//! ([`Transport`]) with several implementations ([`mem`] in-process; the
//! simulator supplies its own; kernel UDP and the kernel-bypass transports
//! implement the same three calls).
//!
//! **Peer addresses** (a replacement machine for a dead node): a
//! transport that sends to addresses (kernel UDP) knows each node's data
//! address from its configuration, and the membership may re-point one
//! node at another address ([`Transport::set_peer_address`]) when a
//! configuration admits that node's new incarnation at a new machine. The
//! call comes from the thread that polls the transport (the membership
//! agent runs beside the runtime), never from another thread. Packets that
//! still arrive from the former address are dropped and counted
//! ([`PeerAddressStats::stale_address_drops`]). Transports without
//! addresses (in-process, simulated) refuse the call.
//!
//! Buffers belong to the transport: [`Transport::tx_burst`] copies (or, for a
//! zero-copy transport, references until [`Transport::tx_flush`]) the bytes it
//! is given; a transport that lends its own memory ([`Transport::tx_lender`])
//! lets the batching layer fill packets in place and takes them by reference
//! ([`Transport::tx_commit`]; see [`txbuf`]); and [`Transport::rx_burst`] lends each received packet to a
//! callback for the duration of the call, so a DPDK mbuf or a registered RDMA
//! buffer can back packets without an allocation per packet.

pub mod batch;
// Always built: its frame codec, bounds and counters are plain Rust; the
// transport itself needs the feature `dpdk` (see the module).
pub mod dpdk;
pub mod faulty;
pub mod fragment;
pub mod mem;
pub mod session;
pub mod stack;
pub mod txbuf;
#[cfg(target_os = "linux")]
pub mod udp;
// Always built: peer descriptions, configuration bounds, buffer
// accounting and work-request building are plain Rust (a cluster file is
// checked without rdma-core); the device layer and the transport need the
// feature `verbs` on Linux (see the module).
pub mod verbs;

use crate::Nanos;
use splitkv_layout::wire::NodeId;
use std::net::SocketAddr;
pub use txbuf::{PacketBuf, TxBuf, TxCommit, TxLender};

/// A sealed packet waiting for the transport (owned by the batching layer
/// until the transport has taken a copy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutPacket {
    /// Destination node.
    pub dst: NodeId,
    /// The encoded packet (header and messages).
    pub bytes: Vec<u8>,
}

/// One packet handed to [`Transport::tx_burst`]: a destination and the bytes,
/// borrowed for the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxPacket<'a> {
    /// Destination node.
    pub dst: NodeId,
    /// The encoded packet, at most [`Transport::mtu`] bytes.
    pub bytes: &'a [u8],
}

/// Why a transport did not re-point a peer ([`Transport::set_peer_address`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PeerAddressError {
    /// The transport has no peer addresses (in-process, simulated).
    #[error("this transport has no peer addresses")]
    Unsupported,
    /// The node has no entry in the transport's peer list.
    #[error("node {node} is not among the transport's {peers} peers")]
    UnknownNode {
        /// The node named.
        node: NodeId,
        /// Peers the transport knows.
        peers: usize,
    },
    /// The address is of another family than the transport's own.
    #[error("address {addr} is not of the family of the local address {local}")]
    FamilyMismatch {
        /// The address asked for.
        addr: SocketAddr,
        /// The transport's own address.
        local: SocketAddr,
    },
    /// Another node already has the address (received packets could not be
    /// told apart).
    #[error("address {addr} is already node {other}'s")]
    Taken {
        /// The address asked for.
        addr: SocketAddr,
        /// The node that has it.
        other: NodeId,
    },
    /// The transport reaches peers through endpoints registered by data
    /// address (RDMA: GID, queue pair number, QKey) and none is
    /// registered for this one.
    #[error("no endpoint is registered for address {addr}")]
    NoEndpoint {
        /// The address asked for.
        addr: SocketAddr,
    },
}

/// Counters of a transport's peer addresses (replacement machines).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeerAddressStats {
    /// Peers re-pointed at another address ([`Transport::set_peer_address`]
    /// calls that changed one).
    pub repointed: u64,
    /// Packets received from an address a peer had before it was
    /// re-pointed: dropped (they come from the node's former machine, i.e.
    /// an earlier incarnation, which the sessions would drop as well).
    pub stale_address_drops: u64,
}

/// What every transport offers (eRPC-style `tx_burst` / `tx_flush` /
/// `rx_burst`). Transports are non-blocking state machines: calls never wait,
/// and a congested transport takes fewer packets instead of blocking.
pub trait Transport: Send {
    /// Largest packet, in bytes, this transport carries.
    fn mtu(&self) -> usize;

    /// Whether packets between two endpoints can be lost, duplicated or
    /// reordered. The session layer numbers packets either way; on a
    /// transport that says `false` it keeps no retransmission copies.
    fn is_lossy(&self) -> bool {
        true
    }

    /// Largest packet, in bytes, the transport sends inlined in its send
    /// descriptor, so the NIC needs no second DMA to fetch the payload
    /// (RDMA's inline sends; Dandelion §5.2 raises eRPC's limit to 188 B
    /// and §5.3 / Figure 6 compares payloads with it). 0 when the
    /// transport has no such notion (kernel UDP, in-process): no packet
    /// counts as inlined. The batching layer counts the packets within it
    /// ([`batch::BatchStats::inline_packets`]).
    fn inline_bytes_max(&self) -> usize {
        0
    }

    /// Takes packets from the front of `packets` at time `now` and queues them
    /// for sending, copying the bytes into buffers of its own (or keeping
    /// references no longer than this call). Returns how many it took, a
    /// prefix of `packets`; fewer than all when congested (the caller keeps
    /// the rest and offers them again later). A packet to a destination the
    /// transport does not know is taken and dropped, as a network would.
    fn tx_burst(&mut self, now: Nanos, packets: &[TxPacket<'_>]) -> usize;

    /// The source of this transport's own packet buffers, for the batching
    /// layer to fill in place ([`txbuf`]'s reserve/commit path); `None`
    /// (the default) for a transport that copies what it is given.
    fn tx_lender(&self) -> Option<&'static dyn TxLender> {
        None
    }

    /// As [`Transport::tx_burst`] (at most [`TX_BURST_MAX`] packets are
    /// looked at), for packets in [`PacketBuf`]s: a transport takes one it
    /// lent by reference (the caller keeps its own; neither writes the
    /// bytes until the other lets go) and copies any other. The default
    /// copies every packet through [`Transport::tx_burst`].
    fn tx_commit(&mut self, now: Nanos, packets: &[TxCommit<'_>]) -> usize {
        let n = packets.len().min(TX_BURST_MAX);
        let mut burst = [TxPacket { dst: 0, bytes: &[] }; TX_BURST_MAX];
        for (slot, p) in burst.iter_mut().zip(&packets[..n]) {
            *slot = TxPacket {
                dst: p.dst,
                bytes: p.buf,
            };
        }
        self.tx_burst(now, &burst[..n])
    }

    /// Puts every packet queued by [`Transport::tx_burst`] on the wire
    /// (end of an iteration).
    fn tx_flush(&mut self, now: Nanos);

    /// Lends up to `max` received packets, one at a time and oldest first, to
    /// `on_packet`; each borrow lasts only for its call. Returns how many.
    fn rx_burst(&mut self, now: Nanos, max: usize, on_packet: &mut dyn FnMut(&[u8])) -> usize;

    /// Sends node `node`'s packets to `addr` from now on (its data address:
    /// IP and port) and takes packets from `addr` as `node`'s; packets from
    /// its former address are dropped and counted from then on
    /// ([`PeerAddressStats::stale_address_drops`]). Packets already queued
    /// for `node` go to `addr`. Call it from the thread that polls the
    /// transport. Returns whether the address changed (`false`: `node`
    /// already had `addr`). May allocate: a configuration change, not the
    /// hot path.
    ///
    /// # Errors
    /// [`PeerAddressError::Unsupported`] for a transport without addresses
    /// (the default); otherwise an unknown node, an address of another
    /// family, or one another node has. Nothing changes on an error.
    fn set_peer_address(
        &mut self,
        node: NodeId,
        addr: SocketAddr,
    ) -> Result<bool, PeerAddressError> {
        let _ = (node, addr);
        Err(PeerAddressError::Unsupported)
    }

    /// Counters of [`Transport::set_peer_address`] and of the packets from
    /// former addresses (all 0 for a transport without addresses).
    fn peer_address_stats(&self) -> PeerAddressStats {
        PeerAddressStats::default()
    }
}

/// Most packets offered to [`Transport::tx_burst`] in one call by
/// [`send_ready`].
pub const TX_BURST_MAX: usize = 32;

/// Offers the packets in `ready` to `transport` in bursts of at most
/// [`TX_BURST_MAX`], removing (and handing to `recycle`) each one taken;
/// stops at the first burst the transport does not take whole. Returns how
/// many were taken.
pub fn send_ready(
    transport: &mut dyn Transport,
    now: Nanos,
    ready: &mut std::collections::VecDeque<OutPacket>,
    mut recycle: impl FnMut(Vec<u8>),
) -> usize {
    let mut sent = 0;
    while !ready.is_empty() {
        let n = ready.len().min(TX_BURST_MAX);
        let mut burst = [TxPacket { dst: 0, bytes: &[] }; TX_BURST_MAX];
        for (slot, p) in burst.iter_mut().zip(ready.iter()) {
            *slot = TxPacket {
                dst: p.dst,
                bytes: &p.bytes,
            };
        }
        let took = transport.tx_burst(now, &burst[..n]);
        for p in ready.drain(..took) {
            recycle(p.bytes);
        }
        sent += took;
        if took < n {
            break;
        }
    }
    sent
}
