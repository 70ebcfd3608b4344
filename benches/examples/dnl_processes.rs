//! Messages per second between two endpoints in two processes, batching off
//! vs on, over kernel UDP on 127.0.0.1 and (feature `dpdk`) DPDK's
//! `net_memif` — the point-to-point counterpart of the `dnl_messages`
//! benchmark, where both endpoints share one thread.
//!
//! ```text
//! cargo run --release -p splitkv-bench --features dpdk --example dnl_processes [-- ROUNDS]
//! ```
//!
//! The parent runs each case (transport × message size × batching) as two
//! child processes of this binary: node 0 sends rounds of
//! [`ROUND_MESSAGES`] messages through its Dnl [`Stack`], each round
//! acknowledged in full before the next (closed loop, as `dnl_messages`),
//! node 1 receives, decodes and acknowledges. Both busy-poll on a real
//! clock (retransmission works if UDP drops). Node 1 counts the messages it
//! decodes during a [`WINDOW`] that starts [`WARM_UP`] after its first
//! message; the figure is those messages per second of wall time, with each
//! process's CPU time (user + system) over the same stretch. Cases run one
//! after the other, transports alternating, `ROUNDS` times (default 2).
//! The machine's cores are shared: compare the transports within a round.
//!
//! Message sizes as in `dnl_messages`: `ack` a LOG acknowledgement (9-byte
//! body), `log64` a LOG with a 64-byte body. The memif server (node 0) is
//! started first and the client once it listens; both run EAL without
//! hugepages or PCI (`--no-huge --no-pci --no-shconf`).

use splitkv_layout::key::Key;
use splitkv_layout::meta::ObjectMeta;
use splitkv_layout::wire::{BodyWriter, MsgKind, ReplyStatus};
use splitkv_layout::TxId;
use splitkv_nic::net::session::{SessionConfig, SESSION_WINDOW_PACKETS_MAX};
use splitkv_nic::net::stack::{Stack, StackConfig};
use splitkv_nic::net::udp::{UdpConfig, UdpTransport};
use splitkv_nic::net::Transport;
use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Receiving time before the measured window (sessions and caches settle).
const WARM_UP: Duration = Duration::from_millis(300);
/// The measured window.
const WINDOW: Duration = Duration::from_millis(1500);
/// Longest node 1 waits for its first message.
const FIRST_MESSAGE_WAIT: Duration = Duration::from_secs(10);
/// How long node 0 keeps sending after its start: node 1's first-message
/// wait, warm-up and window all fit.
const SEND_FOR: Duration = Duration::from_secs(14);
/// Messages node 0 sends per round (acknowledged before the next).
const ROUND_MESSAGES: usize = 256;
/// Packets lent per receive poll.
const RX_BURST: usize = 64;
/// Marker the memif server prints once its port listens.
const READY: &str = "READY";

fn body(size: &str) -> BodyWriter {
    let mut w = BodyWriter::new();
    match size {
        "ack" => w.ack(MsgKind::LogAck, TxId::from_bits(7), ReplyStatus::Ok),
        _ => {
            w.begin_items(MsgKind::Log, TxId::from_bits(7));
            w.push_item(&Key::new(1, 42), ObjectMeta::default(), &[0xAB; 30]);
        }
    }
    w
}

fn stack(node: u16, t: &dyn Transport, batching: bool) -> Stack {
    let cfg = StackConfig {
        batching,
        session: SessionConfig {
            window_packets: SESSION_WINDOW_PACKETS_MAX,
            silence_ns: 60_000_000_000,
            ..SessionConfig::default()
        },
        ..StackConfig::default()
    };
    Stack::new(node, 2, t.mtu(), t.is_lossy(), &cfg).expect("a valid stack")
}

