//! The transport's own logic on an in-memory device (`fake`): receives
//! kept posted, packets lent after the GRH, send chains with the inline
//! decision and selective signalling, retiring, congestion, refused
//! posts, drops by reason and re-pointing a peer. Every loop is bounded.

use crate::fake::{FakeDevice, LOCAL_QPN};
use splitkv_nic::net::verbs::pool::SlotUse;
use splitkv_nic::net::verbs::{RxDrop, VerbsConfig, VerbsPeer, VerbsTransport};
use splitkv_nic::net::{PeerAddressError, Transport, TxPacket};

const QKEY: u32 = 0x1111_1111;
const INLINE: usize = 64;

fn peer(text: &str) -> VerbsPeer {
    text.parse().unwrap()
}

fn peer1() -> VerbsPeer {
    peer("addr=10.0.0.1:7100,gid=10.0.0.1,qpn=0x101,qkey=0x11111111")
}

fn cfg(recv_depth: u32, send_depth: u32, signal_every: u32) -> VerbsConfig {
    VerbsConfig {
        mtu: 256,
        recv_depth,
        send_depth,
        signal_every,
        peers: vec![None, Some(peer1()), None],
        ..VerbsConfig::default()
    }
}

fn transport(c: VerbsConfig) -> VerbsTransport<FakeDevice> {
    let dev = FakeDevice::new(&c, INLINE);
    VerbsTransport::with_device(c, dev).unwrap()
}

fn rx_all(t: &mut VerbsTransport<FakeDevice>) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    for _ in 0..100 {
        if t.rx_burst(0, 32, &mut |p| got.push(p.to_vec())) == 0 && t.device().recv_done.is_empty()
        {
            break;
        }
    }
    got
}

#[test]
fn receives_are_posted_topped_up_and_lent_after_the_grh() {
    let mut t = transport(cfg(8, 8, 4));
    assert_eq!(t.device().posted_recvs.len(), 8);
    assert_eq!(t.slots_lent(SlotUse::Receive), 8);
    let p1 = peer1();
    for i in 0..5u8 {
        assert!(t.device_mut().deliver(&p1, &[i; 10], Some(QKEY)));
    }
    let got = rx_all(&mut t);
    assert_eq!(got, (0..5u8).map(|i| vec![i; 10]).collect::<Vec<_>>());
    assert_eq!(t.device().posted_recvs.len(), 8, "topped up again");
    assert_eq!(t.slots_lent(SlotUse::Receive), 8);
    assert_eq!(t.stats().rx_packets, 5);
}

#[test]
fn bad_receives_are_dropped_by_reason_and_their_slots_reposted() {
    let mut t = transport(cfg(8, 8, 4));
    let p1 = peer1();
    let stranger = VerbsPeer { qpn: 0x999, ..p1 };
    let dev = t.device_mut();
    assert!(dev.deliver(&p1, b"no qkey", None));
    assert!(dev.deliver(&p1, b"bad qkey", Some(7)));
    assert!(dev.deliver(&stranger, b"who", Some(QKEY)));
    assert!(dev.deliver(&p1, &[0; 300], Some(QKEY))); // past the 256 B MTU
    assert!(dev.deliver(&p1, b"ok", Some(QKEY)));
    // A completion for a slot that was never posted, and an error status.
    dev.recv_done.push_back((10_000, dev.recv_done[0].1));
    let mut flushed = dev.recv_done[0].1;
    flushed.status = 5;
    let slot = dev.posted_recvs.pop_front().unwrap();
    dev.recv_done.push_back((u64::from(slot.0), flushed));
    assert_eq!(rx_all(&mut t), vec![b"ok".to_vec()]);
    let d = t.stats().rx_dropped;
    for (why, n) in [
        (RxDrop::WrongQkey, 2),
        (RxDrop::Stranger, 1),
        (RxDrop::Truncated, 1),
        (RxDrop::BadSlot, 1),
        (RxDrop::ErrorStatus, 1),
    ] {
        assert_eq!(d.get(why), n, "{why:?}");
    }
    assert_eq!(d.total(), 6);
    assert_eq!(t.device().posted_recvs.len(), 8);
    assert_eq!(t.slots_lent(SlotUse::Receive), 8);
}

