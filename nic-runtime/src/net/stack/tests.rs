//! The whole stack (batcher, fragmentation, sessions, reassembly) between two
//! nodes over a test-only link that loses, duplicates and reorders packets
//! with a seeded xoshiro256**: every message arrives exactly once and in
//! order; a 66 KB message is fragmented and reassembled; batching off gives
//! one message per packet.

use super::*;
use crate::net::fragment::Reassembly;
use crate::net::session::SessionConfig;
use crate::net::TxPacket;
use splitkv_layout::wire::{Body, MsgKind, ReplyStatus, ITEMS_PER_MESSAGE_MAX, MESSAGE_BYTES_MAX};
use splitkv_layout::{TxId, VALUE_BYTES_MAX};

/// xoshiro256** (Blackman and Vigna), seeded by SplitMix64.
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
    /// True with probability `percent`/100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// One direction of a faulty link: what the sender's stack hands over.
struct Outbox {
    sent: Vec<Vec<u8>>,
    mtu: usize,
}

impl Transport for Outbox {
    fn mtu(&self) -> usize {
        self.mtu
    }
    fn tx_burst(&mut self, _now: Nanos, packets: &[TxPacket<'_>]) -> usize {
        self.sent.extend(packets.iter().map(|p| p.bytes.to_vec()));
        packets.len()
    }
    fn tx_flush(&mut self, _now: Nanos) {}
    fn rx_burst(&mut self, _: Nanos, _: usize, _: &mut dyn FnMut(&[u8])) -> usize {
        0
    }
}

/// Packets in flight toward one node, each with its delivery time.
#[derive(Default)]
struct Wire {
    in_flight: Vec<(Nanos, u64, Vec<u8>)>,
    order: u64,
}

impl Wire {
    /// Takes what `out` sent at `now`: each packet is lost with probability
    /// `loss`%, duplicated with `dup`%, and delayed by a random 0..`spread`
    /// ns (so packets overtake each other).
    fn carry(&mut self, out: &mut Outbox, now: Nanos, rng: &mut Xoshiro, f: (u64, u64, u64)) {
        let (loss, dup, spread) = f;
        for p in out.sent.drain(..) {
            if rng.chance(loss) {
                continue;
            }
            let copies = if rng.chance(dup) { 2 } else { 1 };
            for _ in 0..copies {
                self.order += 1;
                let at = now + rng.next() % spread;
                self.in_flight.push((at, self.order, p.clone()));
            }
        }
    }
    /// Packets due at `now`, in delivery order.
    fn due(&mut self, now: Nanos) -> Vec<Vec<u8>> {
        self.in_flight.sort_by_key(|(at, o, _)| (*at, *o));
        let n = self
            .in_flight
            .iter()
            .take_while(|(at, _, _)| *at <= now)
            .count();
        self.in_flight.drain(..n).map(|(_, _, p)| p).collect()
    }
}

/// A node of the test: its stack, its reassembly, and what it received.
struct End {
    stack: Stack,
    out: Outbox,
    reassembly: Reassembly,
    /// (tx_id, body length) of each message received, in order.
    got: Vec<(u64, usize)>,
}

impl End {
    fn new(node: NodeId, lossy: bool, cfg: &StackConfig) -> End {
        let mtu = 1500;
        End {
            stack: Stack::new(node, 2, mtu, lossy, cfg).unwrap(),
            out: Outbox {
                sent: Vec::new(),
                mtu,
            },
            reassembly: Reassembly::new(2),
            got: Vec::new(),
        }
    }

