//! The anomalies the checker reports, named as Elle names Adya's phenomena
//! (Adya 1999 ch. 3–4; Kingsbury & Alvaro, VLDB'20 §4), with a
//! human-readable [`Display`](fmt::Display) listing the transactions and the
//! edges between them.

use super::graph::EdgeKind;
use super::txn::Txn;
use crate::history::{MicroOp, ReadValue};
use std::fmt;

/// The name of an anomaly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AnomalyKind {
    /// A cycle of write-write edges only (dirty write).
    G0,
    /// Aborted read: a committed read saw a write of a failed transaction.
    G1a,
    /// Intermediate read: a read saw a transaction's non-final write to a key.
    G1b,
    /// A cycle of ww and wr edges with at least one wr (circular information flow).
    G1c,
    /// A cycle with exactly one rw (anti-dependency) edge (read skew).
    GSingle,
    /// A cycle with two or more rw edges (write skew).
    G2Item,
    /// [`AnomalyKind::G0`] that needs a real-time edge.
    G0Realtime,
    /// [`AnomalyKind::G1c`] that needs a real-time edge.
    G1cRealtime,
    /// [`AnomalyKind::GSingle`] that needs a real-time edge (for example a
    /// stale read after a write completed): serializable, not strictly.
    GSingleRealtime,
    /// [`AnomalyKind::G2Item`] that needs a real-time edge.
    G2ItemRealtime,
    /// A transaction's read disagrees with its own earlier reads and writes.
    Internal,
    /// Two reads of one list are not prefixes of one another.
    IncompatibleOrder,
    /// A read of a list holds the same element twice.
    DuplicateElements,
    /// A read returned an element or value no transaction wrote.
    GarbageRead,
}

impl AnomalyKind {
    /// Elle's name: `G0`, `G1a`, `G-single-realtime`, `incompatible-order`, ...
    pub fn name(self) -> &'static str {
        match self {
            AnomalyKind::G0 => "G0",
            AnomalyKind::G1a => "G1a",
            AnomalyKind::G1b => "G1b",
            AnomalyKind::G1c => "G1c",
            AnomalyKind::GSingle => "G-single",
            AnomalyKind::G2Item => "G2-item",
            AnomalyKind::G0Realtime => "G0-realtime",
            AnomalyKind::G1cRealtime => "G1c-realtime",
            AnomalyKind::GSingleRealtime => "G-single-realtime",
            AnomalyKind::G2ItemRealtime => "G2-item-realtime",
            AnomalyKind::Internal => "internal",
            AnomalyKind::IncompatibleOrder => "incompatible-order",
            AnomalyKind::DuplicateElements => "duplicate-elements",
            AnomalyKind::GarbageRead => "garbage-read",
        }
    }

    /// The name of a cycle whose edges (one per hop) are `kinds`: G0 with
    /// only ww, G1c with ww and wr, G-single with one rw, G2-item with more;
    /// the `-realtime` variant if any edge is real-time.
    pub fn of_cycle(kinds: &[EdgeKind]) -> AnomalyKind {
        let count = |k| kinds.iter().filter(|&&x| x == k).count();
        let realtime = count(EdgeKind::Realtime) > 0;
        match (count(EdgeKind::Rw), count(EdgeKind::Wr), realtime) {
            (0, 0, false) => AnomalyKind::G0,
            (0, 0, true) => AnomalyKind::G0Realtime,
            (0, _, false) => AnomalyKind::G1c,
            (0, _, true) => AnomalyKind::G1cRealtime,
            (1, _, false) => AnomalyKind::GSingle,
            (1, _, true) => AnomalyKind::GSingleRealtime,
            (_, _, false) => AnomalyKind::G2Item,
            (_, _, true) => AnomalyKind::G2ItemRealtime,
        }
    }
}

impl fmt::Display for AnomalyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One hop of a cycle: `txns[from] -kind(key)-> txns[to]` of its [`Anomaly`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Position of the source in [`Anomaly::txns`].
    pub from: usize,
    /// Position of the target in [`Anomaly::txns`].
    pub to: usize,
    /// The edge's kind.
    pub kind: EdgeKind,
    /// The key that gave the edge (`None` for real-time edges).
    pub key: Option<u64>,
}

