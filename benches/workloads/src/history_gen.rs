//! The history-recording generator: a [`TxGenerator`] over a
//! [`MicroOpSource`] (list-append or register micro-op transactions) that
//! records what its client saw as a Jepsen history (`splitkv_check::history`),
//! the input of the strict-serializability checker and of the lost-commit
//! accounting. It runs inside the ordinary closed-loop load generator
//! ([`crate::loadgen::LoadGen`]) on the one cluster path
//! (`splitkv_bench::cluster::BenchCluster`) or in an external client
//! process, with one attempt per transaction (`Workload::max_tries` is 1 for
//! the history workloads).
//!
//! [`HistoryGen`] has no threads, clocks or randomness of its own: the
//! workload's generator is seeded by its creator and times come from the load
//! generator's `now`. Each transaction in flight is a Jepsen process of its
//! own: a process is taken when a transaction is drawn and given back once
//! its completion is recorded, so a process never has two operations
//! outstanding; processes of client `c` are numbered from
//! `c * PROCESSES_PER_CLIENT_MAX`. It records
//!
//! - an `invoke` when it draws a transaction;
//! - its completion when the outcome arrives: `ok` with what the reads
//!   returned (decoded from the procedure's result), or `fail` with
//!   [`TxStatus::name`] as the error for every status other than committed;
//! - `info` for a [`TxStatus::Unknown`] outcome (the coordinator lost a
//!   replica after logging began: it may have committed) and for every
//!   transaction without an outcome when [`TxGenerator::finish`] ends the
//!   run (the client never learned whether it committed).
//!
//! **Times.** An invoke is stamped with the `now` of the load generator's
//! iteration that drew it ([`TxGenerator::on_iteration`]), read before the
//! submission (a transaction drawn while the ring is full is submitted
//! later, never earlier). A completion is stamped with the `now` of the
//! *next* iteration (or of `finish`), read after the outcome was taken from
//! the ring. So a recorded completion time is never earlier than the real one
//! and a recorded invoke time never later, and every real-time edge the
//! checker derives from the times ("T1 completed before T2 was invoked")
//! holds in fact. `now` must share its origin across the clients of one
//! history: virtual time in the simulator, nanoseconds since the cluster's
//! start on the local cluster.

use crate::list_append::codec::{ResultError, MICRO_OPS_PER_TX_MAX};
use crate::tx::{AttemptOutcome, TxCall, TxGenerator};
use crate::Nanos;
use hashbrown::HashMap;
use splitkv_check::history::{History, HistoryError, MicroOp, Op, OpType, ProcessId};
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::FixedState;
use std::io::BufWriter;
use std::path::Path;

/// Procedure id of the one transaction procedure of a history workload, as
/// registered in its node's registry (an external client resolves it by name:
/// [`crate::list_append::LIST_APPEND_PROCEDURE`],
/// [`crate::register::REGISTER_PROCEDURE`]).
pub const HISTORY_PROCEDURE: u32 = 0;

/// Micro-ops Elle's default generator draws per transaction at most
/// ([`TxShape::Mixed`]).
pub const MIXED_OPS_MAX: usize = 4;

const _: () = assert!(MIXED_OPS_MAX <= MICRO_OPS_PER_TX_MAX);

/// What the drawn transactions look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TxShape {
    /// Elle's default: 1–[`MIXED_OPS_MAX`] micro-ops, each a read or a
    /// write/append of a random active key with equal odds.
    Mixed,
    /// Write-skew shape: read two distinct keys, then write (append to) one of
    /// them. Two such transactions on the same pair form a read-write cycle
    /// (G2-item) unless read validation stops one: the shape the mutation test
    /// uses.
    WriteSkew,
    /// Dandelion §7's O(G,P) micro-benchmark: `gets` reads, then `puts`
    /// writes (appends, in list-append), every key of a transaction distinct
    /// and drawn uniformly. Built by [`TxShape::gets_puts`].
    GetsPuts {
        /// Reads per transaction.
        gets: u8,
        /// Writes per transaction.
        puts: u8,
    },
}

