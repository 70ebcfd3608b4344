//! The UDP transport over loopback: bursts between two and three endpoints,
//! the MTU edge, strangers, send errors, a full transmit ring and a receiver
//! whose socket buffer overflows. Every endpoint binds 127.0.0.1 port 0; every
//! wait is a loop bounded by an iteration count and a deadline.
#![cfg(target_os = "linux")]

use splitkv_nic::net::udp::{
    udp_loopback_network, UdpConfig, UdpError, UdpTransport, UDP_BATCH_MAX, UDP_MTU_DEFAULT,
    UDP_MTU_MAX, UDP_PEERS_MAX, UDP_TX_BUFFERS,
};
use splitkv_nic::net::{PeerAddressError, PeerAddressStats, Transport, TxPacket};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// Longest wait for packets that should already be in flight.
const WAIT: Duration = Duration::from_secs(5);
/// Most polls in one wait (the deadline usually ends it first).
const POLLS_MAX: usize = 1_000_000;

/// Polls `ep` until `want` packets were lent or the wait ends; returns them.
fn receive(ep: &mut UdpTransport, want: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let deadline = Instant::now() + WAIT;
    for _ in 0..POLLS_MAX {
        if got.len() >= want || Instant::now() > deadline {
            break;
        }
        if ep.rx_burst(0, 64, &mut |p| got.push(p.to_vec())) == 0 {
            std::thread::yield_now();
        }
    }
    got
}

/// Polls `ep` for `quiet` and returns whatever arrived (to show nothing more does).
fn receive_for(ep: &mut UdpTransport, quiet: Duration) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let end = Instant::now() + quiet;
    for _ in 0..POLLS_MAX {
        if Instant::now() > end {
            break;
        }
        if ep.rx_burst(0, 64, &mut |p| got.push(p.to_vec())) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    got
}

/// A packet naming its sender and sequence number, padded to `len` bytes.
fn tagged(src: u8, seq: u32, len: usize) -> Vec<u8> {
    let mut p = vec![src; len.max(5)];
    p[1..5].copy_from_slice(&seq.to_le_bytes());
    p
}

fn seq_of(p: &[u8]) -> u32 {
    u32::from_le_bytes(p[1..5].try_into().unwrap())
}

/// Offers `packets` to `ep` in bursts of `UDP_BATCH_MAX`, flushing after each.
fn send_all(ep: &mut UdpTransport, dst: u16, packets: &[Vec<u8>]) {
    for chunk in packets.chunks(UDP_BATCH_MAX) {
        let burst: Vec<TxPacket<'_>> = chunk.iter().map(|b| TxPacket { dst, bytes: b }).collect();
        assert_eq!(ep.tx_burst(0, &burst), burst.len());
        ep.tx_flush(0);
    }
}

#[test]
fn two_endpoints_exchange_bursts_in_order() {
    let mut ends = udp_loopback_network(2, UDP_MTU_DEFAULT).unwrap();
    assert!(ends[0].is_lossy());
    assert_eq!(ends[0].mtu(), UDP_MTU_DEFAULT);
    let n = 20 * UDP_BATCH_MAX;
    for (me, peer) in [(0usize, 1u16), (1, 0)] {
        let packets: Vec<_> = (0..n as u32).map(|s| tagged(me as u8, s, 100)).collect();
        send_all(&mut ends[me], peer, &packets);
    }
    for (me, end) in ends.iter_mut().enumerate() {
        let got = receive(end, n);
        assert_eq!(got.len(), n, "endpoint {me} got every packet");
        let seqs: Vec<u32> = got.iter().map(|p| seq_of(p)).collect();
        assert_eq!(
            seqs,
            (0..n as u32).collect::<Vec<_>>(),
            "in order on loopback"
        );
        assert!(got.iter().all(|p| p[0] == (1 - me) as u8 && p.len() == 100));
        let s = end.stats();
        assert_eq!((s.packets_sent, s.bytes_sent), (n as u64, 100 * n as u64));
        assert_eq!(
            (s.packets_received, s.bytes_received),
            (n as u64, 100 * n as u64)
        );
        assert!(
            s.sendmmsg_calls <= (n / UDP_BATCH_MAX) as u64 + 1,
            "one sendmmsg per burst, got {}",
            s.sendmmsg_calls
        );
        assert_eq!(end.tx_queued(), 0);
    }
}

