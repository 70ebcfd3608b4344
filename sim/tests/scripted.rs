//! Scripted control of a real cluster run, the tools for replaying a trace
//! or forcing one interleaving: a held link whose packets a test inspects
//! and delivers in an order of its choosing (here: newest first, against the
//! link's order), and a crash at a chosen pass.

use splitkv_bench::{ClusterSpec, Smallbank, SmallbankCluster};
use splitkv_nic::net::session::SessionEvent;
use splitkv_sim::cluster::{build_on_sim, SimCluster};
use splitkv_sim::{EventKind, SimConfig};

const SLICE: u64 = 1_000;
const PASSES_MAX: u64 = 5_000_000;

/// A Smallbank cluster; `silence_ns` shortens the failure detector (it must
/// exceed a retransmission timeout, 5 ms, where packets are lost or reordered).
fn cluster(
    seed: u64,
    budget: u64,
    silence_ns: Option<u64>,
) -> (SmallbankCluster, splitkv_sim::SimNetwork, SimConfig) {
    let mut spec = ClusterSpec::new();
    spec.inflight_per_node = 8;
    spec.seed = seed;
    spec.budget_per_node = Some(budget);
    spec.session_silence_ns = silence_ns;
    let cfg = SimConfig {
        seed,
        ..SimConfig::default()
    };
    let workload = Smallbank::new(500, Some(20)).expect("accounts");
    let (c, net) = build_on_sim(spec, workload, cfg).expect("build");
    (c, net, cfg)
}

#[test]
fn held_link_packets_are_delivered_in_the_scripts_order() {
    let (mut c, net, cfg) = cluster(3, 300, None);
    let mut sim = c.sim(cfg);
    net.hold(0, 1, true, sim.now());
    sim.run_passes(&net, &mut c.components(), 2 * SLICE)
        .expect("runs");
    let held = net.held(0, 1);
    assert!(held.len() >= 2, "node 0 talks to node 1: {}", held.len());
    // Against the link's order: newest first.
    for p in held.iter().rev() {
        assert!(net.deliver_held(0, 1, p.seq));
        sim.run_passes(&net, &mut c.components(), 1).expect("runs");
    }
    let delivered: Vec<u64> = net
        .trace()
        .events()
        .filter_map(|e| match e.kind {
            EventKind::Deliver {
                src: 0,
                dst: 1,
                seq,
            } => Some(seq),
            _ => None,
        })
        .collect();
    let mut want: Vec<u64> = held.iter().rev().map(|p| p.seq).collect();
    want.truncate(delivered.len());
    assert_eq!(delivered, want, "delivered newest first, as scripted");
    net.hold(0, 1, false, sim.now());
    c.run_sim_until_quiescent(&mut sim, &net, SLICE, PASSES_MAX)
        .expect("the sessions recover the order; the run finishes");
    c.check().expect("money check");
    c.check_replicas().expect("replica check");
    assert_eq!(net.stats().forced_deliveries, held.len() as u64);
}

#[test]
fn crash_at_a_chosen_pass() {
    let (mut c, net, cfg) = cluster(4, 100_000, Some(2_000_000));
    let mut sim = c.sim(cfg);
    sim.crash_at(2, 7_000);
    let mut failed = Vec::new();
    while failed.len() < 2 {
        sim.run_passes(&net, &mut c.components(), SLICE)
            .expect("survivors run on");
        failed.extend(c.drain_session_events(&sim));
        assert!(sim.passes() < PASSES_MAX, "no failure declared");
    }
    assert_eq!(sim.crashed(), &[(2, 7_000 * cfg.tick_ns)]);
    for (by, SessionEvent::PeerFailed { node }) in failed {
        assert_ne!(by, 2);
        assert_eq!(node, 2);
    }
    let trace = net.trace();
    let crash = trace
        .events()
        .find(|e| e.kind == EventKind::Crash { node: 2 })
        .expect("in the ring");
    assert!(trace.around(crash.at, 10_000).contains("crash   node 2"));
}
