//! Property tests: histories of a serial in-memory execution (random
//! list-append or register transactions, real-time-consistent timestamps,
//! some outcomes `fail` or `info`) are always valid; corrupting one read of
//! such a history (drop an element, swap two, add an aborted element or
//! value, read a stale initial value) is always detected; and a history
//! written as JSON lines and read back checks the same.

use proptest::prelude::*;
use splitkv_check::checker::generate::{serial_history, GenConfig};
use splitkv_check::checker::txn::pair;
use splitkv_check::checker::{check, CheckOptions, HistoryOutcome, Model, Txn};
use splitkv_check::history::{History, MicroOp, ReadValue};
use std::collections::HashMap;

fn config(seed: u64, model: Model, serial_times: bool, processes: u64) -> GenConfig {
    GenConfig {
        seed,
        txns: 200,
        processes,
        keys_active: 6,
        writes_per_key_max: 12,
        ops_per_txn_max: 4,
        model,
        fail_per_mille: 80,
        info_per_mille: 80,
        spread_ns: 400,
        serial_times,
    }
}

fn assert_valid(h: &History) {
    let rep = check(h, &CheckOptions::default()).expect("well-formed");
    assert!(rep.valid, "a serial execution must be valid:\n{rep}");
}

/// Who wrote each (key, element or value): transaction and outcome.
fn writers(txns: &[Txn]) -> HashMap<(u64, u64), (usize, HistoryOutcome)> {
    let mut m = HashMap::new();
    for (i, t) in txns.iter().enumerate() {
        for op in &t.ops {
            match *op {
                MicroOp::Append { key, element: v } | MicroOp::Write { key, value: v } => {
                    m.insert((key, v), (i, t.outcome));
                }
                MicroOp::Read { .. } => {}
            }
        }
    }
    m
}

/// Every committed read: (transaction, micro-op position, key, value).
fn reads(txns: &[Txn]) -> Vec<(usize, usize, u64, Option<ReadValue>)> {
    let mut out = Vec::new();
    for (i, t) in txns.iter().enumerate() {
        if t.outcome != HistoryOutcome::Committed {
            continue;
        }
        for (j, op) in t.ops.iter().enumerate() {
            if let MicroOp::Read { key, value } = op {
                out.push((i, j, *key, value.clone()));
            }
        }
    }
    out
}

/// Replaces micro-op `j` of transaction `t`'s completion with a read of `v`.
fn set_read(h: &mut History, txns: &[Txn], t: usize, j: usize, key: u64, v: Option<ReadValue>) {
    let at = txns[t].complete_index.expect("committed") as usize;
    assert_eq!(h.ops[at].index as usize, at);
    h.ops[at].value[j] = MicroOp::Read { key, value: v };
}

