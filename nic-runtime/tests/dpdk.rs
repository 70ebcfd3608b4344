//! The DPDK transport on virtual devices, no hardware: two endpoints in one
//! process on ports joined back to back by rings (net_ring), exchanging
//! single packets and bursts; the send queue and pool limits; malformed,
//! truncated, chained and misaddressed frames injected and counted by
//! reason; two stacks filling mbufs in place (copies per packet counted); peer re-pointing; EAL's typed errors (in child processes, since
//! EAL runs once per process); two processes exchanging bursts over
//! net_memif (a server and a client child, point to point); and three
//! processes in network namespaces exchanging packets over net_af_packet on
//! veths joined by a bridge (where the machine allows namespaces).
//!
//! EAL runs once per process: this binary has one test function, and the
//! scenarios are steps of it. net_ring moves mbufs synchronously (what one
//! port sends is in the other's ring when the flush returns), so every
//! receive is a bounded number of polls.

mod dpdk_af_packet;
mod dpdk_in_place;
mod dpdk_memif;

use splitkv_nic::net::dpdk::frame::{write_headers, FrameEnd};
use splitkv_nic::net::dpdk::{
    dpdk_ring_pair, DpdkConfig, DpdkError, DpdkPeer, DpdkTransport, Eal, EalError, MacAddr, RxDrop,
    DPDK_BURST_MAX, DPDK_MBUFS_DEFAULT, DPDK_MBUFS_MIN, DPDK_MTU_DEFAULT, DPDK_NEIGHBOURS_MAX,
    DPDK_TX_QUEUED_MAX, FRAME_HEADER_BYTES,
};
use splitkv_nic::net::{send_ready, OutPacket, PeerAddressError, Transport, TxPacket};
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// EAL arguments of this test (and its children): no PCI scan, no
/// hugepages, no shared files (`--no-shconf`: DPDK 22.11's `--in-memory`
/// refuses `--no-huge`), no telemetry thread, one lcore.
const EAL_ARGS: &[&str] = &[
    "--no-telemetry",
    "--no-shconf",
    "--no-pci",
    "--no-huge",
    "-m",
    "256",
    "-l",
    "0",
    "--log-level=lib.eal:error",
];
/// This file's one test function (children run it again).
const TEST_NAME: &str = "dpdk_transport_on_virtual_devices";
/// Set in a child process: which step it runs.
const CHILD_ENV: &str = "SPLITKV_DPDK_TEST_CHILD";
/// Most polls while waiting for packets already in the peer's ring.
const POLLS_MAX: usize = 100;
/// Longest a child process exchanging packets runs (links come up in
/// milliseconds).
const CHILD_WAIT: Duration = Duration::from_secs(20);

/// Node `last - 1`'s address: MAC 02:00:00:00:00:`last`, 10.0.0.`last`:7000.
fn peer(last: u8) -> DpdkPeer {
    DpdkPeer {
        mac: MacAddr([2, 0, 0, 0, 0, last]),
        addr: SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, last), 7000),
    }
}

/// Two endpoints, node 0 (10.0.0.1) and node 1 (10.0.0.2), on a fresh ring
/// pair, with pools of `mbufs`.
fn pair(eal: &Eal, mbufs: u32) -> (DpdkTransport, DpdkTransport) {
    let names = dpdk_ring_pair(eal).expect("ring pair");
    let peers = vec![peer(1), peer(2)];
    let mk = |i: usize| {
        let mut cfg =
            DpdkConfig::new(names[i].clone(), peers[i].addr, peers.clone()).with_mac(peers[i].mac);
        cfg.mbufs = mbufs;
        DpdkTransport::new(eal, cfg).expect("transport")
    };
    (mk(0), mk(1))
}

/// Polls `ep` until `want` packets were lent (or POLLS_MAX polls); returns them.
fn receive(ep: &mut DpdkTransport, want: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    for _ in 0..POLLS_MAX {
        if got.len() >= want {
            break;
        }
        ep.rx_burst(0, 64, &mut |p| got.push(p.to_vec()));
    }
    got
}

