//! List-append inference (Elle, Kingsbury & Alvaro VLDB'20 §3–4).
//!
//! Every appended element is unique per key, so a read of a list names the
//! transactions whose appends it saw, in order. Per key:
//! - the *version order* is the longest committed read; every read must be a
//!   prefix of it, else `incompatible-order` (and the key gives no edges);
//! - `ww`: the appender of each element precedes the appender of the next;
//! - `wr`: the appender of the last element of a transaction's external read
//!   (what it saw before its own appends) precedes the reader;
//! - `rw`: the reader precedes the appender of the element that follows its
//!   external read in the version order (it did not see that append).
//!
//! Also checked: elements appended by a failed transaction and read (`G1a`),
//! a read ending in a transaction's non-final append to the key (`G1b`),
//! duplicate elements, elements no one appended (`garbage-read`), and
//! internal consistency (a transaction's read is its earlier read of the key
//! plus its own appends since, or ends with its own appends). Indeterminate
//! transactions count as committed when a committed read saw one of their
//! elements, and are left out otherwise. Reads of failed and indeterminate
//! transactions are unknown or meaningless and are not used.

use super::anomaly::{list_text, Anomaly, AnomalyKind, Sink};
use super::graph::{Edge, EdgeKind};
use super::txn::{CheckError, Outcome, Txn};
use super::Inference;
use crate::history::{MicroOp, ReadValue};
use std::collections::{HashMap, HashSet};

/// Who appended an element.
#[derive(Debug, Clone, Copy)]
struct Appender {
    txn: u32,
    /// Whether this is the transaction's last append to the key.
    last: bool,
}

/// One committed read: `full` as returned, `ext` the length of its prefix
/// written by others (`None` if not the transaction's first read of the key).
struct ReadObs<'a> {
    txn: u32,
    key: u64,
    full: &'a [u64],
    ext: Option<usize>,
}

/// Infers ww/wr/rw edges and the non-cycle anomalies of a list-append
/// history. Errors: [`CheckError::WrongModel`] for a register micro-op,
/// [`CheckError::NotUnique`] for an element appended twice to a key.
pub fn infer(txns: &[Txn], sink: &mut Sink) -> Result<Inference, CheckError> {
    let appenders = index_appends(txns)?;
    let mut reads = Vec::new();
    for (i, t) in txns.iter().enumerate() {
        if t.outcome == Outcome::Committed {
            internal(i as u32, t, txns, sink, &mut reads);
        }
    }
    let mut included: Vec<bool> = txns
        .iter()
        .map(|t| t.outcome == Outcome::Committed)
        .collect();
    for r in &reads {
        check_read(r, txns, &appenders, &mut included, sink);
    }
    let mut by_key: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, r) in reads.iter().enumerate() {
        by_key.entry(r.key).or_default().push(i);
    }
    let mut edges = Vec::new();
    for (key, rs) in by_key {
        key_edges(
            key, &rs, &reads, txns, &appenders, &included, sink, &mut edges,
        );
    }
    Ok(Inference { edges, included })
}

fn index_appends(txns: &[Txn]) -> Result<HashMap<(u64, u64), Appender>, CheckError> {
    let mut appenders: HashMap<(u64, u64), Appender> = HashMap::new();
    for (i, t) in txns.iter().enumerate() {
        for (j, m) in t.ops.iter().enumerate() {
            match *m {
                MicroOp::Append { key, element } => {
                    let last = !t.ops[j + 1..]
                        .iter()
                        .any(|n| matches!(n, MicroOp::Append { key: k, .. } if *k == key));
                    let a = Appender {
                        txn: i as u32,
                        last,
                    };
                    if let Some(prev) = appenders.insert((key, element), a) {
                        return Err(CheckError::NotUnique {
                            key,
                            value: element,
                            first: txns[prev.txn as usize].invoke_index,
                            second: t.invoke_index,
                        });
                    }
                }
                MicroOp::Write { .. } => {
                    return Err(CheckError::WrongModel {
                        index: t.invoke_index,
                        why: "a register write in a list-append history".into(),
                    })
                }
                MicroOp::Read {
                    value: Some(ReadValue::Register(_)),
                    ..
                } if t.outcome == Outcome::Committed => {
                    return Err(CheckError::WrongModel {
                        index: t.complete_index.unwrap_or(t.invoke_index),
                        why: "a register read in a list-append history".into(),
                    })
                }
                MicroOp::Read { .. } => {}
            }
        }
    }
    Ok(appenders)
}

