//! The simulated network: one [`SimTransport`] endpoint per node over a
//! shared [`SimNetwork`], with the faults of [`NetFaults`] drawn from the
//! run's seed.
//!
//! - **Delay.** Each packet is due `latency_ns` plus a draw of
//!   [`DelayDist`] after it is sent. A link (sender → receiver) keeps its
//!   order unless a packet is reordered: a reordered packet gets an extra
//!   delay and may be overtaken; with `reorder_ppm` 0 every link is FIFO.
//! - **Loss, duplication.** Seeded per packet; a lost packet is counted
//!   ([`NetStats::dropped_loss`]); a copy has its own delay.
//! - **Partitions** (symmetric or one-way) start with a per-pass chance and
//!   heal by themselves; packets sent, or due, across one are dropped and
//!   counted. **Clogs** stop one link delivering for a while (nothing lost).
//! - **Capacity.** At most `link_capacity` packets are in flight per link
//!   and [`crate::SIM_PACKETS_IN_FLIGHT_MAX`] in the network: `tx_burst`
//!   takes only the prefix that fits and returns its length (counted as
//!   refusals, never as silent drops). Every drop is counted by reason.
//! - **Crashes.** [`SimNetwork::crash`] drops everything to and from a node
//!   and every later packet to or from it (counted).
//! - **Scripts.** [`SimNetwork::hold`], [`SimNetwork::held`],
//!   [`SimNetwork::deliver_held`], [`SimNetwork::partition`],
//!   [`SimNetwork::clog`] force a chosen interleaving (see `script`).
//!
//! Every event goes into the [`EventTrace`] (its hash covers every send,
//! delivery with the bytes, drop, partition, clog and crash).

mod config;
mod link;
mod script;
mod stats;

pub use config::{
    DelayDist, NetFaults, DELAY_TAIL_MEANS_MAX, LINK_CAPACITY_DEFAULT, PARTITION_NODES_MAX, PPM_MAX,
};
pub use script::HeldPacket;
pub use stats::{DropReason, NetStats};

use crate::trace::{Event, EventKind, EventTrace};
use crate::{SimConfig, SIM_PACKETS_IN_FLIGHT_MAX};
use link::{InFlight, Link, Partition};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_layout::wire::{NodeId, PACKET_BYTES_MAX};
use splitkv_nic::net::{Transport, TxPacket};
use splitkv_nic::Nanos;
use std::cmp::Reverse;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

/// Packet buffers kept for reuse, so a steady run allocates none per packet.
const SPARE_BUFFERS_MAX: usize = 4_096;

#[derive(Debug)]
pub(crate) struct NetInner {
    nodes: usize,
    /// Link `src → dst` at `src * nodes + dst`.
    links: Vec<Link>,
    /// Per receiver: held packets a script chose to deliver next (src, seq, bytes).
    forced: Vec<VecDeque<(NodeId, u64, Vec<u8>)>>,
    rng: Xoshiro256PlusPlus,
    cfg: SimConfig,
    seq: u64,
    in_flight: usize,
    stats: NetStats,
    trace: EventTrace,
    partition: Option<Partition>,
    crashed: Vec<bool>,
    spare: Vec<Vec<u8>>,
}

/// The simulated network shared by every node's [`SimTransport`].
#[derive(Debug, Clone)]
pub struct SimNetwork {
    inner: Arc<Mutex<NetInner>>,
}

/// One node's endpoint of a [`SimNetwork`].
#[derive(Debug)]
pub struct SimTransport {
    node: NodeId,
    inner: Arc<Mutex<NetInner>>,
}

impl SimNetwork {
    /// A network of `nodes` endpoints (endpoint `i` belongs to node `i`)
    /// with the delays and faults of `cfg` (`cfg.net`), seeded by `cfg.seed`.
    pub fn new(nodes: usize, cfg: SimConfig) -> (SimNetwork, Vec<SimTransport>) {
        let inner = Arc::new(Mutex::new(NetInner {
            nodes,
            links: (0..nodes * nodes).map(|_| Link::default()).collect(),
            forced: (0..nodes).map(|_| VecDeque::new()).collect(),
            rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed ^ 0x0005_EED0_F4E7),
            cfg,
            seq: 0,
            in_flight: 0,
            stats: NetStats::default(),
            trace: EventTrace::new(cfg.trace_events),
            partition: None,
            crashed: vec![false; nodes],
            spare: Vec::new(),
        }));
        let ends = (0..nodes)
            .map(|n| SimTransport {
                node: n as NodeId,
                inner: inner.clone(),
            })
            .collect();
        (SimNetwork { inner }, ends)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, NetInner> {
        self.inner.lock().expect("sim network lock")
    }

