//! Three node namespaces joined by veth pairs to a bridge in a fourth, for
//! the tests that run `splitkv node` processes across namespaces (UDP in
//! `netns.rs`, DPDK's `net_af_packet` in `dpdk_netns.rs`).
//!
//! Each run makes its own namespaces (`skv<pid><tag>b` for the bridge,
//! `skv<pid><tag>0..2` for the nodes) and creates every link inside them
//! (the root namespace's interfaces and routes are never touched); node `i`
//! gets `10.77.<pid % 256>.<i + 1>/24` and the MAC [`mac`]`(i)` on its
//! `eth0`. [`Netns`] kills its node processes by pid and deletes the
//! namespaces on drop, also when the test fails. Where the machine does not
//! allow namespaces (not root, no `ip`, a step refused) [`Netns::build`]
//! says why in a [`Refused`].

#![allow(dead_code)]

use crate::support_deploy::{wait_exit, wait_status};
use std::fs::File;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The MAC of node `i`'s `eth0`: `02:00:00:00:00:<i + 1>` (locally administered).
pub fn mac(i: usize) -> String {
    format!("02:00:00:00:00:{:02x}", i + 1)
}

/// Data port of every node (each node has a namespace, so ports never collide).
pub const DATA_PORT: u16 = 7100;
/// Control port of every node.
pub const CONTROL_PORT: u16 = 7200;
/// Longest the nodes may take to answer their first `/status`.
pub const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest one `ip` command may take.
pub const IP_TIMEOUT: Duration = Duration::from_secs(10);
/// Nodes of the cluster.
pub const NODES: usize = 3;

/// Why a namespace step failed: the machine does not allow it.
pub struct Refused(pub String);

/// Runs `ip ARGS`, bounded; `Err` with the command and its reason if it fails.
pub fn ip(args: &[&str]) -> Result<(), Refused> {
    let refused = |why: String| Refused(format!("`ip {}` failed: {why}", args.join(" ")));
    let mut child = Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| refused(e.to_string()))?;
    let status = wait_exit(&mut child, IP_TIMEOUT);
    if status.success() {
        return Ok(());
    }
    let mut err = String::new();
    if let Some(mut s) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut s, &mut err);
    }
    Err(refused(err.trim().to_string()))
}

/// The namespaces, links and node processes of one test; torn down on drop.
pub struct Netns {
    pub bridge: String,
    pub nodes: Vec<String>,
    /// Every namespace created so far (deleted on drop).
    pub made: Vec<String>,
    /// Node processes (killed by pid on drop).
    pub procs: Vec<Child>,
    pub subnet: u8,
}

