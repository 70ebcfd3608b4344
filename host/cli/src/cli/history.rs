//! The flags of the history benches: `splitkv bench list-append`,
//! `register` and `micro` (Dandelion §7's O(G,P)).

use super::{check_api, check_protocol, ensure, protocol_parser, ClusterArgs, TxApi, THREADS_MAX};
use clap::{Args, ValueEnum};
use splitkv_bench::history_gen::TxShape;
use splitkv_bench::list_append::codec::MICRO_OPS_PER_TX_MAX;
use splitkv_nic::{CommitProtocol, NODES_MAX};
use std::path::PathBuf;
use std::time::Duration;

/// A history workload's transaction shape on the command line.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    // Elle's default: 1-4 micro-ops, reads or writes of random keys.
    Mixed,
    // Read two keys, write one (the write-skew shape read validation must stop).
    WriteSkew,
}

/// `splitkv bench list-append` and `splitkv bench register`.
#[derive(Args, Debug)]
pub struct HistoryBenchArgs {
    /// Keys (list-append: keys in the active window, each retired after a bounded number of appends); fewer is hotter.
    #[arg(long, default_value_t = 8)]
    pub keys: u64,
    /// What the transactions look like.
    #[arg(long, value_enum, default_value = "mixed")]
    pub shape: Shape,
    /// What every history bench takes.
    #[command(flatten)]
    pub run: HistoryRunArgs,
}

/// `splitkv bench micro`: Dandelion §7's O(G,P) on read-write registers.
#[derive(Args, Debug)]
pub struct MicroArgs {
    /// Reads per transaction (the G of O(G,P)).
    #[arg(long, default_value_t = 1)]
    pub gets: u8,
    /// Writes per transaction (the P of O(G,P)); gets + puts is 1..=8.
    #[arg(long, default_value_t = 0)]
    pub puts: u8,
    /// Keys, each a register; a transaction's keys are distinct and drawn uniformly.
    #[arg(long, default_value_t = 100_000)]
    pub keys: u64,
    /// What every history bench takes.
    #[command(flatten)]
    pub run: HistoryRunArgs,
}

/// What every history bench (`list-append`, `register`, `micro`) takes.
#[derive(Args, Debug)]
pub struct HistoryRunArgs {
    /// Nodes in the cluster (1..=16; list-append at most 30).
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Replicas per shard: primary plus backups (1..=nodes).
    #[arg(long, default_value_t = 3)]
    pub replication: usize,
    /// Transactions each node's client keeps outstanding (each a Jepsen process).
    #[arg(long, default_value_t = 4)]
    pub inflight: usize,
    /// Transactions each node's client runs (the run ends when all have their outcome).
    #[arg(long, default_value_t = 10_000)]
    pub transactions: u64,
    /// Stop drawing transactions after this long (e.g. 5s), even if some of --transactions are left.
    #[arg(long, value_name = "D", value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,
    /// Seed of the workload's random choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How transactions reach the store: shipped (the workload's registered procedures), txn (one-shot etcd-style Txns through the node's built-in procedure; register: one Txn per transaction; list-append is refused), interactive (not built yet).
    #[arg(long, value_enum, default_value = "shipped")]
    pub api: TxApi,
    /// Where each node's workload client runs: inside the node, or as a `splitkv-app-client` process attached to the node's application socket (shipped api only). With --cluster the clients run on this machine and the file needs a [clients] section with start = "on-load".
    #[arg(long, value_enum, default_value = "in-node")]
    pub clients: crate::external::ClientsMode,
    /// The commit protocol: xenic-occ (the default), dnl4, dnl2 or dnl1 (the Dnl rows run in process; a cluster file refuses them until their crash recovery is built). With --cluster the cluster file's `[protocol] commit` runs, and a different --protocol is refused.
    #[arg(long, value_name = "PROTOCOL", value_parser = protocol_parser())]
    pub protocol: Option<CommitProtocol>,
    /// Polling threads the cluster's components are spread over.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Write the run's history to FILE as Jepsen-shaped JSON lines (checkable by `splitkv check history` or Elle).
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Draw committed transactions per interval over the run (and its events) to FILE.png and FILE.svg, with the samples in FILE.csv.
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
    /// A deployed cluster to run on instead.
    #[command(flatten)]
    pub deployed: ClusterArgs,
}

