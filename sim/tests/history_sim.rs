//! The history checks under the deterministic simulator: list-append and
//! register runs on 3 nodes (replication 3) with few keys and many
//! transactions in flight, on several seeds; each history is written as JSON
//! lines, read back, checked for strict serializability
//! (`splitkv_check::checker`) and for lost and phantom commits against the
//! primaries' final state (`splitkv_check::lost_commits`).
//!
//! The write-skew runs (read two keys, write one) are the ones
//! `scripts/mutation` expects to fail when read validation is skipped or a
//! read-set lock is ignored (`--cfg splitkv_mutation=...`).

mod history_support;

use history_support::{
    assert_every_outcome_known, check_run, list_append, register, spec, HistoryCluster,
};
use splitkv_bench::history::{HistoryCheck, HistoryReport as Checked};
use splitkv_bench::history_gen::TxShape;
use splitkv_check::checker::EdgeKind;
use splitkv_check::history::History;
use splitkv_layout::host_nic::TxStatus;
use splitkv_sim::cluster::{build_on_sim, SimCluster};
use splitkv_sim::{Sim, SimConfig};

const NODES: usize = 3;
/// Transactions each node's client keeps outstanding.
const INFLIGHT: usize = 4;
/// Keys of the mixed runs (list-append: the active window).
const KEYS_MIXED: u64 = 12;
/// Keys of the write-skew runs.
const KEYS_SKEW: u64 = 4;
/// Transactions per node in one run.
const BUDGET: u64 = 3_000;
/// Passes between checks for the end of a run.
const PASSES_PER_SLICE: u64 = 5_000;
/// Passes after which a run counts as stalled.
const PASSES_MAX: u64 = 50_000_000;

/// Runs `workload` under the simulator (seeded by `seed`) on the one cluster
/// path until every client's budget has its outcomes and the cluster is
/// idle; returns the finished cluster and the virtual time reached.
fn simulate(workload: HistoryCheck, seed: u64, budget: u64, name: &str) -> (HistoryCluster, u64) {
    let cfg = SimConfig {
        seed,
        ..SimConfig::default()
    };
    let spec = spec(NODES, INFLIGHT, budget, seed, 500);
    let (mut cluster, net) = build_on_sim(spec, workload, cfg).expect("build");
    let mut sim = Sim::new(cfg);
    if let Err(e) = cluster.run_sim_until_quiescent(&mut sim, &net, PASSES_PER_SLICE, PASSES_MAX) {
        panic!("{name}: simulated network healthy, no stall: {e}");
    }
    for l in &cluster.loadgens {
        assert!(l.error().is_none(), "{name}: client error {:?}", l.error());
        assert!(
            !splitkv_bench::TxGenerator::exhausted(l.generator()),
            "{name}: the key space covers the budget"
        );
    }
    cluster.finish(sim.now());
    (cluster, sim.now())
}

/// The merged history of a finished cluster.
fn history_of(cluster: &HistoryCluster) -> History {
    let gens: Vec<_> = cluster.loadgens.iter().map(|l| l.generator()).collect();
    splitkv_bench::history::merged_history(&gens).expect("finished")
}

fn run(workload: HistoryCheck, seed: u64, budget: u64, name: &str) -> Checked {
    let (mut cluster, now) = simulate(workload, seed, budget, name);
    let checked = check_run(&mut cluster, name);
    let s = checked.stats;
    assert_every_outcome_known(&s, budget * NODES as u64, name);
    assert_eq!(
        s.failed_with(TxStatus::UserAborted) + s.failed_with(TxStatus::Rejected),
        0,
        "{name}: no list overflowed and no transaction was refused"
    );
    assert_eq!(
        checked.ops as u64,
        2 * s.submitted,
        "{name}: invoke + completion each"
    );
    eprintln!(
        "{name}: {} committed, {} conflicts, hottest key {} writes, {} ops, {} edges, {} µs virtual",
        s.committed,
        s.conflicts(),
        checked.hottest_key_writes,
        checked.ops,
        checked.checker.stats.edges.values().sum::<usize>(),
        now / 1000
    );
    checked
}

/// Real contention: conflict aborts happened, some key took many writes, and
/// the committed transactions depend on each other through reads (rw and wr
/// edges), so the checker had cycles to look for.
fn assert_contended(c: &Checked, hottest_min: u64, name: &str) {
    let s = c.stats;
    assert!(
        s.conflicts() > 0,
        "{name}: no conflict aborts, the check is vacuous"
    );
    assert!(
        c.hottest_key_writes >= hottest_min,
        "{name}: hottest key has only {} writes",
        c.hottest_key_writes
    );
    assert!(
        s.committed >= s.submitted / 100,
        "{name}: {} of {} committed",
        s.committed,
        s.submitted
    );
    let edges = |k| c.checker.stats.edges.get(&k).copied().unwrap_or(0) as u64;
    assert!(
        edges(EdgeKind::Rw) >= s.committed / 4 && edges(EdgeKind::Wr) >= s.committed / 4,
        "{name}: few dependencies: {:?}",
        c.checker.stats.edges
    );
    assert!(c.lost.committed_key_writes > 0 && c.lost.values_checked > 0);
}

#[test]
fn list_append_high_contention_is_strictly_serializable_on_several_seeds() {
    for seed in [1, 2, 3] {
        let w = list_append(KEYS_MIXED, NODES, BUDGET, TxShape::Mixed);
        let name = format!("list_append_mixed_seed{seed}");
        let c = run(w, seed, BUDGET, &name);
        assert_contended(&c, 20, &name);
    }
}

#[test]
fn register_high_contention_is_strictly_serializable_on_several_seeds() {
    for seed in [4, 5, 6] {
        let w = register(KEYS_MIXED, TxShape::Mixed);
        let name = format!("register_mixed_seed{seed}");
        let c = run(w, seed, BUDGET, &name);
        assert_contended(&c, 20, &name);
    }
}

#[test]
fn list_append_write_skew_shapes_are_serializable() {
    for seed in [7, 8, 9, 10] {
        let w = list_append(KEYS_SKEW, NODES, BUDGET, TxShape::WriteSkew);
        let name = format!("list_append_write_skew_seed{seed}");
        let c = run(w, seed, BUDGET, &name);
        assert_contended(&c, 20, &name);
    }
}

#[test]
fn register_write_skew_shapes_are_serializable() {
    for seed in [11, 12, 13, 14] {
        let w = register(KEYS_SKEW, TxShape::WriteSkew);
        let name = format!("register_write_skew_seed{seed}");
        let c = run(w, seed, BUDGET, &name);
        assert_contended(&c, 20, &name);
    }
}

#[test]
fn same_seed_gives_the_same_history() {
    let w = || list_append(8, NODES, 300, TxShape::Mixed);
    let run_once = |seed| history_of(&simulate(w(), seed, 300, "same_seed").0);
    let (a, b) = (run_once(21), run_once(21));
    assert_eq!(a.len(), 1_800);
    assert_eq!(a, b, "a seed reproduces the whole history");
    let c = run_once(22);
    assert_ne!(a, c, "another seed gives another history");
}
