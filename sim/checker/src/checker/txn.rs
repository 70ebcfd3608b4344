//! Pairing: each process's `invoke` with its completion, giving one
//! [`Txn`] per transaction with its [`HistoryOutcome`]. A malformed history (a
//! completion without an invoke, two outstanding invokes on one process, a
//! completion whose micro-ops do not match its invoke's, time running
//! backwards) is a [`CheckError`], never a panic.

use crate::history::{History, MicroOp, OpType, ProcessId};
use std::collections::HashMap;

/// What the client learned about a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HistoryOutcome {
    /// `ok`: committed; its reads carry the values they returned.
    Committed,
    /// `fail`: certainly never committed.
    Failed,
    /// `info`, or an invoke with no completion: may or may not have committed.
    Indeterminate,
}

impl HistoryOutcome {
    /// The Jepsen name of the completion: `ok`, `fail`, `info`.
    pub fn name(self) -> &'static str {
        match self {
            HistoryOutcome::Committed => "ok",
            HistoryOutcome::Failed => "fail",
            HistoryOutcome::Indeterminate => "info",
        }
    }
}

/// One transaction: an invoke paired with its completion (if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Txn {
    /// The client process that issued it.
    pub process: ProcessId,
    /// History `index` of the invoke.
    pub invoke_index: u64,
    /// History `index` of the completion; `None` if the history ends first.
    pub complete_index: Option<u64>,
    /// What the client learned.
    pub outcome: HistoryOutcome,
    /// The micro-ops: the completion's for `ok` (reads carry their values),
    /// the invoke's otherwise (reads unknown).
    pub ops: Vec<MicroOp>,
    /// Invoke time, nanoseconds from the history's origin.
    pub invoke_ns: u64,
    /// Completion time; `None` with no completion.
    pub complete_ns: Option<u64>,
}

/// Why a history cannot be checked: it is malformed, or does not meet the
/// workload's preconditions (unique elements, one data model).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// A completion arrived on a process with no outstanding invoke.
    #[error(
        "history index {index}: {kind} completion on process {process} with no outstanding invoke"
    )]
    CompletionWithoutInvoke {
        /// History index of the completion.
        index: u64,
        /// Its process.
        process: ProcessId,
        /// `ok`, `fail` or `info`.
        kind: &'static str,
    },
    /// An invoke arrived on a process that already had one outstanding.
    #[error("history index {index}: invoke on process {process}, which still has invoke {outstanding} outstanding")]
    InvokeWhileOutstanding {
        /// History index of the second invoke.
        index: u64,
        /// Its process.
        process: ProcessId,
        /// History index of the invoke still outstanding.
        outstanding: u64,
    },
    /// A completion's micro-ops are not its invoke's (other functions, keys or
    /// written values).
    #[error("completion {completion} does not match invoke {invoke}: {why}")]
    CompletionMismatch {
        /// History index of the invoke.
        invoke: u64,
        /// History index of the completion.
        completion: u64,
        /// What differs.
        why: String,
    },
    /// A completion's time is before its invoke's.
    #[error("completion {completion} at {complete_ns} ns is before its invoke {invoke} at {invoke_ns} ns")]
    TimeBackwards {
        /// History index of the invoke.
        invoke: u64,
        /// History index of the completion.
        completion: u64,
        /// Invoke time.
        invoke_ns: u64,
        /// Completion time.
        complete_ns: u64,
    },
    /// A micro-op does not belong to the checked data model (an append or a
    /// list read in a register history, or the reverse).
    #[error("history index {index}: {why}")]
    WrongModel {
        /// History index of the operation.
        index: u64,
        /// What does not fit.
        why: String,
    },
    /// The history holds more than [`TXNS_MAX`] transactions.
    #[error("more than {max} transactions in one history")]
    TooManyTransactions {
        /// The bound, [`TXNS_MAX`].
        max: usize,
    },
    /// The same element (list-append) or value (register) is written twice to
    /// one key: the workload's uniqueness precondition does not hold.
    #[error("key {key}: value {value} written by both invoke {first} and invoke {second}")]
    NotUnique {
        /// The key.
        key: u64,
        /// The repeated element or value.
        value: u64,
        /// Invoke index of the first writer.
        first: u64,
        /// Invoke index of the second writer.
        second: u64,
    },
}

/// Most transactions in one checked history (graph nodes are `u32`).
pub const TXNS_MAX: usize = u32::MAX as usize - 1;

/// Pairs every invoke with its process's next completion. Transactions come
/// out in invoke order. Errors: [`CheckError::CompletionWithoutInvoke`],
/// [`CheckError::InvokeWhileOutstanding`], [`CheckError::CompletionMismatch`],
/// [`CheckError::TimeBackwards`], [`CheckError::TooManyTransactions`].
pub fn pair(history: &History) -> Result<Vec<Txn>, CheckError> {
    let mut txns: Vec<Txn> = Vec::new();
    let mut outstanding: HashMap<ProcessId, usize> = HashMap::new();
    for op in &history.ops {
        if op.kind == OpType::Invoke {
            if let Some(&t) = outstanding.get(&op.process) {
                return Err(CheckError::InvokeWhileOutstanding {
                    index: op.index,
                    process: op.process,
                    outstanding: txns[t].invoke_index,
                });
            }
            if txns.len() >= TXNS_MAX {
                return Err(CheckError::TooManyTransactions { max: TXNS_MAX });
            }
            outstanding.insert(op.process, txns.len());
            txns.push(Txn {
                process: op.process,
                invoke_index: op.index,
                complete_index: None,
                outcome: HistoryOutcome::Indeterminate,
                ops: op.value.clone(),
                invoke_ns: op.time_ns,
                complete_ns: None,
            });
            continue;
        }
        let Some(t) = outstanding.remove(&op.process) else {
            return Err(CheckError::CompletionWithoutInvoke {
                index: op.index,
                process: op.process,
                kind: op.kind.name(),
            });
        };
        let txn = &mut txns[t];
        if op.time_ns < txn.invoke_ns {
            return Err(CheckError::TimeBackwards {
                invoke: txn.invoke_index,
                completion: op.index,
                invoke_ns: txn.invoke_ns,
                complete_ns: op.time_ns,
            });
        }
        if let Err(why) = same_shape(&txn.ops, &op.value) {
            return Err(CheckError::CompletionMismatch {
                invoke: txn.invoke_index,
                completion: op.index,
                why,
            });
        }
        txn.complete_index = Some(op.index);
        txn.complete_ns = Some(op.time_ns);
        txn.outcome = match op.kind {
            OpType::Ok => {
                txn.ops = op.value.clone();
                HistoryOutcome::Committed
            }
            OpType::Fail => HistoryOutcome::Failed,
            _ => HistoryOutcome::Indeterminate,
        };
    }
    Ok(txns)
}

/// Whether a completion's micro-ops are its invoke's: same functions and keys
/// in the same order, same appended elements and written values (reads may
/// differ: the completion carries what they returned).
fn same_shape(invoke: &[MicroOp], done: &[MicroOp]) -> Result<(), String> {
    if invoke.len() != done.len() {
        return Err(format!(
            "{} micro-ops invoked, {} completed",
            invoke.len(),
            done.len()
        ));
    }
    for (i, (a, b)) in invoke.iter().zip(done).enumerate() {
        let same = match (a, b) {
            (MicroOp::Read { key: x, .. }, MicroOp::Read { key: y, .. }) => x == y,
            _ => a == b,
        };
        if !same {
            return Err(format!("micro-op {i}: invoked {a:?}, completed {b:?}"));
        }
    }
    Ok(())
}
