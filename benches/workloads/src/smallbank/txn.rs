//! Smallbank through the one-shot `Txn` (etcd's shape,
//! `splitkv_layout::app::txn`), as an etcd user would write it, with no
//! Smallbank code in the node:
//!
//! 1. a **read `Txn`**: no compares, the success branch gets every row the
//!    transaction touches ([`rows_read`]);
//! 2. the client computes the new balances with the procedures' own
//!    semantics ([`decide`]): a user abort (SendPayment's insufficient funds)
//!    ends the transaction here, and a Balance ends committed with its total;
//! 3. a **write `Txn`**: one compare per row read (its version equals the
//!    version read), the success branch puts the new balances, the failure
//!    branch gets every row read again;
//! 4. if a compare failed (the failure branch committed: a concurrent
//!    transaction wrote a row since the read), the failure branch's gets are
//!    the fresh read the transaction starts over from (step 2), at most
//!    [`COMPARE_RETRIES_MAX`] times; each such retry is counted
//!    ([`TxnFigures::compare_retries`]).
//!
//! The write `Txn` commits its success branch only if no row it read changed,
//! so the transaction is serialized at the write `Txn` (optimistic
//! concurrency on the client, as etcd's `concurrency.STM` does). Money is
//! accounted from committed success branches of write `Txn`s only; a write
//! `Txn` of unknown outcome may have created its delta (the money check's
//! unknown range).
//!
//! [`SmallbankTxnClient`] is a state machine per transaction driven by the
//! load generator through [`crate::tx::TxGenerator`]: each call of
//! `next` is one `Txn` (a queued continuation first, else a new
//! transaction's read), and conflict retries of one `Txn` are the load
//! generator's (the same `Txn` again, its compares re-checked).

use super::effect::{decide, rows_read, Declined, Effect};
use super::{Args, TxType, MIX};
use crate::tx::{AttemptOutcome, TxCall};
use crate::Nanos;
use crate::TXN_PROCEDURE_ID;
use hashbrown::HashMap;
use hdrhistogram::Histogram;
use splitkv_layout::app::txn::{Branch, CmpOp, Compare, Condition, GetResult, Op, Txn, TxnResult};
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::{FixedState, Key};
use std::collections::VecDeque;

/// Most compare-failed retries of one transaction before it gives up.
pub const COMPARE_RETRIES_MAX: u32 = 100;

/// What the Smallbank transactions (not their `Txn`s) did: the figures a
/// report puts beside the shipped procedures'.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TxnFigures {
    /// Transactions started (read `Txn`s drawn).
    pub started: u64,
    /// Committed: a write `Txn`'s success branch, or a Balance's read.
    pub committed: u64,
    /// Aborted by Smallbank's own rules, decided on the values read.
    pub user_aborted: u64,
    /// Write `Txn`s whose compare failed (the failure branch committed) and
    /// that started over from the values it read.
    pub compare_retries: u64,
    /// Gave up after [`COMPARE_RETRIES_MAX`] compare-failed retries or a `Txn`
    /// that kept conflicting.
    pub gave_up: u64,
    /// Ended any other way (a `Txn` rejected, the node unavailable, an
    /// undecodable result).
    pub failed: u64,
    /// A write `Txn` of unknown outcome.
    pub unknown: u64,
    /// Committed, by type (`TxType as usize`).
    pub committed_by_type: [u64; MIX.len()],
}

impl TxnFigures {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &TxnFigures) {
        self.started += o.started;
        self.committed += o.committed;
        self.user_aborted += o.user_aborted;
        self.compare_retries += o.compare_retries;
        self.gave_up += o.gave_up;
        self.failed += o.failed;
        self.unknown += o.unknown;
        for (a, b) in self.committed_by_type.iter_mut().zip(o.committed_by_type) {
            *a += b;
        }
    }

    /// Committed plus user-aborted (the shipped figures' "completed").
    pub fn completed(&self) -> u64 {
        self.committed + self.user_aborted
    }
}

