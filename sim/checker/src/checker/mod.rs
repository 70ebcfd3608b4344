//! A strict-serializability checker for client histories, in the manner of
//! Elle (Kingsbury & Alvaro, "Elle: Inferring Isolation Anomalies from
//! Experimental Observations", VLDB 2020) over Adya's phenomena (Adya, "Weak
//! Consistency: A Generalized Theory and Optimistic Implementations for
//! Distributed Transactions", PhD thesis, MIT 1999).
//!
//! Input: a [`History`] (see [`crate::history`]). The steps, one module each:
//! 1. [`txn`] pairs each process's invoke with its completion into
//!    transactions: committed (`ok`), failed (`fail`) or indeterminate
//!    (`info`, or no completion — the checker accepts both the histories where
//!    it committed and where it did not);
//! 2. [`list_append`] or [`register`] infers write-write, write-read and
//!    read-write (anti-dependency) edges from what reads returned, and the
//!    anomalies visible without a cycle (G1a, G1b, internal,
//!    incompatible-order, duplicate-elements, garbage-read);
//! 3. [`realtime`] adds real-time edges (T1 completed before T2 was invoked),
//!    unless [`CheckOptions::realtime`] is off. Real-time edges compare times
//!    recorded by different clients: across machines they need synchronised
//!    clocks, or the checker may report anomalies that did not happen;
//! 4. [`cycles`] finds strongly connected components and names one short cycle
//!    in each: G0, G1c, G-single, G2-item, or their `-realtime` variants.
//!
//! A history is strictly serializable as far as the checker can tell when no
//! anomaly is found ([`CheckReport::valid`]). The checker is sound — every
//! reported anomaly is one — but not complete: it sees only what reads show
//! (see [`register`] for the register model's blind spots).
//!
//! Cost: O(n log n) in the number of micro-ops and read elements plus
//! O(n·concurrency) real-time edges; a 10^5-transaction list-append history
//! (16 processes, 256 keys in use) checks in about a second in release builds
//! (`cargo run --release -p splitkv-sim --example check_history -- --generate 100000`).

pub mod anomaly;
pub mod cycles;
pub mod generate;
pub mod graph;
pub mod list_append;
pub mod realtime;
pub mod register;
pub mod txn;

pub use anomaly::{Anomaly, AnomalyKind, Step};
pub use graph::{Edge, EdgeKind};
pub use txn::{CheckError, HistoryOutcome, Txn};

use crate::history::{History, MicroOp, ReadValue};
use std::collections::BTreeMap;
use std::fmt;

/// Anomalies of each kind listed in full by default (all are counted).
pub const ANOMALIES_PER_KIND_DEFAULT: usize = 8;

/// The data model a history is checked under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Model {
    /// Choose from the micro-ops: appends or list reads mean list-append,
    /// register writes or reads mean register; a history with neither is
    /// checked as list-append (it has no writes to order).
    #[default]
    Infer,
    /// Elle's list-append: `append` and list reads.
    ListAppend,
    /// Read-write registers with unique values: `w` and register reads.
    Register,
}

/// What to check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckOptions {
    /// The data model.
    pub model: Model,
    /// Whether real-time edges count (strict serializability); off checks
    /// plain serializability.
    pub realtime: bool,
    /// Anomalies of each kind listed in full in the report (all are counted).
    pub anomalies_per_kind_max: usize,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            model: Model::Infer,
            realtime: true,
            anomalies_per_kind_max: ANOMALIES_PER_KIND_DEFAULT,
        }
    }
}

/// What inference gives the cycle search: dependency edges, and which
/// transactions are in the graph (committed, or indeterminate and observed).
#[derive(Debug, Default)]
pub struct Inference {
    /// ww, wr and rw edges.
    pub edges: Vec<Edge>,
    /// Per transaction: whether it counts as committed.
    pub included: Vec<bool>,
}

