//! The checker's graph machinery: iterative Tarjan on graphs too deep for
//! recursion, shortest cycles preferring specific edge kinds, real-time edges
//! whose transitive closure is exactly "completed before invoked", the bound
//! on anomalies listed per kind, and a heavily broken history checked fast.

mod checker_support;

use checker_support::{a, r, Builder};
use proptest::prelude::*;
use splitkv_check::checker::generate::{serial_history, GenConfig};
use splitkv_check::checker::graph::{sccs, shortest_path, Graph, KindMask, Scratch};
use splitkv_check::checker::realtime::realtime_edges;
use splitkv_check::checker::{
    check, AnomalyKind, CheckOptions, Edge, EdgeKind, HistoryOutcome, Txn,
};
use splitkv_check::history::{MicroOp, OpType, ReadValue};
use std::time::Instant;

fn edge(from: u32, to: u32, kind: EdgeKind) -> Edge {
    Edge {
        from,
        to,
        kind,
        key: None,
    }
}

#[test]
fn tarjan_is_iterative_on_a_million_node_ring() {
    let n = 1_000_000u32;
    let ring: Vec<Edge> = (0..n).map(|i| edge(i, (i + 1) % n, EdgeKind::Ww)).collect();
    let g = Graph::new(n as usize, ring.clone());
    let all: Vec<u32> = (0..n).collect();
    let mut s = Scratch::new(n as usize);
    let comps = sccs(&g, &all, &|_| true, KindMask::of(&[EdgeKind::Ww]), &mut s);
    assert_eq!(comps.len(), 1);
    assert_eq!(comps[0].len(), n as usize);
    // Without the closing edge it is a chain: no component of two or more.
    let g = Graph::new(n as usize, ring[..n as usize - 1].to_vec());
    assert!(sccs(&g, &all, &|_| true, KindMask::of(&[EdgeKind::Ww]), &mut s).is_empty());
    // Edges of kinds outside the mask are not followed.
    let g = Graph::new(n as usize, ring);
    assert!(sccs(&g, &all, &|_| true, KindMask::of(&[EdgeKind::Rw]), &mut s).is_empty());
}

#[test]
fn shortest_cycle_prefers_specific_kinds() {
    // 0 -> 1 by ww and rt, 1 -> 0 by wr; a long way round 0 -> 2 -> 3 -> 0.
    let g = Graph::new(
        4,
        vec![
            edge(0, 1, EdgeKind::Realtime),
            edge(0, 1, EdgeKind::Ww),
            edge(1, 0, EdgeKind::Wr),
            edge(0, 2, EdgeKind::Ww),
            edge(2, 3, EdgeKind::Ww),
            edge(3, 0, EdgeKind::Ww),
            edge(3, 3, EdgeKind::Ww), // self-edges are dropped
        ],
    );
    assert_eq!(g.edges().len(), 6);
    let mut s = Scratch::new(4);
    let mut budget = usize::MAX;
    let all = KindMask::of(&EdgeKind::ALL);
    let c = shortest_path(&g, 0, 0, &|_| true, all, &mut budget, &mut s).unwrap();
    let kinds: Vec<_> = c.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [EdgeKind::Ww, EdgeKind::Wr]);
    let ww = KindMask::of(&[EdgeKind::Ww]);
    let c = shortest_path(&g, 0, 0, &|_| true, ww, &mut budget, &mut s).unwrap();
    assert_eq!(c.len(), 3);
    let mut none = 0;
    assert!(
        shortest_path(&g, 0, 0, &|_| true, ww, &mut none, &mut s).is_none(),
        "budget spent"
    );
}

fn txn(invoke_ns: u64, dur_ns: u64, outcome: HistoryOutcome) -> Txn {
    Txn {
        process: 0,
        invoke_index: 0,
        complete_index: Some(1),
        outcome,
        ops: vec![],
        invoke_ns,
        complete_ns: Some(invoke_ns + dur_ns),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The reduced real-time edges have exactly the brute-force relation as
    /// their transitive closure.
    #[test]
    fn realtime_edges_close_to_completed_before_invoked(
        spec in proptest::collection::vec((0u64..60, 0u64..20, 0u8..3), 1..40),
    ) {
        let txns: Vec<Txn> = spec
            .iter()
            .map(|&(t, d, o)| txn(t, d, [HistoryOutcome::Committed, HistoryOutcome::Indeterminate, HistoryOutcome::Failed][o as usize]))
            .collect();
        let in_graph: Vec<bool> = txns.iter().map(|t| t.outcome != HistoryOutcome::Failed).collect();
        let edges = realtime_edges(&txns, &in_graph);
        let n = txns.len();
        let g = Graph::new(n, edges.clone());
        prop_assert!(edges.len() <= n * n);
        let mut s = Scratch::new(n);
        let rt = KindMask::of(&[EdgeKind::Realtime]);
        for i in 0..n {
            for j in 0..n {
                let want = i != j
                    && in_graph[i]
                    && in_graph[j]
                    && txns[i].outcome == HistoryOutcome::Committed
                    && txns[i].complete_ns.unwrap() < txns[j].invoke_ns;
                let mut budget = usize::MAX;
                let got = i != j
                    && shortest_path(&g, i as u32, j as u32, &|_| true, rt, &mut budget, &mut s).is_some();
                prop_assert_eq!(got, want, "{} -> {}", i, j);
            }
        }
    }
}

#[test]
fn anomalies_listed_per_kind_are_bounded_but_all_counted() {
    let mut b = Builder::default();
    for k in 0..10 {
        b.txn(0, Some(10), OpType::Fail, vec![a(k, 1)])
            .ok(20, 30, vec![r(k, &[1])]);
    }
    let opts = CheckOptions {
        anomalies_per_kind_max: 2,
        ..CheckOptions::default()
    };
    let rep = check(&b.history(), &opts).unwrap();
    assert_eq!(rep.found[&AnomalyKind::G1a], 10);
    assert_eq!(rep.anomalies.len(), 2);
    assert!(!rep.valid);
}

/// Every read of a large concurrent history loses its last element (stale
/// reads everywhere): the checker reports cycles and stays fast.
#[test]
fn a_heavily_broken_history_checks_fast() {
    let mut h = serial_history(&GenConfig {
        txns: 20_000,
        ..GenConfig::default()
    });
    for op in h.ops.iter_mut().filter(|o| o.kind == OpType::Ok) {
        for m in op.value.iter_mut() {
            if let MicroOp::Read {
                value: Some(ReadValue::List(l)),
                ..
            } = m
            {
                l.pop();
            }
        }
    }
    let start = Instant::now();
    let rep = check(&h, &CheckOptions::default()).unwrap();
    let took = start.elapsed();
    assert!(!rep.valid);
    assert!(rep.stats.cycles_components > 0, "{rep}");
    assert!(took.as_secs() < 20, "took {took:?}");
    println!(
        "{} found in {took:?}: {:?}",
        rep.stats.cycles_components, rep.found
    );
}
