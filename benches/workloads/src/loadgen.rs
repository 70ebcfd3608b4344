//! A closed-loop load generator: a component that keeps up to `inflight_max`
//! transactions of a [`TxGenerator`] outstanding on its node's client, retries
//! conflict-aborted ones, records latencies (hdrhistogram) and, optionally,
//! every committed transaction.
//!
//! - **Retries.** An attempt that lost to a concurrent transaction
//!   ([`TxStatus::is_conflict`]: lock conflict or failed validation) is
//!   resubmitted unchanged (same procedure, same arguments) after a seeded,
//!   randomized backoff, up to [`RetryPolicy::max_tries`] attempts in all, as
//!   FaSST's and pgbench's clients do; so the committed mix is the drawn mix.
//!   A retry keeps its place in the window (the loop stays closed).
//! - **Determinism.** Every random choice (the generator's and the backoff's)
//!   comes from seeded sources, and a transaction drawn while the request ring
//!   is full is kept and submitted first next time, never discarded: one seed
//!   and one driver schedule give one run.
//! - **Measurement window.** Outcomes are counted twice: in [`LoadGen::stats`]
//!   (every outcome, what the checks need) and in [`LoadGen::window_stats`]
//!   (only outcomes taken within `[from, until)` of [`LoadGen::set_window`],
//!   what throughput figures use; a warm-up before `from` and the drain after
//!   `until` are not counted at all). Latency is measured from a
//!   transaction's first submission to its last outcome.

//!
//! The load generator is generic over its node's client port ([`TxPort`]):
//! the NIC client port of an in-node client (`splitkv_bench::loadgen`) or an
//! application's connection to a node (the external client program,
//! `splitkv-app-client`).

use crate::tx::{AttemptOutcome, TxCall, TxGenerator};
use crate::Nanos;
use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::FixedState;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

mod stats;
pub use stats::LoadStats;

/// A client's way to a node: submits transactions and takes their outcomes.
/// Both ends are non-blocking.
pub trait TxPort {
    /// Why the port cannot go on (the load generator stops submitting and
    /// keeps the first one, [`LoadGen::error`]).
    type Error;

    /// Submits request `req_id`: procedure `procedure` with encoded `args`
    /// (at most `splitkv_layout::host_nic::ARGS_BYTES_MAX` bytes). `Ok(false)`
    /// when the request ring is full (nothing was submitted; try again later).
    ///
    /// # Errors
    /// The port's error; the load generator submits nothing more.
    fn submit(&mut self, req_id: u64, procedure: u32, args: &[u8]) -> Result<bool, Self::Error>;

    /// Takes up to `max` outcomes, calling `each(req_id, status, result)` for
    /// each in arrival order; returns how many it took.
    ///
    /// # Errors
    /// The port's error; the load generator submits nothing more.
    fn poll(
        &mut self,
        max: usize,
        each: &mut dyn FnMut(u64, TxStatus, &[u8]),
    ) -> Result<usize, Self::Error>;
}

/// Most outcomes taken from the ring per iteration.
pub const OUTCOMES_PER_ITERATION_MAX: usize = 256;
/// Most argument buffers kept for reuse.
pub const SPARE_CALLS_MAX: usize = 1024;
/// Default [`RetryPolicy::max_tries`].
pub const MAX_TRIES_DEFAULT: u32 = 10;
/// Most attempts a [`RetryPolicy`] may allow.
pub const MAX_TRIES_LIMIT: u32 = 1_000;
/// Default shortest backoff before a retry (ns).
pub const BACKOFF_MIN_NS_DEFAULT: Nanos = 5_000;
/// Default longest backoff before a retry (ns).
pub const BACKOFF_MAX_NS_DEFAULT: Nanos = 1_000_000;

/// How conflict-aborted transactions are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per transaction, the first included (1: never retry;
    /// at most [`MAX_TRIES_LIMIT`]).
    pub max_tries: u32,
    /// Backoff before the first retry is drawn uniformly from
    /// `backoff_min_ns..=2·backoff_min_ns`; each further retry doubles the
    /// range, capped at `backoff_max_ns` (ns).
    pub backoff_min_ns: Nanos,
    /// Cap of the backoff (ns).
    pub backoff_max_ns: Nanos,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_tries: MAX_TRIES_DEFAULT,
            backoff_min_ns: BACKOFF_MIN_NS_DEFAULT,
            backoff_max_ns: BACKOFF_MAX_NS_DEFAULT,
        }
    }
}

