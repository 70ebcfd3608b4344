//! Whole nodes over a lossy network: a test-only transport wrapper drops 10%
//! of packets, duplicates 10% and delays 10% (so later packets overtake
//! them), with a seeded xoshiro256**. The sessions below the batching layer
//! (`splitkv_nic::net::session`) repair it all: every transaction commits
//! exactly once (the counter equals the number committed), and the stats show
//! retransmissions, duplicates and out-of-order packets dropped.

mod support;

use splitkv_host::Cluster;
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::wire::NodeId;
use splitkv_nic::net::mem::{mem_network, MemTransport};
use splitkv_nic::net::session::SessionConfig;
use splitkv_nic::net::stack::StackConfig;
use splitkv_nic::net::{Transport, TxPacket};
use splitkv_nic::Nanos;
use support::{as_u64, counter, registry, INCR};

/// xoshiro256** seeded by SplitMix64.
struct Xoshiro([u64; 4]);

impl Xoshiro {
    fn new(mut seed: u64) -> Xoshiro {
        let mut s = [0; 4];
        for w in &mut s {
            seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            *w = z ^ (z >> 31);
        }
        Xoshiro(s)
    }
    fn next(&mut self) -> u64 {
        let s = &mut self.0;
        let out = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Most packets a lossy endpoint holds back for later delivery.
const HELD_MAX: usize = 256;
/// Longest hold-back, in ns.
const HOLD_NS_MAX: Nanos = 20_000;

/// A mem endpoint that loses, duplicates and delays what it sends.
struct Lossy {
    inner: MemTransport,
    rng: Xoshiro,
    held: Vec<(Nanos, NodeId, Vec<u8>)>,
}

impl Lossy {
    fn send(&mut self, now: Nanos, dst: NodeId, bytes: &[u8]) {
        // A packet the bounded mem queue refuses is lost, like any other.
        self.inner.tx_burst(now, &[TxPacket { dst, bytes }]);
    }
}

impl Transport for Lossy {
    fn mtu(&self) -> usize {
        self.inner.mtu()
    }
    fn is_lossy(&self) -> bool {
        true
    }
    fn tx_burst(&mut self, now: Nanos, packets: &[TxPacket<'_>]) -> usize {
        for p in packets {
            if self.rng.chance(10) {
                continue;
            }
            if self.rng.chance(10) && self.held.len() < HELD_MAX {
                let at = now + self.rng.next() % HOLD_NS_MAX;
                self.held.push((at, p.dst, p.bytes.to_vec()));
                continue;
            }
            let copies = if self.rng.chance(10) { 2 } else { 1 };
            for _ in 0..copies {
                self.send(now, p.dst, p.bytes);
            }
        }
        packets.len()
    }
    fn tx_flush(&mut self, now: Nanos) {
        let mut i = 0;
        while i < self.held.len() {
            if self.held[i].0 <= now {
                let (_, dst, bytes) = self.held.swap_remove(i);
                self.send(now, dst, &bytes);
            } else {
                i += 1;
            }
        }
        self.inner.tx_flush(now);
    }
    fn rx_burst(&mut self, now: Nanos, max: usize, on_packet: &mut dyn FnMut(&[u8])) -> usize {
        self.tx_flush(now);
        self.inner.rx_burst(now, max, on_packet)
    }
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
        .map(|(i, t)| {
            Box::new(Lossy {
                inner: t,
                rng: Xoshiro::new(100 + i as u64),
                held: Vec::new(),
            }) as Box<dyn Transport>
        })
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