    fn receive(&mut self, now: Nanos, p: &[u8]) {
        let Some((h, mut msgs)) = self.stack.receive(now, p) else {
            return;
        };
        while let Some(m) = msgs.next_raw() {
            let (mh, raw) = m.unwrap();
            let r = self
                .reassembly
                .on_message(h.src, h.src_incarnation, &mh, raw);
            if let Some((kind, bytes)) = r.unwrap() {
                let body = Body::decode(kind, bytes).unwrap();
                let len = match &body {
                    Body::Commit { items, .. } => items.iter().map(|i| i.value.len()).sum(),
                    _ => 0,
                };
                self.got.push((body.tx_id().to_bits(), len));
            }
        }
    }
}

fn lossy_cfg() -> StackConfig {
    StackConfig {
        session: SessionConfig {
            window_packets: 16,
            backlog_packets: 256,
            ack_delay_ns: 2_000,
            retransmit_timeout_ns: 40_000,
            silence_ns: 1_000_000_000,
        },
        ..StackConfig::default()
    }
}

/// A Commit of `n` items whose values total about `bytes`.
fn big_commit(tx: u64, n: usize, value: usize) -> BodyWriter {
    let mut w = BodyWriter::new();
    w.begin_items(MsgKind::Commit, TxId::from_bits(tx));
    for i in 0..n {
        let v = vec![(tx as u8).wrapping_add(i as u8); value];
        w.push_item(
            &splitkv_layout::Key::new(0, i as u64),
            splitkv_layout::ObjectMeta(1),
            &v,
        );
    }
    w
}

#[test]
fn every_message_arrives_once_and_in_order_despite_loss_duplication_and_reordering() {
    const MESSAGES: u64 = 2_000;
    const ROUNDS_MAX: u64 = 200_000;
    let cfg = lossy_cfg();
    let (mut a, mut b) = (End::new(0, true, &cfg), End::new(1, true, &cfg));
    let (mut to_a, mut to_b) = (Wire::default(), Wire::default());
    let mut rng = Xoshiro::new(10);
    let faults = (10, 10, 8_000);
    let (mut next_a, mut next_b) = (0u64, 0u64);
    let mut w = BodyWriter::new();
    let mut now = 0;
    for _ in 0..ROUNDS_MAX {
        now += 1_000;
        // A sends a burst of small messages (and now and then a fragmented
        // one); B answers with fewer, so acks both ride and go alone.
        for _ in 0..1 + rng.next() % 8 {
            if next_a == MESSAGES {
                break;
            }
            let r = if next_a % 97 == 5 {
                a.stack.try_insert(1, &big_commit(next_a, 3, 1_000))
            } else {
                w.ack(MsgKind::LogAck, TxId::from_bits(next_a), ReplyStatus::Ok);
                a.stack.try_insert(1, &w)
            };
            match r {
                Ok(()) => next_a += 1,
                Err(BatchError::BacklogFull { .. }) => break,
                Err(e) => panic!("{e}"),
            }
        }
        if next_b < MESSAGES / 4 && rng.chance(30) {
            w.ack(MsgKind::CommitAck, TxId::from_bits(next_b), ReplyStatus::Ok);
            if b.stack.try_insert(0, &w).is_ok() {
                next_b += 1;
            }
        }
        a.stack.flush(now, &mut a.out);
        b.stack.flush(now, &mut b.out);
        to_b.carry(&mut a.out, now, &mut rng, faults);
        to_a.carry(&mut b.out, now, &mut rng, faults);
        for p in to_b.due(now) {
            b.receive(now, &p);
        }
        for p in to_a.due(now) {
            a.receive(now, &p);
        }
        let done = next_a == MESSAGES && next_b == MESSAGES / 4;
        if done
            && a.stack.is_idle()
            && b.stack.is_idle()
            && to_a.in_flight.is_empty()
            && to_b.in_flight.is_empty()
        {
            break;
        }
    }
    let ids: Vec<u64> = b.got.iter().map(|g| g.0).collect();
    assert_eq!(
        ids,
        (0..MESSAGES).collect::<Vec<_>>(),
        "A→B exactly once, in order"
    );
    assert!(b.got.iter().filter(|g| g.0 % 97 == 5).all(|g| g.1 == 3_000));
    let ids: Vec<u64> = a.got.iter().map(|g| g.0).collect();
    assert_eq!(
        ids,
        (0..MESSAGES / 4).collect::<Vec<_>>(),
        "B→A exactly once, in order"
    );
    let (sa, sb) = (a.stack.stats().sessions, b.stack.stats().sessions);
    assert!(
        sa.retransmissions > 0,
        "losses were repaired by retransmission"
    );
    assert!(sb.duplicates_dropped > 0 && sb.out_of_order_dropped > 0);
    assert!(sb.acks_sent_alone > 0);
    assert!(b.reassembly.stats().reassembled > 0);
    assert_eq!(sa.sessions_failed + sb.sessions_failed, 0);
}

#[test]
fn a_66_kb_message_is_fragmented_and_reassembled() {
    let cfg = StackConfig::default();
    let (mut a, mut b) = (End::new(0, false, &cfg), End::new(1, false, &cfg));
    // 16 writes of 4 KiB: the Commit a transaction of that size sends (or,
    // while the node's value limit is lower, as many items of that limit as
    // make the same 64 KiB of values).
    let value = VALUE_BYTES_MAX.min(4096);
    let items = (16 * 4096 / value).min(ITEMS_PER_MESSAGE_MAX);
    let w = big_commit(42, items, value);
    assert!(w.bytes().len() > 65_000 && w.bytes().len() <= MESSAGE_BYTES_MAX);
    a.stack.try_insert(1, &w).unwrap();
    a.stack.flush(0, &mut a.out);
    let packets = a.out.sent.len();
    assert_eq!(packets, w.bytes().len().div_ceil(1500 - 48));
    for p in std::mem::take(&mut a.out.sent) {
        b.receive(1, &p);
    }
    assert_eq!(b.got, vec![(42, items * value)]);
    let s = a.stack.stats().batch;
    assert_eq!((s.fragmented_messages, s.fragments as usize), (1, packets));
    assert_eq!(b.reassembly.stats().reassembled, 1);
    // One byte more than the limit is refused, and nothing is queued.
    let over = vec![0u8; MESSAGE_BYTES_MAX + 1];
    assert!(matches!(
        a.stack
            .try_insert_raw(1, MsgKind::Commit.flow(), MsgKind::Commit, &over),
        Err(BatchError::TooLarge { .. })
    ));
}

#[test]
fn batching_off_sends_one_message_per_packet() {
    for batching in [true, false] {
        let cfg = StackConfig {
            batching,
            ..StackConfig::default()
        };
        let (mut a, mut b) = (End::new(0, false, &cfg), End::new(1, false, &cfg));
        let mut w = BodyWriter::new();
        for tx in 0..40 {
            w.ack(MsgKind::LogAck, TxId::from_bits(tx), ReplyStatus::Ok);
            a.stack.try_insert(1, &w).unwrap();
        }
        a.stack.flush(0, &mut a.out);
        for p in std::mem::take(&mut a.out.sent) {
            b.receive(1, &p);
        }
        assert_eq!(b.got.len(), 40);
        let s = a.stack.stats();
        let expected = if batching { 40.0 } else { 1.0 };
        assert_eq!(s.messages_per_packet(), expected, "batching {batching}");
        assert_eq!(s.sessions.packets_sent, s.batch.packets);
        let r = b.stack.stats().sessions;
        assert_eq!(
            (r.packets_received, r.messages_received),
            (s.batch.packets, 40)
        );
        assert_eq!(
            s.sessions.header_bytes_sent,
            s.batch.packets * PACKET_HEADER_BYTES as u64
        );
    }
}
