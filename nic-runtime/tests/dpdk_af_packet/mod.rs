//! Three endpoints in three processes over `net_af_packet`, each on the
//! veth end of its own network namespace, the veths joined by a bridge in a
//! fourth namespace: real Ethernet frames through the kernel's bridge.
//!
//! The namespaces (`skvd<pid>b` for the bridge, `skvd<pid>0..2` for the
//! nodes) and every link are created inside them; the root namespace's
//! interfaces are never touched. Node `i`'s veth gets the MAC
//! `02:00:00:00:00:0<i+1>` and no IP address (the kernel ignores the UDP
//! frames; the transport reads them through its packet socket). Where the
//! machine does not allow namespaces (not root, no `ip`, a step refused)
//! the step is skipped with one line saying why.

use super::{peer, reported, CHILD_WAIT, EAL_ARGS};
use splitkv_nic::net::dpdk::{DpdkConfig, DpdkPeer, DpdkTransport, Eal, DPDK_BURST_MAX};
use splitkv_nic::net::{Transport, TxPacket};
use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Nodes, one process and namespace each.
pub const NODES: usize = 3;
/// Packets each node sends each other node (both peers' together stay well
/// inside af_packet's default receive ring of 512 frames, so a node
/// descheduled for a while loses none).
pub const PACKETS_PER_PEER: u32 = 150;
/// Longest one `ip` command may take.
const IP_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest the node processes may take together.
const NODES_TIMEOUT: Duration = Duration::from_secs(40);

/// A namespace step the machine refused, and why.
pub struct Refused(pub String);

/// Runs `ip ARGS`, bounded.
fn ip(args: &[&str]) -> Result<(), Refused> {
    let refused = |why: String| Refused(format!("`ip {}` failed: {why}", args.join(" ")));
    let mut child = Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| refused(e.to_string()))?;
    let deadline = Instant::now() + IP_TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| refused(e.to_string()))? {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(refused("timed out".into()));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    if status.success() {
        return Ok(());
    }
    let mut err = String::new();
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    Err(refused(err.trim().to_string()))
}

/// The namespaces and node processes of one run; killed and deleted on drop.
pub struct AfPacketRun {
    made: Vec<String>,
    procs: Vec<Child>,
}

impl Drop for AfPacketRun {
    fn drop(&mut self) {
        for p in &mut self.procs {
            if let Ok(None) = p.try_wait() {
                let _ = p.kill();
                let _ = p.wait();
            }
        }
        for ns in self.made.iter().rev() {
            if let Err(Refused(why)) = ip(&["netns", "del", ns]) {
                eprintln!("dpdk af_packet teardown: {why}");
            }
        }
    }
}

/// The MAC node `i`'s veth gets.
pub fn mac_text(i: usize) -> String {
    format!("02:00:00:00:00:{:02x}", i + 1)
}

impl AfPacketRun {
    fn add_namespace(&mut self, ns: &str) -> Result<(), Refused> {
        ip(&["netns", "add", ns])?;
        self.made.push(ns.to_string());
        Ok(())
    }