#[test]
fn sends_are_inline_below_the_limit_signalled_one_in_n_and_retired() {
    let mut t = transport(cfg(4, 16, 4));
    let small = [1u8; INLINE];
    let big = [2u8; INLINE + 1];
    let burst: Vec<TxPacket<'_>> = (0..8)
        .map(|i| TxPacket {
            dst: 1,
            bytes: if i % 2 == 0 { &small } else { &big },
        })
        .collect();
    assert_eq!(t.tx_burst(0, &burst), 8);
    let sent = &t.device().sent;
    assert_eq!(sent.len(), 8);
    for (i, s) in sent.iter().enumerate() {
        assert_eq!(s.wr_id, i as u64);
        assert_eq!(s.inline, i % 2 == 0);
        assert_eq!(s.signaled, i % 4 == 3);
        assert_eq!(s.bytes, burst[i].bytes);
        assert_eq!((s.ah, s.qpn, s.qkey, s.imm), (0x101, 0x101, QKEY, QKEY));
    }
    // Only the non-inline sends hold slots, until a completion retires them.
    assert_eq!(t.slots_lent(SlotUse::Send), 4);
    t.tx_flush(0);
    assert_eq!(t.slots_lent(SlotUse::Send), 0);
    let s = t.stats();
    assert_eq!((s.tx_packets, s.tx_inline, s.tx_signaled), (8, 4, 2));
}

#[test]
fn a_long_stream_never_stalls_or_leaks_slots() {
    let mut t = transport(cfg(4, 8, 3));
    let big = [3u8; 200];
    let mut sent = 0;
    for _ in 0..10_000 {
        if sent == 1000 {
            break;
        }
        sent += t.tx_burst(
            0,
            &[TxPacket {
                dst: 1,
                bytes: &big,
            }; 5][..5.min(1000 - sent)],
        );
        t.tx_flush(0);
        assert!(t.slots_lent(SlotUse::Send) <= 8);
    }
    assert_eq!(sent, 1000);
    assert_eq!(t.device().sent.len(), 1000);
    // Sends after the last signalled one still hold their slots (at most
    // one period's worth); nothing else does.
    assert!(t.slots_lent(SlotUse::Send) < 3);
}

#[test]
fn a_full_send_queue_is_congestion_until_completions_come() {
    let mut t = transport(cfg(4, 4, 4));
    t.device_mut().complete_sends = false;
    let big = [4u8; 100];
    let burst = [TxPacket {
        dst: 1,
        bytes: &big,
    }; 6];
    assert_eq!(t.tx_burst(0, &burst), 4);
    assert_eq!(t.tx_burst(0, &burst), 0);
    assert!(t.stats().tx_queue_full >= 2);
    // The device completes the signalled last send: everything retires.
    t.device_mut().send_done.push_back((3, true));
    t.tx_flush(0);
    assert_eq!(t.slots_lent(SlotUse::Send), 0);
    assert_eq!(t.tx_burst(0, &burst[..2]), 2);
}

#[test]
fn unknown_destinations_and_long_packets_are_taken_and_dropped() {
    let mut t = transport(cfg(4, 8, 4));
    let ok = [0u8; 10];
    let long = [0u8; 257];
    let burst = [
        TxPacket { dst: 0, bytes: &ok },
        TxPacket { dst: 2, bytes: &ok },
        TxPacket { dst: 9, bytes: &ok },
        TxPacket {
            dst: 1,
            bytes: &long,
        },
        TxPacket { dst: 1, bytes: &ok },
    ];
    assert_eq!(t.tx_burst(0, &burst), 5);
    let s = t.stats();
    assert_eq!((s.tx_unknown_peer, s.tx_too_long, s.tx_packets), (3, 1, 1));
    assert_eq!(t.device().sent.len(), 1);
}

