//! A whole NIC runtime (`nic-runtime/src/runtime.rs`) answers a LOG it cannot
//! apply instead of dropping it while its coordinator waits (a rule the fuzz
//! targets check): a value over the node's limit comes back as
//! `LogAck(TooLarge)`, and nothing reaches the host log.

mod support;

use splitkv_layout::wire::{decode_packet, Body, BodyWriter, MsgKind, ReplyStatus};
use splitkv_layout::{Key, ObjectMeta, TxId};
use splitkv_nic::net::mem::{mem_network, MemTransport};
use splitkv_nic::net::session::{SessionConfig, SessionEvent};
use splitkv_nic::net::stack::StackConfig;
use splitkv_nic::net::{Transport, TxPacket};
use splitkv_nic::Placement;
use support::{lone_runtime, peer_packet, LoneRuntime};

const VALUE_BYTES_MAX: usize = 8;

/// One LOG message from node 1 to node 0, in a packet numbered `seq` of
/// node 1's session with node 0 (as that session would send it).
fn log_packet(seq: u32, tx_id: u64, value: &[u8]) -> Vec<u8> {
    let mut w = BodyWriter::new();
    w.begin_items(MsgKind::Log, TxId::from_bits(tx_id));
    w.push_item(&Key::new(0, 1), ObjectMeta(1), value);
    peer_packet(seq, &w)
}

/// Node 0 of two (replication 1) on a memory network, and node 1's end
/// of that network (the tests play node 1 by hand).
fn node_0_of_2() -> (MemTransport, LoneRuntime) {
    let mut net = mem_network(2);
    let peer = net.pop().unwrap();
    let transport = net.pop().unwrap();
    let rt = lone_runtime(
        Placement::new(2, 1).unwrap(),
        transport,
        VALUE_BYTES_MAX,
        StackConfig::default(),
    );
    (peer, rt)
}

#[test]
fn an_oversized_log_is_answered_not_dropped() {
    let (
        mut peer,
        LoneRuntime {
            mut nic,
            log: mut log_rx,
            ..
        },
    ) = node_0_of_2();
    let (p7, p8) = (
        log_packet(0, 7, &[0u8; VALUE_BYTES_MAX + 1]),
        log_packet(1, 8, &[0u8; VALUE_BYTES_MAX]),
    );
    peer.tx_burst(
        0,
        &[
            TxPacket { dst: 0, bytes: &p7 },
            TxPacket { dst: 0, bytes: &p8 },
        ],
    );
    for now in 0..10 {
        nic.run_iteration(now);
    }
    let mut rx: Vec<Vec<u8>> = Vec::new();
    peer.rx_burst(10, 16, &mut |p| rx.push(p.to_vec()));
    let mut acks = Vec::new();
    for p in &rx {
        let (_, msgs) = decode_packet(p).unwrap();
        for m in msgs {
            if let (_, Body::LogAck { tx_id, status }) = m.unwrap() {
                acks.push((tx_id.to_bits(), status));
            }
        }
    }
    acks.sort_by_key(|a| a.0);
    assert_eq!(
        acks,
        vec![(7, ReplyStatus::TooLarge), (8, ReplyStatus::Ok)],
        "both LOGs answered"
    );
    assert_eq!(
        nic.stats().bad_packets,
        1,
        "the oversized one is still counted"
    );
    assert_eq!(nic.stats().server.too_large, 1);
    let mut entries = 0;
    let mut e = Vec::new();
    while log_rx.try_pop(&mut e).unwrap() {
        entries += 1;
    }
    assert_eq!(entries, 1, "only the LOG that fits reached the host log");
}

