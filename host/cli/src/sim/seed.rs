//! One seed's run: build the cluster on a fresh simulated network, run it in
//! virtual time until every client's budget has its outcomes and nothing is in
//! flight, then run every check: the workload's own (money for Smallbank; the
//! strict-serializability history check and lost-commit accounting for
//! list-append and register) and replica agreement.

use super::args::{SimArgs, SimWorkload};
use splitkv_bench::history::HistoryCheck;
use splitkv_bench::history_gen::TxShape;
use splitkv_bench::loadgen::RetryPolicy;
use splitkv_bench::{BenchCluster, ClusterSpec, Smallbank, Workload};
use splitkv_nic::membership::Configuration;
use splitkv_nic::Nanos;
use splitkv_sim::cluster::{
    build_on_sim, ChaosNicRestart, ChaosRecord, SimCluster, SimNodesMembership,
};
use splitkv_sim::membership::LeaseConfig;
use splitkv_sim::SimConfig;

/// Passes between checks for the end of a run.
const PASSES_PER_SLICE: u64 = 5_000;
/// Passes after which a seed counts as stalled (a liveness failure): 1 s of
/// virtual time at the default tick, twenty times what a net-mix run of the
/// default size takes.
const PASSES_MAX: u64 = 5_000_000;
/// Silence after which a session declares its peer failed (ns of virtual
/// time): longer than a retransmission timeout plus the longest partition of
/// the net mix, so only a crashed peer is declared failed.
const SESSION_SILENCE_NS: u64 = 30_000_000;
/// Simulator events printed around a failure with `--trace`.
const TRACE_EVENTS_PRINTED: usize = 60;
/// Keys of the history workloads (few, so transactions conflict).
const HISTORY_KEYS: u64 = 12;
/// Registers of `--workload micro`: an O(4,2) transaction takes 6 distinct
/// keys, so fewer would abort nearly every transaction (with 12 keys, about
/// one in 70 commits).
const MICRO_KEYS: u64 = 64;
/// Smallbank accounts per node.
const SMALLBANK_ACCOUNTS_PER_NODE: u64 = 500;
/// Mixed into the seed for the lease manager's delays (a stream apart from
/// the network's and the driver's).
const MEMBERSHIP_SEED_SALT: u64 = 0x6d65_6d62_6572_7321;
/// Host DMA completion latency of the simulated nodes (ns; Xenic §3.5).
const DMA_LATENCY_NS: u64 = 500;

/// What one seed's run ended with.
#[derive(Debug, Clone)]
pub struct SeedOutcome {
    /// The seed.
    pub seed: u64,
    /// Virtual time at the end of the run (ns).
    pub virtual_ns: Nanos,
    /// Transactions reported committed.
    pub committed: u64,
    /// Nodes that crashed during the run.
    pub crashes: usize,
    /// Survivor rows that differed from their primary only by an undecided
    /// transaction's pending LOG record (a crashed coordinator's, before
    /// recovery; see `splitkv_bench::replicas`).
    pub undecided_rows: u64,
    /// Restarted nodes that rejoined (re-replication).
    pub rejoins: usize,
    /// Per rejoin, virtual ns from the crash to the configuration that made
    /// the restarted node a replica again (the replication degree restored).
    pub restored_ns: Vec<Nanos>,
    /// What the chaos mix did: NIC restarts inside a recovery
    /// epoch, of a copy source, of the copying node; second crashes.
    pub chaos: [usize; 4],
    /// `None` when every check passed; otherwise what failed.
    pub failure: Option<String>,
    /// The simulator's last events and the run's state at its end, when
    /// the seed failed and `--trace` asked.
    pub trace: Option<String>,
}

