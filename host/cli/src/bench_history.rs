//! What `splitkv bench list-append` and `splitkv bench register` share: run a
//! history workload (`splitkv_bench::history::HistoryCheck`) on the same
//! `BenchCluster` path as Smallbank and the simulator tests, on the embedding
//! API's polling threads, drain, then run the workload's check (history
//! written with `--history`, strict-serializability checker, lost-commit
//! accounting) and print counts, throughput and the verdict.

use crate::cli::HistoryRunArgs;
use crate::report::history::{Checked, Summary};
use crate::timeline::{ClusterSampler, Timeline};
use crate::Failure;
use splitkv_bench::history::HistoryCheck;
use splitkv_bench::history_gen::{HistoryStats, TxShape};
use splitkv_bench::loadgen::RetryPolicy;
use splitkv_bench::CheckError;
use splitkv_bench::{BenchCluster, ClusterSpec, ThreadRun, Workload};
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::net::Transport;
use splitkv_nic::Nanos;
use std::time::Duration;

/// Virtual time per pass when draining on one thread after the run (ns).
const DRAIN_TICK_NS: Nanos = 1_000;
/// Most passes of the drain before the run is declared stuck.
const DRAIN_PASSES_MAX: u64 = 10_000_000;
/// Longest a run without `--duration` may take before it is cut short.
pub(crate) const RUN_TIMEOUT: Duration = Duration::from_secs(600);
/// How long the transactions in flight when `--duration` ends may take.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `workload` (over `keys` keys, transactions of `shape`) as `args`
/// say and prints the report; a failed check is [`Failure::Check`], a
/// panicking polling thread [`Failure::Internal`].
pub fn run(
    mut workload: HistoryCheck,
    args: &HistoryRunArgs,
    keys: u64,
    shape: TxShape,
) -> Result<(), Failure> {
    if let Some(p) = &args.timeline {
        crate::timeline::check_path(p)?;
    }
    workload.history_path = args.history.clone();
    if args.clients == crate::external::ClientsMode::External {
        return crate::bench_external::history(workload, args, keys, shape);
    }
    let mut spec = ClusterSpec::new();
    spec.nodes = args.nodes;
    spec.replication = args.replication;
    spec.inflight_per_node = args.inflight;
    spec.budget_per_node = Some(args.transactions);
    spec.seed = args.seed;
    spec.threads = args.threads;
    spec.commit = args.protocol.unwrap_or_default();
    spec.retry = RetryPolicy {
        max_tries: 1,
        ..RetryPolicy::default()
    };
    let transports = mem_network(spec.nodes)
        .into_iter()
        .map(|t| Box::new(t) as Box<dyn Transport>)
        .collect();
    let cluster = BenchCluster::build(spec, workload, transports, |_| {})?;
    let run = ThreadRun {
        stop_after: args.duration,
        timeout: args.duration.map_or(RUN_TIMEOUT, |d| d + DRAIN_TIMEOUT),
        inject_panic: false,
    };
    let mut sampler = args.timeline.as_ref().map(|_| {
        let t = Timeline::new(format!(
            "{}, {} nodes (replication {}), {} in flight per node",
            cluster.workload.name(),
            args.nodes,
            args.replication,
            args.inflight
        ));
        ClusterSampler::new(t)
    });
    let (mut cluster, elapsed) = cluster.run_threads_watched(run, |_, c| {
        if let Some(s) = sampler.as_mut() {
            s.tick(c);
        }
    })?;
    if let (Some(path), Some(s)) = (&args.timeline, sampler) {
        s.finish(&cluster.parts, "threads stopped")
            .write_reported(path)?;
    }
    let now = cluster.parts.now();
    cluster
        .drain(now, DRAIN_TICK_NS, DRAIN_PASSES_MAX)
        .map_err(|e| Failure::Check(e.to_string()))?;
    let mut stats = HistoryStats::default();
    for l in &cluster.loadgens {
        stats.add(&l.generator().stats());
    }
    let checked = cluster.check().map(|r| Checked::from(&r));
    let workload = cluster.workload.name();
    report_in_process(workload, args, keys, shape, stats, elapsed, checked)
}

/// Prints an in-process run's summary (text or JSON, `args.json`) and turns
/// its history check into the command's result; the run's clients were in
/// the nodes or in processes of their own.
pub(crate) fn report_in_process(
    workload: &str,
    args: &HistoryRunArgs,
    keys: u64,
    shape: TxShape,
    stats: HistoryStats,
    elapsed: Duration,
    checked: Result<Checked, CheckError>,
) -> Result<(), Failure> {
    Summary {
        workload,
        args,
        keys,
        shape,
        nodes: args.nodes,
        replication: args.replication,
        stats,
        elapsed,
        checked: checked.as_ref().copied(),
        deployed: None,
    }
    .print(args.json);
    checked
        .map(|_| ())
        .map_err(|e| Failure::Check(e.to_string()))
}
