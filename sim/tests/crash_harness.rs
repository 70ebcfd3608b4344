//! Crash-mix runs end and are checked over the survivors (crash recovery): the
//! simulated lease manager and one membership agent per node run inside the
//! sim loop, the crashed node is configured out (epoch 2 at every survivor),
//! the run ends once every surviving client has its outcomes, and the checks
//! read the survivors through the final configuration's placement view
//! (a shard's primary is its first surviving replica). Every survivor runs
//! a recovery epoch (Xenic §4.2.1: evidence, decisions, promotion, resume)
//! and serves again; the checks pass, and still fail on a corrupted
//! survivor row. One test measures crash → resumed service in simulated
//! time.

mod fault_support;
mod history_support;

use fault_support::{fault_spec, SILENCE_NS};
use history_support::{list_append, spec, HistoryCluster};
use splitkv_bench::history_gen::TxShape;
use splitkv_bench::{BenchCluster, CheckError, Smallbank, SmallbankCluster, Workload};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
use splitkv_sim::cluster::{build_on_sim, SimCluster, SimNodesMembership};
use splitkv_sim::membership::LeaseConfig;
use splitkv_sim::{FaultMix, SimConfig, SimNetwork};

/// Passes between checks for the end of a run.
const SLICE: u64 = 5_000;
/// Passes after which a run counts as stalled (0.4 s virtual).
const PASSES_MAX: u64 = 2_000_000;
/// The window of the seeded crash (passes): inside a run of the budget below.
const CRASH_PASSES: (u64, u64) = (500, 3_000);
/// Transactions per client.
const BUDGET: u64 = 300;

fn crash_config(mix: FaultMix, seed: u64) -> SimConfig {
    let mut cfg = mix.config(seed);
    cfg.nodes.crash_pass_min = CRASH_PASSES.0;
    cfg.nodes.crash_pass_max = CRASH_PASSES.1;
    cfg
}

/// Runs `cluster` under `cfg` with the membership in the loop; returns the
/// crashed node and when it crashed (virtual ns). Panics if the run stalls
/// or nothing crashed.
fn run_crashed<W: Workload>(
    cluster: &mut BenchCluster<W>,
    net: &SimNetwork,
    cfg: SimConfig,
) -> (u16, u64) {
    let mut sim = cluster.sim(cfg);
    let lease = LeaseConfig::new(cluster.spec.nodes, cluster.spec.replication, cfg.seed);
    let mut m = SimNodesMembership::new(lease).expect("lease config");
    if let Err(e) = cluster.run_sim_with_membership(&mut sim, net, &mut m, SLICE, PASSES_MAX) {
        panic!("seed {}: {e}\n{}", cfg.seed, net.trace().tail(40));
    }
    cluster.finish(sim.now());
    let &[(crashed, crashed_ns)] = sim.crashed() else {
        panic!("one crash expected: {:?}", sim.crashed());
    };
    assert!(cluster.failed.contains(crashed));
    let config = m.manager.current();
    assert_eq!(config.epoch, 2, "one new configuration");
    assert!(!config.contains(crashed), "{config:?}");
    for (n, node) in cluster.parts.nodes.iter().enumerate() {
        if n as u16 != crashed {
            assert_eq!(node.nic.epoch(), 2, "survivor {n} applied epoch 2");
            let agent = m.agent(n as u16).expect("agent");
            assert!(agent.stats().renewals > 0 && agent.removed().is_none());
        }
    }
    (crashed, crashed_ns)
}

fn smallbank(seed: u64, mix: FaultMix) -> (SmallbankCluster, u16, u64) {
    let spec = fault_spec(seed, BUDGET, Some(SILENCE_NS));
    let cfg = crash_config(mix, seed);
    let w = Smallbank::new(300, Some(20)).expect("accounts");
    let (mut cluster, net) = build_on_sim(spec, w, cfg).expect("build");
    let (crashed, crashed_ns) = run_crashed(&mut cluster, &net, cfg);
    (cluster, crashed, crashed_ns)
}

/// Rewrites `key` at `node` with `version` and `value`.
fn overwrite<W: Workload>(
    c: &mut BenchCluster<W>,
    node: u16,
    key: Key,
    version: u64,
    value: &[u8],
) {
    let meta = ObjectMeta::new(version, ObjectFlags::empty());
    let t = c.parts.nodes[node as usize].worker.table_mut();
    t.upsert(key, meta, value).expect("upsert");
}

/// Some key whose final primary survived, with that primary and a
/// surviving backup (if any).
fn survivor_key<W: Workload>(c: &BenchCluster<W>) -> (Key, u16, Option<u16>) {
    let view = c.db().view();
    let mut found = None;
    for (n, node) in c.parts.nodes.iter().enumerate() {
        if c.failed.contains(n as u16) || found.is_some() {
            continue;
        }
        node.worker.table().for_each(|k, _, _| {
            if found.is_none() && view.primary(&k) == Some(n as u16) {
                found = Some((k, n as u16, view.backups(&k).next()));
            }
        });
    }
    found.expect("a surviving primary holds a key")
}