#[test]
fn three_endpoints_each_hear_both_peers() {
    let mut ends = udp_loopback_network(3, UDP_MTU_DEFAULT).unwrap();
    let n = 5 * UDP_BATCH_MAX;
    for (me, end) in ends.iter_mut().enumerate() {
        for peer in (0..3u16).filter(|&p| p as usize != me) {
            let packets: Vec<_> = (0..n as u32).map(|s| tagged(me as u8, s, 64)).collect();
            send_all(end, peer, &packets);
        }
    }
    for (me, end) in ends.iter_mut().enumerate() {
        let got = receive(end, 2 * n);
        assert_eq!(got.len(), 2 * n);
        for peer in (0..3u8).filter(|&p| p as usize != me) {
            let seqs: Vec<u32> = got
                .iter()
                .filter(|p| p[0] == peer)
                .map(|p| seq_of(p))
                .collect();
            assert_eq!(seqs, (0..n as u32).collect::<Vec<_>>(), "{me} from {peer}");
        }
    }
}

#[test]
fn mtu_sized_packets_pass_larger_ones_are_dropped_and_counted() {
    let mut ends = udp_loopback_network(2, UDP_MTU_DEFAULT).unwrap();
    let fits = tagged(0, 1, UDP_MTU_DEFAULT);
    let too_big = tagged(0, 2, UDP_MTU_DEFAULT + 1);
    let burst = [
        TxPacket {
            dst: 1,
            bytes: &too_big,
        },
        TxPacket {
            dst: 1,
            bytes: &fits,
        },
        TxPacket {
            dst: 9,
            bytes: &fits,
        },
    ];
    assert_eq!(ends[0].tx_burst(0, &burst), 3, "all taken, two dropped");
    ends[0].tx_flush(0);
    let s = ends[0].stats();
    assert_eq!(
        (s.oversized, s.unknown_destination, s.packets_sent),
        (1, 1, 1)
    );
    let got = receive(&mut ends[1], 1);
    assert_eq!(got, vec![fits.clone()]);
    assert!(receive_for(&mut ends[1], Duration::from_millis(50)).is_empty());

    // A jumbo sender and a receiver at the standard MTU: the receiver drops
    // (and counts) what it cannot hold whole.
    let mut jumbo = UdpTransport::bind(UdpConfig::loopback().with_mtu(UDP_MTU_MAX)).unwrap();
    let mut small = UdpTransport::bind(UdpConfig::loopback()).unwrap();
    let addrs = [jumbo.local_addr(), small.local_addr()];
    jumbo.set_peers(&addrs).unwrap();
    small.set_peers(&addrs).unwrap();
    let big = tagged(0, 3, UDP_MTU_MAX);
    let burst = [
        TxPacket {
            dst: 1,
            bytes: &big,
        },
        TxPacket {
            dst: 1,
            bytes: &fits,
        },
    ];
    assert_eq!(jumbo.tx_burst(0, &burst), 2);
    jumbo.tx_flush(0);
    assert_eq!(
        jumbo.stats().packets_sent,
        2,
        "9000 B leaves a jumbo endpoint"
    );
    let got = receive(&mut small, 1);
    assert_eq!(got, vec![fits]);
    assert_eq!(small.stats().truncated, 1);
}

#[test]
fn strangers_are_dropped_counted_and_disturb_no_peer() {
    let mut ends = udp_loopback_network(3, UDP_MTU_DEFAULT).unwrap();
    let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
    let target = ends[1].local_addr();
    let n = 100;
    let packets: Vec<_> = (0..n as u32).map(|s| tagged(0, s, 200)).collect();
    for (i, p) in packets.iter().enumerate() {
        stranger.send_to(&[0xEE; 300], target).unwrap();
        send_all(&mut ends[0], 1, std::slice::from_ref(p));
        if i % 10 == 0 {
            send_all(&mut ends[2], 1, &[tagged(2, i as u32, 50)]);
        }
    }
    let got = receive(&mut ends[1], n + 10);
    assert_eq!(got.len(), n + 10, "every peer packet arrives");
    assert!(
        got.iter().all(|p| p[0] != 0xEE),
        "no stranger bytes are lent"
    );
    let from0: Vec<u32> = got
        .iter()
        .filter(|p| p[0] == 0)
        .map(|p| seq_of(p))
        .collect();
    assert_eq!(from0, (0..n as u32).collect::<Vec<_>>());
    // Strangers interleaved with the peers' packets were all read by now,
    // except possibly the ones behind the last peer packet.
    receive_for(&mut ends[1], Duration::from_millis(50));
    assert_eq!(ends[1].stats().strangers, n as u64);
    assert_eq!(ends[1].stats().packets_received, (n + 10) as u64);
}

