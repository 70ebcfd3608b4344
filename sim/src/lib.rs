//! # splitkv-sim
//!
//! The deterministic driver (DESIGN.md driver 1): one thread, virtual time, and
//! one seed that reproduces a whole run. Components are the same state machines
//! the other drivers run; only the transport ([`SimTransport`]) and the clock
//! are the simulator's.
//!
//! - [`SimNetwork`]: per-destination delivery queues ordered by virtual delivery
//!   time; each packet's latency is `latency_ns` plus seeded jitter, so packets
//!   from different senders interleave by the seed (one sender's packets to one
//!   receiver keep their order, as on one network path);
//!   [`SimNetwork::trace_hash`] hashes every delivery (time, destination,
//!   bytes) in order, so a test can show that one seed reproduces a run.
//! - [`Sim`]: advances virtual time by `tick_ns` per pass and runs every
//!   component once per pass, in an order shuffled by the seed.
//!
//! - [`history`]: client histories in Jepsen's shape (JSON lines), the input
//!   of the strict-serializability checker.
//! - [`checker`]: the strict-serializability checker of those histories
//!   (Elle-style list-append and register inference, Adya's anomalies,
//!   real-time edges).
//! - [`lost_commits`]: lost- and phantom-commit accounting against the
//!   database's final state.
//!
//! Fault injection (loss, duplication, partitions, crashes, slow DMA) comes
//! with the fault-tolerance work.
#![warn(missing_docs)]

pub mod membership;

pub mod checker;
pub mod history;
pub mod lost_commits;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_layout::wire::{NodeId, PACKET_BYTES_MAX};
use splitkv_nic::net::{Transport, TxPacket};
use splitkv_nic::{Component, Nanos};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex};

/// Most packets in flight in the whole simulated network.
pub const SIM_PACKETS_IN_FLIGHT_MAX: usize = 1 << 20;

/// Simulation parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimConfig {
    /// Seed of every random choice of the simulator.
    pub seed: u64,
    /// Virtual time per pass over all components.
    pub tick_ns: Nanos,
    /// Minimum one-way packet latency.
    pub latency_ns: Nanos,
    /// Extra latency drawn uniformly from `0..=jitter_ns` per packet.
    pub jitter_ns: Nanos,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            tick_ns: 200,
            latency_ns: 2_000,
            jitter_ns: 1_000,
        }
    }
}

/// Why a simulation stopped without reaching its goal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// The stop condition did not hold within the pass budget.
    #[error("no progress to the goal after {passes} passes (virtual time {now_ns} ns)")]
    Timeout {
        /// Passes run.
        passes: u64,
        /// Virtual time reached.
        now_ns: Nanos,
    },
    /// The network exceeded [`SIM_PACKETS_IN_FLIGHT_MAX`].
    #[error("simulated network overflow")]
    Overflow,
    /// A component stopped on a fault it cannot continue past
    /// ([`Component::fault`]); the run stops at the pass where it happened.
    #[error("component {index} stopped at virtual time {now_ns} ns: {reason}")]
    ComponentStopped {
        /// Its index in the slice of components the driver was given.
        index: usize,
        /// Virtual time of the pass.
        now_ns: Nanos,
        /// What it reported.
        reason: String,
    },
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    deliver_at: Reverse<Nanos>,
    seq: Reverse<u64>,
    bytes: Vec<u8>,
}

#[derive(Debug)]
struct NetInner {
    queues: Vec<BinaryHeap<InFlight>>,
    rng: Xoshiro256PlusPlus,
    cfg: SimConfig,
    seq: u64,
    in_flight: usize,
    delivered: u64,
    overflow: bool,
    trace: u64,
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
    /// Delivery time of the last packet sent to each node: packets of one
    /// (sender, receiver) pair arrive in the order sent, as on one network
    /// path (jitter varies the gaps, never the order), so the sessions'
    /// go-back-N does not drop overtaken packets.
    last_deliver_at: Vec<Nanos>,
}

