//! Read-write register inference (Elle, Kingsbury & Alvaro VLDB'20 §3.3).
//!
//! Every written value is unique per key, so a read names its writer: `wr`
//! edges from a value's writer to each transaction whose external read (its
//! first read of the key, before any write of its own) returned it.
//!
//! Unlike a list, a register shows one version at a time, so the version
//! order is only partly known. The checker uses only orderings it can prove:
//! - the initial `null` precedes every write: a transaction that read `null`
//!   has an `rw` edge to every (committed or observed) writer of the key;
//! - a committed transaction that read `v1` and then wrote `v2` to the same
//!   key ordered `v1 < v2` (Elle's read-then-write inference): `ww` from the
//!   writer of `v1` to it, and `rw` from every other reader of `v1` to it.
//!
//! The second rule is Elle's "writes follow reads" assumption: the version a
//! committed transaction read was installed before its own write. Were it
//! false, the transaction read a version that was not yet committed and was
//! installed after its own — a G1c cycle under the true order — so a cycle
//! found under the assumption still shows a real anomaly, though its name may
//! differ.
//!
//! These edges may skip intermediate versions (`v1 < v2` need not be
//! adjacent), but each stands for a path of true edges with the same number of
//! anti-dependencies, so no cycle is invented and the name is right. What it
//! cannot see: the order of blind writes (two transactions that wrote without
//! reading), so a lost update or a stale read between blind writes goes
//! unnoticed unless a later read-then-write orders them; anomalies on versions
//! no committed transaction read; and anything inside failed or indeterminate
//! transactions' reads (not known). Also checked, as for lists: `G1a` (a read
//! of a failed transaction's value), `G1b` (a read of a transaction's
//! non-final write to the key), `garbage-read`, and `internal` (a read after
//! the transaction's own write or read of the key returns that value).

use super::anomaly::{Anomaly, AnomalyKind, Sink};
use super::graph::{Edge, EdgeKind};
use super::txn::{CheckError, HistoryOutcome, Txn};
use super::Inference;
use crate::history::{MicroOp, ReadValue};
use std::collections::{BTreeMap, HashMap};

/// Who wrote a value.
#[derive(Debug, Clone, Copy)]
struct Writer {
    txn: u32,
    /// Whether this is the transaction's last write to the key.
    last: bool,
}

/// What committed transactions' external reads and read-then-writes showed.
#[derive(Default)]
struct Seen {
    /// (key, value read, `None` = initial) -> readers.
    readers: BTreeMap<(u64, Option<u64>), Vec<u32>>,
    /// (key, value read, final value written by the same transaction, writer).
    ordered: Vec<(u64, Option<u64>, u64, u32)>,
}

/// Infers ww/wr/rw edges and the non-cycle anomalies of a register history.
/// Errors: [`CheckError::WrongModel`] for a list micro-op,
/// [`CheckError::NotUnique`] for a value written twice to a key.
pub fn infer(txns: &[Txn], sink: &mut Sink) -> Result<Inference, CheckError> {
    let (writers, by_key) = index_writes(txns)?;
    let mut seen = Seen::default();
    for (i, t) in txns.iter().enumerate() {
        if t.outcome == HistoryOutcome::Committed {
            internal(i as u32, t, sink, &mut seen);
        }
    }
    let included = check_reads(txns, &writers, &seen, sink);
    let edges = edges(&writers, &by_key, &seen, &included);
    Ok(Inference { edges, included })
}

/// G1a, G1b, garbage and read-your-future-write checks of every external
/// read; returns which transactions count as committed (committed ones, and
/// indeterminate ones a committed read saw).
fn check_reads(
    txns: &[Txn],
    writers: &HashMap<(u64, u64), Writer>,
    seen: &Seen,
    sink: &mut Sink,
) -> Vec<bool> {
    let mut included: Vec<bool> = txns
        .iter()
        .map(|t| t.outcome == HistoryOutcome::Committed)
        .collect();
    for (&(key, value), readers) in &seen.readers {
        let Some(v) = value else { continue };
        let Some(w) = writers.get(&(key, v)) else {
            let detail = format!("key {key}: read {v}, which no one wrote");
            for &r in readers {
                sink.push(AnomalyKind::GarbageRead, || {
                    Anomaly::new(
                        AnomalyKind::GarbageRead,
                        vec![txns[r as usize].clone()],
                        detail.clone(),
                    )
                });
            }
            continue;
        };
        let wt = &txns[w.txn as usize];
        for &r in readers {
            let pair = || vec![txns[r as usize].clone(), wt.clone()];
            if wt.outcome == HistoryOutcome::Failed {
                let detail = format!("key {key}: read {v}, written by a failed transaction");
                sink.push(AnomalyKind::G1a, || {
                    Anomaly::new(AnomalyKind::G1a, pair(), detail)
                });
            } else if r == w.txn {
                let detail = format!("key {key}: first read returned {v}, which it writes later");
                sink.push(AnomalyKind::Internal, || {
                    Anomaly::new(AnomalyKind::Internal, pair(), detail)
                });
            } else if !w.last {
                let detail = format!("key {key}: read {v}, not its writer's final write");
                sink.push(AnomalyKind::G1b, || {
                    Anomaly::new(AnomalyKind::G1b, pair(), detail)
                });
            }
            if wt.outcome == HistoryOutcome::Indeterminate {
                included[w.txn as usize] = true;
            }
        }
    }
    included
}