/// Runs seed `seed` as `args` say.
pub fn run_seed(args: &SimArgs, seed: u64) -> SeedOutcome {
    let cfg = super::faults::sim_config(args.faults, seed);
    match args.workload {
        SimWorkload::Smallbank => {
            let accounts = SMALLBANK_ACCOUNTS_PER_NODE * args.nodes as u64;
            let w = Smallbank::new(accounts, None).map_err(|e| e.to_string());
            match w.and_then(|w| w.with_api(args.api).map_err(|e| e.to_string())) {
                Ok(w) => run(args, seed, cfg, w),
                Err(e) => SeedOutcome::failed(seed, e.to_string()),
            }
        }
        SimWorkload::ListAppend | SimWorkload::Register | SimWorkload::Micro => {
            let w = match args.workload {
                SimWorkload::ListAppend => HistoryCheck::list_append(
                    HISTORY_KEYS,
                    args.nodes as u64,
                    args.transactions,
                    TxShape::Mixed,
                ),
                SimWorkload::Micro => match args.micro_shape() {
                    Ok(shape) => HistoryCheck::register(MICRO_KEYS, shape),
                    Err(e) => return SeedOutcome::failed(seed, e),
                },
                _ => HistoryCheck::register(HISTORY_KEYS, TxShape::Mixed),
            };
            let w = w
                .map_err(|e| e.to_string())
                .and_then(|w| w.with_api(args.api).map_err(|e| e.to_string()));
            match w {
                Ok(mut w) => {
                    w.history_path = args
                        .history
                        .as_ref()
                        .map(|d| d.join(format!("seed-{seed}.jsonl")));
                    run(args, seed, cfg, w)
                }
                Err(e) => SeedOutcome::failed(seed, e),
            }
        }
    }
}

impl SeedOutcome {
    /// A seed that failed with `why` before its run produced anything.
    pub fn failed(seed: u64, why: String) -> SeedOutcome {
        SeedOutcome {
            seed,
            virtual_ns: 0,
            committed: 0,
            crashes: 0,
            undecided_rows: 0,
            rejoins: 0,
            restored_ns: Vec::new(),
            chaos: [0; 4],
            failure: Some(why),
            trace: None,
        }
    }
}

fn spec(args: &SimArgs, seed: u64) -> ClusterSpec {
    let mut spec = ClusterSpec::new();
    spec.nodes = args.nodes;
    spec.replication = args.replication;
    spec.inflight_per_node = args.inflight;
    spec.budget_per_node = Some(args.transactions);
    spec.seed = seed;
    spec.commit = args.protocol;
    spec.dma_latency_ns = DMA_LATENCY_NS;
    spec.session_silence_ns = Some(SESSION_SILENCE_NS);
    // Backoff scaled to the simulated network (microseconds one way).
    spec.retry = RetryPolicy {
        backoff_min_ns: 1_000,
        backoff_max_ns: 50_000,
        ..RetryPolicy::default()
    };
    spec
}

fn run<W: Workload>(args: &SimArgs, seed: u64, cfg: SimConfig, workload: W) -> SeedOutcome {
    let (mut cluster, net) = match build_on_sim(spec(args, seed), workload, cfg) {
        Ok(c) => c,
        Err(e) => return SeedOutcome::failed(seed, format!("cluster not built: {e}")),
    };
    // The cluster's driver knows which components are whose node (crashes, slow node).
    let mut sim = cluster.sim(cfg);
    let mut membership = None;
    let ran = if cfg.nodes.crashes > 0 {
        // Leases, suspects and new configurations in the loop (crash recovery).
        let lease = LeaseConfig::new(args.nodes, args.replication, seed ^ MEMBERSHIP_SEED_SALT);
        match SimNodesMembership::new(lease) {
            Ok(m) => {
                let m = membership.insert(m);
                cluster.run_sim_with_membership(&mut sim, &net, m, PASSES_PER_SLICE, PASSES_MAX)
            }
            Err(e) => return SeedOutcome::failed(seed, format!("membership: {e}")),
        }
    } else {
        cluster.run_sim_until_quiescent(&mut sim, &net, PASSES_PER_SLICE, PASSES_MAX)
    };
    let history = membership
        .as_ref()
        .map(|m| m.manager.history())
        .unwrap_or_default();
    let restored_ns = restored_times(&sim, &history);
    let chaos = membership
        .as_ref()
        .and_then(|m| m.chaos())
        .map_or([0; 4], |c| chaos_counts(&c));
    let committed = cluster.load_stats().committed;
    let finished = ran.is_ok();
    let (mut failure, undecided_rows) = match ran {
        Err(e) => (Some(format!("run: {e}")), 0),
        Ok(()) => {
            cluster.finish(sim.now());
            let degree = membership.as_ref().map_or(Ok(()), |m| {
                degree_restored(&sim, m.manager.current(), args.nodes, restored_ns.len())
            });
            match degree.and_then(|()| check(&cluster)) {
                Ok(undecided) => (None, undecided),
                Err(why) => (Some(why), 0),
            }
        }
    };
    if let (Some(why), Some(dir)) = (&mut failure, &args.history) {
        keep_failed_history(&mut cluster, sim.now(), finished, dir, seed, why);
    }
    let trace = match (&failure, args.trace) {
        (Some(_), true) => Some(format!(
            "{}\n  state of the run:\n{}",
            net.trace().tail(TRACE_EVENTS_PRINTED),
            cluster.describe_state(&sim, membership.as_ref())
        )),
        _ => None,
    };
    SeedOutcome {
        seed,
        virtual_ns: sim.now(),
        committed,
        crashes: sim.crashed().len() + sim.restarted().len(),
        undecided_rows,
        rejoins: sim.restarted().len(),
        restored_ns,
        chaos,
        failure,
        trace,
    }
}

