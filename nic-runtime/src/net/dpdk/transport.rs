//! The transport itself: [`DpdkTransport`] over one ethdev port, and
//! [`dpdk_ring_pair`] for two ports back to back. See the module
//! documentation of [`super`].

use super::config::{self, DpdkConfig, DpdkError, DpdkPeer};
use super::eal::Eal;
use super::frame::{self, MacAddr, RxDrop};
use super::limits::*;
use super::stats::{DpdkPortStats, DpdkStats};
use super::sys::{self, Mbuf, MbufLender, Mempool, Port, PortSetup, SysError};
use crate::net::{
    PacketBuf, PeerAddressError, PeerAddressStats, Transport, TxCommit, TxLender, TxPacket,
    TX_BURST_MAX,
};
use crate::Nanos;
use frame::FrameEnd;
use splitkv_layout::wire::NodeId;
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

/// One node's DPDK endpoint. See the module documentation.
pub struct DpdkTransport {
    port: Port,
    pool: Mempool,
    /// Lends the pool's mbufs to the batching layer (reserve/commit).
    lender: &'static MbufLender,
    device: String,
    local: FrameEnd,
    mtu: usize,
    peers: Vec<DpdkPeer>,
    /// IPv4 address → MAC of machines that are not (yet) peers.
    neighbours: Vec<(Ipv4Addr, MacAddr)>,
    /// Addresses re-pointed peers had before, oldest first (at most
    /// [`DPDK_FORMER_ADDRESSES_MAX`]).
    former: VecDeque<SocketAddrV4>,
    /// Filled mbufs waiting for `tx_flush` (capacity [`DPDK_TX_QUEUED_MAX`]).
    tx_queue: Vec<Mbuf>,
    /// One receive burst (capacity [`DPDK_BURST_MAX`]), empty between calls.
    rx_mbufs: Vec<Mbuf>,
    stats: DpdkStats,
}

impl DpdkTransport {
    /// Finds `cfg.device`, creates the mempool, sets up one RX and one TX
    /// queue and starts the port.
    ///
    /// # Errors
    /// [`DpdkError::BadMtu`], [`DpdkError::BadMbufs`],
    /// [`DpdkError::BadDescriptors`], [`DpdkError::NoLocalPort`],
    /// [`DpdkError::TooManyPeers`], [`DpdkError::DuplicatePeer`] for a bad
    /// configuration; [`DpdkError::NoDevice`] when no port has the name;
    /// [`DpdkError::Setup`] when DPDK refuses a step (e.g. no memory for
    /// the pool, a port already in use).
    pub fn new(eal: &Eal, cfg: DpdkConfig) -> Result<DpdkTransport, DpdkError> {
        cfg.check()?;
        let device = cfg.device.clone();
        let setup_err = |e: SysError| DpdkError::Setup {
            device: device.clone(),
            step: e.step,
            errno: e.errno,
            message: e.message,
        };
        let id = Port::find(eal, &cfg.device).ok_or_else(|| DpdkError::NoDevice {
            device: cfg.device.clone(),
            available: Port::count(eal),
        })?;
        let data_room = u16::try_from(cfg.data_room_bytes()).expect("bounded by DPDK_MTU_MAX");
        let pool = Mempool::new(eal, cfg.mbufs, data_room, Port::socket(id)).map_err(setup_err)?;
        let mtu_ip = if cfg.mtu > DPDK_MTU_DEFAULT {
            (cfg.mtu + frame::IPV4_HEADER_BYTES + frame::UDP_HEADER_BYTES) as u32
        } else {
            0
        };
        let port = Port::start(
            id,
            PortSetup {
                rx_descriptors: cfg.rx_descriptors,
                tx_descriptors: cfg.tx_descriptors,
                mtu: mtu_ip,
                pool: &pool,
            },
        )
        .map_err(setup_err)?;
        let mac = match cfg.mac {
            Some(m) => m,
            None => port.mac().map_err(setup_err)?,
        };
        let lent_max = cfg.mbufs / 100 * DPDK_LENT_MBUFS_PERCENT;
        let lender = MbufLender::leak(&pool, cfg.mtu, frame::FRAME_HEADER_BYTES, lent_max);
        Ok(DpdkTransport {
            port,
            pool,
            lender,
            device: cfg.device,
            local: FrameEnd {
                mac,
                addr: cfg.local,
            },
            mtu: cfg.mtu,
            peers: cfg.peers,
            neighbours: Vec::with_capacity(DPDK_NEIGHBOURS_MAX),
            former: VecDeque::with_capacity(DPDK_FORMER_ADDRESSES_MAX),
            tx_queue: Vec::with_capacity(DPDK_TX_QUEUED_MAX),
            rx_mbufs: Vec::with_capacity(DPDK_BURST_MAX),
            stats: DpdkStats::default(),
        })
    }

