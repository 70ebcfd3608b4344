//! Messages per second between two endpoints, batching off vs on (Dandelion §5.1,
//! Figures 4–5; the Dnl network stack's batching layer). Run with
//! `cargo bench -p splitkv-bench --bench dnl_messages`.
//!
//! One thread plays both endpoints, each a whole Dnl [`Stack`] (batcher and
//! sessions). A round inserts [`MESSAGES_PER_ROUND`] messages for node 1 into
//! node 0's stack and flushes it — with batching off every message is sealed
//! in a packet of its own, with batching on as many share a packet as fit the
//! transport's MTU, up to `MESSAGES_PER_PACKET_MAX`; the sessions number and
//! send them — then polls node 1 until every message has passed its session
//! and been decoded (each message's body), and node 1 acknowledges (a
//! standalone ack, taken by node 0 at the start of the next round). The figure
//! is messages per second of the thread's CPU time for the whole round:
//! sender and receiver work, and on `udp` the kernel's work done in the
//! thread's system calls (the machine's cores are shared, so wall time would
//! measure the other jobs too). After each case the benchmark prints the
//! messages per packet and, on `udp`, the `sendmmsg`/`recvmmsg` calls per
//! message.
//!
//! Message sizes are body bytes: `ack` is a LOG acknowledgement, the smallest
//! message the protocol has (a 9-byte body; no message kind has a 16-byte
//! body, so it stands in for the batching target's 16-byte case), and `log64` a
//! LOG with one item whose 30-byte value makes a 64-byte body.
//!
//! | benchmark | transport | MTU |
//! |---|---|---|
//! | `dnl_messages/mem/<size>/<off or on>` | in-process channels | 9000 B |
//! | `dnl_messages/udp/<size>/<off or on>` | kernel UDP over 127.0.0.1, `sendmmsg`/`recvmmsg` | 1472 B (standard Ethernet) |
//! | `dnl_messages/dpdk_ring/<size>/<off, on or on_copy>` | DPDK, two ports joined by rings (net_ring), feature `dpdk` | 1472 B |
//! | `dnl_messages/dpdk_memif/<size>/<off, on or on_copy>` | DPDK, a net_memif server and client port in this process, feature `dpdk` | 1472 B |
//!
//! The DPDK cases (`cargo bench -p splitkv-bench --features dpdk --bench
//! dnl_messages`) start EAL without hugepages or PCI (`--no-huge --no-pci`);
//! the calls per message they print are `rte_eth_tx_burst` and
//! `rte_eth_rx_burst` calls. Both memif ports live in this one process, so
//! the figure is the transport's CPU cost (each frame copied into the shared
//! ring and out again), not two processes on two cores.
//!
//! **Filled in place or copied.** On a transport that lends its buffers
//! (DPDK: mbufs; see `splitkv_nic::net::txbuf`), batching on is measured
//! twice: `on` fills each packet in place in a lent mbuf (the default: one
//! copy of each body, the batcher's), and `on_copy` takes the path from
//! before lending (heap packets that the transport copies into mbufs: two
//! copies). After the pair the benchmark prints both rates from its own
//! CPU-time totals and their ratio, side by side, with the transport's
//! copies per packet sent (`tx_copied` over packets sent).
//!
//! A round whose messages do not all arrive within [`RECEIVE_POLLS_MAX`]
//! polls (a receive buffer overflowed) is counted and reported on stderr;
//! its figure then overstates the rate.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use splitkv_bench::measure::thread_cpu_time;
use splitkv_layout::key::Key;
use splitkv_layout::meta::ObjectMeta;
use splitkv_layout::wire::{Body, BodyWriter, MsgKind, ReplyStatus};
use splitkv_layout::TxId;
use splitkv_nic::net::mem::{mem_network, MemTransport};
use splitkv_nic::net::session::{SessionConfig, SESSION_WINDOW_PACKETS_MAX};
use splitkv_nic::net::stack::{Stack, StackConfig};
use splitkv_nic::net::udp::{udp_loopback_network, UdpTransport, UDP_MTU_DEFAULT};
use splitkv_nic::net::Transport;
use std::hint::black_box;
use std::time::Duration;

