//! A verbs node's transport wrapper (splitkv_host::deploy::verbs'
//! `DirectedVerbs`) on nic-runtime's in-memory test device: a peer with no
//! published endpoint is unreachable (taken and dropped, counted); the
//! membership's directory makes its address handle within one refresh; a
//! restarted peer's new queue pair at the same address is taken before the
//! agent's `set_peer_address`; a replacement machine's endpoint is
//! registered at once but used only once the agent re-points the node.
//! The counters it publishes for the control thread follow the
//! transport's within one publish period, with the directory's endpoints
//! the transport refused. Needs the feature `verbs` (scripts/test's verbs
//! stage), no device.

#[allow(dead_code)]
#[path = "../../nic-runtime/tests/verbs/fake.rs"]
mod fake;

use fake::FakeDevice;
use splitkv_host::deploy::verbs::{
    DirectedVerbs, PublishedPeers, VERBS_COUNTERS_PUBLISH_NS, VERBS_PEERS_REFRESH_NS,
};
use splitkv_host::deploy::{VerbsPeers, VerbsSnapshot};
use splitkv_nic::net::verbs::{
    RxDrop, VerbsConfig, VerbsPeer, VerbsTransport, VERBS_ENDPOINTS_MAX,
};
use splitkv_nic::net::{Transport, TxPacket};
use splitkv_nic::NODES_MAX;
use std::net::SocketAddr;

const QKEY: u32 = 0x1111_1111;

fn addr(text: &str) -> SocketAddr {
    text.parse().expect("address")
}

fn peer(data: &str, qpn: u32) -> VerbsPeer {
    format!("addr={data},gid=::ffff:10.0.0.1,qpn={qpn},qkey={QKEY:#x}")
        .parse()
        .expect("peer")
}

/// Node 0 of three (10.0.0.1..3:7100), nothing known of its peers.
fn node0(dir: &VerbsPeers) -> DirectedVerbs<FakeDevice> {
    let cfg = VerbsConfig {
        mtu: 256,
        recv_depth: 4,
        send_depth: 8,
        signal_every: 4,
        peers: vec![None; 3],
        ..VerbsConfig::default()
    };
    let dev = FakeDevice::new(&cfg, 64);
    let inner = VerbsTransport::with_device(cfg, dev).expect("transport");
    let addrs = ["10.0.0.1:7100", "10.0.0.2:7100", "10.0.0.3:7100"].map(addr);
    DirectedVerbs::new(inner, 0, addrs.to_vec(), dir.clone())
}

/// Sends one packet to `dst` at `now`; returns the QPN it went to, if any.
fn send(t: &mut DirectedVerbs<FakeDevice>, now: u64, dst: u16) -> Option<u32> {
    let before = t.inner().device().sent.len();
    assert_eq!(t.tx_burst(now, &[TxPacket { dst, bytes: b"hi" }]), 1);
    t.tx_flush(now);
    t.inner().device().sent.get(before).map(|s| s.qpn)
}

fn published(entries: &[(usize, VerbsPeer)]) -> PublishedPeers {
    let mut p: PublishedPeers = [None; NODES_MAX];
    for &(n, e) in entries {
        p[n] = Some(e);
    }
    p
}

#[test]
fn peers_queue_pairs_come_from_the_directory() {
    let dir = VerbsPeers::new();
    let mut t = node0(&dir);
    assert_eq!(send(&mut t, 0, 1), None, "no endpoint for node 1 yet");
    assert_eq!(t.inner().stats().tx_unknown_peer, 1);

    // The membership publishes node 1 at its file address: used within one
    // refresh period of the node's clock.
    dir.publish(&published(&[(1, peer("10.0.0.2:7100", 0x101))]));
    let now = VERBS_PEERS_REFRESH_NS;
    assert_eq!(send(&mut t, now, 1), Some(0x101));

    // Node 1 restarts with a new queue pair at the same machine; the agent
    // re-points it (same address) after the driver wrote the directory:
    // the refresh before the call takes the new queue pair, and the data
    // address itself did not change.
    dir.publish(&published(&[(1, peer("10.0.0.2:7100", 0x201))]));
    assert_eq!(t.set_peer_address(1, addr("10.0.0.2:7100")), Ok(false));
    assert_eq!(send(&mut t, now, 1), Some(0x201));
    let old = peer("10.0.0.2:7100", 0x101);
    let new = peer("10.0.0.2:7100", 0x201);
    let dev = t.inner_mut().device_mut();
    assert!(dev.deliver(&old, b"stale", Some(QKEY)));
    assert!(dev.deliver(&new, b"fresh", Some(QKEY)));
    let mut got = Vec::new();
    t.rx_burst(now, 32, &mut |p| got.push(p.to_vec()));
    assert_eq!(
        got,
        vec![b"fresh".to_vec()],
        "the old queue pair's is stale"
    );

    // Node 2 is replaced by a machine at another address: registered at
    // once, used once the agent re-points node 2 there.
    dir.publish(&published(&[(1, new), (2, peer("10.0.0.9:7100", 0x309))]));
    let later = 2 * VERBS_PEERS_REFRESH_NS;
    assert_eq!(send(&mut t, later, 2), None, "not re-pointed yet");
    assert_eq!(t.set_peer_address(2, addr("10.0.0.9:7100")), Ok(true));
    assert_eq!(send(&mut t, later, 2), Some(0x309));
    assert_eq!(t.refused(), 0);
}

