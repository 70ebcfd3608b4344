//! A fault-injecting transport: wraps any [`Transport`] and, on the send side,
//! loses, duplicates, reorders or delays packets at configured rates, from a
//! seed, so "lossy on request" works for `mem` and `udp` alike (the deployable
//! cluster's tests run at 1% each). The same seed and the same calls give the same
//! faults.
//!
//! Each packet offered draws one number in parts per million and meets at
//! most one fault: lost (taken, never sent); duplicated (sent twice in a row);
//! reordered (held back and sent right after the next packet that goes out,
//! or after [`FaultConfig::reorder_hold_ns`] when none does); delayed (held
//! for [`FaultConfig::delay_ns`]). Held packets sit in [`FAULT_HOLD_PACKETS_MAX`]
//! buffers allocated up front; when all are taken a packet that would be held
//! passes unharmed (counted). Held packets are released by `tx_burst`,
//! `tx_flush` and `rx_burst`, so a driver that only polls still releases them.

use super::{Transport, TxPacket};
use crate::Nanos;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_layout::wire::NodeId;

/// Packets held back (reordered or delayed) at once.
pub const FAULT_HOLD_PACKETS_MAX: usize = 64;
/// A rate of one: every packet (rates are in parts per million).
pub const FAULT_PPM_MAX: u32 = 1_000_000;
/// Default longest hold of a reordered packet when no later packet overtakes it.
pub const FAULT_REORDER_HOLD_NS_DEFAULT: Nanos = 100_000;
/// Default hold of a delayed packet.
pub const FAULT_DELAY_NS_DEFAULT: Nanos = 1_000_000;

/// Fault rates (parts per million of packets offered; their sum at most
/// [`FAULT_PPM_MAX`]) and the seed of the generator that draws them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultConfig {
    /// Packets lost.
    pub loss_ppm: u32,
    /// Packets sent twice.
    pub duplicate_ppm: u32,
    /// Packets overtaken by the next one.
    pub reorder_ppm: u32,
    /// Packets held for [`FaultConfig::delay_ns`].
    pub delay_ppm: u32,
    /// How long a delayed packet is held, ns.
    pub delay_ns: Nanos,
    /// Longest hold of a reordered packet that nothing overtakes, ns.
    pub reorder_hold_ns: Nanos,
    /// Seed of the xoshiro generator.
    pub seed: u64,
}

impl FaultConfig {
    /// No faults at all.
    pub fn none(seed: u64) -> FaultConfig {
        FaultConfig {
            loss_ppm: 0,
            duplicate_ppm: 0,
            reorder_ppm: 0,
            delay_ppm: 0,
            delay_ns: FAULT_DELAY_NS_DEFAULT,
            reorder_hold_ns: FAULT_REORDER_HOLD_NS_DEFAULT,
            seed,
        }
    }

    /// Loss, duplication and reordering at `ppm` each, no delay (the deployable
    /// cluster's tests at 1% use `uniform(10_000, seed)`).
    pub fn uniform(ppm: u32, seed: u64) -> FaultConfig {
        FaultConfig {
            loss_ppm: ppm,
            duplicate_ppm: ppm,
            reorder_ppm: ppm,
            ..FaultConfig::none(seed)
        }
    }
}

/// A fault configuration that cannot be honoured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FaultError {
    /// The rates add up to more than every packet.
    #[error("fault rates add up to {sum_ppm} ppm, more than {FAULT_PPM_MAX}")]
    RatesAboveOne {
        /// Loss + duplication + reordering + delay, ppm.
        sum_ppm: u64,
    },
}

/// What a [`FaultyTransport`] did to the packets offered to it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Packets taken from the caller.
    pub offered: u64,
    /// Packets lost on purpose.
    pub lost: u64,
    /// Extra copies sent.
    pub duplicated: u64,
    /// Packets held back to be overtaken.
    pub reordered: u64,
    /// Packets held back for the delay.
    pub delayed: u64,
    /// Packets that would have been held but could not be (every hold buffer
    /// taken, or longer than the inner MTU) and passed on unharmed.
    pub hold_full: u64,
    /// Held packets released to the inner transport.
    pub released: u64,
}