    /// Packets accepted and not yet delivered or dropped.
    pub fn in_flight(&self) -> usize {
        self.lock().in_flight
    }

    /// Packets delivered so far.
    pub fn delivered(&self) -> u64 {
        self.lock().stats.delivered
    }

    /// Every counter.
    pub fn stats(&self) -> NetStats {
        self.lock().stats
    }

    /// An order-sensitive hash (FNV-1a) of every event so far: each send,
    /// each delivery with its bytes, each drop, duplication, partition, heal,
    /// clog, hold and crash, with its virtual time. Two runs of one seed give
    /// equal hashes; any difference in what happened, where, when or in which
    /// order changes it.
    pub fn trace_hash(&self) -> u64 {
        self.lock().trace.hash()
    }

    /// A copy of the event trace (the last `cfg.trace_events` events).
    pub fn trace(&self) -> EventTrace {
        self.lock().trace.clone()
    }

    /// Records an event that happened outside the network (the driver's
    /// crashes go through [`SimNetwork::crash`]).
    pub fn record(&self, e: Event) {
        self.lock().trace.record(e);
    }

    /// Whether `node` crashed.
    pub fn is_crashed(&self, node: NodeId) -> bool {
        self.lock()
            .crashed
            .get(node as usize)
            .copied()
            .unwrap_or(false)
    }

    /// Crashes `node` at `now`: every packet in flight to or from it is
    /// dropped, and so is every later one (all counted as
    /// [`DropReason::Crashed`]).
    pub fn crash(&self, node: NodeId, now: Nanos) {
        self.lock().crash(node, now);
    }

    /// Restarts crashed node `node` at `now` (rejoin): packets flow to
    /// and from it again, through the returned endpoint (its old one
    /// belonged to the crashed incarnation). `None` if `node` is outside
    /// the network.
    pub fn restart(&self, node: NodeId, now: Nanos) -> Option<SimTransport> {
        let mut inner = self.lock();
        *inner.crashed.get_mut(node as usize)? = false;
        inner.event(now, EventKind::Restart { node });
        Some(SimTransport {
            node,
            inner: self.inner.clone(),
        })
    }

    /// One pass at `now`: heals a partition that is due, and draws whether a
    /// partition starts or a link clogs ([`NetFaults`]). The driver calls it
    /// once per pass.
    pub fn tick(&self, now: Nanos) {
        self.lock().tick(now);
    }
}

impl NetInner {
    fn chance(&mut self, ppm: u32) -> bool {
        ppm != 0 && self.rng.gen_range(0..PPM_MAX) < ppm
    }

    fn draw_between(&mut self, lo: Nanos, hi: Nanos) -> Nanos {
        if hi <= lo {
            lo
        } else {
            self.rng.gen_range(lo..=hi)
        }
    }

    /// The packet's one-way delay.
    fn draw_delay(&mut self) -> Nanos {
        let (base, jitter) = (self.cfg.latency_ns, self.cfg.jitter_ns);
        if jitter == 0 {
            return base;
        }
        base + match self.cfg.net.delay {
            DelayDist::Uniform => self.rng.gen_range(0..=jitter),
            DelayDist::Exponential => {
                let u: f64 = self.rng.gen_range(f64::MIN_POSITIVE..1.0);
                let x = (-u.ln() * jitter as f64) as Nanos;
                x.min(jitter * DELAY_TAIL_MEANS_MAX)
            }
        }
    }

    fn event(&mut self, at: Nanos, kind: EventKind) {
        self.trace.record(Event { at, kind });
    }

    fn drop_packet(&mut self, at: Nanos, src: NodeId, dst: NodeId, seq: u64, reason: DropReason) {
        self.stats.count_drop(reason);
        self.event(
            at,
            EventKind::Drop {
                src,
                dst,
                seq,
                reason,
            },
        );
    }