/// A replacement machine for a dead node: node 1 moves from
/// endpoint `old` to endpoint `new`; node 0 sends to the new one, takes its
/// packets, and drops and counts the packets still coming from the old
/// address (apart from strangers); bad moves are typed errors that change
/// nothing; moving back makes the other address the former one.
#[test]
fn a_repointed_peer_is_reached_at_its_new_address_and_its_former_one_is_dropped_and_counted() {
    let mut ends = udp_loopback_network(2, UDP_MTU_DEFAULT).unwrap();
    let mut old = ends.pop().unwrap();
    let mut a = ends.pop().unwrap();
    let mut new = UdpTransport::bind(UdpConfig::loopback()).unwrap();
    new.set_peers(&[a.local_addr(), new.local_addr()]).unwrap();
    let (old_addr, new_addr) = (old.local_addr(), new.local_addr());
    assert_eq!(a.set_peer_address(1, new_addr), Ok(true));
    assert_eq!(a.set_peer_address(1, new_addr), Ok(false), "no change");
    let refused = [
        (
            1,
            a.local_addr(),
            PeerAddressError::Taken {
                addr: a.local_addr(),
                other: 0,
            },
        ),
        (
            2,
            old_addr,
            PeerAddressError::UnknownNode { node: 2, peers: 2 },
        ),
    ];
    for (node, addr, want) in refused {
        assert_eq!(a.set_peer_address(node, addr), Err(want));
    }
    let v6: SocketAddr = "[::1]:7000".parse().unwrap();
    assert!(matches!(
        a.set_peer_address(1, v6),
        Err(PeerAddressError::FamilyMismatch { .. })
    ));
    // The old machine still sends (an earlier incarnation): dropped, counted.
    send_all(
        &mut old,
        0,
        &[tagged(1, 0, 64), tagged(1, 1, 64), tagged(1, 2, 64)],
    );
    send_all(&mut new, 0, &[tagged(1, 7, 64)]);
    let got = receive(&mut a, 1);
    assert_eq!(got.iter().map(|p| seq_of(p)).collect::<Vec<_>>(), vec![7]);
    assert!(receive_for(&mut a, Duration::from_millis(50)).is_empty());
    assert_eq!((a.stats().stale_address, a.stats().strangers), (3, 0));
    let want = PeerAddressStats {
        repointed: 1,
        stale_address_drops: 3,
    };
    assert_eq!(a.peer_address_stats(), want);
    // Node 0's packets for node 1 go to the new address only.
    send_all(&mut a, 1, &[tagged(0, 9, 64)]);
    assert_eq!(receive(&mut new, 1).len(), 1);
    assert!(receive_for(&mut old, Duration::from_millis(50)).is_empty());
    // Moving back: the new address is the former one now.
    assert_eq!(a.set_peer_address(1, old_addr), Ok(true));
    send_all(&mut old, 0, &[tagged(1, 3, 64)]);
    send_all(&mut new, 0, &[tagged(1, 8, 64)]);
    let got = receive(&mut a, 1);
    assert_eq!(got.iter().map(|p| seq_of(p)).collect::<Vec<_>>(), vec![3]);
    receive_for(&mut a, Duration::from_millis(50));
    assert_eq!((a.stats().stale_address, a.stats().peers_repointed), (4, 2));
}

