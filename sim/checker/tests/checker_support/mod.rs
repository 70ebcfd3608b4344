//! Shared helpers of the checker tests: micro-op shorthands and a builder of
//! hand-made histories.
#![allow(dead_code)]

use splitkv_check::checker::{check, AnomalyKind, CheckOptions, CheckReport};
use splitkv_check::history::{History, MicroOp, Op, OpType, ReadValue};

/// `[append k e]`.
pub fn a(key: u64, element: u64) -> MicroOp {
    MicroOp::Append { key, element }
}

/// `[r k [..]]`, a list read (`[]` as the empty list).
pub fn r(key: u64, l: &[u64]) -> MicroOp {
    MicroOp::Read {
        key,
        value: Some(ReadValue::List(l.to_vec())),
    }
}

/// `[w k v]`.
pub fn w(key: u64, value: u64) -> MicroOp {
    MicroOp::Write { key, value }
}

/// `[r k v]`, a register read (`None` = nil).
pub fn rr(key: u64, v: Option<u64>) -> MicroOp {
    MicroOp::Read {
        key,
        value: v.map(ReadValue::Register),
    }
}

/// Builds histories one transaction at a time, one process per transaction.
#[derive(Default)]
pub struct Builder {
    ops: Vec<Op>,
    next_process: u64,
}

impl Builder {
    /// A transaction invoked at `invoke_ns`, completed as `kind` at
    /// `complete_ns` (`None`: never completed) with the micro-ops `done` (the
    /// invoke gets them with reads blanked).
    pub fn txn(
        &mut self,
        invoke_ns: u64,
        complete_ns: Option<u64>,
        kind: OpType,
        done: Vec<MicroOp>,
    ) -> &mut Self {
        let process = self.next_process;
        self.next_process += 1;
        let invoked = done
            .iter()
            .map(|m| match m {
                MicroOp::Read { key, .. } => MicroOp::Read {
                    key: *key,
                    value: None,
                },
                m => m.clone(),
            })
            .collect();
        let op = |kind, value, time_ns| Op {
            index: 0,
            process,
            kind,
            value,
            time_ns,
            error: None,
        };
        self.ops.push(op(OpType::Invoke, invoked, invoke_ns));
        if let Some(t) = complete_ns {
            self.ops.push(op(kind, done, t));
        }
        self
    }

    /// A committed transaction over `[invoke_ns, complete_ns]`.
    pub fn ok(&mut self, invoke_ns: u64, complete_ns: u64, done: Vec<MicroOp>) -> &mut Self {
        self.txn(invoke_ns, Some(complete_ns), OpType::Ok, done)
    }

    /// The history, ordered by time.
    pub fn history(&self) -> History {
        History::merge([self.ops.clone()])
    }

    /// The checker's report with default options (strict serializability).
    pub fn check(&self) -> CheckReport {
        check(&self.history(), &CheckOptions::default()).expect("well-formed history")
    }

    /// The report with real-time edges off (plain serializability).
    pub fn check_serializable(&self) -> CheckReport {
        let opts = CheckOptions {
            realtime: false,
            ..CheckOptions::default()
        };
        check(&self.history(), &opts).expect("well-formed history")
    }
}

/// Asserts that `report` found exactly the anomaly kinds `kinds`, printing it
/// otherwise.
pub fn assert_found(report: &CheckReport, kinds: &[AnomalyKind]) {
    let found: Vec<AnomalyKind> = report.found.keys().copied().collect();
    let mut want = kinds.to_vec();
    want.sort();
    assert_eq!(found, want, "report:\n{report}");
    assert_eq!(report.valid, kinds.is_empty(), "report:\n{report}");
}
