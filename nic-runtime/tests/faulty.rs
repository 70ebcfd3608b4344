//! The fault-injecting transport: rates honoured over 100 000 packets on the
//! in-process transport, reordering and delay seen at the receiver, one seed
//! one outcome, a full hold queue, congestion of the wrapped transport, and the
//! same faults over loopback UDP.

use splitkv_nic::net::faulty::{
    FaultConfig, FaultError, FaultStats, FaultyTransport, FAULT_HOLD_PACKETS_MAX,
};
use splitkv_nic::net::mem::{mem_network, mem_network_bounded, MemTransport};
use splitkv_nic::net::{Transport, TxPacket};
use splitkv_nic::Nanos;

/// Packets per burst in these tests.
const BURST: usize = 32;
/// Virtual time between bursts, ns.
const TICK_NS: Nanos = 1_000;
/// Far enough in the future to release anything still held.
const END_NS: Nanos = 1 << 50;

/// What a receiver saw: sequence numbers in arrival order, with arrival times.
#[derive(Debug, Default, PartialEq)]
struct Seen {
    seqs: Vec<u32>,
    at: Vec<Nanos>,
}

/// Sends `n` numbered packets from `tx` to node 1 in bursts, polling `rx`
/// after each, then releases and drains whatever is still held.
fn run<T: Transport>(tx: &mut FaultyTransport<T>, rx: &mut dyn Transport, n: u32) -> Seen {
    let mut seen = Seen::default();
    let mut now = 0;
    let poll = |rx: &mut dyn Transport, now: Nanos, seen: &mut Seen| {
        rx.rx_burst(now, usize::MAX, &mut |p| {
            seen.seqs
                .push(u32::from_le_bytes(p[..4].try_into().unwrap()));
            seen.at.push(now);
        })
    };
    let bytes: Vec<[u8; 4]> = (0..n).map(u32::to_le_bytes).collect();
    let mut next = 0usize;
    // Each round either takes packets or drains the receiver, so this many suffice.
    for _ in 0..8 * (n as usize / BURST + 2) {
        if next == bytes.len() {
            break;
        }
        let end = (next + BURST).min(bytes.len());
        let burst: Vec<TxPacket<'_>> = bytes[next..end]
            .iter()
            .map(|b| TxPacket { dst: 1, bytes: b })
            .collect();
        next += tx.tx_burst(now, &burst);
        tx.tx_flush(now);
        poll(rx, now, &mut seen);
        now += TICK_NS;
    }
    assert_eq!(next, bytes.len(), "every packet was taken");
    tx.tx_flush(END_NS);
    assert_eq!(tx.held(), 0, "everything held was released");
    poll(rx, END_NS, &mut seen);
    seen
}

/// How many distinct sequence numbers arrived.
fn distinct(seqs: &[u32]) -> usize {
    let mut d = seqs.to_vec();
    d.sort_unstable();
    d.dedup();
    d.len()
}

/// Arrivals of a sequence number lower than one already seen (late arrivals;
/// a duplicate right after its original is not one).
fn late_arrivals(seqs: &[u32]) -> usize {
    let mut max = None;
    let mut late = 0;
    for &s in seqs {
        match max {
            Some(m) if s < m => late += 1,
            _ => max = Some(s),
        }
    }
    late
}

fn faulty_mem(cfg: FaultConfig) -> (FaultyTransport<MemTransport>, MemTransport) {
    let mut ends = mem_network(2);
    let rx = ends.pop().unwrap();
    (FaultyTransport::new(ends.pop().unwrap(), cfg).unwrap(), rx)
}

fn assert_near(what: &str, got: u64, want: u64) {
    // 1% of 100 000 is 1000 ± 31 (one standard deviation): ±15% is ~5σ.
    let tol = want * 15 / 100;
    assert!(
        got.abs_diff(want) <= tol,
        "{what}: {got}, expected {want} ± {tol}"
    );
}

#[test]
fn one_percent_each_is_honoured_over_100k_packets() {
    let n = 100_000u32;
    let (mut tx, mut rx) = faulty_mem(FaultConfig::uniform(10_000, 42));
    assert!(tx.is_lossy(), "a faulty transport is lossy even over mem");
    let seen = run(&mut tx, &mut rx, n);
    let s = tx.stats();
    assert_eq!(s.offered, n as u64);
    for (what, got) in [
        ("lost", s.lost),
        ("duplicated", s.duplicated),
        ("reordered", s.reordered),
    ] {
        assert_near(what, got, n as u64 / 100);
    }
    assert_eq!((s.delayed, s.hold_full), (0, 0));
    assert_eq!(seen.seqs.len() as u64, n as u64 - s.lost + s.duplicated);
    assert_eq!(
        distinct(&seen.seqs) as u64,
        n as u64 - s.lost,
        "only the lost are missing"
    );
    let late = late_arrivals(&seen.seqs) as u64;
    assert!(
        late <= s.reordered && late + 1 >= s.reordered,
        "each reordered packet is overtaken: {late} late, {} reordered",
        s.reordered
    );
}

#[test]
fn delayed_packets_arrive_no_earlier_than_the_delay() {
    let n = 100_000u32;
    let delay_ns = 20 * TICK_NS;
    let cfg = FaultConfig {
        delay_ppm: 10_000,
        delay_ns,
        ..FaultConfig::none(9)
    };
    let (mut tx, mut rx) = faulty_mem(cfg);
    let seen = run(&mut tx, &mut rx, n);
    let s = tx.stats();
    assert_near("delayed", s.delayed, n as u64 / 100);
    assert_eq!(seen.seqs.len(), n as usize, "delay loses nothing");
    // Packet seq left in burst seq / BURST, at that many ticks.
    let lag = |i: usize| seen.at[i] - (seen.seqs[i] as u64 / BURST as u64) * TICK_NS;
    let late = (0..seen.seqs.len()).filter(|&i| lag(i) > 0).count() as u64;
    assert_eq!(late, s.delayed, "exactly the delayed packets arrive late");
    assert!((0..seen.seqs.len()).all(|i| lag(i) == 0 || lag(i) >= delay_ns));
}