/// The money side of the client (what the money check needs), kept by the
/// Smallbank generator for both apis.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MoneyBook {
    /// Created by committed transactions (cents).
    pub(crate) created: i64,
    /// Range of money transactions of unknown outcome may have created.
    pub(crate) unknown: (i64, i64),
    /// Range of money transactions without a last outcome may create.
    pub(crate) outstanding: (i64, i64),
    /// Committed Balances.
    pub(crate) balance_reads: u64,
    /// Sum of their totals (cents).
    pub(crate) balance_total_sum: i64,
}

/// Where a transaction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Its read `Txn` is drawn.
    Read,
    /// Its write `Txn` (creating `delta` cents if it commits) is queued or drawn.
    Write { delta: i64 },
}

#[derive(Debug)]
struct Tx {
    t: TxType,
    x: Args,
    phase: Phase,
    start_ns: Nanos,
    compare_retries: u32,
}

/// How a transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Committed,
    UserAborted,
    GaveUp,
    Failed,
    Unknown,
}

/// One client's Smallbank-through-`Txn` state machine (module docs).
pub struct SmallbankTxnClient {
    txs: HashMap<u64, Tx, FixedState>,
    /// Load generator draw sequence number → transaction id.
    by_seq: HashMap<u64, u64, FixedState>,
    /// Write `Txn`s ready to be drawn: (transaction id, encoded `Txn`).
    queue: VecDeque<(u64, Vec<u8>)>,
    next_seq: u64,
    next_tx: u64,
    now: Nanos,
    window: (Nanos, Nanos),
    all: TxnFigures,
    in_window: TxnFigures,
    latency_ns: Histogram<u64>,
    version_compares: bool,
}

impl std::fmt::Debug for SmallbankTxnClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmallbankTxnClient")
            .field("all", &self.all)
            .finish_non_exhaustive()
    }
}

impl Default for SmallbankTxnClient {
    fn default() -> Self {
        SmallbankTxnClient::new()
    }
}

/// Appends the read `Txn` of `rows` (gets, no compares) to `out`.
fn read_txn(rows: &[Key], out: &mut Vec<u8>) {
    let gets: Vec<Op<'_>> = rows.iter().map(|&k| Op::Get(k)).collect();
    Txn::encode(&[], &gets, &[], out).expect("at most 3 gets: within every Txn bound");
}

/// Appends the write `Txn` of `effect` over the rows read at `versions` to
/// `out` (module docs, step 3); without `compare`, no compares (the mutation
/// a test uses to show the money check failing).
fn write_txn(rows: &[(Key, u64)], effect: &Effect, compare: bool, out: &mut Vec<u8>) {
    let compares: Vec<Compare<'_>> = rows
        .iter()
        .filter(|_| compare)
        .map(|&(key, version)| Compare {
            key,
            condition: Condition::Version {
                op: CmpOp::Equal,
                operand: version,
            },
        })
        .collect();
    let values: Vec<(Key, [u8; 8])> = effect
        .writes()
        .iter()
        .map(|(k, v)| (*k, v.to_le_bytes()))
        .collect();
    let puts: Vec<Op<'_>> = values
        .iter()
        .map(|(key, v)| Op::Put {
            key: *key,
            value: v,
        })
        .collect();
    let gets: Vec<Op<'_>> = rows.iter().map(|&(k, _)| Op::Get(k)).collect();
    Txn::encode(&compares, &puts, &gets, out)
        .expect("at most 3 rows and 8-byte values: within every Txn bound");
}

/// The rows and balances a read (or a failure branch) returned, in the
/// order of `rows`; `None` if a row is missing or not a balance.
fn balances(rows: &[Key], r: &TxnResult<'_>) -> Option<Vec<(Key, u64, i64)>> {
    if r.get_count() != rows.len() {
        return None;
    }
    rows.iter()
        .zip(r.gets())
        .map(|(k, g)| match g {
            GetResult::Found { version, value } => {
                Some((*k, version, i64::from_le_bytes(value.try_into().ok()?)))
            }
            GetResult::NotFound => None,
        })
        .collect()
}