fn process_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Node 0: rounds of [`ROUND_MESSAGES`] messages for node 1, each sent
/// (flushed) and then acknowledged in full before the next (closed loop,
/// as in `dnl_messages`: the sessions' window never overflows, so nothing
/// is retransmitted unless a process is descheduled past the timeout),
/// until [`SEND_FOR`] has passed. Prints its CPU time per second of its run.
fn sender(t: &mut dyn Transport, batching: bool, size: &str) {
    let mut s = stack(0, t, batching);
    let w = body(size);
    let start = Instant::now();
    let cpu0 = process_cpu();
    let now = |start: Instant| start.elapsed().as_nanos() as u64;
    while start.elapsed() < SEND_FOR {
        for _ in 0..ROUND_MESSAGES {
            s.try_insert(1, &w).expect("the backlog holds a round");
        }
        s.flush(now(start), t);
        while !s.is_idle() && start.elapsed() < SEND_FOR {
            let n = now(start);
            t.rx_burst(n, RX_BURST, &mut |p| {
                std::hint::black_box(s.receive(n, p).is_some());
            });
            s.flush(n, t);
        }
    }
    let cpu = process_cpu() - cpu0;
    let st = s.stats();
    println!(
        "SENDER cpu_per_s={:.3} per_packet={:.1} retransmitted={};",
        cpu.as_secs_f64() / start.elapsed().as_secs_f64(),
        st.messages_per_packet(),
        st.sessions.retransmissions
    );
}

/// Node 1: receives, counts the messages of the window, acknowledges.
fn receiver(t: &mut dyn Transport, batching: bool) {
    let mut s = stack(1, t, batching);
    let start = Instant::now();
    let mut got: u64 = 0;
    let mut first: Option<Instant> = None;
    let mut mark: Option<(u64, Duration)> = None;
    loop {
        let now = start.elapsed().as_nanos() as u64;
        t.rx_burst(now, RX_BURST, &mut |p| {
            if let Some((_, msgs)) = s.receive(now, p) {
                for m in msgs {
                    got += m.is_ok() as u64;
                }
            }
        });
        s.flush(now, t);
        match first {
            None if got > 0 => first = Some(Instant::now()),
            None if start.elapsed() > FIRST_MESSAGE_WAIT => {
                println!("RESULT error=no-messages;");
                return;
            }
            None => continue,
            Some(f) => {
                let since = f.elapsed();
                if mark.is_none() && since >= WARM_UP {
                    mark = Some((got, process_cpu()));
                }
                if since >= WARM_UP + WINDOW {
                    let (got0, cpu0) = mark.expect("the warm-up ended");
                    let msgs = (got - got0) as f64 / WINDOW.as_secs_f64();
                    let cpu = (process_cpu() - cpu0).as_secs_f64() / WINDOW.as_secs_f64();
                    println!("RESULT msgs_per_s={msgs:.0} cpu_per_s={cpu:.3};");
                    return;
                }
            }
        }
    }
}

/// A child's role: `<transport> <node> <size> <on|off> <endpoint args...>`.
fn child(args: &[String]) {
    let (transport, node, size) = (&args[0], &args[1], &args[2]);
    let batching = args[3] == "on";
    match transport.as_str() {
        "udp" => {
            let addrs: Vec<SocketAddr> = args[4..6].iter().map(|a| a.parse().unwrap()).collect();
            let me: usize = node.parse().unwrap();
            let mut t = UdpTransport::bind(UdpConfig::new(addrs[me], addrs)).expect("UDP endpoint");
            run_node(&mut t, node, size, batching);
            println!("STATS {:?};", t.stats());
        }
        #[cfg(feature = "dpdk")]
        "memif" => {
            let mut t = memif::endpoint(node == "1", &args[4]);
            run_node(&mut t, node, size, batching);
            println!("STATS {:?};", t.stats());
        }
        other => panic!("unknown transport {other}"),
    }
}

fn run_node(t: &mut dyn Transport, node: &str, size: &str, batching: bool) {
    println!("{READY}");
    if node == "0" {
        sender(t, batching, size);
    } else {
        receiver(t, batching);
    }
}

#[cfg(feature = "dpdk")]
mod memif {
    use splitkv_nic::net::dpdk::{DpdkConfig, DpdkPeer, DpdkTransport, Eal, MacAddr};
    use std::net::{Ipv4Addr, SocketAddrV4};

    /// Node 0 is the memif server, node 1 the client, on `socket`.
    pub fn endpoint(client: bool, socket: &str) -> DpdkTransport {
        let role = if client { "client" } else { "server" };
        let vdev = format!("--vdev=net_memif0,role={role},id=0,socket={socket}");
        let args = [
            "--no-telemetry",
            "--no-shconf",
            "--no-pci",
            "--no-huge",
            "-m",
            "256",
            "-l",
            "0",
            "--log-level=lib.eal:error",
            "--log-level=pmd.net.memif:error",
            &vdev,
        ];
        let eal = Eal::init(&args).expect("EAL with a memif port");
        let peer = |last: u8| DpdkPeer {
            mac: MacAddr([2, 0, 0, 0, 0, last]),
            addr: SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, last), 7000),
        };
        let peers = vec![peer(1), peer(2)];
        let me = usize::from(client);
        let cfg =
            DpdkConfig::new("net_memif0", peers[me].addr, peers.clone()).with_mac(peers[me].mac);
        DpdkTransport::new(eal, cfg).expect("a memif endpoint")
    }
}