    /// Builds the namespaces and links, then starts node `i` as
    /// `ip netns exec NS <this test binary>` with `child_env = af-packet-<i>`.
    pub fn start(test_name: &str, child_env: &str) -> Result<AfPacketRun, Refused> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(Refused("not root".into()));
        }
        let base = format!("skvd{}", std::process::id());
        let bridge = format!("{base}b");
        let mut run = AfPacketRun {
            made: Vec::new(),
            procs: Vec::new(),
        };
        run.add_namespace(&bridge)?;
        ip(&["-n", &bridge, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &bridge, "link", "set", "br0", "up"])?;
        let nodes: Vec<String> = (0..NODES).map(|i| format!("{base}{i}")).collect();
        for (i, ns) in nodes.iter().enumerate() {
            run.add_namespace(ns)?;
            let port = format!("p{i}");
            // Made in the bridge namespace, its peer moved straight into the
            // node's: nothing passes through the root namespace.
            ip(&[
                "-n", &bridge, "link", "add", &port, "type", "veth", "peer", "name", "eth0",
                "netns", ns,
            ])?;
            ip(&["-n", &bridge, "link", "set", &port, "master", "br0"])?;
            ip(&["-n", &bridge, "link", "set", &port, "up"])?;
            ip(&["-n", ns, "link", "set", "eth0", "address", &mac_text(i)])?;
            ip(&["-n", ns, "link", "set", "eth0", "up"])?;
        }
        let exe = std::env::current_exe().expect("the test binary");
        for (i, ns) in nodes.iter().enumerate() {
            let child = Command::new("ip")
                .args(["netns", "exec", ns])
                .arg(&exe)
                .args([test_name, "--exact", "--nocapture"])
                .env(child_env, format!("af-packet-{i}"))
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| Refused(format!("`ip netns exec` failed: {e}")))?;
            run.procs.push(child);
        }
        Ok(run)
    }

    /// Waits (bounded) for every node and returns each one's stdout.
    pub fn finish(mut self) -> Vec<String> {
        let deadline = Instant::now() + NODES_TIMEOUT;
        let mut outs = Vec::new();
        for p in &mut self.procs {
            while p.try_wait().expect("node state").is_none() {
                assert!(
                    Instant::now() < deadline,
                    "an af_packet node did not finish"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            let mut out = String::new();
            if let Some(mut s) = p.stdout.take() {
                let _ = s.read_to_string(&mut out);
            }
            outs.push(out);
        }
        outs
    }
}

/// Checks every af_packet node's report: each received every packet of
/// both others, whole and in order.
pub fn three_namespaced_processes_over_af_packet(run: AfPacketRun) {
    for (i, out) in run.finish().iter().enumerate() {
        let want = format!("ok {}", (NODES as u32 - 1) * PACKETS_PER_PEER);
        assert_eq!(reported(out.as_bytes(), "AF_PACKET"), want, "node {i}");
    }
}

/// Marks a hello packet (first byte; data packets start with their
/// sender's node index).
const HELLO: u8 = 0xff;
/// Gap between hellos to every peer.
const HELLO_EVERY: Duration = Duration::from_millis(5);

/// Data packet `seq` from node `src`: 16 to 215 B.
pub fn af_packet_payload(src: usize, seq: u32) -> Vec<u8> {
    let mut p = vec![(src as u8) ^ (seq as u8); 16 + (seq as usize * 13) % 200];
    p[0] = src as u8;
    p[1..5].copy_from_slice(&seq.to_le_bytes());
    p
}

/// One af_packet node process (run inside its namespace): greets each peer
/// until data from it arrives (then it has heard us), sends a peer its
/// packets once it has heard from it (its packet socket is open then),
/// receives the others'; prints `AF_PACKET=ok N;` or what went wrong.
pub fn af_packet_child(me: usize) {
    let mut args = EAL_ARGS.to_vec();
    args.push("--vdev=net_af_packet0,iface=eth0");
    let eal = Eal::init(&args).expect("EAL with an af_packet port");
    let peers: Vec<DpdkPeer> = (0..NODES).map(|n| peer(n as u8 + 1)).collect();
    // No MAC given: the port's own, which the test set on the veth.
    let cfg = DpdkConfig::new("net_af_packet0", peers[me].addr, peers.clone());
    let mut ep = DpdkTransport::new(eal, cfg).expect("an af_packet endpoint");
    if ep.local().mac != peers[me].mac {
        println!("AF_PACKET=port MAC {} is not the veth's;", ep.local().mac);
        return;
    }
    let others: Vec<usize> = (0..NODES).filter(|&n| n != me).collect();
    let mut heard = [false; NODES];
    let mut sent = [0u32; NODES];
    let mut got: Vec<Vec<Vec<u8>>> = vec![Vec::new(); NODES];
    let done = |sent: &[u32; NODES], got: &Vec<Vec<Vec<u8>>>| {
        others
            .iter()
            .all(|&n| sent[n] == PACKETS_PER_PEER && got[n].len() >= PACKETS_PER_PEER as usize)
    };
    let deadline = Instant::now() + CHILD_WAIT;
    let mut next_hello = Instant::now();
    while !(done(&sent, &got) && ep.tx_queued() == 0) && Instant::now() < deadline {
        if Instant::now() >= next_hello {
            let hello = [HELLO, me as u8];
            for &n in others.iter().filter(|&&n| got[n].is_empty()) {
                ep.tx_burst(
                    0,
                    &[TxPacket {
                        dst: n as u16,
                        bytes: &hello,
                    }],
                );
            }
            next_hello = Instant::now() + HELLO_EVERY;
        }
        for &n in others.iter().filter(|&&n| heard[n]) {
            let end = (sent[n] + DPDK_BURST_MAX as u32 / 4).min(PACKETS_PER_PEER);
            let burst: Vec<Vec<u8>> = (sent[n]..end).map(|s| af_packet_payload(me, s)).collect();
            let txs: Vec<TxPacket> = burst
                .iter()
                .map(|b| TxPacket {
                    dst: n as u16,
                    bytes: b,
                })
                .collect();
            sent[n] += ep.tx_burst(0, &txs) as u32;
        }
        ep.tx_flush(0);
        let lent = ep.rx_burst(0, 64, &mut |p| match p.first() {
            Some(&HELLO) if p.len() == 2 && usize::from(p[1]) < NODES => {
                heard[usize::from(p[1])] = true
            }
            Some(&src) if usize::from(src) < NODES => {
                heard[usize::from(src)] = true;
                got[usize::from(src)].push(p.to_vec());
            }
            _ => {}
        });
        if lent == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    // Every peer has heard us (its data came); drain what is still arriving.
    let linger = Instant::now() + Duration::from_millis(100);
    while Instant::now() < linger {
        ep.rx_burst(0, 64, &mut |_| {});
        std::thread::sleep(HELLO_EVERY);
    }
    let mut bad = Vec::new();
    for &n in &others {
        let want: Vec<Vec<u8>> = (0..PACKETS_PER_PEER)
            .map(|s| af_packet_payload(n, s))
            .collect();
        if got[n] != want {
            bad.push(format!("from {n}: got {} of {}", got[n].len(), want.len()));
        }
    }
    if bad.is_empty() {
        let total: usize = others.iter().map(|&n| got[n].len()).sum();
        println!("AF_PACKET=ok {total};");
    } else {
        println!(
            "AF_PACKET={} sent {sent:?} stats {:?} port {:?};",
            bad.join(", "),
            ep.stats(),
            ep.port_stats()
        );
    }
}
