//! The command line: clap types of every subcommand and the checks on their
//! values that clap cannot express (each failure one line, exit code 2,
//! before anything starts).

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use splitkv_bench::loadgen::MAX_TRIES_LIMIT;
use splitkv_bench::lookup_report::D_MAX_UNLIMITED;
pub use splitkv_bench::TxApi;
use splitkv_host::table::TableKind;
use splitkv_nic::{CommitProtocol, NODES_MAX};
use std::path::PathBuf;
use std::time::Duration;

mod history;
pub use history::*;

/// Most accounts per node the smallbank bench accepts.
pub const ACCOUNTS_PER_NODE_MAX: u64 = 50_000_000;
/// Most polling threads.
pub const THREADS_MAX: usize = 64;
/// Most transactions in flight per node's client.
pub const INFLIGHT_MAX: usize = 1024;
/// Longest warm-up.
pub const WARMUP_MAX: Duration = Duration::from_secs(3600);

/// `splitkv`: the one binary.
#[derive(Parser, Debug)]
#[command(
    name = "splitkv",
    version,
    about = "A replicated, strictly serializable transactional key-value store with a NIC-side protocol engine"
)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level subcommands (`nic` comes later).
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a workload on an in-process cluster (or a deployed one, `--cluster`) and check the result.
    #[command(subcommand)]
    Bench(Bench),
    /// Run one node of a deployed cluster (one node per process) until SIGTERM.
    Node(NodeArgs),
    /// Check a recorded run.
    #[command(subcommand)]
    Check(Check),
    /// Run many seeds of a workload under the deterministic simulator, with injected faults, and check every run.
    Sim(crate::sim::args::SimArgs),
    /// One screen about a deployed cluster: members, configuration, shards, recovery, transactions over an interval, faults; exit 0 healthy, 1 degraded, 2 bad file, 3 no node answers.
    Status(StatusArgs),
    /// Show or clear a deployed cluster's state in etcd (its `[membership]` prefix).
    #[command(subcommand)]
    Etcd(Etcd),
}

/// `splitkv etcd ...`.
#[derive(Subcommand, Debug)]
pub enum Etcd {
    /// Print the cluster's state under its etcd prefix: the configuration (epoch, cluster generation, members, copying) and each member's key and lease; exit 0, 2 on a bad file or etcd unreachable.
    Show(EtcdArgs),
    /// Delete every key under the cluster's etcd prefix (the next start forms a fresh cluster); refused while a member holds a lease, unless --force; exit 0 cleared, 1 refused, 2 on a bad file or etcd unreachable.
    Clear(EtcdClearArgs),
}

/// `splitkv status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The cluster file (its nodes' control addresses; with etcd membership, where the configuration is).
    #[arg(long)]
    pub config: PathBuf,
    /// Seconds between the two reads of every node's status: the transactions shown are those of this interval.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Longest `splitkv status --interval` (s).
pub const STATUS_INTERVAL_S_MAX: f64 = 60.0;

impl StatusArgs {
    /// Checks the interval.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.interval > 0.0 && self.interval <= STATUS_INTERVAL_S_MAX) {
            return Err(format!(
                "--interval {}: must be above 0 and at most {STATUS_INTERVAL_S_MAX} s",
                self.interval
            ));
        }
        Ok(())
    }
}

