//! One transaction as a client draws and submits it ([`TxCall`]), the
//! outcome of each of its attempts ([`AttemptOutcome`]), and the source of
//! transactions a load generator drives ([`TxGenerator`]): the client half of
//! a workload (`splitkv_bench::workload::Workload` is the whole, with its
//! procedures, load and check).

use crate::Nanos;
use splitkv_layout::host_nic::TxStatus;

/// Commit counters the load generator keeps, one per procedure id: a
/// workload registers at most `PROCEDURES_MAX - 1` procedures (ids
/// `0..PROCEDURES_MAX - 1`); the last counter is the built-in `Txn`'s
/// ([`crate::api::TXN_SLOT`]).
pub const PROCEDURES_MAX: usize = 16;

/// One transaction as a client submits it: a registered procedure and its
/// encoded arguments (at most `splitkv_layout::host_nic::ARGS_BYTES_MAX` bytes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct TxCall {
    /// Procedure id: a registered one (< [`PROCEDURES_MAX`] − 1), or the
    /// built-in `Txn`'s ([`crate::TXN_PROCEDURE_ID`]).
    pub procedure: u32,
    /// Encoded arguments.
    pub args: Vec<u8>,
}

/// One attempt's outcome, as the client saw it.
#[derive(Debug, Clone, Copy)]
pub struct AttemptOutcome<'a> {
    /// The transaction (the same call on every attempt).
    pub call: &'a TxCall,
    /// How the attempt ended.
    pub status: TxStatus,
    /// The procedure's result bytes (committed or user-aborted), or the node's
    /// reason (rejected).
    pub result: &'a [u8],
    /// When the attempt was submitted (the driver's clock, ns).
    pub invoked_ns: Nanos,
    /// When its outcome was taken from the ring (ns).
    pub completed_ns: Nanos,
    /// 1 for the first attempt, 2 for the first retry, ...
    pub attempt: u32,
    /// Whether this is the transaction's last attempt: it did not end in a
    /// conflict, or it did with no tries left (or the load generator stopped).
    pub last: bool,
    /// Which of the generator's draws this is: 0 for the first transaction
    /// [`TxGenerator::next`] drew on this client, 1 for the second, ...
    pub seq: u64,
}

/// A client's source of transactions. One per node's client, driven by the
/// load generator on that client's thread; deterministic given its seed.
pub trait TxGenerator: Send {
    /// Draws the next transaction into `call` (`call.args` is cleared before
    /// the call). Every random choice comes from the generator's own seeded
    /// source, so one seed reproduces the sequence.
    fn next(&mut self, call: &mut TxCall);

    /// Called for every attempt of every transaction this generator drew, in
    /// the order the outcomes arrive.
    fn on_outcome(&mut self, outcome: &AttemptOutcome<'_>);

    /// Called at the start of each of the load generator's iterations with
    /// its `now` (before outcomes are taken or transactions drawn), so a
    /// generator that records times can stamp completions taken in the
    /// previous iteration with a time no earlier than the real one.
    /// Default: nothing.
    fn on_iteration(&mut self, _now: Nanos) {}

    /// Told the load generator's measurement window
    /// ([`crate::loadgen::LoadGen::set_window`]), for a generator that keeps
    /// figures of its own (Smallbank through the `Txn` counts its
    /// transactions, each several calls). Default: nothing.
    fn set_window(&mut self, _from_ns: Nanos, _until_ns: Nanos) {}

    /// Whether the generator has nothing more to draw (its key space is used
    /// up): the load generator then stops drawing. Default: never.
    fn exhausted(&self) -> bool {
        false
    }

    /// Ends the run at `now` (after the cluster drained): a recording
    /// generator stamps what is left and declares transactions without an
    /// outcome indeterminate. Default: nothing.
    fn finish(&mut self, _now: Nanos) {}
}
