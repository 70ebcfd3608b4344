//! `splitkv bench smallbank`: builds an in-process cluster running Smallbank
//! (the same `BenchCluster` path the simulator tests run), loads every
//! account, runs the warm-up and then the measured interval on the local
//! threaded driver, drains, and runs the money and replica checks.
//!
//! Figures count only outcomes taken within the measured interval: the warm-up
//! before it and the drain after it (transactions in flight when it ends) are
//! counted by the checks but in no figure.

use crate::cli::SmallbankArgs;
use crate::report::{Report, SmallbankReport};
use crate::Failure;
use indicatif::{ProgressBar, ProgressStyle};
use splitkv_bench::loadgen::RetryPolicy;
use splitkv_bench::{ClusterSpec, Smallbank, SmallbankCluster};
use splitkv_host::cluster::{round_robin, run_threads};
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::net::Transport;
use splitkv_nic::{Component, Nanos};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Virtual time per pass when draining on one thread after the run (ns).
const DRAIN_TICK_NS: Nanos = 1_000;
/// Most passes of the drain before the run is declared stuck.
const DRAIN_PASSES_MAX: u64 = 10_000_000;
/// How often the progress bar and the stop flag are updated.
const PROGRESS_PERIOD: Duration = Duration::from_millis(50);

/// Runs the bench and prints its report; a failed check is [`Failure::Check`].
pub fn run(args: &SmallbankArgs) -> Result<(), Failure> {
    let mut cluster = build(args)?;
    let start_ns = args.warmup.as_nanos() as Nanos;
    cluster.set_window(start_ns, start_ns + args.duration.as_nanos() as Nanos);
    let elapsed = drive(&mut cluster, args);
    cluster.stop_load();
    cluster
        .drain(elapsed.as_nanos() as u64, DRAIN_TICK_NS, DRAIN_PASSES_MAX)
        .map_err(|e| Failure::Check(e.to_string()))?;
    let money = cluster.check();
    let replicas = cluster.check_replicas();
    let report = Report::smallbank(SmallbankReport {
        args,
        cluster: &cluster,
        secs: args.duration.as_secs_f64(),
        money: &money,
        replicas: &replicas,
    });
    if args.json {
        let json =
            serde_json::to_string_pretty(&report).map_err(|e| Failure::Internal(e.to_string()))?;
        println!("{json}");
    } else {
        report.print_text();
    }
    money.map_err(|e| Failure::Check(e.to_string()))?;
    replicas.map_err(|e| Failure::Check(e.to_string()))?;
    Ok(())
}

/// The cluster of `args`, loaded (with a progress bar).
fn build(args: &SmallbankArgs) -> Result<SmallbankCluster, Failure> {
    let accounts = args.accounts_per_node * args.nodes as u64;
    let workload = Smallbank::new(accounts, args.hot_accounts)
        .map_err(|e| Failure::Internal(e.to_string()))?;
    let mut spec = ClusterSpec::new();
    spec.nodes = args.nodes;
    spec.replication = args.replication;
    spec.inflight_per_node = args.inflight;
    spec.seed = args.seed;
    spec.cache_objects = args.cache_objects;
    spec.dma_prefetch = !args.no_dma_prefetch;
    spec.table = args.table;
    spec.retry = RetryPolicy {
        max_tries: args.max_tries,
        ..RetryPolicy::default()
    };
    let bar = ProgressBar::new(2 * accounts).with_style(
        ProgressStyle::with_template("loading  {bar:40} {pos}/{len} rows {elapsed}")
            .expect("valid template"),
    );
    let transports: Vec<Box<dyn Transport>> = mem_network(spec.nodes)
        .into_iter()
        .map(|t| Box::new(t) as Box<dyn Transport>)
        .collect();
    let cluster = SmallbankCluster::build(spec, workload, transports, |n| bar.set_position(n))
        .map_err(|e| Failure::Internal(e.to_string()))?;
    bar.finish_and_clear();
    Ok(cluster)
}

/// Runs the cluster's components on `args.threads` polling threads for the
/// warm-up plus the measured interval; returns the time run.
fn drive(cluster: &mut SmallbankCluster, args: &SmallbankArgs) -> Duration {
    let total = args.warmup + args.duration;
    let bar = ProgressBar::new(total.as_millis() as u64)
        .with_style(
            ProgressStyle::with_template("running  {bar:40} {elapsed}/{msg}")
                .expect("valid template"),
        )
        .with_message(format!("{total:?} ({:?} warm-up)", args.warmup));
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let mut fault = InjectedPanic;
    std::thread::scope(|s| {
        s.spawn(|| {
            while start.elapsed() < total {
                bar.set_position(start.elapsed().as_millis() as u64);
                std::thread::sleep(PROGRESS_PERIOD.min(total.saturating_sub(start.elapsed())));
            }
            stop.store(true, Ordering::Relaxed);
        });
        let mut components = cluster.components();
        if args.inject_panic {
            components.push(&mut fault);
        }
        run_threads(round_robin(components, args.threads), start, &stop);
    });
    bar.finish_and_clear();
    start.elapsed()
}

/// A component that panics when first run (`--inject-panic`, a test hook for
/// the internal-error exit code).
struct InjectedPanic;

impl Component for InjectedPanic {
    fn run_iteration(&mut self, _now: Nanos) -> bool {
        panic!("injected panic (--inject-panic)");
    }
}
