//! A closed-loop client that records what it saw as a Jepsen history
//! (`splitkv_sim::history`), the input of the strict-serializability checker
//! and of the lost-commit accounting.
//!
//! [`HistoryClient`] is a component (`run_iteration(now)`; no threads, clocks
//! or randomness of its own: the workload's generator is seeded by its
//! creator). It keeps up to `slots` transactions outstanding on its node's
//! [`Client`]; slot `i` is Jepsen process `process_base + i`, so each process
//! has at most one operation outstanding. It records
//!
//! - an `invoke` when it submits a transaction, at time `now`;
//! - its completion when the outcome arrives: `ok` with what the reads
//!   returned (decoded from the procedure's result), or `fail` with
//!   [`TxStatus::name`] as the error for every status other than committed;
//! - `info` for every transaction still outstanding when [`HistoryClient::finish`]
//!   ends the run (the client never learned whether it committed).
//!
//! **Times.** An invoke is stamped with the `now` of the iteration that
//! submits it, read before the submission. A completion is stamped with the
//! `now` of the *next* iteration (or of [`HistoryClient::finish`]), read after
//! the outcome was taken from the ring. So a recorded completion time is never
//! earlier than the real one and a recorded invoke time never later, and every
//! real-time edge the checker derives from the times ("T1 completed before T2
//! was invoked") holds in fact. `now` must share its origin across the clients
//! of one history: virtual time in the simulator, nanoseconds since the
//! cluster's start on the local cluster.
//!
//! A transaction drawn while the request ring is full is kept and submitted
//! first at the next chance, never discarded, so a seed reproduces the run.

use crate::list_append::codec::ResultError;
use hashbrown::HashMap;
use splitkv_host::{Client, ClientError};
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::FixedState;
use splitkv_nic::{Component, Nanos};
use splitkv_sim::history::{History, HistoryError, MicroOp, Op, OpType, ProcessId};
use std::io::BufWriter;
use std::path::Path;

/// Most outcomes taken from the ring per iteration.
pub const HISTORY_OUTCOMES_PER_ITERATION_MAX: usize = 256;

/// Most transactions one history client keeps outstanding (its processes).
pub const HISTORY_SLOTS_MAX: usize = 1024;

/// What the drawn transactions look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxShape {
    /// Elle's default: 1–4 micro-ops, each a read or a write/append of a
    /// random active key with equal odds.
    Mixed,
    /// Write-skew shape: read two distinct keys, then write (append to) one of
    /// them. Two such transactions on the same pair form a read-write cycle
    /// (G2-item) unless read validation stops one: the shape the mutation test
    /// uses.
    WriteSkew,
}

/// Why a workload's generator configuration is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadConfigError {
    /// Fewer than two keys (the write-skew shape needs two).
    #[error("{0} keys: a history workload needs at least 2")]
    TooFewKeys(u64),
    /// More clients than appends a key may take, or none.
    #[error("{clients} clients: between 1 and {max} clients may share the keys")]
    Clients {
        /// Clients requested.
        clients: u64,
        /// The most allowed.
        max: u64,
    },
}

/// A workload whose transactions a [`HistoryClient`] submits and records.
pub trait HistoryWorkload: Send {
    /// Draws the next transaction: its micro-ops (reads carry `None`), with its
    /// procedure arguments encoded into `args` (cleared first). `None` when the
    /// generator has nothing more to draw (its key space is used up).
    fn next_tx(&mut self, args: &mut Vec<u8>) -> Option<Vec<MicroOp>>;

    /// The micro-ops of a committed transaction as it completed: `invoked`
    /// with every read's value decoded from the procedure's `result`.
    ///
    /// # Errors
    /// [`ResultError`] if the result does not match the micro-ops.
    fn complete(&self, invoked: &[MicroOp], result: &[u8]) -> Result<Vec<MicroOp>, ResultError>;

    /// Told that a transaction it drew certainly did not commit (`fail`), so
    /// its writes will never be visible: a generator that bounds the writes
    /// per key may count them back. Default: nothing.
    fn failed(&mut self, _invoked: &[MicroOp]) {}
}

impl<W: HistoryWorkload + ?Sized> HistoryWorkload for Box<W> {
    fn next_tx(&mut self, args: &mut Vec<u8>) -> Option<Vec<MicroOp>> {
        (**self).next_tx(args)
    }

    fn complete(&self, invoked: &[MicroOp], result: &[u8]) -> Result<Vec<MicroOp>, ResultError> {
        (**self).complete(invoked, result)
    }

    fn failed(&mut self, invoked: &[MicroOp]) {
        (**self).failed(invoked)
    }
}

/// Outcome counters of one history client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistoryClientStats {
    /// Transactions submitted (invokes recorded).
    pub submitted: u64,
    /// Committed (`ok`).
    pub committed: u64,
    /// Not committed, counted by [`TxStatus`] wire value (`fail`).
    pub failed: [u64; TxStatus::ALL.len()],
    /// Committed, but the result did not decode (recorded as `info`).
    pub bad_results: u64,
    /// Outstanding when the run ended (recorded as `info`).
    pub indeterminate: u64,
}