#[test]
fn a_refused_datagram_is_dropped_alone_and_counted() {
    let mut ends = udp_loopback_network(3, UDP_MTU_DEFAULT).unwrap();
    // Node 1's address is the limited broadcast address, which a socket
    // without SO_BROADCAST may not send to: the kernel refuses each datagram.
    let peers: Vec<SocketAddr> = vec![
        ends[0].local_addr(),
        "255.255.255.255:9".parse().unwrap(),
        ends[2].local_addr(),
    ];
    ends[0].set_peers(&peers).unwrap();
    let packets: Vec<_> = (0..64u32).map(|s| tagged(0, s, 80)).collect();
    let burst: Vec<TxPacket<'_>> = packets
        .iter()
        .enumerate()
        .map(|(i, b)| TxPacket {
            dst: if i % 4 == 0 { 1 } else { 2 },
            bytes: b,
        })
        .collect();
    for chunk in burst.chunks(UDP_BATCH_MAX) {
        assert_eq!(ends[0].tx_burst(0, chunk), chunk.len());
    }
    ends[0].tx_flush(0);
    let s = ends[0].stats();
    assert_eq!(
        (s.send_errors, s.packets_sent, s.congestion_events),
        (16, 48, 0)
    );
    assert_eq!(ends[0].tx_queued(), 0);
    let got = receive(&mut ends[2], 48);
    let seqs: Vec<u32> = got.iter().map(|p| seq_of(p)).collect();
    assert_eq!(seqs, (0..64).filter(|s| s % 4 != 0).collect::<Vec<_>>());
}

#[test]
fn a_full_transmit_ring_takes_fewer_and_a_flush_frees_it() {
    let mut ends = udp_loopback_network(2, UDP_MTU_DEFAULT).unwrap();
    let bytes = tagged(0, 0, 32);
    let burst = vec![
        TxPacket {
            dst: 1,
            bytes: &bytes
        };
        2 * UDP_TX_BUFFERS
    ];
    assert_eq!(ends[0].tx_burst(0, &burst), UDP_TX_BUFFERS);
    assert_eq!(ends[0].tx_burst(0, &burst), 0, "nothing more fits");
    assert_eq!(ends[0].tx_queued(), UDP_TX_BUFFERS);
    ends[0].tx_flush(0);
    assert_eq!(
        ends[0].tx_queued(),
        0,
        "loopback takes a full ring in one flush"
    );
    assert_eq!(ends[0].tx_burst(0, &burst[..10]), 10);
}

#[test]
fn an_overflowing_receiver_loses_only_what_the_kernel_counts() {
    let mut ends = udp_loopback_network(2, UDP_MTU_DEFAULT).unwrap();
    let mut small =
        UdpTransport::bind(UdpConfig::loopback().with_socket_bytes(4096, 4096)).unwrap();
    let addrs = [ends[0].local_addr(), small.local_addr()];
    small.set_peers(&addrs).unwrap();
    ends[0].set_peers(&addrs).unwrap();
    assert!(
        small.socket_bytes().1 < 64 * 1024,
        "{:?}",
        small.socket_bytes()
    );
    let n = 4000u32;
    let packets: Vec<_> = (0..n).map(|s| tagged(0, s, UDP_MTU_DEFAULT)).collect();
    send_all(&mut ends[0], 1, &packets);
    let s = ends[0].stats();
    assert_eq!(
        s.packets_sent + s.send_errors + ends[0].tx_queued() as u64,
        n as u64
    );
    let mut got = receive_for(&mut small, Duration::from_millis(100));
    // One more packet, sent once the receiver is empty, reports the kernel's
    // final drop count.
    send_all(&mut ends[0], 1, &[tagged(0, n, 10)]);
    got.extend(receive(&mut small, 1));
    let r = small.stats();
    let sent = ends[0].stats().packets_sent;
    assert!(r.kernel_rx_drops > 0, "the tiny buffer overflowed");
    assert_eq!(r.packets_received, got.len() as u64);
    assert!(
        got.len() as u64 + r.kernel_rx_drops <= sent,
        "received {} + dropped {} > sent {sent}",
        got.len(),
        r.kernel_rx_drops
    );
    assert!(
        got.len() as u64 + r.kernel_rx_drops >= sent - sent / 100,
        "received {} + dropped {} leaves more than 1% of {sent} unaccounted",
        got.len(),
        r.kernel_rx_drops
    );
    let seqs: Vec<u32> = got.iter().map(|p| seq_of(p)).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "survivors keep their order"
    );
}

