//! Configuration, errors and counters of the UDP transport.

use crate::placement::NODES_MAX;
use splitkv_layout::wire::{MSG_HEADER_BYTES, PACKET_BYTES_MAX, PACKET_HEADER_BYTES};
use std::net::SocketAddr;

/// Default packet size over IPv4: the UDP payload of a standard 1500-byte
/// Ethernet frame (1500 − 20 B IPv4 header − 8 B UDP header).
pub const UDP_MTU_DEFAULT: usize = 1500 - 20 - 8;
/// Default packet size over IPv6: 1500 − 40 B IPv6 header − 8 B UDP header.
pub const UDP_MTU_IPV6_DEFAULT: usize = 1500 - 40 - 8;
/// Smallest packet size accepted: one packet header and one message header
/// with a 36-byte body.
pub const UDP_MTU_MIN: usize = PACKET_HEADER_BYTES + MSG_HEADER_BYTES + 36;
/// Largest packet size accepted (jumbo frames by configuration).
pub const UDP_MTU_MAX: usize = PACKET_BYTES_MAX;
/// Most configured peers (the cluster's node bound).
pub const UDP_PEERS_MAX: usize = NODES_MAX;
/// Default `SO_SNDBUF` request, bytes (the kernel clamps it to
/// `net.core.wmem_max` and doubles it for its bookkeeping).
pub const UDP_SOCKET_SEND_BYTES_DEFAULT: usize = 4 << 20;
/// Default `SO_RCVBUF` request, bytes (clamped to `net.core.rmem_max`, doubled).
pub const UDP_SOCKET_RECV_BYTES_DEFAULT: usize = 4 << 20;
/// Largest socket buffer request, bytes (the kernel takes a C `int` and doubles it).
pub const UDP_SOCKET_BYTES_MAX: usize = (i32::MAX / 2) as usize;

/// How to build a [`UdpTransport`](super::UdpTransport).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpConfig {
    /// Address to bind (port 0: the OS picks one; see `local_addr`).
    pub local: SocketAddr,
    /// Every node's data address, indexed by [`NodeId`](splitkv_layout::wire::NodeId),
    /// this node's own entry included; at most [`UDP_PEERS_MAX`], all of the
    /// local address's family, no two equal.
    pub peers: Vec<SocketAddr>,
    /// Largest packet in bytes, [`UDP_MTU_MIN`]..=[`UDP_MTU_MAX`].
    pub mtu: usize,
    /// `SO_SNDBUF` request in bytes, 1..=[`UDP_SOCKET_BYTES_MAX`].
    pub socket_send_bytes: usize,
    /// `SO_RCVBUF` request in bytes, 1..=[`UDP_SOCKET_BYTES_MAX`].
    pub socket_recv_bytes: usize,
}

impl UdpConfig {
    /// A configuration with the defaults: the MTU of a standard Ethernet frame
    /// for the local address's family ([`UDP_MTU_DEFAULT`] or
    /// [`UDP_MTU_IPV6_DEFAULT`]) and the default socket buffer sizes.
    pub fn new(local: SocketAddr, peers: Vec<SocketAddr>) -> UdpConfig {
        UdpConfig {
            local,
            peers,
            mtu: if local.is_ipv4() {
                UDP_MTU_DEFAULT
            } else {
                UDP_MTU_IPV6_DEFAULT
            },
            socket_send_bytes: UDP_SOCKET_SEND_BYTES_DEFAULT,
            socket_recv_bytes: UDP_SOCKET_RECV_BYTES_DEFAULT,
        }
    }

    /// [`UdpConfig::new`] on `127.0.0.1` with a port chosen by the OS and no
    /// peers yet (set them with `UdpTransport::set_peers` once every endpoint
    /// is bound).
    pub fn loopback() -> UdpConfig {
        UdpConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)), Vec::new())
    }

    /// The same configuration with packets of at most `mtu` bytes.
    pub fn with_mtu(mut self, mtu: usize) -> UdpConfig {
        self.mtu = mtu;
        self
    }

    /// The same configuration with the given socket buffer requests, bytes.
    pub fn with_socket_bytes(mut self, send_bytes: usize, recv_bytes: usize) -> UdpConfig {
        self.socket_send_bytes = send_bytes;
        self.socket_recv_bytes = recv_bytes;
        self
    }
}

