//! A node's DPDK transport built from its cluster file
//! (splitkv_host::deploy::dpdk), in one process on a looped-back `net_ring`
//! port (what the port sends it receives; no hardware, no hugepages): the
//! file's MACs and addresses (a node moved to a machine the file's
//! `neighbours` lists takes that machine's MAC), a packet to itself carried through the port,
//! a peer re-pointed at a machine the file's `neighbours` lists (its MAC,
//! no broadcast) and at one it does not (broadcast, counted), and the
//! counters published for `/status`. EAL runs once per process: this
//! binary has one test. Built only with the feature `dpdk`.

use splitkv_host::deploy::config::ClusterConfig;
use splitkv_host::deploy::dpdk::{dpdk_config, dpdk_transport, DPDK_COUNTERS_PUBLISH_NS};
use splitkv_nic::net::dpdk::{MacAddr, RxDrop};
use splitkv_nic::net::{Transport, TxPacket};

/// Most polls while waiting for a frame already in the port's ring.
const POLLS_MAX: usize = 100;

const FILE: &str = r#"
cluster_id = 3
token = "t"
replication = 3

[transport]
kind = "dpdk"
device = "net_ring0"
eal_args = ["--no-pci", "--no-huge", "-m", "128", "--vdev=net_ring0", "--log-level=lib.eal:error"]
mbufs = 2047
neighbours = [{ ip = "10.0.0.9", mac = "02:00:00:00:00:09" }]

[[node]]
id = 0
data = "10.0.0.1:7100"
control = "127.0.0.1:7200"
mac = "02:00:00:00:00:01"

[[node]]
id = 1
data = "10.0.0.2:7100"
control = "127.0.0.1:7201"
mac = "02:00:00:00:00:02"

[[node]]
id = 2
data = "10.0.0.3:7100"
control = "127.0.0.1:7202"
mac = "02:00:00:00:00:03"
"#;

/// Sends `bytes` to `dst` at time `now` and flushes.
fn send(t: &mut impl Transport, now: u64, dst: u16, bytes: &[u8]) {
    assert_eq!(t.tx_burst(now, &[TxPacket { dst, bytes }]), 1);
    t.tx_flush(now);
}

/// Polls until the port's ring is empty; returns the packets lent.
fn drain(t: &mut impl Transport, now: u64) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    for _ in 0..POLLS_MAX {
        if t.rx_burst(now, 32, &mut |p| got.push(p.to_vec())) == 0 && !got.is_empty() {
            break;
        }
    }
    got
}

#[test]
fn a_dpdk_node_transport_from_the_cluster_file_uses_its_macs_and_neighbours() {
    let config: ClusterConfig = FILE.parse().expect("the file parses");
    addresses_come_from_the_file(&config);
    let (mut t, counters) = dpdk_transport(&config, 0).expect("EAL and a net_ring port");
    assert_eq!(t.inner().local().mac, MacAddr([2, 0, 0, 0, 0, 1]));
    assert_eq!(t.mtu(), config.nodes[0].transport.mtu);

    // To itself: the ring brings the frame back, and node 0's own address
    // is a configured peer's.
    send(&mut t, 1, 0, b"hello me");
    assert_eq!(drain(&mut t, 2), vec![b"hello me".to_vec()]);

    // Node 1 replaced by the machine the file lists: its MAC, no broadcast.
    let listed = "10.0.0.9:7100".parse().unwrap();
    assert_eq!(t.set_peer_address(1, listed), Ok(true));
    send(&mut t, 3, 1, b"to the replacement");
    // The looped-back frame is for 02:..:09, not this endpoint.
    assert!(drain(&mut t, 4).is_empty());
    assert_eq!(t.inner().stats().broadcast_frames, 0);

    // Node 2 moved to an address nobody listed: broadcast, counted.
    let unlisted = "10.0.0.77:7100".parse().unwrap();
    assert_eq!(t.set_peer_address(2, unlisted), Ok(true));
    send(&mut t, 5, 2, b"to nowhere known");
    assert!(drain(&mut t, 6).is_empty());

    // Published for the control thread once the publish interval passed.
    t.tx_flush(10 * DPDK_COUNTERS_PUBLISH_NS);
    let s = counters.snapshot().transport;
    assert_eq!(s, t.inner().stats());
    assert_eq!((s.packets_sent, s.packets_received), (3, 1));
    assert_eq!((s.broadcast_frames, s.peers_repointed), (1, 2));
    assert_eq!(s.rx_dropped.get(RxDrop::OtherHost), 2, "{s:?}");
    assert_eq!(t.peer_address_stats().repointed, 2);
    let json = counters.to_json();
    assert_eq!(json["tx"]["broadcast_frames"], 1);
    assert_eq!(json["rx"]["dropped"]["other_host"], 2);
}

/// The port's set-up from the file: every node's MAC and address, and a
/// node started on a listed replacement machine takes that machine's MAC.
fn addresses_come_from_the_file(config: &ClusterConfig) {
    let cfg = dpdk_config(config, 1).expect("a DPDK node");
    assert_eq!(cfg.device, "net_ring0");
    assert_eq!(cfg.mbufs, 2047);
    assert_eq!(cfg.local, "10.0.0.2:7100".parse().unwrap());
    assert_eq!(cfg.mac, Some(MacAddr([2, 0, 0, 0, 0, 2])));
    let peers: Vec<_> = cfg
        .peers
        .iter()
        .map(|p| (p.mac.0[5], p.addr.to_string()))
        .collect();
    assert_eq!(
        peers,
        [
            (1, "10.0.0.1:7100".into()),
            (2, "10.0.0.2:7100".into()),
            (3, "10.0.0.3:7100".into())
        ]
    );
    let moved = config
        .clone()
        .with_node_moved(1, Some("10.0.0.9:7100".parse().unwrap()), None)
        .expect("a free address");
    let cfg = dpdk_config(&moved, 1).expect("a DPDK node");
    assert_eq!(cfg.local, "10.0.0.9:7100".parse().unwrap());
    assert_eq!(
        cfg.mac,
        Some(MacAddr([2, 0, 0, 0, 0, 9])),
        "the neighbour's MAC"
    );
}