#[test]
fn published_counters_follow_the_transport_and_count_refused_endpoints() {
    let dir = VerbsPeers::new();
    let mut t = node0(&dir);
    let counters = t.counters();
    assert_eq!(counters.snapshot(), VerbsSnapshot::default());

    // The first flush publishes: one packet sent, node 1 re-pointed at the
    // endpoint the directory gave it.
    dir.publish(&published(&[(1, peer("10.0.0.2:7100", 0x101))]));
    assert_eq!(send(&mut t, 0, 1), Some(0x101));
    let s = counters.snapshot();
    assert_eq!(s.transport, t.inner().stats());
    assert_eq!(s.transport.tx_packets, 1);
    assert_eq!(s.peers_repointed, 1);
    assert_eq!(s.endpoints_refused, 0);

    // Within the period the transport counts on and the published
    // counters stay: a packet for node 2 (no endpoint) and a stranger's
    // datagram.
    assert_eq!(send(&mut t, 1, 2), None);
    let stranger = peer("10.0.0.7:7100", 0x999);
    assert!(t
        .inner_mut()
        .device_mut()
        .deliver(&stranger, b"who", Some(QKEY)));
    assert_eq!(t.rx_burst(1, 32, &mut |_| ()), 0, "a stranger's is dropped");
    assert_eq!(t.inner().stats().tx_unknown_peer, 1);
    assert_eq!(t.inner().stats().rx_dropped.get(RxDrop::Stranger), 1);
    assert_eq!(counters.snapshot(), s, "published at most once a period");

    // One period later they are the transport's again.
    assert_eq!(t.rx_burst(VERBS_COUNTERS_PUBLISH_NS, 32, &mut |_| ()), 0);
    let s = counters.snapshot();
    assert_eq!(s.transport, t.inner().stats());
    assert_eq!(s.transport.tx_unknown_peer, 1);
    assert_eq!(s.transport.rx_dropped.get(RxDrop::Stranger), 1);
    assert_eq!(s.transport.rx_dropped.total(), 1);

    // A full endpoint table: node 2's replacement machine, published by
    // the membership, is refused; counted and published.
    let filler = |i: usize| {
        let a = format!("10.1.{}.{}:7100", i / 256, i % 256);
        peer(&a, 0x1000 + i as u32)
    };
    for i in 1..VERBS_ENDPOINTS_MAX {
        assert!(t.inner_mut().add_endpoint(filler(i)), "endpoint {i}");
    }
    assert!(!t.inner_mut().add_endpoint(filler(0)), "the table is full");
    dir.publish(&published(&[
        (1, peer("10.0.0.2:7100", 0x101)),
        (2, peer("10.0.0.9:7100", 0x309)),
    ]));
    let later = 4 * VERBS_COUNTERS_PUBLISH_NS.max(VERBS_PEERS_REFRESH_NS);
    assert_eq!(send(&mut t, later, 1), Some(0x101), "node 1 still reached");
    assert_eq!(t.refused(), 1);
    let s = counters.snapshot();
    assert_eq!(s.endpoints_refused, 1);
    assert_eq!(s.transport, t.inner().stats());
    assert_eq!(s.transport.tx_packets, 2);
    assert_eq!(s.peers_repointed, 1, "node 1's endpoint is unchanged");
}
