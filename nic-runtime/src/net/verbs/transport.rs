//! [`VerbsTransport`]: the UD endpoint itself (see the parent module).

use super::addr::{PeerTable, VerbsPeer};
use super::config::{VerbsConfig, VerbsError, VerbsStats, VERBS_BURST_MAX};
use super::recv::{self, RxDrop};
use super::{device, pool, sys, wr};
use crate::net::{PeerAddressError, PeerAddressStats, Transport, TxPacket};
use crate::Nanos;
use device::{SendWr, VerbsDevice};
use pool::{Slot, SlotPool, SlotUse};
use recv::{RecvCompletion, RecvLimits};
use splitkv_layout::wire::NodeId;
use std::net::SocketAddr;
use sys::Device;
use wr::{SendCadence, SendRefusal};

// One `tx_burst` from `send_ready` fits one posted chain.
const _: () = assert!(VERBS_BURST_MAX >= crate::net::TX_BURST_MAX);

/// Most endpoints registered for re-pointing ([`VerbsTransport::add_endpoint`]).
pub const VERBS_ENDPOINTS_MAX: usize = 1024;

/// One node's verbs endpoint on device `D` (libibverbs' [`Device`]; a
/// test's in-memory device). See the module documentation.
pub struct VerbsTransport<D: VerbsDevice = Device> {
    // Address handles before the device: fields drop in order, and the
    // handles must go before the protection domain.
    ahs: Vec<Option<D::Ah>>,
    device: D,
    cfg: VerbsConfig,
    peers: PeerTable,
    /// Endpoints known by data address (for `set_peer_address`).
    endpoints: Vec<VerbsPeer>,
    pool: SlotPool,
    cadence: SendCadence,
    stats: VerbsStats,
    repointed: u64,
}

impl VerbsTransport<Device> {
    /// Checks `cfg`, opens the device, creates the queue pair and region,
    /// builds an address handle per peer and posts the receives.
    ///
    /// # Errors
    /// [`VerbsError::BadConfig`]; [`VerbsError::NoDevice`] when no RDMA
    /// device exists (or none by the name asked for);
    /// [`VerbsError::PortDown`]; [`VerbsError::Setup`] naming the verbs
    /// call that failed.
    pub fn new(cfg: VerbsConfig) -> Result<VerbsTransport, VerbsError> {
        cfg.check()?;
        let device = Device::open(&cfg)?;
        VerbsTransport::with_device(cfg, device)
    }
}

impl<D: VerbsDevice> VerbsTransport<D> {
    /// The transport on an open `device` whose region has
    /// [`VerbsConfig::slots`] slots of [`VerbsConfig::slot_bytes`]: builds
    /// an address handle per peer and posts the receives.
    ///
    /// # Errors
    /// [`VerbsError::BadConfig`]; [`VerbsError::Setup`] when the device
    /// refuses an address handle.
    pub fn with_device(cfg: VerbsConfig, device: D) -> Result<VerbsTransport<D>, VerbsError> {
        cfg.check()?;
        let mut ahs = Vec::with_capacity(cfg.peers.len());
        for p in &cfg.peers {
            ahs.push(match p {
                Some(p) => Some(
                    device
                        .address_handle(p)
                        .map_err(|errno| VerbsError::Setup {
                            device: device.name().to_string(),
                            step: "ibv_create_ah",
                            errno,
                        })?,
                ),
                None => None,
            });
        }
        let mut t = VerbsTransport {
            ahs,
            device,
            peers: PeerTable::new(cfg.peers.clone()),
            endpoints: cfg.peers.iter().flatten().copied().collect(),
            pool: SlotPool::new(cfg.slots()),
            cadence: SendCadence::new(cfg.signal_every, cfg.send_depth),
            stats: VerbsStats::default(),
            repointed: 0,
            cfg,
        };
        t.top_up_receives();
        Ok(t)
    }

    /// This endpoint's queue pair number (what peers need to reach it).
    pub fn local_qpn(&self) -> u32 {
        self.device.qpn()
    }

    /// This endpoint as a peer sees it, named by data address `addr`
    /// (give it to the other nodes' [`VerbsTransport::add_endpoint`]; its
    /// text form is `addr=…,gid=…|lid=…,qpn=…,qkey=…`).
    pub fn local_endpoint(&self, addr: SocketAddr) -> VerbsPeer {
        VerbsPeer {
            addr,
            route: self.device.route(),
            qpn: self.device.qpn(),
            qkey: self.cfg.qkey,
        }
    }

