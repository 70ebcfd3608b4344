//! Unit tests of the simulated network: delays, link order, faults, capacity, scripts.

use super::*;
use crate::SimConfig;

#[test]
fn delivers_after_latency_in_time_order() {
    let cfg = SimConfig {
        seed: 3,
        tick_ns: 100,
        latency_ns: 1_000,
        jitter_ns: 500,
        ..SimConfig::default()
    };
    let (net, mut ends) = SimNetwork::new(2, cfg);
    let bytes: Vec<[u8; 1]> = (0..50u8).map(|i| [i]).collect();
    let q: Vec<TxPacket<'_>> = bytes
        .iter()
        .map(|b| TxPacket { dst: 1, bytes: b })
        .collect();
    ends[0].tx_burst(0, &q);
    assert_eq!(net.in_flight(), 50);
    let mut out: Vec<Vec<u8>> = Vec::new();
    assert_eq!(
        ends[1].rx_burst(999, 100, &mut |p| out.push(p.to_vec())),
        0,
        "nothing before the minimum latency"
    );
    assert_eq!(
        ends[1].rx_burst(1_500, 100, &mut |p| out.push(p.to_vec())),
        50
    );
    assert_eq!(net.in_flight(), 0);
    let order: Vec<u8> = out.iter().map(|p| p[0]).collect();
    assert_eq!(
        order,
        (0..50).collect::<Vec<_>>(),
        "one sender's packets to one receiver keep their order"
    );
}