#[test]
fn one_seed_one_outcome_another_seed_another() {
    let outcome = |seed| -> (Seen, FaultStats) {
        let (mut tx, mut rx) = faulty_mem(FaultConfig::uniform(20_000, seed));
        let seen = run(&mut tx, &mut rx, 10_000);
        (seen, tx.stats())
    };
    let a = outcome(7);
    assert_eq!(a, outcome(7), "the same seed reproduces every fault");
    assert_ne!(a.0, outcome(8).0, "another seed gives other faults");
}

#[test]
fn no_faults_is_transparent_and_rates_above_one_are_refused() {
    let (mut tx, mut rx) = faulty_mem(FaultConfig::none(1));
    let seen = run(&mut tx, &mut rx, 1000);
    assert_eq!(seen.seqs, (0..1000).collect::<Vec<_>>());
    let all = FaultConfig {
        delay_ppm: 1,
        ..FaultConfig::uniform(333_333, 1)
    };
    let mem = mem_network(1).pop().unwrap();
    assert!(
        FaultyTransport::new(mem, all).is_ok(),
        "a sum of exactly one is fine"
    );
    let above = FaultConfig {
        delay_ppm: 2,
        ..all
    };
    let mem = mem_network(1).pop().unwrap();
    assert_eq!(
        FaultyTransport::new(mem, above).err(),
        Some(FaultError::RatesAboveOne { sum_ppm: 1_000_001 })
    );
}

#[test]
fn a_full_hold_queue_lets_packets_pass() {
    // Every packet delayed for longer than the run: the hold queue fills, the
    // rest pass unharmed, and the held ones come out at the end.
    let cfg = FaultConfig {
        delay_ppm: 1_000_000,
        delay_ns: END_NS / 2,
        ..FaultConfig::none(3)
    };
    let (mut tx, mut rx) = faulty_mem(cfg);
    let n = 1000u32;
    let seen = run(&mut tx, &mut rx, n);
    let s = tx.stats();
    assert_eq!(s.delayed, FAULT_HOLD_PACKETS_MAX as u64);
    assert_eq!(s.hold_full, n as u64 - FAULT_HOLD_PACKETS_MAX as u64);
    assert_eq!(s.released, FAULT_HOLD_PACKETS_MAX as u64);
    assert_eq!(
        seen.seqs[..FAULT_HOLD_PACKETS_MAX],
        (0..64).map(|i| i + 64).collect::<Vec<_>>()[..]
    );
    let mut all = seen.seqs.clone();
    all.sort_unstable();
    assert_eq!(all, (0..n).collect::<Vec<_>>());
}

#[test]
fn a_congested_inner_transport_keeps_the_rest_with_the_caller() {
    let mut ends = mem_network_bounded(2, 8);
    let mut rx = ends.pop().unwrap();
    let mut tx =
        FaultyTransport::new(ends.pop().unwrap(), FaultConfig::uniform(50_000, 5)).unwrap();
    let n = 5000u32;
    let seen = run(&mut tx, &mut rx, n);
    let s = tx.stats();
    assert!(tx.inner().congested() > 0, "the 8-packet queue filled");
    assert_eq!(s.offered, n as u64);
    assert_eq!(
        distinct(&seen.seqs) as u64,
        n as u64 - s.lost,
        "congestion lost nothing"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn faults_over_loopback_udp() {
    use splitkv_nic::net::udp::{udp_loopback_network, UDP_MTU_DEFAULT};
    let mut ends = udp_loopback_network(2, UDP_MTU_DEFAULT).unwrap();
    let mut rx = ends.pop().unwrap();
    let mut tx =
        FaultyTransport::new(ends.pop().unwrap(), FaultConfig::uniform(10_000, 11)).unwrap();
    let n = 20_000u32;
    let mut seen = run(&mut tx, &mut rx, n);
    // The kernel may still be handing over the last datagrams: poll a bounded while.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let s = tx.stats();
    let want = (n as u64 - s.lost + s.duplicated) as usize;
    for _ in 0..1_000_000 {
        if seen.seqs.len() >= want || std::time::Instant::now() > deadline {
            break;
        }
        rx.rx_burst(END_NS, 64, &mut |p| {
            seen.seqs
                .push(u32::from_le_bytes(p[..4].try_into().unwrap()))
        });
    }
    assert_eq!(rx.stats().kernel_rx_drops, 0);
    assert_eq!(seen.seqs.len(), want);
    assert!(s.lost > 0 && s.duplicated > 0 && s.reordered > 0, "{s:?}");
    assert!(late_arrivals(&seen.seqs) > 0);
}

#[test]
fn empty_packets_are_held_and_released_like_any_other() {
    let cfg = FaultConfig {
        delay_ppm: 1_000_000,
        delay_ns: 10,
        ..FaultConfig::none(4)
    };
    let (mut tx, mut rx) = faulty_mem(cfg);
    let burst = [TxPacket { dst: 1, bytes: &[] }; 3];
    assert_eq!(tx.tx_burst(0, &burst), 3);
    assert_eq!(tx.held(), 3);
    assert_eq!(
        rx.rx_burst(0, 10, &mut |_| {}),
        0,
        "nothing before the delay"
    );
    tx.tx_flush(10);
    assert_eq!(tx.held(), 0);
    assert_eq!(rx.rx_burst(10, 10, &mut |p| assert!(p.is_empty())), 3);
}
