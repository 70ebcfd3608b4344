//! The adaptive retransmission timeout ([`super::rto`]) at its edges, and
//! the forgiveness of this node's own stalls, alone and through [`Sessions`].

use super::rto::Rto;
use super::*;
use crate::net::{Transport, TxPacket};
use splitkv_layout::wire::decode_packet;

const MS: Nanos = 1_000_000;

/// Feeds `n` samples of `rtt` ns: packet `i` sent at `t`, acked at `t + rtt`.
fn steady(rto: &mut Rto, n: u32, rtt: Nanos) {
    for i in 0..n {
        let t = i as Nanos * 10 * rtt.max(1);
        rto.on_first_send(i, t);
        assert_eq!(rto.on_ack(i + 1, t + rtt), Some(rtt));
    }
}

#[test]
fn the_timeout_starts_at_the_configured_value() {
    let rto = Rto::default();
    assert_eq!(rto.timeout_ns(5 * MS), 5 * MS);
    assert_eq!(
        rto.timeout_ns(1_000),
        1_000,
        "below the minimum: as configured"
    );
    assert_eq!(
        rto.timeout_ns(10 * RETRANSMIT_TIMEOUT_MAX_NS),
        10 * RETRANSMIT_TIMEOUT_MAX_NS
    );
}

#[test]
fn the_timeout_converges_on_a_steady_round_trip() {
    let mut rto = Rto::default();
    steady(&mut rto, 200, 3 * MS);
    assert_eq!(rto.srtt(), Some(3 * MS));
    // The variation decays to (almost) nothing: the timeout is the RTT.
    let t = rto.timeout_ns(MS);
    assert!((3 * MS..3 * MS + 1_000).contains(&t), "timeout {t}");
    // The first sample alone: srtt + 4 × srtt/2 = 3 × the sample.
    let mut first = Rto::default();
    steady(&mut first, 1, 2 * MS);
    assert_eq!(first.timeout_ns(MS), 6 * MS);
}

#[test]
fn the_timeout_is_never_below_its_minimum_the_configured_value() {
    let mut rto = Rto::default();
    steady(&mut rto, 100, 10_000);
    assert_eq!(rto.timeout_ns(5 * MS), 5 * MS);
    steady(&mut rto, 100, 0);
    assert_eq!(rto.timeout_ns(5 * MS), 5 * MS);
    assert_eq!(rto.timeout_ns(1_000), 1_000);
    // Above the minimum, the estimate rules.
    steady(&mut rto, 200, 7 * MS);
    let t = rto.timeout_ns(5 * MS);
    assert!((7 * MS..7 * MS + 1_000).contains(&t), "timeout {t}");
}

#[test]
fn the_timeout_backs_off_exponentially_to_its_maximum_and_a_sample_resets_it() {
    let mut rto = Rto::default();
    let mut last = rto.timeout_ns(5 * MS);
    for _ in 0..5 {
        rto.on_timeout();
        let t = rto.timeout_ns(5 * MS);
        assert_eq!(t, (2 * last).min(RETRANSMIT_TIMEOUT_MAX_NS));
        last = t;
    }
    for _ in 0..2 * RETRANSMIT_BACKOFFS_MAX {
        rto.on_timeout();
    }
    assert_eq!(rto.timeout_ns(5 * MS), RETRANSMIT_TIMEOUT_MAX_NS, "capped");
    // Progress, even of retransmitted packets (no sample), clears it.
    assert_eq!(rto.on_ack(40, 2 * MS), None);
    assert_eq!(rto.timeout_ns(5 * MS), 5 * MS);
    rto.on_timeout();
    assert_eq!(rto.timeout_ns(5 * MS), 10 * MS);
    rto.on_first_send(50, 0);
    assert_eq!(rto.on_ack(51, 2 * MS), Some(2 * MS));
    assert_eq!(rto.timeout_ns(5 * MS), 6 * MS);
}

#[test]
fn a_retransmitted_packet_is_never_sampled() {
    let mut rto = Rto::default();
    rto.on_first_send(7, 0);
    assert_eq!(rto.timed(), Some(7));
    rto.on_first_send(8, 10);
    assert_eq!(rto.timed(), Some(7), "one packet timed at a time");
    rto.on_timeout();
    assert_eq!(rto.timed(), None, "Karn: a timeout stops the timing");
    assert_eq!(rto.on_ack(9, 40 * MS), None, "nothing sampled");
    assert_eq!(rto.srtt(), None);
    // An acknowledgement short of the timed packet samples nothing.
    rto.on_first_send(9, 50 * MS);
    assert_eq!(rto.on_ack(9, 51 * MS), None);
    assert_eq!(rto.on_ack(10, 52 * MS), Some(2 * MS));
}

/// A transport that takes everything and keeps it.
struct Sink(Vec<Vec<u8>>);

impl Sink {
    /// Packet numbers of the data packets taken since the last call.
    fn data_seqs(&mut self) -> Vec<u32> {
        let out = std::mem::take(&mut self.0);
        out.iter()
            .map(|p| decode_packet(p).unwrap().0)
            .filter(|h| !h.is_ack_only())
            .map(|h| h.seq)
            .collect()
    }
}

