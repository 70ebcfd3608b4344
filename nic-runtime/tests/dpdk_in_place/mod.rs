//! The reserve/commit send path on net_ring: two whole stacks (batcher,
//! sessions) over two DPDK endpoints, the sender filling mbufs in place.
//! Counts copies per packet: the batcher's append of each body is the one
//! copy, the transport copies nothing on a first transmission, and a
//! retransmission commits the same mbuf by reference when nobody else holds
//! it (a heap copy, counted, when the receiver still does).

use splitkv_layout::wire::{MsgKind, MSG_HEADER_BYTES, PACKET_HEADER_BYTES};
use splitkv_nic::net::dpdk::DpdkTransport;
use splitkv_nic::net::session::SessionConfig;
use splitkv_nic::net::stack::{Stack, StackConfig};
use splitkv_nic::net::Transport;
use splitkv_nic::Nanos;

/// Body bytes of each message.
const BODY_BYTES: usize = 64;
/// Messages per round (several full packets at the default MTU).
const MESSAGES: u32 = 300;
/// Between two flushes: below the sessions' stall grace (a longer gap is
/// taken for this node not running, and its timers move on).
const STEP_NS: Nanos = 500_000;
/// Longest wait for a retransmission (the timeout starts at 5 ms).
const RESEND_WAIT_NS: Nanos = 200_000_000;
/// Most polls while waiting for packets already in the peer's ring.
const POLLS_MAX: usize = 100;

fn stacks(a: &DpdkTransport, b: &DpdkTransport) -> (Stack, Stack) {
    let cfg = StackConfig {
        session: SessionConfig {
            ack_delay_ns: 0,
            silence_ns: 100 * RESEND_WAIT_NS,
            ..SessionConfig::default()
        },
        ..StackConfig::default()
    };
    let mk = |node, t: &DpdkTransport| {
        let mut s = Stack::new(node, 2, t.mtu(), t.is_lossy(), &cfg).expect("a stack");
        assert!(s.attach_lender(t, &cfg), "DPDK lends its mbufs");
        s
    };
    (mk(0, a), mk(1, b))
}

fn body(tag: u32) -> [u8; BODY_BYTES] {
    let mut b = [tag as u8; BODY_BYTES];
    b[..4].copy_from_slice(&tag.to_le_bytes());
    b
}

/// Node 0 queues messages `from..from + MESSAGES` and flushes at `now`.
fn send_round(sa: &mut Stack, a: &mut DpdkTransport, from: u32, now: Nanos) {
    for tag in from..from + MESSAGES {
        sa.try_insert_raw(1, MsgKind::Commit.flow(), MsgKind::Commit, &body(tag))
            .expect("room");
    }
    sa.flush(now, a);
}

/// Node 1 reads what is in its ring: through its stack (`deliver`), whose
/// bodies' tags are appended to `got`, or thrown away (a loss after the
/// port: the mbufs are freed, the sender never hears of them).
fn read(sb: &mut Stack, b: &mut DpdkTransport, now: Nanos, deliver: bool, got: &mut Vec<u32>) {
    for _ in 0..POLLS_MAX {
        let n = b.rx_burst(now, 64, &mut |p| {
            if !deliver {
                return;
            }
            if let Some((_, mut msgs)) = sb.receive(now, p) {
                while let Some(m) = msgs.next_raw() {
                    let (_, bytes) = m.expect("a well-formed message");
                    assert_eq!(bytes.len(), BODY_BYTES);
                    let tag = u32::from_le_bytes(bytes[..4].try_into().unwrap());
                    assert_eq!(bytes, body(tag), "the bytes written in place arrive");
                    got.push(tag);
                }
            }
        });
        if n == 0 {
            break;
        }
    }
    sb.flush(now, b); // acknowledgements
}

/// Node 0 takes node 1's acknowledgements.
fn take_acks(sa: &mut Stack, a: &mut DpdkTransport, now: Nanos) {
    for _ in 0..POLLS_MAX {
        if a.rx_burst(now, 64, &mut |p| assert!(sa.receive(now, p).is_none())) == 0 {
            break;
        }
    }
    sa.flush(now, a);
}

/// Node 0 flushes every [`STEP_NS`] from `now` until it retransmits;
/// returns when it did.
fn await_resend(sa: &mut Stack, a: &mut DpdkTransport, mut now: Nanos) -> Nanos {
    let before = sa.stats().sessions.retransmissions;
    let until = now + RESEND_WAIT_NS;
    while sa.stats().sessions.retransmissions == before {
        assert!(now < until, "no retransmission within {RESEND_WAIT_NS} ns");
        now += STEP_NS;
        sa.flush(now, a);
    }
    now
}