/// Starts a child with `args`; returns it once it printed [`READY`].
fn spawn(args: &[String]) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut c = Command::new(std::env::current_exe().unwrap())
        .arg("--child")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("a child process");
    let mut out = BufReader::new(c.stdout.take().unwrap());
    let mut line = String::new();
    // Bounded: the child ends (closing stdout) within SEND_FOR.
    while !line.contains(READY) {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
    }
    (c, out)
}

fn finish((mut c, mut out): (Child, BufReader<std::process::ChildStdout>)) -> String {
    let mut s = String::new();
    out.read_to_string(&mut s).unwrap();
    c.wait().unwrap();
    s
}

fn field<'a>(out: &'a str, key: &str) -> &'a str {
    out.split(&format!("{key}="))
        .nth(1)
        .and_then(|r| r.split([' ', ';']).next())
        .unwrap_or("?")
}

/// Two free UDP ports on 127.0.0.1 (bound, read and released).
fn free_udp_addrs() -> [String; 2] {
    [0, 1].map(|_| {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap().to_string()
    })
}

fn run_case(transport: &str, size: &str, mode: &str) -> (f64, String) {
    let base = [transport, "", size, mode].map(String::from);
    let extra: Vec<String> = match transport {
        "udp" => free_udp_addrs().to_vec(),
        _ => vec![format!(
            "/tmp/splitkv-dnl-processes-{}.sock",
            std::process::id()
        )],
    };
    let args = |node: &str| {
        let mut a = base.to_vec();
        a[1] = node.to_string();
        a.extend(extra.iter().cloned());
        a
    };
    // Node 0 first: the memif server must listen before the client starts.
    let n0 = spawn(&args("0"));
    let n1 = spawn(&args("1"));
    let r = finish(n1);
    let s = finish(n0);
    if std::env::var_os("DNL_PROCESSES_VERBOSE").is_some() {
        eprintln!("node 0: {s}\nnode 1: {r}");
    }
    let msgs: f64 = field(&r, "msgs_per_s").parse().unwrap_or(0.0);
    let note = format!(
        "{:.1} msg/packet, CPU s/s sender {} receiver {}, retransmitted {}",
        field(&s, "per_packet").parse::<f64>().unwrap_or(0.0),
        field(&s, "cpu_per_s"),
        field(&r, "cpu_per_s"),
        field(&s, "retransmitted"),
    );
    (msgs, note)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        return child(&args[1..]);
    }
    let rounds: usize = args.first().map_or(2, |a| a.parse().expect("ROUNDS"));
    let transports: &[&str] = if cfg!(feature = "dpdk") {
        &["udp", "memif"]
    } else {
        &["udp"]
    };
    for round in 1..=rounds {
        for size in ["ack", "log64"] {
            let mut figures = Vec::new();
            for mode in ["off", "on"] {
                for &t in transports {
                    let (msgs, note) = run_case(t, size, mode);
                    println!(
                        "round {round} {t}/{size}/{mode}: {:.3} M msg/s ({note})",
                        msgs / 1e6
                    );
                    figures.push(((t, mode), msgs));
                }
            }
            let get = |t: &str, m: &str| {
                figures
                    .iter()
                    .find(|((ft, fm), _)| *ft == t && *fm == m)
                    .map_or(0.0, |f| f.1)
            };
            for &t in transports {
                println!(
                    "round {round} {t}/{size}: batching on/off {:.2}×",
                    get(t, "on") / get(t, "off").max(1.0)
                );
            }
            if transports.len() > 1 {
                println!(
                    "round {round} {size}: memif/udp batching on {:.2}×, off {:.2}×",
                    get("memif", "on") / get("udp", "on").max(1.0),
                    get("memif", "off") / get("udp", "off").max(1.0)
                );
            }
        }
    }
}
