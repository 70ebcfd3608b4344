//! One seed reproduces a whole simulated run: Smallbank on 3 nodes with
//! contention (so conflicts, retries with seeded backoff and full rings all
//! happen) is run twice with one seed, and the hash of the whole event trace —
//! every packet delivered with its virtual time and destination, every outcome
//! with its time, request id, status and result — is equal; another seed gives
//! another trace.

use splitkv_bench::{ClusterSpec, Smallbank, SmallbankCluster};
use splitkv_sim::{Sim, SimConfig};

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
    let (mut cluster, net) = SmallbankCluster::build_on_sim(spec, workload, cfg).expect("build");
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