    /// This endpoint's MAC and IPv4 address and port.
    pub fn local(&self) -> DpdkPeer {
        DpdkPeer {
            mac: self.local.mac,
            addr: self.local.addr,
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> DpdkStats {
        DpdkStats {
            lend_refused: self.lender.refused(),
            ..self.stats
        }
    }

    /// Mbufs lent to the batching layer now (references its buffers hold).
    pub fn mbufs_lent(&self) -> u32 {
        self.lender.lent()
    }

    /// The port driver's counters (frames the device or driver dropped
    /// before this transport saw them among them); zeroes when the driver
    /// cannot report them.
    pub fn port_stats(&self) -> DpdkPortStats {
        self.port
            .stats()
            .map(|s| DpdkPortStats {
                rx_packets: s.ipackets,
                tx_packets: s.opackets,
                rx_missed: s.imissed,
                rx_errors: s.ierrors,
                rx_no_mbuf: s.rx_nombuf,
                tx_errors: s.oerrors,
            })
            .unwrap_or_default()
    }

    /// Packets queued by `tx_burst` that the port has not taken yet.
    pub fn tx_queued(&self) -> usize {
        self.tx_queue.len()
    }

    /// Mbufs free in this transport's pool.
    pub fn mbufs_available(&self) -> u32 {
        self.pool.available()
    }

    /// Replaces the peer list (index = [`NodeId`], this node's own entry
    /// included). Allocates: a set-up call, not for the hot path.
    ///
    /// # Errors
    /// [`DpdkError::TooManyPeers`], [`DpdkError::DuplicatePeer`]; the old
    /// list stays in force.
    pub fn set_peers(&mut self, peers: &[DpdkPeer]) -> Result<(), DpdkError> {
        config::check_peers(peers)?;
        self.peers = peers.to_vec();
        let peers = &self.peers;
        self.former.retain(|a| !peers.iter().any(|p| p.addr == *a));
        Ok(())
    }

    /// Records that IPv4 address `ip` is at `mac` (a machine that may
    /// replace a node; [`Transport::set_peer_address`] looks it up) and
    /// re-points every peer at `ip` to `mac`.
    ///
    /// # Errors
    /// [`DpdkError::TooManyNeighbours`] when [`DPDK_NEIGHBOURS_MAX`]
    /// other addresses are known; nothing changes.
    pub fn set_neighbour(&mut self, ip: Ipv4Addr, mac: MacAddr) -> Result<(), DpdkError> {
        let full = self.neighbours.len() == DPDK_NEIGHBOURS_MAX;
        match self.neighbours.iter_mut().find(|(a, _)| *a == ip) {
            Some(entry) => entry.1 = mac,
            None if full => {
                return Err(DpdkError::TooManyNeighbours {
                    ip,
                    max: DPDK_NEIGHBOURS_MAX,
                })
            }
            None => self.neighbours.push((ip, mac)),
        }
        for p in self.peers.iter_mut().filter(|p| p.addr.ip() == &ip) {
            p.mac = mac;
        }
        Ok(())
    }

    /// Queues one raw Ethernet frame made of `segments` (one mbuf each,
    /// chained when more than one), sent as is at the next flush: for tests
    /// and fault injection (malformed, truncated or chained frames).
    /// Returns false (nothing queued) when the pool or the queue is
    /// exhausted or a segment does not fit an mbuf.
    pub fn inject_frame(&mut self, segments: &[&[u8]]) -> bool {
        if self.tx_queue.len() == DPDK_TX_QUEUED_MAX || segments.is_empty() {
            return false;
        }
        let mut head: Option<Mbuf> = None;
        for s in segments {
            let Some(mut m) = self.pool.alloc() else {
                return false;
            };
            let Some(buf) = u16::try_from(s.len()).ok().and_then(|n| m.append(n)) else {
                return false;
            };
            buf.copy_from_slice(s);
            match &mut head {
                None => head = Some(m),
                Some(h) => {
                    if h.chain(m).is_err() {
                        return false;
                    }
                }
            }
        }
        self.tx_queue.extend(head);
        true
    }

    /// The MAC frames to `ip` go to: a neighbour entry's, another peer's at
    /// that address, or none.
    fn mac_for(&self, ip: &Ipv4Addr) -> Option<MacAddr> {
        self.neighbours
            .iter()
            .find(|(a, _)| a == ip)
            .map(|&(_, m)| m)
            .or_else(|| self.peers.iter().find(|p| p.addr.ip() == ip).map(|p| p.mac))
    }

    fn remember_former(&mut self, addr: SocketAddrV4) {
        if self.former.len() == DPDK_FORMER_ADDRESSES_MAX {
            self.former.pop_front();
        }
        self.former.push_back(addr);
    }

    /// The frame headers of a packet of `len` bytes for `dst`.
    fn headers(&mut self, dst: NodeId, len: usize) -> [u8; frame::FRAME_HEADER_BYTES] {
        let peer = &self.peers[usize::from(dst)];
        if peer.mac == MacAddr::BROADCAST {
            self.stats.broadcast_frames += 1;
        }
        let to = FrameEnd {
            mac: peer.mac,
            addr: peer.addr,
        };
        let mut head = [0u8; frame::FRAME_HEADER_BYTES];
        frame::write_headers(&mut head, &self.local, &to, len);
        head
    }

    /// Copies one packet for `dst` into a fresh mbuf behind its frame
    /// headers. `Err(())` when the pool is empty.
    fn fill(&mut self, dst: NodeId, bytes: &[u8]) -> Result<Mbuf, ()> {
        let mut m = self.pool.alloc().ok_or(())?;
        let head = self.headers(dst, bytes.len());
        let len = frame::FRAME_HEADER_BYTES + bytes.len();
        // The pool's data room holds the headers and an MTU-sized packet.
        let buf = m.append(len as u16).expect("data room sized for the MTU");
        let (h, body) = buf.split_at_mut(frame::FRAME_HEADER_BYTES);
        h.copy_from_slice(&head);
        body.copy_from_slice(bytes);
        self.stats.tx_copied += 1;
        Ok(m)
    }

    /// Whether a packet of `len` bytes for `dst` is dropped as the network
    /// would (no such node, over the MTU); counted.
    fn undeliverable(&mut self, dst: NodeId, len: usize) -> bool {
        if usize::from(dst) >= self.peers.len() {
            self.stats.unknown_destination += 1;
            true
        } else if len > self.mtu {
            self.stats.oversized += 1;
            true
        } else {
            false
        }
    }

    /// Queues one committed packet: by reference when it is in a buffer
    /// this transport lent that nobody else holds, else copied. `Err(())`
    /// when the pool is empty.
    fn queue(&mut self, dst: NodeId, buf: &PacketBuf) -> Result<(), ()> {
        if let PacketBuf::Lent(b) = buf {
            if b.is_from(self.lender) && b.is_exclusive() {
                let head = self.headers(dst, b.len());
                if let Some(m) = self.lender.commit(b, &head) {
                    self.stats.tx_in_place += 1;
                    self.tx_queue.push(m);
                    return Ok(());
                }
            }
        }
        let m = self.fill(dst, buf)?;
        self.tx_queue.push(m);
        Ok(())
    }

    /// Checks one received mbuf; the packet's place in its data, or why it
    /// is dropped.
    fn classify(&self, m: &Mbuf) -> Result<std::ops::Range<usize>, RxDrop> {
        if m.segments() != 1 || m.packet_len() != m.data().len() as u32 {
            return Err(RxDrop::Chained);
        }
        let parsed = frame::parse(m.data(), &self.local)?;
        if parsed.payload.len() > self.mtu {
            return Err(RxDrop::Oversized);
        }
        if self.peers.iter().any(|p| p.addr == parsed.src) {
            Ok(parsed.payload)
        } else if self.former.contains(&parsed.src) {
            Err(RxDrop::StaleAddress)
        } else {
            Err(RxDrop::Stranger)
        }
    }
}

impl std::fmt::Debug for DpdkTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DpdkTransport")
            .field("device", &self.device)
            .field("local", &self.local)
            .field("mtu", &self.mtu)
            .field("peers", &self.peers)
            .field("tx_queued", &self.tx_queue.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Transport for DpdkTransport {
    fn mtu(&self) -> usize {
        self.mtu
    }

    fn is_lossy(&self) -> bool {
        true
    }

    fn tx_lender(&self) -> Option<&'static dyn TxLender> {
        Some(self.lender)
    }

    fn tx_commit(&mut self, _now: Nanos, packets: &[TxCommit<'_>]) -> usize {
        let packets = &packets[..packets.len().min(TX_BURST_MAX)];
        for (i, p) in packets.iter().enumerate() {
            if self.undeliverable(p.dst, p.buf.len()) {
                continue;
            }
            if self.tx_queue.len() == DPDK_TX_QUEUED_MAX {
                return i; // every queue slot is taken: the caller keeps the rest
            }
            if self.queue(p.dst, p.buf).is_err() {
                self.stats.mempool_empty += 1;
                return i;
            }
        }
        packets.len()
    }

    fn tx_burst(&mut self, _now: Nanos, packets: &[TxPacket<'_>]) -> usize {
        for (i, p) in packets.iter().enumerate() {
            if self.undeliverable(p.dst, p.bytes.len()) {
                continue;
            }
            if self.tx_queue.len() == DPDK_TX_QUEUED_MAX {
                return i; // every queue slot is taken: the caller keeps the rest
            }
            match self.fill(p.dst, p.bytes) {
                Ok(m) => self.tx_queue.push(m),
                Err(()) => {
                    self.stats.mempool_empty += 1;
                    return i;
                }
            }
        }
        packets.len()
    }

    fn tx_flush(&mut self, _now: Nanos) {
        // Each round sends a burst or stops, so this ends within
        // DPDK_TX_QUEUED_MAX rounds.
        while !self.tx_queue.is_empty() {
            let n = self.tx_queue.len().min(DPDK_BURST_MAX);
            // Lengths are read before the port owns (and may free) the mbufs.
            let mut lens = [0u32; DPDK_BURST_MAX];
            for (l, m) in lens.iter_mut().zip(&self.tx_queue[..n]) {
                *l = m
                    .packet_len()
                    .saturating_sub(frame::FRAME_HEADER_BYTES as u32);
            }
            let sent = self.port.tx_burst(&mut self.tx_queue, n);
            self.stats.tx_bursts += 1;
            self.stats.packets_sent += sent as u64;
            self.stats.bytes_sent += lens[..sent].iter().map(|&l| u64::from(l)).sum::<u64>();
            if sent < n {
                self.stats.tx_port_full += 1;
                break;
            }
        }
    }

    fn rx_burst(&mut self, _now: Nanos, max: usize, on_packet: &mut dyn FnMut(&[u8])) -> usize {
        // A callback that panicked may have left a burst behind.
        sys::free_all(&mut self.rx_mbufs);
        let (mut read, mut lent) = (0, 0);
        // Dropped frames count against `max` too, so a flood of them cannot
        // keep this call busy.
        while read < max {
            let want = (max - read).min(DPDK_BURST_MAX);
            let got = self.port.rx_burst(&mut self.rx_mbufs, want);
            self.stats.rx_bursts += 1;
            for m in &self.rx_mbufs {
                match self.classify(m) {
                    Ok(range) => {
                        self.stats.packets_received += 1;
                        self.stats.bytes_received += range.len() as u64;
                        on_packet(&m.data()[range]);
                        lent += 1;
                    }
                    Err(reason) => self.stats.rx_dropped.count(reason),
                }
            }
            sys::free_all(&mut self.rx_mbufs);
            read += got;
            if got < want {
                break;
            }
        }
        lent
    }

    fn set_peer_address(
        &mut self,
        node: NodeId,
        addr: SocketAddr,
    ) -> Result<bool, PeerAddressError> {
        let peers = self.peers.len();
        if usize::from(node) >= peers {
            return Err(PeerAddressError::UnknownNode { node, peers });
        }
        let SocketAddr::V4(v4) = addr else {
            let local = SocketAddr::V4(self.local.addr);
            return Err(PeerAddressError::FamilyMismatch { addr, local });
        };
        match self.peers.iter().position(|p| p.addr == v4) {
            Some(n) if n == usize::from(node) => return Ok(false),
            Some(other) => {
                return Err(PeerAddressError::Taken {
                    addr,
                    other: other as NodeId,
                })
            }
            None => {}
        }
        let mac = self.mac_for(v4.ip()).unwrap_or(MacAddr::BROADCAST);
        let old = self.peers[usize::from(node)].addr;
        self.remember_former(old);
        self.former.retain(|&a| a != v4);
        self.peers[usize::from(node)] = DpdkPeer { mac, addr: v4 };
        self.stats.peers_repointed += 1;
        Ok(true)
    }

    fn peer_address_stats(&self) -> PeerAddressStats {
        PeerAddressStats {
            repointed: self.stats.peers_repointed,
            stale_address_drops: self.stats.rx_dropped.get(RxDrop::StaleAddress),
        }
    }
}

/// Creates two ports joined back to back by rings of [`DPDK_RING_SLOTS`]
/// packets (what one sends the other receives; the net_ring driver, no
/// hardware) and returns their names for [`DpdkConfig::device`]. For tests
/// and benchmarks of two endpoints in one process.
///
/// # Errors
/// [`DpdkError::Setup`] when DPDK cannot create the rings or ports.
pub fn dpdk_ring_pair(eal: &Eal) -> Result<[String; 2], DpdkError> {
    sys::ring_port_pair(eal, DPDK_RING_SLOTS).map_err(|e| DpdkError::Setup {
        device: "net_ring pair".to_string(),
        step: e.step,
        errno: e.errno,
        message: e.message,
    })
}