/// One reported anomaly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anomaly {
    /// Its name.
    pub kind: AnomalyKind,
    /// The transactions on it: for a cycle, in cycle order.
    pub txns: Vec<Txn>,
    /// For a cycle, its edges (`steps[i]` leaves `txns[i]`); empty otherwise.
    pub steps: Vec<Step>,
    /// What was seen, in words (keys, elements, expected and actual reads).
    pub detail: String,
}

impl Anomaly {
    /// A non-cycle anomaly on `txns`.
    pub fn new(kind: AnomalyKind, txns: Vec<Txn>, detail: String) -> Anomaly {
        Anomaly {
            kind,
            txns,
            steps: Vec::new(),
            detail,
        }
    }
}

/// A micro-op in Jepsen's notation: `[append 5 17]`, `[r 5 [9 17]]`.
pub fn micro_op_text(m: &MicroOp) -> String {
    match m {
        MicroOp::Append { key, element } => format!("[append {key} {element}]"),
        MicroOp::Write { key, value } => format!("[w {key} {value}]"),
        MicroOp::Read { key, value } => match value {
            None => format!("[r {key} nil]"),
            Some(ReadValue::Register(v)) => format!("[r {key} {v}]"),
            Some(ReadValue::List(l)) => format!("[r {key} {}]", list_text(l)),
        },
    }
}

/// A list of elements as `[1 2 3]`.
pub fn list_text(l: &[u64]) -> String {
    let items: Vec<String> = l.iter().map(u64::to_string).collect();
    format!("[{}]", items.join(" "))
}

/// One cycle edge in words.
fn step_text(s: &Step) -> String {
    let (a, b, k) = (s.from, s.to, s.key.unwrap_or_default());
    match s.kind {
        EdgeKind::Ww => {
            format!("T{a} -ww-> T{b}: T{b} overwrote (appended after) T{a}'s write to key {k}")
        }
        EdgeKind::Wr => format!("T{a} -wr-> T{b}: T{b} read T{a}'s write to key {k}"),
        EdgeKind::Rw => format!("T{a} -rw-> T{b}: T{a} read key {k} without T{b}'s later write"),
        EdgeKind::Realtime => format!("T{a} -rt-> T{b}: T{a} completed before T{b} was invoked"),
    }
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}: {}", self.kind, self.detail)?;
        for (i, t) in self.txns.iter().enumerate() {
            let ops: Vec<String> = t.ops.iter().map(micro_op_text).collect();
            let done = match t.complete_index {
                Some(c) => c.to_string(),
                None => "-".into(),
            };
            writeln!(
                f,
                "  T{i}: process {}, history {}..{}, {}: [{}]",
                t.process,
                t.invoke_index,
                done,
                t.outcome.name(),
                ops.join(" ")
            )?;
        }
        if !self.steps.is_empty() {
            write!(f, "  cycle: T{}", self.steps[0].from)?;
            for s in &self.steps {
                match s.key {
                    Some(k) => write!(f, " -{}({k})-> T{}", s.kind, s.to)?,
                    None => write!(f, " -{}-> T{}", s.kind, s.to)?,
                }
            }
            writeln!(f)?;
            for s in &self.steps {
                writeln!(f, "    {}", step_text(s))?;
            }
        }
        Ok(())
    }
}

/// Collects anomalies, keeping at most `listed_max` of each kind in full
/// while counting them all (the report's bound on anomalies per kind).
#[derive(Debug)]
pub struct Sink {
    listed_max: usize,
    /// Every anomaly found, by kind (including those not listed).
    pub found: std::collections::BTreeMap<AnomalyKind, usize>,
    /// The anomalies listed in full.
    pub listed: Vec<Anomaly>,
}

impl Sink {
    /// A sink listing at most `listed_max` anomalies of each kind.
    pub fn new(listed_max: usize) -> Sink {
        Sink {
            listed_max,
            found: Default::default(),
            listed: Vec::new(),
        }
    }

    /// Counts one anomaly of `kind`, building it with `make` only if it is
    /// still to be listed.
    pub fn push(&mut self, kind: AnomalyKind, make: impl FnOnce() -> Anomaly) {
        let n = self.found.entry(kind).or_insert(0);
        *n += 1;
        if *n <= self.listed_max {
            let a = make();
            debug_assert_eq!(a.kind, kind);
            self.listed.push(a);
        }
    }
}