/// A packet naming its sequence number, `len` bytes.
fn tagged(seq: u32, len: usize) -> Vec<u8> {
    let mut p = vec![seq as u8; len.max(4)];
    p[..4].copy_from_slice(&seq.to_le_bytes());
    p
}

fn send(ep: &mut DpdkTransport, dst: u16, packets: &[Vec<u8>]) -> usize {
    let mut ready: VecDeque<OutPacket> = packets
        .iter()
        .map(|b| OutPacket {
            dst,
            bytes: b.clone(),
        })
        .collect();
    let n = send_ready(ep, 0, &mut ready, drop);
    ep.tx_flush(0);
    n
}

/// A well-formed frame from `src` to `dst` carrying `payload`.
fn frame(src: &DpdkPeer, dst: &DpdkPeer, payload: &[u8]) -> Vec<u8> {
    let end = |p: &DpdkPeer| FrameEnd {
        mac: p.mac,
        addr: p.addr,
    };
    let mut h = [0u8; FRAME_HEADER_BYTES];
    write_headers(&mut h, &end(src), &end(dst), payload.len());
    let mut f = h.to_vec();
    f.extend_from_slice(payload);
    f
}

#[test]
fn dpdk_transport_on_virtual_devices() {
    if let Ok(which) = std::env::var(CHILD_ENV) {
        if let Some(i) = which.strip_prefix("af-packet-") {
            return dpdk_af_packet::af_packet_child(i.parse().expect("a node index"));
        }
        return match which.strip_prefix("memif-") {
            Some(role) => dpdk_memif::memif_child(role),
            None => eal_failure_child(&which),
        };
    }
    let af_packet = dpdk_af_packet::AfPacketRun::start(TEST_NAME, CHILD_ENV);
    let memif = dpdk_memif::start_memif_children();
    eal_failures_are_typed();
    let eal = Eal::init(EAL_ARGS).expect("EAL on virtual devices");
    eal_runs_once(eal);
    no_device(eal);
    let (mut a, mut b) = pair(eal, DPDK_MBUFS_DEFAULT);
    single_packets_both_ways(&mut a, &mut b);
    bursts_arrive_whole_and_in_order(&mut a, &mut b);
    the_send_queue_is_bounded(&mut a, &mut b);
    bad_frames_are_dropped_by_reason(&mut a, &mut b);
    peers_are_repointed(&mut a, &mut b);
    port_counters_agree(&a, &b);
    let (mut c, mut d) = pair(eal, DPDK_MBUFS_MIN);
    an_empty_pool_is_congestion(&mut c, &mut d);
    let (e, f) = pair(eal, DPDK_MBUFS_DEFAULT);
    dpdk_in_place::stacks_fill_mbufs_in_place(e, f);
    dpdk_memif::two_processes_over_memif(memif);
    match af_packet {
        Ok(run) => dpdk_af_packet::three_namespaced_processes_over_af_packet(run),
        Err(dpdk_af_packet::Refused(why)) => {
            eprintln!("dpdk test: the net_af_packet step is skipped: {why}")
        }
    }
}

fn eal_runs_once(eal: &'static Eal) {
    let again = Eal::init(EAL_ARGS).expect("same arguments: the same EAL");
    assert!(std::ptr::eq(eal, again));
    match Eal::init(&["--no-telemetry"]) {
        Err(EalError::OtherArguments { first, .. }) => assert_eq!(first, EAL_ARGS),
        other => panic!("other arguments must be refused, got {other:?}"),
    }
}

