//! Seeded DMA latencies in virtual time (Xenic §3.5: reads up to ~1.3 µs,
//! writes ~0.6 µs, occasional slow completions): [`SimDma`] wraps any
//! [`DmaEngine`] and holds each request for a drawn latency before it
//! submits it to the engine it wraps, so a read copies host memory when it
//! *completes* (what a deferred DMA read sees) and the protocol meets
//! completions in a seeded order. Reads may overtake each other; log
//! appends keep their submission order, as the trait requires.

use crate::faults::DmaFaults;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_nic::dma::{
    DmaCompletion, DmaEngine, DmaError, DmaRead, DMA_APPENDS_INFLIGHT_MAX, DMA_READS_INFLIGHT_MAX,
    DMA_VECTOR_LEN_MAX,
};
use splitkv_nic::Nanos;
use std::collections::VecDeque;

/// Entry buffers of held appends kept for reuse.
const SPARE_ENTRIES_MAX: usize = 256;

#[derive(Debug)]
struct HeldRead {
    due: Nanos,
    token: u64,
    reads: [DmaRead; DMA_VECTOR_LEN_MAX],
    n: usize,
}

#[derive(Debug)]
struct HeldAppend {
    due: Nanos,
    token: u64,
    entry: Vec<u8>,
}

/// Counters of a [`SimDma`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimDmaStats {
    /// Reads submitted.
    pub reads: u64,
    /// Appends submitted.
    pub appends: u64,
    /// Requests given the slow latency.
    pub slow: u64,
    /// Sum of the drawn latencies, ns.
    pub latency_ns_sum: u64,
    /// Most latency drawn, ns.
    pub latency_ns_max: u64,
}

/// A [`DmaEngine`] that delays every request by a seeded latency.
pub struct SimDma {
    inner: Box<dyn DmaEngine>,
    cfg: DmaFaults,
    rng: Xoshiro256PlusPlus,
    reads: Vec<HeldRead>,
    appends: VecDeque<HeldAppend>,
    last_append_due: Nanos,
    spare: Vec<Vec<u8>>,
    stats: SimDmaStats,
}

impl std::fmt::Debug for SimDma {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimDma")
            .field("cfg", &self.cfg)
            .field("held_reads", &self.reads.len())
            .field("held_appends", &self.appends.len())
            .finish_non_exhaustive()
    }
}

impl SimDma {
    /// Wraps `inner`; latencies per `cfg`, drawn from `seed`.
    pub fn new(inner: Box<dyn DmaEngine>, cfg: DmaFaults, seed: u64) -> SimDma {
        SimDma {
            inner,
            cfg,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed ^ 0xD3A0_0000_5EED),
            reads: Vec::with_capacity(256),
            appends: VecDeque::with_capacity(256),
            last_append_due: 0,
            spare: Vec::new(),
            stats: SimDmaStats::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> SimDmaStats {
        self.stats
    }

    fn latency(&mut self, lo: u64, hi: u64) -> Nanos {
        let mut ns = if hi > lo {
            self.rng.gen_range(lo..=hi)
        } else {
            lo
        };
        if self.cfg.slow_ppm != 0 && self.rng.gen_range(0..1_000_000) < self.cfg.slow_ppm {
            ns += self.cfg.slow_ns;
            self.stats.slow += 1;
        }
        self.stats.latency_ns_sum += ns;
        self.stats.latency_ns_max = self.stats.latency_ns_max.max(ns);
        ns
    }

    /// Hands the requests due by `now` to the wrapped engine (in due order
    /// for reads, submission order for appends); one it refuses as full
    /// waits for the next poll.
    fn release(&mut self, now: Nanos, out: &mut Vec<DmaCompletion>) {
        while self.appends.front().is_some_and(|a| a.due <= now) {
            let a = self.appends.front().expect("checked");
            match self.inner.submit_log_append(now, a.token, &a.entry) {
                Err(DmaError::QueueFull) => break,
                Err(e) => out.push(DmaCompletion {
                    token: a.token,
                    result: Err(e),
                }),
                Ok(()) => {}
            }
            let a = self.appends.pop_front().expect("checked");
            if self.spare.len() < SPARE_ENTRIES_MAX {
                self.spare.push(a.entry);
            }
        }
        let mut i = 0;
        while i < self.reads.len() {
            let r = &self.reads[i];
            if r.due > now {
                i += 1;
                continue;
            }
            match self.inner.submit_read(now, r.token, &r.reads[..r.n]) {
                Err(DmaError::QueueFull) => return,
                Err(e) => out.push(DmaCompletion {
                    token: r.token,
                    result: Err(e),
                }),
                Ok(()) => {}
            }
            self.reads.remove(i);
        }
    }
}

impl DmaEngine for SimDma {
    fn submit_read(&mut self, now: Nanos, token: u64, reads: &[DmaRead]) -> Result<(), DmaError> {
        if reads.is_empty() || reads.len() > DMA_VECTOR_LEN_MAX {
            return Err(DmaError::VectorLength(reads.len()));
        }
        if self.reads.len() + self.inner.inflight() >= DMA_READS_INFLIGHT_MAX {
            return Err(DmaError::QueueFull);
        }
        let due = now + self.latency(self.cfg.read_ns_min, self.cfg.read_ns_max);
        let mut held = HeldRead {
            due,
            token,
            reads: [DmaRead::default(); DMA_VECTOR_LEN_MAX],
            n: reads.len(),
        };
        held.reads[..reads.len()].copy_from_slice(reads);
        self.reads.push(held);
        self.stats.reads += 1;
        Ok(())
    }