    fn cut(&self, src: NodeId, dst: NodeId) -> bool {
        self.partition.is_some_and(|p| p.cuts(src, dst))
    }

    fn buffer(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut b = self.spare.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(bytes);
        b
    }

    fn recycle(&mut self, b: Vec<u8>) {
        if self.spare.len() < SPARE_BUFFERS_MAX {
            self.spare.push(b);
        }
    }

    fn room(&self, li: usize) -> bool {
        self.in_flight < SIM_PACKETS_IN_FLIGHT_MAX
            && self.links[li].queue.len() < self.cfg.net.link_capacity
    }

    /// Puts one packet on link `li`, due at `due`.
    fn enqueue(&mut self, li: usize, due: Nanos, bytes: &[u8]) -> u64 {
        self.seq += 1;
        let seq = self.seq;
        let bytes = self.buffer(bytes);
        self.in_flight += 1;
        self.links[li].queue.push(InFlight {
            due: Reverse(due),
            seq: Reverse(seq),
            bytes,
        });
        seq
    }

    /// Offers one packet from `src`; false if it does not fit (refused).
    fn send(&mut self, now: Nanos, src: NodeId, p: &TxPacket<'_>) -> bool {
        let dst = p.dst;
        if dst as usize >= self.nodes {
            self.stats.sent += 1;
            self.drop_packet(now, src, dst, 0, DropReason::UnknownDestination);
            return true;
        }
        if self.crashed[src as usize] || self.crashed[dst as usize] {
            self.stats.sent += 1;
            self.drop_packet(now, src, dst, 0, DropReason::Crashed);
            return true;
        }
        let li = src as usize * self.nodes + dst as usize;
        if self.in_flight >= SIM_PACKETS_IN_FLIGHT_MAX {
            self.stats.refused_network_full += 1;
            return false;
        }
        if self.links[li].queue.len() >= self.cfg.net.link_capacity {
            self.stats.refused_link_full += 1;
            return false;
        }
        self.stats.sent += 1;
        let net = self.cfg.net;
        if self.chance(net.loss_ppm) {
            self.drop_packet(now, src, dst, 0, DropReason::Loss);
            return true;
        }
        if self.cut(src, dst) {
            self.drop_packet(now, src, dst, 0, DropReason::Partition);
            return true;
        }
        let mut due = now + self.draw_delay();
        if self.chance(net.reorder_ppm) {
            due += self.draw_between(0, net.reorder_delay_ns);
            self.stats.reordered += 1;
        } else {
            due = due.max(self.links[li].last_due);
            self.links[li].last_due = due;
        }
        let seq = self.enqueue(li, due, p.bytes);
        let len = p.bytes.len() as u32;
        self.event(
            now,
            EventKind::Send {
                src,
                dst,
                seq,
                len,
                due,
            },
        );
        if self.chance(net.duplicate_ppm) && self.room(li) {
            let copy_due = (now + self.draw_delay()).max(due);
            self.links[li].last_due = self.links[li].last_due.max(copy_due);
            let seq = self.enqueue(li, copy_due, p.bytes);
            self.stats.duplicated += 1;
            self.event(now, EventKind::Duplicate { src, dst, seq });
        }
        true
    }

    /// The next packet due for `dst` by `now`: a forced one first, then the
    /// earliest due (then earliest sent) head over the open links.
    fn next_for(&mut self, dst: NodeId, now: Nanos) -> Option<(NodeId, u64, Vec<u8>)> {
        if let Some(f) = self.forced[dst as usize].pop_front() {
            self.in_flight -= 1;
            return Some(f);
        }
        let n = self.nodes;
        let best = (0..n)
            .filter_map(|src| {
                let head = self.links[src * n + dst as usize].due_head(now)?;
                Some((head, src))
            })
            .min()?;
        let src = best.1;
        let p = self.links[src * n + dst as usize]
            .queue
            .pop()
            .expect("peeked");
        self.in_flight -= 1;
        Some((src as NodeId, p.seq.0, p.bytes))
    }

