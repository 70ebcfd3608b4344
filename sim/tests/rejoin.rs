//! The rejoin mix (re-replication): a seeded node crashes, is
//! configured out and recovered from, restarts empty as a new incarnation,
//! rejoins as a copying backup of its ring shards while the survivors keep
//! committing, is copied from each shard's primary, and becomes a replica
//! again: the run ends with every node live and none copying (the
//! replication degree restored), every replica holding its primary's rows
//! (the replica check reads all three nodes), and the workload's check
//! passing. The restarted node's old primary role is not taken back.

mod fault_support;

use fault_support::{fault_spec, SILENCE_NS};
use splitkv_bench::{Smallbank, SmallbankCluster};
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
const BUDGET: u64 = 600;

/// One rejoin-mix run of Smallbank; returns the cluster, the restarted node
/// and (crash, restart, restored) times in virtual ns.
fn rejoin_run(seed: u64) -> (SmallbankCluster, u16, [u64; 3], SimNodesMembership) {
    let spec = fault_spec(seed, BUDGET, Some(SILENCE_NS));
    let mut cfg: SimConfig = FaultMix::Rejoin.config(seed);
    cfg.nodes.crash_pass_min = CRASH_PASSES.0;
    cfg.nodes.crash_pass_max = CRASH_PASSES.1;
    let w = Smallbank::new(300, Some(20)).expect("accounts");
    let (mut cluster, net): (SmallbankCluster, SimNetwork) =
        build_on_sim(spec, w, cfg).expect("build");
    let mut sim = cluster.sim(cfg);
    let mut m = SimNodesMembership::new(LeaseConfig::new(3, 3, seed)).expect("lease config");
    if let Err(e) = cluster.run_sim_with_membership(&mut sim, &net, &mut m, SLICE, PASSES_MAX) {
        panic!("seed {seed}: {e}\n{}", net.trace().tail(40));
    }
    cluster.finish(sim.now());
    let &[(node, crashed, restarted)] = sim.restarted() else {
        panic!("one restart expected: {:?}", sim.restarted());
    };
    let restored = m
        .manager
        .history()
        .iter()
        .find(|(t, c)| *t >= restarted && c.contains(node) && c.copying == 0)
        .map(|(t, _)| *t)
        .expect("the restarted node became a replica");
    (cluster, node, [crashed, restarted, restored], m)
}

#[test]
fn a_restarted_node_rejoins_and_the_replication_degree_is_restored() {
    for seed in [1, 2, 3] {
        let (cluster, node, [crashed, restarted, restored], m) = rejoin_run(seed);
        assert!(crashed < restarted && restarted < restored, "seed {seed}");
        let c = m.manager.current();
        assert_eq!((c.live, c.copying), (0b111, 0), "seed {seed}: {c:?}");
        assert_eq!(
            c.incarnation[node as usize], 2,
            "seed {seed}: new incarnation"
        );
        assert!(
            c.shards[..3].iter().all(|s| s.since[node as usize] > 0),
            "seed {seed}: a replica of every shard since it caught up"
        );
        assert!(
            cluster.failed.is_empty(),
            "seed {seed}: every node is checked"
        );
        let stats = m.manager.stats();
        assert_eq!(
            (stats.joins, stats.caught_up),
            (1, 1),
            "seed {seed}: {stats:?}"
        );
        // The restarted node holds every row of its ring shards, as their
        // primaries do, and the money adds up.
        let report = cluster.check_replicas().expect("replicas agree");
        assert!(report.rows_compared > 0);
        cluster.check().expect("money");
        let copies = cluster.parts.nodes[node as usize].nic.copy_stats();
        assert!(
            copies.caught_up >= 1 && copies.done_received >= 3,
            "{copies:?}"
        );
        // It rejoined as the last backup: the shard it was primary of keeps
        // the primary promoted at the crash.
        let view = *cluster.parts.nodes[0].nic.recovery().view();
        assert_ne!(view.shard_primary(node), Some(node), "seed {seed}");
        assert_eq!(view.caught_up_replicas(node).count(), 3, "seed {seed}");
        assert_eq!(view.live_replicas(node).last(), Some(node), "seed {seed}");
    }
}

#[test]
fn a_rejoin_run_replays_from_its_seed() {
    let (a, _, ta, _) = rejoin_run(5);
    let (b, _, tb, _) = rejoin_run(5);
    assert_eq!(ta, tb);
    assert_eq!(a.outcome_trace_hash(), b.outcome_trace_hash());
}