#[derive(Debug)]
struct Held {
    /// Whether this buffer holds a packet.
    used: bool,
    dst: NodeId,
    bytes: Vec<u8>,
    /// Released at or after this time.
    due: Nanos,
    /// Released once more than this many fresh (not released) packets have
    /// gone to the inner transport (`u64::MAX`: only by time).
    after_forwarded: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Pass,
    Lose,
    Duplicate,
    Reorder,
    Delay,
}

/// A transport decorator that injects faults on the send side; see the module
/// documentation. Always reports itself lossy.
#[derive(Debug)]
pub struct FaultyTransport<T: Transport> {
    inner: T,
    cfg: FaultConfig,
    rng: Xoshiro256PlusPlus,
    held: Vec<Held>,
    held_count: usize,
    forwarded: u64,
    stats: FaultStats,
}

impl<T: Transport> FaultyTransport<T> {
    /// Wraps `inner`, allocating the hold buffers.
    ///
    /// # Errors
    /// [`FaultError::RatesAboveOne`] when the rates add up to more than
    /// [`FAULT_PPM_MAX`].
    pub fn new(inner: T, cfg: FaultConfig) -> Result<FaultyTransport<T>, FaultError> {
        let sum_ppm = [
            cfg.loss_ppm,
            cfg.duplicate_ppm,
            cfg.reorder_ppm,
            cfg.delay_ppm,
        ]
        .iter()
        .map(|&p| p as u64)
        .sum::<u64>();
        if sum_ppm > FAULT_PPM_MAX as u64 {
            return Err(FaultError::RatesAboveOne { sum_ppm });
        }
        let mtu = inner.mtu();
        let held = (0..FAULT_HOLD_PACKETS_MAX)
            .map(|_| Held {
                used: false,
                dst: 0,
                bytes: Vec::with_capacity(mtu),
                due: 0,
                after_forwarded: 0,
            })
            .collect();
        Ok(FaultyTransport {
            inner,
            rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed),
            cfg,
            held,
            held_count: 0,
            forwarded: 0,
            stats: FaultStats::default(),
        })
    }

    /// Counters so far.
    pub fn stats(&self) -> FaultStats {
        self.stats
    }

    /// Packets held back right now.
    pub fn held(&self) -> usize {
        self.held_count
    }

    /// The wrapped transport.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// The wrapped transport, mutably.
    pub fn inner_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    fn draw(&mut self) -> Fate {
        let x = (((self.rng.next_u64() >> 32) * FAULT_PPM_MAX as u64) >> 32) as u32;
        let c = &self.cfg;
        let mut edge = 0;
        for (ppm, fate) in [
            (c.loss_ppm, Fate::Lose),
            (c.duplicate_ppm, Fate::Duplicate),
            (c.reorder_ppm, Fate::Reorder),
            (c.delay_ppm, Fate::Delay),
        ] {
            edge += ppm;
            if x < edge {
                return fate;
            }
        }
        Fate::Pass
    }

    /// Gives fresh `packets` to the inner transport; returns how many it took.
    fn forward(&mut self, now: Nanos, packets: &[TxPacket<'_>]) -> usize {
        if packets.is_empty() {
            return 0;
        }
        let took = self.inner.tx_burst(now, packets);
        self.forwarded += took as u64;
        took
    }

    /// Copies `p` into a free hold buffer; false when none is free (or `p` is
    /// longer than the inner transport's MTU, which would drop it anyway).
    fn hold(&mut self, p: &TxPacket<'_>, due: Nanos, after_forwarded: u64) -> bool {
        let Some(h) = self.held.iter_mut().find(|h| !h.used) else {
            return false;
        };
        if p.bytes.len() > h.bytes.capacity() {
            return false;
        }
        h.used = true;
        h.dst = p.dst;
        h.bytes.clear();
        h.bytes.extend_from_slice(p.bytes);
        h.due = due;
        h.after_forwarded = after_forwarded;
        self.held_count += 1;
        true
    }

    /// Sends every held packet that is due; returns how many went out.
    fn release(&mut self, now: Nanos) -> usize {
        if self.held_count == 0 {
            return 0;
        }
        let mut released = 0;
        for i in 0..self.held.len() {
            let h = &self.held[i];
            let ready = h.used
                && (now >= h.due
                    || (h.after_forwarded != u64::MAX && self.forwarded > h.after_forwarded));
            if !ready {
                continue;
            }
            let p = TxPacket {
                dst: h.dst,
                bytes: &h.bytes,
            };
            if self.inner.tx_burst(now, &[p]) == 0 {
                break; // congested: try again later
            }
            // Not counted in `forwarded`: a released packet is an older one and
            // must not count as overtaking another held packet.
            self.held[i].used = false;
            self.held_count -= 1;
            released += 1;
        }
        self.stats.released += released as u64;
        released
    }

    /// Applies `fate` to `p` (passing packets are normally forwarded in runs
    /// by `tx_burst` instead). Returns false when the inner transport is
    /// congested and `p` was not taken.
    fn inject(&mut self, now: Nanos, fate: Fate, p: &TxPacket<'_>) -> bool {
        let held = match fate {
            Fate::Pass => return self.forward(now, &[*p]) == 1,
            Fate::Lose => {
                self.stats.lost += 1;
                return true;
            }
            Fate::Duplicate => {
                if self.forward(now, &[*p]) == 0 {
                    return false;
                }
                self.stats.duplicated += self.forward(now, &[*p]) as u64;
                return true;
            }
            Fate::Reorder => self.hold(
                p,
                now.saturating_add(self.cfg.reorder_hold_ns),
                self.forwarded,
            ),
            Fate::Delay => self.hold(p, now.saturating_add(self.cfg.delay_ns), u64::MAX),
        };
        match (held, fate) {
            (true, Fate::Reorder) => self.stats.reordered += 1,
            (true, _) => self.stats.delayed += 1,
            (false, _) => {
                self.stats.hold_full += 1;
                return self.forward(now, &[*p]) == 1;
            }
        }
        true
    }
}