impl RetryPolicy {
    /// The backoff after a transaction's `attempt`-th attempt (≥ 1) conflicted.
    pub fn backoff_ns(&self, attempt: u32, rng: &mut impl Rng) -> Nanos {
        let lo = self.backoff_min_ns.min(self.backoff_max_ns);
        let hi = lo
            .saturating_mul(1 << attempt.clamp(1, 20))
            .min(self.backoff_max_ns)
            .max(lo);
        rng.gen_range(lo..=hi)
    }
}

/// One committed transaction, as the application saw it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CommittedTx {
    /// Node whose client submitted it.
    pub node: u16,
    /// Request id of the committed attempt on that client.
    pub req_id: u64,
    /// The transaction.
    pub call: TxCall,
    /// The procedure's result.
    pub result: Vec<u8>,
}

/// A transaction in the window: submitted, or waiting for its retry.
#[derive(Debug)]
struct Pending {
    call: TxCall,
    seq: u64,
    first_ns: Nanos,
    invoked_ns: Nanos,
    attempt: u32,
}

/// A retry waiting for its backoff to end, ordered by (due time, sequence).
#[derive(Debug)]
struct Retry {
    due_ns: Nanos,
    seq: u64,
    tx: Pending,
}

impl PartialEq for Retry {
    fn eq(&self, o: &Self) -> bool {
        (self.due_ns, self.seq) == (o.due_ns, o.seq)
    }
}
impl Eq for Retry {}
impl PartialOrd for Retry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Retry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.due_ns, self.seq).cmp(&(o.due_ns, o.seq))
    }
}

/// How a [`LoadGen`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadGenConfig {
    /// Seed of the backoff draws (the generator has its own).
    pub seed: u64,
    /// Transactions kept outstanding (submitted or waiting to retry), ≥ 1.
    pub inflight_max: usize,
    /// Transactions to draw in all (`None`: until [`LoadGen::stop`]).
    pub budget: Option<u64>,
    /// Keep every committed transaction ([`LoadGen::record`]).
    pub record: bool,
    /// Conflict retries.
    pub retry: RetryPolicy,
}

/// Closed-loop client of one node over a [`TxGenerator`], submitting
/// through port `P`.
pub struct LoadGen<G, P: TxPort> {
    node: u16,
    client: P,
    gen: G,
    cfg: LoadGenConfig,
    rng: Xoshiro256PlusPlus,
    submitting: bool,
    next_req: u64,
    retry_seq: u64,
    window: (Nanos, Nanos),
    held: Option<Pending>,
    pending: hashbrown::HashMap<u64, Pending, FixedState>,
    retries: BinaryHeap<Reverse<Retry>>,
    spare: Vec<TxCall>,
    taken: Vec<(u64, TxStatus, std::ops::Range<usize>)>,
    taken_bytes: Vec<u8>,
    latency_ns: Histogram<u64>,
    stats: LoadStats,
    window_stats: LoadStats,
    record: Option<Vec<CommittedTx>>,
    trace: u64,
    error: Option<P::Error>,
}

