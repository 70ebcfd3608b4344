//! Two processes over `net_memif`: a server child and, once it listens, a
//! client child exchange bursts of packets point to point.

use super::{child, peer, reported, tagged, CHILD_WAIT, EAL_ARGS};
use splitkv_nic::net::dpdk::{DpdkConfig, DpdkTransport, Eal, DPDK_BURST_MAX, DPDK_MTU_DEFAULT};
use splitkv_nic::net::{Transport, TxPacket};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout};
use std::time::{Duration, Instant};

/// Packets each memif process sends the other.
const MEMIF_PACKETS: u32 = 2000;

/// The memif socket the two children share (unique to this run).
const MEMIF_SOCKET_ENV: &str = "SPLITKV_DPDK_TEST_MEMIF_SOCKET";
/// What the memif server prints once its port listens.
const MEMIF_READY: &str = "MEMIF_READY";

/// A memif child and its stdout (the server's partly read already).
pub type MemifChild = (Child, BufReader<ChildStdout>);

/// Starts the memif server (node 0), waits until it listens (a client
/// started earlier finds no socket and its link stays down), then the
/// client (node 1).
pub fn start_memif_children() -> [MemifChild; 2] {
    let socket = format!("/tmp/splitkv-dpdk-test-{}.sock", std::process::id());
    let start = |role| {
        let mut c = child(role, &[(MEMIF_SOCKET_ENV, &socket)]);
        let out = BufReader::new(c.stdout.take().expect("piped stdout"));
        (c, out)
    };
    let mut server = start("memif-server");
    // Bounded: the child ends within CHILD_WAIT, closing its stdout.
    let mut line = String::new();
    while !line.contains(MEMIF_READY) {
        line.clear();
        if server.1.read_line(&mut line).expect("server stdout") == 0 {
            break;
        }
    }
    [server, start("memif-client")]
}

/// Waits (bounded) for both memif children; each must have received every
/// packet of the other, whole and in order.
pub fn two_processes_over_memif(children: [MemifChild; 2]) {
    let deadline = Instant::now() + CHILD_WAIT + Duration::from_secs(10);
    for (mut c, mut stdout) in children {
        while c.try_wait().expect("child state").is_none() {
            if Instant::now() > deadline {
                let _ = c.kill();
                panic!("a memif child did not finish");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut out = Vec::new();
        stdout.read_to_end(&mut out).expect("child output");
        assert_eq!(reported(&out, "MEMIF"), format!("ok {MEMIF_PACKETS}"));
    }
}

/// One memif process: node 0 (`server`) or 1 (`client`) sends
/// [`MEMIF_PACKETS`] tagged packets of 16 to 1472 B to the other in bursts
/// while receiving the other's, then checks them; prints `MEMIF=ok N;` or
/// what went wrong. Packets sent before the link is up stay queued (the
/// port takes none), so none is lost.
pub fn memif_child(role: &str) {
    let socket = std::env::var(MEMIF_SOCKET_ENV).expect("the socket path");
    let vdev = format!("--vdev=net_memif0,role={role},id=0,socket={socket}");
    let mut args = EAL_ARGS.to_vec();
    args.push(&vdev);
    let eal = Eal::init(&args).expect("EAL with a memif port");
    let me = usize::from(role == "client");
    let peers = vec![peer(1), peer(2)];
    let cfg = DpdkConfig::new("net_memif0", peers[me].addr, peers.clone()).with_mac(peers[me].mac);
    let mut ep = DpdkTransport::new(eal, cfg).expect("a memif endpoint");
    println!("{MEMIF_READY}");
    let dst = (1 - me) as u16;
    let packets: Vec<Vec<u8>> = (0..MEMIF_PACKETS)
        .map(|i| tagged(i, 16 + (i as usize * 37) % (DPDK_MTU_DEFAULT - 15)))
        .collect();
    let (mut sent, mut got) = (0, Vec::new());
    let deadline = Instant::now() + CHILD_WAIT;
    while (sent < packets.len() || ep.tx_queued() > 0 || got.len() < packets.len())
        && Instant::now() < deadline
    {
        let burst: Vec<TxPacket> = packets[sent..packets.len().min(sent + DPDK_BURST_MAX)]
            .iter()
            .map(|b| TxPacket { dst, bytes: b })
            .collect();
        sent += ep.tx_burst(0, &burst);
        ep.tx_flush(0);
        if ep.rx_burst(0, 64, &mut |p| got.push(p.to_vec())) == 0 {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    // Keep polling a little so the peer's last packets are taken.
    let linger = Instant::now() + Duration::from_millis(200);
    while Instant::now() < linger {
        ep.tx_flush(0);
        ep.rx_burst(0, 64, &mut |p| got.push(p.to_vec()));
    }
    let verdict = if got == packets {
        format!("ok {}", got.len())
    } else {
        let first_bad = got.iter().zip(&packets).position(|(a, b)| a != b);
        format!(
            "got {} of {} (first difference at {first_bad:?}), sent {sent}, stats {:?} port {:?}",
            got.len(),
            packets.len(),
            ep.stats(),
            ep.port_stats()
        )
    };
    println!("MEMIF={verdict};");
}