fn no_device(eal: &Eal) {
    let cfg = DpdkConfig::new("net_nothing9", peer(1).addr, vec![peer(1)]);
    match DpdkTransport::new(eal, cfg) {
        Err(DpdkError::NoDevice { device, .. }) => assert_eq!(device, "net_nothing9"),
        other => panic!("expected NoDevice, got {other:?}"),
    }
    // Bad configurations are refused before any device is looked up.
    let base = DpdkConfig::new("net_nothing9", peer(1).addr, vec![peer(1), peer(2)]);
    type Expect = fn(&DpdkError) -> bool;
    let bad: Vec<(DpdkConfig, Expect)> = vec![
        (base.clone().with_mtu(10), |e| {
            matches!(e, DpdkError::BadMtu { mtu: 10, .. })
        }),
        (
            DpdkConfig {
                mbufs: 10,
                ..base.clone()
            },
            |e| matches!(e, DpdkError::BadMbufs { mbufs: 10, .. }),
        ),
        (
            DpdkConfig {
                tx_descriptors: 0,
                ..base.clone()
            },
            |e| matches!(e, DpdkError::BadDescriptors { what: "TX", .. }),
        ),
        (
            DpdkConfig {
                local: SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 0),
                ..base.clone()
            },
            |e| matches!(e, DpdkError::NoLocalPort { .. }),
        ),
        (
            DpdkConfig {
                peers: (1..=17).map(peer).collect(),
                ..base.clone()
            },
            |e| matches!(e, DpdkError::TooManyPeers { peers: 17, .. }),
        ),
        (
            DpdkConfig {
                peers: vec![peer(1), peer(2), peer(1)],
                ..base.clone()
            },
            |e| {
                matches!(
                    e,
                    DpdkError::DuplicatePeer {
                        first: 0,
                        second: 2,
                        ..
                    }
                )
            },
        ),
    ];
    for (i, (cfg, want)) in bad.into_iter().enumerate() {
        match DpdkTransport::new(eal, cfg) {
            Err(e) => assert!(want(&e), "case {i}: {e}"),
            Ok(_) => panic!("case {i}: a bad configuration was accepted"),
        }
    }
}

fn single_packets_both_ways(a: &mut DpdkTransport, b: &mut DpdkTransport) {
    assert_eq!(a.mtu(), DPDK_MTU_DEFAULT);
    assert_eq!(
        a.tx_burst(
            0,
            &[TxPacket {
                dst: 1,
                bytes: b"ping"
            }]
        ),
        1
    );
    assert_eq!(a.tx_queued(), 1);
    a.tx_flush(0);
    assert_eq!(a.tx_queued(), 0);
    assert_eq!(receive(b, 1), vec![b"ping".to_vec()]);
    assert_eq!(
        b.tx_burst(
            0,
            &[TxPacket {
                dst: 0,
                bytes: b"pong"
            }]
        ),
        1
    );
    b.tx_flush(0);
    assert_eq!(receive(a, 1), vec![b"pong".to_vec()]);
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!(
        (sa.packets_sent, sa.bytes_sent, sa.packets_received),
        (1, 4, 1)
    );
    assert_eq!(
        (sb.packets_sent, sb.packets_received, sb.bytes_received),
        (1, 1, 4)
    );
    assert_eq!(sa.rx_dropped.total() + sb.rx_dropped.total(), 0);
}

fn bursts_arrive_whole_and_in_order(a: &mut DpdkTransport, b: &mut DpdkTransport) {
    // 16 B, 64 B and MTU-sized packets, 100 of them: four bursts of ≤ 32.
    let sizes = [16, 64, DPDK_MTU_DEFAULT];
    let packets: Vec<Vec<u8>> = (0..100).map(|i| tagged(i, sizes[i as usize % 3])).collect();
    let before = a.stats().tx_bursts;
    assert_eq!(send(a, 1, &packets), 100);
    assert_eq!(a.stats().tx_bursts - before, 4, "bursts of at most 32");
    let rx_before = b.stats().rx_bursts;
    let mut got = Vec::new();
    // One rx_burst call lends at most its `max`, here exactly one burst.
    let lent = b.rx_burst(0, DPDK_BURST_MAX, &mut |p| got.push(p.to_vec()));
    assert_eq!(lent, DPDK_BURST_MAX);
    assert_eq!(b.stats().rx_bursts - rx_before, 1);
    got.extend(receive(b, 100 - DPDK_BURST_MAX));
    assert_eq!(got, packets, "every packet, whole and in order");
    // Oversized and unknown-destination packets are taken and dropped.
    let big = vec![0u8; DPDK_MTU_DEFAULT + 1];
    let burst = [
        TxPacket {
            dst: 1,
            bytes: &big,
        },
        TxPacket {
            dst: 7,
            bytes: b"x",
        },
        TxPacket {
            dst: 1,
            bytes: b"ok",
        },
    ];
    assert_eq!(a.tx_burst(0, &burst), 3);
    a.tx_flush(0);
    assert_eq!((a.stats().oversized, a.stats().unknown_destination), (1, 1));
    assert_eq!(receive(b, 1), vec![b"ok".to_vec()]);
}