impl Netns {
    /// Makes the bridge namespace and `NODES` node namespaces, each node
    /// joined to the bridge by a veth pair and given its address and the
    /// MAC [`mac`]`(i)`.
    pub fn build(tag: &str) -> Result<Netns, Refused> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(Refused("not root".into()));
        }
        let pid = std::process::id();
        let base = format!("skv{pid}{tag}");
        let mut n = Netns {
            bridge: format!("{base}b"),
            nodes: (0..NODES).map(|i| format!("{base}{i}")).collect(),
            made: Vec::new(),
            procs: Vec::new(),
            subnet: (pid % 256) as u8,
        };
        let b = n.bridge.clone();
        n.add(&b)?;
        ip(&["-n", &b, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &b, "link", "set", "br0", "up"])?;
        for (i, ns) in n.nodes.clone().iter().enumerate() {
            n.add(ns)?;
            let port = format!("p{i}");
            // Created inside the bridge namespace, its peer moved straight
            // into the node's: nothing passes through the root namespace.
            ip(&[
                "-n", &b, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", ns,
            ])?;
            ip(&["-n", &b, "link", "set", &port, "master", "br0"])?;
            ip(&["-n", &b, "link", "set", &port, "up"])?;
            let addr = format!("10.77.{}.{}/24", n.subnet, i + 1);
            ip(&["-n", ns, "addr", "add", &addr, "dev", "eth0"])?;
            ip(&["-n", ns, "link", "set", "eth0", "address", &mac(i)])?;
            ip(&["-n", ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(n)
    }

    pub fn add(&mut self, ns: &str) -> Result<(), Refused> {
        ip(&["netns", "add", ns])?;
        self.made.push(ns.to_string());
        Ok(())
    }

    /// Node `i`'s address with `port`.
    pub fn addr(&self, i: usize, port: u16) -> SocketAddr {
        SocketAddr::from(([10, 77, self.subnet, i as u8 + 1], port))
    }

    /// Every node's `/status` (its control endpoint at [`CONTROL_PORT`]),
    /// read from inside the first node's namespace, node 0 first.
    pub fn statuses(&self) -> Vec<serde_json::Value> {
        let controls: Vec<_> = (0..NODES).map(|i| self.addr(i, CONTROL_PORT)).collect();
        in_netns(&self.nodes[0], || {
            controls
                .iter()
                .map(|a| wait_status(*a, Duration::from_secs(5)))
                .collect()
        })
    }

    /// `ip netns exec NS splitkv ARGS`, output to `DIR/NAME.out` and `.err`
    /// (`ip netns exec` execs the binary, so the child's pid is the node's).
    pub fn exec(&self, ns: &str, args: &[&str], dir: &Path, name: &str) -> Child {
        let out = File::create(dir.join(format!("{name}.out"))).expect("create a log");
        let err = File::create(dir.join(format!("{name}.err"))).expect("create a log");
        Command::new("ip")
            .args(["netns", "exec", ns, env!("CARGO_BIN_EXE_splitkv")])
            .args(args)
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("start ip netns exec")
    }

    /// Starts every node (`--threads 1`) and waits until each answers.
    pub fn start_nodes(&mut self, config: &Path, dir: &Path) {
        let config = config.to_str().unwrap();
        for (i, ns) in self.nodes.iter().enumerate() {
            let id = i.to_string();
            let args = ["node", "--config", config, "--id", &id, "--threads", "1"];
            let child = self.exec(ns, &args, dir, &format!("node{i}"));
            self.procs.push(child);
        }
        let controls: Vec<_> = (0..NODES).map(|i| self.addr(i, CONTROL_PORT)).collect();
        in_netns(&self.nodes[0], || {
            for a in controls {
                wait_status(a, READY_TIMEOUT);
            }
        });
    }

    /// Starts the nodes on `config`, runs `splitkv bench WORKLOAD --cluster
    /// CONFIG ARGS` from node 0's namespace (outputs in `dir`) within
    /// `timeout`, asserts it exits 0 with "checks: ok" and that every node
    /// still runs, and returns its stdout.
    pub fn run_bench(
        &mut self,
        config: &Path,
        dir: &Path,
        workload: &str,
        args: &[&str],
        timeout: Duration,
    ) -> String {
        self.start_nodes(config, dir);
        let mut all = vec!["bench", workload, "--cluster", config.to_str().unwrap()];
        all.extend_from_slice(args);
        let mut bench = self.exec(&self.nodes[0], &all, dir, "bench");
        let status = wait_exit(&mut bench, timeout);
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        let stdout = read("bench.out");
        assert_eq!(
            status.code(),
            Some(0),
            "{stdout}\n{}\nnode 0: {}",
            read("bench.err"),
            read("node0.err")
        );
        assert!(stdout.contains("checks: ok"), "{stdout}");
        for (i, p) in self.procs.iter_mut().enumerate() {
            assert_eq!(p.try_wait().expect("try_wait"), None, "node {i} exited");
        }
        stdout
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for p in &mut self.procs {
            if let Ok(None) = p.try_wait() {
                let _ = p.kill();
                let _ = p.wait();
            }
        }
        for ns in self.made.iter().rev() {
            if let Err(Refused(why)) = ip(&["netns", "del", ns]) {
                eprintln!("netns teardown: {why}");
            }
        }
    }
}

/// Runs `f` on a thread that has entered network namespace `ns` (its sockets
/// live there); the test's other threads stay where they are.
pub fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> T {
    let file = File::open(format!("/run/netns/{ns}")).expect("open the namespace");
    std::thread::scope(|s| {
        s.spawn(|| {
            use std::os::fd::AsRawFd;
            // SAFETY: a valid namespace descriptor; only this thread moves.
            let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .expect("the namespaced thread")
    })
}

/// Whether network namespace `ns` exists (is named under `/run/netns`).
pub fn namespace_exists(ns: &str) -> bool {
    Path::new("/run/netns").join(ns).exists()
}
