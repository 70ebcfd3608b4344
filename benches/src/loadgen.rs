//! A closed-loop load generator: a component that keeps up to `inflight_max`
//! Smallbank transactions outstanding on its node's client, records latencies
//! (hdrhistogram) and, optionally, every committed transaction.

use crate::smallbank::{delta_of, Generator, TxType};
use hdrhistogram::Histogram;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_host::{Client, ClientError};
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::FixedState;
use splitkv_nic::{Component, Nanos};

/// Most outcomes taken from the ring per iteration.
pub const OUTCOMES_PER_ITERATION_MAX: usize = 256;

/// One committed transaction, as the application saw it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CommittedTx {
    /// Node whose client submitted it.
    pub node: u16,
    /// Request id on that client.
    pub req_id: u64,
    /// Transaction type.
    pub tx: TxType,
    /// Encoded arguments.
    pub args: Vec<u8>,
    /// Money created (from the procedure's result).
    pub delta: i64,
}

/// Outcome counters of one load generator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadStats {
    /// Submitted.
    pub submitted: u64,
    /// Committed.
    pub committed: u64,
    /// Aborted by a conflict (lock or validation).
    pub aborted: u64,
    /// Aborted by the procedure (e.g. insufficient funds).
    pub user_aborted: u64,
    /// Rejected by the node.
    pub rejected: u64,
    /// Money created by the committed transactions (sum of their deltas, cents).
    pub money_created: i64,
}

impl LoadStats {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &LoadStats) {
        self.submitted += o.submitted;
        self.committed += o.committed;
        self.aborted += o.aborted;
        self.user_aborted += o.user_aborted;
        self.rejected += o.rejected;
        self.money_created += o.money_created;
    }

    /// Outcomes received.
    pub fn finished(&self) -> u64 {
        self.committed + self.aborted + self.user_aborted + self.rejected
    }
}

struct Pending {
    start: Nanos,
    tx: TxType,
    args: Vec<u8>,
}

/// Closed-loop Smallbank client of one node.
pub struct LoadGen {
    node: u16,
    client: Client,
    gen: Generator,
    rng: Xoshiro256PlusPlus,
    inflight_max: usize,
    budget: Option<u64>,
    submitting: bool,
    next_req: u64,
    pending: hashbrown::HashMap<u64, Pending, FixedState>,
    spare: Vec<Vec<u8>>,
    args: Vec<u8>,
    latency_ns: Histogram<u64>,
    stats: LoadStats,
    record: Option<Vec<CommittedTx>>,
    error: Option<ClientError>,
}

impl std::fmt::Debug for LoadGen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadGen")
            .field("node", &self.node)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl LoadGen {
    /// A generator for `node` submitting through `client`, seeded with `seed`.
    /// `budget` caps the transactions submitted (`None`: until [`LoadGen::stop`]);
    /// `record` keeps every committed transaction.
    pub fn new(
        node: u16,
        client: Client,
        gen: Generator,
        seed: u64,
        inflight_max: usize,
        budget: Option<u64>,
        record: bool,
    ) -> LoadGen {
        LoadGen {
            node,
            client,
            gen,
            rng: Xoshiro256PlusPlus::seed_from_u64(
                seed ^ (node as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ),
            inflight_max: inflight_max.max(1),
            budget,
            submitting: true,
            next_req: 0,
            pending: hashbrown::HashMap::with_capacity_and_hasher(inflight_max, FixedState),
            spare: Vec::new(),
            args: Vec::with_capacity(32),
            latency_ns: Histogram::new_with_bounds(1, 60_000_000_000, 3)
                .expect("valid histogram bounds"),
            stats: LoadStats::default(),
            record: record.then(Vec::new),
            error: None,
        }
    }

    /// Stops submitting new transactions (outstanding ones still finish).
    pub fn stop(&mut self) {
        self.submitting = false;
    }

    /// Whether every submitted transaction has its outcome and no more will be submitted.
    pub fn is_done(&self) -> bool {
        self.pending.is_empty()
            && (!self.submitting || self.budget.is_some_and(|b| self.stats.submitted >= b))
    }

    /// Counters so far.
    pub fn stats(&self) -> LoadStats {
        self.stats
    }

    /// Latency histogram (ns) of committed transactions.
    pub fn latency_ns(&self) -> &Histogram<u64> {
        &self.latency_ns
    }

    /// Committed transactions in the order their outcomes arrived (if recording).
    pub fn record(&self) -> Option<&[CommittedTx]> {
        self.record.as_deref()
    }

    /// The first client error seen, if any (the generator stops submitting).
    pub fn error(&self) -> Option<&ClientError> {
        self.error.as_ref()
    }

    fn poll_outcomes(&mut self, now: Nanos) -> Result<usize, ClientError> {
        let Self {
            client,
            pending,
            stats,
            latency_ns,
            record,
            spare,
            node,
            ..
        } = self;
        client.poll(OUTCOMES_PER_ITERATION_MAX, |o| {
            let Some(p) = pending.remove(&o.req_id) else {
                return;
            };
            match o.status {
                TxStatus::Committed => {
                    stats.committed += 1;
                    let delta = delta_of(o.result).unwrap_or(0);
                    stats.money_created += delta;
                    let _ = latency_ns.record(now.saturating_sub(p.start).max(1));
                    if let Some(r) = record.as_mut() {
                        r.push(CommittedTx {
                            node: *node,
                            req_id: o.req_id,
                            tx: p.tx,
                            args: p.args.clone(),
                            delta,
                        });
                    }
                }
                s if s.is_conflict() => stats.aborted += 1,
                TxStatus::UserAborted => stats.user_aborted += 1,
                _ => stats.rejected += 1,
            }
            if spare.len() < 1024 {
                spare.push(p.args);
            }
        })
    }

    /// Takes outcomes, then tops the window up to `inflight_max`.
    pub fn run_iteration(&mut self, now: Nanos) -> bool {
        if self.error.is_some() {
            return false;
        }
        let mut work = match self.poll_outcomes(now) {
            Ok(n) => n > 0,
            Err(e) => {
                self.error = Some(e);
                return false;
            }
        };
        while self.submitting
            && self.pending.len() < self.inflight_max
            && self.budget.is_none_or(|b| self.stats.submitted < b)
        {
            let tx = self.gen.next(&mut self.rng, &mut self.args);
            let req_id = self.next_req;
            match self.client.submit(req_id, tx as u32, &self.args) {
                Ok(()) => {}
                Err(ClientError::Busy) => break,
                Err(e) => {
                    self.error = Some(e);
                    break;
                }
            }
            self.next_req += 1;
            self.stats.submitted += 1;
            let mut args = self.spare.pop().unwrap_or_default();
            args.clear();
            args.extend_from_slice(&self.args);
            self.pending.insert(
                req_id,
                Pending {
                    start: now,
                    tx,
                    args,
                },
            );
            work = true;
        }
        work
    }
}

impl Component for LoadGen {
    fn run_iteration(&mut self, now: Nanos) -> bool {
        LoadGen::run_iteration(self, now)
    }
}