fn the_send_queue_is_bounded(a: &mut DpdkTransport, b: &mut DpdkTransport) {
    let p = tagged(0, 16);
    let burst = vec![TxPacket { dst: 1, bytes: &p }; 100];
    let mut taken = 0;
    for _ in 0..DPDK_TX_QUEUED_MAX {
        let n = a.tx_burst(0, &burst);
        taken += n;
        if n < burst.len() {
            break;
        }
    }
    assert_eq!(taken, DPDK_TX_QUEUED_MAX, "a full queue takes no more");
    assert_eq!(a.tx_burst(0, &burst[..1]), 0);
    a.tx_flush(0);
    assert_eq!(a.tx_queued(), 0);
    assert_eq!(receive(b, DPDK_TX_QUEUED_MAX).len(), DPDK_TX_QUEUED_MAX);
}

fn bad_frames_are_dropped_by_reason(a: &mut DpdkTransport, b: &mut DpdkTransport) {
    let (pa, pb) = (peer(1), peer(2));
    let good = frame(&pa, &pb, b"injected ok");
    let mut not_ipv4 = good.clone();
    not_ipv4[12..14].copy_from_slice(&[0x08, 0x06]); // ARP
    let mut bad_checksum = good.clone();
    bad_checksum[24] ^= 0xff;
    let other_port = frame(
        &pa,
        &DpdkPeer {
            addr: SocketAddrV4::new(*pb.addr.ip(), 7001),
            ..pb
        },
        b"p",
    );
    let other_host = frame(&pa, &peer(3), b"h");
    let stranger = frame(&peer(4), &pb, b"s");
    let oversized = frame(&pa, &pb, &vec![1u8; DPDK_MTU_DEFAULT + 1]);
    let cases: Vec<(RxDrop, Vec<&[u8]>)> = vec![
        (RxDrop::Truncated, vec![&good[..20]]),
        (RxDrop::Truncated, vec![&good[..good.len() - 1]]),
        (RxDrop::NotIpv4, vec![&not_ipv4]),
        (RxDrop::BadIpHeader, vec![&bad_checksum]),
        (RxDrop::OtherPort, vec![&other_port]),
        (RxDrop::OtherHost, vec![&other_host]),
        (RxDrop::Stranger, vec![&stranger]),
        (RxDrop::Oversized, vec![&oversized]),
        (RxDrop::Chained, vec![&good[..30], &good[30..]]),
    ];
    let before = b.stats().rx_dropped;
    for (reason, segments) in &cases {
        assert!(a.inject_frame(segments), "{reason:?} queued");
        a.tx_flush(0);
        let lent = b.rx_burst(0, 64, &mut |p| panic!("{reason:?}: lent {} B", p.len()));
        assert_eq!(lent, 0);
    }
    let after = b.stats().rx_dropped;
    for reason in RxDrop::ALL {
        let want = cases.iter().filter(|(r, _)| *r == reason).count() as u64;
        assert_eq!(after.get(reason) - before.get(reason), want, "{reason:?}");
    }
    // The well-formed injected frame still arrives, and so do packets.
    assert!(a.inject_frame(&[&good]));
    a.tx_flush(0);
    assert_eq!(receive(b, 1), vec![b"injected ok".to_vec()]);
    assert_eq!(
        a.mbufs_available() + b.mbufs_available(),
        2 * DPDK_MBUFS_DEFAULT,
        "no mbuf leaked"
    );
}

