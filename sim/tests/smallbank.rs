//! Smallbank on 3 nodes under the deterministic simulator, through the same
//! cluster path as the `splitkv` binary (`BenchCluster`): the money and replica
//! checks hold, conflicts happen under contention and are retried so the
//! committed mix is the declared one, and a seed reproduces a run.

use splitkv_bench::loadgen::{CommittedTx, LoadStats, RetryPolicy};
use splitkv_bench::smallbank::{TxType, MIX};
use splitkv_bench::{ClusterSpec, Smallbank};
use splitkv_host::table::TableKind;
use splitkv_sim::cluster::{build_on_sim, SimCluster};
use splitkv_sim::{Sim, SimConfig};

const TXS: u64 = 50_000;

struct RunOutcome {
    record: Vec<CommittedTx>,
    load: LoadStats,
    committed: u64,
    conflicts: u64,
    user_aborted: u64,
    virtual_ns: u64,
    evictions: u64,
    dma_reads: u64,
}

fn run(seed: u64, hot_accounts: Option<u64>) -> RunOutcome {
    run_with(seed, hot_accounts, None)
}

fn run_with(seed: u64, hot_accounts: Option<u64>, cache_objects: Option<usize>) -> RunOutcome {
    run_on(seed, hot_accounts, cache_objects, TableKind::Robinhood)
}

fn run_on(
    seed: u64,
    hot_accounts: Option<u64>,
    cache_objects: Option<usize>,
    table: TableKind,
) -> RunOutcome {
    run_shape(seed, hot_accounts, cache_objects, table, 3, 3, None)
}

fn run_shape(
    seed: u64,
    hot_accounts: Option<u64>,
    cache_objects: Option<usize>,
    table: TableKind,
    nodes: usize,
    replication: usize,
    max_tries: Option<u32>,
) -> RunOutcome {
    let mut spec = ClusterSpec::new();
    spec.nodes = nodes;
    spec.replication = replication;
    let workload = Smallbank::new(2_000 * nodes as u64, hot_accounts).expect("accounts");
    spec.inflight_per_node = 16;
    // Backoff scaled to the simulated network (2-3 µs one way), not the
    // local cluster's millisecond queues.
    spec.retry = RetryPolicy {
        max_tries: max_tries.unwrap_or(RetryPolicy::default().max_tries),
        backoff_min_ns: 1_000,
        backoff_max_ns: 50_000,
    };
    spec.seed = seed;
    spec.budget_per_node = Some(TXS.div_ceil(nodes as u64));
    spec.record = true;
    spec.dma_latency_ns = 500;
    spec.table = table;
    if let Some(c) = cache_objects {
        spec.cache_objects = c;
    }
    let cfg = SimConfig {
        seed,
        ..SimConfig::default()
    };
    let (mut cluster, net) = build_on_sim(spec, workload, cfg).expect("build");
    let mut sim = Sim::new(cfg);
    // Run until every budgeted transaction has an outcome and every node is idle.
    cluster
        .run_sim_until_quiescent(&mut sim, &net, 10_000, 200_000_000)
        .expect("simulated network healthy, no stall");
    let load = cluster.load_stats();
    assert!(load.drawn >= TXS);
    assert_eq!(
        load.finished(),
        load.drawn,
        "every transaction got its last outcome"
    );
    assert_eq!(load.attempts, load.drawn + load.retries);
    assert_eq!(load.failed, 0);
    let money = cluster.check().expect("money check");
    assert_eq!(money.total, money.initial + money.created);
    let replicas = cluster.check_replicas().expect("replica check");
    assert!(replicas.rows_compared > 0);
    let record = cluster.committed_record();
    assert_eq!(record.len() as u64, load.committed);
    assert_eq!(
        record
            .iter()
            .map(|t| splitkv_bench::smallbank::delta_of(&t.result).unwrap())
            .sum::<i64>(),
        money.created,
        "the record predicts the money"
    );
    assert!(money.balance_reads > 0, "Balance results are kept");
    let nics = || cluster.parts.nodes.iter().map(|n| &n.nic);
    let evictions = nics().map(|n| n.stats().cache.evictions).sum();
    let dma_reads = nics().map(|n| n.stats().server.dma_reads).sum();
    RunOutcome {
        record,
        load,
        committed: load.committed,
        conflicts: load.conflicts,
        user_aborted: load.user_aborted,
        virtual_ns: sim.now(),
        evictions,
        dma_reads,
    }
}

