//! The cluster under the fault mixes (`splitkv_sim::FaultMix`):
//!
//! - net: seeded delay tails, loss, duplication, reordering, partitions,
//!   clogs, small link capacities and DMA latencies; the sessions retransmit,
//!   so Smallbank keeps its money and replicas agree, and a list-append
//!   history passes the strict-serializability and lost-commit checks;
//! - crash (and all): one seeded node crashes mid-run; recovery is not part
//!   of this crate yet, so the test shows only that the crash is contained:
//!   no component of a survivor fails, the network drops and counts
//!   everything to and from the crashed node, and every survivor's sessions
//!   declare exactly that node failed.

mod history_support;

use history_support::{check_run, list_append, spec, HistoryCluster};
use splitkv_bench::history_gen::TxShape;
use splitkv_bench::{ClusterSpec, Smallbank};
use splitkv_nic::net::session::SessionEvent;
use splitkv_sim::cluster::{build_on_sim, SimCluster};
use splitkv_sim::{DmaFaults, FaultMix, NetFaults, NetStats, SimConfig, SimNetwork};

/// Passes between checks for the end of a run.
const SLICE: u64 = 5_000;
/// Passes after which a run counts as stalled.
const PASSES_MAX: u64 = 20_000_000;
/// Silence after which a survivor declares a crashed peer failed (virtual):
/// longer than the net mix's longest partition plus a retransmission
/// timeout with backoff, so only the crash is declared.
const SILENCE_NS: u64 = 30_000_000;

fn smallbank_spec(seed: u64, budget: u64) -> ClusterSpec {
    let mut spec = ClusterSpec::new();
    spec.inflight_per_node = 16;
    spec.seed = seed;
    spec.budget_per_node = Some(budget);
    spec
}

/// Asserts that the net mix did inject each kind of fault.
fn assert_net_faults_seen(s: &NetStats, name: &str) {
    assert!(s.dropped_loss > 0, "{name}: loss: {s:?}");
    assert!(s.duplicated > 0, "{name}: duplication: {s:?}");
    assert!(s.reordered > 0, "{name}: reordering: {s:?}");
    assert!(s.clogs > 0, "{name}: clogs: {s:?}");
    assert_eq!(s.dropped_crashed, 0, "{name}: no crash in this mix");
}

#[test]
fn net_mix_smallbank_keeps_money_and_replicas() {
    let mut partitions = 0;
    for seed in [1, 2, 3] {
        let name = format!("smallbank net seed {seed}");
        let cfg = FaultMix::Net.config(seed);
        let workload = Smallbank::new(1_000, Some(20)).expect("accounts");
        let (mut cluster, net) =
            build_on_sim(smallbank_spec(seed, 1_000), workload, cfg).expect("build");
        let mut sim = cluster.sim(cfg);
        if let Err(e) = cluster.run_sim_until_quiescent(&mut sim, &net, SLICE, PASSES_MAX) {
            panic!("{name}: {e}\n{}", net.trace().tail(40));
        }
        cluster.check().expect("money check");
        cluster.check_replicas().expect("replica check");
        let s = net.stats();
        assert_net_faults_seen(&s, &name);
        partitions += s.partitions;
        assert_eq!(cluster.load_stats().finished(), 3_000, "{name}");
        eprintln!("{name}: {s:?}, {} µs virtual", sim.now() / 1_000);
    }
    assert!(partitions > 0, "some seed partitioned the network");
}

#[test]
fn dma_latencies_are_wired_into_the_cluster() {
    let run = |dma: DmaFaults| {
        let cfg = SimConfig {
            seed: 8,
            dma,
            ..SimConfig::default()
        };
        let workload = Smallbank::new(1_000, Some(20)).expect("accounts");
        let (mut cluster, net) =
            build_on_sim(smallbank_spec(8, 500), workload, cfg).expect("build");
        let mut sim = cluster.sim(cfg);
        cluster
            .run_sim_until_quiescent(&mut sim, &net, SLICE, PASSES_MAX)
            .expect("finishes");
        cluster.check().expect("money check");
        cluster.check_replicas().expect("replica check");
        sim.now()
    };
    let fixed = run(DmaFaults::default());
    let slow = DmaFaults {
        slow_ppm: 100_000,
        ..DmaFaults::xenic()
    };
    let xenic = run(slow);
    assert!(
        xenic > fixed,
        "seeded DMA latencies slow the run: {xenic} ns against {fixed} ns"
    );
}

