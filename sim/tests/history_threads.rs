//! The history checks on the local threaded driver
//! (`splitkv_host::cluster::run_threads`): list-append and register on 3 nodes
//! (replication 3) with few keys, bounded by a transaction budget and a
//! timeout. Times are nanoseconds since the cluster's start on one monotonic
//! clock, so real-time edges across the polling threads are sound.

mod history_support;

use history_support::{check_run, Client, HistoryCluster, HistorySpec, Workload};
use splitkv_bench::history_client::TxShape;
use splitkv_host::cluster::{round_robin, run_threads};
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::{Component, Nanos};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const NODES: usize = 3;
/// Polling threads (the machine has 2 cores).
const THREADS: usize = 2;
/// Transactions per node.
const BUDGET: u64 = 5_000;
/// Longest a run may take before the test fails.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// Passes of the single-threaded drain after the threads stop.
const DRAIN_PASSES_MAX: u64 = 10_000_000;

/// A client that counts itself in `done` once it has nothing left to do, so
/// the test thread knows when to stop the polling threads.
struct Watched<'a> {
    client: &'a mut Client,
    done: &'a AtomicUsize,
    counted: bool,
}

impl Component for Watched<'_> {
    fn run_iteration(&mut self, now: Nanos) -> bool {
        let work = self.client.run_iteration(now);
        if !self.counted && self.client.is_done() {
            self.counted = true;
            self.done.fetch_add(1, Ordering::Release);
        }
        work
    }
}

fn run(workload: Workload, seed: u64, name: &str) {
    let spec = HistorySpec {
        nodes: NODES,
        replication: 3,
        workload,
        inflight_per_node: 4,
        budget_per_node: BUDGET,
        seed,
        dma_latency_ns: 0,
    };
    let transports = mem_network(NODES)
        .into_iter()
        .map(|t| Box::new(t) as Box<dyn splitkv_nic::net::Transport>)
        .collect();
    let mut cluster = HistoryCluster::build(spec, transports);
    let epoch = Instant::now();
    let (done, stop) = (AtomicUsize::new(0), AtomicBool::new(false));
    {
        let HistoryCluster {
            nics,
            workers,
            clients,
            ..
        } = &mut cluster;
        let mut watched: Vec<Watched> = clients
            .iter_mut()
            .map(|client| Watched {
                client,
                done: &done,
                counted: false,
            })
            .collect();
        let mut components: Vec<&mut dyn Component> = Vec::new();
        for ((n, w), c) in nics
            .iter_mut()
            .zip(workers.iter_mut())
            .zip(watched.iter_mut())
        {
            components.push(n);
            components.push(w);
            components.push(c);
        }
        std::thread::scope(|s| {
            s.spawn(|| {
                while done.load(Ordering::Acquire) < NODES && epoch.elapsed() < RUN_TIMEOUT {
                    std::thread::sleep(Duration::from_millis(5));
                }
                stop.store(true, Ordering::Release);
            });
            run_threads(round_robin(components, THREADS), epoch, &stop);
        });
    }
    assert!(
        epoch.elapsed() < RUN_TIMEOUT,
        "{name}: the budget did not complete within {RUN_TIMEOUT:?}"
    );
    let mut passes = 0;
    while !cluster.is_quiescent() {
        let now = epoch.elapsed().as_nanos() as Nanos;
        for c in cluster.components() {
            c.run_iteration(now);
        }
        passes += 1;
        assert!(
            passes < DRAIN_PASSES_MAX,
            "{name}: the cluster did not drain"
        );
    }
    let history = cluster.finish(epoch.elapsed().as_nanos() as Nanos);
    let c = check_run(&cluster, &history, name);
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
        "{name}: {} committed, {} conflicts, hottest key {} writes, {} ops in {:?}",
        s.committed,
        s.conflicts(),
        c.hottest_key_writes,
        c.ops,
        epoch.elapsed()
    );
}

#[test]
fn list_append_on_the_local_cluster_is_strictly_serializable() {
    for seed in [1, 2] {
        let w = Workload::list_append(8, NODES, BUDGET, TxShape::Mixed);
        run(w, seed, &format!("threads_list_append_seed{seed}"));
    }
}

#[test]
fn register_on_the_local_cluster_is_strictly_serializable() {
    for seed in [3, 4] {
        let w = Workload::register(8, TxShape::Mixed);
        run(w, seed, &format!("threads_register_seed{seed}"));
    }
}