#[test]
fn a_refused_post_drops_the_rest_of_the_chain_and_returns_slots() {
    let mut t = transport(cfg(4, 8, 8));
    t.device_mut().refuse_send_at = Some(1);
    let big = [5u8; 100];
    assert_eq!(
        t.tx_burst(
            0,
            &[TxPacket {
                dst: 1,
                bytes: &big
            }; 3]
        ),
        3
    );
    assert_eq!(t.stats().post_errors, 1);
    assert_eq!(t.stats().tx_packets, 1);
    assert_eq!(t.slots_lent(SlotUse::Send), 1);
    // The sequence goes on from the refused send's id.
    assert_eq!(
        t.tx_burst(
            0,
            &[TxPacket {
                dst: 1,
                bytes: &big
            }]
        ),
        1
    );
    assert_eq!(
        t.device().sent.iter().map(|s| s.wr_id).collect::<Vec<_>>(),
        vec![0, 1]
    );
}

#[test]
fn set_peer_address_repoints_to_a_registered_endpoint() {
    let mut t = transport(cfg(4, 8, 4));
    let old = peer1();
    let new = peer("addr=10.0.0.5:7100,gid=10.0.0.5,qpn=0x205,qkey=0x11111111");
    assert_eq!(
        t.set_peer_address(1, new.addr),
        Err(PeerAddressError::NoEndpoint { addr: new.addr })
    );
    assert!(t.add_endpoint(new));
    assert_eq!(
        t.set_peer_address(3, new.addr),
        Err(PeerAddressError::UnknownNode { node: 3, peers: 3 })
    );
    assert_eq!(
        t.set_peer_address(2, old.addr),
        Err(PeerAddressError::Taken {
            addr: old.addr,
            other: 1
        })
    );
    assert_eq!(t.set_peer_address(1, new.addr), Ok(true));
    assert_eq!(t.set_peer_address(1, new.addr), Ok(false));
    // Sends go to the new endpoint; datagrams from the old one are stale.
    assert_eq!(
        t.tx_burst(
            0,
            &[TxPacket {
                dst: 1,
                bytes: b"hi"
            }]
        ),
        1
    );
    assert_eq!(t.device().sent[0].qpn, 0x205);
    assert!(t.device_mut().deliver(&old, b"stale", Some(QKEY)));
    assert!(t.device_mut().deliver(&new, b"fresh", Some(QKEY)));
    assert_eq!(rx_all(&mut t), vec![b"fresh".to_vec()]);
    let s = t.peer_address_stats();
    assert_eq!((s.repointed, s.stale_address_drops), (1, 1));
    assert_eq!(t.local_endpoint(new.addr).qpn, LOCAL_QPN);
}

#[test]
fn a_new_endpoint_at_the_same_address_repoints_the_node() {
    // A restarted process at the same machine: a new queue pair, the same
    // data address (what a node learns from the membership's records).
    let mut t = transport(cfg(4, 8, 4));
    let old = peer1();
    let restarted = VerbsPeer { qpn: 0x301, ..old };
    assert!(t.add_endpoint(restarted));
    assert_eq!(t.set_peer_address(1, old.addr), Ok(true));
    assert_eq!(t.set_peer_address(1, old.addr), Ok(false));
    assert_eq!(
        t.tx_burst(
            0,
            &[TxPacket {
                dst: 1,
                bytes: b"hi"
            }]
        ),
        1
    );
    assert_eq!(t.device().sent[0].qpn, 0x301);
    assert!(t.device_mut().deliver(&old, b"stale", Some(QKEY)));
    assert!(t.device_mut().deliver(&restarted, b"fresh", Some(QKEY)));
    assert_eq!(rx_all(&mut t), vec![b"fresh".to_vec()]);
    assert_eq!(t.peer_address_stats().repointed, 1);
}