/// The wr, ww and rw edges the reads and read-then-writes prove.
fn edges(
    writers: &HashMap<(u64, u64), Writer>,
    by_key: &HashMap<u64, Vec<u32>>,
    seen: &Seen,
    included: &[bool],
) -> Vec<Edge> {
    let mut edges = Vec::new();
    let writer_of = |key: u64, v: u64| {
        writers
            .get(&(key, v))
            .map(|w| w.txn)
            .filter(|&t| included[t as usize])
    };
    let mut edge = |from: u32, to: u32, kind, key| {
        edges.push(Edge {
            from,
            to,
            kind,
            key: Some(key),
        })
    };
    for (&(key, value), readers) in &seen.readers {
        match value {
            Some(v) => {
                if let Some(w) = writer_of(key, v) {
                    readers.iter().for_each(|&r| edge(w, r, EdgeKind::Wr, key));
                }
            }
            None => {
                let ws = by_key.get(&key).map(Vec::as_slice).unwrap_or(&[]);
                for &w in ws.iter().filter(|&&w| included[w as usize]) {
                    readers.iter().for_each(|&r| edge(r, w, EdgeKind::Rw, key));
                }
            }
        }
    }
    for &(key, before, _after, t) in &seen.ordered {
        let Some(v) = before else { continue }; // covered by the null rule
        if let Some(w) = writer_of(key, v) {
            edge(w, t, EdgeKind::Ww, key);
        }
        for &r in seen
            .readers
            .get(&(key, before))
            .map(Vec::as_slice)
            .unwrap_or(&[])
        {
            edge(r, t, EdgeKind::Rw, key);
        }
    }
    edges
}

type WriteIndex = (HashMap<(u64, u64), Writer>, HashMap<u64, Vec<u32>>);

/// Every written value's writer, and per key the transactions writing it.
fn index_writes(txns: &[Txn]) -> Result<WriteIndex, CheckError> {
    let mut writers: HashMap<(u64, u64), Writer> = HashMap::new();
    let mut by_key: HashMap<u64, Vec<u32>> = HashMap::new();
    for (i, t) in txns.iter().enumerate() {
        for (j, m) in t.ops.iter().enumerate() {
            match *m {
                MicroOp::Write { key, value } => {
                    let last = !t.ops[j + 1..]
                        .iter()
                        .any(|n| matches!(n, MicroOp::Write { key: k, .. } if *k == key));
                    if last {
                        by_key.entry(key).or_default().push(i as u32);
                    }
                    if let Some(prev) = writers.insert(
                        (key, value),
                        Writer {
                            txn: i as u32,
                            last,
                        },
                    ) {
                        return Err(CheckError::NotUnique {
                            key,
                            value,
                            first: txns[prev.txn as usize].invoke_index,
                            second: t.invoke_index,
                        });
                    }
                }
                MicroOp::Append { .. } => {
                    return Err(CheckError::WrongModel {
                        index: t.invoke_index,
                        why: "a list append in a register history".into(),
                    })
                }
                MicroOp::Read {
                    value: Some(ReadValue::List(_)),
                    ..
                } if t.outcome == HistoryOutcome::Committed => {
                    return Err(CheckError::WrongModel {
                        index: t.complete_index.unwrap_or(t.invoke_index),
                        why: "a list read in a register history".into(),
                    })
                }
                MicroOp::Read { .. } => {}
            }
        }
    }
    Ok((writers, by_key))
}

/// Per key of one transaction: (key, the value it knows the key holds,
/// `Some(None)` = initial; the value its external read returned; its last write).
type KeyState = (u64, Option<Option<u64>>, Option<Option<u64>>, Option<u64>);

/// Checks a committed transaction's reads against its own earlier reads and
/// writes (`internal`), and records its external reads and read-then-writes.
fn internal(id: u32, t: &Txn, sink: &mut Sink, seen: &mut Seen) {
    let mut state: Vec<KeyState> = Vec::new();
    for m in &t.ops {
        let key = m.key();
        let pos = match state.iter().position(|s| s.0 == key) {
            Some(p) => p,
            None => {
                state.push((key, None, None, None));
                state.len() - 1
            }
        };
        let (_, known, ext, wrote) = &mut state[pos];
        match m {
            MicroOp::Write { value, .. } => {
                *known = Some(Some(*value));
                *wrote = Some(*value);
            }
            MicroOp::Read { value, .. } => {
                let got = match value {
                    Some(ReadValue::Register(v)) => Some(*v),
                    _ => None,
                };
                match *known {
                    Some(k) if k != got => {
                        let show = |v: Option<u64>| v.map_or("nil".to_string(), |v| v.to_string());
                        sink.push(AnomalyKind::Internal, || {
                            let detail =
                                format!("key {key}: expected {}, read {}", show(k), show(got));
                            Anomaly::new(AnomalyKind::Internal, vec![t.clone()], detail)
                        });
                    }
                    Some(_) => {}
                    None => {
                        *known = Some(got);
                        *ext = Some(got);
                        seen.readers.entry((key, got)).or_default().push(id);
                    }
                }
            }
            MicroOp::Append { .. } => {}
        }
    }
    for (key, _, ext, wrote) in state {
        if let (Some(before), Some(after)) = (ext, wrote) {
            seen.ordered.push((key, before, after, id));
        }
    }
}
