//! The reserve/commit path through a whole stack, on a test transport that
//! lends heap buffers with counted references ([`HeapLender`]) and plays a
//! driver holding each committed buffer until its flush: packets are
//! filled in place and committed by reference; a retransmission commits
//! the same buffer when the driver let go, and patches a heap copy
//! (counted) when it did not; every lent buffer goes back once
//! acknowledged; the old path copies every packet.

use super::*;
use crate::net::txbuf::testing::HeapLender;
use crate::net::{PacketBuf, TxBuf, TxCommit, TxLender, TxPacket};
use splitkv_layout::wire::{decode_packet, MsgKind};
use std::sync::atomic::Ordering;

const MTU: usize = 1500;
const BODY: [u8; 64] = [7; 64];
/// Below the sessions' stall grace, above nothing: timer steps.
const STEP_NS: Nanos = 10_000;

/// A transport whose "driver" holds committed lent buffers until a flush
/// (or longer, `hold`), and whose wire keeps a copy of each packet sent.
struct Lending {
    lender: &'static HeapLender,
    driver: Vec<TxBuf>,
    hold: bool,
    wire: Vec<Vec<u8>>,
    in_place: u64,
    copied: u64,
}

impl Lending {
    fn new() -> Lending {
        Lending {
            lender: HeapLender::leak(MTU, 1024),
            driver: Vec::new(),
            hold: false,
            wire: Vec::new(),
            in_place: 0,
            copied: 0,
        }
    }
}