#[test]
fn default_hot_set_passes_both_checks() {
    let o = run(11, None);
    assert!(
        o.committed > TXS / 2,
        "most transactions commit: {}",
        o.committed
    );
    assert!(o.user_aborted > 0 || o.committed > 0);
    eprintln!(
        "committed {} conflicts {} user-aborted {} in {} µs virtual",
        o.committed,
        o.conflicts,
        o.user_aborted,
        o.virtual_ns / 1000
    );
}

#[test]
fn ten_hot_accounts_conflict_retry_and_still_pass_both_checks() {
    let o = run(12, Some(10));
    assert!(
        o.conflicts > 100,
        "contention on 10 accounts must abort attempts, got {}",
        o.conflicts
    );
    assert!(o.load.retries > 100, "conflicts are retried");
    assert!(o.committed > 1_000);
    eprintln!(
        "committed {} conflicts {} retries/commit {:.2} gave up {}",
        o.committed,
        o.conflicts,
        o.load.retries_per_commit(),
        o.load.gave_up
    );
}

#[test]
fn retries_make_the_committed_mix_the_declared_mix() {
    // 10 hot accounts: without retries, the three-write Amalgamate loses more
    // often than the one-write transactions; with retries nearly every drawn
    // transaction completes, so each type's share of completions is its share
    // of the mix (SendPayment's insufficient-funds rollbacks count as completed).
    let share = |o: &RunOutcome, t: usize| {
        let mut done = o.load.committed_by_procedure[t];
        if t == TxType::SendPayment as usize {
            done += o.load.user_aborted;
        }
        done as f64 / o.load.completed().max(1) as f64
    };
    let retried = run_shape(13, Some(10), None, TableKind::Robinhood, 3, 3, Some(100));
    assert!(
        retried.load.gave_up * 1000 < retried.load.drawn,
        "few give up"
    );
    for (t, (ty, pct)) in MIX.iter().enumerate() {
        let s = 100.0 * share(&retried, t);
        assert!((s - *pct as f64).abs() < 2.0, "{ty:?}: {s:.1}% vs {pct}%");
    }
    let once = run_shape(13, Some(10), None, TableKind::Robinhood, 3, 3, Some(1));
    assert_eq!(once.load.retries, 0);
    assert!(
        once.load.gave_up > 100,
        "without retries conflicts end transactions"
    );
}

#[test]
fn same_seed_gives_the_identical_committed_record() {
    let a = run(21, Some(50));
    let b = run(21, Some(50));
    assert_eq!(a.record, b.record);
    assert_eq!(a.virtual_ns, b.virtual_ns);
    let c = run(22, Some(50));
    assert_ne!(a.record, c.record, "another seed gives another run");
}

#[test]
fn tiny_nic_cache_evicts_and_still_passes_both_checks() {
    // 12,000 rows per node against a 256-object cache: most reads miss, go to
    // the host table by DMA, and the cache evicts continuously.
    let o = run_with(31, None, Some(256));
    assert!(o.committed > TXS / 2);
    assert!(
        o.evictions > 10_000,
        "the cache must evict: {}",
        o.evictions
    );
    assert!(
        o.dma_reads > 10_000,
        "misses read the host table by DMA: {}",
        o.dma_reads
    );
    let big = run_with(31, None, None);
    assert_eq!(
        big.evictions, 0,
        "the default cache holds every row of this small run"
    );
    assert!(
        big.dma_reads < o.dma_reads / 2,
        "{} vs {}",
        big.dma_reads,
        o.dma_reads
    );
}

#[test]
fn dlht_host_table_passes_both_checks() {
    // The NIC reads DLHT bins by DMA (line + header re-read in one vector); a
    // small cache forces most reads to the host table.
    let o = run_on(41, None, Some(256), TableKind::Dlht);
    assert!(o.committed > TXS / 2);
    assert!(
        o.dma_reads > 10_000,
        "reads went to the DLHT by DMA: {}",
        o.dma_reads
    );
}

#[test]
fn five_nodes_replication_two_passes_both_checks() {
    // Not every node holds every row: the replica check also verifies that each
    // node holds exactly the rows placement gives it.
    let o = run_shape(51, None, Some(1024), TableKind::Robinhood, 5, 2, None);
    assert!(o.committed > TXS / 2);
}