/// The Dnl skeleton's requests reach the server through the runtime
/// (`protocol/server/dnl.rs`): each is answered once in its own reply kind
/// (a Get and a Lock `Ok`, a Replicate `Ok`, an Unlock committing a key its
/// transaction does not hold and a Readable with nothing replicated
/// `Malformed`, counted); a Dnl reply no request of this node asked for is a
/// stale response; the Lock's and the Replicate's values reach the host log
/// as pending records and the runtime keeps running.
#[test]
fn dnl_requests_are_served_through_the_runtime() {
    let (
        mut peer,
        LoneRuntime {
            mut nic,
            log: mut log_rx,
            ..
        },
    ) = node_0_of_2();
    let placement = Placement::new(2, 1).unwrap();
    let key = (0..)
        .map(|i| Key::new(0, i))
        .find(|k| placement.primary(k) == 0)
        .unwrap();
    let mut w = BodyWriter::new();
    let mut packets = Vec::new();
    let tx = |n: usize| TxId::new(1, n, 1);
    w.begin_get(tx(1));
    w.push_get_key(&key);
    packets.push(peer_packet(0, &w));
    w.begin_lock(tx(2), splitkv_layout::wire::NodeMask(1));
    w.push_version(&key, 0);
    w.push_item(&key, ObjectMeta(1), b"v");
    packets.push(peer_packet(1, &w));
    w.begin_replicate(tx(3), splitkv_layout::wire::NodeMask(1));
    w.push_item(&key, ObjectMeta(2), b"v");
    packets.push(peer_packet(2, &w));
    w.begin_unlock(tx(4), true);
    w.push_item(&key, ObjectMeta(2), b"v");
    packets.push(peer_packet(3, &w));
    w.begin_readable(tx(5));
    w.push_item(&key, ObjectMeta(2), b"v");
    packets.push(peer_packet(4, &w));
    w.ack(MsgKind::LockResp, tx(6), ReplyStatus::Ok);
    packets.push(peer_packet(5, &w));
    let burst: Vec<TxPacket<'_>> = packets
        .iter()
        .map(|p| TxPacket { dst: 0, bytes: p })
        .collect();
    peer.tx_burst(0, &burst);
    for now in 0..10 {
        nic.run_iteration(now);
    }
    let mut rx: Vec<Vec<u8>> = Vec::new();
    peer.rx_burst(10, 16, &mut |p| rx.push(p.to_vec()));
    let mut replies = Vec::new();
    for p in &rx {
        let (_, msgs) = decode_packet(p).unwrap();
        for m in msgs {
            let (_, body) = m.unwrap();
            let status = match body {
                Body::GetResp { status, items, .. } => {
                    assert_eq!(items.len(), 1);
                    status
                }
                Body::LockResp { status, .. }
                | Body::ReplicateAck { status, .. }
                | Body::UnlockAck { status, .. }
                | Body::ReadableAck { status, .. } => status,
                other => panic!("unexpected reply {other:?}"),
            };
            replies.push((body.tx_id().slot(), body.kind(), status));
        }
    }
    replies.sort_by_key(|r| r.0);
    let (ok, m) = (ReplyStatus::Ok, ReplyStatus::Malformed);
    assert_eq!(
        replies,
        vec![
            (1, MsgKind::GetResp, ok),
            (2, MsgKind::LockResp, ok),
            (3, MsgKind::ReplicateAck, ok),
            (4, MsgKind::UnlockAck, m),
            (5, MsgKind::ReadableAck, m),
        ],
        "every Dnl request answered, the stray reply not"
    );
    let stats = nic.stats();
    assert_eq!(stats.server.malformed, 2);
    assert_eq!(stats.server.dnl_requests, 5);
    assert_eq!(stats.coordinator.stale_responses, 1);
    assert_eq!(nic.fault(), None);
    let mut e = Vec::new();
    let mut entries = 0;
    while log_rx.try_pop(&mut e).unwrap() {
        entries += 1;
    }
    assert_eq!(entries, 2, "the Lock's and the Replicate's pending records");
}

/// A host acknowledgement ring holding something other than `LogApplied`
/// stops the NIC runtime with a reason (`NicRuntime::fault`) instead of a
/// panic or a silently ignored entry (pinned objects would never be released).
#[test]
fn a_bad_host_acknowledgement_stops_the_runtime_with_a_reason() {
    let mut net = mem_network(1);
    let transport = net.pop().unwrap();
    let LoneRuntime {
        mut nic,
        acks: mut ack_tx,
        ..
    } = lone_runtime(
        Placement::new(1, 1).unwrap(),
        transport,
        VALUE_BYTES_MAX,
        StackConfig::default(),
    );
    nic.run_iteration(0);
    assert_eq!(nic.fault(), None);
    ack_tx.try_push(&[0xEE, 1, 2, 3]).unwrap();
    nic.run_iteration(1);
    let why = nic.fault().expect("the runtime stopped").to_string();
    assert!(why.contains("host acknowledgement ring"), "{why}");
    assert_eq!(nic.stats().bad_ring_entries, 1);
    assert!(!nic.run_iteration(2), "a stopped runtime does nothing");
}

/// The runtime's sessions: a peer that never acknowledges what the runtime
/// sent it is reported failed exactly at the configured silence
/// (`NicRuntime::drain_session_events`), and packets from another cluster
/// or a node outside the configuration are dropped and counted by reason,
/// never dispatched.
#[test]
fn a_silent_peer_is_reported_failed_and_strangers_are_dropped() {
    const SILENCE_NS: u64 = 1_000_000;
    let mut net = mem_network(2);
    let mut peer = net.pop().unwrap();
    let transport = net.pop().unwrap();
    let cfg = StackConfig {
        session: SessionConfig {
            silence_ns: SILENCE_NS,
            ..SessionConfig::default()
        },
        ..StackConfig::default()
    };
    let mut lone = lone_runtime(
        Placement::new(2, 1).unwrap(),
        transport,
        VALUE_BYTES_MAX,
        cfg,
    );
    let nic = &mut lone.nic;
    let mut other_cluster = log_packet(1, 9, b"x");
    other_cluster[8] ^= 0xFF;
    let mut stranger = log_packet(1, 9, b"x");
    stranger[12] = 5;
    let good = log_packet(0, 7, b"x");
    let pkts = [&other_cluster, &stranger, &good].map(|p| TxPacket { dst: 0, bytes: p });
    peer.tx_burst(0, &pkts);
    for now in 0..10 {
        nic.run_iteration(now);
    }
    let mut replies = 0;
    peer.rx_burst(10, 16, &mut |p| {
        replies += decode_packet(p).unwrap().0.count
    });
    assert_eq!(replies, 1, "only the good packet was answered");
    let s = nic.stats().net.sessions;
    assert_eq!(
        (s.drops.other_cluster, s.drops.stranger, s.packets_received),
        (1, 1, 1)
    );
    // The peer stays silent: not failed before the silence, failed at it.
    let mut events = Vec::new();
    nic.run_iteration(SILENCE_NS - 1);
    nic.drain_session_events(&mut events);
    assert!(events.is_empty());
    nic.run_iteration(10 + SILENCE_NS);
    nic.drain_session_events(&mut events);
    assert_eq!(events, vec![SessionEvent::PeerFailed { node: 1 }]);
    assert_eq!(nic.stats().net.sessions.sessions_failed, 1);
    assert!(nic.is_quiescent(), "a failed session holds nothing");
}