impl HistoryRunArgs {
    /// Checks the values clap cannot: one line per failure.
    pub fn validate(&self) -> Result<(), String> {
        let (n, r) = (self.nodes, self.replication);
        ensure((1..=NODES_MAX).contains(&n), || {
            format!("--nodes must be between 1 and {NODES_MAX}, got {n}")
        })?;
        ensure((1..=n).contains(&r), || {
            format!("--replication must be between 1 and --nodes ({n}), got {r}")
        })?;
        ensure((1..=HISTORY_INFLIGHT_MAX).contains(&self.inflight), || {
            format!(
                "--inflight must be between 1 and {HISTORY_INFLIGHT_MAX}, got {}",
                self.inflight
            )
        })?;
        ensure(
            (1..=HISTORY_TRANSACTIONS_MAX).contains(&self.transactions),
            || {
                format!(
                    "--transactions must be between 1 and {HISTORY_TRANSACTIONS_MAX}, got {}",
                    self.transactions
                )
            },
        )?;
        ensure(self.duration.is_none_or(|d| !d.is_zero()), || {
            "--duration must be greater than zero".into()
        })?;
        ensure((1..=THREADS_MAX).contains(&self.threads), || {
            format!(
                "--threads must be between 1 and {THREADS_MAX}, got {}",
                self.threads
            )
        })?;
        check_protocol(self.protocol)?;
        check_api(self.api)
    }
}

impl HistoryBenchArgs {
    /// Checks the values clap cannot: one line per failure.
    pub fn validate(&self) -> Result<(), String> {
        check_history_keys(self.keys)?;
        self.run.validate()
    }

    /// The generator shape `--shape` names.
    pub fn shape(&self) -> TxShape {
        match self.shape {
            Shape::Mixed => TxShape::Mixed,
            Shape::WriteSkew => TxShape::WriteSkew,
        }
    }
}

impl MicroArgs {
    /// Checks the values clap cannot: one line per failure.
    pub fn validate(&self) -> Result<(), String> {
        check_history_keys(self.keys)?;
        let shape = self.shape()?;
        ensure(shape.keys_min() <= self.keys, || {
            format!(
                "--keys must be at least --gets + --puts ({}), got {}",
                shape.keys_min(),
                self.keys
            )
        })?;
        self.run.validate()
    }

    /// O(`--gets`, `--puts`).
    pub fn shape(&self) -> Result<TxShape, String> {
        TxShape::gets_puts(self.gets, self.puts).map_err(|_| {
            format!(
                "--gets + --puts must be between 1 and {MICRO_OPS_PER_TX_MAX}, got {} + {}",
                self.gets, self.puts
            )
        })
    }
}

fn check_history_keys(keys: u64) -> Result<(), String> {
    ensure((2..=HISTORY_KEYS_MAX).contains(&keys), || {
        format!("--keys must be between 2 and {HISTORY_KEYS_MAX}, got {keys}")
    })
}

/// Most keys of a history bench (the checker's graph grows with the history,
/// not the keys, but the tables are loaded with every key).
pub const HISTORY_KEYS_MAX: u64 = 1 << 20;
/// Most transactions in flight per node in a history bench (its processes).
pub const HISTORY_INFLIGHT_MAX: usize = 256;
/// Most transactions per node in a history bench (the history is checked in
/// memory: about 10^5 transactions take seconds).
pub const HISTORY_TRANSACTIONS_MAX: u64 = 1_000_000;
