//! Configuration, bounds, errors and counters of the DPDK transport.

use super::eal::EalError;
use super::frame::{MacAddr, RxDrop, FRAME_HEADER_BYTES};
use crate::placement::NODES_MAX;
use splitkv_layout::wire::{MSG_HEADER_BYTES, PACKET_BYTES_MAX, PACKET_HEADER_BYTES};
use std::net::{Ipv4Addr, SocketAddrV4};

/// Default packet size: the UDP payload of a standard 1500-byte Ethernet
/// frame (1500 − 20 B IPv4 − 8 B UDP), as on kernel UDP.
pub const DPDK_MTU_DEFAULT: usize = 1500 - 20 - 8;
/// Smallest packet size accepted: one packet header and one message header
/// with a 36-byte body (as on kernel UDP).
pub const DPDK_MTU_MIN: usize = PACKET_HEADER_BYTES + MSG_HEADER_BYTES + 36;
/// Largest packet size accepted: the UDP payload of a 9000-byte jumbo frame,
/// and no more than a splitkv packet.
pub const DPDK_MTU_MAX: usize = if PACKET_BYTES_MAX < 9000 - 28 {
    PACKET_BYTES_MAX
} else {
    9000 - 28
};
/// An mbuf's buffer after its headroom unless the MTU needs more (DPDK's
/// `RTE_MBUF_DEFAULT_DATAROOM`).
const MBUF_BUFFER_BYTES: usize = 2048;
/// Most packets one `rte_eth_rx_burst` or `rte_eth_tx_burst` call moves:
/// the bursts the batching layer offers ([`TX_BURST_MAX`](crate::net::TX_BURST_MAX)).
pub const DPDK_BURST_MAX: usize = crate::net::TX_BURST_MAX;
/// Packets `tx_burst` queues (in mbufs) before `tx_flush` hands them to the
/// port; when all are queued `tx_burst` takes fewer.
pub const DPDK_TX_QUEUED_MAX: usize = 1024;
/// Default mbufs in a transport's pool (2^q − 1 suits DPDK's ring pool).
pub const DPDK_MBUFS_DEFAULT: u32 = 4095;
/// Fewest mbufs in a pool: the queued sends, a receive burst and some room
/// for the receive descriptors.
pub const DPDK_MBUFS_MIN: u32 = (DPDK_TX_QUEUED_MAX + 2 * DPDK_BURST_MAX) as u32 + 1;
/// Most mbufs in a pool.
pub const DPDK_MBUFS_MAX: u32 = 1 << 20;
/// Default RX and TX descriptors (the driver may adjust them).
pub const DPDK_DESCRIPTORS_DEFAULT: u16 = 1024;
/// Most RX or TX descriptors asked for.
pub const DPDK_DESCRIPTORS_MAX: u16 = 1 << 14;
/// Most configured peers (the cluster's node bound).
pub const DPDK_PEERS_MAX: usize = NODES_MAX;
/// Most IPv4 → MAC entries beyond the peers' (machines that may replace a
/// node; [`DpdkTransport::set_neighbour`](super::DpdkTransport::set_neighbour)).
pub const DPDK_NEIGHBOURS_MAX: usize = 4 * NODES_MAX;
/// Former addresses of re-pointed peers remembered (the oldest is forgotten
/// first; frames from a forgotten one count as strangers).
pub const DPDK_FORMER_ADDRESSES_MAX: usize = NODES_MAX;
/// Slots of each ring of a [`dpdk_ring_pair`](super::dpdk_ring_pair).
pub const DPDK_RING_SLOTS: u32 = 4096;

/// A node's data address on the DPDK transport: the MAC its frames go to
/// and its IPv4 address and UDP port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DpdkPeer {
    /// Ethernet address.
    pub mac: MacAddr,
    /// IPv4 address and UDP port.
    pub addr: SocketAddrV4,
}

/// How to build a [`DpdkTransport`](super::DpdkTransport).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpdkConfig {
    /// The ethdev port: a `--vdev` name (`net_memif0`), a PCI address, or a
    /// name [`dpdk_ring_pair`](super::dpdk_ring_pair) returned.
    pub device: String,
    /// This endpoint's IPv4 address and UDP port (port ≠ 0).
    pub local: SocketAddrV4,
    /// This endpoint's MAC (source of its frames, and what it accepts
    /// besides broadcast); `None`: the port's own. A MAC other than the
    /// port's must be one the port receives (virtual devices receive every
    /// frame).
    pub mac: Option<MacAddr>,
    /// Every node's address, indexed by [`NodeId`](splitkv_layout::wire::NodeId),
    /// this node's own entry included; at most [`DPDK_PEERS_MAX`], no two
    /// with one IPv4 address and port.
    pub peers: Vec<DpdkPeer>,
    /// Largest packet in bytes (UDP payload),
    /// [`DPDK_MTU_MIN`]..=[`DPDK_MTU_MAX`].
    pub mtu: usize,
    /// Mbufs in the transport's pool, [`DPDK_MBUFS_MIN`]..=[`DPDK_MBUFS_MAX`].
    pub mbufs: u32,
    /// RX descriptors asked for, 1..=[`DPDK_DESCRIPTORS_MAX`].
    pub rx_descriptors: u16,
    /// TX descriptors asked for, 1..=[`DPDK_DESCRIPTORS_MAX`].
    pub tx_descriptors: u16,
}