impl TxShape {
    /// Dandelion §7's O(`gets`,`puts`).
    ///
    /// # Errors
    /// [`WorkloadConfigError::OpsPerTx`] unless
    /// `1 <= gets + puts <= MICRO_OPS_PER_TX_MAX`.
    pub fn gets_puts(gets: u8, puts: u8) -> Result<TxShape, WorkloadConfigError> {
        let ops = gets as usize + puts as usize;
        if ops == 0 || ops > MICRO_OPS_PER_TX_MAX {
            return Err(WorkloadConfigError::OpsPerTx {
                gets,
                puts,
                max: MICRO_OPS_PER_TX_MAX,
            });
        }
        Ok(TxShape::GetsPuts { gets, puts })
    }

    /// Distinct keys one transaction needs: 2 for the write-skew shape, every
    /// micro-op's own key for O(G,P), 2 for Elle's mix (so that a workload
    /// has some contention to speak of).
    pub fn keys_min(self) -> u64 {
        match self {
            TxShape::Mixed | TxShape::WriteSkew => 2,
            TxShape::GetsPuts { gets, puts } => (gets as u64 + puts as u64).max(2),
        }
    }

    /// Checks the shape (an O(G,P) built without [`TxShape::gets_puts`]
    /// too) and that `keys` keys are enough for it.
    ///
    /// # Errors
    /// [`WorkloadConfigError::OpsPerTx`] as [`TxShape::gets_puts`];
    /// [`WorkloadConfigError::TooFewKeys`] if `keys < self.keys_min()`.
    pub fn check(self, keys: u64) -> Result<(), WorkloadConfigError> {
        if let TxShape::GetsPuts { gets, puts } = self {
            TxShape::gets_puts(gets, puts)?;
        }
        let min = self.keys_min();
        if keys < min {
            return Err(WorkloadConfigError::TooFewKeys { keys, min });
        }
        Ok(())
    }
}

/// `mixed`, `write-skew`, or Dandelion's `O(G,P)`.
impl std::fmt::Display for TxShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TxShape::Mixed => f.write_str("mixed"),
            TxShape::WriteSkew => f.write_str("write-skew"),
            TxShape::GetsPuts { gets, puts } => write!(f, "O({gets},{puts})"),
        }
    }
}

/// Why a workload's generator configuration is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadConfigError {
    /// Fewer keys than one transaction of the shape needs
    /// ([`TxShape::keys_min`]).
    #[error("{keys} keys: this workload's transactions need at least {min}")]
    TooFewKeys {
        /// Keys given.
        keys: u64,
        /// Keys needed.
        min: u64,
    },
    /// An O(G,P) shape with no micro-op or more than a transaction holds.
    #[error("{gets} gets and {puts} puts: a transaction holds 1 to {max} micro-ops")]
    OpsPerTx {
        /// Reads asked for.
        gets: u8,
        /// Writes asked for.
        puts: u8,
        /// [`MICRO_OPS_PER_TX_MAX`].
        max: usize,
    },
    /// More clients than appends a key may take, or none.
    #[error("{clients} clients: between 1 and {max} clients may share the keys")]
    Clients {
        /// Clients requested.
        clients: u64,
        /// The most allowed.
        max: u64,
    },
}

/// A source of micro-op transactions whose outcomes a [`HistoryGen`] records.
pub trait MicroOpSource: Send {
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

    /// The completion of a transaction whose call committed: what
    /// [`MicroOpSource::complete`] makes of its result, or
    /// [`Committed::NoEffect`] for a call that committed without the
    /// transaction taking effect (a one-shot `Txn` whose compare failed and
    /// whose failure branch only read, `splitkv_bench::register_txn`); the history
    /// then records a `fail`. The generator may learn from the result.
    /// Default: [`Committed::Done`] with [`MicroOpSource::complete`].
    fn committed(&mut self, invoked: &[MicroOp], result: &[u8]) -> Committed {
        Committed::Done(self.complete(invoked, result))
    }
}