impl HistoryClientStats {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &HistoryClientStats) {
        self.submitted += o.submitted;
        self.committed += o.committed;
        for (a, b) in self.failed.iter_mut().zip(o.failed) {
            *a += b;
        }
        self.bad_results += o.bad_results;
        self.indeterminate += o.indeterminate;
    }

    /// Transactions that failed with `status`.
    pub fn failed_with(&self, status: TxStatus) -> u64 {
        self.failed[status as usize]
    }

    /// Conflict aborts (lock conflict or failed validation).
    pub fn conflicts(&self) -> u64 {
        self.failed_with(TxStatus::LockConflict) + self.failed_with(TxStatus::ValidationFailed)
    }

    /// Outcomes received or declared.
    pub fn finished(&self) -> u64 {
        self.committed + self.failed.iter().sum::<u64>() + self.bad_results + self.indeterminate
    }
}

/// A transaction submitted and not yet completed.
#[derive(Debug)]
struct Outstanding {
    req_id: u64,
    invoked: Vec<MicroOp>,
}

/// A completion taken from the ring, stamped at the next iteration.
#[derive(Debug)]
struct Unstamped {
    slot: usize,
    kind: OpType,
    value: Vec<MicroOp>,
    error: Option<String>,
}

/// The history-recording client of one node (see the module docs).
pub struct HistoryClient<W: HistoryWorkload> {
    client: Client,
    workload: W,
    procedure: u32,
    process_base: ProcessId,
    slots: Vec<Option<Outstanding>>,
    free: Vec<usize>,
    by_req: HashMap<u64, usize, FixedState>,
    held: Option<Vec<MicroOp>>,
    args: Vec<u8>,
    next_req: u64,
    budget: Option<u64>,
    submitting: bool,
    exhausted: bool,
    unstamped: Vec<Unstamped>,
    ops: Vec<Op>,
    stats: HistoryClientStats,
    error: Option<ClientError>,
}