/// `splitkv etcd show`.
#[derive(Args, Debug)]
pub struct EtcdArgs {
    /// The cluster file (its `[membership]` section names etcd and the prefix).
    #[arg(long)]
    pub config: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `splitkv etcd clear`.
#[derive(Args, Debug)]
pub struct EtcdClearArgs {
    /// The cluster file (its `[membership]` section names etcd and the prefix).
    #[arg(long)]
    pub config: PathBuf,
    /// Clear even while members hold leases (their processes then run on a cleared prefix: stop them first).
    #[arg(long)]
    pub force: bool,
}

/// `splitkv check ...`.
#[derive(Subcommand, Debug)]
pub enum Check {
    /// Check a Jepsen-shaped JSON-lines history (the format `--history` writes and Elle reads) for strict serializability; exit 0 valid, 1 anomalies, 2 bad input.
    History(CheckHistoryArgs),
}

/// Most polling threads of a node process.
pub const NODE_THREADS_MAX: usize = 2;

/// `splitkv node`.
#[derive(Args, Debug)]
pub struct NodeArgs {
    /// The cluster file (cluster.toml).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// This node's id in the cluster file.
    #[arg(long, value_name = "N")]
    pub id: u16,
    /// Polling threads of the node: 1 runs all its components (NIC runtime, host worker, clients) on one.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Seed of the node's random choices (and of its injected faults).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Receive this node's packets at IP:PORT instead of the cluster file's `data` (a new machine replacing a dead node; needs etcd membership, through which the peers learn the address once a configuration admits this process).
    #[arg(long, value_name = "IP:PORT")]
    pub data_address: Option<std::net::SocketAddr>,
    /// Serve this node's control endpoint at IP:PORT instead of the cluster file's `control` (loopback unless the file sets control_public for the node).
    #[arg(long, value_name = "IP:PORT")]
    pub control_address: Option<std::net::SocketAddr>,
}

impl NodeArgs {
    /// Checks the values clap cannot.
    pub fn validate(&self) -> Result<(), String> {
        ensure((1..=NODE_THREADS_MAX).contains(&self.threads), || {
            format!(
                "--threads must be between 1 and {NODE_THREADS_MAX}, got {}",
                self.threads
            )
        })
    }
}

/// Where a bench runs: in this process, or on a deployed cluster.
#[derive(Args, Debug, Clone, Default)]
pub struct ClusterArgs {
    /// Drive the deployed cluster of this cluster file through its control endpoints (its nodes, replication and table come from the file; --nodes and --replication are not used).
    #[arg(long, value_name = "FILE")]
    pub cluster: Option<PathBuf>,
    /// With --cluster: start the file's node processes on this machine first (this binary, `splitkv node`) and stop them at the end.
    #[arg(long, requires = "cluster")]
    pub spawn: bool,
    /// With --spawn: SIGKILL node NODE SECS seconds into the run (e.g. `2@1.5`); the run goes on with the survivors, and the checks cover the killed node's client through its journal.
    #[arg(long, value_name = "NODE@SECS", requires = "spawn", value_parser = parse_kill)]
    pub kill: Option<KillAt>,
    /// With --kill: start the killed node again SECS seconds into the run (e.g. `2@3.0`, after the kill): it rejoins empty as a new incarnation, its shards are copied to it, and the run ends only once it is a replica again (every node live, none copying); it runs no client. The checks cover it as a full replica.
    #[arg(long, value_name = "NODE@SECS", requires = "kill", value_parser = parse_kill)]
    pub restart: Option<KillAt>,
    /// With --kill: start the killed node again SECS seconds into the run on a new machine (e.g. `2@3.0`): as --restart, but at a fresh data and control address (loopback 127.0.0.2, ports the OS picks) instead of the file's; it publishes them through its membership (the file needs [membership] kind = "etcd"), the peers send to it there once it is admitted, and the bench follows it to its new control address.
    #[arg(long, value_name = "NODE@SECS", requires = "kill", conflicts_with = "restart", value_parser = parse_kill)]
    pub replace: Option<KillAt>,
    /// With --cluster: crash node NODE's NIC runtime alone SECS seconds into the run (e.g. `1@1.0`): it restarts and rebuilds from its peers while its host, data and client live on; the run goes on and every check covers it.
    #[arg(long, value_name = "NODE@SECS", requires = "cluster", value_parser = parse_kill)]
    pub nic_crash: Option<KillAt>,
    /// With --cluster: every node's client journals its invocations and completions to a file in the run's directory before submitting (always on with --kill; the nodes must share this machine's file system).
    #[arg(long, requires = "cluster")]
    pub journal: bool,
}

/// `--kill NODE@SECS` (or `--nic-crash`, `--restart`, `--replace`): which
/// node is killed (has its NIC runtime crash, is started again, is
/// replaced), and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KillAt {
    /// The node id.
    pub node: u16,
    /// Time after the run's start.
    pub after: Duration,
}