/// What a committed call made of its transaction
/// ([`MicroOpSource::committed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    /// It took effect: the completed micro-ops, or why the result does not
    /// decode.
    Done(Result<Vec<MicroOp>, ResultError>),
    /// It took no effect (nothing written), for this reason: a `fail`.
    NoEffect(String),
}

impl<W: MicroOpSource + ?Sized> MicroOpSource for Box<W> {
    fn next_tx(&mut self, args: &mut Vec<u8>) -> Option<Vec<MicroOp>> {
        (**self).next_tx(args)
    }

    fn complete(&self, invoked: &[MicroOp], result: &[u8]) -> Result<Vec<MicroOp>, ResultError> {
        (**self).complete(invoked, result)
    }

    fn failed(&mut self, invoked: &[MicroOp]) {
        (**self).failed(invoked)
    }

    fn committed(&mut self, invoked: &[MicroOp], result: &[u8]) -> Committed {
        (**self).committed(invoked, result)
    }
}

/// Outcome counters of one history generator (or summed over several).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistoryStats {
    /// Transactions drawn (invokes recorded).
    pub submitted: u64,
    /// Committed (`ok`).
    pub committed: u64,
    /// Not committed, counted by [`TxStatus`] wire value (`fail`).
    pub failed: [u64; TxStatus::ALL.len()],
    /// Committed, but the result did not decode (recorded as `info`).
    pub bad_results: u64,
    /// Ended with [`TxStatus::Unknown`], or without an outcome when the run
    /// ended (recorded as `info`).
    pub indeterminate: u64,
}

impl HistoryStats {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &HistoryStats) {
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

    /// Transactions that failed, whatever the status.
    pub fn failed_total(&self) -> u64 {
        self.failed.iter().sum()
    }

    /// Conflict aborts (lock conflict or failed validation).
    pub fn conflicts(&self) -> u64 {
        self.failed_with(TxStatus::LockConflict) + self.failed_with(TxStatus::ValidationFailed)
    }

    /// Outcomes received or declared.
    pub fn finished(&self) -> u64 {
        self.committed + self.failed_total() + self.bad_results + self.indeterminate
    }
}

/// How a transaction ended, as its completion in a history says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Committed, its result decoded: `ok`.
    Committed,
    /// Committed, but its result did not decode: `info`.
    BadResult,
    /// It may have committed (an indeterminate status such as
    /// [`TxStatus::Unknown`], or an outcome the client never learned): `info`.
    Indeterminate,
    /// It did not commit, with this status: `fail`.
    Failed(TxStatus),
}

/// A transaction's completion as a history records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// How it ended, for the recorder's counters.
    pub ending: Ending,
    /// `ok`, `info` or `fail`.
    pub kind: OpType,
    /// The completed micro-ops (`ok`), or the invoked ones.
    pub value: Vec<MicroOp>,
    /// Why it is not `ok`.
    pub error: Option<String>,
}

/// The error of an `info` completion whose outcome the client never learned.
pub const OUTCOME_UNKNOWN: &str = "outcome unknown";

/// The completion of a transaction that invoked `invoked` and ended with
/// `status` (`None`: the client never learned its outcome): `ok` with the
/// micro-ops `complete` makes of a committed transaction's result; `info`
/// with the invoked micro-ops where that result does not decode, where the
/// status is indeterminate (it may have committed) and where the outcome is
/// unknown; `fail` with the status's name for every other status.
pub fn completion(
    invoked: Vec<MicroOp>,
    status: Option<TxStatus>,
    complete: impl FnOnce(&[MicroOp]) -> Result<Vec<MicroOp>, ResultError>,
) -> Completion {
    let (ending, kind, value, error) = match status {
        Some(TxStatus::Committed) => match complete(&invoked) {
            Ok(done) => (Ending::Committed, OpType::Ok, done, None),
            Err(e) => {
                let why = format!("committed, result undecodable: {e}");
                (Ending::BadResult, OpType::Info, invoked, Some(why))
            }
        },
        Some(s) if s.is_indeterminate() => {
            let why = s.name().to_owned();
            (Ending::Indeterminate, OpType::Info, invoked, Some(why))
        }
        Some(s) => {
            let why = s.name().to_owned();
            (Ending::Failed(s), OpType::Fail, invoked, Some(why))
        }
        None => {
            let why = OUTCOME_UNKNOWN.to_owned();
            (Ending::Indeterminate, OpType::Info, invoked, Some(why))
        }
    };
    Completion {
        ending,
        kind,
        value,
        error,
    }
}

