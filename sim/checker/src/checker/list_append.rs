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
//!   external read in the version order (it did not see that append);
//! - *unseen appends*: a committed append that no committed read contains
//!   lies after every element the reads observed (had it come before any of
//!   them, the longest read would hold it). `ww`: the appender of the
//!   longest read's last element precedes it; `rw`: every committed reader
//!   of the key precedes it (none saw it). Indeterminate appends stay out
//!   (they may never have happened). A lost committed append followed by
//!   later appends that reads do show makes a cycle with real-time edges.
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
use super::txn::{CheckError, HistoryOutcome, Txn};
use super::Inference;
use crate::history::{MicroOp, ReadValue};
use std::collections::{BTreeMap, HashMap, HashSet};

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
        if t.outcome == HistoryOutcome::Committed {
            internal(i as u32, t, txns, sink, &mut reads);
        }
    }
    let mut by_key: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (i, r) in reads.iter().enumerate() {
        by_key.entry(r.key).or_default().push(i);
    }
    let mut included: Vec<bool> = txns
        .iter()
        .map(|t| t.outcome == HistoryOutcome::Committed)
        .collect();
    let ctx = Ctx {
        txns,
        appenders: &appenders,
        reads: &reads,
    };
    // All keys' checks first: they decide which indeterminate writers count.
    let orders: Vec<(u64, &[usize], Option<usize>)> = by_key
        .iter()
        .map(|(&key, rs)| {
            (
                key,
                rs.as_slice(),
                check_key(&ctx, key, rs, &mut included, sink),
            )
        })
        .collect();
    let committed = committed_appends(txns);
    let mut edges = Vec::new();
    for (key, rs, order) in orders {
        if let Some(longest) = order {
            let order = reads[longest].full;
            key_edges(&ctx, key, rs, order, &included, &mut edges);
            if let Some(appends) = committed.get(&key) {
                unseen_append_edges(&ctx, key, rs, order, appends, &mut edges);
            }
        }
    }
    Ok(Inference { edges, included })
}

