//! Each bound and timer of the sessions at its edge, and every drop reason.

use super::*;
use crate::net::{Transport, TxPacket};
use splitkv_layout::wire::{
    decode_packet, BodyWriter, Messages, MsgHeader, MsgKind, ReplyStatus, PACKET_FLAG_ACK_ONLY,
};
use splitkv_layout::TxId;

const CLUSTER: u32 = 7;

/// A transport that records what it is given, taking at most `room` packets.
struct Capture {
    out: Vec<(NodeId, Vec<u8>)>,
    room: usize,
}

impl Capture {
    fn new() -> Capture {
        Capture {
            out: Vec::new(),
            room: usize::MAX,
        }
    }
    fn take(&mut self) -> Vec<(NodeId, Vec<u8>)> {
        std::mem::take(&mut self.out)
    }
}

impl Transport for Capture {
    fn mtu(&self) -> usize {
        1500
    }
    fn tx_burst(&mut self, _now: Nanos, packets: &[TxPacket<'_>]) -> usize {
        let n = packets.len().min(self.room);
        self.room -= n;
        for p in &packets[..n] {
            self.out.push((p.dst, p.bytes.to_vec()));
        }
        n
    }
    fn tx_flush(&mut self, _now: Nanos) {}
    fn rx_burst(&mut self, _: Nanos, _: usize, _: &mut dyn FnMut(&[u8])) -> usize {
        0
    }
}

fn cfg() -> SessionConfig {
    SessionConfig {
        window_packets: 4,
        backlog_packets: 16,
        ack_delay_ns: 100,
        retransmit_timeout_ns: 1_000,
        silence_ns: 10_000,
    }
}

fn sessions(node: NodeId, lossy: bool, cfg: SessionConfig) -> Sessions {
    Sessions::new(node, 3, CLUSTER, 1, lossy, cfg).unwrap()
}

/// A sealed data packet from incarnation 1 of `src` to incarnation 1 of
/// `dst` with one LogAck (as the batcher makes it; a session sending it
/// fills in seq, ack, epoch and dst incarnation).
fn sealed(src: NodeId, dst: NodeId, tx: u64) -> Vec<u8> {
    let mut w = BodyWriter::new();
    w.ack(MsgKind::LogAck, TxId::from_bits(tx), ReplyStatus::Ok);
    let mut msg = Vec::new();
    MsgHeader::whole(MsgKind::LogAck, w.bytes().len() as u32).encode(&mut msg);
    msg.extend_from_slice(w.bytes());
    let mut p = Vec::new();
    PacketHeader {
        cluster_id: CLUSTER,
        src,
        dst,
        src_incarnation: 1,
        dst_incarnation: 1,
        count: 1,
        len: msg.len() as u32,
        ..PacketHeader::default()
    }
    .encode(&mut p);
    p.extend_from_slice(&msg);
    p
}

fn backlogs(packets: impl IntoIterator<Item = (usize, Vec<u8>)>) -> Vec<VecDeque<PacketBuf>> {
    let mut b: Vec<VecDeque<PacketBuf>> = (0..3).map(|_| VecDeque::new()).collect();
    for (d, p) in packets {
        b[d].push_back(p.into());
    }
    b
}

fn header(p: &[u8]) -> PacketHeader {
    decode_packet(p).unwrap().0
}

fn tx_of(m: Option<(PacketHeader, Messages<'_>)>) -> Option<u64> {
    m.map(|(_, mut it)| it.next().unwrap().unwrap().1.tx_id().to_bits())
}

#[test]
fn window_full_keeps_the_rest_in_the_backlog_until_acked() {
    let mut a = sessions(0, true, cfg());
    let mut b = sessions(1, true, cfg());
    let mut t = Capture::new();
    let mut bl = backlogs((0..6).map(|i| (1, sealed(0, 1, i))));
    a.flush(0, &mut t, &mut bl);
    let sent = t.take();
    assert_eq!(sent.len(), 4, "window of 4");
    assert_eq!(bl[1].len(), 2, "the rest waits in the backlog");
    assert_eq!(a.unacked(1), 4);
    let seqs: Vec<u32> = sent.iter().map(|(_, p)| header(p).seq).collect();
    assert_eq!(seqs, vec![0, 1, 2, 3]);
    // B accepts the first two and acknowledges them alone after the delay.
    assert_eq!(tx_of(b.receive(10, &sent[0].1)), Some(0));
    assert_eq!(tx_of(b.receive(10, &sent[1].1)), Some(1));
    let mut tb = Capture::new();
    b.flush(10 + 99, &mut tb, &mut backlogs([]));
    assert!(tb.out.is_empty(), "no standalone ack before the delay");
    b.flush(10 + 100, &mut tb, &mut backlogs([]));
    let acks = tb.take();
    assert_eq!(acks.len(), 1);
    let h = header(&acks[0].1);
    assert!(h.is_ack_only() && h.flags == PACKET_FLAG_ACK_ONLY);
    assert_eq!((h.ack, h.dst_incarnation), (2, 1));
    assert!(a.receive(200, &acks[0].1).is_none());
    assert_eq!(a.unacked(1), 2);
    a.flush(200, &mut t, &mut bl);
    assert_eq!(t.take().len(), 2, "two more fit the window");
    assert!(bl[1].is_empty());
    assert_eq!(b.stats().acks_sent_alone, 1);
    assert_eq!(a.stats().acks_received_alone, 1);
}

#[test]
fn acks_ride_on_reverse_traffic() {
    let mut a = sessions(0, true, cfg());
    let mut b = sessions(1, true, cfg());
    let (mut ta, mut tb) = (Capture::new(), Capture::new());
    a.flush(0, &mut ta, &mut backlogs([(1, sealed(0, 1, 1))]));
    let p = ta.take().remove(0).1;
    assert!(b.receive(5, &p).is_some());
    b.flush(6, &mut tb, &mut backlogs([(0, sealed(1, 0, 2))]));
    let reply = tb.take();
    assert_eq!(
        reply.len(),
        1,
        "the data packet carries the ack; no ack alone"
    );
    assert_eq!(header(&reply[0].1).ack, 1);
    assert!(a.receive(7, &reply[0].1).is_some());
    assert_eq!(a.unacked(1), 0);
    b.flush(1_000, &mut tb, &mut backlogs([]));
    assert!(tb.out.is_empty(), "nothing owed any more");
}

#[test]
fn duplicates_and_out_of_order_packets_are_dropped_and_counted() {
    let mut a = sessions(0, true, cfg());
    let mut b = sessions(1, true, cfg());
    let mut t = Capture::new();
    a.flush(
        0,
        &mut t,
        &mut backlogs((0..3).map(|i| (1, sealed(0, 1, i)))),
    );
    let p = t.take();
    assert!(b.receive(1, &p[1].1).is_none(), "1 before 0");
    assert_eq!(tx_of(b.receive(1, &p[0].1)), Some(0));
    assert!(b.receive(1, &p[0].1).is_none(), "0 again");
    assert_eq!(tx_of(b.receive(1, &p[1].1)), Some(1));
    assert_eq!(tx_of(b.receive(1, &p[2].1)), Some(2));
    let s = b.stats();
    assert_eq!(
        (
            s.out_of_order_dropped,
            s.duplicates_dropped,
            s.packets_received
        ),
        (1, 1, 3)
    );
}

#[test]
fn retransmits_everything_unacked_exactly_at_the_timeout() {
    let mut a = sessions(0, true, cfg());
    let mut t = Capture::new();
    a.flush(
        0,
        &mut t,
        &mut backlogs((0..3).map(|i| (1, sealed(0, 1, i)))),
    );
    assert_eq!(t.take().len(), 3);
    a.flush(999, &mut t, &mut backlogs([]));
    assert!(t.out.is_empty(), "not before the timeout");
    a.flush(1_000, &mut t, &mut backlogs([]));
    let again: Vec<u32> = t.take().iter().map(|(_, p)| header(p).seq).collect();
    assert_eq!(again, vec![0, 1, 2], "go back N");
    assert_eq!(a.stats().retransmissions, 3);
    a.flush(1_500, &mut t, &mut backlogs([]));
    assert!(t.out.is_empty(), "the timer restarted");
}

#[test]
fn retransmissions_per_timeout_are_capped() {
    let big = SessionConfig {
        window_packets: RETRANSMIT_PACKETS_PER_TIMEOUT_MAX + 10,
        backlog_packets: 1024,
        ..cfg()
    };
    let mut a = sessions(0, true, big);
    let mut t = Capture::new();
    let n = RETRANSMIT_PACKETS_PER_TIMEOUT_MAX + 10;
    a.flush(
        0,
        &mut t,
        &mut backlogs((0..n as u64).map(|i| (1, sealed(0, 1, i)))),
    );
    assert_eq!(t.take().len(), n);
    a.flush(1_000, &mut t, &mut backlogs([]));
    assert_eq!(t.take().len(), RETRANSMIT_PACKETS_PER_TIMEOUT_MAX);
    a.flush(1_001, &mut t, &mut backlogs([]));
    assert!(t.out.is_empty(), "the cap holds until the next timeout");
}

#[test]
fn a_congested_transport_keeps_packets_for_later() {
    let mut a = sessions(0, true, cfg());
    let mut t = Capture::new();
    t.room = 1;
    let mut bl = backlogs((0..3).map(|i| (1, sealed(0, 1, i))));
    a.flush(0, &mut t, &mut bl);
    assert_eq!(t.take().len(), 1);
    t.room = usize::MAX;
    a.flush(1, &mut t, &mut bl);
    let seqs: Vec<u32> = t.take().iter().map(|(_, p)| header(p).seq).collect();
    assert_eq!(seqs, vec![1, 2]);
    assert_eq!(a.stats().retransmissions, 0);
}

#[test]
fn a_silent_peer_fails_exactly_at_the_silence() {
    let mut a = sessions(0, true, cfg());
    let mut t = Capture::new();
    let mut bl = backlogs([(1, sealed(0, 1, 1))]);
    a.flush(100, &mut t, &mut bl);
    a.flush(100 + 9_999, &mut t, &mut bl);
    assert!(!a.is_failed(1));
    a.flush(100 + 10_000, &mut t, &mut bl);
    assert!(a.is_failed(1));
    let mut ev = Vec::new();
    a.drain_events(&mut ev);
    assert_eq!(ev, vec![SessionEvent::PeerFailed { node: 1 }]);
    assert_eq!(a.stats().sessions_failed, 1);
    assert_eq!(a.stats().messages_to_failed_dropped, 1);
    // Later messages to it are dropped and counted, never sent.
    t.take();
    let mut bl = backlogs([(1, sealed(0, 1, 2))]);
    a.flush(20_000, &mut t, &mut bl);
    assert!(t.out.is_empty() && bl[1].is_empty());
    assert_eq!(a.stats().messages_to_failed_dropped, 2);
    assert!(a.is_idle(), "a failed session holds nothing");
    // A peer we do not wait on is never failed.
    assert!(!a.is_failed(2));
}

#[test]
fn a_newer_incarnation_resets_the_session_and_an_older_one_is_dropped() {
    let mut b = sessions(1, true, cfg());
    let mut a1 = sessions(0, true, cfg());
    let mut t = Capture::new();
    a1.flush(
        0,
        &mut t,
        &mut backlogs((0..2).map(|i| (1, sealed(0, 1, i)))),
    );
    for (_, p) in t.take() {
        assert!(b.receive(1, &p).is_some());
    }
    // Node 0 restarts as incarnation 2: numbering starts at 0 again.
    let mut a2 = Sessions::new(0, 3, CLUSTER, 2, true, cfg()).unwrap();
    let mut p = sealed(0, 1, 9);
    p[16..20].copy_from_slice(&2u32.to_le_bytes());
    a2.flush(2, &mut t, &mut backlogs([(1, p)]));
    let fresh = t.take().remove(0).1;
    assert_eq!(header(&fresh).seq, 0);
    assert_eq!(tx_of(b.receive(3, &fresh)), Some(9));
    assert_eq!(b.stats().sessions_reset, 1);
    // The old incarnation's packets are now stale.
    a1.flush(2_000, &mut t, &mut backlogs([]));
    let old = t.take();
    assert!(!old.is_empty(), "retransmitted by the old incarnation");
    assert!(b.receive(4, &old[0].1).is_none());
    assert_eq!(b.stats().drops.stale_incarnation, 1);
    // A packet addressed to another incarnation of B is dropped.
    let mut wrong = fresh.clone();
    wrong[20..24].copy_from_slice(&5u32.to_le_bytes());
    assert!(b.receive(5, &wrong).is_none());
    assert_eq!(b.stats().drops.wrong_incarnation, 1);
}

#[test]
fn strangers_other_clusters_old_epochs_and_garbage_are_dropped_by_reason() {
    let mut b = sessions(1, true, cfg());
    b.set_epoch(5);
    b.set_epoch(3);
    assert_eq!(b.epoch(), 5, "the epoch never goes down");
    let ok = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut p = sealed(0, 1, 1);
        p[24..28].copy_from_slice(&5u32.to_le_bytes());
        f(&mut p);
        p
    };
    type Count = fn(&SessionDrops) -> u64;
    let cases: Vec<(Vec<u8>, Count)> = vec![
        (ok(&|p| p[8] = 99), |d| d.other_cluster),
        (ok(&|p| p[12] = 9), |d| d.stranger),
        (ok(&|p| p[12] = 1), |d| d.stranger),
        (ok(&|p| p[14] = 2), |d| d.misaddressed),
        // Numbered past the next packet: an old-epoch packet with the next
        // number takes it (`old_epoch_packets_leave_no_gap`).
        (
            ok(&|p| {
                p[24] = 4;
                p[28] = 1;
            }),
            |d| d.old_epoch,
        ),
        (ok(&|p| p[4] = 1), |d| d.bad_version),
        (ok(&|p| p[0] = 0), |d| d.malformed),
        (ok(&|p| p.truncate(30)), |d| d.malformed),
        (ok(&|p| p[32] = 3), |d| d.bad_ack),
    ];
    for (p, which) in &cases {
        let before = which(&b.stats().drops);
        assert!(b.receive(1, p).is_none());
        assert_eq!(which(&b.stats().drops), before + 1);
    }
    assert_eq!(b.stats().packets_received, 0);
    assert!(
        b.receive(1, &ok(&|_| {})).is_some(),
        "the unmodified packet passes"
    );
}

#[test]
fn old_epoch_packets_leave_no_gap() {
    // On a lossless transport nothing is resent: a packet dropped for its
    // old epoch must still take its number, or every later one is out of
    // order for ever.
    for lossy in [false, true] {
        let mut b = sessions(1, lossy, cfg());
        b.set_epoch(5);
        let at = |seq: u8, epoch: u8| {
            let mut p = sealed(0, 1, 1);
            p[24] = epoch;
            p[28] = seq;
            p
        };
        assert!(b.receive(1, &at(0, 4)).is_none());
        assert_eq!(b.stats().drops.old_epoch, 1);
        assert!(b.receive(2, &at(1, 5)).is_some(), "lossy {lossy}");
        assert!(b.receive(3, &at(0, 5)).is_none(), "the old number is taken");
        assert_eq!(b.stats().duplicates_dropped, 1);
    }
}

#[test]
fn a_lossless_transport_keeps_no_copies_but_numbers_and_acks() {
    let mut a = sessions(0, false, cfg());
    let mut b = sessions(1, false, cfg());
    let mut t = Capture::new();
    a.flush(
        0,
        &mut t,
        &mut backlogs((0..3).map(|i| (1, sealed(0, 1, i)))),
    );
    assert!(a.peers[1].held.is_empty(), "no retransmission copies");
    assert_eq!(a.unacked(1), 3);
    a.flush(5_000, &mut t, &mut backlogs([]));
    let sent = t.take();
    assert_eq!(sent.len(), 3, "and no retransmission");
    for (_, p) in &sent {
        assert!(b.receive(1, p).is_some());
    }
    b.flush(200, &mut t, &mut backlogs([]));
    assert!(a.receive(300, &t.take()[0].1).is_none());
    assert!(a.is_idle());
}

#[test]
fn bad_configurations_are_refused() {
    for c in [
        SessionConfig {
            window_packets: 0,
            ..cfg()
        },
        SessionConfig {
            window_packets: SESSION_WINDOW_PACKETS_MAX + 1,
            ..cfg()
        },
        SessionConfig {
            backlog_packets: 0,
            ..cfg()
        },
        SessionConfig {
            retransmit_timeout_ns: 0,
            ..cfg()
        },
        SessionConfig {
            silence_ns: 0,
            ..cfg()
        },
    ] {
        assert!(Sessions::new(0, 2, 1, 1, true, c).is_err());
    }
    assert!(SessionConfig::default().validate().is_ok());
}

/// Chaos list-append seed 72: a session that sent to a peer it never heard
/// from declared it failed (the failure clears the numbering), and the
/// membership then admitted the peer's new process. The session must be
/// reset (no longer failed, addressed to the admitted incarnation), not
/// kept as if fresh, or it drops everything to the new process for good.
#[test]
fn admitting_a_new_incarnation_revives_a_session_failed_before_it_heard_the_peer() {
    let mut a = sessions(0, true, cfg());
    let mut t = Capture::new();
    let mut bl = backlogs([(1, sealed(0, 1, 1))]);
    a.flush(100, &mut t, &mut bl);
    a.flush(100 + 10_000, &mut t, &mut bl);
    assert!(a.is_failed(1));
    a.raise_floor(1, 3);
    assert!(!a.is_failed(1), "the admitted process is reachable");
    t.take();
    let mut bl = backlogs([(1, sealed(0, 1, 2))]);
    a.flush(20_000, &mut t, &mut bl);
    assert_eq!(t.out.len(), 1, "sent to the new process");
    assert_eq!(header(&t.out[0].1).dst_incarnation, 3);
}

/// Chaos smallbank seed 6: node 0's NIC restarted (fresh sessions) and
/// queried node 1 just before node 1 crashed; 30 ms later the session
/// declared node 1 failed, never having heard it. Node 1's new process
/// (incarnation 2) then spoke before the configuration admitting it was
/// applied here: its packets were dropped as from a failed peer, and the
/// admission found incarnation 2 already known, so nothing revived the
/// session, node 1's recovery evidence never reached the leader, and it
/// was fenced. A failure now records the incarnation it declared failed
/// (at least the membership's floor), so a newer one revives the session
/// while the failed one stays dropped.
#[test]
fn a_newer_incarnation_revives_a_session_failed_before_it_heard_the_peer() {
    let mut a = sessions(0, true, cfg());
    a.raise_floor(1, 1);
    let mut t = Capture::new();
    let mut bl = backlogs([(1, sealed(0, 1, 1))]);
    a.flush(100, &mut t, &mut bl);
    a.flush(100 + 10_000, &mut t, &mut bl);
    assert!(a.is_failed(1));
    // Incarnation 2 speaks first: the session is revived.
    let mut new = sealed(1, 0, 8);
    new[16..20].copy_from_slice(&2u32.to_le_bytes());
    new[20..24].copy_from_slice(&1u32.to_le_bytes());
    assert_eq!(tx_of(a.receive(20_000, &new)), Some(8));
    assert!(!a.is_failed(1));
    // The failed incarnation (the floor, 1) is stale now.
    assert!(a.receive(20_100, &sealed(1, 0, 7)).is_none());
    assert_eq!(a.stats().drops.stale_incarnation, 1);
    // Its admission changes nothing more.
    a.raise_floor(1, 2);
    assert!(!a.is_failed(1));
    assert_eq!(a.floor(1), 2);
}

/// Chaos list-append seed 103: node 0's session had sent node 1 a packet
/// (number 0) before it knew any incarnation of node 1; node 1 crashed, and
/// its new process (incarnation 2, already in the next epoch) got a
/// retransmission of that packet. Addressed to "any incarnation", it took
/// number 0 there (dropped for its old epoch, numbered all the same); the
/// configuration admitting incarnation 2 then started node 0's numbering
/// over, and its next packet — recovery evidence — was dropped there as a
/// duplicate (and acknowledged), so recovery waited for ever. Every packet
/// now names the process it is for: the new process takes no number of a
/// packet meant for its predecessor, and the next packet is delivered.
#[test]
fn a_packet_for_the_old_process_takes_no_number_in_the_new_one() {
    let mut a = sessions(0, true, cfg());
    a.set_epoch(4);
    let mut t = Capture::new();
    a.flush(0, &mut t, &mut backlogs([(1, sealed(0, 1, 1))]));
    assert_eq!(t.take().len(), 1, "lost with node 1's first process");
    // Node 1's new process, already in epoch 5, gets the retransmission.
    let mut b2 = Sessions::new(1, 3, CLUSTER, 2, true, cfg()).unwrap();
    b2.set_epoch(5);
    a.flush(1_000, &mut t, &mut backlogs([]));
    let again = t.take().remove(0).1;
    assert_eq!(header(&again).seq, 0);
    assert!(b2.receive(1_100, &again).is_none());
    let drops = b2.stats().drops;
    assert_eq!(drops.wrong_incarnation, 1, "not for this process");
    assert_eq!(drops.old_epoch, 0, "so not numbered either");
    // The configuration of epoch 5 admits incarnation 2: a fresh session,
    // reported, since the packet held for the old process is dropped.
    a.set_epoch(5);
    a.raise_floor(1, 2);
    assert_eq!(a.take_renewed(), 1 << 1);
    a.flush(2_000, &mut t, &mut backlogs([(1, sealed(0, 1, 2))]));
    let evidence = t.take().remove(0).1;
    let h = header(&evidence);
    assert_eq!((h.seq, h.dst_incarnation), (0, 2));
    assert_eq!(tx_of(b2.receive(2_100, &evidence)), Some(2), "delivered");
    assert_eq!(b2.stats().duplicates_dropped, 0);
}

/// A session that addresses an older incarnation than its peer's (the
/// peer's NIC runtime restarted, and no configuration named the new one)
/// gets a notice: the peer drops the packet without numbering it and
/// answers with a standalone acknowledgement that carries its incarnation.
/// The session is renewed (its held packet dropped and the peer reported),
/// and what it sends next reaches the new process, numbered from 0. A
/// packet for a later incarnation (this process is a predecessor) gets no
/// notice, and renewing a session that carried nothing reports nothing.
#[test]
fn a_notice_teaches_a_session_the_peers_newer_incarnation() {
    let mut a = sessions(0, true, cfg());
    let mut b3 = Sessions::new(1, 3, CLUSTER, 3, true, cfg()).unwrap();
    let (mut ta, mut tb) = (Capture::new(), Capture::new());
    a.flush(0, &mut ta, &mut backlogs([(1, sealed(0, 1, 1))]));
    let p = ta.take().remove(0).1;
    assert_eq!(header(&p).dst_incarnation, 1, "the lowest it can be");
    assert!(b3.receive(10, &p).is_none());
    b3.flush(10, &mut tb, &mut backlogs([]));
    let notice = tb.take().remove(0).1;
    let h = header(&notice);
    assert!(h.is_ack_only());
    assert_eq!((h.src_incarnation, h.dst_incarnation, h.ack), (3, 1, 0));
    assert_eq!(b3.stats().notices_sent, 1);
    assert!(a.receive(20, &notice).is_none());
    assert_eq!(a.take_renewed(), 1 << 1);
    assert_eq!(a.take_renewed(), 0, "taken once");
    assert_eq!((a.addressed(1), a.unacked(1)), (3, 0));
    a.flush(30, &mut ta, &mut backlogs([(1, sealed(0, 1, 2))]));
    let next = ta.take().remove(0).1;
    assert_eq!((header(&next).seq, header(&next).dst_incarnation), (0, 3));
    assert_eq!(tx_of(b3.receive(40, &next)), Some(2));
    // Node 2's predecessor (incarnation 1) hears from a node that knows
    // incarnation 4 of it: no notice.
    let mut c = sessions(2, true, cfg());
    let mut later = sealed(0, 2, 3);
    later[20..24].copy_from_slice(&4u32.to_le_bytes());
    assert!(c.receive(50, &later).is_none());
    c.flush(50, &mut tb, &mut backlogs([]));
    assert!(tb.out.is_empty() && c.stats().notices_sent == 0);
    // A configuration names incarnation 4 of node 1 to node 2, whose
    // session with it carried nothing.
    c.raise_floor(1, 4);
    assert_eq!((c.addressed(1), c.take_renewed()), (4, 0));
}

#[test]
fn a_newer_process_of_an_older_epoch_is_dropped_and_renews_nothing() {
    let mut b = sessions(1, true, cfg());
    b.set_epoch(5);
    let with = |epoch: u32| {
        let p = sealed(0, 1, 9);
        let h = PacketHeader {
            epoch,
            src_incarnation: 7,
            ..header(&p)
        };
        let mut out = Vec::new();
        h.encode(&mut out);
        out.extend_from_slice(&p[splitkv_layout::wire::PACKET_HEADER_BYTES..]);
        out
    };
    // Incarnation 7 of node 0, still in epoch 3 (not admitted, or configured
    // out and sending on): counted as an old epoch's, the session unchanged.
    assert!(b.receive(1, &with(3)).is_none());
    assert_eq!(b.stats().drops.old_epoch, 1);
    assert_eq!(b.addressed(0), 1);
    // The same process in this epoch renews the session (a NIC restart).
    assert_eq!(tx_of(b.receive(2, &with(5))), Some(9));
    assert_eq!(b.addressed(0), 7);
}

/// The gap fence of go-back-N: a packet that arrives after a lost one is
/// not taken, or its cumulative acknowledgement would cover the lost packet,
/// which the sender then frees and never resends — its messages gone for
/// good on a reliable session (the simulator's net mix then stalls: a
/// transaction waits for a message that never comes).
#[test]
fn a_lost_packet_is_resent_and_delivered_before_later_ones() {
    let mut a = sessions(0, true, cfg());
    let mut b = sessions(1, true, cfg());
    let (mut ta, mut tb) = (Capture::new(), Capture::new());
    a.flush(
        0,
        &mut ta,
        &mut backlogs((0..3).map(|i| (1, sealed(0, 1, i)))),
    );
    let sent = ta.take();
    // Packet 0 is lost; 1 and 2 arrive, and b acknowledges what it took.
    let mut delivered: Vec<u64> = sent[1..]
        .iter()
        .filter_map(|(_, p)| tx_of(b.receive(10, p)))
        .collect();
    b.flush(500, &mut tb, &mut backlogs([]));
    for (_, p) in tb.take() {
        assert!(a.receive(600, &p).is_none(), "an acknowledgement alone");
    }
    // At the timeout a resends what b did not acknowledge.
    a.flush(1_000, &mut ta, &mut backlogs([]));
    for (_, p) in ta.take() {
        delivered.extend(tx_of(b.receive(1_100, &p)));
    }
    assert_eq!(delivered, vec![0, 1, 2], "every message once, in order");
}

/// Why the old-epoch drop is no safety fence (`receive.rs`): a packet sent
/// in epoch 4, lost, and resent after the sender moved to epoch 5 carries
/// epoch 5, and a receiver in epoch 5 takes it.
#[test]
fn a_retransmission_carries_the_epoch_it_is_resent_in() {
    let mut a = sessions(0, true, cfg());
    let mut b = sessions(1, true, cfg());
    a.set_epoch(4);
    b.set_epoch(5);
    let mut t = Capture::new();
    a.flush(0, &mut t, &mut backlogs([(1, sealed(0, 1, 7))]));
    let lost = t.take();
    assert_eq!(header(&lost[0].1).epoch, 4);
    a.set_epoch(5);
    a.flush(1_000, &mut t, &mut backlogs([]));
    let again = t.take();
    assert_eq!(
        header(&again[0].1).seq,
        header(&lost[0].1).seq,
        "the same packet"
    );
    assert_eq!(header(&again[0].1).epoch, 5);
    assert_eq!(
        tx_of(b.receive(1_100, &again[0].1)),
        Some(7),
        "taken in epoch 5"
    );
}
