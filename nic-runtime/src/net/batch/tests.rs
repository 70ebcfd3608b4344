//! The batcher's bounds at their edges: MTU, message count, backlog, message
//! size; fragmentation; batching off.

use super::*;
use splitkv_layout::wire::{decode_packet, Body, ReplyStatus};
use splitkv_layout::TxId;

fn template(src: NodeId) -> PacketHeader {
    PacketHeader {
        src,
        cluster_id: 3,
        src_incarnation: 1,
        ..PacketHeader::default()
    }
}

fn batcher(src: NodeId, nodes: usize, mtu: usize) -> Batcher {
    Batcher::new(template(src), nodes, mtu, true, 64)
}

fn ack(w: &mut BodyWriter, tx: u64) {
    w.ack(MsgKind::LogAck, TxId::from_bits(tx), ReplyStatus::Ok);
}

fn sealed(b: &mut Batcher, d: usize) -> Vec<Vec<u8>> {
    b.backlogs_mut()[d].drain(..).map(|p| p.to_vec()).collect()
}

#[test]
fn batches_per_destination_and_seals_on_flush() {
    let mut b = batcher(0, 3, 1500);
    let mut w = BodyWriter::new();
    for tx in 0..10 {
        ack(&mut w, tx);
        b.try_insert(1 + (tx % 2) as u16, &w).unwrap();
    }
    assert_eq!(
        b.backlog(1) + b.backlog(2),
        0,
        "nothing sealed before the iteration ends"
    );
    b.flush();
    for d in 1..3 {
        let ps = sealed(&mut b, d);
        assert_eq!(ps.len(), 1);
        let (h, msgs) = decode_packet(&ps[0]).unwrap();
        assert_eq!((h.count, h.src, h.dst, h.cluster_id), (5, 0, d as u16, 3));
        let bodies: Vec<_> = msgs.map(|m| m.unwrap().1).collect();
        assert!(bodies.iter().all(|b| matches!(b, Body::LogAck { .. })));
    }
    assert_eq!((b.stats().packets, b.stats().messages), (2, 10));
}

#[test]
fn message_count_bound_starts_a_new_packet() {
    let mut b = batcher(0, 2, 9000);
    let mut w = BodyWriter::new();
    for tx in 0..(MESSAGES_PER_PACKET_MAX as u64 + 1) {
        ack(&mut w, tx);
        b.try_insert(1, &w).unwrap();
    }
    b.flush();
    let counts: Vec<_> = sealed(&mut b, 1)
        .iter()
        .map(|p| decode_packet(p).unwrap().0.count)
        .collect();
    assert_eq!(counts, vec![MESSAGES_PER_PACKET_MAX as u16, 1]);
}

#[test]
fn mtu_bound_starts_a_new_packet_and_bad_input_is_refused() {
    let mtu = PACKET_HEADER_BYTES + 2 * (MSG_HEADER_BYTES + 8 + 1);
    let mut b = batcher(0, 2, mtu);
    let mut w = BodyWriter::new();
    for tx in 0..3 {
        ack(&mut w, tx);
        b.try_insert(1, &w).unwrap();
    }
    b.flush();
    let ps = sealed(&mut b, 1);
    assert_eq!(ps.len(), 2);
    assert!(ps.iter().all(|p| p.len() <= mtu));
    let giant = vec![0u8; MESSAGE_BYTES_MAX + 1];
    assert_eq!(
        b.try_insert_raw(1, Flow::Commit, MsgKind::LogAck, &giant),
        Err(BatchError::TooLarge {
            len: MESSAGE_BYTES_MAX + 1,
            max: MESSAGE_BYTES_MAX
        })
    );
    assert_eq!(b.try_insert(5, &w), Err(BatchError::BadDestination(5)));
}