impl SimNetwork {
    /// A network of `nodes` endpoints (endpoint `i` belongs to node `i`).
    pub fn new(nodes: usize, cfg: SimConfig) -> (SimNetwork, Vec<SimTransport>) {
        let inner = Arc::new(Mutex::new(NetInner {
            queues: (0..nodes).map(|_| BinaryHeap::new()).collect(),
            rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed ^ 0x0005_EED0_F4E7),
            cfg,
            seq: 0,
            in_flight: 0,
            delivered: 0,
            overflow: false,
            trace: TRACE_SEED,
        }));
        let ends = (0..nodes)
            .map(|n| SimTransport {
                node: n as NodeId,
                inner: inner.clone(),
                last_deliver_at: vec![0; nodes],
            })
            .collect();
        (SimNetwork { inner }, ends)
    }

    /// Packets sent and not yet received.
    pub fn in_flight(&self) -> usize {
        self.inner.lock().expect("sim network lock").in_flight
    }

    /// Packets delivered so far.
    pub fn delivered(&self) -> u64 {
        self.inner.lock().expect("sim network lock").delivered
    }

    /// An order-sensitive hash (FNV-1a) of every packet delivered so far: its
    /// delivery time, destination and bytes, in delivery order. Two runs of
    /// one seed give equal hashes; any difference in what was delivered,
    /// where, when or in which order changes it.
    pub fn trace_hash(&self) -> u64 {
        self.inner.lock().expect("sim network lock").trace
    }

    fn overflowed(&self) -> bool {
        self.inner.lock().expect("sim network lock").overflow
    }
}

impl Transport for SimTransport {
    fn mtu(&self) -> usize {
        PACKET_BYTES_MAX
    }