    /// Inline bytes the device granted.
    pub fn inline_granted(&self) -> usize {
        self.device.inline_max()
    }

    /// The device (tests look at what was posted).
    pub fn device(&self) -> &D {
        &self.device
    }

    /// The device, to change (tests deliver datagrams through it).
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }

    /// Slots of the registered pool lent for `what` (receives posted,
    /// sends not yet retired).
    pub fn slots_lent(&self, what: SlotUse) -> u32 {
        self.pool.lent(what)
    }

    /// Counters so far.
    pub fn stats(&self) -> VerbsStats {
        self.stats
    }

    /// Registers `peer` as the endpoint at its data address, so that
    /// [`Transport::set_peer_address`] to that address can re-point a
    /// node at it. Returns `false` (nothing changes) when
    /// [`VERBS_ENDPOINTS_MAX`] are registered. Replaces an endpoint at
    /// the same data address.
    pub fn add_endpoint(&mut self, peer: VerbsPeer) -> bool {
        if let Some(e) = self.endpoints.iter_mut().find(|e| e.addr == peer.addr) {
            *e = peer;
            return true;
        }
        if self.endpoints.len() >= VERBS_ENDPOINTS_MAX {
            return false;
        }
        self.endpoints.push(peer);
        true
    }

    fn top_up_receives(&mut self) {
        let want = wr::receives_to_post(
            self.pool.lent(SlotUse::Receive),
            self.cfg.recv_depth,
            u32::MAX,
        );
        let mut left = want;
        while left > 0 {
            let mut slots = [Slot(0); VERBS_BURST_MAX];
            let mut n = 0;
            while n < VERBS_BURST_MAX && (n as u32) < left {
                match self.pool.take(SlotUse::Receive) {
                    Ok(s) => {
                        slots[n] = s;
                        n += 1;
                    }
                    Err(_) => break,
                }
            }
            if n == 0 {
                self.stats.rx_topup_short += 1;
                return;
            }
            if let Err((posted, _rc)) = self.device.post_recvs(&slots[..n]) {
                self.stats.post_errors += 1;
                for &s in &slots[posted..n] {
                    let _ = self.pool.release(s, SlotUse::Receive);
                }
                return;
            }
            left -= n as u32;
        }
    }

    /// Posts the chain `tx_burst` built and counts what the device took;
    /// refused sends are taken and dropped, as a network would drop them,
    /// and their slots returned.
    fn post_chain(&mut self, sends: &[SendWr]) {
        let n = sends.len();
        // SAFETY: inline payloads are the caller's bytes, alive for this
        // call; the others are slots of the device's region, lent to these
        // sends; each handle is in self.ahs.
        let posted = match unsafe { self.device.post_sends(sends) } {
            Ok(()) => n,
            Err((posted, _rc)) => {
                // Refused sends are taken and dropped, as a network would.
                self.stats.post_errors += 1;
                let pool = &mut self.pool;
                self.cadence.unpost_last(n - posted, |slot| {
                    if let Some(s) = slot {
                        let _ = pool.release(s, SlotUse::Send);
                    }
                });
                posted
            }
        };
        for s in &sends[..posted] {
            self.stats.tx_packets += 1;
            self.stats.tx_inline += u64::from(s.plan.inline);
            self.stats.tx_signaled += u64::from(s.plan.signaled);
        }
    }

    fn reap_sends(&mut self) {
        let mut done = [(0u64, false); VERBS_BURST_MAX];
        loop {
            let n = self.device.poll_send(&mut done);
            for &(wr_id, ok) in &done[..n] {
                if !ok {
                    self.stats.tx_completion_errors += 1;
                }
                let pool = &mut self.pool;
                self.cadence.completed(wr_id, |slot| {
                    if let Some(s) = slot {
                        let _ = pool.release(s, SlotUse::Send);
                    }
                });
            }
            if n < VERBS_BURST_MAX {
                return;
            }
        }
    }
}

impl<D: VerbsDevice> Transport for VerbsTransport<D> {
    fn mtu(&self) -> usize {
        self.cfg.mtu
    }

    fn inline_bytes_max(&self) -> usize {
        self.device.inline_max()
    }

