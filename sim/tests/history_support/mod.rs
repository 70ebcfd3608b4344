//! Shared by the history tests (`history_sim.rs`, `history_threads.rs`): the
//! shape of a history run on the one cluster path
//! (`splitkv_bench::BenchCluster` over the embedding API, running the
//! list-append or register workload of `splitkv_bench::history`), and the
//! end-of-run check: the workload's own check (history written as JSON lines,
//! read back here and compared, strict-serializability checker, lost-commit
//! accounting, fault-free counters).
#![allow(dead_code)]

use splitkv_bench::history::{HistoryCheck, HistoryReport};
use splitkv_bench::history_gen::TxShape;
use splitkv_bench::loadgen::RetryPolicy;
use splitkv_bench::{BenchCluster, CheckError, ClusterSpec};
use splitkv_check::history::History;
use splitkv_nic::Nanos;
use std::path::PathBuf;

/// A cluster running one history workload.
pub type HistoryCluster = BenchCluster<HistoryCheck>;

/// List-append over `active_keys` hot keys for `nodes` clients of `budget` each.
pub fn list_append(active_keys: u64, nodes: usize, budget: u64, shape: TxShape) -> HistoryCheck {
    HistoryCheck::list_append(active_keys, nodes as u64, budget, shape).expect("config")
}

/// Registers over `keys` keys.
pub fn register(keys: u64, shape: TxShape) -> HistoryCheck {
    HistoryCheck::register(keys, shape).expect("config")
}

/// The cluster shape of a history run: `nodes` nodes (replication 3), one
/// client each with `inflight` transactions outstanding and a `budget`.
pub fn spec(nodes: usize, inflight: usize, budget: u64, seed: u64, dma_ns: Nanos) -> ClusterSpec {
    let mut spec = ClusterSpec::new();
    spec.nodes = nodes;
    spec.replication = 3;
    spec.inflight_per_node = inflight;
    spec.budget_per_node = Some(budget);
    spec.seed = seed;
    spec.dma_latency_ns = dma_ns;
    spec.retry = RetryPolicy {
        max_tries: 1,
        ..RetryPolicy::default()
    };
    spec
}

/// Where run `name` writes its history.
pub fn history_path(name: &str) -> PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.jsonl"))
}

/// Runs the workload's check on a finished cluster (its history written to
/// [`history_path`]`(name)`), reads the written history back and compares it
/// with the clients' records. Panics on a failed check, naming every anomaly
/// kind found ("{name}: anomalies found: G2-item x2 ...": the mutation script
/// greps for it) or the lost-commit violation.
pub fn check_run(cluster: &mut HistoryCluster, name: &str) -> HistoryReport {
    let path = history_path(name);
    cluster.workload.history_path = Some(path.clone());
    let checked = cluster.check();
    let written = std::fs::File::open(&path).expect("the check wrote the history");
    let read = History::read_jsonl(std::io::BufReader::new(written)).expect("read history");
    let gens: Vec<_> = cluster.loadgens.iter().map(|l| l.generator()).collect();
    let merged = splitkv_bench::history::merged_history(&gens).expect("finished");
    assert_eq!(read, merged, "{name}: the history survives JSONL");
    match checked {
        Ok(report) => report,
        Err(CheckError::Failed { detail, .. }) => {
            panic!("{name}: {detail} (history in {})", path.display())
        }
        Err(e) => panic!("{name}: {e}"),
    }
}

/// A fault-free run's outcomes: `submitted` transactions submitted, every
/// one finished with a known outcome (none indeterminate, no bad result).
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn assert_every_outcome_known(
    s: &splitkv_bench::history_gen::HistoryStats,
    submitted: u64,
    name: &str,
) {
    assert_eq!(
        s.submitted, submitted,
        "{name}: every transaction submitted"
    );
    assert_eq!(
        s.finished(),
        s.submitted,
        "{name}: every transaction completed"
    );
    assert_eq!(
        s.indeterminate + s.bad_results,
        0,
        "{name}: fault-free: every outcome known"
    );
}