#[test]
fn a_full_backlog_refuses_and_queues_nothing() {
    let mut b = Batcher::new(template(0), 2, 1500, false, 4);
    let mut w = BodyWriter::new();
    ack(&mut w, 1);
    for _ in 0..4 {
        b.try_insert(1, &w).unwrap();
    }
    assert_eq!(b.backlog(1), 4, "batching off: one packet per message");
    assert!(b.congested(), "past the high-water mark");
    assert_eq!(
        b.try_insert(1, &w),
        Err(BatchError::BacklogFull {
            dest: 1,
            backlog: 4,
            max: 4
        })
    );
    assert_eq!(b.backlog(1), 4);
    // A multicast is all or none.
    let mut m = Batcher::new(template(0), 3, 1500, false, 1);
    m.try_insert(2, &w).unwrap();
    assert!(m.try_insert_mcast(&[1, 2], &w).is_err());
    assert_eq!((m.backlog(1), m.backlog(2)), (0, 1));
    sealed(&mut b, 1);
    assert!(!b.congested());
    b.try_insert(1, &w).unwrap();
}

#[test]
fn a_message_larger_than_a_packet_travels_as_fragments() {
    let mtu = 1500;
    let mut b = batcher(0, 2, mtu);
    let body: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
    let mut w = BodyWriter::new();
    ack(&mut w, 7);
    b.try_insert(1, &w).unwrap();
    b.try_insert_raw(1, Flow::Commit, MsgKind::Commit, &body)
        .unwrap();
    b.try_insert(1, &w).unwrap();
    b.flush();
    let ps = sealed(&mut b, 1);
    let per = mtu - PACKET_HEADER_BYTES - MSG_HEADER_BYTES;
    assert_eq!(ps.len(), 1 + body.len().div_ceil(per));
    let mut joined = Vec::new();
    let mut flags = Vec::new();
    for p in &ps[1..] {
        assert!(p.len() <= mtu);
        let (_, mut it) = decode_packet(p).unwrap();
        let (mh, raw) = it.next_raw().unwrap().unwrap();
        assert_eq!(mh.kind, MsgKind::Commit);
        flags.push(mh.frag_more());
        joined.extend_from_slice(raw);
    }
    assert_eq!(joined, body);
    assert!(flags[..flags.len() - 1].iter().all(|&f| f) && !flags[flags.len() - 1]);
    let (last, _) = decode_packet(ps.last().unwrap()).unwrap();
    assert_eq!(
        last.count, 2,
        "the message after shares the last fragment's packet"
    );
    assert_eq!(b.stats().fragmented_messages, 1);
    assert_eq!(b.stats().fragments as usize, body.len().div_ceil(per));
}

#[test]
fn batching_off_gives_one_message_per_packet() {
    let mut b = Batcher::new(template(0), 2, 1500, false, 64);
    let mut w = BodyWriter::new();
    for tx in 0..5 {
        ack(&mut w, tx);
        b.try_insert(1, &w).unwrap();
    }
    b.flush();
    let ps = sealed(&mut b, 1);
    assert_eq!(ps.len(), 5);
    assert!(ps.iter().all(|p| decode_packet(p).unwrap().0.count == 1));
    assert_eq!((b.stats().packets, b.stats().messages), (5, 5));
}

#[test]
fn loopback_bypasses_network_stats() {
    let mut b = batcher(1, 2, 1500);
    let mut w = BodyWriter::new();
    ack(&mut w, 9);
    b.try_insert(1, &w).unwrap();
    b.flush();
    assert!(b.pop_loopback().is_some());
    assert!(b.pop_loopback().is_none());
    assert_eq!(b.stats().packets, 0);
    assert_eq!(b.stats().loopback_messages, 1);
}

/// Packets are counted as inlinable exactly up to the transport's inline
/// limit; without a limit none is.
#[test]
fn packets_within_the_inline_limit_are_counted() {
    let one_ack = {
        let mut b = Batcher::new(template(0), 2, 1500, false, 64);
        let mut w = BodyWriter::new();
        ack(&mut w, 1);
        b.try_insert(1, &w).unwrap();
        b.flush();
        sealed(&mut b, 1)[0].len()
    };
    for (limit, inlined) in [(0, 0), (one_ack - 1, 0), (one_ack, 3)] {
        let mut b = Batcher::new(template(0), 2, 1500, false, 64);
        b.set_inline_bytes_max(limit);
        let mut w = BodyWriter::new();
        for tx in 0..3 {
            ack(&mut w, tx);
            b.try_insert(1, &w).unwrap();
        }
        b.flush();
        assert_eq!(b.stats().packets, 3);
        assert_eq!(b.stats().inline_packets, inlined, "limit {limit}");
    }
}