    fn submit_log_append(&mut self, now: Nanos, token: u64, entry: &[u8]) -> Result<(), DmaError> {
        if self.appends.len() >= DMA_APPENDS_INFLIGHT_MAX {
            return Err(DmaError::QueueFull);
        }
        let lat = self.latency(self.cfg.write_ns_min, self.cfg.write_ns_max);
        let due = (now + lat).max(self.last_append_due);
        self.last_append_due = due;
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(entry);
        self.appends.push_back(HeldAppend {
            due,
            token,
            entry: buf,
        });
        self.stats.appends += 1;
        Ok(())
    }

    fn poll(&mut self, now: Nanos, out: &mut Vec<DmaCompletion>) {
        let mut refused = Vec::new();
        self.release(now, &mut refused);
        self.inner.poll(now, out);
        out.append(&mut refused);
    }

    fn data(&self) -> &[u8] {
        self.inner.data()
    }

    fn inflight(&self) -> usize {
        self.reads.len() + self.appends.len() + self.inner.inflight()
    }
}

/// A DMA engine that holds nothing and completes nothing: the placeholder
/// while a runtime's engine is swapped for a wrapper
/// (`NicRuntime::replace_dma`).
#[derive(Debug, Default, Clone, Copy)]
pub struct NullDma;

impl DmaEngine for NullDma {
    fn submit_read(&mut self, _: Nanos, _: u64, _: &[DmaRead]) -> Result<(), DmaError> {
        Err(DmaError::QueueFull)
    }

    fn submit_log_append(&mut self, _: Nanos, _: u64, _: &[u8]) -> Result<(), DmaError> {
        Err(DmaError::QueueFull)
    }

    fn poll(&mut self, _: Nanos, _: &mut Vec<DmaCompletion>) {}

    fn data(&self) -> &[u8] {
        &[]
    }

    fn inflight(&self) -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use splitkv_nic::dma::DmaDone;

    /// Completes every request at the first poll after its submission and
    /// records the submission times.
    #[derive(Default)]
    struct Instant {
        pending: Vec<(u64, bool)>,
        submitted_at: Vec<(u64, Nanos)>,
        tail: u64,
    }

    impl DmaEngine for Instant {
        fn submit_read(&mut self, now: Nanos, token: u64, _: &[DmaRead]) -> Result<(), DmaError> {
            self.pending.push((token, true));
            self.submitted_at.push((token, now));
            Ok(())
        }
        fn submit_log_append(&mut self, now: Nanos, token: u64, _: &[u8]) -> Result<(), DmaError> {
            self.pending.push((token, false));
            self.submitted_at.push((token, now));
            Ok(())
        }
        fn poll(&mut self, _: Nanos, out: &mut Vec<DmaCompletion>) {
            for (token, read) in self.pending.drain(..) {
                self.tail += 1;
                let result = Ok(if read {
                    DmaDone::Read { start: 0, len: 0 }
                } else {
                    DmaDone::Appended { tail: self.tail }
                });
                out.push(DmaCompletion { token, result });
            }
        }
        fn data(&self) -> &[u8] {
            &[]
        }
        fn inflight(&self) -> usize {
            self.pending.len()
        }
    }

    /// Runs 200 reads (tokens 0..200) and 200 appends (tokens 1000..1200)
    /// submitted at time 0 through a SimDma with `cfg`; returns completion
    /// (token, time) in order.
    fn run(cfg: DmaFaults, seed: u64) -> (Vec<(u64, Nanos)>, SimDmaStats) {
        let mut dma = SimDma::new(Box::new(Instant::default()), cfg, seed);
        let r = [DmaRead { offset: 0, len: 8 }];
        for t in 0..200 {
            dma.submit_read(0, t, &r).expect("room");
            dma.submit_log_append(0, 1_000 + t, b"entry").expect("room");
        }
        let mut done = Vec::new();
        let mut out = Vec::new();
        for now in (0..100_000).step_by(50) {
            dma.poll(now, &mut out);
            done.extend(out.drain(..).map(|c| (c.token, now)));
        }
        assert_eq!(dma.inflight(), 0);
        (done, dma.stats())
    }

    #[test]
    fn latencies_in_range_appends_in_order_slow_ones_counted() {
        let cfg = DmaFaults {
            slow_ppm: 50_000,
            ..DmaFaults::xenic()
        };
        let (done, stats) = run(cfg, 4);
        assert_eq!(done.len(), 400);
        assert!(stats.slow > 5, "{stats:?}");
        for &(token, at) in &done {
            let (lo, hi) = if token < 1_000 {
                (cfg.read_ns_min, cfg.read_ns_max + cfg.slow_ns)
            } else {
                (cfg.write_ns_min, 0)
            };
            assert!(at >= lo, "token {token} at {at}");
            if hi > 0 {
                assert!(at <= hi + 50, "token {token} at {at}");
            }
        }
        let appends: Vec<u64> = done.iter().map(|d| d.0).filter(|&t| t >= 1_000).collect();
        assert_eq!(appends, (1_000..1_200).collect::<Vec<_>>(), "in order");
        let reads: Vec<u64> = done.iter().map(|d| d.0).filter(|&t| t < 1_000).collect();
        assert_ne!(reads, (0..200).collect::<Vec<_>>(), "reads overtake");
        assert_eq!(run(cfg, 4).0, done, "same seed, same completions");
        assert_ne!(run(cfg, 5).0, done, "another seed");
    }
}