/// The whole scenario on a fresh pair of endpoints.
pub fn stacks_fill_mbufs_in_place(mut a: DpdkTransport, mut b: DpdkTransport) {
    let (mut sa, mut sb) = stacks(&a, &b);
    let mut got = Vec::new();

    // First transmissions: filled in place, queued by reference.
    send_round(&mut sa, &mut a, 0, 0);
    let (net, dpdk) = (sa.stats(), a.stats());
    assert!(net.batch.packets > 1, "several packets: {net:?}");
    assert_eq!(
        net.batch.lent_packets, net.batch.packets,
        "every packet in an mbuf"
    );
    assert_eq!(
        net.batch.bytes as usize,
        net.batch.packets as usize * PACKET_HEADER_BYTES
            + MESSAGES as usize * (MSG_HEADER_BYTES + BODY_BYTES)
    );
    assert_eq!(dpdk.tx_in_place, net.sessions.packets_sent);
    assert_eq!(dpdk.tx_copied, 0, "one copy per packet: the batcher's");
    assert_eq!(
        a.mbufs_lent() as u64,
        net.batch.packets,
        "held for retransmission"
    );
    read(&mut sb, &mut b, 0, true, &mut got);
    take_acks(&mut sa, &mut a, 0);
    assert_eq!(got, (0..MESSAGES).collect::<Vec<_>>());
    assert_eq!(a.mbufs_lent(), 0, "acknowledged: every mbuf given back");
    assert!(sa.is_idle());

    // A round lost after the port: the receiver freed its references, so a
    // retransmission commits the very same mbufs (no copy).
    let first = sa.stats().sessions.packets_sent;
    send_round(&mut sa, &mut a, MESSAGES, 1);
    read(&mut sb, &mut b, 1, false, &mut got);
    let round = sa.stats().sessions.packets_sent - first;
    let now = await_resend(&mut sa, &mut a, 1);
    let (net, dpdk) = (sa.stats(), a.stats());
    assert_eq!(
        net.sessions.retransmissions, round,
        "the lost round went again"
    );
    assert_eq!(net.sessions.resend_copies, 0);
    assert_eq!(dpdk.tx_copied, 0, "retransmitted by reference");
    assert_eq!(dpdk.tx_in_place, net.sessions.packets_sent);
    read(&mut sb, &mut b, now, true, &mut got);
    take_acks(&mut sa, &mut a, now);
    assert_eq!(got, (0..2 * MESSAGES).collect::<Vec<_>>());
    assert_eq!(a.mbufs_lent(), 0);

    // A round the receiver has not read yet: its mbufs are still shared, so
    // the retransmission patches heap copies (counted) and the transport
    // copies them; the receiver then gets each message once.
    let (resent, copied) = (net.sessions.retransmissions, dpdk.tx_copied);
    let first = sa.stats().sessions.packets_sent;
    send_round(&mut sa, &mut a, 2 * MESSAGES, now);
    let round = sa.stats().sessions.packets_sent - first;
    let now = await_resend(&mut sa, &mut a, now);
    let (net, dpdk) = (sa.stats(), a.stats());
    assert_eq!(net.sessions.retransmissions - resent, round);
    assert_eq!(
        net.sessions.resend_copies, round,
        "shared: copied, not written"
    );
    assert_eq!(dpdk.tx_copied - copied, round);
    read(&mut sb, &mut b, now, true, &mut got);
    take_acks(&mut sa, &mut a, now);
    assert_eq!(
        got,
        (0..3 * MESSAGES).collect::<Vec<_>>(),
        "each once, in order"
    );
    assert_eq!(sb.stats().sessions.duplicates_dropped, round);
    assert_eq!(a.mbufs_lent(), 0);

    // The old path, kept for measurement: heap packets, one copy each in
    // the transport on top of the batcher's.
    let cfg = StackConfig {
        fill_in_place: false,
        ..StackConfig::default()
    };
    let mut old = Stack::new(0, 2, a.mtu(), true, &cfg).expect("a stack");
    assert!(!old.attach_lender(&a, &cfg));
    let copied = a.stats().tx_copied;
    send_round(&mut old, &mut a, 0, now);
    assert_eq!(old.stats().batch.lent_packets, 0);
    assert_eq!(
        a.stats().tx_copied - copied,
        old.stats().sessions.packets_sent
    );
    b.rx_burst(0, 4096, &mut |_| {});
}