/// Messages sent per measured round.
const MESSAGES_PER_ROUND: usize = 256;
/// Most receive polls per round before the round is declared short.
const RECEIVE_POLLS_MAX: usize = 1_000_000;
/// Most packets lent per receive poll.
const RX_BURST: usize = 64;

/// The two message bodies measured.
fn bodies() -> [(&'static str, BodyWriter); 2] {
    let mut ack = BodyWriter::new();
    ack.ack(MsgKind::LogAck, TxId::from_bits(7), ReplyStatus::Ok);
    let mut log = BodyWriter::new();
    log.begin_items(MsgKind::Log, TxId::from_bits(7));
    log.push_item(&Key::new(1, 42), ObjectMeta::default(), &[0xAB; 30]);
    assert_eq!(ack.bytes().len(), 9);
    assert_eq!(log.bytes().len(), 64);
    [("ack", ack), ("log64", log)]
}

/// A stack for `node` of a 2-node cluster: a window that holds a whole
/// round, and acknowledgements sent at the first flush after a packet (the
/// benchmark's clock does not move).
fn stack(node: u16, transport: &impl Transport, mode: Mode) -> Stack {
    let cfg = StackConfig {
        batching: mode.batching,
        fill_in_place: mode.fill_in_place,
        session: SessionConfig {
            window_packets: SESSION_WINDOW_PACKETS_MAX,
            ack_delay_ns: 0,
            ..SessionConfig::default()
        },
        ..StackConfig::default()
    };
    let mut s =
        Stack::new(node, 2, transport.mtu(), transport.is_lossy(), &cfg).expect("a valid stack");
    s.attach_lender(transport, &cfg);
    s
}

/// One measured configuration of a stack.
#[derive(Debug, Clone, Copy)]
struct Mode {
    /// The name in the benchmark id.
    name: &'static str,
    batching: bool,
    /// Fill packets in lent buffers when the transport lends any.
    fill_in_place: bool,
}

/// Batching off, on, and (on a transport that lends buffers) on with the
/// copying path from before lending.
const MODES: [Mode; 3] = [
    Mode {
        name: "off",
        batching: false,
        fill_in_place: true,
    },
    Mode {
        name: "on",
        batching: true,
        fill_in_place: true,
    },
    Mode {
        name: "on_copy",
        batching: true,
        fill_in_place: false,
    },
];

/// Node 0's side: takes node 1's acknowledgements of the previous round,
/// queues one round of `body` for node 1 and flushes (seal, number, send).
fn send_round(sender: &mut Stack, tx: &mut impl Transport, body: &BodyWriter) {
    tx.rx_burst(0, RX_BURST, &mut |p| {
        black_box(sender.receive(0, p).is_some());
    });
    for _ in 0..MESSAGES_PER_ROUND {
        sender
            .try_insert(1, body)
            .expect("the backlog holds a round");
    }
    sender.flush(0, tx);
}

/// Polls `rx` until `want` messages passed node 1's session and were decoded
/// or the poll bound is hit, then acknowledges; returns how many were decoded.
fn receive_round(receiver: &mut Stack, rx: &mut impl Transport, want: usize) -> usize {
    let mut got = 0;
    for _ in 0..RECEIVE_POLLS_MAX {
        if got >= want {
            break;
        }
        rx.rx_burst(0, RX_BURST, &mut |p| {
            let Some((_, msgs)) = receiver.receive(0, p) else {
                return;
            };
            for m in msgs {
                let (_, body) = m.expect("a well-formed message");
                black_box(matches!(body, Body::LogAck { .. } | Body::Log { .. }));
                got += 1;
            }
        });
    }
    receiver.flush(0, rx);
    got
}

/// Call counters of an endpoint, `(send, receive)` calls so far
/// (`sendmmsg`/`recvmmsg` on udp, `rte_eth_tx_burst`/`rte_eth_rx_burst` on
/// DPDK), for the per-message figures printed after each case (zero for `mem`).
type Syscalls<T> = fn(&T) -> (u64, u64);
/// Packets an endpoint copied into its own buffers so far (0 where the
/// transport does not count them).
type Copies<T> = fn(&T) -> u64;

/// Benchmarks one transport pair for both sizes, batching off and on.
fn bench_transport<T: Transport>(
    c: &mut Criterion,
    name: &str,
    pair: [T; 2],
    calls: Syscalls<T>,
    copies: Copies<T>,
) {
    let mut group = c.benchmark_group(format!("dnl_messages/{name}"));
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Elements(MESSAGES_PER_ROUND as u64));
    let [mut tx, mut rx] = pair;
    let lends = tx.tx_lender().is_some();
    for (size, body) in bodies() {
        // Messages per second of CPU time of `on` and `on_copy`, for the ratio.
        let mut rates = [0.0f64; 2];
        for mode in MODES.iter().filter(|m| lends || m.fill_in_place) {
            let mut sender = stack(0, &tx, *mode);
            let mut receiver = stack(1, &rx, *mode);
            let (sends0, recvs0, copies0) = (calls(&tx).0, calls(&rx).1, copies(&tx));
            let mut short_rounds = 0u64;
            let (mut total_msgs, mut total_cpu) = (0u64, Duration::ZERO);
            group.bench_function(BenchmarkId::new(size, mode.name), |b| {
                // Thread CPU time, as in the `tables` benchmarks: the machine's
                // two cores are shared, and the kernel's UDP work runs in this
                // thread's system calls.
                b.iter_custom(|rounds| {
                    let start = thread_cpu_time();
                    for _ in 0..rounds {
                        send_round(&mut sender, &mut tx, &body);
                        let got = receive_round(&mut receiver, &mut rx, MESSAGES_PER_ROUND);
                        short_rounds += (got < MESSAGES_PER_ROUND) as u64;
                    }
                    let cpu = thread_cpu_time() - start;
                    total_msgs += rounds * MESSAGES_PER_ROUND as u64;
                    total_cpu += cpu;
                    cpu
                })
            });
            let s = sender.stats();
            let per_msg = |n: u64| n as f64 / s.batch.messages.max(1) as f64;
            let rate = total_msgs as f64 / total_cpu.as_secs_f64().max(1e-9);
            eprintln!(
                "dnl_messages/{name}/{size}/{}: {:.1} messages per packet, \
                 {:.4} send and {:.4} receive calls per message, {:.2} transport copies \
                 per packet sent, {:.2} M messages/s of CPU time, {short_rounds} short rounds",
                mode.name,
                s.batch.messages as f64 / s.batch.packets.max(1) as f64,
                per_msg(calls(&tx).0 - sends0),
                per_msg(calls(&rx).1 - recvs0),
                (copies(&tx) - copies0) as f64 / s.sessions.packets_sent.max(1) as f64,
                rate / 1e6,
            );
            match mode.name {
                "on" => rates[0] = rate,
                "on_copy" => rates[1] = rate,
                _ => {}
            }
        }
        if lends {
            eprintln!(
                "dnl_messages/{name}/{size}: filled in place {:.2} vs copied {:.2} M messages/s: \
                 ratio {:.2}",
                rates[0] / 1e6,
                rates[1] / 1e6,
                rates[0] / rates[1].max(1e-9),
            );
        }
    }
    group.finish();
}

