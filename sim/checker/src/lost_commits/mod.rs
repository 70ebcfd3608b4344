//! Lost and phantom commits: the end-of-run accounting that reads the database
//! itself, not only the clients' bookkeeping (FoundationDB's workload `check`
//! phase; the history checker of Elle, Kingsbury & Alvaro VLDB'20, sees only
//! what clients read, so a write nobody read after it was lost would escape it).
//!
//! Inputs: the [`History`] (which transactions committed — `ok` —, which
//! certainly did not — `fail` —, and which are indeterminate — `info`, or an
//! invoke with no completion — with the keys and values they wrote), every
//! key's version when it was loaded, and every key's version and value at its
//! primary after the run ([`FinalRow`]). [`check`] verifies:
//!
//! 1. **versions**: a key's final version is its initial version plus the
//!    number of committed transactions that wrote it (a commit bumps the
//!    version by one, Xenic §4.2 step 5), plus between none and all of the
//!    indeterminate ones;
//! 2. **list-append**: every committed append's element is in its key's final
//!    list; no element of a failed append is in any final list; every final
//!    element was appended by some transaction (no phantoms) and appears once;
//! 3. **registers**: a final value was written by a committed or indeterminate
//!    transaction (never by a failed one, never out of nowhere), and a key some
//!    committed transaction wrote is not left in its initial state.
//!
//! [`check_fault_free_counters`] adds the counters that must stay zero when no
//! fault was injected: stale log records and undecodable log entries at the
//! host workers, and host-memory decode errors, bad packets and bad ring
//! entries at the NIC runtimes.
//!
//! Every problem found is reported ([`Violation`]), naming the key and, where
//! one transaction is to blame, the transaction ([`TxRef`]).

use crate::checker::HistoryOutcome;
use crate::history::{History, MicroOp, OpType, ProcessId};
use std::collections::{BTreeMap, HashMap};

/// Most violations kept in one report (the rest are counted).
pub const VIOLATIONS_KEPT_MAX: usize = 1_000;

/// A transaction of the history: its process and the index of the operation
/// that completed it (or of its invoke, when it never completed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TxRef {
    /// Jepsen process.
    pub process: ProcessId,
    /// Index of the completing operation in the history.
    pub index: u64,
}

impl std::fmt::Display for TxRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tx (process {}, op {})", self.process, self.index)
    }
}

/// A key's value after the run, decoded by the workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinalValue {
    /// A list-append list, in order.
    List(Vec<u64>),
    /// A register (`None`: still in its initial state).
    Register(Option<u64>),
}

/// A key as its primary holds it after the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalRow {
    /// Object version.
    pub version: u64,
    /// Decoded value.
    pub value: FinalValue,
}

/// One thing the accounting found wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    /// A key loaded (or written) before the run is missing at its primary.
    #[error("key {key} is missing at its primary")]
    MissingKey {
        /// The key.
        key: u64,
    },
    /// The final version disagrees with the committed writers.
    #[error("key {key}: final version {actual}, but initial {initial} + {committed} committed writers (+ up to {indeterminate} indeterminate) allows {initial}+{committed}..={}", initial + committed + indeterminate)]
    Version {
        /// The key.
        key: u64,
        /// Version at load.
        initial: u64,
        /// Version after the run.
        actual: u64,
        /// Committed transactions that wrote the key.
        committed: u64,
        /// Indeterminate transactions that wrote the key.
        indeterminate: u64,
    },
    /// A committed append's element is not in its key's final list.
    #[error("key {key}: element {element} appended by committed {tx} is lost")]
    LostAppend {
        /// The key.
        key: u64,
        /// The element.
        element: u64,
        /// The transaction.
        tx: TxRef,
    },
    /// A committed write's key is still in its initial state.
    #[error("key {key}: written by committed {tx} but still in its initial state")]
    LostWrite {
        /// The key.
        key: u64,
        /// A committed writer.
        tx: TxRef,
    },
    /// A failed transaction's write is visible.
    #[error("key {key}: value {value} written by failed {tx} is visible")]
    AbortedWriteVisible {
        /// The key where it is visible.
        key: u64,
        /// The element or register value.
        value: u64,
        /// The failed transaction.
        tx: TxRef,
    },
    /// A value no transaction of the history wrote.
    #[error("key {key}: value {value} was never written by any transaction")]
    Phantom {
        /// The key.
        key: u64,
        /// The element or register value.
        value: u64,
    },
    /// An element appears more than once across the final lists.
    #[error("key {key}: element {element} appears more than once")]
    Duplicate {
        /// The key.
        key: u64,
        /// The element.
        element: u64,
    },
    /// A host or NIC counter that must be zero in a fault-free run is not.
    #[error("node {node}: {counter} = {value}, expected 0 in a fault-free run")]
    Counter {
        /// The node.
        node: u16,
        /// The counter's name.
        counter: &'static str,
        /// Its value.
        value: u64,
    },
}