impl<T: Transport> Transport for FaultyTransport<T> {
    fn mtu(&self) -> usize {
        self.inner.mtu()
    }

    fn is_lossy(&self) -> bool {
        true
    }

    fn inline_bytes_max(&self) -> usize {
        self.inner.inline_bytes_max()
    }

    fn tx_burst(&mut self, now: Nanos, packets: &[TxPacket<'_>]) -> usize {
        let mut run = 0; // start of the run of passing packets not yet forwarded
        for (i, p) in packets.iter().enumerate() {
            let fate = self.draw();
            if fate == Fate::Pass {
                continue;
            }
            let took = self.forward(now, &packets[run..i]);
            if took < i - run || !self.inject(now, fate, p) {
                self.stats.offered += (run + took) as u64;
                self.release(now);
                return run + took;
            }
            self.release(now);
            run = i + 1;
        }
        let took = self.forward(now, &packets[run..]);
        self.release(now);
        self.stats.offered += (run + took) as u64;
        run + took
    }

    fn tx_flush(&mut self, now: Nanos) {
        self.release(now);
        self.inner.tx_flush(now);
    }

    fn rx_burst(&mut self, now: Nanos, max: usize, on_packet: &mut dyn FnMut(&[u8])) -> usize {
        if self.release(now) > 0 {
            self.inner.tx_flush(now);
        }
        self.inner.rx_burst(now, max, on_packet)
    }

    /// The inner transport's; packets held back for `node` go to `addr`
    /// when released.
    fn set_peer_address(
        &mut self,
        node: NodeId,
        addr: std::net::SocketAddr,
    ) -> Result<bool, super::PeerAddressError> {
        self.inner.set_peer_address(node, addr)
    }

    fn peer_address_stats(&self) -> super::PeerAddressStats {
        self.inner.peer_address_stats()
    }
}