/// Jepsen processes numbered per client: client `c`'s are
/// `c * PROCESSES_PER_CLIENT_MAX ..`; a client uses at most twice its
/// transactions in flight (a completion waits one iteration for its stamp).
pub const PROCESSES_PER_CLIENT_MAX: u64 = 1 << 20;

/// A transaction drawn and without a recorded completion yet.
#[derive(Debug)]
struct Outstanding {
    process: ProcessId,
    invoked: Vec<MicroOp>,
}

/// A completion taken from the ring, stamped at the next iteration.
#[derive(Debug)]
struct Unstamped {
    process: ProcessId,
    kind: OpType,
    value: Vec<MicroOp>,
    error: Option<String>,
}

/// The history-recording generator of one client (see the module docs).
pub struct HistoryGen<W: MicroOpSource> {
    workload: W,
    procedure: u32,
    process_base: ProcessId,
    processes_used: u64,
    free: Vec<ProcessId>,
    outstanding: HashMap<u64, Outstanding, FixedState>,
    next_seq: u64,
    now: Nanos,
    ahead: Option<(Vec<MicroOp>, Vec<u8>)>,
    unstamped: Vec<Unstamped>,
    ops: Vec<Op>,
    stats: HistoryStats,
}

impl<W: MicroOpSource> std::fmt::Debug for HistoryGen<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistoryGen")
            .field("process_base", &self.process_base)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<W: MicroOpSource> HistoryGen<W> {
    /// Client `client`'s recorder: its processes start at
    /// `client × PROCESSES_PER_CLIENT_MAX`, apart from every other client's.
    pub fn for_client(workload: W, procedure: u32, client: u16) -> HistoryGen<W> {
        HistoryGen::new(
            workload,
            procedure,
            client as u64 * PROCESSES_PER_CLIENT_MAX,
        )
    }

    /// A generator drawing `workload`'s transactions as calls of procedure
    /// `procedure`, recording them as Jepsen processes from `process_base`.
    pub fn new(workload: W, procedure: u32, process_base: ProcessId) -> HistoryGen<W> {
        let mut gen = HistoryGen {
            workload,
            procedure,
            process_base,
            processes_used: 0,
            free: Vec::new(),
            outstanding: HashMap::with_hasher(FixedState),
            next_seq: 0,
            now: 0,
            ahead: None,
            unstamped: Vec::new(),
            ops: Vec::new(),
            stats: HistoryStats::default(),
        };
        gen.draw_ahead();
        gen
    }

    /// Draws the next transaction now, so [`TxGenerator::exhausted`] knows
    /// whether there is one.
    fn draw_ahead(&mut self) {
        let mut args = Vec::with_capacity(crate::list_append::codec::TX_ARGS_BYTES_MAX);
        self.ahead = self.workload.next_tx(&mut args).map(|ops| (ops, args));
    }

    /// Counters so far.
    pub fn stats(&self) -> HistoryStats {
        self.stats
    }

    /// The operations recorded so far, in time order (complete once
    /// [`TxGenerator::finish`] ran).
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// Whether [`TxGenerator::finish`] left nothing unrecorded: every drawn
    /// transaction has its completion (or `info`) in [`HistoryGen::ops`].
    pub fn is_finished(&self) -> bool {
        self.outstanding.is_empty() && self.unstamped.is_empty()
    }

    /// The workload (its generator state).
    pub fn workload(&self) -> &W {
        &self.workload
    }

    fn record(
        &mut self,
        process: ProcessId,
        kind: OpType,
        value: Vec<MicroOp>,
        error: Option<String>,
    ) {
        self.ops.push(Op {
            index: self.ops.len() as u64,
            process,
            kind,
            value,
            time_ns: self.now,
            error,
        });
    }

    /// Records the completions taken in the previous iteration at `self.now`.
    fn stamp(&mut self) {
        for u in std::mem::take(&mut self.unstamped) {
            // The process is free again only once its completion is
            // recorded: a process never invokes before its last completion.
            self.free.push(u.process);
            self.record(u.process, u.kind, u.value, u.error);
        }
    }

    fn take_process(&mut self) -> ProcessId {
        self.free.pop().unwrap_or_else(|| {
            // Bounded by twice the load generator's window (module docs).
            let p = self.process_base + self.processes_used % PROCESSES_PER_CLIENT_MAX;
            self.processes_used += 1;
            p
        })
    }
}

