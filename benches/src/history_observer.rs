//! A Jepsen history recorded from the embedding API: [`HistoryObserver`] is a
//! [`CallObserver`] (`ClusterBuilder::observe_calls`) that turns an
//! application's own calls of the list-append and register procedures
//! ([`crate::list_append::ListAppendTxn`], [`crate::register::RegisterTxn`])
//! into history operations (`splitkv_check::history`), the input of the
//! strict-serializability checker (`splitkv_check::checker`, Elle over Adya's
//! anomalies) and of the lost-commit accounting. The bench's load generator
//! records its own ([`crate::history_gen`]); this is for applications that
//! call `Client::call` / `submit` / `poll` themselves.
//!
//! - An accepted submission of a procedure registered with
//!   [`HistoryObserver::list_append`] or [`HistoryObserver::register`] is an
//!   `invoke` whose micro-ops are decoded from its arguments with the
//!   workloads' codec ([`crate::list_append::codec`]); calls of other
//!   procedures, and arguments that do not decode, are counted and left out.
//! - Its outcome is `ok` when committed, with every read's value decoded from
//!   the result ([`crate::list_append::complete`], [`crate::register::complete`];
//!   a result that does not decode is `info`, counted); `fail` with the
//!   status's name as the error for every other status (user abort, lock
//!   conflict, validation failure, table full...); `info` when the client
//!   never learned it (the cluster stopped with the call outstanding, or the
//!   client was dropped) or learned [`TxStatus::Unknown`] (it may have
//!   committed). A call still outstanding when
//!   [`HistoryObserver::history`] is taken appears as its invoke alone, which
//!   the checker treats as indeterminate too.
//! - The process of a call is its client, `(node, client)`:
//!   `node * PROCESSES_PER_NODE + client * PROCESS_SLOTS_PER_CLIENT + slot`,
//!   where `slot` is 0 for a client that has one call outstanding at a time
//!   (`Client::call`) and the lowest free slot for one that pipelines with
//!   `submit`/`poll` (a Jepsen process has at most one operation outstanding).
//!
//! Times are the observer's (see `splitkv_host::observe`): an invoke's read
//! before its request was pushed, a completion's after its outcome was
//! popped, on the cluster's clock; so the checker's real-time edges hold in
//! fact. The history is the recorded operations in time order.

use crate::history_gen::{completion, write_history, Ending};
use crate::list_append;
use crate::list_append::codec::{self, OpKind, ResultError};
use crate::register;
use splitkv_check::history::{History, HistoryError, MicroOp, Op, OpType, ProcessId};
use splitkv_host::{CallObserver, CallOutcome, CallRecord};
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::wire::NodeId;
use splitkv_nic::runtime::CLIENTS_PER_NODE_MAX;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

/// Jepsen processes per client: the most calls one client may have
/// outstanding and still be recorded (far more than its rings hold).
pub const PROCESS_SLOTS_PER_CLIENT: u64 = 1 << 16;

/// Jepsen processes per node: one block of [`PROCESS_SLOTS_PER_CLIENT`] per
/// client the node may have.
pub const PROCESSES_PER_NODE: u64 = CLIENTS_PER_NODE_MAX as u64 * PROCESS_SLOTS_PER_CLIENT;

/// Which workload a procedure runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObservedModel {
    /// Elle's list-append ([`crate::list_append::ListAppendTxn`]).
    ListAppend,
    /// Read-write registers ([`crate::register::RegisterTxn`]).
    Register,
}

/// What a [`HistoryObserver`] saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObserverStats {
    /// Invokes recorded.
    pub invoked: u64,
    /// `ok` completions.
    pub committed: u64,
    /// `fail` completions, by [`TxStatus`] wire value.
    pub failed: [u64; TxStatus::ALL.len()],
    /// `info` completions: outcome unknown to the client (never learned, or
    /// [`TxStatus::Unknown`]).
    pub unknown: u64,
    /// `info` completions: committed, but the result did not decode.
    pub bad_results: u64,
    /// Calls of procedures the observer does not record.
    pub other_procedures: u64,
    /// Calls of recorded procedures whose arguments did not decode (left out).
    pub bad_args: u64,
    /// Calls left out because their client had [`PROCESS_SLOTS_PER_CLIENT`]
    /// calls outstanding.
    pub no_process: u64,
}

impl ObserverStats {
    /// `fail` completions with `status`.
    pub fn failed_with(&self, status: TxStatus) -> u64 {
        self.failed[status as usize]
    }

    /// `fail` completions, whatever the status.
    pub fn failed_total(&self) -> u64 {
        self.failed.iter().sum()
    }
}

