//! `splitkv bench smallbank`: builds an in-process cluster running Smallbank
//! (the same `BenchCluster` path the simulator tests run, on the embedding
//! API's polling threads), loads every
//! account, runs the warm-up and then the measured interval on the local
//! threaded driver, drains, and runs the money and replica checks.
//!
//! Figures count only outcomes taken within the measured interval: the warm-up
//! before it and the drain after it (transactions in flight when it ends) are
//! counted by the checks but in no figure.

use crate::cli::SmallbankArgs;
use crate::report::{Report, RunFigures, SmallbankReport};
use crate::timeline::{ClusterSampler, Timeline};
use crate::Failure;
use indicatif::{ProgressBar, ProgressStyle};
use splitkv_bench::loadgen::RetryPolicy;
use splitkv_bench::{ClusterSpec, Smallbank, SmallbankCluster, ThreadRun};
use splitkv_host::deploy::ClientSettings;
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::net::Transport;
use splitkv_nic::Nanos;
use std::time::Duration;

/// Virtual time per pass when draining on one thread after the run (ns).
pub(crate) const DRAIN_TICK_NS: Nanos = 1_000;
/// Most passes of the drain before the run is declared stuck.
pub(crate) const DRAIN_PASSES_MAX: u64 = 10_000_000;
/// How long the transactions in flight at the end of the run may take to
/// finish on the polling threads before the run is cut short (the rest then
/// finish in the single-threaded drain).
pub(crate) const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs the bench and prints its report; a failed check is [`Failure::Check`],
/// a panicking polling thread [`Failure::Internal`] with the panic's message.
pub fn run(args: &SmallbankArgs) -> Result<(), Failure> {
    if let Some(p) = &args.timeline {
        crate::timeline::check_path(p)?;
    }
    if args.clients == crate::external::ClientsMode::External {
        return crate::bench_external::smallbank(args);
    }
    let mut cluster = build(args, None)?;
    let start_ns = args.warmup.as_nanos() as Nanos;
    cluster.set_window(start_ns, start_ns + args.duration.as_nanos() as Nanos);
    let (mut cluster, _elapsed) = drive(cluster, args)?;
    let now = cluster.parts.now();
    cluster
        .drain(now, DRAIN_TICK_NS, DRAIN_PASSES_MAX)
        .map_err(|e| Failure::Check(e.to_string()))?;
    let money = cluster.check();
    let replicas = cluster.check_replicas();
    Report::smallbank(SmallbankReport {
        args,
        nodes: args.nodes,
        replication: args.replication,
        accounts: cluster.workload.accounts,
        figures: &RunFigures::of_cluster(&cluster),
        money: &money,
        replicas: &replicas,
    })
    .print(args.json)?;
    money.map_err(|e| Failure::Check(e.to_string()))?;
    replicas.map_err(|e| Failure::Check(e.to_string()))?;
    Ok(())
}

/// The cluster of `args`, loaded (with a progress bar); with `applications`,
/// serving them and running no in-node client (`--clients external`).
pub(crate) fn build(
    args: &SmallbankArgs,
    applications: Option<&ClientSettings>,
) -> Result<SmallbankCluster, Failure> {
    let accounts = args.accounts_per_node * args.nodes as u64;
    let workload = Smallbank::new(accounts, args.hot_accounts)
        .map_err(|e| Failure::Internal(e.to_string()))?
        .with_api(args.api)
        .map_err(|e| Failure::BadInput(e.to_string()))?;
    let mut spec = ClusterSpec::new();
    spec.nodes = args.nodes;
    spec.replication = args.replication;
    spec.inflight_per_node = args.inflight;
    spec.seed = args.seed;
    spec.threads = args.threads;
    spec.cache_objects = args.cache_objects;
    spec.commit = args.protocol.unwrap_or_default();
    spec.dma_prefetch = !args.no_dma_prefetch;
    spec.table = args.table;
    spec.retry = RetryPolicy {
        max_tries: args.max_tries,
        ..RetryPolicy::default()
    };
    if let Some(settings) = applications {
        spec.applications = Some(settings.clone());
        spec.budget_per_node = Some(0);
    }
    let bar = ProgressBar::new(accounts * 2).with_style(
        ProgressStyle::with_template("loading  {bar:40} {pos}/{len} rows {elapsed}")
            .expect("valid template"),
    );
    let transports = mem_network(spec.nodes)
        .into_iter()
        .map(|t| Box::new(t) as Box<dyn Transport>)
        .collect();
    let cluster = SmallbankCluster::build(spec, workload, transports, |n| bar.set_position(n))
        .map_err(Failure::from)?;
    bar.finish_and_clear();
    Ok(cluster)
}

/// Runs the cluster on `args.threads` polling threads of the embedding API
/// for the warm-up plus the measured interval (and until the transactions in
/// flight then have finished); returns it shut down, and the time run. With
/// `--timeline`, samples its committed count meanwhile and writes the plot.
fn drive(
    cluster: SmallbankCluster,
    args: &SmallbankArgs,
) -> Result<(SmallbankCluster, Duration), Failure> {
    let total = args.warmup + args.duration;
    let bar = ProgressBar::new(total.as_millis() as u64)
        .with_style(
            ProgressStyle::with_template("running  {bar:40} {elapsed}/{msg}")
                .expect("valid template"),
        )
        .with_message(format!("{total:?} ({:?} warm-up)", args.warmup));
    let run = ThreadRun {
        stop_after: Some(total),
        timeout: total + DRAIN_TIMEOUT,
        inject_panic: args.inject_panic,
    };
    let mut sampler = args.timeline.as_ref().map(|_| {
        let mut t = Timeline::new(format!(
            "smallbank, {} nodes (replication {}), {} in flight per node",
            args.nodes, args.replication, args.inflight
        ));
        t.event(args.warmup, "warm-up done");
        t.event(total, "load stops");
        ClusterSampler::new(t)
    });
    let done = cluster
        .run_threads_watched(run, |t, c| {
            bar.set_position(t.as_millis() as u64);
            if let Some(s) = sampler.as_mut() {
                s.tick(c);
            }
        })
        .map_err(Failure::from)?;
    bar.finish_and_clear();
    if let (Some(path), Some(s)) = (&args.timeline, sampler) {
        s.finish(&done.0.parts, "threads stopped")
            .write_reported(path)?;
    }
    Ok(done)
}