/// What a passing check covered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LostCommitReport {
    /// Keys whose final state was checked.
    pub keys_checked: u64,
    /// Committed transactions in the history.
    pub committed: u64,
    /// Failed transactions in the history.
    pub failed: u64,
    /// Indeterminate transactions in the history.
    pub indeterminate: u64,
    /// (committed transaction, key) writes accounted for in the versions.
    pub committed_key_writes: u64,
    /// Final list elements or register values matched to their writers.
    pub values_checked: u64,
}

/// The accounting failed: every violation found (up to [`VIOLATIONS_KEPT_MAX`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} lost/phantom-commit violation(s){}; first: {}", .total, if *.total > .violations.len() as u64 { " (some not kept)" } else { "" }, .violations.first().map(|v| v.to_string()).unwrap_or_default())]
pub struct LostCommitError {
    /// The violations kept.
    pub violations: Vec<Violation>,
    /// Violations found in all.
    pub total: u64,
}

/// A write of one transaction: (key, element or value, list append?).
#[derive(Debug, Clone, Copy)]
struct Write {
    key: u64,
    value: u64,
    tx: TxRef,
    outcome: HistoryOutcome,
}

/// Per-key writer counts and every write of the history.
#[derive(Debug, Default)]
struct Writes {
    /// key -> (committed writers, indeterminate writers)
    writers: HashMap<u64, (u64, u64)>,
    /// (key, value) -> the write
    by_value: HashMap<(u64, u64), Write>,
    /// value -> the write (list elements are unique across keys)
    by_element: HashMap<u64, Write>,
    report: LostCommitReport,
}

impl Writes {
    fn add_tx(&mut self, ops: &[MicroOp], tx: TxRef, outcome: HistoryOutcome) {
        match outcome {
            HistoryOutcome::Committed => self.report.committed += 1,
            HistoryOutcome::Failed => self.report.failed += 1,
            HistoryOutcome::Indeterminate => self.report.indeterminate += 1,
        }
        let mut keys: Vec<u64> = Vec::with_capacity(ops.len());
        for op in ops {
            let (key, value, list) = match *op {
                MicroOp::Append { key, element } => (key, element, true),
                MicroOp::Write { key, value } => (key, value, false),
                MicroOp::Read { .. } => continue,
            };
            let w = Write {
                key,
                value,
                tx,
                outcome,
            };
            self.by_value.insert((key, value), w);
            if list {
                self.by_element.insert(value, w);
            }
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        for key in keys {
            let e = self.writers.entry(key).or_default();
            match outcome {
                HistoryOutcome::Committed => {
                    e.0 += 1;
                    self.report.committed_key_writes += 1;
                }
                HistoryOutcome::Indeterminate => e.1 += 1,
                HistoryOutcome::Failed => {}
            }
        }
    }

    /// Every transaction of `history` with its outcome; an invoke that never
    /// completed is indeterminate.
    fn of(history: &History) -> Writes {
        let mut w = Writes::default();
        let mut open: BTreeMap<ProcessId, (u64, &[MicroOp])> = BTreeMap::new();
        for op in &history.ops {
            let tx = TxRef {
                process: op.process,
                index: op.index,
            };
            let outcome = match op.kind {
                OpType::Invoke => {
                    if let Some((index, ops)) = open.insert(op.process, (op.index, &op.value)) {
                        let tx = TxRef { index, ..tx };
                        w.add_tx(ops, tx, HistoryOutcome::Indeterminate);
                    }
                    continue;
                }
                OpType::Ok => HistoryOutcome::Committed,
                OpType::Fail => HistoryOutcome::Failed,
                OpType::Info => HistoryOutcome::Indeterminate,
            };
            open.remove(&op.process);
            w.add_tx(&op.value, tx, outcome);
        }
        for (process, (index, ops)) in open {
            w.add_tx(ops, TxRef { process, index }, HistoryOutcome::Indeterminate);
        }
        w
    }
}

/// Collects violations, keeping the first [`VIOLATIONS_KEPT_MAX`].
#[derive(Debug, Default)]
struct Found {
    violations: Vec<Violation>,
    total: u64,
}

impl Found {
    fn push(&mut self, v: Violation) {
        self.total += 1;
        if self.violations.len() < VIOLATIONS_KEPT_MAX {
            self.violations.push(v);
        }
    }