    fn tx_burst(&mut self, _now: Nanos, packets: &[TxPacket<'_>]) -> usize {
        // Retire what the device finished before the queue or the pool can
        // run short (cheap: one poll of the send completion queue).
        if self.cadence.outstanding() + packets.len() > self.cfg.send_depth as usize {
            self.reap_sends();
        }
        let mut sends = [SendWr::default(); VERBS_BURST_MAX];
        let mut n = 0;
        let mut taken = 0;
        for p in packets.iter().take(VERBS_BURST_MAX) {
            let (Some(peer), Some(Some(ah))) =
                (self.peers.get(p.dst), self.ahs.get(usize::from(p.dst)))
            else {
                self.stats.tx_unknown_peer += 1;
                taken += 1;
                continue;
            };
            let plan =
                match self
                    .cadence
                    .plan(p.bytes.len(), self.cfg.mtu, self.device.inline_max())
                {
                    Ok(plan) => plan,
                    Err(SendRefusal::TooLong { .. }) => {
                        self.stats.tx_too_long += 1;
                        taken += 1;
                        continue;
                    }
                    Err(SendRefusal::QueueFull { .. }) => {
                        self.stats.tx_queue_full += 1;
                        break;
                    }
                };
            let (slot, payload) = if plan.inline {
                (None, p.bytes.as_ptr())
            } else {
                let Ok(s) = self.pool.take(SlotUse::Send) else {
                    self.stats.tx_pool_exhausted += 1;
                    break;
                };
                let buf = self.device.slot_mut(s);
                buf[..p.bytes.len()].copy_from_slice(p.bytes);
                (Some(s), buf.as_ptr())
            };
            self.cadence.posted(&plan, slot);
            sends[n] = SendWr {
                plan,
                payload,
                ah: D::ah_token(ah),
                qpn: peer.qpn,
                qkey: peer.qkey,
                imm: self.cfg.qkey,
            };
            n += 1;
            taken += 1;
        }
        self.post_chain(&sends[..n]);
        taken
    }

    fn tx_flush(&mut self, _now: Nanos) {
        self.reap_sends();
    }

    fn rx_burst(&mut self, _now: Nanos, max: usize, on_packet: &mut dyn FnMut(&[u8])) -> usize {
        let mut done = [(
            0u64,
            RecvCompletion {
                status: 0,
                byte_len: 0,
                src_qp: 0,
                slid: 0,
                grh: false,
                imm: None,
            },
        ); VERBS_BURST_MAX];
        let n = self.device.poll_recv(max, &mut done);
        let limits = RecvLimits {
            slot_bytes: self.cfg.slot_bytes(),
            mtu: self.cfg.mtu,
            qkey: self.cfg.qkey,
        };
        let mut lent = 0;
        for &(wr_id, wc) in &done[..n] {
            let slot = match u32::try_from(wr_id) {
                Ok(i) if self.pool.release(Slot(i), SlotUse::Receive).is_ok() => Slot(i),
                _ => {
                    self.stats.rx_dropped.count(RxDrop::BadSlot);
                    continue;
                }
            };
            // The slot is free again, but nothing can take it before the
            // packet is lent: this call holds the transport.
            match recv::check_recv(&wc, self.device.slot(slot), limits, &self.peers) {
                Ok((range, _node)) => {
                    on_packet(&self.device.slot(slot)[range]);
                    self.stats.rx_packets += 1;
                    lent += 1;
                }
                Err(why) => self.stats.rx_dropped.count(why),
            }
        }
        self.top_up_receives();
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
        if let Some(other) = self.peers.node_at(addr).filter(|&o| o != node) {
            return Err(PeerAddressError::Taken { addr, other });
        }
        let Some(peer) = self.endpoints.iter().find(|e| e.addr == addr).copied() else {
            return Err(PeerAddressError::NoEndpoint { addr });
        };
        if self.peers.get(node) == Some(&peer) {
            return Ok(false);
        }
        let ah = self
            .device
            .address_handle(&peer)
            .map_err(|_| PeerAddressError::NoEndpoint { addr })?;
        self.peers.repoint(node, peer);
        self.ahs[usize::from(node)] = Some(ah);
        self.repointed += 1;
        Ok(true)
    }

    fn peer_address_stats(&self) -> PeerAddressStats {
        PeerAddressStats {
            repointed: self.repointed,
            stale_address_drops: self.stats.rx_dropped.get(RxDrop::FormerPeer),
        }
    }
}