#[test]
fn bad_configurations_are_typed_errors() {
    let lo: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let bad_mtu = UdpTransport::bind(UdpConfig::loopback().with_mtu(UDP_MTU_MAX + 1));
    assert!(matches!(bad_mtu, Err(UdpError::BadMtu { mtu, .. }) if mtu == UDP_MTU_MAX + 1));
    let bad_buf = UdpTransport::bind(UdpConfig::loopback().with_socket_bytes(0, 4096));
    assert!(matches!(
        bad_buf,
        Err(UdpError::BadBufferSize {
            option: "SO_SNDBUF",
            ..
        })
    ));
    let many: Vec<SocketAddr> = (0..=UDP_PEERS_MAX as u16)
        .map(|i| SocketAddr::from(([127, 0, 0, 1], 1000 + i)))
        .collect();
    let too_many = UdpTransport::bind(UdpConfig::new(lo, many));
    assert!(matches!(too_many, Err(UdpError::TooManyPeers { .. })));
    let v6: SocketAddr = "[::1]:7000".parse().unwrap();
    let mixed = UdpTransport::bind(UdpConfig::new(lo, vec![v6]));
    assert!(matches!(mixed, Err(UdpError::FamilyMismatch { .. })));
    let a: SocketAddr = "127.0.0.1:7000".parse().unwrap();
    let dup = UdpTransport::bind(UdpConfig::new(lo, vec![a, a]));
    assert!(matches!(
        dup,
        Err(UdpError::DuplicatePeer {
            first: 0,
            second: 1,
            ..
        })
    ));
    let taken = UdpTransport::bind(UdpConfig::loopback()).unwrap();
    let clash = UdpTransport::bind(UdpConfig::new(taken.local_addr(), vec![]));
    match clash {
        Err(e @ UdpError::Bind { addr, .. }) => {
            assert_eq!(addr, taken.local_addr());
            assert!(e.to_string().contains(&addr.to_string()), "{e}");
        }
        other => panic!("expected a bind error, got {other:?}"),
    }
}

#[test]
fn ipv6_loopback_works_where_the_machine_has_it() {
    let cfg = |peers| UdpConfig::new("[::1]:0".parse().unwrap(), peers);
    let mut a = match UdpTransport::bind(cfg(vec![])) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("skipped: no IPv6 loopback here ({e})");
            return;
        }
    };
    let mut b = UdpTransport::bind(cfg(vec![])).unwrap();
    assert_eq!(a.mtu(), splitkv_nic::net::udp::UDP_MTU_IPV6_DEFAULT);
    let addrs = [a.local_addr(), b.local_addr()];
    a.set_peers(&addrs).unwrap();
    b.set_peers(&addrs).unwrap();
    let packets: Vec<_> = (0..40u32).map(|s| tagged(0, s, 300)).collect();
    send_all(&mut a, 1, &packets);
    let got = receive(&mut b, 40);
    assert_eq!(got, packets);
    assert_eq!(b.stats().strangers, 0);
}

#[test]
fn packets_queued_for_a_peer_that_loses_its_address_are_dropped_and_counted() {
    let mut ends = udp_loopback_network(3, UDP_MTU_DEFAULT).unwrap();
    let packets: Vec<_> = (0..6u32).map(|s| tagged(0, s, 40)).collect();
    let burst: Vec<TxPacket<'_>> = packets
        .iter()
        .enumerate()
        .map(|(i, b)| TxPacket {
            dst: 1 + (i % 2) as u16,
            bytes: b,
        })
        .collect();
    assert_eq!(ends[0].tx_burst(0, &burst), 6);
    let two = [ends[0].local_addr(), ends[1].local_addr()];
    ends[0].set_peers(&two).unwrap();
    ends[0].tx_flush(0);
    let s = ends[0].stats();
    assert_eq!((s.unknown_destination, s.packets_sent), (3, 3));
    let seqs: Vec<u32> = receive(&mut ends[1], 3).iter().map(|p| seq_of(p)).collect();
    assert_eq!(seqs, vec![0, 2, 4]);
}