/// Longest `--kill` delay.
pub const KILL_AFTER_MAX: Duration = Duration::from_secs(24 * 3600);

fn parse_kill(s: &str) -> Result<KillAt, String> {
    let (node, secs) = s
        .split_once('@')
        .ok_or_else(|| format!("expected NODE@SECS, got {s:?}"))?;
    let node: u16 = node
        .parse()
        .map_err(|_| format!("{node:?} is not a node id"))?;
    let secs: f64 = secs
        .parse()
        .map_err(|_| format!("{secs:?} is not a number of seconds"))?;
    ensure(
        secs.is_finite() && (0.0..=KILL_AFTER_MAX.as_secs_f64()).contains(&secs),
        || format!("{secs} s: expected 0..={} s", KILL_AFTER_MAX.as_secs()),
    )?;
    Ok(KillAt {
        node,
        after: Duration::from_secs_f64(secs),
    })
}

/// `splitkv check history`.
#[derive(Args, Debug)]
pub struct CheckHistoryArgs {
    /// The history file (JSON lines: one `invoke` and one `ok`/`fail`/`info` per transaction).
    pub file: PathBuf,
    /// The data model (default: inferred from the micro-ops).
    #[arg(long, value_enum)]
    pub model: Option<HistoryModel>,
    /// Check plain serializability (no real-time edges).
    #[arg(long)]
    pub no_realtime: bool,
}

/// A history's data model on the command line.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistoryModel {
    // Elle's list-append (`append`, list reads).
    ListAppend,
    // Read-write registers with unique values (`w`, register reads).
    Register,
}

/// `splitkv bench ...`.
#[derive(Subcommand, Debug)]
pub enum Bench {
    /// Smallbank (FaSST/DrTM mix and amounts, 4% hot set, conflict retries), then the money and replica checks.
    Smallbank(SmallbankArgs),
    /// Xenic Table 2: objects read and DMA round trips per NIC lookup at 90% occupancy.
    Lookup(LookupArgs),
    /// Elle's list-append, then the strict-serializability and lost-commit checks.
    ListAppend(HistoryBenchArgs),
    /// Read-write registers with unique values, then the strict-serializability and lost-commit checks.
    Register(HistoryBenchArgs),
    /// Dandelion's O(G,P): G gets and P puts of random keys per transaction (registers), then the history checks.
    Micro(MicroArgs),
}

