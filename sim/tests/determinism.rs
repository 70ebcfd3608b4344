//! One seed reproduces a whole simulated run: Smallbank on 3 nodes with
//! contention (so conflicts, retries with seeded backoff and full rings all
//! happen) is run twice with one seed, and the hash of the whole event trace —
//! every packet delivered with its virtual time and destination, every outcome
//! with its time, request id, status and result — is equal; another seed gives
//! another trace. The same holds under every fault mix
//! (`splitkv_sim::FaultMix`): with network faults, DMA latencies, a crashed
//! and a slow node, the trace hash (which covers every send, delivery,
//! drop, duplication, partition, clog and crash) and the outcomes repeat
//! bit for bit for one seed and differ for another.

use splitkv_bench::{ClusterSpec, Smallbank};
use splitkv_sim::cluster::{build_on_sim, SimCluster};
use splitkv_sim::{FaultMix, NetStats, Sim, SimConfig};

/// Transactions per run (over all clients).
const TXS: u64 = 6_000;

struct Trace {
    packets: u64,
    network_hash: u64,
    outcome_hash: u64,
    virtual_ns: u64,
    retries: u64,
}

fn run(seed: u64) -> Trace {
    let mut spec = ClusterSpec::new();
    spec.inflight_per_node = 32;
    spec.seed = seed;
    spec.budget_per_node = Some(TXS / 3);
    spec.dma_latency_ns = 500;
    let workload = Smallbank::new(3_000, Some(20)).expect("accounts");
    let cfg = SimConfig {
        seed,
        ..SimConfig::default()
    };
    let (mut cluster, net) = build_on_sim(spec, workload, cfg).expect("build");
    let mut sim = Sim::new(cfg);
    cluster
        .run_sim_until_quiescent(&mut sim, &net, 5_000, 50_000_000)
        .expect("simulated network healthy, no stall");
    cluster.check().expect("money check");
    cluster.check_replicas().expect("replica check");
    Trace {
        packets: net.delivered(),
        network_hash: net.trace_hash(),
        outcome_hash: cluster.outcome_trace_hash(),
        virtual_ns: sim.now(),
        retries: cluster.load_stats().retries,
    }
}

#[test]
fn one_seed_twice_gives_the_same_event_trace() {
    let a = run(77);
    let b = run(77);
    assert!(a.packets > 1_000, "a real run: {} packets", a.packets);
    assert!(a.retries > 0, "contention exercised the retry path");
    assert_eq!(a.packets, b.packets);
    assert_eq!(a.virtual_ns, b.virtual_ns);
    assert_eq!(a.network_hash, b.network_hash, "same packets, times, order");
    assert_eq!(
        a.outcome_hash, b.outcome_hash,
        "same outcomes, times, order"
    );
    let c = run(78);
    assert_ne!(
        a.network_hash, c.network_hash,
        "another seed, another trace"
    );
    assert_ne!(a.outcome_hash, c.outcome_hash);
}

/// Passes of a fault-mix run (the clients draw without a budget; the mixes'
/// crashes fall within it). A crash stalls the transactions that wait on
/// the crashed node (recovery is not here yet), so no run waits for its end.
const MIX_PASSES: u64 = 160_000;

#[derive(Debug, PartialEq, Eq)]
struct MixTrace {
    network_hash: u64,
    outcome_hash: u64,
    virtual_ns: u64,
    stats: NetStats,
    crashed: Vec<(u16, u64)>,
}

/// Runs `mix` with `seed` for [`MIX_PASSES`] passes, in slices of `slice`.
fn run_mix_sliced(mix: FaultMix, seed: u64, slice: u64) -> MixTrace {
    let mut spec = ClusterSpec::new();
    spec.inflight_per_node = 16;
    spec.seed = seed;
    let workload = Smallbank::new(1_000, Some(20)).expect("accounts");
    let cfg = mix.config(seed);
    let (mut cluster, net) = build_on_sim(spec, workload, cfg).expect("build");
    let mut sim = cluster.sim(cfg);
    while sim.passes() < MIX_PASSES {
        sim.run_passes(&net, &mut cluster.components(), slice)
            .expect("no component fails");
    }
    MixTrace {
        network_hash: net.trace_hash(),
        outcome_hash: cluster.outcome_trace_hash(),
        virtual_ns: sim.now(),
        stats: net.stats(),
        crashed: sim.crashed().to_vec(),
    }
}

fn run_mix(mix: FaultMix, seed: u64) -> MixTrace {
    run_mix_sliced(mix, seed, MIX_PASSES)
}

#[test]
fn every_fault_mix_replays_bit_for_bit() {
    for mix in FaultMix::ALL {
        let a = run_mix(mix, 31);
        let b = run_mix(mix, 31);
        assert_eq!(a, b, "{mix}: one seed, one run");
        let c = run_mix(mix, 32);
        assert_ne!(a.network_hash, c.network_hash, "{mix}: another seed");
        let s = a.stats;
        assert!(s.delivered > 1_000, "{mix}: a real run: {s:?}");
        match mix {
            FaultMix::None => assert_eq!(s.dropped() + s.duplicated + s.clogs + s.crashes, 0),
            FaultMix::Net => assert!(s.dropped_loss + s.duplicated + s.reordered > 0, "{s:?}"),
            // NIC crashes are the cluster's to restart; this loop does not.
            FaultMix::NicCrash => assert_eq!(s.crashes, 0, "{mix}: no node crash"),
            FaultMix::Crash | FaultMix::All | FaultMix::Rejoin | FaultMix::Chaos => {
                assert_eq!(a.crashed.len(), 1, "{mix}: one crash");
                assert_eq!(s.crashes, 1, "{mix}: the network saw it: {s:?}");
            }
        }
    }
}

#[test]
fn slicing_a_run_does_not_change_it() {
    assert_eq!(
        run_mix(FaultMix::All, 33),
        run_mix_sliced(FaultMix::All, 33, 4_000),
        "the seed alone decides the run"
    );
}