/// A recorded call without a completion yet.
#[derive(Debug)]
struct Open {
    process: ProcessId,
    model: ObservedModel,
    invoked: Vec<MicroOp>,
}

/// Everything the observer records, behind one lock.
#[derive(Debug, Default)]
struct State {
    ops: Vec<Op>,
    /// By (node, client, seq).
    open: HashMap<(NodeId, u32, u64), Open>,
    /// Slots in use, by (node, client).
    busy: HashMap<(NodeId, u32), Vec<bool>>,
    stats: ObserverStats,
}

impl State {
    fn take_slot(&mut self, node: NodeId, client: u32) -> Option<u64> {
        let busy = self.busy.entry((node, client)).or_default();
        let slot = match busy.iter().position(|b| !b) {
            Some(s) => s,
            None if (busy.len() as u64) < PROCESS_SLOTS_PER_CLIENT => {
                busy.push(false);
                busy.len() - 1
            }
            None => return None,
        };
        busy[slot] = true;
        Some(slot as u64)
    }

    fn free_slot(&mut self, process: ProcessId) {
        let node = (process / PROCESSES_PER_NODE) as NodeId;
        let client = (process % PROCESSES_PER_NODE / PROCESS_SLOTS_PER_CLIENT) as u32;
        let slot = (process % PROCESS_SLOTS_PER_CLIENT) as usize;
        if let Some(b) = self
            .busy
            .get_mut(&(node, client))
            .and_then(|v| v.get_mut(slot))
        {
            *b = false;
        }
    }

    fn push(&mut self, process: ProcessId, kind: OpType, value: Vec<MicroOp>, time_ns: u64) {
        self.push_err(process, kind, value, time_ns, None);
    }

    fn push_err(
        &mut self,
        process: ProcessId,
        kind: OpType,
        value: Vec<MicroOp>,
        time_ns: u64,
        error: Option<String>,
    ) {
        self.ops.push(Op {
            index: self.ops.len() as u64,
            process,
            kind,
            value,
            time_ns,
            error,
        });
    }
}

/// Records list-append and register calls as a Jepsen history (module docs).
#[derive(Debug, Default)]
pub struct HistoryObserver {
    procedures: Vec<(u32, ObservedModel)>,
    state: Mutex<State>,
}

impl HistoryObserver {
    /// An observer that records nothing until told which procedures to record.
    pub fn new() -> HistoryObserver {
        HistoryObserver::default()
    }

    /// Records calls of procedure `procedure` (its registration index) as
    /// list-append transactions.
    pub fn list_append(mut self, procedure: u32) -> HistoryObserver {
        self.procedures.push((procedure, ObservedModel::ListAppend));
        self
    }

    /// Records calls of procedure `procedure` as register transactions.
    pub fn register(mut self, procedure: u32) -> HistoryObserver {
        self.procedures.push((procedure, ObservedModel::Register));
        self
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn model_of(&self, procedure: u32) -> Option<ObservedModel> {
        self.procedures
            .iter()
            .find(|(p, _)| *p == procedure)
            .map(|&(_, m)| m)
    }

    /// What was recorded so far.
    pub fn stats(&self) -> ObserverStats {
        self.state().stats
    }

    /// Calls invoked whose completion has not been recorded yet.
    pub fn outstanding(&self) -> usize {
        self.state().open.len()
    }

    /// The history so far: every recorded operation in time order (ties in
    /// the order recorded), indices from 0. Calls still outstanding appear as
    /// their invoke alone.
    pub fn history(&self) -> History {
        History::merge([self.state().ops.clone()])
    }

    /// Writes [`HistoryObserver::history`] to `path` as JSON lines (Jepsen's
    /// shape, `History::write_jsonl`), replacing the file.
    ///
    /// # Errors
    /// [`HistoryError::Io`] if the file cannot be created or written.
    pub fn write_jsonl(&self, path: &Path) -> Result<(), HistoryError> {
        write_history(path, &self.history())
    }
}

/// The micro-ops an argument list names (reads with no value yet).
fn invoked_ops(args: &[u8]) -> Option<Vec<MicroOp>> {
    let ops = codec::decode(args).ok()?;
    let micro = ops.as_slice().iter().map(|o| match o.kind {
        OpKind::Read => MicroOp::Read {
            key: o.key,
            value: None,
        },
        OpKind::Append => MicroOp::Append {
            key: o.key,
            element: o.value,
        },
        OpKind::Write => MicroOp::Write {
            key: o.key,
            value: o.value,
        },
    });
    Some(micro.collect())
}

/// The micro-ops of a committed call, its reads' values decoded from `result`.
fn completed_ops(
    model: ObservedModel,
    invoked: &[MicroOp],
    result: &[u8],
) -> Result<Vec<MicroOp>, ResultError> {
    match model {
        ObservedModel::ListAppend => list_append::complete(invoked, result),
        ObservedModel::Register => register::complete(invoked, result),
    }
}

impl CallObserver for HistoryObserver {
    fn invoked(&self, call: &CallRecord<'_>) {
        let Some(model) = self.model_of(call.procedure) else {
            self.state().stats.other_procedures += 1;
            return;
        };
        let mut st = self.state();
        let Some(ops) = invoked_ops(call.args) else {
            st.stats.bad_args += 1;
            return;
        };
        let Some(slot) = st.take_slot(call.node, call.client) else {
            st.stats.no_process += 1;
            return;
        };
        let process = call.node as u64 * PROCESSES_PER_NODE
            + call.client as u64 * PROCESS_SLOTS_PER_CLIENT
            + slot;
        st.stats.invoked += 1;
        st.push(process, OpType::Invoke, ops.clone(), call.time_ns);
        let open = Open {
            process,
            model,
            invoked: ops,
        };
        st.open.insert((call.node, call.client, call.seq), open);
    }