fn dnl_messages(c: &mut Criterion) {
    let [a, b]: [MemTransport; 2] = mem_network(2).try_into().expect("two endpoints");
    bench_transport(c, "mem", [a, b], |_| (0, 0), |_| 0);
    let [a, b]: [UdpTransport; 2] = udp_loopback_network(2, UDP_MTU_DEFAULT)
        .expect("two UDP endpoints on 127.0.0.1")
        .try_into()
        .expect("two endpoints");
    bench_transport(
        c,
        "udp",
        [a, b],
        |t| (t.stats().sendmmsg_calls, t.stats().recvmmsg_calls),
        |_| 0,
    );
    #[cfg(feature = "dpdk")]
    dpdk_cases::bench(c);
}

/// The DPDK cases: net_ring and net_memif endpoint pairs in this process.
#[cfg(feature = "dpdk")]
mod dpdk_cases {
    use super::bench_transport;
    use criterion::Criterion;
    use splitkv_nic::net::dpdk::{
        dpdk_ring_pair, DpdkConfig, DpdkPeer, DpdkTransport, Eal, MacAddr,
    };
    use splitkv_nic::net::{Transport, TxPacket};
    use std::net::{Ipv4Addr, SocketAddrV4};

    /// Most polls while waiting for a memif link to come up (the server
    /// and client connect over a Unix socket in EAL's interrupt thread).
    const LINK_POLLS_MAX: usize = 10_000;