impl<G, P: TxPort> std::fmt::Debug for LoadGen<G, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadGen")
            .field("node", &self.node)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<G: TxGenerator, P: TxPort> LoadGen<G, P> {
    /// A load generator for `node` drawing from `gen` and submitting through
    /// `client`.
    pub fn new(node: u16, client: P, gen: G, cfg: LoadGenConfig) -> LoadGen<G, P> {
        let inflight_max = cfg.inflight_max.max(1);
        LoadGen {
            node,
            client,
            gen,
            cfg: LoadGenConfig {
                inflight_max,
                retry: RetryPolicy {
                    max_tries: cfg.retry.max_tries.clamp(1, MAX_TRIES_LIMIT),
                    ..cfg.retry
                },
                ..cfg
            },
            rng: Xoshiro256PlusPlus::seed_from_u64(
                cfg.seed ^ 0xBAC0_FF00 ^ (node as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ),
            submitting: true,
            next_req: 0,
            retry_seq: 0,
            window: (0, Nanos::MAX),
            held: None,
            pending: hashbrown::HashMap::with_capacity_and_hasher(inflight_max, FixedState),
            retries: BinaryHeap::with_capacity(inflight_max),
            spare: Vec::new(),
            taken: Vec::with_capacity(OUTCOMES_PER_ITERATION_MAX),
            taken_bytes: Vec::new(),
            latency_ns: Histogram::new_with_bounds(1, 60_000_000_000, 3)
                .expect("valid histogram bounds"),
            stats: LoadStats::default(),
            window_stats: LoadStats::default(),
            record: cfg.record.then(Vec::new),
            trace: TRACE_SEED,
            error: None,
        }
    }

    /// Counts into [`LoadGen::window_stats`] (and the latency histogram) only
    /// outcomes taken at `from_ns <= now < until_ns`.
    pub fn set_window(&mut self, from_ns: Nanos, until_ns: Nanos) {
        self.window = (from_ns, until_ns);
        self.gen.set_window(from_ns, until_ns);
    }

    /// Stops drawing new transactions; those in the window (retries included)
    /// still run to their last outcome.
    pub fn stop(&mut self) {
        self.submitting = false;
    }

    /// Whether every drawn transaction has its last outcome and no more will
    /// be drawn (stopped, budget spent, generator exhausted, or a client error).
    pub fn is_done(&self) -> bool {
        self.pending.is_empty()
            && self.retries.is_empty()
            && self.held.is_none()
            && (!self.submitting
                || self.error.is_some()
                || self.gen.exhausted()
                || self.cfg.budget.is_some_and(|b| self.stats.drawn >= b))
    }

    /// Counters over every outcome so far.
    pub fn stats(&self) -> LoadStats {
        self.stats
    }

    /// Counters over the outcomes taken within the window.
    pub fn window_stats(&self) -> LoadStats {
        self.window_stats
    }

    /// Latency histogram (ns, first submission to commit) of the transactions
    /// committed within the window.
    pub fn latency_ns(&self) -> &Histogram<u64> {
        &self.latency_ns
    }

    /// Committed transactions in the order their outcomes arrived (if recording).
    pub fn record(&self) -> Option<&[CommittedTx]> {
        self.record.as_deref()
    }

    /// The generator (for the workload's check).
    pub fn generator(&self) -> &G {
        &self.gen
    }

    /// Ends the run at `now`: stops drawing and lets the generator finish
    /// ([`TxGenerator::finish`]).
    pub fn finish(&mut self, now: Nanos) {
        self.stop();
        self.gen.finish(now);
    }

    /// An order-sensitive hash of every outcome taken so far: its time,
    /// request id, status and result bytes. Equal runs give equal hashes.
    pub fn trace_hash(&self) -> u64 {
        self.trace
    }

    /// The first client error seen, if any (the generator stops submitting).
    pub fn error(&self) -> Option<&P::Error> {
        self.error.as_ref()
    }

    /// The counters an event at `now` goes into: the run's, and the window's
    /// if `now` is within it.
    fn counters(&mut self, now: Nanos) -> impl Iterator<Item = &mut LoadStats> {
        let in_window = (self.window.0..self.window.1).contains(&now);
        [
            Some(&mut self.stats),
            in_window.then_some(&mut self.window_stats),
        ]
        .into_iter()
        .flatten()
    }

    fn window_len(&self) -> usize {
        self.pending.len() + self.retries.len() + self.held.is_some() as usize
    }

    /// Takes outcomes, submits due retries, then tops the window up with new
    /// transactions. Returns whether it did anything.
    pub fn run_iteration(&mut self, now: Nanos) -> bool {
        if self.error.is_some() {
            return false;
        }
        self.gen.on_iteration(now);
        let mut work = match self.poll_outcomes(now) {
            Ok(n) => n > 0,
            Err(e) => {
                self.error = Some(e);
                return false;
            }
        };
        work |= self.submit_retries(now);
        work |= self.submit_new(now);
        work
    }

    fn submit_retries(&mut self, now: Nanos) -> bool {
        let mut work = false;
        while let Some(Reverse(r)) = self.retries.peek() {
            if r.due_ns > now {
                break;
            }
            let req_id = self.next_req;
            if !submit(&mut self.client, req_id, &r.tx.call, &mut self.error) {
                break;
            }
            let Reverse(mut r) = self.retries.pop().expect("peeked");
            r.tx.invoked_ns = now;
            r.tx.attempt += 1;
            self.next_req += 1;
            for s in self.counters(now) {
                s.attempts += 1;
                s.retries += 1;
            }
            self.pending.insert(req_id, r.tx);
            work = true;
        }
        work
    }

    fn submit_new(&mut self, now: Nanos) -> bool {
        let mut work = false;
        while self.error.is_none() {
            if self.held.is_none() {
                let can_draw = self.submitting
                    && !self.gen.exhausted()
                    && self.window_len() < self.cfg.inflight_max
                    && self.cfg.budget.is_none_or(|b| self.stats.drawn < b);
                if !can_draw {
                    break;
                }
                let mut call = self.spare.pop().unwrap_or_default();
                call.args.clear();
                self.gen.next(&mut call);
                let seq = self.stats.drawn;
                self.counters(now).for_each(|s| s.drawn += 1);
                self.held = Some(Pending {
                    call,
                    seq,
                    first_ns: now,
                    invoked_ns: now,
                    attempt: 1,
                });
            }
            let req_id = self.next_req;
            let held = self.held.as_ref().expect("held");
            if !submit(&mut self.client, req_id, &held.call, &mut self.error) {
                // Kept in `held`: submitted first next time, never redrawn.
                break;
            }
            let mut tx = self.held.take().expect("held");
            tx.first_ns = now;
            tx.invoked_ns = now;
            self.next_req += 1;
            self.counters(now).for_each(|s| s.attempts += 1);
            self.pending.insert(req_id, tx);
            work = true;
        }
        work
    }

    /// Takes up to [`OUTCOMES_PER_ITERATION_MAX`] outcomes (copied out of the
    /// ring into reused buffers, no allocation once warm), then handles them.
    fn poll_outcomes(&mut self, now: Nanos) -> Result<usize, P::Error> {
        let (mut taken, mut bytes) = (
            std::mem::take(&mut self.taken),
            std::mem::take(&mut self.taken_bytes),
        );
        taken.clear();
        bytes.clear();
        let n = self
            .client
            .poll(OUTCOMES_PER_ITERATION_MAX, &mut |req_id, status, result| {
                let at = bytes.len();
                bytes.extend_from_slice(result);
                taken.push((req_id, status, at..bytes.len()));
            });
        for (req_id, status, range) in taken.drain(..) {
            self.on_outcome(now, req_id, status, &bytes[range]);
        }
        (self.taken, self.taken_bytes) = (taken, bytes);
        n
    }

    fn on_outcome(&mut self, now: Nanos, req_id: u64, status: TxStatus, result: &[u8]) {
        let Some(tx) = self.pending.remove(&req_id) else {
            return;
        };
        let mut h = mix64(self.trace ^ now);
        h = mix64(h ^ req_id ^ ((status as u64) << 56));
        self.trace = fold_trace(h, result);
        let conflict = status.is_conflict();
        let last = !conflict || tx.attempt >= self.cfg.retry.max_tries;
        self.gen.on_outcome(&AttemptOutcome {
            call: &tx.call,
            status,
            result,
            invoked_ns: tx.invoked_ns,
            completed_ns: now,
            attempt: tx.attempt,
            last,
            seq: tx.seq,
        });
        let in_window = (self.window.0..self.window.1).contains(&now);
        for s in self.counters(now) {
            count(s, &tx, status, last);
        }
        if status == TxStatus::Committed {
            if in_window {
                let _ = self
                    .latency_ns
                    .record(now.saturating_sub(tx.first_ns).max(1));
            }
            if let Some(r) = self.record.as_mut() {
                r.push(CommittedTx {
                    node: self.node,
                    req_id,
                    call: tx.call.clone(),
                    result: result.to_vec(),
                });
            }
        }
        if last {
            if self.spare.len() < SPARE_CALLS_MAX {
                self.spare.push(tx.call);
            }
            return;
        }
        let due_ns = now + self.cfg.retry.backoff_ns(tx.attempt, &mut self.rng);
        self.retry_seq += 1;
        self.retries.push(Reverse(Retry {
            due_ns,
            seq: self.retry_seq,
            tx,
        }));
    }
}

/// Adds one attempt's outcome to `s`.
fn count(s: &mut LoadStats, tx: &Pending, status: TxStatus, last: bool) {
    match status {
        TxStatus::Committed => {
            s.committed += 1;
            if let Some(slot) = crate::api::procedure_slot(tx.call.procedure) {
                s.committed_by_procedure[slot] += 1;
            }
        }
        TxStatus::UserAborted => s.user_aborted += 1,
        TxStatus::Unknown => s.unknown += 1,
        st if st.is_conflict() => {
            s.conflicts += 1;
            s.gave_up += last as u64;
        }
        _ => s.failed += 1,
    }
}

/// Submits `call` as request `req_id`; false if the ring is full or on an
/// error (then kept in `error`).
fn submit<P: TxPort>(
    client: &mut P,
    req_id: u64,
    call: &TxCall,
    error: &mut Option<P::Error>,
) -> bool {
    match client.submit(req_id, call.procedure, &call.args) {
        Ok(accepted) => accepted,
        Err(e) => {
            *error = Some(e);
            false
        }
    }
}

/// The trace hash of an empty run.
const TRACE_SEED: u64 = 0xcbf2_9ce4_8422_2325;

/// Folds `bytes` into the order-sensitive hash `h`, a word at a time (each
/// 8-byte word, the last zero-padded, and the length are mixed in with
/// [`mix64`]); cheap enough for every outcome.
pub fn fold_trace(mut h: u64, bytes: &[u8]) -> u64 {
    for chunk in bytes.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h = mix64(h ^ u64::from_le_bytes(w));
    }
    mix64(h ^ bytes.len() as u64)
}

/// A bijective 64-bit mix (splitmix64 finalizer): distinct inputs give
/// distinct, well-spread outputs.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
