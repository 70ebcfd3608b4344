//! The history checks on the local threaded driver, through the same cluster
//! path as the simulator tests and the `splitkv` binary
//! (`BenchCluster::run_threads`: the embedding API's polling threads):
//! list-append and register on 3 nodes (replication 3) with few keys, bounded
//! by a transaction budget and a timeout. Times are nanoseconds since the
//! cluster's start on one monotonic clock, so real-time edges across the
//! polling threads are sound.

mod history_support;

use history_support::{check_run, list_append, register, spec, HistoryCluster};
use splitkv_bench::history::HistoryCheck;
use splitkv_bench::history_gen::TxShape;
use splitkv_bench::ThreadRun;
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::net::Transport;
use std::time::Duration;

const NODES: usize = 3;
/// Polling threads (the machine has 2 cores).
const THREADS: usize = 2;
/// Transactions per node.
const BUDGET: u64 = 5_000;
/// Longest a run may take before the test fails.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// Passes of the single-threaded drain after the threads stop.
const DRAIN_PASSES_MAX: u64 = 10_000_000;

fn run(workload: HistoryCheck, seed: u64, name: &str) {
    let mut spec = spec(NODES, 4, BUDGET, seed, 0);
    spec.threads = THREADS;
    let transports = mem_network(NODES)
        .into_iter()
        .map(|t| Box::new(t) as Box<dyn Transport>)
        .collect();
    let cluster = HistoryCluster::build(spec, workload, transports, |_| {}).expect("build");
    let run = ThreadRun {
        stop_after: None,
        timeout: RUN_TIMEOUT,
        inject_panic: false,
    };
    let (mut cluster, elapsed) = cluster.run_threads(run, |_| {}).expect("no panic");
    assert!(
        elapsed < RUN_TIMEOUT,
        "{name}: the budget did not complete within {RUN_TIMEOUT:?}"
    );
    let now = cluster.parts.now();
    cluster
        .drain(now, 1_000, DRAIN_PASSES_MAX)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let c = check_run(&mut cluster, name);
    let s = c.stats;
    assert_eq!(s.submitted, BUDGET * NODES as u64);
    assert_eq!(s.finished(), s.submitted);
    assert_eq!(s.indeterminate + s.bad_results, 0);
    assert!(
        s.conflicts() > 0,
        "{name}: no conflict aborts, the check is vacuous"
    );
    assert!(
        s.committed > 0 && c.hottest_key_writes >= 10,
        "{name}: {c:?}"
    );
    eprintln!(
        "{name}: {} committed, {} conflicts, hottest key {} writes, {} ops in {elapsed:?}",
        s.committed,
        s.conflicts(),
        c.hottest_key_writes,
        c.ops,
    );
}

#[test]
fn list_append_on_the_local_cluster_is_strictly_serializable() {
    for seed in [1, 2] {
        let w = list_append(8, NODES, BUDGET, TxShape::Mixed);
        run(w, seed, &format!("threads_list_append_seed{seed}"));
    }
}

#[test]
fn register_on_the_local_cluster_is_strictly_serializable() {
    for seed in [3, 4] {
        let w = register(8, TxShape::Mixed);
        run(w, seed, &format!("threads_register_seed{seed}"));
    }
}
