//! The kernel UDP transport: one non-blocking datagram socket per node, packets
//! sent with `sendmmsg` and received with `recvmmsg` in batches (the Dnl stack's
//! lossy transport, Dandelion §5; the session layer above makes it reliable).
//!
//! **Buffers belong to the transport.** [`Transport::tx_burst`] copies each
//! packet into one of [`UDP_TX_BUFFERS`] buffers of MTU bytes allocated when
//! the transport is bound, and [`Transport::tx_flush`] hands them to the kernel
//! in batches of up to [`UDP_BATCH_MAX`]; [`Transport::rx_burst`] receives into
//! [`UDP_BATCH_MAX`] preallocated buffers and lends each datagram to the
//! callback. Nothing is allocated per packet. A DPDK mbuf pool or registered
//! RDMA buffers back the kernel-bypass transports the same way.
//!
//! What the network does, this transport does too: a packet for a node with
//! no address, or longer than the MTU, is taken and dropped; a datagram the
//! kernel refuses (other than for a full socket) is dropped; received datagrams
//! from addresses that are not configured peers ("strangers") and datagrams
//! longer than the MTU are dropped. All are counted in [`UdpStats`]. A full
//! socket (`EAGAIN`/`ENOBUFS`) is congestion: the flush stops and the packets
//! stay queued for the next one; when the buffers are all queued, `tx_burst`
//! takes fewer packets.
//!
//! The socket is created and bound with `std::net::UdpSocket`; the batched
//! calls and socket options go through `libc` (module `sys`, where every
//! `unsafe` block of the transport lives).

mod config;
mod sys;
mod tx;

pub use config::{
    UdpConfig, UdpError, UdpStats, UDP_MTU_DEFAULT, UDP_MTU_IPV6_DEFAULT, UDP_MTU_MAX, UDP_MTU_MIN,
    UDP_PEERS_MAX, UDP_SOCKET_BYTES_MAX, UDP_SOCKET_RECV_BYTES_DEFAULT,
    UDP_SOCKET_SEND_BYTES_DEFAULT,
};

use super::{PeerAddressError, PeerAddressStats, Transport, TxPacket};
use crate::Nanos;
use hashbrown::HashMap;
use splitkv_layout::wire::NodeId;
use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use sys::{RawAddr, RecvMeta, RecvSlots, RX_CONTROL_WORDS};
use tx::TxRing;

/// Packet buffers on the send side: packets queued by `tx_burst` and not yet
/// taken by the kernel. When all are in use `tx_burst` takes fewer packets.
pub const UDP_TX_BUFFERS: usize = 1024;
/// Most datagrams per `sendmmsg` or `recvmmsg` call (and receive buffers).
pub const UDP_BATCH_MAX: usize = sys::SYSCALL_BATCH_MAX;
/// Former addresses of re-pointed peers remembered (the oldest is
/// forgotten first; datagrams from a forgotten one count as strangers).
pub const UDP_FORMER_ADDRESSES_MAX: usize = UDP_PEERS_MAX;

/// One node's UDP endpoint. See the module documentation.
pub struct UdpTransport {
    socket: UdpSocket,
    local: SocketAddr,
    mtu: usize,
    peers: Vec<RawAddr>,
    peer_ids: HashMap<SocketAddr, NodeId>,
    /// Addresses re-pointed peers had before, oldest first (at most
    /// [`UDP_FORMER_ADDRESSES_MAX`]).
    former: VecDeque<SocketAddr>,
    tx: TxRing,
    rx_bufs: Box<[u8]>,
    rx_names: Box<[libc::sockaddr_storage]>,
    rx_controls: Box<[[u64; RX_CONTROL_WORDS]]>,
    rx_meta: Box<[RecvMeta]>,
    send_bytes: usize,
    recv_bytes: usize,
    stats: UdpStats,
}