/// `splitkv bench smallbank`.
#[derive(Args, Debug)]
pub struct SmallbankArgs {
    /// Nodes in the cluster (1..=16).
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Replicas per shard: primary plus backups (1..=nodes).
    #[arg(long, default_value_t = 3)]
    pub replication: usize,
    /// Accounts per node.
    #[arg(long, default_value_t = 100_000)]
    pub accounts_per_node: u64,
    /// Hot-set size (default: 4% of all accounts).
    #[arg(long, value_name = "N")]
    pub hot_accounts: Option<u64>,
    /// Polling threads the cluster's components are spread over.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// How long to measure, after the warm-up, e.g. 10s, 500ms, 1m.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// How long to run before measuring (excluded from every figure).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub warmup: Duration,
    /// Transactions each node's client keeps outstanding.
    #[arg(long, default_value_t = 64)]
    pub inflight: usize,
    /// Attempts per transaction: a conflict-aborted one is retried (same type
    /// and accounts) after a short seeded random backoff; 1 never retries.
    #[arg(long, default_value_t = splitkv_bench::loadgen::MAX_TRIES_DEFAULT)]
    pub max_tries: u32,
    /// Seed of the workload's random choices (and the retries' backoff).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How transactions reach the store: shipped (the workload's registered procedures), txn (one-shot etcd-style Txns through the node's built-in procedure; Smallbank reads, then writes comparing the versions read, retrying on a failed compare), interactive (not built yet).
    #[arg(long, value_enum, default_value = "shipped")]
    pub api: TxApi,
    /// Where each node's workload client runs: inside the node, or as a `splitkv-app-client` process attached to the node's application socket. With --cluster the clients run on this machine and the file needs a [clients] section with start = "on-load".
    #[arg(long, value_enum, default_value = "in-node")]
    pub clients: crate::external::ClientsMode,
    /// The commit protocol: xenic-occ (the default), dnl4, dnl2 or dnl1 (the Dnl rows run in process; a cluster file refuses them until their crash recovery is built). With --cluster the cluster file's `[protocol] commit` runs, and a different --protocol is refused.
    #[arg(long, value_name = "PROTOCOL", value_parser = protocol_parser())]
    pub protocol: Option<CommitProtocol>,
    /// Host table: Xenic's Robinhood table or Dandelion's DLHT.
    #[arg(long, default_value = "robinhood", value_parser = table_parser())]
    pub table: TableKind,
    /// NIC object-cache capacity per node, in objects.
    #[arg(long, default_value_t = splitkv_nic::index::CACHE_OBJECTS_DEFAULT)]
    pub cache_objects: usize,
    /// Do not prefetch host-table lines when the NIC submits a DMA read (to
    /// measure what the prefetch gives).
    #[arg(long)]
    pub no_dma_prefetch: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Draw committed transactions per interval over the run (and its events) to FILE.png and FILE.svg, with the samples in FILE.csv.
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
    /// A deployed cluster to run on instead.
    #[command(flatten)]
    pub deployed: ClusterArgs,
    /// Make a polling thread panic at once (tests the internal-error exit).
    #[arg(long, hide = true)]
    pub inject_panic: bool,
}

/// `splitkv bench lookup`.
#[derive(Args, Debug)]
pub struct LookupArgs {
    /// Table capacity in keys (filled to 90% of next_pow2(keys·10/9) home slots).
    #[arg(long, default_value_t = 8_000_000)]
    pub keys: usize,
    /// Maximum displacements to measure, comma separated; `unlimited` allowed.
    #[arg(long, default_value = "8,16,32,unlimited", value_delimiter = ',', value_parser = parse_d_max)]
    pub d_max: Vec<usize>,
    /// Home slots per segment (one NIC index entry each), a power of two.
    #[arg(long, default_value_t = 16)]
    pub segment_slots: usize,
    /// Learn hints only from lookups (no warm-up scan).
    #[arg(long)]
    pub cold: bool,
    /// Seed of the random keys.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The name of a host-table kind on the command line and in reports.
pub fn table_name(t: TableKind) -> &'static str {
    match t {
        TableKind::Robinhood => "robinhood",
        TableKind::Dlht => "dlht",
    }
}

/// Parses `robinhood|dlht` into the host crate's [`TableKind`] (listed as
/// possible values in `--help`).
fn table_parser() -> impl TypedValueParser<Value = TableKind> {
    let names = [TableKind::Robinhood, TableKind::Dlht].map(table_name);
    PossibleValuesParser::new(names).map(|s| {
        if s == table_name(TableKind::Dlht) {
            TableKind::Dlht
        } else {
            TableKind::Robinhood
        }
    })
}

/// Parses `xenic-occ|dnl4|dnl2|dnl1` into a [`CommitProtocol`] (listed as
/// possible values in `--help`; an unimplemented one parses and is refused
/// by [`check_protocol`]).
pub(crate) fn protocol_parser() -> impl TypedValueParser<Value = CommitProtocol> {
    PossibleValuesParser::new(CommitProtocol::ALL.map(CommitProtocol::as_str))
        .map(|s| s.parse().unwrap_or_default())
}