    fn completed(&self, call: &CallRecord<'_>, outcome: &CallOutcome<'_>) {
        let mut st = self.state();
        let Some(open) = st.open.remove(&(call.node, call.client, call.seq)) else {
            return; // not recorded at invoke
        };
        let (status, result) = match *outcome {
            CallOutcome::Completed { status, result } => (Some(status), result),
            CallOutcome::Unknown => (None, &[][..]),
        };
        let model = open.model;
        let c = completion(open.invoked, status, |ops| {
            completed_ops(model, ops, result)
        });
        match c.ending {
            Ending::Committed => st.stats.committed += 1,
            Ending::BadResult => st.stats.bad_results += 1,
            // It may have committed: indeterminate, as if never learned.
            Ending::Indeterminate => st.stats.unknown += 1,
            Ending::Failed(s) => st.stats.failed[s as usize] += 1,
        }
        st.push_err(open.process, c.kind, c.value, call.time_ns, c.error);
        st.free_slot(open.process);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(seq: u64, args: &[u8], time_ns: u64) -> CallRecord<'_> {
        CallRecord {
            node: 1,
            client: 2,
            seq,
            req_id: seq,
            procedure: 0,
            args,
            time_ns,
        }
    }

    #[test]
    fn pipelined_calls_take_distinct_processes_and_unknown_is_info() {
        let obs = HistoryObserver::new().list_append(0);
        let mut a = Vec::new();
        codec::encode(&[MicroOp::Append { key: 3, element: 9 }], &mut a);
        obs.invoked(&call(0, &a, 10));
        obs.invoked(&call(1, &a, 11));
        obs.completed(&call(1, &a, 20), &CallOutcome::Unknown);
        let other = CallRecord {
            procedure: 5,
            ..call(2, &a, 21)
        };
        obs.invoked(&other);
        obs.invoked(&call(3, &[1, 2], 22));
        let h = obs.history();
        assert_eq!(h.len(), 3);
        let base = PROCESSES_PER_NODE + 2 * PROCESS_SLOTS_PER_CLIENT;
        assert_eq!((h.ops[0].process, h.ops[1].process), (base, base + 1));
        assert_eq!((h.ops[2].kind, h.ops[2].process), (OpType::Info, base + 1));
        let s = obs.stats();
        assert_eq!(
            (s.invoked, s.unknown, s.other_procedures, s.bad_args),
            (2, 1, 1, 1)
        );
        assert_eq!(obs.outstanding(), 1);
    }

    #[test]
    fn an_unknown_status_is_info_not_fail() {
        let obs = HistoryObserver::new().list_append(0);
        let mut a = Vec::new();
        codec::encode(&[MicroOp::Append { key: 3, element: 9 }], &mut a);
        obs.invoked(&call(0, &a, 10));
        let unknown = CallOutcome::Completed {
            status: TxStatus::Unknown,
            result: &[],
        };
        obs.completed(&call(0, &a, 20), &unknown);
        let h = obs.history();
        assert_eq!(h.ops[1].kind, OpType::Info);
        assert_eq!(h.ops[1].error.as_deref(), Some("unknown outcome"));
        let s = obs.stats();
        assert_eq!((s.unknown, s.failed_total()), (1, 0));
    }
}