impl UdpTransport {
    /// Binds a non-blocking socket to `cfg.local`, sets its buffer sizes and
    /// allocates every packet buffer.
    ///
    /// # Errors
    /// [`UdpError::BadMtu`], [`UdpError::BadBufferSize`],
    /// [`UdpError::TooManyPeers`], [`UdpError::FamilyMismatch`],
    /// [`UdpError::DuplicatePeer`] for a bad configuration;
    /// [`UdpError::Bind`], [`UdpError::BufferRefused`], [`UdpError::Setup`]
    /// when the system refuses.
    pub fn bind(cfg: UdpConfig) -> Result<UdpTransport, UdpError> {
        config::check_sizes(&cfg)?;
        config::check_peers(cfg.local, &cfg.peers)?;
        let socket = UdpSocket::bind(cfg.local).map_err(|source| UdpError::Bind {
            addr: cfg.local,
            source,
        })?;
        let setup = |what| move |source| UdpError::Setup { what, source };
        socket
            .set_nonblocking(true)
            .map_err(setup("non-blocking mode"))?;
        let local = socket.local_addr().map_err(setup("local address"))?;
        let fd = socket.as_raw_fd();
        for (option, name, bytes) in [
            ("SO_SNDBUF", libc::SO_SNDBUF, cfg.socket_send_bytes),
            ("SO_RCVBUF", libc::SO_RCVBUF, cfg.socket_recv_bytes),
        ] {
            sys::set_int(fd, libc::SOL_SOCKET, name, bytes as i32).map_err(|source| {
                UdpError::BufferRefused {
                    option,
                    bytes,
                    source,
                }
            })?;
        }
        sys::set_int(fd, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1).map_err(setup("SO_RXQ_OVFL"))?;
        let send_bytes = sys::get_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF)
            .map_err(setup("reading SO_SNDBUF"))? as usize;
        let recv_bytes = sys::get_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF)
            .map_err(setup("reading SO_RCVBUF"))? as usize;
        let mut t = UdpTransport {
            socket,
            local,
            mtu: cfg.mtu,
            peers: Vec::new(),
            peer_ids: HashMap::new(),
            former: VecDeque::with_capacity(UDP_FORMER_ADDRESSES_MAX),
            tx: TxRing::new(UDP_TX_BUFFERS, cfg.mtu),
            rx_bufs: vec![0u8; UDP_BATCH_MAX * cfg.mtu].into_boxed_slice(),
            rx_names: vec![sys::empty_storage(); UDP_BATCH_MAX].into_boxed_slice(),
            rx_controls: vec![[0u64; RX_CONTROL_WORDS]; UDP_BATCH_MAX].into_boxed_slice(),
            rx_meta: vec![RecvMeta::default(); UDP_BATCH_MAX].into_boxed_slice(),
            send_bytes,
            recv_bytes,
            stats: UdpStats::default(),
        };
        t.set_peers(&cfg.peers)?;
        Ok(t)
    }

    /// Replaces the peer list (index = [`NodeId`], this node's own entry
    /// included), e.g. once every endpoint of a test bound to port 0 knows its
    /// address. Queued packets for a node that no longer has an address are
    /// dropped at the next flush. Allocates: a set-up call, not for the hot path.
    ///
    /// # Errors
    /// [`UdpError::TooManyPeers`], [`UdpError::FamilyMismatch`],
    /// [`UdpError::DuplicatePeer`]; the old list stays in force.
    pub fn set_peers(&mut self, peers: &[SocketAddr]) -> Result<(), UdpError> {
        config::check_peers(self.local, peers)?;
        self.peers = peers.iter().map(|&a| RawAddr::new(a)).collect();
        self.peer_ids = peers
            .iter()
            .enumerate()
            .map(|(i, &a)| (normalize(a), i as NodeId))
            .collect();
        let ids = &self.peer_ids;
        self.former.retain(|a| !ids.contains_key(a));
        Ok(())
    }

    /// Remembers `addr` as a former peer address, forgetting the oldest
    /// beyond [`UDP_FORMER_ADDRESSES_MAX`].
    fn remember_former(&mut self, addr: SocketAddr) {
        if self.former.len() == UDP_FORMER_ADDRESSES_MAX {
            self.former.pop_front();
        }
        self.former.push_back(addr);
    }

    /// The address the socket is bound to (the port the OS chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The socket buffer sizes in force, `(send, receive)` in bytes, as the
    /// kernel reports them (it doubles requests and clamps them to
    /// `net.core.wmem_max` / `rmem_max`).
    pub fn socket_bytes(&self) -> (usize, usize) {
        (self.send_bytes, self.recv_bytes)
    }

    /// Packets queued by `tx_burst` that the kernel has not taken yet.
    pub fn tx_queued(&self) -> usize {
        self.tx.len()
    }

    /// Counters so far.
    pub fn stats(&self) -> UdpStats {
        self.stats
    }

    /// Drops queued packets whose destination has no address, oldest first,
    /// and returns how many of the next (≤ [`UDP_BATCH_MAX`]) have one.
    fn sendable_prefix(&mut self) -> usize {
        while self.tx.len() > 0 && self.tx.get(0).0 as usize >= self.peers.len() {
            self.tx.pop(1);
            self.stats.unknown_destination += 1;
        }
        let want = self.tx.len().min(UDP_BATCH_MAX);
        (0..want)
            .find(|&i| self.tx.get(i).0 as usize >= self.peers.len())
            .unwrap_or(want)
    }

    /// Lends received datagram `i` of the last `recvmmsg` to `on_packet` if it
    /// is whole and from a peer; counts it either way. Returns whether it was lent.
    fn deliver(&mut self, i: usize, on_packet: &mut dyn FnMut(&[u8])) -> bool {
        let meta = self.rx_meta[i];
        if let Some(d) = meta.kernel_drops {
            self.stats.kernel_rx_drops = d as u64;
        }
        if meta.truncated {
            self.stats.truncated += 1;
            return false;
        }
        let from = sys::parse_addr(&self.rx_names[i], meta.name_len).map(normalize);
        match from {
            Some(a) if self.peer_ids.contains_key(&a) => {}
            Some(a) if self.former.contains(&a) => {
                self.stats.stale_address += 1;
                return false;
            }
            _ => {
                self.stats.strangers += 1;
                return false;
            }
        }
        let start = i * self.mtu;
        self.stats.packets_received += 1;
        self.stats.bytes_received += meta.len as u64;
        on_packet(&self.rx_bufs[start..start + meta.len]);
        true
    }
}

