//! The flags of `splitkv sim` and the seed-range syntax.

use clap::{Args, ValueEnum};
use splitkv_bench::history_gen::TxShape;
use splitkv_bench::list_append::codec::MICRO_OPS_PER_TX_MAX;
use splitkv_bench::TxApi;
use splitkv_nic::CommitProtocol;
use splitkv_sim::faults::FaultMix;
use std::ops::Range;
use std::path::PathBuf;

/// Most seeds one `splitkv sim` run accepts.
pub const SIM_SEEDS_MAX: u64 = 10_000_000;
/// Most nodes of a simulated cluster.
const SIM_NODES_MAX: usize = 16;

/// The workload a simulated run drives.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimWorkload {
    /// Smallbank: money moves between accounts; the total is checked.
    Smallbank,
    /// Jepsen list-append: every history checked for strict serializability.
    ListAppend,
    /// Read/write registers: every history checked for strict serializability.
    Register,
    /// Dandelion §7's O(G,P) on read/write registers (G = --gets reads, P = --puts writes per transaction): every history checked.
    Micro,
}

impl SimWorkload {
    /// Its name on the command line.
    pub fn flag(self) -> &'static str {
        match self {
            SimWorkload::Smallbank => "smallbank",
            SimWorkload::ListAppend => "list-append",
            SimWorkload::Register => "register",
            SimWorkload::Micro => "micro",
        }
    }
}

/// `splitkv sim`.
#[derive(Args, Debug, Clone)]
pub struct SimArgs {
    /// The workload.
    #[arg(long, value_enum, default_value = "smallbank")]
    pub workload: SimWorkload,
    /// Reads per transaction of --workload micro (default 4).
    #[arg(long)]
    pub gets: Option<u8>,
    /// Writes per transaction of --workload micro (default 2).
    #[arg(long)]
    pub puts: Option<u8>,
    /// The commit protocol: xenic-occ, dnl4, dnl2 or dnl1 (the Dnl rows run with --faults none or net only: their crash recovery is not built yet).
    #[arg(long, default_value = "xenic-occ", value_parser = crate::cli::protocol_parser())]
    pub protocol: CommitProtocol,
    /// How transactions reach the store: shipped (the workload's registered procedures), txn (one-shot etcd-style Txns through the node's built-in procedure; Smallbank reads, then writes comparing the versions read, retrying on a failed compare; list-append is refused), interactive (not built yet).
    #[arg(long, value_enum, default_value = "shipped")]
    pub api: TxApi,

    /// Seeds to run: N, A..B (B excluded) or A..=B.
    #[arg(long, default_value = "1", value_parser = parse_seeds)]
    pub seeds: SeedRange,
    /// Faults injected: none, net (loss, duplication, reordering, partitions, clogging, slow DMA), crash (node crashes), all, rejoin (a crashed node restarts and is re-replicated), nic-crash (a NIC runtime crashes alone and restarts, rebuilding from its peers while its host and data live), chaos (rejoin and nic-crash overlapping: NIC restarts inside recovery epochs and copies, a second crash during a copy).
    #[arg(long, default_value = "none", value_parser = crate::sim::faults::parse)]
    pub faults: FaultMix,
    /// Nodes in the simulated cluster.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Replicas per shard: primary plus backups (1..=nodes).
    #[arg(long, default_value_t = 3)]
    pub replication: usize,
    /// Transactions each node's client runs per seed.
    #[arg(long, default_value_t = 500)]
    pub transactions: u64,
    /// Transactions each node's client keeps outstanding.
    #[arg(long, default_value_t = 4)]
    pub inflight: usize,
    /// Seeds run at once, on that many threads (each seed is one thread's deterministic run); default: the cores.
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Write each seed's client history to DIR/seed-N.jsonl, or DIR/seed-N.failed.jsonl for a seed that failed a check or stalled (list-append and register; Jepsen-shaped JSON lines, unknown outcomes as `info`).
    #[arg(long, value_name = "DIR")]
    pub history: Option<PathBuf>,
    /// Print the simulator's last events of each failing seed, and each node's state at its end (use it when replaying one seed).
    #[arg(long)]
    pub trace: bool,
    /// Keep running after the first failing seed (default: stop starting new seeds).
    #[arg(long)]
    pub keep_going: bool,
    /// Print the fault mixes this simulator runs, one per line, and exit.
    #[arg(long)]
    pub list_faults: bool,
}

/// Seeds `start..end` (end excluded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedRange {
    /// First seed.
    pub start: u64,
    /// One past the last seed.
    pub end: u64,
}

impl SeedRange {
    /// The seeds as a range.
    pub fn range(self) -> Range<u64> {
        self.start..self.end
    }

    /// How many seeds.
    pub fn len(self) -> u64 {
        self.end - self.start
    }
}

