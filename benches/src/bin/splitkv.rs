//! `splitkv`: run splitkv's workloads on an in-process cluster.
//!
//! ```text
//! splitkv bench smallbank [--nodes 3] [--replication 3] [--accounts-per-node N]
//!                         [--threads T] [--duration 10s] [--seed S] [--json]
//! splitkv bench lookup    [--keys 8000000] [--d-max 8,16,32,unlimited]
//!                         [--segment-slots 16] [--cold] [--json]
//! ```
//!
//! Exit codes: 0 success; 1 a run or check failed; 2 bad command line.

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use splitkv_bench::cluster::{MoneyReport, ReplicaReport};
use splitkv_bench::{SmallbankCluster, SmallbankSpec};
use splitkv_host::cluster::{round_robin, run_threads};
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::net::Transport;
use splitkv_nic::NODES_MAX;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(
    name = "splitkv",
    version,
    about = "A replicated, strictly serializable transactional key-value store with a NIC-side protocol engine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a workload on an in-process cluster and check the result.
    #[command(subcommand)]
    Bench(Workload),
}

#[derive(Subcommand, Debug)]
enum Workload {
    /// Smallbank (FaSST/DrTM mix, 4% hot set), then the money and replica checks.
    Smallbank(SmallbankArgs),
    /// Xenic Table 2: objects read and DMA round trips per NIC lookup at 90% occupancy.
    Lookup(LookupArgs),
}

