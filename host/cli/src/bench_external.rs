//! The in-process benches with `--clients external`: the cluster serves
//! applications on sockets in a fresh directory and runs no client of its
//! own; one `splitkv-app-client` process per node (`crate::external`) runs
//! that node's client; the checks run over the database and the clients'
//! results as over the in-node clients'.

use crate::bench_smallbank::{DRAIN_PASSES_MAX, DRAIN_TICK_NS, DRAIN_TIMEOUT};
use crate::cli::{HistoryRunArgs, SmallbankArgs};
use crate::external::{client_program, cpu_times, Clients, RunDir, CONNECT_WAIT_MS};
use crate::report::history::Checked;
use crate::report::{Report, RunFigures, SmallbankReport};
use crate::Failure;
use splitkv_bench::history::{HistoryCheck, HistoryKind};
use splitkv_bench::history_gen::{HistoryStats, TxShape};
use splitkv_bench::loadgen::RetryPolicy;
use splitkv_bench::smallbank::check_money_range;
use splitkv_bench::{BenchCluster, CheckError, ClusterSpec, ThreadRun, TxApi, Workload};
use splitkv_check::history::{History, Op};
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::net::Transport;
use splitkv_workloads::results::ClientResults;
use splitkv_workloads::spec::{ClientSpec, ClientWorkload};
use std::time::{Duration, Instant};

/// How long the clients may take to exit once the cluster's run ended.
const CLIENT_EXIT_WAIT: Duration = Duration::from_secs(10);

/// `splitkv bench smallbank --clients external`.
pub fn smallbank(args: &SmallbankArgs) -> Result<(), Failure> {
    let program = client_program()?;
    let dir = RunDir::new()?;
    let settings = dir.settings(args.inflight);
    let cluster = crate::bench_smallbank::build(args, Some(&settings))?;
    let specs: Vec<(u16, ClientSpec)> = (0..args.nodes as u16)
        .map(|n| {
            let spec = ClientSpec {
                workload: ClientWorkload::Smallbank {
                    workload: cluster.workload,
                },
                client: n,
                seed: args.seed,
                inflight: args.inflight,
                max_tries: args.max_tries,
                budget: None,
                warmup_ms: args.warmup.as_millis() as u64,
                run_ms: args.duration.as_millis() as u64,
            };
            (n, spec)
        })
        .collect();
    let total = args.warmup + args.duration;
    let run = ThreadRun {
        stop_after: Some(total),
        timeout: Duration::from_millis(CONNECT_WAIT_MS) + total + DRAIN_TIMEOUT,
        inject_panic: args.inject_panic,
    };
    let cpu_before = cpu_times();
    let mut clients = Clients::start(&program, &settings, dir.path(), &specs, DRAIN_TIMEOUT)?;
    let (mut cluster, _elapsed) = cluster
        .run_threads_with_outside_clients(run, |_, _| clients.all_exited())
        .map_err(Failure::from)?;
    let results = clients.finish(Instant::now() + CLIENT_EXIT_WAIT, None)?;
    let cpu_after = cpu_times();
    let now = cluster.parts.now();
    cluster
        .drain(now, DRAIN_TICK_NS, DRAIN_PASSES_MAX)
        .map_err(|e| Failure::Check(e.to_string()))?;
    let money = money(&cluster, &results);
    let replicas = cluster.check_replicas();
    let figures = RunFigures::of_external(&cluster, &results);
    Report::smallbank(SmallbankReport {
        args,
        nodes: args.nodes,
        replication: args.replication,
        accounts: cluster.workload.accounts,
        figures: &figures,
        money: &money,
        replicas: &replicas,
    })
    .print(args.json)?;
    print_cpu(cpu_before, cpu_after, figures.all.committed, &results);
    money.map_err(|e| Failure::Check(e.to_string()))?;
    replicas.map_err(|e| Failure::Check(e.to_string()))?;
    Ok(())
}

/// The money check over the clients' summaries.
fn money(
    cluster: &splitkv_bench::SmallbankCluster,
    results: &[ClientResults],
) -> Result<splitkv_bench::smallbank::MoneyReport, CheckError> {
    let (mut created, mut unknown, mut reads, mut sum) = (0i64, (0i64, 0i64), 0u64, 0i64);
    for s in results.iter().filter_map(|r| r.smallbank.as_ref()) {
        created += s.money_created;
        unknown = (unknown.0 + s.money_unknown.0, unknown.1 + s.money_unknown.1);
        reads += s.balance_reads;
        sum += s.balance_total_sum;
    }
    check_money_range(
        &cluster.workload,
        &cluster.db(),
        created,
        unknown,
        reads,
        sum,
    )
}