/// Parses `N`, `A..B` (B excluded) or `A..=B`.
pub fn parse_seeds(s: &str) -> Result<SeedRange, String> {
    let num = |t: &str| {
        t.trim()
            .parse::<u64>()
            .map_err(|_| format!("'{t}' is not a seed (a whole number)"))
    };
    let (start, end) = if let Some((a, b)) = s.split_once("..=") {
        let b = num(b)?;
        (num(a)?, b.checked_add(1).ok_or("seed range too large")?)
    } else if let Some((a, b)) = s.split_once("..") {
        (num(a)?, num(b)?)
    } else {
        let n = num(s)?;
        (n, n.checked_add(1).ok_or("seed too large")?)
    };
    if end <= start {
        return Err(format!("seed range '{s}' is empty"));
    }
    if end - start > SIM_SEEDS_MAX {
        return Err(format!(
            "seed range '{s}' has {} seeds; at most {SIM_SEEDS_MAX}",
            end - start
        ));
    }
    Ok(SeedRange { start, end })
}

impl SimArgs {
    /// Checks the values clap cannot.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=SIM_NODES_MAX).contains(&self.nodes) {
            return Err(format!(
                "--nodes must be in 1..={SIM_NODES_MAX}, got {}",
                self.nodes
            ));
        }
        if !(1..=self.nodes).contains(&self.replication) {
            return Err(format!(
                "--replication must be in 1..={} (the nodes), got {}",
                self.nodes, self.replication
            ));
        }
        if self.transactions == 0 || self.inflight == 0 {
            return Err("--transactions and --inflight must be at least 1".into());
        }
        if self.jobs == Some(0) {
            return Err("--jobs must be at least 1".into());
        }
        if self.workload != SimWorkload::Micro && (self.gets.is_some() || self.puts.is_some()) {
            return Err("--gets and --puts are options of --workload micro".into());
        }
        crate::cli::check_protocol(Some(self.protocol))?;
        let nic_faults = matches!(self.faults, FaultMix::NicCrash | FaultMix::Chaos);
        if self.protocol != CommitProtocol::XenicOcc && nic_faults {
            return Err(format!(
                "--protocol {} --faults {}: a NIC runtime restarting alone is not built yet \
                 for Dnl transactions (--faults none, net, crash, all or rejoin)",
                self.protocol, self.faults
            ));
        }
        if let Err(e) = self.api.check_built() {
            return Err(format!("--api {}: {e}", self.api.name()));
        }
        if self.api == TxApi::Txn && self.workload == SimWorkload::ListAppend {
            return Err(format!(
                "--api txn: {}",
                splitkv_bench::ApiError::ListAppendTxn
            ));
        }
        self.micro_shape().map(drop)
    }

    /// The transactions' shape of `--workload micro`: O(`--gets`, `--puts`),
    /// O(4,2) by default.
    pub fn micro_shape(&self) -> Result<TxShape, String> {
        let (gets, puts) = (self.gets.unwrap_or(4), self.puts.unwrap_or(2));
        TxShape::gets_puts(gets, puts).map_err(|_| {
            format!(
                "--gets + --puts must be between 1 and {MICRO_OPS_PER_TX_MAX}, got {gets} + {puts}"
            )
        })
    }

    /// The command that replays seed `seed` alone, with its event trace.
    pub fn replay_command(&self, seed: u64) -> String {
        let mut cmd = format!(
            "splitkv sim --workload {} --protocol {} --seeds {seed} --faults {} --nodes {} --replication {} --transactions {} --inflight {} --trace",
            self.workload.flag(),
            self.protocol.as_str(),
            self.faults,
            self.nodes,
            self.replication,
            self.transactions,
            self.inflight
        );
        if self.workload == SimWorkload::Micro {
            if let Ok(TxShape::GetsPuts { gets, puts }) = self.micro_shape() {
                cmd.push_str(&format!(" --gets {gets} --puts {puts}"));
            }
        }
        if !self.api.is_shipped() {
            cmd.push_str(&format!(" --api {}", self.api.name()));
        }
        if let Some(dir) = &self.history {
            cmd.push_str(&format!(" --history {}", dir.display()));
        }
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_ranges() {
        assert_eq!(parse_seeds("7"), Ok(SeedRange { start: 7, end: 8 }));
        assert_eq!(parse_seeds("1..1000").map(SeedRange::len), Ok(999));
        assert_eq!(parse_seeds("1..=1000").map(SeedRange::len), Ok(1000));
        assert!(parse_seeds("5..5").is_err());
        assert!(parse_seeds("9..3").is_err());
        assert!(parse_seeds("x").is_err());
        assert!(parse_seeds("0..=18446744073709551615").is_err());
        assert!(parse_seeds(&format!("0..{}", SIM_SEEDS_MAX + 1)).is_err());
    }
}