/// Counts describing a checked history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckStats {
    /// The model the history was checked under (never [`Model::Infer`]).
    pub model: Model,
    /// Transactions by outcome.
    pub txns: BTreeMap<HistoryOutcome, usize>,
    /// Indeterminate transactions counted as committed (a read saw them).
    pub indeterminate_committed: usize,
    /// Graph edges by kind (after removing duplicates).
    pub edges: BTreeMap<EdgeKind, usize>,
    /// Strongly connected components of more than one transaction.
    pub cycles_components: usize,
}

/// The checker's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// No anomaly found.
    pub valid: bool,
    /// Anomalies found, by kind (including those not listed).
    pub found: BTreeMap<AnomalyKind, usize>,
    /// Anomalies listed in full (at most
    /// [`CheckOptions::anomalies_per_kind_max`] of each kind).
    pub anomalies: Vec<Anomaly>,
    /// Counts.
    pub stats: CheckStats,
}

impl CheckReport {
    /// Whether an anomaly of `kind` was found.
    pub fn has(&self, kind: AnomalyKind) -> bool {
        self.found.contains_key(&kind)
    }
}

/// Checks `history` for strict serializability (or serializability with
/// `realtime` off). Errors: a malformed history or one that breaks the
/// workload's preconditions ([`CheckError`]); anomalies are not errors, they
/// are in the report.
pub fn check(history: &History, opts: &CheckOptions) -> Result<CheckReport, CheckError> {
    let txns = txn::pair(history)?;
    let model = match opts.model {
        Model::Infer => infer_model(history),
        m => m,
    };
    let mut sink = anomaly::Sink::new(opts.anomalies_per_kind_max);
    let mut inf = match model {
        Model::Register => register::infer(&txns, &mut sink)?,
        _ => list_append::infer(&txns, &mut sink)?,
    };
    if opts.realtime {
        let rt = realtime::realtime_edges(&txns, &inf.included);
        inf.edges.extend(rt);
    }
    let g = graph::Graph::new(txns.len(), inf.edges);
    let components = cycles::report_cycles(&g, &txns, &mut sink);
    let mut stats = CheckStats {
        model,
        cycles_components: components,
        ..CheckStats::default()
    };
    for (t, &inc) in txns.iter().zip(&inf.included) {
        *stats.txns.entry(t.outcome).or_insert(0) += 1;
        stats.indeterminate_committed +=
            usize::from(inc && t.outcome == HistoryOutcome::Indeterminate);
    }
    for e in g.edges() {
        *stats.edges.entry(e.kind).or_insert(0) += 1;
    }
    Ok(CheckReport {
        valid: sink.found.is_empty(),
        found: sink.found,
        anomalies: sink.listed,
        stats,
    })
}

/// The model the micro-ops point to (list-append when none do).
fn infer_model(history: &History) -> Model {
    for op in &history.ops {
        for m in &op.value {
            match m {
                MicroOp::Append { .. }
                | MicroOp::Read {
                    value: Some(ReadValue::List(_)),
                    ..
                } => return Model::ListAppend,
                MicroOp::Write { .. }
                | MicroOp::Read {
                    value: Some(ReadValue::Register(_)),
                    ..
                } => return Model::Register,
                MicroOp::Read { value: None, .. } => {}
            }
        }
    }
    Model::ListAppend
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.valid { "valid" } else { "INVALID" };
        writeln!(f, "{verdict} ({:?} model)", self.stats.model)?;
        let txns: Vec<String> = self
            .stats
            .txns
            .iter()
            .map(|(o, n)| format!("{} {n}", o.name()))
            .collect();
        writeln!(
            f,
            "transactions: {} (indeterminate counted as committed: {})",
            txns.join(", "),
            self.stats.indeterminate_committed
        )?;
        let edges: Vec<String> = self
            .stats
            .edges
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        writeln!(
            f,
            "edges: {}; cyclic components: {}",
            edges.join(", "),
            self.stats.cycles_components
        )?;
        for (k, n) in &self.found {
            writeln!(f, "anomaly {k}: {n}")?;
        }
        for a in &self.anomalies {
            write!(f, "{a}")?;
        }
        Ok(())
    }
}