#[test]
fn same_seed_same_delivery_order() {
    let run = |seed| {
        let (_net, mut ends) = SimNetwork::new(
            3,
            SimConfig {
                seed,
                ..SimConfig::default()
            },
        );
        // Two senders: jitter interleaves their packets, by the seed.
        let bytes: Vec<[u8; 1]> = (0..40u8).map(|i| [i]).collect();
        let q: Vec<TxPacket<'_>> = bytes
            .iter()
            .map(|b| TxPacket { dst: 1, bytes: b })
            .collect();
        ends[0].tx_burst(0, &q[..20]);
        ends[2].tx_burst(0, &q[20..]);
        let mut out: Vec<Vec<u8>> = Vec::new();
        ends[1].rx_burst(1 << 40, 100, &mut |p| out.push(p.to_vec()));
        let mine: Vec<u8> = out.iter().map(|p| p[0]).filter(|&b| b < 20).collect();
        assert_eq!(mine, (0..20).collect::<Vec<_>>(), "per-pair order kept");
        out
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
}

/// A network of `nodes` with `net` faults and seed `seed`.
fn faulty(nodes: usize, seed: u64, net: NetFaults) -> (SimNetwork, Vec<SimTransport>) {
    SimNetwork::new(
        nodes,
        SimConfig {
            seed,
            net,
            ..SimConfig::default()
        },
    )
}

/// Sends `count` one-byte packets (their index mod 256) from `src` to `dst`
/// at `now`, one per call; returns how many were taken.
fn send_n(end: &mut SimTransport, dst: NodeId, count: usize, now: Nanos) -> usize {
    (0..count)
        .map(|i| {
            let b = [i as u8];
            end.tx_burst(now, &[TxPacket { dst, bytes: &b }])
        })
        .sum()
}

/// Receives everything due by `now` at `end`.
fn recv_all(end: &mut SimTransport, now: Nanos) -> Vec<u8> {
    let mut out = Vec::new();
    end.rx_burst(now, usize::MAX, &mut |p| out.push(p[0]));
    out
}

const FAR: Nanos = 1 << 40;

#[test]
fn loss_drops_about_the_rate_and_counts_every_drop() {
    let (net, mut ends) = faulty(
        2,
        5,
        NetFaults {
            loss_ppm: 100_000,
            ..NetFaults::none()
        },
    );
    assert_eq!(send_n(&mut ends[0], 1, 2_000, 0), 2_000, "all taken");
    let got = recv_all(&mut ends[1], FAR).len() as u64;
    let s = net.stats();
    assert!((100..300).contains(&s.dropped_loss), "~10%: {s:?}");
    assert_eq!(s.sent, 2_000);
    assert_eq!(
        got + s.dropped_loss,
        2_000,
        "every packet delivered or counted"
    );
    assert_eq!(net.in_flight(), 0);
}

#[test]
fn duplication_delivers_copies() {
    let (net, mut ends) = faulty(
        2,
        6,
        NetFaults {
            duplicate_ppm: 100_000,
            ..NetFaults::none()
        },
    );
    send_n(&mut ends[0], 1, 1_000, 0);
    let got = recv_all(&mut ends[1], FAR);
    let s = net.stats();
    assert!(s.duplicated > 50, "{s:?}");
    assert_eq!(got.len() as u64, 1_000 + s.duplicated);
    assert!(
        got.windows(2).all(|w| w[0] <= w[1] || w[0] == 255),
        "without reordering copies keep the link's order"
    );
}

#[test]
fn reordering_lets_packets_overtake_only_when_on() {
    let order = |reorder_ppm| {
        let (net, mut ends) = faulty(
            2,
            7,
            NetFaults {
                reorder_ppm,
                reorder_delay_ns: 50_000,
                ..NetFaults::none()
            },
        );
        for i in 0..200u8 {
            ends[0].tx_burst(
                i as Nanos * 100,
                &[TxPacket {
                    dst: 1,
                    bytes: &[i],
                }],
            );
        }
        (recv_all(&mut ends[1], FAR), net.stats().reordered)
    };
    let (fifo, none) = order(0);
    assert_eq!(none, 0);
    assert_eq!(fifo, (0..200).collect::<Vec<u8>>(), "FIFO when off");
    let (mixed, some) = order(200_000);
    assert!(some > 10);
    assert_ne!(mixed, fifo, "reordered");
    assert_eq!(mixed.len(), 200, "nothing lost");
}

#[test]
fn exponential_delay_has_a_tail() {
    let (net, mut ends) = faulty(
        2,
        8,
        NetFaults {
            delay: DelayDist::Exponential,
            reorder_ppm: PPM_MAX, // no FIFO clamp: see each packet's own delay
            reorder_delay_ns: 0,
            ..NetFaults::none()
        },
    );
    send_n(&mut ends[0], 1, 1_000, 0);
    let early = recv_all(&mut ends[1], 2_000 + 1_000).len();
    let late = recv_all(&mut ends[1], FAR).len();
    assert!(early > 500, "most within a mean: {early}");
    assert!(late > 20, "a tail beyond the mean: {late}");
    assert_eq!(net.stats().delivered, 1_000);
}

#[test]
fn full_link_refuses_the_rest_of_a_burst_and_never_drops_it() {
    let (net, mut ends) = faulty(
        2,
        9,
        NetFaults {
            link_capacity: 10,
            ..NetFaults::none()
        },
    );
    let bytes: Vec<[u8; 1]> = (0..25u8).map(|i| [i]).collect();
    let q: Vec<TxPacket<'_>> = bytes
        .iter()
        .map(|b| TxPacket { dst: 1, bytes: b })
        .collect();
    assert_eq!(ends[0].tx_burst(0, &q), 10, "the prefix that fits");
    assert_eq!(net.stats().refused_link_full, 1);
    assert_eq!(net.stats().sent, 10);
    assert_eq!(net.stats().dropped(), 0);
    assert_eq!(recv_all(&mut ends[1], FAR), (0..10).collect::<Vec<u8>>());
    assert_eq!(ends[0].tx_burst(FAR, &q[10..]), 10, "room again");
}

#[test]
fn seeded_partitions_drop_across_and_heal() {
    let (net, mut ends) = faulty(
        3,
        10,
        NetFaults {
            partition_ppm: 50_000,
            partition_ns_min: 10_000,
            partition_ns_max: 20_000,
            ..NetFaults::none()
        },
    );
    let mut got = 0;
    for step in 0..2_000u64 {
        let now = step * 1_000;
        net.tick(now);
        for (s, end) in ends.iter_mut().enumerate() {
            let dst = ((s + 1) % 3) as NodeId;
            got += send_n(end, dst, 1, now);
        }
        for e in ends.iter_mut() {
            recv_all(e, now);
        }
    }
    let s = net.stats();
    assert!(s.partitions > 10, "{s:?}");
    assert!(s.heals + 1 >= s.partitions, "each heals: {s:?}");
    assert!(s.dropped_partition > 0, "{s:?}");
    assert_eq!(got as u64, s.sent);
    assert_eq!(s.sent, s.delivered + s.dropped() + net.in_flight() as u64);
}

#[test]
fn one_way_partition_cuts_one_direction() {
    let (net, mut ends) = faulty(2, 11, NetFaults::none());
    net.partition(0b01, true, 0, 1_000_000);
    send_n(&mut ends[0], 1, 5, 0);
    send_n(&mut ends[1], 0, 5, 0);
    assert_eq!(recv_all(&mut ends[1], 100_000).len(), 0, "0 -> 1 cut");
    assert_eq!(recv_all(&mut ends[0], 100_000).len(), 5, "1 -> 0 open");
    assert_eq!(net.stats().dropped_partition, 5);
    net.tick(1_000_000);
    assert_eq!(net.stats().heals, 1);
    send_n(&mut ends[0], 1, 5, 1_000_000);
    assert_eq!(recv_all(&mut ends[1], FAR).len(), 5, "healed");
}

#[test]
fn clog_delays_without_loss() {
    let (net, mut ends) = faulty(2, 12, NetFaults::none());
    net.clog(0, 1, 0, 500_000);
    send_n(&mut ends[0], 1, 5, 0);
    assert_eq!(recv_all(&mut ends[1], 499_999).len(), 0, "clogged");
    assert_eq!(recv_all(&mut ends[1], 500_000).len(), 5, "all after it");
    assert_eq!(net.stats().clogs, 1);
    assert_eq!(net.stats().dropped(), 0);
}

#[test]
fn crash_drops_everything_to_and_from_the_node() {
    let (net, mut ends) = faulty(3, 13, NetFaults::none());
    send_n(&mut ends[0], 1, 4, 0);
    send_n(&mut ends[1], 2, 4, 0);
    send_n(&mut ends[2], 0, 4, 0);
    net.crash(1, 10);
    assert!(net.is_crashed(1));
    assert_eq!(net.stats().dropped_crashed, 8, "in flight to and from 1");
    net.crash(1, 11);
    assert_eq!(net.stats().crashes, 1, "once");
    assert_eq!(send_n(&mut ends[0], 1, 3, 20), 3, "taken, then dropped");
    assert_eq!(net.stats().dropped_crashed, 11);
    assert_eq!(recv_all(&mut ends[0], FAR).len(), 4, "2 -> 0 unharmed");
    assert_eq!(recv_all(&mut ends[1], FAR).len(), 0);
}

#[test]
fn scripted_hold_and_chosen_delivery() {
    let (net, mut ends) = faulty(2, 14, NetFaults::none());
    net.hold(0, 1, true, 0);
    send_n(&mut ends[0], 1, 3, 0);
    assert_eq!(recv_all(&mut ends[1], FAR).len(), 0, "held");
    let held = net.held(0, 1);
    assert_eq!(
        held.iter().map(|h| h.bytes[0]).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    assert!(net.deliver_held(0, 1, held[2].seq), "pick the last");
    assert!(!net.deliver_held(0, 1, held[2].seq), "only once");
    assert_eq!(recv_all(&mut ends[1], FAR), [2]);
    net.hold(0, 1, false, 0);
    assert_eq!(recv_all(&mut ends[1], FAR), [0, 1]);
    assert_eq!(net.stats().forced_deliveries, 1);
    let trace = net.trace().tail(20);
    assert!(
        trace.contains("hold") && trace.contains("release"),
        "{trace}"
    );
}

#[test]
fn trace_ring_keeps_the_last_events_and_hashes_all() {
    let cfg = SimConfig {
        trace_events: 8,
        ..SimConfig::default()
    };
    let (net, mut ends) = SimNetwork::new(2, cfg);
    send_n(&mut ends[0], 1, 20, 0);
    recv_all(&mut ends[1], FAR);
    let t = net.trace();
    assert_eq!(t.total(), 40, "20 sends, 20 deliveries");
    assert_eq!(t.events().count(), 8);
    assert!(t.tail(3).contains("deliver 0->1 #20"), "{}", t.tail(3));
    assert_ne!(t.hash(), crate::trace::TRACE_SEED);
}