fn peers_are_repointed(a: &mut DpdkTransport, b: &mut DpdkTransport) {
    let new_a = SocketAddr::from(([10, 0, 0, 9], 7000));
    assert!(matches!(
        b.set_peer_address(5, new_a),
        Err(PeerAddressError::UnknownNode { node: 5, peers: 2 })
    ));
    assert!(matches!(
        b.set_peer_address(0, "[::1]:7000".parse().unwrap()),
        Err(PeerAddressError::FamilyMismatch { .. })
    ));
    assert!(matches!(
        b.set_peer_address(0, SocketAddr::V4(peer(2).addr)),
        Err(PeerAddressError::Taken { other: 1, .. })
    ));
    assert_eq!(
        b.set_peer_address(0, SocketAddr::V4(peer(1).addr)),
        Ok(false)
    );
    assert_eq!(b.set_peer_address(0, new_a), Ok(true));
    assert_eq!(b.peer_address_stats().repointed, 1);
    // Frames from node 0's former address are stale now.
    assert_eq!(
        a.tx_burst(
            0,
            &[TxPacket {
                dst: 1,
                bytes: b"old"
            }]
        ),
        1
    );
    a.tx_flush(0);
    assert!(receive(b, 1).is_empty());
    assert_eq!(b.peer_address_stats().stale_address_drops, 1);
    // No MAC is known for 10.0.0.9: the frame goes to broadcast, and `a`
    // (still 10.0.0.1) drops it as for another host.
    let other_host = a.stats().rx_dropped.get(RxDrop::OtherHost);
    assert_eq!(
        b.tx_burst(
            0,
            &[TxPacket {
                dst: 0,
                bytes: b"to 9"
            }]
        ),
        1
    );
    b.tx_flush(0);
    assert_eq!(b.stats().broadcast_frames, 1);
    assert!(receive(a, 1).is_empty());
    assert_eq!(a.stats().rx_dropped.get(RxDrop::OtherHost), other_host + 1);
    // The neighbour table is bounded; an address already in it is updated.
    b.set_neighbour(*peer(1).addr.ip(), MacAddr([2, 9, 9, 9, 9, 9]))
        .unwrap();
    for n in 1..DPDK_NEIGHBOURS_MAX as u8 {
        b.set_neighbour(Ipv4Addr::new(10, 1, 0, n), MacAddr([2, 1, 0, 0, 0, n]))
            .unwrap();
    }
    assert!(matches!(
        b.set_neighbour(Ipv4Addr::new(10, 2, 0, 0), peer(1).mac),
        Err(DpdkError::TooManyNeighbours { .. })
    ));
    // Back to the old address with its MAC from the neighbour table.
    b.set_neighbour(*peer(1).addr.ip(), peer(1).mac).unwrap();
    assert_eq!(
        b.set_peer_address(0, SocketAddr::V4(peer(1).addr)),
        Ok(true)
    );
    assert_eq!(
        b.tx_burst(
            0,
            &[TxPacket {
                dst: 0,
                bytes: b"back"
            }]
        ),
        1
    );
    b.tx_flush(0);
    assert_eq!(receive(a, 1), vec![b"back".to_vec()]);
    assert_eq!(b.stats().broadcast_frames, 1);
}

/// The driver's counters match the transport's: every frame one port sent
/// the other received, and each was lent or dropped with a reason.
fn port_counters_agree(a: &DpdkTransport, b: &DpdkTransport) {
    for (from, to) in [(a, b), (b, a)] {
        let (sent, got) = (from.port_stats(), to.port_stats());
        assert_eq!(sent.tx_packets, from.stats().packets_sent);
        assert!(sent.tx_packets > 0);
        assert_eq!(got.rx_packets, sent.tx_packets);
        let st = to.stats();
        assert_eq!(got.rx_packets, st.packets_received + st.rx_dropped.total());
        assert_eq!((got.rx_missed, got.rx_no_mbuf, sent.tx_errors), (0, 0, 0));
    }
}