/// What the per-key passes share.
struct Ctx<'a> {
    txns: &'a [Txn],
    appenders: &'a HashMap<(u64, u64), Appender>,
    reads: &'a [ReadObs<'a>],
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
                } if t.outcome == HistoryOutcome::Committed => {
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

/// Every committed transaction's appends, per key: `(element, appender)` in
/// history order.
fn committed_appends(txns: &[Txn]) -> BTreeMap<u64, Vec<(u64, u32)>> {
    let mut by_key: BTreeMap<u64, Vec<(u64, u32)>> = BTreeMap::new();
    for (i, t) in txns.iter().enumerate() {
        if t.outcome != HistoryOutcome::Committed {
            continue;
        }
        for m in &t.ops {
            if let MicroOp::Append { key, element } = *m {
                by_key.entry(key).or_default().push((element, i as u32));
            }
        }
    }
    by_key
}

/// Checks a committed transaction's reads against its own earlier reads and
/// appends (the `internal` anomaly) and records its reads.
fn internal<'a>(id: u32, t: &'a Txn, txns: &[Txn], sink: &mut Sink, reads: &mut Vec<ReadObs<'a>>) {
    // Per key: what the transaction knows the list to be (its first read and
    // the appends since), and its own appends.
    type Known<'a> = Option<(&'a [u64], Vec<u64>)>;
    let mut state: Vec<(u64, Known<'a>, Vec<u64>)> = Vec::new();
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
                if let Some((_, since)) = known {
                    since.push(*element);
                }
            }
            MicroOp::Read { value, .. } => {
                let full: &[u64] = match value {
                    Some(ReadValue::List(l)) => l,
                    _ => &[],
                };
                let bad = match known {
                    Some((base, since)) => {
                        let same = full.len() == base.len() + since.len()
                            && full.starts_with(base)
                            && full[base.len()..] == since[..];
                        (!same).then(|| list_text(&[*base, &since[..]].concat()))
                    }
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
                    *known = Some((full, Vec::new()));
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

/// What is wrong with the element at some position of a read.
#[derive(Debug, Clone, Copy)]
enum Mark {
    /// It occurred earlier in the read.
    Duplicate,
    /// No one appended it.
    Garbage,
    /// A failed transaction (this one) appended it.
    Aborted(u32),
}

/// The faulty positions of `list` (a read of `key`); marks the indeterminate
/// appenders of its elements as included (a committed read saw them).
fn element_marks(
    ctx: &Ctx<'_>,
    key: u64,
    list: &[u64],
    included: &mut [bool],
) -> Vec<(usize, Mark)> {
    let mut marks = Vec::new();
    let mut seen = HashSet::with_capacity(list.len());
    for (pos, e) in list.iter().enumerate() {
        if !seen.insert(*e) {
            marks.push((pos, Mark::Duplicate));
        }
        match ctx.appenders.get(&(key, *e)) {
            None => marks.push((pos, Mark::Garbage)),
            Some(a) => match ctx.txns[a.txn as usize].outcome {
                HistoryOutcome::Failed => marks.push((pos, Mark::Aborted(a.txn))),
                HistoryOutcome::Indeterminate => included[a.txn as usize] = true,
                HistoryOutcome::Committed => {}
            },
        }
    }
    marks
}

/// Reports the marks a read's elements carry, and G1b if its last element is
/// another transaction's non-final append to the key.
fn report_read(ctx: &Ctx<'_>, r: &ReadObs<'_>, marks: &[(usize, Mark)], sink: &mut Sink) {
    let reader = || ctx.txns[r.txn as usize].clone();
    for &(pos, mark) in marks.iter().filter(|m| m.0 < r.full.len()) {
        let (e, key, l) = (r.full[pos], r.key, list_text(r.full));
        match mark {
            Mark::Duplicate => sink.push(AnomalyKind::DuplicateElements, || {
                let detail = format!("key {key}: element {e} twice in {l}");
                Anomaly::new(AnomalyKind::DuplicateElements, vec![reader()], detail)
            }),
            Mark::Garbage => sink.push(AnomalyKind::GarbageRead, || {
                let detail = format!("key {key}: read element {e}, which no one appended");
                Anomaly::new(AnomalyKind::GarbageRead, vec![reader()], detail)
            }),
            Mark::Aborted(w) => sink.push(AnomalyKind::G1a, || {
                let detail = format!("key {key}: read element {e} of a failed transaction");
                let txns = vec![reader(), ctx.txns[w as usize].clone()];
                Anomaly::new(AnomalyKind::G1a, txns, detail)
            }),
        }
    }
    let Some(&e) = r.full.last() else { return };
    if let Some(a) = ctx.appenders.get(&(r.key, e)) {
        if !a.last && a.txn != r.txn {
            sink.push(AnomalyKind::G1b, || {
                let detail = format!(
                    "key {}: read {} ends in {e}, not the writer's final append",
                    r.key,
                    list_text(r.full)
                );
                let w = ctx.txns[a.txn as usize].clone();
                Anomaly::new(AnomalyKind::G1b, vec![reader(), w], detail)
            });
        }
    }
}

/// Checks every read of `key` (`rs`, indices into the reads): each must be
/// a prefix of the longest, else `incompatible-order`; element faults are
/// found once on the longest read and reported for each read holding them.
/// Returns the longest read if it gives a usable version order.
fn check_key(
    ctx: &Ctx<'_>,
    key: u64,
    rs: &[usize],
    included: &mut [bool],
    sink: &mut Sink,
) -> Option<usize> {
    let longest = *rs.iter().max_by_key(|&&i| ctx.reads[i].full.len())?;
    let order = ctx.reads[longest].full;
    let marks = element_marks(ctx, key, order, included);
    let mut usable = !marks.iter().any(|m| matches!(m.1, Mark::Duplicate));
    for &i in rs {
        let r = &ctx.reads[i];
        if order.starts_with(r.full) {
            report_read(ctx, r, &marks, sink);
            continue;
        }
        usable = false;
        sink.push(AnomalyKind::IncompatibleOrder, || {
            let detail = format!(
                "key {key}: read {} is not a prefix of read {}",
                list_text(r.full),
                list_text(order)
            );
            let txns = vec![
                ctx.txns[r.txn as usize].clone(),
                ctx.txns[ctx.reads[longest].txn as usize].clone(),
            ];
            Anomaly::new(AnomalyKind::IncompatibleOrder, txns, detail)
        });
        let own = element_marks(ctx, key, r.full, included);
        report_read(ctx, r, &own, sink);
    }
    usable.then_some(longest)
}

/// The ww/wr/rw edges of one key whose version order is `order`.
fn key_edges(
    ctx: &Ctx<'_>,
    key: u64,
    rs: &[usize],
    order: &[u64],
    included: &[bool],
    edges: &mut Vec<Edge>,
) {
    let writer = |pos: usize| {
        ctx.appenders
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
        let r = &ctx.reads[i];
        let Some(m) = r.ext else { continue };
        if m > 0 {
            edge(writer(m - 1), Some(r.txn), EdgeKind::Wr);
        }
        if m < order.len() {
            edge(Some(r.txn), writer(m), EdgeKind::Rw);
        }
    }
}

/// The edges of `key`'s committed appends that no committed read contains
/// (`appends`: the key's committed appends; `order`: its version order, the
/// longest read, of which every read is a prefix). Such an append lies after
/// every observed element: `ww` from the appender of `order`'s last element,
/// `rw` from every committed reader of the key that saw none of the
/// appender's elements (one that saw some read its intermediate state, which
/// [`report_read`] names G1b). No edge from a transaction to itself.
fn unseen_append_edges(
    ctx: &Ctx<'_>,
    key: u64,
    rs: &[usize],
    order: &[u64],
    appends: &[(u64, u32)],
    edges: &mut Vec<Edge>,
) {
    let appender = |e: &u64| ctx.appenders.get(&(key, *e)).map(|a| a.txn);
    let seen: HashSet<u64> = order.iter().copied().collect();
    // Where each transaction's first element stands in the order: a read
    // longer than that saw it.
    let mut first_pos: HashMap<u32, usize> = HashMap::new();
    for (pos, e) in order.iter().enumerate() {
        if let Some(t) = appender(e) {
            first_pos.entry(t).or_insert(pos);
        }
    }
    let last = order.last().and_then(appender);
    // Each reader once, with the longest of its reads (a transaction's reads
    // of one key are adjacent in `rs`).
    let mut readers: Vec<(u32, usize)> = Vec::new();
    for r in rs.iter().map(|&i| &ctx.reads[i]) {
        match readers.last_mut() {
            Some((t, len)) if *t == r.txn => *len = (*len).max(r.full.len()),
            _ => readers.push((r.txn, r.full.len())),
        }
    }
    for &(_, to) in appends.iter().filter(|(e, _)| !seen.contains(e)) {
        let mut edge = |from: u32, kind| {
            if from != to {
                edges.push(Edge {
                    from,
                    to,
                    kind,
                    key: Some(key),
                });
            }
        };
        if let Some(from) = last {
            edge(from, EdgeKind::Ww);
        }
        let saw_to = |len: usize| first_pos.get(&to).is_some_and(|&p| len > p);
        for &(r, len) in &readers {
            if !saw_to(len) {
                edge(r, EdgeKind::Rw);
            }
        }
    }
}
