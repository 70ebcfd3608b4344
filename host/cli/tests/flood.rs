//! A peer flooding garbage at a node's data port (the Dnl stack against bad input)
//! during a three-process Smallbank run on loopback UDP: random bytes,
//! truncated packets, well-formed v2 packets of another format version,
//! from a node outside the configuration, from another cluster, addressed to
//! another node, to another incarnation of the node, and from an older
//! incarnation of a peer. The bench's checks all pass, the flooded node is
//! still alive, none of its sessions failed, and its per-reason drop
//! counters (`/status` → `sessions.drops`) account for the flood.
//!
//! The UDP transport drops datagrams from addresses that are not configured
//! peers before the session layer sees them, so the flood is sent from node
//! 1's data address (a raw socket writes the UDP header; needs root or
//! `CAP_NET_RAW`). Without it the flood comes from an unconfigured address
//! (one line says so): the checks and the liveness are still asserted, and
//! every session drop counter must stay 0 (the transport drops it all first).
//!
//! Not flooded: packets of an older membership epoch. A deployed node stays
//! in epoch 0 until the membership layer raises it, so no
//! epoch is older than the node's; the stale-incarnation packets carry epoch 0.

mod support_deploy;

use splitkv_host::deploy::ClusterConfig;
use splitkv_layout::wire::{
    BodyWriter, MsgHeader, MsgKind, PacketHeader, MSG_HEADER_BYTES, PACKET_HEADER_BYTES,
};
use splitkv_layout::TxId;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support_deploy::*;

/// Most flood packets sent in one run (all kinds together).
const FLOOD_PACKETS_MAX: usize = 24_000;
/// Packets sent between two pauses of [`FLOOD_PAUSE`] (paces the flood at
/// about 16 000 packets/s, so it lasts the run).
const FLOOD_BURST: usize = 16;
/// Pause between two bursts.
const FLOOD_PAUSE: Duration = Duration::from_millis(1);
/// Longest the flood waits for the flooded node to start its run.
const RUN_START_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest the whole test may take.
const TEST_TIMEOUT: Duration = Duration::from_secs(90);
/// Cluster id of the test files (`support_deploy::cluster_file`).
const CLUSTER_ID: u32 = 5;

/// The kinds of garbage, sent round-robin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Garbage {
    /// Random bytes of random length: `malformed`.
    Random,
    /// A well-formed packet cut short: `malformed`.
    Truncated,
    /// A well-formed packet of format version 1: `bad_version`.
    OldVersion,
    /// From node 9 of a three-node cluster: `stranger`.
    Stranger,
    /// From cluster 6: `other_cluster`.
    OtherCluster,
    /// From node 1 to node 2: `misaddressed`.
    Misaddressed,
    /// From node 1's running incarnation to incarnation 1 of node 0:
    /// `wrong_incarnation` (the sender's incarnation is checked first, so
    /// it must be the one node 0 addresses).
    WrongIncarnation,
    /// From incarnation 1 of node 1, epoch 0: `stale_incarnation`.
    StaleIncarnation,
}

const KINDS: [Garbage; 8] = [
    Garbage::Random,
    Garbage::Truncated,
    Garbage::OldVersion,
    Garbage::Stranger,
    Garbage::OtherCluster,
    Garbage::Misaddressed,
    Garbage::WrongIncarnation,
    Garbage::StaleIncarnation,
];

/// A small xorshift generator: the flood is reproducible from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A well-formed packet of one ABORT message, `h`'s identity fields kept.
fn packet(h: PacketHeader, rng: &mut Rng) -> Vec<u8> {
    let mut body = BodyWriter::new();
    body.begin_abort(TxId::from_bits(rng.next()));
    let len = body.bytes().len();
    let mut out = Vec::with_capacity(PACKET_HEADER_BYTES + MSG_HEADER_BYTES + len);
    PacketHeader {
        count: 1,
        len: (MSG_HEADER_BYTES + len) as u32,
        seq: rng.next() as u32,
        ..h
    }
    .encode(&mut out);
    MsgHeader::whole(MsgKind::Abort, len as u32).encode(&mut out);
    out.extend_from_slice(body.bytes());
    out
}