/// Checks a committed transaction's reads against its own earlier reads and
/// appends (the `internal` anomaly) and records its reads.
fn internal<'a>(id: u32, t: &'a Txn, txns: &[Txn], sink: &mut Sink, reads: &mut Vec<ReadObs<'a>>) {
    // Per key: what the transaction knows the list to be, and its own appends.
    let mut state: Vec<(u64, Option<Vec<u64>>, Vec<u64>)> = Vec::new();
    for m in &t.ops {
        let key = m.key();
        let pos = match state.iter().position(|s| s.0 == key) {
            Some(p) => p,
            None => {
                state.push((key, None, Vec::new()));
                state.len() - 1
            }
        };
        let (_, known, own) = &mut state[pos];
        match m {
            MicroOp::Append { element, .. } => {
                own.push(*element);
                if let Some(k) = known {
                    k.push(*element);
                }
            }
            MicroOp::Read { value, .. } => {
                let full: &[u64] = match value {
                    Some(ReadValue::List(l)) => l,
                    _ => &[],
                };
                let bad = match known {
                    Some(k) => (k.as_slice() != full).then(|| list_text(k)),
                    None => (!full.ends_with(own)).then(|| format!("… ending {}", list_text(own))),
                };
                let ext = match (&known, &bad) {
                    (None, None) => Some(full.len() - own.len()),
                    _ => None,
                };
                if let Some(expected) = bad {
                    sink.push(AnomalyKind::Internal, || {
                        Anomaly::new(
                            AnomalyKind::Internal,
                            vec![txns[id as usize].clone()],
                            format!("key {key}: expected {expected}, read {}", list_text(full)),
                        )
                    });
                }
                if known.is_none() {
                    *known = Some(full.to_vec());
                }
                reads.push(ReadObs {
                    txn: id,
                    key,
                    full,
                    ext,
                });
            }
            MicroOp::Write { .. } => {}
        }
    }
}

/// Per-read checks: duplicates, garbage, G1a, G1b; marks indeterminate
/// appenders whose elements were read as included.
fn check_read(
    r: &ReadObs<'_>,
    txns: &[Txn],
    appenders: &HashMap<(u64, u64), Appender>,
    included: &mut [bool],
    sink: &mut Sink,
) {
    let reader = || txns[r.txn as usize].clone();
    if r.full.len() > 1 {
        let mut seen = HashSet::with_capacity(r.full.len());
        if let Some(d) = r.full.iter().find(|e| !seen.insert(**e)) {
            sink.push(AnomalyKind::DuplicateElements, || {
                let detail = format!("key {}: element {d} twice in {}", r.key, list_text(r.full));
                Anomaly::new(AnomalyKind::DuplicateElements, vec![reader()], detail)
            });
        }
    }
    for (i, e) in r.full.iter().enumerate() {
        let Some(a) = appenders.get(&(r.key, *e)) else {
            sink.push(AnomalyKind::GarbageRead, || {
                let detail = format!("key {}: read element {e}, which no one appended", r.key);
                Anomaly::new(AnomalyKind::GarbageRead, vec![reader()], detail)
            });
            continue;
        };
        let w = &txns[a.txn as usize];
        match w.outcome {
            Outcome::Failed => sink.push(AnomalyKind::G1a, || {
                let detail = format!("key {}: read element {e} of a failed transaction", r.key);
                Anomaly::new(AnomalyKind::G1a, vec![reader(), w.clone()], detail)
            }),
            Outcome::Indeterminate => included[a.txn as usize] = true,
            Outcome::Committed => {}
        }
        if i + 1 == r.full.len() && !a.last && a.txn != r.txn {
            sink.push(AnomalyKind::G1b, || {
                let detail = format!(
                    "key {}: read {} ends in {e}, not the writer's final append",
                    r.key,
                    list_text(r.full)
                );
                Anomaly::new(AnomalyKind::G1b, vec![reader(), w.clone()], detail)
            });
        }
    }
}

/// The version order of one key and its ww/wr/rw edges.
#[allow(clippy::too_many_arguments)]
fn key_edges(
    key: u64,
    rs: &[usize],
    reads: &[ReadObs<'_>],
    txns: &[Txn],
    appenders: &HashMap<(u64, u64), Appender>,
    included: &[bool],
    sink: &mut Sink,
    edges: &mut Vec<Edge>,
) {
    let longest = rs
        .iter()
        .copied()
        .max_by_key(|&i| reads[i].full.len())
        .expect("a key has a read");
    let order = reads[longest].full;
    let mut ok = true;
    for &i in rs {
        if !order.starts_with(reads[i].full) {
            ok = false;
            sink.push(AnomalyKind::IncompatibleOrder, || {
                let detail = format!(
                    "key {key}: read {} is not a prefix of read {}",
                    list_text(reads[i].full),
                    list_text(order)
                );
                let txns = vec![
                    txns[reads[i].txn as usize].clone(),
                    txns[reads[longest].txn as usize].clone(),
                ];
                Anomaly::new(AnomalyKind::IncompatibleOrder, txns, detail)
            });
        }
    }
    let distinct: HashSet<u64> = order.iter().copied().collect();
    if !ok || distinct.len() != order.len() {
        return; // reported above, or as duplicate-elements: no order to infer from
    }
    let writer = |pos: usize| {
        appenders
            .get(&(key, order[pos]))
            .map(|a| a.txn)
            .filter(|&t| included[t as usize])
    };
    let mut edge = |from: Option<u32>, to: Option<u32>, kind| {
        if let (Some(from), Some(to)) = (from, to) {
            edges.push(Edge {
                from,
                to,
                kind,
                key: Some(key),
            });
        }
    };
    for pos in 1..order.len() {
        edge(writer(pos - 1), writer(pos), EdgeKind::Ww);
    }
    for &i in rs {
        let r = &reads[i];
        let Some(m) = r.ext else { continue };
        if m > 0 {
            edge(writer(m - 1), Some(r.txn), EdgeKind::Wr);
        }
        if m < order.len() {
            edge(Some(r.txn), writer(m), EdgeKind::Rw);
        }
    }
}