impl Transport for Lending {
    fn mtu(&self) -> usize {
        MTU
    }
    fn tx_lender(&self) -> Option<&'static dyn TxLender> {
        Some(self.lender)
    }
    fn tx_commit(&mut self, _now: Nanos, packets: &[TxCommit<'_>]) -> usize {
        for p in packets {
            match p.buf {
                PacketBuf::Lent(b) if b.is_from(self.lender) && b.is_exclusive() => {
                    self.in_place += 1;
                    self.driver.push(b.share());
                }
                other => {
                    self.copied += 1;
                    self.wire.push(other.to_vec());
                }
            }
        }
        packets.len()
    }
    fn tx_burst(&mut self, _now: Nanos, packets: &[TxPacket<'_>]) -> usize {
        self.wire.extend(packets.iter().map(|p| p.bytes.to_vec()));
        packets.len()
    }
    fn tx_flush(&mut self, _now: Nanos) {
        if !self.hold {
            self.wire
                .extend(self.driver.drain(..).map(|b| b.as_slice().to_vec()));
        }
    }
    fn rx_burst(&mut self, _: Nanos, _: usize, _: &mut dyn FnMut(&[u8])) -> usize {
        0
    }
}

fn cfg() -> StackConfig {
    StackConfig {
        session: SessionConfig {
            ack_delay_ns: 0,
            retransmit_timeout_ns: 40_000,
            silence_ns: 1_000_000_000,
            ..SessionConfig::default()
        },
        ..StackConfig::default()
    }
}

/// Queues `n` 64-byte messages to node 1 and flushes at `now`.
fn send(a: &mut Stack, t: &mut Lending, n: usize, now: Nanos) {
    for _ in 0..n {
        a.try_insert_raw(1, MsgKind::Commit.flow(), MsgKind::Commit, &BODY)
            .unwrap();
    }
    a.flush(now, t);
}

/// Flushes `a` every [`STEP_NS`] from `now` until it retransmits.
fn await_resend(a: &mut Stack, t: &mut Lending, mut now: Nanos) -> Nanos {
    let before = a.stats().sessions.retransmissions;
    for _ in 0..1_000 {
        now += STEP_NS;
        a.flush(now, t);
        if a.stats().sessions.retransmissions > before {
            return now;
        }
    }
    panic!("no retransmission");
}

/// Node 1 takes what is on the wire and its acknowledgements reach node 0.
fn deliver(a: &mut Stack, t: &mut Lending, b: &mut Stack, now: Nanos) -> usize {
    let mut messages = 0;
    for p in std::mem::take(&mut t.wire) {
        if let Some((_, mut msgs)) = b.receive(now, &p) {
            while let Some(m) = msgs.next_raw() {
                assert_eq!(m.unwrap().1, BODY);
                messages += 1;
            }
        }
    }
    let mut acks = Lending::new();
    b.flush(now, &mut acks);
    for p in acks.wire {
        assert!(a.receive(now, &p).is_none(), "acks only");
    }
    a.flush(now, t);
    messages
}

#[test]
fn packets_are_filled_in_place_and_resent_by_reference() {
    let cfg = cfg();
    let mut t = Lending::new();
    let mut a = Stack::new(0, 2, MTU, true, &cfg).unwrap();
    let mut b = Stack::new(1, 2, MTU, true, &cfg).unwrap();
    assert!(a.attach_lender(&t, &cfg));
    send(&mut a, &mut t, 100, 0);
    let s = a.stats();
    assert!(s.batch.packets > 1);
    assert_eq!(s.batch.lent_packets, s.batch.packets);
    assert_eq!((t.in_place, t.copied), (s.sessions.packets_sent, 0));
    assert!(
        decode_packet(&t.wire[0]).is_ok(),
        "the bytes written in place"
    );

    // Lost on the wire; the driver let go: the same buffers go again.
    t.wire.clear();
    let now = await_resend(&mut a, &mut t, 0);
    let s = a.stats();
    assert_eq!(s.sessions.retransmissions, s.batch.packets);
    assert_eq!(s.sessions.resend_copies, 0);
    assert_eq!((t.in_place, t.copied), (s.sessions.packets_sent, 0));
    assert_eq!(deliver(&mut a, &mut t, &mut b, now), 100);
    assert_eq!(t.lender.out.load(Ordering::Relaxed), 0, "every buffer back");
    assert!(a.is_idle());

    // The driver still holds them: a retransmission patches heap copies.
    t.hold = true;
    send(&mut a, &mut t, 100, now);
    let round = a.stats().batch.packets / 2;
    t.wire.clear();
    let now = await_resend(&mut a, &mut t, now);
    let s = a.stats();
    assert_eq!(s.sessions.resend_copies, round);
    assert_eq!(t.copied, round);
    t.hold = false;
    t.driver.clear();
    assert_eq!(deliver(&mut a, &mut t, &mut b, now), 100);
    assert_eq!(t.lender.out.load(Ordering::Relaxed), 0);
}

#[test]
fn the_old_path_copies_every_packet_and_a_short_lender_is_not_used() {
    let mut t = Lending::new();
    let old = StackConfig {
        fill_in_place: false,
        ..cfg()
    };
    let mut a = Stack::new(0, 2, MTU, true, &old).unwrap();
    assert!(!a.attach_lender(&t, &old));
    send(&mut a, &mut t, 100, 0);
    let s = a.stats();
    assert_eq!(s.batch.lent_packets, 0);
    assert_eq!((t.in_place, t.copied), (0, s.sessions.packets_sent));

    let small: &'static HeapLender = HeapLender::leak(MTU / 2, 8);
    let mut c = Stack::new(0, 2, MTU, true, &cfg()).unwrap();
    assert!(!c.set_tx_lender(Some(small)), "buffers under the MTU");
    assert_eq!(small.reserved.load(Ordering::Relaxed), 0);
}

#[test]
fn a_lender_out_of_buffers_leaves_packets_on_the_heap() {
    let mut t = Lending::new();
    t.lender = HeapLender::leak(MTU, 2);
    let mut a = Stack::new(0, 2, MTU, true, &cfg()).unwrap();
    assert!(a.attach_lender(&t, &cfg()));
    send(&mut a, &mut t, 100, 0);
    let s = a.stats();
    assert_eq!(s.batch.lent_packets, 2);
    assert_eq!(t.in_place, 2);
    assert_eq!(t.copied, s.sessions.packets_sent - 2);
}