#[derive(Args, Debug)]
struct LookupArgs {
    /// Table capacity in keys (filled to 90% of next_pow2(keys·10/9) home slots).
    #[arg(long, default_value_t = 8_000_000)]
    keys: usize,
    /// Maximum displacements to measure, comma separated; `unlimited` allowed.
    #[arg(long, default_value = "8,16,32,unlimited", value_delimiter = ',', value_parser = parse_d_max)]
    d_max: Vec<usize>,
    /// Home slots per segment (one NIC index entry each), a power of two.
    #[arg(long, default_value_t = 16)]
    segment_slots: usize,
    /// Learn hints only from lookups (no warm-up scan).
    #[arg(long)]
    cold: bool,
    /// Seed of the random keys.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

fn parse_d_max(s: &str) -> Result<usize, String> {
    if s == "unlimited" {
        return Ok(splitkv_bench::lookup_report::D_MAX_UNLIMITED);
    }
    match s.parse::<usize>() {
        Ok(d) if (1..=splitkv_bench::lookup_report::D_MAX_UNLIMITED).contains(&d) => Ok(d),
        _ => Err(format!(
            "expected 1..={} or `unlimited`",
            splitkv_bench::lookup_report::D_MAX_UNLIMITED
        )),
    }
}

/// Xenic Table 2 (objects read, round trips) by D_m.
const XENIC_TABLE_2: [(usize, f64, f64); 4] = [
    (8, 3.43, 1.07),
    (16, 4.13, 1.04),
    (32, 4.84, 1.02),
    (4096, 6.39, 1.00),
];

fn lookup(args: &LookupArgs) -> Result<(), Box<dyn std::error::Error>> {
    use splitkv_bench::lookup_report::{run, LookupSpec};
    let mut rows = Vec::new();
    for &d_max in &args.d_max {
        let bar = ProgressBar::new(0).with_style(
            ProgressStyle::with_template("D_m {prefix:>4} {msg:7} {bar:40} {pos}/{len}")
                .expect("valid template"),
        );
        bar.set_prefix(d_max.to_string());
        let spec = LookupSpec {
            keys: args.keys,
            d_max,
            segment_slots: args.segment_slots,
            warm: !args.cold,
            seed: args.seed,
        };
        let row = run(&spec, |stage, done, total| {
            bar.set_message(stage.to_string());
            bar.set_length(total);
            bar.set_position(done);
        })?;
        bar.finish_and_clear();
        rows.push(row);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "NIC lookups at 90% occupancy ({} keys, {} home slots per segment, {} hints)",
        rows.first().map_or(0, |r| r.keys),
        args.segment_slots,
        if args.cold { "cold" } else { "warm" }
    );
    println!(
        "{:>9} {:>10} {:>10} {:>12} {:>14} {:>12} {:>10}",
        "D_m", "objects", "trips", "paper obj", "paper trips", "overflow %", "mean d_i"
    );
    for r in &rows {
        let paper = XENIC_TABLE_2.iter().find(|p| p.0 == r.d_max);
        let d = if r.d_max == splitkv_bench::lookup_report::D_MAX_UNLIMITED {
            "unlimited".to_string()
        } else {
            r.d_max.to_string()
        };
        let (po, pt) = paper.map_or(("-".to_string(), "-".to_string()), |p| {
            (format!("{:.2}", p.1), format!("{:.2}", p.2))
        });
        println!(
            "{:>9} {:>10.2} {:>10.3} {:>12} {:>14} {:>12.2} {:>10.2}",
            d,
            r.objects_read,
            r.round_trips,
            po,
            pt,
            100.0 * r.overflow_keys as f64 / r.keys as f64,
            r.d_known_mean
        );
    }
    Ok(())
}

#[derive(Args, Debug)]
struct SmallbankArgs {
    /// Nodes in the cluster (1..=16).
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Replicas per shard: primary plus backups (1..=nodes).
    #[arg(long, default_value_t = 3)]
    replication: usize,
    /// Accounts per node.
    #[arg(long, default_value_t = 100_000)]
    accounts_per_node: u64,
    /// Hot-set size (default: 4% of all accounts).
    #[arg(long)]
    hot_accounts: Option<u64>,
    /// Polling threads the cluster's components are spread over.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// How long to run, e.g. 10s, 500ms, 1m.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Transactions each node's client keeps outstanding.
    #[arg(long, default_value_t = 64)]
    inflight: usize,
    /// Seed of the workload's random choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Host table: Xenic's Robinhood table or Dandelion's DLHT.
    #[arg(long, value_enum, default_value_t = Table::Robinhood)]
    table: Table,
    /// NIC object-cache capacity per node, in objects.
    #[arg(long, default_value_t = splitkv_nic::index::CACHE_OBJECTS_DEFAULT)]
    cache_objects: usize,
    /// Do not prefetch host-table lines when the NIC submits a DMA read (to
    /// measure what the prefetch gives).
    #[arg(long)]
    no_dma_prefetch: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum Table {
    /// Xenic's Robinhood table (Xenic §4.1.2).
    Robinhood,
    /// Dandelion's DLHT (Dandelion §6).
    Dlht,
}

impl SmallbankArgs {
    fn validate(&self) -> Result<(), String> {
        if self.nodes == 0 || self.nodes > NODES_MAX {
            return Err(format!(
                "--nodes must be between 1 and {NODES_MAX}, got {}",
                self.nodes
            ));
        }
        if self.replication == 0 || self.replication > self.nodes {
            return Err(format!(
                "--replication must be between 1 and --nodes ({}), got {}",
                self.nodes, self.replication
            ));
        }
        if self.accounts_per_node == 0
            || self.accounts_per_node.saturating_mul(self.nodes as u64) < 2
        {
            return Err("--accounts-per-node must give the cluster at least 2 accounts".into());
        }
        if self.accounts_per_node > 50_000_000 {
            return Err(format!(
                "--accounts-per-node {} is over the supported 50,000,000",
                self.accounts_per_node
            ));
        }
        if self
            .hot_accounts
            .is_some_and(|h| h < 2 || h > self.accounts_per_node * self.nodes as u64)
        {
            return Err("--hot-accounts must be between 2 and the number of accounts".into());
        }
        if self.threads == 0 || self.threads > 64 {
            return Err(format!(
                "--threads must be between 1 and 64, got {}",
                self.threads
            ));
        }
        if self.duration.is_zero() {
            return Err("--duration must be greater than zero".into());
        }
        if self.cache_objects == 0 {
            return Err("--cache-objects must be at least 1".into());
        }
        if self.inflight == 0 || self.inflight > 1024 {
            return Err(format!(
                "--inflight must be between 1 and 1024, got {}",
                self.inflight
            ));
        }
        Ok(())
    }
}

#[derive(serde::Serialize)]
struct Report {
    workload: &'static str,
    table: Table,
    nodes: usize,
    replication: usize,
    accounts: u64,
    threads: usize,
    duration_s: f64,
    seed: u64,
    committed: u64,
    committed_per_s: f64,
    aborted: u64,
    abort_rate: f64,
    user_aborted: u64,
    rejected: u64,
    latency_us_p50: f64,
    latency_us_p99: f64,
    latency_us_p999: f64,
    packets_sent: u64,
    messages_sent: u64,
    messages_per_packet: f64,
    nic_cache_hit_rate: f64,
    dma_reads_per_committed: f64,
    money_check: String,
    replica_check: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Bench(Workload::Lookup(args)) => {
            if args.keys < 16 || args.keys > 1 << 30 || !args.segment_slots.is_power_of_two() {
                eprintln!(
                    "error: --keys must be between 16 and 2^30 and --segment-slots a power of two"
                );
                return ExitCode::from(2);
            }
            match lookup(&args) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Bench(Workload::Smallbank(args)) => {
            if let Err(e) = args.validate() {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
            match smallbank(&args) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}

fn smallbank(args: &SmallbankArgs) -> Result<(), Box<dyn std::error::Error>> {
    let mut spec = SmallbankSpec::new();
    spec.nodes = args.nodes;
    spec.replication = args.replication;
    spec.accounts_per_node = args.accounts_per_node;
    spec.hot_accounts = args.hot_accounts;
    spec.inflight_per_node = args.inflight;
    spec.seed = args.seed;
    spec.cache_objects = args.cache_objects;
    spec.dma_prefetch = !args.no_dma_prefetch;
    spec.table = match args.table {
        Table::Robinhood => splitkv_host::table::TableKind::Robinhood,
        Table::Dlht => splitkv_host::table::TableKind::Dlht,
    };

    let rows = 2 * spec.accounts();
    let bar = ProgressBar::new(rows).with_style(
        ProgressStyle::with_template("loading  {bar:40} {pos}/{len} rows {elapsed}")
            .expect("valid template"),
    );
    let transports: Vec<Box<dyn Transport>> = mem_network(spec.nodes)
        .into_iter()
        .map(|t| Box::new(t) as Box<dyn Transport>)
        .collect();
    let mut cluster = SmallbankCluster::build(spec, transports, |n| bar.set_position(n))?;
    bar.finish_and_clear();

    let run_bar = ProgressBar::new(args.duration.as_millis() as u64)
        .with_style(
            ProgressStyle::with_template("running  {bar:40} {elapsed}/{msg}")
                .expect("valid template"),
        )
        .with_message(format!("{:?}", args.duration));
    let stop = AtomicBool::new(false);
    let epoch = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            while epoch.elapsed() < args.duration {
                run_bar.set_position(epoch.elapsed().as_millis() as u64);
                std::thread::sleep(
                    Duration::from_millis(50).min(args.duration.saturating_sub(epoch.elapsed())),
                );
            }
            stop.store(true, Ordering::Relaxed);
        });
        run_threads(
            round_robin(cluster.components(), args.threads),
            epoch,
            &stop,
        );
    });
    let elapsed = epoch.elapsed();
    run_bar.finish_and_clear();
    cluster.stop_load();
    cluster.drain(elapsed.as_nanos() as u64, 1_000, 10_000_000)?;