impl SmallbankTxnClient {
    /// A client with no transaction in flight.
    pub fn new() -> SmallbankTxnClient {
        SmallbankTxnClient {
            txs: HashMap::with_hasher(FixedState),
            by_seq: HashMap::with_hasher(FixedState),
            queue: VecDeque::new(),
            next_seq: 0,
            next_tx: 0,
            now: 0,
            window: (0, Nanos::MAX),
            all: TxnFigures::default(),
            in_window: TxnFigures::default(),
            latency_ns: Histogram::new_with_bounds(1, 60_000_000_000, 3)
                .expect("valid histogram bounds"),
            version_compares: true,
        }
    }

    /// A mutation for tests: write `Txn`s without their version compares, so
    /// a concurrent write between a transaction's read and its write is lost
    /// (the money check must then fail under contention).
    #[doc(hidden)]
    pub fn without_version_compares(&mut self) {
        self.version_compares = false;
    }

    /// Figures over every transaction that ended.
    pub fn figures(&self) -> TxnFigures {
        self.all
    }

    /// Figures over the transactions that ended within the window.
    pub fn window_figures(&self) -> TxnFigures {
        self.in_window
    }

    /// Latency (ns, the read `Txn`'s draw to the transaction's commit) of the
    /// transactions committed within the window.
    pub fn latency_ns(&self) -> &Histogram<u64> {
        &self.latency_ns
    }

    /// Counts into the window figures only transactions that end at
    /// `from_ns <= now < until_ns`.
    pub fn set_window(&mut self, from_ns: Nanos, until_ns: Nanos) {
        self.window = (from_ns, until_ns);
    }

    /// Records the load generator's `now` (stamps transactions' starts).
    pub fn on_iteration(&mut self, now: Nanos) {
        self.now = self.now.max(now);
    }

    /// Draws the next `Txn` into `call`: a queued write `Txn` first, else the
    /// read `Txn` of a new transaction `draw()` returns.
    pub fn next(&mut self, call: &mut TxCall, draw: impl FnOnce() -> (TxType, Args)) {
        let seq = self.next_seq;
        self.next_seq += 1;
        call.procedure = TXN_PROCEDURE_ID;
        call.args.clear();
        if let Some((id, txn)) = self.queue.pop_front() {
            call.args.extend_from_slice(&txn);
            self.by_seq.insert(seq, id);
            return;
        }
        let (t, x) = draw();
        let (rows, n) = rows_read(t, &x);
        read_txn(&rows[..n], &mut call.args);
        let id = self.next_tx;
        self.next_tx += 1;
        self.all.started += 1;
        let tx = Tx {
            t,
            x,
            phase: Phase::Read,
            start_ns: self.now,
            compare_retries: 0,
        };
        self.txs.insert(id, tx);
        self.by_seq.insert(seq, id);
    }

    /// Takes one `Txn` attempt's outcome; acts on the last attempt only
    /// (earlier ones conflicted and the load generator retries them).
    pub(crate) fn on_outcome(&mut self, o: &AttemptOutcome<'_>, money: &mut MoneyBook) {
        if !o.last {
            return;
        }
        let Some(id) = self.by_seq.remove(&o.seq) else {
            return;
        };
        let Some(tx) = self.txs.get_mut(&id) else {
            return;
        };
        let end = match (tx.phase, o.status) {
            (_, TxStatus::Committed) => match TxnResult::decode(o.result) {
                Ok(r) => self.on_committed(id, &r, money),
                Err(_) => self.on_undecodable(id, money),
            },
            (Phase::Write { delta }, s) if s.is_indeterminate() => {
                money.unknown.0 += delta.min(0);
                money.unknown.1 += delta.max(0);
                Some(End::Unknown)
            }
            (_, s) if s.is_conflict() => Some(End::GaveUp),
            _ => Some(End::Failed),
        };
        if let Some(end) = end {
            self.end(id, end, o.completed_ns, money);
        }
    }

