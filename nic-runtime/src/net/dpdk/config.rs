//! Configuration and errors of the DPDK transport (its bounds are in
//! [`super::limits`], its counters in [`super::stats`]).

use super::eal::EalError;
use super::frame::{MacAddr, FRAME_HEADER_BYTES};
use super::limits::*;
use std::net::{Ipv4Addr, SocketAddrV4};

/// An mbuf's buffer after its headroom unless the MTU needs more (DPDK's
/// `RTE_MBUF_DEFAULT_DATAROOM`).
const MBUF_BUFFER_BYTES: usize = 2048;

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