    let load = cluster.load_stats();
    let mut hist = cluster.loadgens[0].latency_ns().clone();
    for l in &cluster.loadgens[1..] {
        hist.add(l.latency_ns()).expect("same histogram bounds");
    }
    let (mut packets, mut messages, mut hits, mut dma_reads) = (0, 0, 0, 0);
    for n in &cluster.nics {
        let s = n.stats();
        packets += s.batch.packets;
        messages += s.batch.messages;
        hits += s.server.index_hits;
        dma_reads += s.server.dma_reads;
    }
    // Every lookup that missed the NIC cache started with a DMA read.
    let lookups = hits + dma_reads
        - cluster
            .nics
            .iter()
            .map(|n| n.stats().server.lookup_rereads)
            .sum::<u64>();
    let money = cluster.check_money();
    let replicas = cluster.check_replicas();
    let secs = elapsed.as_secs_f64();
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    let attempts = load.committed + load.aborted;
    let report = Report {
        workload: "smallbank",
        table: args.table,
        nodes: args.nodes,
        replication: args.replication,
        accounts: cluster.spec.accounts(),
        threads: args.threads,
        duration_s: secs,
        seed: args.seed,
        committed: load.committed,
        committed_per_s: load.committed as f64 / secs,
        aborted: load.aborted,
        abort_rate: if attempts == 0 {
            0.0
        } else {
            load.aborted as f64 / attempts as f64
        },
        user_aborted: load.user_aborted,
        rejected: load.rejected,
        latency_us_p50: us(0.5),
        latency_us_p99: us(0.99),
        latency_us_p999: us(0.999),
        packets_sent: packets,
        messages_sent: messages,
        messages_per_packet: if packets == 0 {
            0.0
        } else {
            messages as f64 / packets as f64
        },
        nic_cache_hit_rate: if lookups == 0 {
            0.0
        } else {
            hits as f64 / lookups as f64
        },
        dma_reads_per_committed: if load.committed == 0 {
            0.0
        } else {
            dma_reads as f64 / load.committed as f64
        },
        money_check: describe_money(&money),
        replica_check: describe_replicas(&replicas),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report);
    }
    money?;
    replicas?;
    Ok(())
}