/// The corrupted list read for corruption `which`, if this read allows it.
fn corrupt_list(
    which: u8,
    t: usize,
    key: u64,
    l: &[u64],
    w: &HashMap<(u64, u64), (usize, HistoryOutcome)>,
    all: &[(usize, usize, u64, Option<ReadValue>)],
    failed: &HashMap<u64, u64>,
) -> Option<Vec<u64>> {
    let committed_other =
        |e: &u64| matches!(w.get(&(key, *e)), Some(&(x, HistoryOutcome::Committed)) if x != t);
    match which {
        // Drop the last element, which some other committed read also saw.
        0 => {
            let b = *l.last()?;
            let seen_elsewhere = all.iter().any(|(t2, _, k2, v2)| {
                *t2 != t && *k2 == key && matches!(v2, Some(ReadValue::List(l2)) if l2.contains(&b))
            });
            (committed_other(&b) && seen_elsewhere).then(|| l[..l.len() - 1].to_vec())
        }
        // Swap the last two elements.
        1 if l.len() >= 2 => {
            let n = l.len();
            (committed_other(&l[n - 1]) && committed_other(&l[n - 2])).then(|| {
                let mut c = l.to_vec();
                c.swap(n - 1, n - 2);
                c
            })
        }
        // Add an element of a failed append.
        2 => failed.get(&key).map(|&f| [l, &[f]].concat()),
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn serial_executions_are_valid(
        seed in any::<u64>(),
        register in any::<bool>(),
        serial_times in any::<bool>(),
        processes in 1u64..16,
    ) {
        let model = if register { Model::Register } else { Model::ListAppend };
        assert_valid(&serial_history(&config(seed, model, serial_times, processes)));
    }

    #[test]
    fn a_corrupted_list_read_is_detected(seed in any::<u64>(), which in 0u8..3, pick in any::<usize>()) {
        let mut h = serial_history(&config(seed, Model::ListAppend, true, 4));
        let txns = pair(&h).unwrap();
        let w = writers(&txns);
        let all = reads(&txns);
        let failed: HashMap<u64, u64> = w
            .iter()
            .filter(|(_, (_, o))| *o == HistoryOutcome::Failed)
            .map(|(&(k, e), _)| (k, e))
            .collect();
        let candidates: Vec<_> = all
            .iter()
            .filter_map(|(t, j, key, v)| {
                let l: &[u64] = match v {
                    Some(ReadValue::List(l)) => l,
                    _ => &[],
                };
                corrupt_list(which, *t, *key, l, &w, &all, &failed).map(|c| (*t, *j, *key, c))
            })
            .collect();
        prop_assume!(!candidates.is_empty());
        let (t, j, key, bad) = candidates[pick % candidates.len()].clone();
        set_read(&mut h, &txns, t, j, key, Some(ReadValue::List(bad)));
        let rep = check(&h, &CheckOptions::default()).unwrap();
        prop_assert!(!rep.valid, "corruption {} of txn {} not detected", which, t);
    }

    #[test]
    fn a_corrupted_register_read_is_detected(seed in any::<u64>(), stale in any::<bool>(), pick in any::<usize>()) {
        let mut h = serial_history(&config(seed, Model::Register, true, 4));
        let txns = pair(&h).unwrap();
        let w = writers(&txns);
        let all = reads(&txns);
        let failed: HashMap<u64, u64> = w
            .iter()
            .filter(|(_, (_, o))| *o == HistoryOutcome::Failed)
            .map(|(&(k, v), _)| (k, v))
            .collect();
        let candidates: Vec<_> = all
            .iter()
            .filter_map(|(t, j, key, v)| {
                let bad = if stale {
                    // Read the initial nil instead of a committed write.
                    match v {
                        Some(ReadValue::Register(x)) => match w.get(&(*key, *x)) {
                            Some(&(wt, HistoryOutcome::Committed)) if wt != *t => Some(None),
                            _ => None,
                        },
                        _ => None,
                    }
                } else {
                    failed.get(key).map(|&f| Some(ReadValue::Register(f)))
                };
                bad.map(|b| (*t, *j, *key, b))
            })
            .collect();
        prop_assume!(!candidates.is_empty());
        let (t, j, key, bad) = candidates[pick % candidates.len()].clone();
        set_read(&mut h, &txns, t, j, key, bad);
        let rep = check(&h, &CheckOptions::default()).unwrap();
        prop_assert!(!rep.valid, "corruption (stale {}) of txn {} not detected", stale, t);
    }
}

#[test]
fn a_history_written_as_json_lines_checks_the_same() {
    for model in [Model::ListAppend, Model::Register] {
        let h = serial_history(&GenConfig {
            txns: 2_000,
            model,
            ..GenConfig::default()
        });
        let mut bytes = Vec::new();
        h.write_jsonl(&mut bytes).unwrap();
        let back = History::read_jsonl(&bytes[..]).unwrap();
        assert_eq!(back, h);
        let opts = CheckOptions::default();
        let (a, b) = (check(&h, &opts).unwrap(), check(&back, &opts).unwrap());
        assert!(a.valid, "{a}");
        assert_eq!(a, b);
        // A corrupted copy (one read returns a value no one wrote) is reported
        // the same way after a round trip through the file.
        let mut bad = h.clone();
        let (i, j) = bad
            .ops
            .iter()
            .enumerate()
            .filter(|(_, o)| o.kind == splitkv_check::history::OpType::Ok)
            .find_map(|(i, o)| {
                o.value
                    .iter()
                    .position(|m| matches!(m, MicroOp::Read { .. }))
                    .map(|j| (i, j))
            })
            .unwrap();
        let key = bad.ops[i].value[j].key();
        let garbage = match model {
            Model::Register => ReadValue::Register(u64::MAX),
            _ => ReadValue::List(vec![u64::MAX]),
        };
        bad.ops[i].value[j] = MicroOp::Read {
            key,
            value: Some(garbage),
        };
        let mut bytes = Vec::new();
        bad.write_jsonl(&mut bytes).unwrap();
        let back = History::read_jsonl(&bytes[..]).unwrap();
        let (a, b) = (check(&bad, &opts).unwrap(), check(&back, &opts).unwrap());
        assert!(!a.valid);
        assert_eq!(a, b);
    }
}

/// A large concurrent history (16 processes, a few hundred keys) is valid and
/// its edges are all there: every committed transaction is in the graph.
#[test]
fn a_large_concurrent_history_is_valid() {
    let h = serial_history(&GenConfig {
        txns: 20_000,
        processes: 16,
        keys_active: 256,
        ..GenConfig::default()
    });
    let rep = check(&h, &CheckOptions::default()).unwrap();
    assert!(rep.valid, "{rep}");
    assert!(rep.stats.txns[&HistoryOutcome::Committed] > 18_000);
    assert!(rep.stats.edges.len() == 4, "ww, wr, rw and rt edges: {rep}");
}
