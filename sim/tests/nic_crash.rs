//! The nic-crash mix (NIC-runtime-only crashes and the NIC restart): NIC runtimes
//! crash alone at seeded passes and restart
//! (`NicRuntime::restart_nic`) while their hosts, data and clients live;
//! each restarted node rebuilds its locks from its peers and serves again.
//! Every run ends with every client done, every node serving, and every
//! check passing: Smallbank's money and replica agreement, the list-append
//! history (strict serializability with the restarts' `Unknown` outcomes
//! as indeterminate, lost commits). One test measures restart → serving
//! again in simulated time.

mod fault_support;
mod history_support;

use fault_support::fault_spec;
use history_support::{list_append, spec, HistoryCluster};
use splitkv_bench::history_gen::TxShape;
use splitkv_bench::{BenchCluster, Smallbank, SmallbankCluster, Workload};
use splitkv_nic::runtime::Availability;
use splitkv_sim::cluster::{build_on_sim, SimCluster};
use splitkv_sim::{FaultMix, Sim, SimConfig, SimNetwork};

/// Passes between checks for the end of a run.
const SLICE: u64 = 5_000;
/// Passes after which a run counts as stalled.
const PASSES_MAX: u64 = 2_000_000;
/// The window of the seeded NIC crashes (passes): inside a run of the budget below.
const NIC_CRASH_PASSES: (u64, u64) = (500, 3_000);
/// Transactions per client.
const BUDGET: u64 = 300;

fn nic_config(seed: u64) -> SimConfig {
    let mut cfg = FaultMix::NicCrash.config(seed);
    cfg.nodes.nic_crash_pass_min = NIC_CRASH_PASSES.0;
    cfg.nodes.nic_crash_pass_max = NIC_CRASH_PASSES.1;
    cfg
}

/// Runs `cluster` to the end under `cfg`; returns the driver. Panics if the
/// run stalls, no NIC crashed, or a restarted node does not serve again.
fn run<W: Workload>(cluster: &mut BenchCluster<W>, net: &SimNetwork, cfg: SimConfig) -> Sim {
    let mut sim = cluster.sim(cfg);
    if let Err(e) = cluster.run_sim_until_quiescent(&mut sim, net, SLICE, PASSES_MAX) {
        panic!("seed {}: {e}\n{}", cfg.seed, net.trace().tail(40));
    }
    cluster.finish(sim.now());
    assert!(
        !sim.nic_crashed().is_empty(),
        "seed {}: no NIC crash",
        cfg.seed
    );
    assert!(sim.crashed().is_empty(), "no node crash in this mix");
    for &(node, _) in sim.nic_crashed() {
        let nic = &cluster.parts.nodes[node as usize].nic;
        let s = nic.rebuild_stats();
        assert!(s.restarts >= 1 && s.rebuilds_done == s.restarts, "{s:?}");
        assert_eq!(nic.availability(), Availability::Serving);
        assert_eq!(nic.incarnation(), 1 + s.restarts as u32);
    }
    assert!(cluster.loadgens.iter().all(|l| l.is_done()));
    sim
}

fn smallbank(seed: u64) -> (SmallbankCluster, Sim) {
    let spec = fault_spec(seed, BUDGET, None);
    let cfg = nic_config(seed);
    let w = Smallbank::new(300, Some(20)).expect("accounts");
    let (mut cluster, net) = build_on_sim(spec, w, cfg).expect("build");
    let sim = run(&mut cluster, &net, cfg);
    (cluster, sim)
}

#[test]
fn nic_crash_smallbank_keeps_money_and_replicas() {
    for seed in [1, 2, 3, 4] {
        let (cluster, _) = smallbank(seed);
        cluster
            .check()
            .unwrap_or_else(|e| panic!("seed {seed}: money: {e}"));
        let replicas = cluster.check_replicas().expect("replica agreement");
        assert!(replicas.rows_compared > 0, "{replicas:?}");
        let s = cluster.load_stats();
        assert!(s.committed > 100, "seed {seed}: {s:?}");
    }
}

#[test]
fn nic_crash_list_append_history_passes() {
    let mut unknown = 0;
    for seed in [5, 6, 7] {
        let cfg = nic_config(seed);
        let workload = list_append(12, 3, BUDGET, TxShape::Mixed);
        let s = spec(3, 4, BUDGET, seed, 500);
        let (mut cluster, net): (HistoryCluster, SimNetwork) =
            build_on_sim(s, workload, cfg).expect("build");
        let sim = run(&mut cluster, &net, cfg);
        let report = cluster
            .check()
            .unwrap_or_else(|e| panic!("seed {seed}: history: {e}"));
        assert!(report.stats.committed > 50, "{:?}", report.stats);
        cluster.check_replicas().expect("replica agreement");
        unknown += sim
            .nic_crashed()
            .iter()
            .map(|&(n, _)| {
                let nic = &cluster.parts.nodes[n as usize].nic;
                nic.rebuild_stats().outcomes_unknown
            })
            .sum::<u64>();
    }
    assert!(unknown > 0, "restarts lost transactions in flight");
}

/// NIC restart → serving again, in simulated time: the rebuild's round
/// trip to every peer, the decisions, and the host applying its log.
#[test]
fn nic_restart_to_serving_again_is_measured_in_simulated_time() {
    let mut worst_ns = 0;
    for seed in [1, 2, 7] {
        let (cluster, sim) = smallbank(seed);
        for &(node, _) in sim.nic_crashed() {
            let s = cluster.parts.nodes[node as usize].nic.rebuild_stats();
            let took = s.last_serving_ns - s.last_restart_ns;
            eprintln!(
                "seed {seed}: node {node}'s NIC runtime restarted at {:.3} ms, serving again after {:.1} µs ({} locks taken back, {} waiting answered)",
                s.last_restart_ns as f64 / 1e6,
                took as f64 / 1e3,
                s.locks_reinstalled,
                s.answered_refused + s.answered_log_ok + s.answered_committed,
            );
            worst_ns = worst_ns.max(took);
        }
    }
    // A few network round trips and host-log applies: well under 1 ms.
    assert!(worst_ns < 1_000_000, "{worst_ns} ns");
}

/// NIC crashes over the net mix's lossy, reordering network: the rebuild's
/// messages ride the same retransmitting sessions.
#[test]
fn nic_crash_over_a_lossy_network_keeps_money_and_replicas() {
    for seed in 11..=16 {
        let spec = fault_spec(seed, BUDGET, None);
        let cfg = SimConfig {
            net: FaultMix::net_faults(),
            ..nic_config(seed)
        };
        let w = Smallbank::new(300, Some(20)).expect("accounts");
        let (mut cluster, net) = build_on_sim(spec, w, cfg).expect("build");
        run(&mut cluster, &net, cfg);
        cluster
            .check()
            .unwrap_or_else(|e| panic!("seed {seed}: money: {e}"));
        cluster.check_replicas().expect("replica agreement");
    }
}