    /// A committed `Txn` of transaction `id`; `None` if the transaction goes on.
    fn on_committed(&mut self, id: u64, r: &TxnResult<'_>, money: &mut MoneyBook) -> Option<End> {
        let tx = self.txs.get_mut(&id)?;
        if let Phase::Write { delta } = tx.phase {
            if r.branch() == Branch::Success {
                money.created += delta;
                return Some(End::Committed);
            }
            tx.compare_retries += 1;
            self.all.compare_retries += 1;
            if (self.window.0..self.window.1).contains(&self.now) {
                self.in_window.compare_retries += 1;
            }
            if tx.compare_retries > COMPARE_RETRIES_MAX {
                return Some(End::GaveUp);
            }
        }
        let (t, x) = (tx.t, tx.x);
        let (rows, n) = rows_read(t, &x);
        let Some(read) = balances(&rows[..n], r) else {
            return Some(End::UserAborted);
        };
        let bal = |k: &Key| {
            let row = read.iter().find(|r| r.0 == *k).ok_or(Declined)?;
            Ok(row.2)
        };
        let Ok(effect) = decide(t, &x, bal) else {
            return Some(End::UserAborted);
        };
        if t == TxType::Balance {
            money.balance_reads += 1;
            money.balance_total_sum += effect.aux;
            return Some(End::Committed);
        }
        let versions: Vec<(Key, u64)> = read.iter().map(|r| (r.0, r.1)).collect();
        let mut txn = Vec::new();
        write_txn(&versions, &effect, self.version_compares, &mut txn);
        if let Phase::Write { delta } = tx.phase {
            money.outstanding.0 -= delta.min(0);
            money.outstanding.1 -= delta.max(0);
        }
        money.outstanding.0 += effect.delta.min(0);
        money.outstanding.1 += effect.delta.max(0);
        tx.phase = Phase::Write {
            delta: effect.delta,
        };
        self.queue.push_back((id, txn));
        None
    }

    /// A committed `Txn` whose result does not decode: a write may have
    /// created its delta.
    fn on_undecodable(&mut self, id: u64, money: &mut MoneyBook) -> Option<End> {
        if let Phase::Write { delta } = self.txs.get(&id)?.phase {
            money.unknown.0 += delta.min(0);
            money.unknown.1 += delta.max(0);
        }
        Some(End::Failed)
    }

    fn end(&mut self, id: u64, end: End, now: Nanos, money: &mut MoneyBook) {
        let Some(tx) = self.txs.remove(&id) else {
            return;
        };
        if let Phase::Write { delta } = tx.phase {
            money.outstanding.0 -= delta.min(0);
            money.outstanding.1 -= delta.max(0);
        }
        let in_window = (self.window.0..self.window.1).contains(&now);
        for f in [
            Some(&mut self.all),
            in_window.then_some(&mut self.in_window),
        ]
        .into_iter()
        .flatten()
        {
            match end {
                End::Committed => {
                    f.committed += 1;
                    f.committed_by_type[tx.t as usize] += 1;
                }
                End::UserAborted => f.user_aborted += 1,
                End::GaveUp => f.gave_up += 1,
                End::Failed => f.failed += 1,
                End::Unknown => f.unknown += 1,
            }
        }
        if in_window && end == End::Committed {
            let _ = self
                .latency_ns
                .record(now.saturating_sub(tx.start_ns).max(1));
        }
    }

    /// Ends the run: transactions whose write `Txn` was queued but never drawn
    /// did not commit (their range leaves the outstanding money); those with
    /// a write `Txn` drawn stay outstanding (the generator's `finish` makes
    /// them unknown).
    pub(crate) fn finish(&mut self, money: &mut MoneyBook) {
        for (id, _) in std::mem::take(&mut self.queue) {
            if let Some(Tx {
                phase: Phase::Write { delta },
                ..
            }) = self.txs.remove(&id)
            {
                money.outstanding.0 -= delta.min(0);
                money.outstanding.1 -= delta.max(0);
            }
        }
    }
}

#[cfg(test)]
mod tests;