/// Refuses a `--protocol` that is not implemented yet (one line, exit 2).
pub(crate) fn check_protocol(protocol: Option<CommitProtocol>) -> Result<(), String> {
    match protocol {
        Some(p) => p
            .check_implemented()
            .map(drop)
            .map_err(|e| format!("--protocol {p}: {e}")),
        None => Ok(()),
    }
}

fn parse_d_max(s: &str) -> Result<usize, String> {
    if s == "unlimited" {
        return Ok(D_MAX_UNLIMITED);
    }
    match s.parse::<usize>() {
        Ok(d) if (1..=D_MAX_UNLIMITED).contains(&d) => Ok(d),
        _ => Err(format!("expected 1..={D_MAX_UNLIMITED} or `unlimited`")),
    }
}

/// Refuses an `--api` that is not built (one line, exit 2).
pub(crate) fn check_api(api: TxApi) -> Result<(), String> {
    api.check_built()
        .map(|_| ())
        .map_err(|e| format!("--api {}: {e}", api.name()))
}

/// Fails with `message` unless `ok`.
pub(crate) fn ensure(ok: bool, message: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(message())
    }
}

impl SmallbankArgs {
    /// Checks the values clap cannot: one line per failure.
    pub fn validate(&self) -> Result<(), String> {
        let (n, r) = (self.nodes, self.replication);
        ensure((1..=NODES_MAX).contains(&n), || {
            format!("--nodes must be between 1 and {NODES_MAX}, got {n}")
        })?;
        ensure((1..=n).contains(&r), || {
            format!("--replication must be between 1 and --nodes ({n}), got {r}")
        })?;
        let accounts = self.accounts_per_node.saturating_mul(n as u64);
        ensure(self.accounts_per_node > 0 && accounts >= 2, || {
            "--accounts-per-node must give the cluster at least 2 accounts".into()
        })?;
        ensure(self.accounts_per_node <= ACCOUNTS_PER_NODE_MAX, || {
            format!(
                "--accounts-per-node {} is over the supported {ACCOUNTS_PER_NODE_MAX}",
                self.accounts_per_node
            )
        })?;
        ensure(
            self.hot_accounts
                .is_none_or(|h| (2..=accounts).contains(&h)),
            || "--hot-accounts must be between 2 and the number of accounts".into(),
        )?;
        ensure((1..=THREADS_MAX).contains(&self.threads), || {
            format!(
                "--threads must be between 1 and {THREADS_MAX}, got {}",
                self.threads
            )
        })?;
        ensure(!self.duration.is_zero(), || {
            "--duration must be greater than zero".into()
        })?;
        ensure(self.warmup <= WARMUP_MAX, || {
            format!(
                "--warmup must be at most {}",
                humantime::format_duration(WARMUP_MAX)
            )
        })?;
        ensure(self.cache_objects > 0, || {
            "--cache-objects must be at least 1".into()
        })?;
        ensure((1..=INFLIGHT_MAX).contains(&self.inflight), || {
            format!(
                "--inflight must be between 1 and {INFLIGHT_MAX}, got {}",
                self.inflight
            )
        })?;
        ensure((1..=MAX_TRIES_LIMIT).contains(&self.max_tries), || {
            format!(
                "--max-tries must be between 1 and {MAX_TRIES_LIMIT}, got {}",
                self.max_tries
            )
        })?;
        check_protocol(self.protocol)?;
        check_api(self.api)
    }
}

impl LookupArgs {
    /// Checks the values clap cannot.
    pub fn validate(&self) -> Result<(), String> {
        ensure(
            (16..=1 << 30).contains(&self.keys) && self.segment_slots.is_power_of_two(),
            || "--keys must be between 16 and 2^30 and --segment-slots a power of two".into(),
        )
    }
}