#[test]
fn full_links_push_back_and_nothing_is_lost() {
    let cfg = SimConfig {
        seed: 4,
        net: NetFaults {
            link_capacity: 2,
            ..NetFaults::none()
        },
        ..SimConfig::default()
    };
    let workload = Smallbank::new(1_000, Some(20)).expect("accounts");
    let (mut cluster, net) = build_on_sim(smallbank_spec(4, 500), workload, cfg).expect("build");
    let mut sim = cluster.sim(cfg);
    cluster
        .run_sim_until_quiescent(&mut sim, &net, SLICE, PASSES_MAX)
        .expect("finishes");
    cluster.check().expect("money check");
    cluster.check_replicas().expect("replica check");
    let s = net.stats();
    assert!(s.refused_link_full > 0, "capacity reached: {s:?}");
    assert_eq!(s.dropped(), 0, "refused, never dropped: {s:?}");
    assert_eq!(s.sent + s.duplicated, s.delivered, "{s:?}");
}

#[test]
fn net_mix_list_append_history_passes_checks() {
    let mut seen = NetStats::default();
    for seed in [5, 6, 7] {
        let name = format!("list-append-net-{seed}");
        let cfg = FaultMix::Net.config(seed);
        let workload = list_append(12, 3, 1_000, TxShape::Mixed);
        let (mut cluster, net): (HistoryCluster, SimNetwork) =
            build_on_sim(spec(3, 4, 1_000, seed, 0), workload, cfg).expect("build");
        let mut sim = cluster.sim(cfg);
        if let Err(e) = cluster.run_sim_until_quiescent(&mut sim, &net, SLICE, PASSES_MAX) {
            panic!("{name}: {e}\n{}", net.trace().tail(40));
        }
        cluster.finish(sim.now());
        let checked = check_run(&mut cluster, &name);
        assert_eq!(checked.stats.finished(), 3_000, "{name}");
        assert!(checked.stats.committed > 100, "{name}: {:?}", checked.stats);
        let s = net.stats();
        assert_eq!(s.dropped_crashed, 0, "{name}");
        seen.add(&s);
    }
    assert_net_faults_seen(&seen, "list-append net");
}

/// Runs `mix` (which crashes one node) on Smallbank until every survivor
/// declared the crashed node failed; checks the crash was contained.
fn crash_contained(mix: FaultMix, seed: u64) {
    let name = format!("{mix} seed {seed}");
    let cfg = mix.config(seed);
    let mut spec = smallbank_spec(seed, 100_000);
    spec.session_silence_ns = Some(SILENCE_NS);
    let workload = Smallbank::new(1_000, Some(20)).expect("accounts");
    let (mut cluster, net) = build_on_sim(spec, workload, cfg).expect("build");
    let mut sim = cluster.sim(cfg);
    let (_, crashed) = sim.planned_crashes()[0];
    let mut failed = Vec::new();
    while failed.len() < 2 {
        if let Err(e) = sim.run_passes(&net, &mut cluster.components(), SLICE) {
            panic!("{name}: a survivor failed: {e}\n{}", net.trace().tail(40));
        }
        failed.extend(cluster.drain_session_events(&sim));
        assert!(sim.passes() < 2_000_000, "{name}: no failure declared");
        assert!(failed.len() <= 2, "{name}: {failed:?}");
    }
    let (_, at) = sim.crashed()[0];
    let mut observers: Vec<u16> = failed
        .iter()
        .map(|(by, e)| match e {
            SessionEvent::PeerFailed { node } => {
                assert_eq!(*node, crashed, "{name}: only the crashed node fails");
                *by
            }
        })
        .collect();
    observers.sort_unstable();
    let survivors: Vec<u16> = (0..3).filter(|&n| n != crashed).collect();
    assert_eq!(observers, survivors, "{name}: every survivor noticed");
    let s = net.stats();
    assert!(s.dropped_crashed > 0, "{name}: {s:?}");
    assert!(net.trace().events().any(|e| e.at >= at), "{name}: traced");
    eprintln!(
        "{name}: node {crashed} crashed at {} µs, declared failed by {} µs; {s:?}",
        at / 1_000,
        sim.now() / 1_000
    );
}

#[test]
fn crash_mix_is_contained_and_survivors_declare_the_peer_failed() {
    for seed in [1, 2] {
        crash_contained(FaultMix::Crash, seed);
    }
}

#[test]
fn all_mix_is_contained_too() {
    crash_contained(FaultMix::All, 3);
}

#[test]
fn a_default_config_still_builds() {
    let cfg = SimConfig {
        seed: 9,
        ..SimConfig::default()
    };
    assert_eq!(FaultMix::None.config(9), cfg);
}