fn describe_money(r: &Result<MoneyReport, splitkv_bench::CheckError>) -> String {
    match r {
        Ok(m) => format!(
            "ok: total {} = initial {} + created {}",
            m.total, m.initial, m.created
        ),
        Err(e) => format!("FAILED: {e}"),
    }
}

fn describe_replicas(r: &Result<ReplicaReport, splitkv_bench::CheckError>) -> String {
    match r {
        Ok(m) => format!(
            "ok: {} backup rows match their primaries ({} rows held)",
            m.rows_compared, m.rows_total
        ),
        Err(e) => format!("FAILED: {e}"),
    }
}

fn print_text(r: &Report) {
    println!(
        "smallbank: {} nodes, replication {}, {} accounts, {} threads, {:.1} s, seed {}",
        r.nodes, r.replication, r.accounts, r.threads, r.duration_s, r.seed
    );
    println!(
        "  committed      {:>12} ({:.0} tx/s)",
        r.committed, r.committed_per_s
    );
    println!(
        "  aborted        {:>12} (abort rate {:.2}%)",
        r.aborted,
        100.0 * r.abort_rate
    );
    println!(
        "  user aborted   {:>12} (insufficient funds)",
        r.user_aborted
    );
    if r.rejected > 0 {
        println!("  rejected       {:>12}", r.rejected);
    }
    println!(
        "  latency (µs)   p50 {:.1}  p99 {:.1}  p99.9 {:.1}",
        r.latency_us_p50, r.latency_us_p99, r.latency_us_p999
    );
    println!(
        "  packets sent   {:>12} ({:.2} messages/packet)",
        r.packets_sent, r.messages_per_packet
    );
    println!(
        "  NIC cache      {:.1}% hits, {:.2} DMA reads per committed transaction",
        100.0 * r.nic_cache_hit_rate,
        r.dma_reads_per_committed
    );
    println!("  money check    {}", r.money_check);
    println!("  replica check  {}", r.replica_check);
}