impl<W: MicroOpSource> TxGenerator for HistoryGen<W> {
    fn next(&mut self, call: &mut TxCall) {
        call.procedure = self.procedure;
        let seq = self.next_seq;
        self.next_seq += 1;
        let Some((ops, args)) = self.ahead.take() else {
            // Drawn although `exhausted` said so (the load generator never
            // does): an empty call, which records nothing and the procedure
            // rejects.
            return;
        };
        call.args.extend_from_slice(&args);
        self.draw_ahead();
        let process = self.take_process();
        self.stats.submitted += 1;
        self.record(process, OpType::Invoke, ops.clone(), None);
        self.outstanding.insert(
            seq,
            Outstanding {
                process,
                invoked: ops,
            },
        );
    }

    fn on_outcome(&mut self, o: &AttemptOutcome<'_>) {
        // One attempt per transaction: its first outcome is its completion.
        let Some(tx) = self.outstanding.remove(&o.seq) else {
            return;
        };
        let c = match o.status {
            TxStatus::Committed => match self.workload.committed(&tx.invoked, o.result) {
                Committed::Done(done) => completion(tx.invoked, Some(o.status), |_| done),
                // Nothing written, by the transaction's own choice: a
                // `fail`, counted as a user abort.
                Committed::NoEffect(why) => Completion {
                    error: Some(why),
                    ..completion(tx.invoked, Some(TxStatus::UserAborted), |ops| {
                        Ok(ops.to_vec())
                    })
                },
            },
            status => completion(tx.invoked, Some(status), |ops| {
                self.workload.complete(ops, o.result)
            }),
        };
        match c.ending {
            Ending::Committed => self.stats.committed += 1,
            Ending::BadResult => self.stats.bad_results += 1,
            // It may have committed: `info`, and its writes are not given
            // back to the generator (they may be visible).
            Ending::Indeterminate => self.stats.indeterminate += 1,
            Ending::Failed(s) => {
                self.stats.failed[s as usize] += 1;
                self.workload.failed(&c.value);
            }
        }
        self.unstamped.push(Unstamped {
            process: tx.process,
            kind: c.kind,
            value: c.value,
            error: c.error,
        });
    }

    fn on_iteration(&mut self, now: Nanos) {
        self.now = self.now.max(now);
        self.stamp();
    }

    fn exhausted(&self) -> bool {
        self.ahead.is_none()
    }

    fn finish(&mut self, now: Nanos) {
        self.on_iteration(now);
        let mut left: Vec<(u64, Outstanding)> = self.outstanding.drain().collect();
        left.sort_by_key(|(seq, _)| *seq);
        for (_, o) in left {
            // Never learned: `completion` makes it `info`, indeterminate.
            let c = completion(o.invoked, None, |ops| Ok(ops.to_vec()));
            debug_assert_eq!(c.ending, Ending::Indeterminate);
            self.stats.indeterminate += 1;
            self.free.push(o.process);
            self.record(o.process, c.kind, c.value, c.error);
        }
    }
}

/// Writes `history` to `path` as JSON lines (Jepsen's shape, see
/// `splitkv_check::history`), replacing the file: what `--history FILE` calls.
///
/// # Errors
/// [`HistoryError::Io`] if the file cannot be created or written.
pub fn write_history(path: &Path, history: &History) -> Result<(), HistoryError> {
    let file = std::fs::File::create(path)?;
    history.write_jsonl(BufWriter::new(file))
}