/// Why a UDP transport could not be built or reconfigured.
#[derive(Debug, thiserror::Error)]
pub enum UdpError {
    /// The socket could not be bound to the address.
    #[error("cannot bind UDP socket to {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The MTU is outside the accepted range.
    #[error("UDP MTU of {mtu} B is outside {min}..={max} B")]
    BadMtu {
        /// The MTU asked for.
        mtu: usize,
        /// [`UDP_MTU_MIN`].
        min: usize,
        /// [`UDP_MTU_MAX`].
        max: usize,
    },
    /// More peers than the cluster bound.
    #[error("{peers} UDP peers configured, at most {max}")]
    TooManyPeers {
        /// Peers given.
        peers: usize,
        /// [`UDP_PEERS_MAX`].
        max: usize,
    },
    /// A peer of another address family than the local address.
    #[error("peer {peer} is not of the address family of the local address {local}")]
    FamilyMismatch {
        /// The local address.
        local: SocketAddr,
        /// The peer's address.
        peer: SocketAddr,
    },
    /// Two peers with the same address (received packets could not be told apart).
    #[error("UDP peers {first} and {second} share the address {addr}")]
    DuplicatePeer {
        /// The address.
        addr: SocketAddr,
        /// The first node with it.
        first: usize,
        /// The second node with it.
        second: usize,
    },
    /// A socket buffer size of zero or above [`UDP_SOCKET_BYTES_MAX`].
    #[error("{option} of {bytes} B is outside 1..={max} B")]
    BadBufferSize {
        /// `SO_SNDBUF` or `SO_RCVBUF`.
        option: &'static str,
        /// The size asked for.
        bytes: usize,
        /// [`UDP_SOCKET_BYTES_MAX`].
        max: usize,
    },
    /// The kernel refused a socket buffer size.
    #[error("{option} of {bytes} B refused: {source}")]
    BufferRefused {
        /// `SO_SNDBUF` or `SO_RCVBUF`.
        option: &'static str,
        /// The size asked for.
        bytes: usize,
        /// The system's reason.
        source: std::io::Error,
    },
    /// Another socket call failed while setting the socket up.
    #[error("UDP socket setup ({what}) failed: {source}")]
    Setup {
        /// The step that failed.
        what: &'static str,
        /// The system's reason.
        source: std::io::Error,
    },
}

/// Counters of one UDP endpoint, since it was bound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpStats {
    /// Datagrams the kernel accepted for sending.
    pub packets_sent: u64,
    /// Bytes in those datagrams.
    pub bytes_sent: u64,
    /// Datagrams from configured peers lent to the caller.
    pub packets_received: u64,
    /// Bytes in those datagrams.
    pub bytes_received: u64,
    /// `sendmmsg` calls made.
    pub sendmmsg_calls: u64,
    /// `recvmmsg` calls made.
    pub recvmmsg_calls: u64,
    /// Flushes stopped by a full socket (`EAGAIN`, `ENOBUFS`): the packets
    /// stayed queued for the next flush.
    pub congestion_events: u64,
    /// Datagrams the kernel refused for another reason (dropped, as a network would).
    pub send_errors: u64,
    /// `recvmmsg` calls that failed with an error other than "nothing waiting".
    pub recv_errors: u64,
    /// Received datagrams longer than the MTU (dropped).
    pub truncated: u64,
    /// Received datagrams from an address that is not a configured peer
    /// (dropped), former addresses of re-pointed peers excepted.
    pub strangers: u64,
    /// Received datagrams from a former address of a re-pointed peer
    /// (`Transport::set_peer_address`; dropped: an earlier incarnation).
    pub stale_address: u64,
    /// Peers re-pointed at another address.
    pub peers_repointed: u64,
    /// Packets offered for a node with no configured address (dropped).
    pub unknown_destination: u64,
    /// Packets offered that were longer than the MTU (dropped).
    pub oversized: u64,
    /// The kernel's count of datagrams it dropped on this socket because its
    /// receive buffer was full (`SO_RXQ_OVFL`; as of the last datagram received).
    pub kernel_rx_drops: u64,
}

/// Checks `cfg`'s MTU and buffer sizes (peers are checked by [`check_peers`]).
pub(super) fn check_sizes(cfg: &UdpConfig) -> Result<(), UdpError> {
    if !(UDP_MTU_MIN..=UDP_MTU_MAX).contains(&cfg.mtu) {
        return Err(UdpError::BadMtu {
            mtu: cfg.mtu,
            min: UDP_MTU_MIN,
            max: UDP_MTU_MAX,
        });
    }
    for (option, bytes) in [
        ("SO_SNDBUF", cfg.socket_send_bytes),
        ("SO_RCVBUF", cfg.socket_recv_bytes),
    ] {
        if bytes == 0 || bytes > UDP_SOCKET_BYTES_MAX {
            return Err(UdpError::BadBufferSize {
                option,
                bytes,
                max: UDP_SOCKET_BYTES_MAX,
            });
        }
    }
    Ok(())
}

/// Checks a peer list against the local address: bound, family, duplicates.
pub(super) fn check_peers(local: SocketAddr, peers: &[SocketAddr]) -> Result<(), UdpError> {
    if peers.len() > UDP_PEERS_MAX {
        return Err(UdpError::TooManyPeers {
            peers: peers.len(),
            max: UDP_PEERS_MAX,
        });
    }
    for (i, &peer) in peers.iter().enumerate() {
        if peer.is_ipv4() != local.is_ipv4() {
            return Err(UdpError::FamilyMismatch { local, peer });
        }
        if let Some(first) = peers[..i].iter().position(|&p| p == peer) {
            return Err(UdpError::DuplicatePeer {
                addr: peer,
                first,
                second: i,
            });
        }
    }
    Ok(())
}