fn an_empty_pool_is_congestion(c: &mut DpdkTransport, d: &mut DpdkTransport) {
    // `d` does not poll: `c`'s mbufs wait in the ring until the pool is empty.
    let p = tagged(1, 64);
    let burst = vec![TxPacket { dst: 1, bytes: &p }; DPDK_BURST_MAX];
    let mut taken = 0;
    for _ in 0..DPDK_MBUFS_MIN as usize {
        let n = c.tx_burst(0, &burst);
        c.tx_flush(0);
        taken += n;
        if n < burst.len() {
            break;
        }
    }
    assert_eq!(c.stats().mempool_empty, 1);
    assert_eq!(c.mbufs_available(), 0);
    assert!(
        taken > DPDK_TX_QUEUED_MAX && taken <= DPDK_MBUFS_MIN as usize,
        "{taken}"
    );
    // Once `d` receives (and frees), `c` sends again.
    assert_eq!(receive(d, taken).len(), taken);
    assert_eq!(c.tx_burst(0, &burst[..1]), 1);
    c.tx_flush(0);
    assert_eq!(receive(d, 1).len(), 1);
}

/// EAL's failures, each in a child process of this binary (EAL runs once
/// per process): unknown arguments; no hugepages (where the machine has
/// none); and a virtual device whose driver refuses its arguments, which EAL
/// only logs, so the port is then missing.
fn eal_failures_are_typed() {
    let hugepages = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("HugePages_Total:"))
        .map_or(0, |n| n.trim().parse::<u64>().unwrap_or(0));
    let children = [
        ("bad-arguments", "BadArguments"),
        (
            "no-hugepages",
            if hugepages == 0 { "Hugepages" } else { "up" },
        ),
        ("bad-device", "NoDevice"),
    ];
    for (which, want) in children {
        let out = child(which, &[])
            .wait_with_output()
            .expect("child test process");
        assert_eq!(reported(&out.stdout, "EAL_CAUSE"), want, "{which}");
    }
}

/// One child's step: prints `EAL_CAUSE=<what happened>;`.
fn eal_failure_child(which: &str) {
    let mut args: Vec<&str> = EAL_ARGS.to_vec();
    match which {
        "bad-arguments" => args.push("--no-such-eal-option"),
        "no-hugepages" => args.retain(|a| *a != "--no-huge" && *a != "-m" && *a != "256"),
        "bad-device" => args.push("--vdev=net_ring0,nodeaction=no:such:ACTION"),
        other => panic!("unknown child {other}"),
    }
    let cause = match Eal::init(&args) {
        Err(EalError::Refused { cause, .. }) => format!("{cause:?}"),
        Err(e) => format!("other: {e}"),
        Ok(eal) => {
            let cfg = DpdkConfig::new("net_ring0", peer(1).addr, vec![peer(1)]);
            match DpdkTransport::new(eal, cfg) {
                Err(DpdkError::NoDevice { .. }) => "NoDevice".to_string(),
                Err(e) => format!("other: {e}"),
                Ok(_) => "up".to_string(),
            }
        }
    };
    println!("EAL_CAUSE={cause};");
}

/// Starts this test binary again as child `which` (stdout piped), with
/// `envs` set.
fn child(which: &str, envs: &[(&str, &str)]) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([TEST_NAME, "--exact", "--nocapture"])
        .env(CHILD_ENV, which)
        .envs(envs.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("child test process")
}

/// What a child printed as `KEY=value;` (DPDK's C output, buffered, may
/// land inside the line).
fn reported(stdout: &[u8], key: &str) -> String {
    let stdout = String::from_utf8_lossy(stdout);
    stdout
        .split(&format!("{key}="))
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_else(|| panic!("no {key} reported:\n{stdout}"))
        .to_string()
}