/// One garbage datagram of `kind` for node 0 (of at most `mtu` bytes);
/// `peer_incarnation` is node 1's running incarnation.
fn garbage(kind: Garbage, rng: &mut Rng, mtu: usize, peer_incarnation: u32) -> Vec<u8> {
    let good = PacketHeader {
        cluster_id: CLUSTER_ID,
        src: 1,
        dst: 0,
        src_incarnation: 1,
        dst_incarnation: 0,
        ..PacketHeader::default()
    };
    match kind {
        Garbage::Random => (0..1 + rng.below(mtu)).map(|_| rng.next() as u8).collect(),
        Garbage::Truncated => {
            let mut p = packet(good, rng);
            p.truncate(1 + rng.below(p.len() - 1));
            p
        }
        Garbage::OldVersion => {
            let mut p = packet(good, rng);
            p[4] = 1;
            p
        }
        Garbage::Stranger => packet(PacketHeader { src: 9, ..good }, rng),
        Garbage::OtherCluster => packet(
            PacketHeader {
                cluster_id: CLUSTER_ID + 1,
                ..good
            },
            rng,
        ),
        Garbage::Misaddressed => packet(PacketHeader { dst: 2, ..good }, rng),
        Garbage::WrongIncarnation => packet(
            PacketHeader {
                src_incarnation: peer_incarnation,
                dst_incarnation: 1,
                ..good
            },
            rng,
        ),
        Garbage::StaleIncarnation => packet(good, rng),
    }
}

/// Sends datagrams to `to`, from `from` when a raw socket can be had
/// (spoofed source port), else from a fresh unconfigured socket.
enum Sender {
    Raw { fd: libc::c_int, from: u16 },
    Plain(UdpSocket),
}

impl Sender {
    fn open(from: SocketAddr) -> Sender {
        // SAFETY: plain socket(2) call; the descriptor is closed on drop.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_UDP) };
        if fd >= 0 {
            // Never read: shut the receive side so copies of every UDP
            // datagram on the machine are not queued for us.
            // SAFETY: `fd` is ours.
            unsafe { libc::shutdown(fd, libc::SHUT_RD) };
            return Sender::Raw {
                fd,
                from: from.port(),
            };
        }
        Sender::Plain(UdpSocket::bind("127.0.0.1:0").expect("bind the flood socket"))
    }

    fn is_spoofed(&self) -> bool {
        matches!(self, Sender::Raw { .. })
    }

