//! Dnl-4 (`splitkv_nic::protocol::coordinator` `coordinator/dnl.rs` and
//! the servers' Dnl steps; `tla/DnlSkeleton.tla` row `Dnl4Row`) under the
//! deterministic simulator without faults: list-append and register
//! histories, mixed and write-skew shapes, checked for strict
//! serializability and for lost and phantom commits against the primaries'
//! final state, as `history_sim.rs` checks Xenic OCC.

mod history_support;

use history_support::{check_run, list_append, register, spec};
use splitkv_bench::history::HistoryCheck;
use splitkv_bench::history_gen::TxShape;
use splitkv_layout::host_nic::TxStatus;
use splitkv_nic::CommitProtocol;
use splitkv_sim::cluster::{build_on_sim, SimCluster};
use splitkv_sim::{Sim, SimConfig};

const NODES: usize = 3;
const INFLIGHT: usize = 4;
const BUDGET: u64 = 1_000;
const PASSES_PER_SLICE: u64 = 5_000;
const PASSES_MAX: u64 = 50_000_000;

/// Runs `workload` on a Dnl-4 cluster seeded by `seed`, checks its history
/// and returns (committed, conflict aborts).
fn run_dnl4(workload: HistoryCheck, seed: u64, name: &str) -> (u64, u64) {
    let cfg = SimConfig {
        seed,
        ..SimConfig::default()
    };
    let mut spec = spec(NODES, INFLIGHT, BUDGET, seed, 500);
    spec.commit = CommitProtocol::Dnl4;
    let (mut cluster, net) = build_on_sim(spec, workload, cfg).expect("build");
    let mut sim = Sim::new(cfg);
    if let Err(e) = cluster.run_sim_until_quiescent(&mut sim, &net, PASSES_PER_SLICE, PASSES_MAX) {
        panic!("{name}: no stall without faults: {e}");
    }
    cluster.finish(sim.now());
    let checked = check_run(&mut cluster, name);
    let s = checked.stats;
    assert_eq!(s.submitted, BUDGET * NODES as u64);
    assert_eq!(
        s.finished(),
        s.submitted,
        "{name}: every transaction completed"
    );
    assert_eq!(
        s.indeterminate + s.bad_results,
        0,
        "{name}: every outcome known"
    );
    assert_eq!(
        s.failed_with(TxStatus::Rejected),
        0,
        "{name}: no transaction was refused"
    );
    assert!(
        checked.lost.committed_key_writes > 0,
        "{name}: committed writes were checked against the primaries"
    );
    (s.committed, s.conflicts())
}

#[test]
fn dnl4_list_append_is_strictly_serializable() {
    for (seed, shape) in [(31, TxShape::Mixed), (32, TxShape::WriteSkew)] {
        let w = list_append(8, NODES, BUDGET, shape);
        let (committed, conflicts) = run_dnl4(w, seed, &format!("dnl4_list_append_{seed}"));
        assert!(
            committed > 0 && conflicts > 0,
            "contended: {committed} {conflicts}"
        );
    }
}

#[test]
fn dnl4_register_is_strictly_serializable() {
    for (seed, shape) in [(33, TxShape::Mixed), (34, TxShape::WriteSkew)] {
        let w = register(4, shape);
        let (committed, conflicts) = run_dnl4(w, seed, &format!("dnl4_register_{seed}"));
        assert!(
            committed > 0 && conflicts > 0,
            "contended: {committed} {conflicts}"
        );
    }
}