/// Writes the history of a seed that failed a check or stalled to
/// `dir/seed-N.failed.jsonl` (every line a valid history line: a stalled
/// run's transactions in flight become `info`) in place of the
/// `seed-N.jsonl` its check may have written, and names the file in `why`
/// (or why it could not be written).
fn keep_failed_history<W: Workload>(
    cluster: &mut BenchCluster<W>,
    now: Nanos,
    finished: bool,
    dir: &std::path::Path,
    seed: u64,
    why: &mut String,
) {
    if !finished {
        cluster.finish(now);
    }
    // The check writes the history before checking it: leave one file.
    let _ = std::fs::remove_file(dir.join(format!("seed-{seed}.jsonl")));
    let path = dir.join(format!("seed-{seed}.failed.jsonl"));
    match cluster.write_history(&path) {
        Ok(true) => why.push_str(&format!(" (history in {})", path.display())),
        Ok(false) => {}
        Err(e) => why.push_str(&format!(" (its history was not written: {e})")),
    }
}

/// [`SeedOutcome::chaos`] of a chaos record.
fn chaos_counts(c: &ChaosRecord) -> [usize; 4] {
    let count = |why| c.nic_restarts.iter().filter(|r| r.2 == why).count();
    [
        count(ChaosNicRestart::InRecovery),
        count(ChaosNicRestart::CopySource),
        count(ChaosNicRestart::CopyingNode),
        usize::from(c.second_crash.is_some()),
    ]
}

/// Per restart of `sim`, virtual ns from the node's crash to the first
/// configuration of `history` after its restart in which it is a replica
/// again (live, not copying); restarts not yet restored are left out.
fn restored_times(sim: &splitkv_sim::Sim, history: &[(Nanos, Configuration)]) -> Vec<Nanos> {
    sim.restarted()
        .iter()
        .filter_map(|&(node, crashed, restarted)| {
            history
                .iter()
                .find(|(t, c)| *t >= restarted && c.contains(node) && c.copying & (1 << node) == 0)
                .map(|(t, _)| t - crashed)
        })
        .collect()
}

/// The replication-degree check of a run with restarts (re-replication): every
/// restarted node was made a replica again, and the final configuration
/// holds every node not still crashed, none of them being copied (with the
/// replica check, which reads every live node, that is: every shard has its
/// full replica count and every replica agrees).
fn degree_restored(
    sim: &splitkv_sim::Sim,
    config: Configuration,
    nodes: usize,
    restored: usize,
) -> Result<(), String> {
    if sim.restarted().is_empty() {
        return Ok(());
    }
    let crashed = sim.crashed().iter().fold(0u32, |m, &(n, _)| m | 1 << n);
    let all = (1u32 << nodes) - 1;
    if config.live | crashed != all || config.copying != 0 || restored < sim.restarted().len() {
        return Err(format!(
            "replication degree not restored: configuration epoch {} live {:#b} copying {:#b}, {} of {} restarted nodes made replicas",
            config.epoch,
            config.live,
            config.copying,
            restored,
            sim.restarted().len()
        ));
    }
    Ok(())
}

/// Every check of a finished run: the first failure, or the survivor rows
/// the replica check found undecided.
fn check<W: Workload>(cluster: &BenchCluster<W>) -> Result<u64, String> {
    for l in &cluster.loadgens {
        if let Some(e) = l.error() {
            return Err(format!("client: {e}"));
        }
    }
    let replicas = cluster
        .check_replicas()
        .map_err(|e| format!("replica check: {e}"))?;
    if let Err(e) = cluster.check() {
        return Err(format!("{} check: {e}", cluster.workload.name()));
    }
    Ok(replicas.undecided)
}

#[cfg(test)]
#[path = "seed_tests.rs"]
mod tests;