    fn tx_burst(&mut self, now: Nanos, packets: &[TxPacket<'_>]) -> usize {
        let mut net = self.inner.lock().expect("sim network lock");
        let n = packets.len();
        for p in packets {
            if p.dst as usize >= net.queues.len() {
                continue; // unknown destination: dropped, as a network would
            }
            if net.in_flight >= SIM_PACKETS_IN_FLIGHT_MAX {
                net.overflow = true;
                continue;
            }
            let cfg = net.cfg;
            let jitter = if cfg.jitter_ns == 0 {
                0
            } else {
                net.rng.gen_range(0..=cfg.jitter_ns)
            };
            let deliver_at =
                (now + cfg.latency_ns + jitter).max(self.last_deliver_at[p.dst as usize]);
            self.last_deliver_at[p.dst as usize] = deliver_at;
            net.seq += 1;
            let seq = net.seq;
            net.in_flight += 1;
            net.queues[p.dst as usize].push(InFlight {
                deliver_at: Reverse(deliver_at),
                seq: Reverse(seq),
                bytes: p.bytes.to_vec(),
            });
        }
        n
    }

    fn tx_flush(&mut self, _now: Nanos) {}

    fn rx_burst(&mut self, now: Nanos, max: usize, on_packet: &mut dyn FnMut(&[u8])) -> usize {
        let mut net = self.inner.lock().expect("sim network lock");
        let mut n = 0;
        while n < max {
            let q = &mut net.queues[self.node as usize];
            match q.peek() {
                Some(p) if p.deliver_at.0 <= now => {
                    let bytes = q.pop().expect("peeked").bytes;
                    let mut h = fold(net.trace, &now.to_le_bytes());
                    h = fold(h, &self.node.to_le_bytes());
                    net.trace = fold(h, &bytes);
                    on_packet(&bytes);
                    n += 1;
                }
                _ => break,
            }
        }
        net.in_flight -= n;
        net.delivered += n as u64;
        n
    }
}

/// FNV-1a offset basis: the trace hash of a network that delivered nothing.
const TRACE_SEED: u64 = 0xcbf2_9ce4_8422_2325;

/// Folds `bytes` into the order-sensitive hash `h` (FNV-1a, 64 bit).
fn fold(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

/// The deterministic single-thread driver.
#[derive(Debug)]
pub struct Sim {
    now: Nanos,
    cfg: SimConfig,
    rng: Xoshiro256PlusPlus,
    passes: u64,
}

impl Sim {
    /// A simulator at virtual time 0.
    pub fn new(cfg: SimConfig) -> Sim {
        Sim {
            now: 0,
            cfg,
            rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed),
            passes: 0,
        }
    }

    /// Current virtual time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Passes run so far.
    pub fn passes(&self) -> u64 {
        self.passes
    }

    /// Runs exactly `passes` passes over `components` (see [`Sim::run_until`]).
    /// Use it when the stop condition needs the components themselves: run a
    /// slice, release the borrow, inspect, repeat.
    pub fn run_passes(
        &mut self,
        net: &SimNetwork,
        components: &mut [&mut dyn Component],
        passes: u64,
    ) -> Result<(), SimError> {
        let mut left = passes;
        match self.run_until(
            net,
            components,
            |_| {
                let stop = left == 0;
                left = left.saturating_sub(1);
                stop
            },
            passes + 1,
        ) {
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Runs passes over `components` (each once per pass, in a seeded random
    /// order) until `done(now)` holds, checked before every pass; fails after
    /// `max_passes` passes, if `net` overflows, or as soon as a component reports
    /// a fault ([`SimError::ComponentStopped`]).
    pub fn run_until(
        &mut self,
        net: &SimNetwork,
        components: &mut [&mut dyn Component],
        mut done: impl FnMut(Nanos) -> bool,
        max_passes: u64,
    ) -> Result<Nanos, SimError> {
        let mut order: Vec<usize> = (0..components.len()).collect();
        for _ in 0..max_passes {
            if done(self.now) {
                return Ok(self.now);
            }
            if net.overflowed() {
                return Err(SimError::Overflow);
            }
            order.shuffle(&mut self.rng);
            for &i in &order {
                components[i].run_iteration(self.now);
                if let Some(reason) = components[i].fault() {
                    return Err(SimError::ComponentStopped {
                        index: i,
                        now_ns: self.now,
                        reason,
                    });
                }
            }
            self.now += self.cfg.tick_ns;
            self.passes += 1;
        }
        Err(SimError::Timeout {
            passes: max_passes,
            now_ns: self.now,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivers_after_latency_in_time_order() {
        let cfg = SimConfig {
            seed: 3,
            tick_ns: 100,
            latency_ns: 1_000,
            jitter_ns: 500,
        };
        let (net, mut ends) = SimNetwork::new(2, cfg);
        let bytes: Vec<[u8; 1]> = (0..50u8).map(|i| [i]).collect();
        let q: Vec<TxPacket<'_>> = bytes
            .iter()
            .map(|b| TxPacket { dst: 1, bytes: b })
            .collect();
        ends[0].tx_burst(0, &q);
        assert_eq!(net.in_flight(), 50);
        let mut out: Vec<Vec<u8>> = Vec::new();
        assert_eq!(
            ends[1].rx_burst(999, 100, &mut |p| out.push(p.to_vec())),
            0,
            "nothing before the minimum latency"
        );
        assert_eq!(
            ends[1].rx_burst(1_500, 100, &mut |p| out.push(p.to_vec())),
            50
        );
        assert_eq!(net.in_flight(), 0);
        let order: Vec<u8> = out.iter().map(|p| p[0]).collect();
        assert_eq!(
            order,
            (0..50).collect::<Vec<_>>(),
            "one sender's packets to one receiver keep their order"
        );
    }

    #[test]
    fn same_seed_same_delivery_order() {
        let run = |seed| {
            let (_net, mut ends) = SimNetwork::new(
                3,
                SimConfig {
                    seed,
                    ..SimConfig::default()
                },
            );
            // Two senders: jitter interleaves their packets, by the seed.
            let bytes: Vec<[u8; 1]> = (0..40u8).map(|i| [i]).collect();
            let q: Vec<TxPacket<'_>> = bytes
                .iter()
                .map(|b| TxPacket { dst: 1, bytes: b })
                .collect();
            ends[0].tx_burst(0, &q[..20]);
            ends[2].tx_burst(0, &q[20..]);
            let mut out: Vec<Vec<u8>> = Vec::new();
            ends[1].rx_burst(1 << 40, 100, &mut |p| out.push(p.to_vec()));
            let mine: Vec<u8> = out.iter().map(|p| p[0]).filter(|&b| b < 20).collect();
            assert_eq!(mine, (0..20).collect::<Vec<_>>(), "per-pair order kept");
            out
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }
}