impl DpdkConfig {
    /// A configuration with the defaults for port `device` at `local`, with
    /// `peers` (see the fields).
    pub fn new(device: impl Into<String>, local: SocketAddrV4, peers: Vec<DpdkPeer>) -> DpdkConfig {
        DpdkConfig {
            device: device.into(),
            local,
            mac: None,
            peers,
            mtu: DPDK_MTU_DEFAULT,
            mbufs: DPDK_MBUFS_DEFAULT,
            rx_descriptors: DPDK_DESCRIPTORS_DEFAULT,
            tx_descriptors: DPDK_DESCRIPTORS_DEFAULT,
        }
    }

    /// The same configuration with this endpoint's MAC set.
    pub fn with_mac(mut self, mac: MacAddr) -> DpdkConfig {
        self.mac = Some(mac);
        self
    }

    /// The same configuration with packets of at most `mtu` bytes.
    pub fn with_mtu(mut self, mtu: usize) -> DpdkConfig {
        self.mtu = mtu;
        self
    }

    /// The mbuf data room of this configuration's pool: headroom, then
    /// DPDK's default 2 KiB buffer or, for a larger MTU, the frame headers
    /// and one packet of MTU bytes.
    pub(super) fn data_room_bytes(&self) -> usize {
        dpdk_sys::RTE_PKTMBUF_HEADROOM as usize
            + MBUF_BUFFER_BYTES.max(FRAME_HEADER_BYTES + self.mtu)
    }

    /// Checks sizes and peers.
    pub(super) fn check(&self) -> Result<(), DpdkError> {
        if !(DPDK_MTU_MIN..=DPDK_MTU_MAX).contains(&self.mtu) {
            return Err(DpdkError::BadMtu {
                mtu: self.mtu,
                min: DPDK_MTU_MIN,
                max: DPDK_MTU_MAX,
            });
        }
        if !(DPDK_MBUFS_MIN..=DPDK_MBUFS_MAX).contains(&self.mbufs) {
            return Err(DpdkError::BadMbufs {
                mbufs: self.mbufs,
                min: DPDK_MBUFS_MIN,
                max: DPDK_MBUFS_MAX,
            });
        }
        for (what, n) in [("RX", self.rx_descriptors), ("TX", self.tx_descriptors)] {
            if n == 0 || n > DPDK_DESCRIPTORS_MAX {
                return Err(DpdkError::BadDescriptors {
                    what,
                    descriptors: n,
                    max: DPDK_DESCRIPTORS_MAX,
                });
            }
        }
        if self.local.port() == 0 {
            return Err(DpdkError::NoLocalPort { local: self.local });
        }
        check_peers(&self.peers)
    }
}

/// Checks a peer list: bound and duplicates.
pub(super) fn check_peers(peers: &[DpdkPeer]) -> Result<(), DpdkError> {
    if peers.len() > DPDK_PEERS_MAX {
        return Err(DpdkError::TooManyPeers {
            peers: peers.len(),
            max: DPDK_PEERS_MAX,
        });
    }
    for (i, p) in peers.iter().enumerate() {
        if let Some(first) = peers[..i].iter().position(|q| q.addr == p.addr) {
            return Err(DpdkError::DuplicatePeer {
                addr: p.addr,
                first,
                second: i,
            });
        }
    }
    Ok(())
}