    fn send(&self, to: SocketAddrV4, payload: &[u8]) {
        match self {
            Sender::Plain(s) => {
                let _ = s.send_to(payload, to);
            }
            Sender::Raw { fd, from } => {
                // UDP header (checksum 0: none, allowed over IPv4), then the payload.
                let mut d = Vec::with_capacity(8 + payload.len());
                d.extend_from_slice(&from.to_be_bytes());
                d.extend_from_slice(&to.port().to_be_bytes());
                d.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
                d.extend_from_slice(&[0, 0]);
                d.extend_from_slice(payload);
                let addr = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: 0,
                    sin_addr: libc::in_addr {
                        s_addr: u32::from(*to.ip()).to_be(),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: `d` and `addr` outlive the call; lengths are theirs.
                unsafe {
                    libc::sendto(
                        *fd,
                        d.as_ptr().cast(),
                        d.len(),
                        0,
                        (&addr as *const libc::sockaddr_in).cast(),
                        std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                    )
                };
            }
        }
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        if let Sender::Raw { fd, .. } = self {
            // SAFETY: `fd` is ours and closed once.
            unsafe { libc::close(*fd) };
        }
    }
}

/// Floods `to` until `stop` or [`FLOOD_PACKETS_MAX`] (as node 1, running
/// `peer_incarnation`); returns the packets sent of each kind (indexed as
/// [`KINDS`]).
fn flood(
    sender: &Sender,
    to: SocketAddrV4,
    mtu: usize,
    peer_incarnation: u32,
    stop: &AtomicBool,
) -> [u64; 8] {
    let mut rng = Rng(0x5eed_f100d);
    let mut sent = [0u64; 8];
    for i in 0..FLOOD_PACKETS_MAX {
        if i % FLOOD_BURST == 0 {
            if stop.load(Ordering::Acquire) {
                break;
            }
            std::thread::sleep(FLOOD_PAUSE);
        }
        let k = i % KINDS.len();
        sender.send(to, &garbage(KINDS[k], &mut rng, mtu, peer_incarnation));
        sent[k] += 1;
    }
    sent
}

fn v4(a: SocketAddr) -> SocketAddrV4 {
    match a {
        SocketAddr::V4(a) => a,
        SocketAddr::V6(_) => panic!("the test cluster files are IPv4"),
    }
}

/// Waits until `addr` runs its workload and has received some packets, so
/// every peer's incarnation is known (a stale one is then really stale).
fn wait_running(addr: SocketAddr) {
    let t0 = Instant::now();
    loop {
        let s = wait_status(addr, Duration::from_secs(5));
        let received = s["sessions"]["packets_received"].as_u64().unwrap_or(0);
        if s["state"] == "running" && received >= 100 {
            return;
        }
        assert!(t0.elapsed() < RUN_START_TIMEOUT, "no run started: {s}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_garbage_flood_at_a_data_port_is_dropped_counted_and_disturbs_nothing() {
    let t0 = Instant::now();
    let file = cluster_file(3, 3, "");
    let config = ClusterConfig::from_file(&file.path).expect("the test file is valid");
    let target = v4(config.nodes[0].data);
    let mtu = config.nodes[0].transport.mtu;
    let mut nodes: Vec<_> = (0..3).map(|i| spawn_node(&file, i)).collect();
    for a in &file.controls {
        wait_status(*a, Duration::from_secs(15));
    }
    let sender = Sender::open(config.nodes[1].data);
    if !sender.is_spoofed() {
        println!(
            "flood: no raw socket (needs root or CAP_NET_RAW), so the flood comes from an \
             unconfigured address and the per-reason drop accounting is skipped"
        );
    }
    let bench = Command::new(env!("CARGO_BIN_EXE_splitkv"))
        .args([
            "bench",
            "smallbank",
            "--cluster",
            file.path.to_str().unwrap(),
        ])
        .args(["--accounts-per-node", "500", "--duration", "2s"])
        .args(["--warmup", "200ms", "--inflight", "8"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the bench");
    wait_running(file.controls[0]);
    let peer = wait_status(file.controls[1], Duration::from_secs(5))["incarnation"]
        .as_u64()
        .expect("node 1's incarnation") as u32;
    // What node 0 dropped before the flood (its peers' packets racing their
    // start-up, e.g. a few from before it knew their incarnations): only
    // what comes after is the flood's.
    let before = wait_status(file.controls[0], Duration::from_secs(5))["sessions"]["drops"].clone();
    let stop = Arc::new(AtomicBool::new(false));
    let sent = std::thread::scope(|s| {
        let flooding = s.spawn(|| flood(&sender, target, mtu, peer, &stop));
        let out = bench.wait_with_output().expect("the bench ran");
        stop.store(true, Ordering::Release);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stdout}\n{err}");
        assert!(stdout.contains("checks: ok"), "{stdout}");
        assert!(stdout.contains("money check    ok"), "{stdout}");
        assert!(stdout.contains("replica check  ok"), "{stdout}");
        flooding.join().expect("the flood thread")
    });
    let total: u64 = sent.iter().sum();
    assert!(total >= 1_000, "the flood sent only {total} packets");
    assert_eq!(nodes[0].try_wait().expect("try_wait"), None, "node 0 died");
    let status = wait_status(file.controls[0], Duration::from_secs(5));
    let sessions = &status["sessions"];
    assert_eq!(sessions["sessions_failed"], 0, "{status}");
    assert_eq!(sessions["failed_peers"], serde_json::json!([]), "{status}");
    println!(
        "flood: sent {sent:?} (kinds {KINDS:?}); drops {} ({before} before the flood)",
        sessions["drops"]
    );
    let drops = since(&sessions["drops"], &before);
    if sender.is_spoofed() {
        assert_accounted(&sent, &drops);
    } else {
        // From an unconfigured address the transport drops every datagram
        // before the sessions see it.
        assert_accounted(&[0; 8], &drops);
    }
    for n in &mut nodes {
        assert_eq!(n.try_wait().expect("try_wait"), None, "a node died");
    }
    assert!(t0.elapsed() < TEST_TIMEOUT, "took {:?}", t0.elapsed());
}

/// Each counter of `now` less its value in `before` (a missing one counts 0).
fn since(now: &serde_json::Value, before: &serde_json::Value) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    for (k, v) in now.as_object().into_iter().flatten() {
        let d = (v.as_u64().unwrap_or(0)).saturating_sub(before[k].as_u64().unwrap_or(0));
        out.insert(k.clone(), d.into());
    }
    out.into()
}

/// Every flood packet that reached the node's sessions is counted under its
/// reason, and nothing else is: each counter is at most `sent` of its kinds
/// and at least half of it (the kernel may drop some when the socket is full).
fn assert_accounted(sent: &[u64; 8], drops: &serde_json::Value) {
    let of = |k: Garbage| sent[KINDS.iter().position(|x| *x == k).unwrap()];
    let expected = [
        ("malformed", of(Garbage::Random) + of(Garbage::Truncated)),
        ("bad_version", of(Garbage::OldVersion)),
        ("stranger", of(Garbage::Stranger)),
        ("other_cluster", of(Garbage::OtherCluster)),
        ("misaddressed", of(Garbage::Misaddressed)),
        ("wrong_incarnation", of(Garbage::WrongIncarnation)),
        ("stale_incarnation", of(Garbage::StaleIncarnation)),
        ("old_epoch", 0),
        ("bad_ack", 0),
        ("failed_peer", 0),
    ];
    for (reason, want) in expected {
        let got = drops[reason]
            .as_u64()
            .unwrap_or_else(|| panic!("no drops.{reason}: {drops}"));
        assert!(
            got <= want && got * 2 >= want,
            "drops.{reason} = {got}, {want} sent: {drops}"
        );
    }
}
