//! What `splitkv bench list-append` and `splitkv bench register` share: run a
//! history workload (`splitkv_bench::history::HistoryCheck`) on the same
//! `BenchCluster` path as Smallbank and the simulator tests, on the embedding
//! API's polling threads, drain, then run the workload's check (history
//! written with `--history`, strict-serializability checker, lost-commit
//! accounting) and print counts, throughput and the verdict.

use crate::cli::{HistoryBenchArgs, Shape};
use crate::timeline::{ClusterSampler, Timeline};
use crate::Failure;
use splitkv_bench::history::{HistoryCheck, HistoryReport};
use splitkv_bench::history_gen::{HistoryStats, TxShape};
use splitkv_bench::loadgen::RetryPolicy;
use splitkv_bench::{BenchCluster, CheckError, ClusterSpec, ThreadRun, Workload};
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::net::Transport;
use splitkv_nic::Nanos;
use std::time::Duration;

/// Virtual time per pass when draining on one thread after the run (ns).
const DRAIN_TICK_NS: Nanos = 1_000;
/// Most passes of the drain before the run is declared stuck.
const DRAIN_PASSES_MAX: u64 = 10_000_000;
/// Longest a run without `--duration` may take before it is cut short.
const RUN_TIMEOUT: Duration = Duration::from_secs(600);
/// How long the transactions in flight when `--duration` ends may take.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The generator shape of `shape`.
pub fn tx_shape(shape: Shape) -> TxShape {
    match shape {
        Shape::Mixed => TxShape::Mixed,
        Shape::WriteSkew => TxShape::WriteSkew,
    }
}

/// Runs `workload` as `args` say and prints the report; a failed check is
/// [`Failure::Check`], a panicking polling thread [`Failure::Internal`].
pub fn run(mut workload: HistoryCheck, args: &HistoryBenchArgs) -> Result<(), Failure> {
    if let Some(p) = &args.timeline {
        crate::timeline::check_path(p)?;
    }
    workload.history_path = args.history.clone();
    let mut spec = ClusterSpec::new();
    spec.nodes = args.nodes;
    spec.replication = args.replication;
    spec.inflight_per_node = args.inflight;
    spec.budget_per_node = Some(args.transactions);
    spec.seed = args.seed;
    spec.threads = args.threads;
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
    let checked = cluster.check();
    let secs = elapsed.as_secs_f64().max(1e-9);
    let report = Summary {
        workload: cluster.workload.name(),
        args,
        stats,
        secs,
        checked: &checked,
    };
    if args.json {
        println!("{}", report.json());
    } else {
        report.print_text();
    }
    checked
        .map(|_| ())
        .map_err(|e| Failure::Check(e.to_string()))
}

/// What a history bench prints.
struct Summary<'a> {
    workload: &'static str,
    args: &'a HistoryBenchArgs,
    stats: HistoryStats,
    secs: f64,
    checked: &'a Result<HistoryReport, CheckError>,
}

impl Summary<'_> {
    fn verdict(&self) -> String {
        match self.checked {
            Ok(r) => format!(
                "valid ({} transactions, {} edges, {} ops)",
                r.checker.stats.txns.values().sum::<usize>(),
                r.checker.stats.edges.values().sum::<usize>(),
                r.ops
            ),
            Err(e) => format!("FAILED: {e}"),
        }
    }

    fn lost(&self) -> String {
        match self.checked {
            Ok(r) => format!(
                "ok ({} keys checked, {} committed key writes, {} values matched)",
                r.lost.keys_checked, r.lost.committed_key_writes, r.lost.values_checked
            ),
            Err(CheckError::Failed { check, detail }) if *check == "lost-commit" => {
                format!("FAILED: {detail}")
            }
            Err(_) => "not run (an earlier check failed)".into(),
        }
    }

    fn json(&self) -> serde_json::Value {
        let s = &self.stats;
        serde_json::json!({
            "workload": self.workload,
            "nodes": self.args.nodes,
            "replication": self.args.replication,
            "keys": self.args.keys,
            "inflight": self.args.inflight,
            "seed": self.args.seed,
            "threads": self.args.threads,
            "submitted": s.submitted,
            "committed": s.committed,
            "failed": s.failed_total(),
            "conflicts": s.conflicts(),
            "indeterminate": s.indeterminate + s.bad_results,
            "seconds": self.secs,
            "committed_per_s": s.committed as f64 / self.secs,
            "history_check": self.verdict(),
            "history_valid": self.checked.is_ok(),
            "lost_commit_check": self.lost(),
            "history_file": self.args.history.as_ref().map(|p| p.display().to_string()),
        })
    }

    fn print_text(&self) {
        let s = &self.stats;
        println!(
            "{} on {} nodes (replication {}), {} keys, {} in flight per node, seed {}",
            self.workload,
            self.args.nodes,
            self.args.replication,
            self.args.keys,
            self.args.inflight,
            self.args.seed
        );
        println!(
            "transactions: {} submitted, {} committed, {} failed ({} conflicts), {} indeterminate",
            s.submitted,
            s.committed,
            s.failed_total(),
            s.conflicts(),
            s.indeterminate + s.bad_results
        );
        println!(
            "throughput: {:.0} committed tx/s over {:.2} s",
            s.committed as f64 / self.secs,
            self.secs
        );
        println!("history check (strict serializability): {}", self.verdict());
        println!("lost-commit check: {}", self.lost());
        if let Some(p) = &self.args.history {
            println!("history written to {}", p.display());
        }
    }
}