impl Transport for Sink {
    fn mtu(&self) -> usize {
        1500
    }
    fn tx_burst(&mut self, _: Nanos, packets: &[TxPacket<'_>]) -> usize {
        self.0.extend(packets.iter().map(|p| p.bytes.to_vec()));
        packets.len()
    }
    fn tx_flush(&mut self, _: Nanos) {}
    fn rx_burst(&mut self, _: Nanos, _: usize, _: &mut dyn FnMut(&[u8])) -> usize {
        0
    }
}

fn pair() -> (Sessions, Sessions) {
    let cfg = SessionConfig {
        retransmit_timeout_ns: 5 * MS,
        silence_ns: 1_000 * MS,
        ack_delay_ns: 0,
        ..SessionConfig::default()
    };
    let a = Sessions::new(0, 2, 7, 1, true, cfg).unwrap();
    let b = Sessions::new(1, 2, 7, 1, true, cfg).unwrap();
    (a, b)
}

/// A data packet from node 0 to node 1 (one LogAck).
fn packet(tx: u64) -> Vec<u8> {
    use splitkv_layout::wire::{BodyWriter, MsgHeader, MsgKind, ReplyStatus};
    use splitkv_layout::TxId;
    let mut w = BodyWriter::new();
    w.ack(MsgKind::LogAck, TxId::from_bits(tx), ReplyStatus::Ok);
    let mut msg = Vec::new();
    MsgHeader::whole(MsgKind::LogAck, w.bytes().len() as u32).encode(&mut msg);
    msg.extend_from_slice(w.bytes());
    let mut p = Vec::new();
    PacketHeader {
        cluster_id: 7,
        src: 0,
        dst: 1,
        src_incarnation: 1,
        count: 1,
        len: msg.len() as u32,
        ..PacketHeader::default()
    }
    .encode(&mut p);
    p.extend_from_slice(&msg);
    p
}

fn backlog(p: Option<Vec<u8>>) -> Vec<VecDeque<PacketBuf>> {
    let mut b: Vec<VecDeque<PacketBuf>> = (0..2).map(|_| VecDeque::new()).collect();
    b[1].extend(p.map(PacketBuf::from));
    b
}

/// Node 1 takes `packets` at `at` and its standalone ack reaches node 0
/// at `at` too.
fn deliver_and_ack(a: &mut Sessions, b: &mut Sessions, packets: &[Vec<u8>], at: Nanos) {
    for p in packets {
        let _ = b.receive(at, p);
    }
    let mut tb = Sink(Vec::new());
    b.flush(at, &mut tb, &mut backlog(None));
    for ack in &tb.0 {
        assert!(a.receive(at, ack).is_none(), "an ack alone");
    }
}

#[test]
fn sessions_sample_acknowledged_round_trips_but_never_a_retransmitted_packet() {
    let (mut a, mut b) = pair();
    let mut t = Sink(Vec::new());
    assert_eq!(a.retransmit_timeout_ns(1), 5 * MS);
    // Packet 0 is lost: retransmitted at 5 ms, acknowledged at 6 ms.
    a.flush(0, &mut t, &mut backlog(Some(packet(0))));
    t.0.clear();
    for k in 1..=10 {
        a.flush(k * MS / 2, &mut t, &mut backlog(None));
    }
    let again = std::mem::take(&mut t.0);
    assert_eq!(again.len(), 1, "one retransmission");
    deliver_and_ack(&mut a, &mut b, &again, 6 * MS);
    assert_eq!(a.stats().rtt_samples, 0, "Karn: not sampled");
    assert_eq!(
        a.retransmit_timeout_ns(1),
        5 * MS,
        "progress cleared the backoff"
    );
    // Then a steady 4 ms round trip: the first sample gives 3 × 4 ms, and
    // the timeout converges down to its minimum, the configured 5 ms.
    for i in 1..=60u64 {
        let at = i * 10 * MS;
        a.flush(at, &mut t, &mut backlog(Some(packet(i))));
        let sent = std::mem::take(&mut t.0);
        assert_eq!(sent.len(), 1);
        for k in 1..8 {
            a.flush(at + k * MS / 2, &mut t, &mut backlog(None));
        }
        deliver_and_ack(&mut a, &mut b, &sent, at + 4 * MS);
        if i == 1 {
            assert_eq!(a.retransmit_timeout_ns(1), 12 * MS);
        }
    }
    assert!(t.data_seqs().is_empty(), "no more timeouts");
    assert_eq!(a.stats().retransmissions, 1);
    assert_eq!(a.stats().rtt_samples, 60);
    assert_eq!(a.retransmit_timeout_ns(1), 5 * MS);
}

#[test]
fn time_this_node_did_not_run_is_not_held_against_its_peer() {
    let (mut a, _) = pair();
    let mut t = Sink(Vec::new());
    a.flush(0, &mut t, &mut backlog(Some(packet(1))));
    assert_eq!(t.data_seqs(), vec![0]);
    // Descheduled for 30 ms: on resuming, no retransmission.
    a.flush(30 * MS, &mut t, &mut backlog(None));
    assert!(t.data_seqs().is_empty(), "the stall is forgiven");
    assert_eq!(a.stats().stalls_forgiven, 1);
    // Polling every 100 µs from then on: the timer ran 1 ms (the grace)
    // before the stall, so it fires 4 ms after the resumption.
    let mut now = 30 * MS;
    while t.0.is_empty() {
        now += 100_000;
        a.flush(now, &mut t, &mut backlog(None));
    }
    assert_eq!(now, 30 * MS + 5 * MS - FLUSH_GAP_GRACE_NS);
    assert_eq!(t.data_seqs(), vec![0]);
    assert_eq!(a.stats().stalls_forgiven, 1);
}
