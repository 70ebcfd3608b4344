//! Whole nodes over a lossy network: the fault-injecting transport
//! (`splitkv_nic::net::faulty`) drops 10% of packets, duplicates 10% and
//! reorders or delays 10% (so later packets overtake them), seeded. The sessions below the batching layer
//! (`splitkv_nic::net::session`) repair it all: every transaction commits
//! exactly once (the counter equals the number committed), and the stats show
//! retransmissions, duplicates and out-of-order packets dropped.

mod support;

use splitkv_host::Cluster;
use splitkv_layout::host_nic::TxStatus;
use splitkv_nic::net::faulty::{FaultConfig, FaultyTransport};
use splitkv_nic::net::mem::{mem_network, MemTransport};
use splitkv_nic::net::session::SessionConfig;
use splitkv_nic::net::stack::StackConfig;
use splitkv_nic::net::Transport;
use splitkv_nic::Nanos;
use support::{as_u64, counter, registry, INCR};

/// 10% of packets lost, 10% duplicated, 5% overtaken by the next and 5%
/// held back 20 µs (so later packets overtake them), seeded per node.
fn lossy(inner: MemTransport, seed: u64) -> Box<dyn Transport> {
    let cfg = FaultConfig {
        loss_ppm: 100_000,
        duplicate_ppm: 100_000,
        reorder_ppm: 50_000,
        delay_ppm: 50_000,
        delay_ns: 20_000,
        ..FaultConfig::none(seed)
    };
    Box::new(FaultyTransport::new(inner, cfg).expect("rates below one"))
}

#[test]
fn transactions_commit_exactly_once_over_loss_duplication_and_reordering() {
    const TRANSACTIONS: u64 = 300;
    const STEP_NS: Nanos = 1_000;
    const PASSES_MAX: u64 = 3_000_000;
    const COUNTERS: u64 = 16;
    let transports: Vec<Box<dyn Transport>> = mem_network(3)
        .into_iter()
        .enumerate()
        .map(|(i, t)| lossy(t, 100 + i as u64))
        .collect();
    let net = StackConfig {
        session: SessionConfig {
            retransmit_timeout_ns: 50_000,
            ack_delay_ns: 2_000,
            ..SessionConfig::default()
        },
        ..StackConfig::default()
    };
    let mut parts = Cluster::builder()
        .nodes(3)
        .replication(3)
        .procedures(registry())
        .seed(5)
        .configure(move |cfg| cfg.net = net)
        .build_parts(transports)
        .unwrap();
    parts
        .load(
            (1..=COUNTERS).map(|id| (counter(id), 0u64.to_le_bytes())),
            |_| {},
        )
        .unwrap();
    let mut clients = [parts.client(0).unwrap(), parts.client(1).unwrap()];
    let (mut submitted, mut results) = (0u64, Vec::new());
    let mut now = 0;
    for _ in 0..PASSES_MAX {
        // Keep two transactions in flight per client.
        if submitted < TRANSACTIONS && submitted - results.len() as u64 <= 2 {
            let c = &mut clients[(submitted % 2) as usize];
            let id = 1 + submitted % COUNTERS;
            c.submit(submitted, INCR, &id.to_le_bytes()).unwrap();
            submitted += 1;
        }
        for comp in parts.components() {
            comp.run_iteration(now);
        }
        now += STEP_NS;
        for c in clients.iter_mut() {
            c.poll(8, |o| results.push(o.status)).unwrap();
        }
        if results.len() as u64 == TRANSACTIONS {
            break;
        }
    }
    assert_eq!(
        results.len() as u64,
        TRANSACTIONS,
        "every transaction has an outcome"
    );
    for _ in 0..200_000 {
        for comp in parts.components() {
            comp.run_iteration(now);
        }
        now += STEP_NS;
        if parts.is_quiescent() {
            break;
        }
    }
    assert!(parts.is_quiescent(), "retransmissions settle");
    let committed = results
        .iter()
        .filter(|s| **s == TxStatus::Committed)
        .count() as u64;
    assert!(committed > TRANSACTIONS / 2, "{committed} committed");
    let mut total = 0;
    let mut v = Vec::new();
    for id in 1..=COUNTERS {
        parts.get(&counter(id), &mut v).unwrap();
        total += as_u64(&v);
    }
    assert_eq!(total, committed, "each committed increment applied once");
    let s = parts.stats();
    let (mut retx, mut dups, mut ooo, mut failed) = (0, 0, 0, 0);
    for n in &s.nodes {
        let x = &n.nic.net.sessions;
        retx += x.retransmissions;
        dups += x.duplicates_dropped;
        ooo += x.out_of_order_dropped;
        failed += x.sessions_failed;
        assert_eq!(n.nic.bad_packets, 0);
    }
    assert!(
        retx > 0 && dups > 0 && ooo > 0,
        "retx {retx} dups {dups} ooo {ooo}"
    );
    assert_eq!(failed, 0);
}