    fn peer(last: u8) -> DpdkPeer {
        DpdkPeer {
            mac: MacAddr([2, 0, 0, 0, 0, last]),
            addr: SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, last), 7000),
        }
    }

    /// Endpoints for nodes 0 and 1 on the ports named `devices`.
    fn pair(eal: &Eal, devices: [&str; 2]) -> [DpdkTransport; 2] {
        let peers = vec![peer(1), peer(2)];
        [0, 1].map(|i| {
            let cfg =
                DpdkConfig::new(devices[i], peers[i].addr, peers.clone()).with_mac(peers[i].mac);
            DpdkTransport::new(eal, cfg).expect("a DPDK endpoint")
        })
    }

    /// Sends probes from `from` to node `dst` (`to`) until one arrives (the
    /// link is up); panics after [`LINK_POLLS_MAX`] polls.
    fn wait_link(from: &mut DpdkTransport, to: &mut DpdkTransport, dst: u16) {
        for _ in 0..LINK_POLLS_MAX {
            if from.tx_queued() == 0 {
                from.tx_burst(
                    0,
                    &[TxPacket {
                        dst,
                        bytes: b"probe",
                    }],
                );
            }
            from.tx_flush(0);
            if to.rx_burst(0, 32, &mut |_| {}) > 0 {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("the memif link did not come up");
    }

    pub(super) fn bench(c: &mut Criterion) {
        let socket = format!(
            "socket=/tmp/splitkv-bench-memif-{}.sock",
            std::process::id()
        );
        let server = format!("--vdev=net_memif0,role=server,id=0,{socket}");
        let client = format!("--vdev=net_memif1,role=client,id=0,{socket}");
        let args = [
            "--no-telemetry",
            "--no-shconf",
            "--no-pci",
            "--no-huge",
            "-m",
            "512",
            "-l",
            "0",
            "--log-level=lib.eal:error",
            "--log-level=pmd.net.memif:error",
            &server,
            &client,
        ];
        let eal = Eal::init(&args).expect("EAL for the DPDK cases");
        let calls = |t: &DpdkTransport| (t.stats().tx_bursts, t.stats().rx_bursts);
        let names = dpdk_ring_pair(eal).expect("a net_ring pair");
        let ring = pair(eal, [&names[0], &names[1]]);
        let copies = |t: &DpdkTransport| t.stats().tx_copied;
        bench_transport(c, "dpdk_ring", ring, calls, copies);
        let [mut a, mut b] = pair(eal, ["net_memif0", "net_memif1"]);
        wait_link(&mut a, &mut b, 1);
        wait_link(&mut b, &mut a, 0);
        bench_transport(c, "dpdk_memif", [a, b], calls, copies);
    }
}

criterion_group!(benches, dnl_messages);
criterion_main!(benches);