impl<W: HistoryWorkload> std::fmt::Debug for HistoryClient<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistoryClient")
            .field("process_base", &self.process_base)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<W: HistoryWorkload> HistoryClient<W> {
    /// A client submitting `workload`'s transactions as procedure `procedure`
    /// through `client`, with `slots` transactions outstanding at most (Jepsen
    /// processes `process_base .. process_base + slots`). `budget` caps the
    /// transactions submitted (`None`: until [`HistoryClient::stop`]).
    ///
    /// # Panics
    /// If `slots` is 0 or over [`HISTORY_SLOTS_MAX`] (a configuration bug).
    pub fn new(
        client: Client,
        workload: W,
        procedure: u32,
        process_base: ProcessId,
        slots: usize,
        budget: Option<u64>,
    ) -> HistoryClient<W> {
        assert!(
            (1..=HISTORY_SLOTS_MAX).contains(&slots),
            "history client slots must be in 1..={HISTORY_SLOTS_MAX}"
        );
        HistoryClient {
            client,
            workload,
            procedure,
            process_base,
            slots: (0..slots).map(|_| None).collect(),
            free: (0..slots).rev().collect(),
            by_req: HashMap::with_capacity_and_hasher(slots, FixedState),
            held: None,
            args: Vec::with_capacity(crate::list_append::codec::TX_ARGS_BYTES_MAX),
            next_req: 0,
            budget,
            submitting: true,
            exhausted: false,
            unstamped: Vec::new(),
            ops: Vec::new(),
            stats: HistoryClientStats::default(),
            error: None,
        }
    }

    /// Stops submitting new transactions (outstanding ones still complete).
    pub fn stop(&mut self) {
        self.submitting = false;
    }

    /// Whether nothing is outstanding and nothing more will be submitted
    /// (stopped, budget spent, generator exhausted, or a client error).
    pub fn is_done(&self) -> bool {
        self.by_req.is_empty() && !self.may_submit()
    }

    fn may_submit(&self) -> bool {
        self.submitting
            && !self.exhausted
            && self.error.is_none()
            && self.budget.is_none_or(|b| self.stats.submitted < b)
    }

    /// Counters so far.
    pub fn stats(&self) -> HistoryClientStats {
        self.stats
    }

    /// The first client error seen, if any (the client stops submitting).
    pub fn error(&self) -> Option<&ClientError> {
        self.error.as_ref()
    }

    /// Whether the generator ran out of transactions before the budget.
    pub fn exhausted(&self) -> bool {
        self.exhausted
    }

    /// The workload (its generator state).
    pub fn workload(&self) -> &W {
        &self.workload
    }

    /// Ends the run at `now`: stamps the completions taken last iteration,
    /// records `info` for every transaction still outstanding, stops
    /// submitting, and returns this client's operations in time order.
    pub fn finish(&mut self, now: Nanos) -> Vec<Op> {
        self.stop();
        self.stamp(now);
        for slot in 0..self.slots.len() {
            if let Some(o) = self.slots[slot].take() {
                self.by_req.remove(&o.req_id);
                self.free.push(slot);
                self.stats.indeterminate += 1;
                self.record(now, slot, OpType::Info, o.invoked, Some("outcome unknown"));
            }
        }
        std::mem::take(&mut self.ops)
    }

    fn record(
        &mut self,
        now: Nanos,
        slot: usize,
        kind: OpType,
        value: Vec<MicroOp>,
        error: Option<&str>,
    ) {
        self.ops.push(Op {
            index: self.ops.len() as u64,
            process: self.process_base + slot as u64,
            kind,
            value,
            time_ns: now,
            error: error.map(str::to_owned),
        });
    }

    /// Records the completions taken in the previous iteration at `now`.
    fn stamp(&mut self, now: Nanos) {
        for u in std::mem::take(&mut self.unstamped) {
            // The slot's process is free again only once its completion is
            // recorded: a process never invokes before its last completion.
            self.free.push(u.slot);
            self.ops.push(Op {
                index: self.ops.len() as u64,
                process: self.process_base + u.slot as u64,
                kind: u.kind,
                value: u.value,
                time_ns: now,
                error: u.error,
            });
        }
    }

    /// Takes outcomes from the ring; their completions wait for the next stamp.
    fn poll_outcomes(&mut self) -> Result<usize, ClientError> {
        let Self {
            client,
            workload,
            slots,
            by_req,
            unstamped,
            stats,
            ..
        } = self;
        client.poll(HISTORY_OUTCOMES_PER_ITERATION_MAX, |o| {
            let Some(slot) = by_req.remove(&o.req_id) else {
                return;
            };
            let tx = slots[slot].take().expect("an outstanding slot per request");
            let (kind, value, error) = match o.status {
                TxStatus::Committed => match workload.complete(&tx.invoked, o.result) {
                    Ok(done) => {
                        stats.committed += 1;
                        (OpType::Ok, done, None)
                    }
                    Err(e) => {
                        stats.bad_results += 1;
                        let why = format!("committed, result undecodable: {e}");
                        (OpType::Info, tx.invoked, Some(why))
                    }
                },
                s => {
                    stats.failed[s as usize] += 1;
                    workload.failed(&tx.invoked);
                    (OpType::Fail, tx.invoked, Some(s.name().to_owned()))
                }
            };
            unstamped.push(Unstamped {
                slot,
                kind,
                value,
                error,
            });
        })
    }

    /// Submits transactions into free slots, the held one first.
    fn submit(&mut self, now: Nanos) -> bool {
        let mut work = false;
        while self.may_submit() && !self.free.is_empty() {
            let ops = match self.held.take() {
                Some(ops) => ops,
                None => match self.workload.next_tx(&mut self.args) {
                    Some(ops) => ops,
                    None => {
                        self.exhausted = true;
                        break;
                    }
                },
            };
            let req_id = self.next_req;
            match self.client.submit(req_id, self.procedure, &self.args) {
                Ok(()) => {}
                Err(ClientError::Busy) => {
                    self.held = Some(ops);
                    break;
                }
                Err(e) => {
                    self.error = Some(e);
                    break;
                }
            }
            self.next_req += 1;
            self.stats.submitted += 1;
            let slot = self.free.pop().expect("checked non-empty");
            self.by_req.insert(req_id, slot);
            self.record(now, slot, OpType::Invoke, ops.clone(), None);
            self.slots[slot] = Some(Outstanding {
                req_id,
                invoked: ops,
            });
            work = true;
        }
        work
    }

    /// Stamps last iteration's completions, takes new outcomes, then fills
    /// free slots; returns whether anything happened.
    pub fn run_iteration(&mut self, now: Nanos) -> bool {
        let stamped = !self.unstamped.is_empty();
        self.stamp(now);
        if self.error.is_some() {
            return stamped;
        }
        let polled = match self.poll_outcomes() {
            Ok(n) => n > 0,
            Err(e) => {
                self.error = Some(e);
                return stamped;
            }
        };
        let submitted = self.submit(now);
        stamped || polled || submitted
    }
}

impl<W: HistoryWorkload> Component for HistoryClient<W> {
    fn run_iteration(&mut self, now: Nanos) -> bool {
        HistoryClient::run_iteration(self, now)
    }
}

/// Writes `history` to `path` as JSON lines (Jepsen's shape, see
/// `splitkv_sim::history`), replacing the file: what `--history FILE` calls.
///
/// # Errors
/// [`HistoryError::Io`] if the file cannot be created or written.
pub fn write_history(path: &Path, history: &History) -> Result<(), HistoryError> {
    let file = std::fs::File::create(path)?;
    history.write_jsonl(BufWriter::new(file))
}

#[cfg(test)]
mod tests;