/// Why a DPDK transport could not be built or reconfigured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DpdkError {
    /// EAL could not be initialised.
    #[error(transparent)]
    Eal(#[from] EalError),
    /// No ethdev port has the configured name.
    #[error("no DPDK port named {device:?} ({available} ports available; is the device given to EAL, e.g. --vdev={device}?)")]
    NoDevice {
        /// The name asked for.
        device: String,
        /// Ports EAL found.
        available: u16,
    },
    /// The MTU is outside the accepted range.
    #[error("DPDK MTU of {mtu} B is outside {min}..={max} B")]
    BadMtu {
        /// The MTU asked for.
        mtu: usize,
        /// [`DPDK_MTU_MIN`].
        min: usize,
        /// [`DPDK_MTU_MAX`].
        max: usize,
    },
    /// The pool size is outside the accepted range.
    #[error("{mbufs} mbufs is outside {min}..={max}")]
    BadMbufs {
        /// Mbufs asked for.
        mbufs: u32,
        /// [`DPDK_MBUFS_MIN`].
        min: u32,
        /// [`DPDK_MBUFS_MAX`].
        max: u32,
    },
    /// A descriptor count of zero or above [`DPDK_DESCRIPTORS_MAX`].
    #[error("{descriptors} {what} descriptors is outside 1..={max}")]
    BadDescriptors {
        /// `RX` or `TX`.
        what: &'static str,
        /// Descriptors asked for.
        descriptors: u16,
        /// [`DPDK_DESCRIPTORS_MAX`].
        max: u16,
    },
    /// The local address has port 0 (nothing picks a port on DPDK).
    #[error("DPDK local address {local} needs a UDP port")]
    NoLocalPort {
        /// The address given.
        local: SocketAddrV4,
    },
    /// More peers than the cluster bound.
    #[error("{peers} DPDK peers configured, at most {max}")]
    TooManyPeers {
        /// Peers given.
        peers: usize,
        /// [`DPDK_PEERS_MAX`].
        max: usize,
    },
    /// Two peers with the same address.
    #[error("DPDK peers {first} and {second} share the address {addr}")]
    DuplicatePeer {
        /// The address.
        addr: SocketAddrV4,
        /// The first node with it.
        first: usize,
        /// The second node with it.
        second: usize,
    },
    /// The neighbour table is full.
    #[error("{max} DPDK neighbours known already; {ip} not added")]
    TooManyNeighbours {
        /// The address not added.
        ip: Ipv4Addr,
        /// [`DPDK_NEIGHBOURS_MAX`].
        max: usize,
    },
    /// A DPDK call failed while setting up the port, pool or rings.
    #[error("DPDK {step} failed for {device:?}: {message} (errno {errno})")]
    Setup {
        /// The device being set up.
        device: String,
        /// The DPDK call.
        step: &'static str,
        /// Its errno.
        errno: i32,
        /// DPDK's text for it.
        message: String,
    },
}

/// Received frames dropped, by [`RxDrop`] reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxDropCounts(pub [u64; RxDrop::COUNT]);

impl RxDropCounts {
    /// Frames dropped for `reason`.
    pub fn get(&self, reason: RxDrop) -> u64 {
        self.0[reason as usize]
    }

    /// Frames dropped for any reason.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    pub(super) fn count(&mut self, reason: RxDrop) {
        self.0[reason as usize] += 1;
    }
}

/// Counters of one DPDK endpoint, since it was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DpdkStats {
    /// Packets the port took for sending.
    pub packets_sent: u64,
    /// splitkv bytes in them (frame headers excluded).
    pub bytes_sent: u64,
    /// Packets lent to the caller.
    pub packets_received: u64,
    /// splitkv bytes in them.
    pub bytes_received: u64,
    /// `rte_eth_tx_burst` calls.
    pub tx_bursts: u64,
    /// `rte_eth_rx_burst` calls.
    pub rx_bursts: u64,
    /// Flushes stopped because the port's TX queue was full (the packets
    /// stayed queued for the next flush).
    pub tx_port_full: u64,
    /// `tx_burst` calls that took fewer packets because the pool had no mbuf.
    pub mempool_empty: u64,
    /// Packets offered for a node with no configured address (dropped).
    pub unknown_destination: u64,
    /// Packets offered that were longer than the MTU (dropped).
    pub oversized: u64,
    /// Frames sent to the broadcast MAC because the destination's MAC is
    /// unknown (a peer re-pointed at an IPv4 address with no neighbour entry).
    pub broadcast_frames: u64,
    /// Peers re-pointed at another address.
    pub peers_repointed: u64,
    /// Received frames dropped, by reason.
    pub rx_dropped: RxDropCounts,
}

/// The port driver's own counters (`rte_eth_stats`): what the device or
/// driver did below the transport, including frames it dropped before the
/// transport saw them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DpdkPortStats {
    /// Frames received.
    pub rx_packets: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Frames dropped on receive because the RX queue was full (the
    /// transport was not polled fast enough).
    pub rx_missed: u64,
    /// Erroneous frames received (bad FCS, ...), dropped by the device.
    pub rx_errors: u64,
    /// Receive buffers the driver could not allocate (the mempool was
    /// empty): frames dropped.
    pub rx_no_mbuf: u64,
    /// Frames the device failed to send.
    pub tx_errors: u64,
}