    fn receive(
        &mut self,
        dst: NodeId,
        now: Nanos,
        max: usize,
        on_packet: &mut dyn FnMut(&[u8]),
    ) -> usize {
        let mut n = 0;
        while n < max {
            let Some((src, seq, bytes)) = self.next_for(dst, now) else {
                break;
            };
            if self.cut(src, dst) {
                self.drop_packet(now, src, dst, seq, DropReason::Partition);
                self.recycle(bytes);
                continue;
            }
            self.event(now, EventKind::Deliver { src, dst, seq });
            self.trace.fold_bytes(&bytes);
            self.stats.delivered += 1;
            on_packet(&bytes);
            self.recycle(bytes);
            n += 1;
        }
        n
    }

    fn crash(&mut self, node: NodeId, now: Nanos) {
        let Some(c) = self.crashed.get_mut(node as usize) else {
            return;
        };
        if *c {
            return;
        }
        *c = true;
        self.stats.crashes += 1;
        self.event(now, EventKind::Crash { node });
        let n = self.nodes;
        for li in 0..n * n {
            let (src, dst) = ((li / n) as NodeId, (li % n) as NodeId);
            if src != node && dst != node {
                continue;
            }
            while let Some(p) = self.links[li].queue.pop() {
                self.in_flight -= 1;
                self.drop_packet(now, src, dst, p.seq.0, DropReason::Crashed);
                self.recycle(p.bytes);
            }
        }
        for dst in 0..n {
            let q = std::mem::take(&mut self.forced[dst]);
            for (src, seq, bytes) in q {
                if src == node || dst == node as usize {
                    self.in_flight -= 1;
                    self.drop_packet(now, src, dst as NodeId, seq, DropReason::Crashed);
                    self.recycle(bytes);
                } else {
                    self.forced[dst].push_back((src, seq, bytes));
                }
            }
        }
    }

    fn tick(&mut self, now: Nanos) {
        if self.partition.is_some_and(|p| p.until <= now) {
            self.partition = None;
            self.stats.heals += 1;
            self.event(now, EventKind::Heal);
        }
        let net = self.cfg.net;
        let n = self.nodes.min(PARTITION_NODES_MAX);
        if n >= 2 && self.partition.is_none() && self.chance(net.partition_ppm) {
            let all = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
            let side = self.rng.gen_range(1..all);
            let one_way = self.chance(net.partition_one_way_ppm);
            let until = now + self.draw_between(net.partition_ns_min, net.partition_ns_max);
            self.set_partition(now, side, one_way, until);
        }
        if self.nodes >= 2 && self.chance(net.clog_ppm) {
            let src = self.rng.gen_range(0..self.nodes);
            let dst = (src + self.rng.gen_range(1..self.nodes)) % self.nodes;
            let until = now + self.draw_between(net.clog_ns_min, net.clog_ns_max);
            self.set_clog(now, src as NodeId, dst as NodeId, until);
        }
    }

    fn set_partition(&mut self, now: Nanos, side: u64, one_way: bool, until: Nanos) {
        self.partition = Some(Partition {
            side,
            one_way,
            until,
        });
        self.stats.partitions += 1;
        self.event(
            now,
            EventKind::Partition {
                side,
                one_way,
                until,
            },
        );
    }

    fn set_clog(&mut self, now: Nanos, src: NodeId, dst: NodeId, until: Nanos) {
        let l = &mut self.links[src as usize * self.nodes + dst as usize];
        l.clogged_until = l.clogged_until.max(until);
        self.stats.clogs += 1;
        self.event(now, EventKind::Clog { src, dst, until });
    }
}

impl Transport for SimTransport {
    fn mtu(&self) -> usize {
        PACKET_BYTES_MAX
    }

    /// Takes the prefix of `packets` that fits the links and the network
    /// and returns its length; every packet taken is delivered, or dropped
    /// and counted by reason.
    fn tx_burst(&mut self, now: Nanos, packets: &[TxPacket<'_>]) -> usize {
        let mut net = self.inner.lock().expect("sim network lock");
        for (i, p) in packets.iter().enumerate() {
            if !net.send(now, self.node, p) {
                return i;
            }
        }
        packets.len()
    }

    fn tx_flush(&mut self, _now: Nanos) {}

    fn rx_burst(&mut self, now: Nanos, max: usize, on_packet: &mut dyn FnMut(&[u8])) -> usize {
        let mut net = self.inner.lock().expect("sim network lock");
        if net.crashed[self.node as usize] {
            return 0;
        }
        net.receive(self.node, now, max, on_packet)
    }
}

#[cfg(test)]
mod tests;