/// One line on standard error: CPU time of this process and of its client
/// processes over the run, per committed transaction, and how long the
/// clients waited for a CPU while runnable.
fn print_cpu(
    before: (Duration, Duration),
    after: (Duration, Duration),
    committed: u64,
    clients: &[ClientResults],
) {
    let own = after.0.saturating_sub(before.0);
    let children = after.1.saturating_sub(before.1);
    let per_tx_us = (own + children).as_secs_f64() * 1e6 / committed.max(1) as f64;
    let waited_s = clients.iter().map(|r| r.run_queue_wait_ns).sum::<u64>() as f64 / 1e9;
    eprintln!(
        "cpu: bench process {:.2} s, client processes {:.2} s, {per_tx_us:.1} µs per committed transaction; clients waited {waited_s:.2} s for a CPU",
        own.as_secs_f64(),
        children.as_secs_f64()
    );
}

/// `splitkv bench list-append|register --clients external` (shipped api).
pub fn history(
    workload: HistoryCheck,
    args: &HistoryRunArgs,
    keys: u64,
    shape: TxShape,
) -> Result<(), Failure> {
    if workload.api() != TxApi::Shipped {
        return Err(Failure::BadInput(
            "--clients external runs the history workloads through their shipped procedure only (--api shipped)".into(),
        ));
    }
    let program = client_program()?;
    let dir = RunDir::new()?;
    let settings = dir.settings(args.inflight);
    let mut spec = ClusterSpec::new();
    spec.nodes = args.nodes;
    spec.replication = args.replication;
    spec.inflight_per_node = args.inflight;
    spec.budget_per_node = Some(0);
    spec.seed = args.seed;
    spec.threads = args.threads;
    spec.retry = RetryPolicy {
        max_tries: 1,
        ..RetryPolicy::default()
    };
    spec.applications = Some(settings.clone());
    let client_workload = match workload.kind {
        HistoryKind::ListAppend(config) => ClientWorkload::ListAppend { config },
        HistoryKind::Register(config) => ClientWorkload::Register { config },
    };
    let transports = mem_network(spec.nodes)
        .into_iter()
        .map(|t| Box::new(t) as Box<dyn Transport>)
        .collect();
    let cluster = BenchCluster::build(spec, workload, transports, |_| {})?;
    let run_for = args.duration.unwrap_or(crate::bench_history::RUN_TIMEOUT);
    let specs: Vec<(u16, ClientSpec)> = (0..args.nodes as u16)
        .map(|n| {
            let spec = ClientSpec {
                workload: client_workload,
                client: n,
                seed: args.seed,
                inflight: args.inflight,
                max_tries: 1,
                budget: Some(args.transactions),
                warmup_ms: 0,
                run_ms: run_for.as_millis() as u64,
            };
            (n, spec)
        })
        .collect();
    let run = ThreadRun {
        stop_after: Some(run_for),
        timeout: Duration::from_millis(CONNECT_WAIT_MS) + run_for + DRAIN_TIMEOUT,
        inject_panic: false,
    };
    let started = Instant::now();
    let mut clients = Clients::start(&program, &settings, dir.path(), &specs, DRAIN_TIMEOUT)?;
    let (mut cluster, _) = cluster
        .run_threads_with_outside_clients(run, |_, _| clients.all_exited())
        .map_err(Failure::from)?;
    let results = clients.finish(Instant::now() + CLIENT_EXIT_WAIT, None)?;
    let elapsed = started.elapsed();
    let now = cluster.parts.now();
    cluster
        .drain(now, DRAIN_TICK_NS, DRAIN_PASSES_MAX)
        .map_err(|e| Failure::Check(e.to_string()))?;
    let mut stats = HistoryStats::default();
    for r in &results {
        if let Some(h) = &r.history {
            stats.add(&HistoryStats::from(&h.stats));
        }
    }
    let checked = merged_history(&results).and_then(|history| {
        cluster
            .workload
            .check_history(&cluster.db(), &history, stats)
    });
    let checked = checked.map(|r| Checked::from(&r));
    let workload = cluster.workload.name();
    crate::bench_history::report_in_process(workload, args, keys, shape, stats, elapsed, checked)
}

/// The clients' histories as one, their times shifted onto the earliest
/// client's clock (every client reports its `CLOCK_MONOTONIC` origin).
fn merged_history(results: &[ClientResults]) -> Result<History, CheckError> {
    let failed = |detail: String| CheckError::Failed {
        check: "history",
        detail,
    };
    let base = results.iter().map(|r| r.clock_origin_ns).min().unwrap_or(0);
    let mut parts = Vec::with_capacity(results.len());
    for r in results {
        let h = r
            .history
            .as_ref()
            .ok_or_else(|| failed(format!("node {}'s external client sent no history", r.node)))?;
        let shift = r.clock_origin_ns - base;
        let mut ops = Vec::with_capacity(h.ops.len());
        for v in &h.ops {
            let mut op = Op::from_json(v).map_err(|e| failed(format!("node {}: {e}", r.node)))?;
            op.time_ns = op.time_ns.saturating_add(shift);
            ops.push(op);
        }
        parts.push(ops);
    }
    Ok(History::merge(parts))
}