#[test]
fn crash_mixes_smallbank_ends_and_checks_pass_over_the_survivors() {
    for (mix, seed) in [
        (FaultMix::Crash, 1),
        (FaultMix::Crash, 2),
        (FaultMix::All, 3),
    ] {
        let (cluster, crashed, _) = smallbank(seed, mix);
        let money = cluster
            .check()
            .unwrap_or_else(|e| panic!("{mix} {seed}: money: {e}"));
        let replicas = cluster.check_replicas().expect("replica agreement");
        assert!(replicas.rows_compared > 0, "{replicas:?}");
        let s = cluster.load_stats();
        assert!(s.committed > 100, "{mix} {seed}: {s:?}");
        let survivors_done = (0..3u16)
            .filter(|&n| n != crashed)
            .all(|n| cluster.loadgens[n as usize].is_done());
        assert!(survivors_done, "{mix} {seed}");
        assert!(money.total != 0);
    }
}

#[test]
fn corrupted_survivor_rows_fail_the_checks_and_crashed_rows_are_not_read() {
    let (mut cluster, crashed, _) = smallbank(4, FaultMix::Crash);
    cluster
        .check_replicas()
        .expect("agreement before corruption");
    // A crashed node's rows are not read.
    let mut any = None;
    cluster.parts.nodes[crashed as usize]
        .worker
        .table()
        .for_each(|k, m, _| any = any.or(Some((k, m.version()))));
    let (k, v) = any.expect("the crashed node holds rows");
    overwrite(&mut cluster, crashed, k, v + 7, &[0xAB; 8]);
    cluster
        .check_replicas()
        .expect("the crashed node is not read");
    cluster
        .check()
        .expect("money is not read at the crashed node");
    // A surviving backup's row is.
    let (key, primary, backup) = survivor_key(&cluster);
    let backup = backup.expect("replication 3 leaves a surviving backup");
    let mut buf = Vec::new();
    let meta = cluster.db().get_at(backup, &key, &mut buf).expect("row");
    overwrite(&mut cluster, backup, key, meta.version() + 1, &buf);
    match cluster.check_replicas() {
        Err(CheckError::Replica { node, .. }) => assert_eq!(node, backup),
        other => panic!("expected a replica failure: {other:?}"),
    }
    // Money added at the surviving primary breaks the money range.
    let meta = cluster.db().get_at(primary, &key, &mut buf).expect("row");
    let balance = i64::from_le_bytes(buf[..8].try_into().unwrap()) + 1_000_000_000;
    overwrite(
        &mut cluster,
        primary,
        key,
        meta.version(),
        &balance.to_le_bytes(),
    );
    assert!(matches!(cluster.check(), Err(CheckError::Money { .. })));
}

#[test]
fn crash_mix_list_append_history_passes_and_a_corrupted_row_fails() {
    for seed in [5, 6] {
        let cfg = crash_config(FaultMix::Crash, seed);
        let workload = list_append(12, 3, BUDGET, TxShape::Mixed);
        let mut s = spec(3, 4, BUDGET, seed, 500);
        s.session_silence_ns = Some(SILENCE_NS);
        let (mut cluster, net): (HistoryCluster, SimNetwork) =
            build_on_sim(s, workload, cfg).expect("build");
        _ = run_crashed(&mut cluster, &net, cfg);
        let report = cluster
            .check()
            .unwrap_or_else(|e| panic!("seed {seed}: history: {e}"));
        assert!(report.stats.committed > 50, "{:?}", report.stats);
        assert!(
            report.stats.indeterminate > 0,
            "the crashed client's in-flight are info"
        );
        cluster.check_replicas().expect("replica agreement");
        // A version no transaction wrote, at the surviving primary.
        let (key, primary, _) = survivor_key(&cluster);
        let mut buf = Vec::new();
        let meta = cluster.db().get_at(primary, &key, &mut buf).expect("row");
        overwrite(&mut cluster, primary, key, meta.version() + 1_000, &buf);
        assert!(
            cluster.check().is_err(),
            "seed {seed}: corrupted row passed"
        );
    }
}

/// Crash → resumed service in simulated time (crash recovery's target: under
/// 100 ms): detection (a lapsed lease or a silent session) and the new
/// configuration, then the recovery epoch, until every survivor resumed,
/// and until the first transaction a survivor committed afterwards.
#[test]
fn crash_to_resumed_service_is_measured_in_simulated_time() {
    for seed in [1, 2, 7] {
        let (cluster, crashed, crashed_ns) = smallbank(seed, FaultMix::Crash);
        let survivors: Vec<_> = (0..3u16)
            .filter(|&n| n != crashed)
            .map(|n| cluster.parts.nodes[n as usize].nic.recovery_actions())
            .collect();
        let since = |t: u64| t.saturating_sub(crashed_ns) as f64 / 1e6;
        let begun = survivors.iter().map(|a| a.last_begun_ns).max().unwrap();
        let resumed = survivors.iter().map(|a| a.last_resumed_ns).max().unwrap();
        let first = survivors
            .iter()
            .map(|a| a.first_commit_after_resume_ns)
            .filter(|&t| t != 0)
            .min()
            .expect("a survivor committed after resuming");
        assert!(
            survivors.iter().all(|a| a.last_begun_ns > crashed_ns),
            "{survivors:?}"
        );
        assert!(resumed >= begun && first >= resumed.min(first));
        eprintln!(
            "seed {seed}: node {crashed} crashed at {:.3} ms; configured out at every \
             survivor +{:.3} ms, all resumed +{:.3} ms, first commit after +{:.3} ms",
            crashed_ns as f64 / 1e6,
            since(begun),
            since(resumed),
            since(first)
        );
        assert!(
            since(resumed) < 100.0,
            "seed {seed}: over the 100 ms target"
        );
    }
}