    fn into_result<T>(self, ok: T) -> Result<T, LostCommitError> {
        if self.total == 0 {
            Ok(ok)
        } else {
            Err(LostCommitError {
                violations: self.violations,
                total: self.total,
            })
        }
    }
}

/// Checks versions and values (module docs, checks 1–3).
///
/// `initial_versions` holds every key loaded before the run with its version
/// (a key the history writes that is not there counts as absent, version 0);
/// `final_rows` every key present at its primary after the run.
///
/// # Errors
/// [`LostCommitError`] with every violation found.
pub fn check(
    history: &History,
    initial_versions: &BTreeMap<u64, u64>,
    final_rows: &BTreeMap<u64, FinalRow>,
) -> Result<LostCommitReport, LostCommitError> {
    let writes = Writes::of(history);
    let mut found = Found::default();
    let mut report = writes.report;
    let mut keys: Vec<u64> = initial_versions.keys().copied().collect();
    keys.extend(
        writes
            .writers
            .keys()
            .filter(|k| !initial_versions.contains_key(k)),
    );
    keys.extend(
        final_rows
            .keys()
            .filter(|k| !initial_versions.contains_key(k) && !writes.writers.contains_key(k)),
    );
    for key in keys {
        let initial = initial_versions.get(&key).copied().unwrap_or(0);
        let (committed, indeterminate) = writes.writers.get(&key).copied().unwrap_or((0, 0));
        let Some(row) = final_rows.get(&key) else {
            if initial > 0 || committed > 0 {
                found.push(Violation::MissingKey { key });
            }
            continue;
        };
        report.keys_checked += 1;
        let actual = row.version;
        if actual < initial + committed || actual > initial + committed + indeterminate {
            found.push(Violation::Version {
                key,
                initial,
                actual,
                committed,
                indeterminate,
            });
        }
        if let FinalValue::Register(value) = row.value {
            report.values_checked += check_register(&writes, key, value, committed, &mut found);
        }
    }
    report.values_checked += check_lists(&writes, final_rows, &mut found);
    found.into_result(report)
}

/// Check 3 for one register; returns how many values it matched.
fn check_register(
    writes: &Writes,
    key: u64,
    value: Option<u64>,
    committed: u64,
    found: &mut Found,
) -> u64 {
    let Some(value) = value else {
        if committed > 0 {
            let tx = writes
                .by_value
                .values()
                .filter(|w| w.key == key && w.outcome == HistoryOutcome::Committed)
                .map(|w| w.tx)
                .min_by_key(|t| t.index)
                .expect("a committed writer exists");
            found.push(Violation::LostWrite { key, tx });
        }
        return 0;
    };
    match writes.by_value.get(&(key, value)) {
        Some(w) if w.outcome == HistoryOutcome::Failed => {
            found.push(Violation::AbortedWriteVisible {
                key,
                value,
                tx: w.tx,
            });
            0
        }
        Some(_) => 1,
        None => {
            found.push(Violation::Phantom { key, value });
            0
        }
    }
}

/// Check 2 over every final list; returns how many elements it matched.
fn check_lists(writes: &Writes, final_rows: &BTreeMap<u64, FinalRow>, found: &mut Found) -> u64 {
    let mut seen: HashMap<u64, u64> = HashMap::new();
    let mut matched = 0;
    for (&key, row) in final_rows {
        let FinalValue::List(list) = &row.value else {
            continue;
        };
        for &element in list {
            if seen.insert(element, key).is_some() {
                found.push(Violation::Duplicate { key, element });
                continue;
            }
            match writes.by_element.get(&element) {
                Some(w) if w.outcome == HistoryOutcome::Failed => {
                    found.push(Violation::AbortedWriteVisible {
                        key,
                        value: element,
                        tx: w.tx,
                    })
                }
                Some(w) if w.key != key => found.push(Violation::Phantom {
                    key,
                    value: element,
                }),
                Some(_) => matched += 1,
                None => found.push(Violation::Phantom {
                    key,
                    value: element,
                }),
            }
        }
    }
    let mut lost: Vec<&Write> = writes
        .by_element
        .values()
        .filter(|w| w.outcome == HistoryOutcome::Committed && seen.get(&w.value) != Some(&w.key))
        .collect();
    lost.sort_by_key(|w| (w.tx.index, w.value));
    for w in lost {
        found.push(Violation::LostAppend {
            key: w.key,
            element: w.value,
            tx: w.tx,
        });
    }
    matched
}

/// One node's counters that must stay zero in a fault-free run: the host
/// worker's `WorkerStats::{stale, bad_entries}` and the NIC runtime's
/// `ServerStats::host_decode_errors`, `NicStats::{bad_packets, bad_ring_entries}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeCounters {
    /// The node.
    pub node: u16,
    /// Log records the host worker skipped as already applied.
    pub stale_records: u64,
    /// Log entries that did not decode at the host worker.
    pub bad_entries: u64,
    /// NIC requests failed because host memory did not decode.
    pub host_decode_errors: u64,
    /// Packets or messages the NIC dropped (undecodable or over a limit).
    pub bad_packets: u64,
    /// Ring entries the NIC dropped because they did not decode.
    pub bad_ring_entries: u64,
}

/// Checks that every counter of every node is zero (module docs).
///
/// # Errors
/// [`LostCommitError`] with a [`Violation::Counter`] per non-zero counter.
pub fn check_fault_free_counters(nodes: &[NodeCounters]) -> Result<(), LostCommitError> {
    let mut found = Found::default();
    for n in nodes {
        let counters = [
            ("host worker stale records", n.stale_records),
            ("host worker bad log entries", n.bad_entries),
            ("NIC host-memory decode errors", n.host_decode_errors),
            ("NIC bad packets", n.bad_packets),
            ("NIC bad ring entries", n.bad_ring_entries),
        ];
        for (counter, value) in counters.into_iter().filter(|c| c.1 != 0) {
            found.push(Violation::Counter {
                node: n.node,
                counter,
                value,
            });
        }
    }
    found.into_result(())
}

#[cfg(test)]
mod tests;