impl std::fmt::Debug for UdpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpTransport")
            .field("local", &self.local)
            .field("mtu", &self.mtu)
            .field("peers", &self.peers)
            .field("tx_queued", &self.tx.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// A peer's identity: address and port (and IPv6 scope), no flow label.
fn normalize(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V6(mut v6) => {
            v6.set_flowinfo(0);
            SocketAddr::V6(v6)
        }
        v4 => v4,
    }
}

impl Transport for UdpTransport {
    fn mtu(&self) -> usize {
        self.mtu
    }

    fn is_lossy(&self) -> bool {
        true
    }

    fn tx_burst(&mut self, _now: Nanos, packets: &[TxPacket<'_>]) -> usize {
        for (i, p) in packets.iter().enumerate() {
            if p.dst as usize >= self.peers.len() {
                self.stats.unknown_destination += 1;
            } else if p.bytes.len() > self.mtu {
                self.stats.oversized += 1;
            } else if !self.tx.push(p.dst, p.bytes) {
                return i; // every buffer is queued: the caller keeps the rest
            }
        }
        packets.len()
    }

    fn tx_flush(&mut self, _now: Nanos) {
        let fd = self.socket.as_raw_fd();
        // Each round sends, drops or stops, so this ends within `UDP_TX_BUFFERS` rounds.
        while self.tx.len() > 0 {
            let n = self.sendable_prefix();
            if n == 0 {
                continue;
            }
            let (tx, peers) = (&self.tx, &self.peers);
            let result = sys::send_batch(fd, n, |i| {
                let (dst, bytes) = tx.get(i);
                (&peers[dst as usize], bytes)
            });
            self.stats.sendmmsg_calls += 1;
            if !tx::settle(&mut self.tx, &mut self.stats, result) {
                break;
            }
        }
    }

    fn set_peer_address(
        &mut self,
        node: NodeId,
        addr: SocketAddr,
    ) -> Result<bool, PeerAddressError> {
        let peers = self.peers.len();
        if node as usize >= peers {
            return Err(PeerAddressError::UnknownNode { node, peers });
        }
        if addr.is_ipv4() != self.local.is_ipv4() {
            let local = self.local;
            return Err(PeerAddressError::FamilyMismatch { addr, local });
        }
        let key = normalize(addr);
        match self.peer_ids.get(&key) {
            Some(&n) if n == node => return Ok(false),
            Some(&other) => return Err(PeerAddressError::Taken { addr, other }),
            None => {}
        }
        let old = self
            .peer_ids
            .iter()
            .find_map(|(&a, &n)| (n == node).then_some(a));
        if let Some(old) = old {
            self.peer_ids.remove(&old);
            self.remember_former(old);
        }
        self.former.retain(|&a| a != key);
        self.peer_ids.insert(key, node);
        self.peers[node as usize] = RawAddr::new(addr);
        self.stats.peers_repointed += 1;
        Ok(true)
    }

    fn peer_address_stats(&self) -> PeerAddressStats {
        PeerAddressStats {
            repointed: self.stats.peers_repointed,
            stale_address_drops: self.stats.stale_address,
        }
    }

    fn rx_burst(&mut self, _now: Nanos, max: usize, on_packet: &mut dyn FnMut(&[u8])) -> usize {
        let fd = self.socket.as_raw_fd();
        let (mut read, mut lent) = (0, 0);
        // Strangers and truncated datagrams count against `max` too, so a flood
        // of them cannot keep this call busy.
        while read < max {
            let want = (max - read).min(UDP_BATCH_MAX);
            let mut slots = RecvSlots {
                bufs: &mut self.rx_bufs,
                buf_bytes: self.mtu,
                names: &mut self.rx_names,
                controls: &mut self.rx_controls,
                meta: &mut self.rx_meta,
            };
            let got = match sys::recv_batch(fd, &mut slots, want) {
                Ok(got) => got,
                Err(_) => {
                    self.stats.recv_errors += 1;
                    break;
                }
            };
            self.stats.recvmmsg_calls += 1;
            for i in 0..got {
                lent += self.deliver(i, on_packet) as usize;
            }
            read += got;
            if got < want {
                break;
            }
        }
        lent
    }
}

/// Binds `nodes` endpoints on `127.0.0.1` (ports chosen by the OS) with
/// packets of at most `mtu` bytes and gives each the others' addresses;
/// endpoint `i` belongs to node `i`. For tests and benchmarks.
///
/// # Errors
/// As [`UdpTransport::bind`].
pub fn udp_loopback_network(nodes: usize, mtu: usize) -> Result<Vec<UdpTransport>, UdpError> {
    let mut ends = (0..nodes)
        .map(|_| UdpTransport::bind(UdpConfig::loopback().with_mtu(mtu)))
        .collect::<Result<Vec<_>, _>>()?;
    let addrs: Vec<SocketAddr> = ends.iter().map(|e| e.local_addr()).collect();
    for e in &mut ends {
        e.set_peers(&addrs)?;
    }
    Ok(ends)
}
