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
//! The load generator itself is `splitkv_workloads::loadgen` (the client
//! half, generic over its port, which the external client program runs
//! too); here it runs over a node's NIC client port ([`HostPort`]) and is a
//! [`Component`] the drivers run.

pub use splitkv_workloads::loadgen::{
    fold_trace, CommittedTx, LoadGenConfig, LoadStats, RetryPolicy, TxPort, BACKOFF_MAX_NS_DEFAULT,
    BACKOFF_MIN_NS_DEFAULT, MAX_TRIES_DEFAULT, MAX_TRIES_LIMIT, OUTCOMES_PER_ITERATION_MAX,
    SPARE_CALLS_MAX,
};

use crate::workload::TxGenerator;
#[cfg(test)]
use crate::workload::{AttemptOutcome, TxCall};
use hdrhistogram::Histogram;
use splitkv_host::{Client, ClientError};
use splitkv_layout::host_nic::TxStatus;
use splitkv_nic::{Component, Nanos};

/// A node's NIC client port (`splitkv_host::Client`) as a load generator's
/// [`TxPort`]: a full request ring is [`ClientError::Busy`] there, `Ok(false)` here.
#[derive(Debug)]
pub struct HostPort(pub Client);

impl TxPort for HostPort {
    type Error = ClientError;

    fn submit(&mut self, req_id: u64, procedure: u32, args: &[u8]) -> Result<bool, ClientError> {
        match self.0.submit(req_id, procedure, args) {
            Ok(()) => Ok(true),
            Err(ClientError::Busy) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn poll(
        &mut self,
        max: usize,
        each: &mut dyn FnMut(u64, TxStatus, &[u8]),
    ) -> Result<usize, ClientError> {
        self.0.poll(max, |o| each(o.req_id, o.status, o.result))
    }
}

/// Closed-loop client of one node over a [`TxGenerator`], submitting through
/// the node's NIC client port (`splitkv_workloads::loadgen::LoadGen` over
/// [`HostPort`]).
#[derive(Debug)]
pub struct LoadGen<G>(splitkv_workloads::loadgen::LoadGen<G, HostPort>);

impl<G: TxGenerator> LoadGen<G> {
    /// A load generator for `node` drawing from `gen` and submitting through
    /// `client`.
    pub fn new(node: u16, client: Client, gen: G, cfg: LoadGenConfig) -> LoadGen<G> {
        LoadGen(splitkv_workloads::loadgen::LoadGen::new(
            node,
            HostPort(client),
            gen,
            cfg,
        ))
    }

    /// Counts into [`LoadGen::window_stats`] (and the latency histogram) only
    /// outcomes taken at `from_ns <= now < until_ns`.
    pub fn set_window(&mut self, from_ns: Nanos, until_ns: Nanos) {
        self.0.set_window(from_ns, until_ns)
    }

    /// Stops drawing new transactions; those in the window (retries included)
    /// still run to their last outcome.
    pub fn stop(&mut self) {
        self.0.stop()
    }

    /// Whether every drawn transaction has its last outcome and no more will
    /// be drawn (stopped, budget spent, generator exhausted, or a client error).
    pub fn is_done(&self) -> bool {
        self.0.is_done()
    }

    /// Counters over every outcome so far.
    pub fn stats(&self) -> LoadStats {
        self.0.stats()
    }

    /// Counters over the outcomes taken within the window.
    pub fn window_stats(&self) -> LoadStats {
        self.0.window_stats()
    }

    /// Latency histogram (ns, first submission to commit) of the transactions
    /// committed within the window.
    pub fn latency_ns(&self) -> &Histogram<u64> {
        self.0.latency_ns()
    }

    /// Committed transactions in the order their outcomes arrived (if recording).
    pub fn record(&self) -> Option<&[CommittedTx]> {
        self.0.record()
    }

    /// The generator (for the workload's check).
    pub fn generator(&self) -> &G {
        self.0.generator()
    }

    /// Ends the run at `now`: stops drawing and lets the generator finish.
    pub fn finish(&mut self, now: Nanos) {
        self.0.finish(now)
    }

    /// An order-sensitive hash of every outcome taken so far.
    pub fn trace_hash(&self) -> u64 {
        self.0.trace_hash()
    }

    /// The first client error seen, if any (the generator stops submitting).
    pub fn error(&self) -> Option<&ClientError> {
        self.0.error()
    }

    /// Takes outcomes, submits due retries, then tops the window up with new
    /// transactions. Returns whether it did anything.
    pub fn run_iteration(&mut self, now: Nanos) -> bool {
        self.0.run_iteration(now)
    }
}

impl<G: TxGenerator> Component for LoadGen<G> {
    fn run_iteration(&mut self, now: Nanos) -> bool {
        LoadGen::run_iteration(self, now)
    }
}

#[cfg(test)]
mod tests;
