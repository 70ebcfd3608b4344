//! Three node processes in three network namespaces, joined by veth pairs
//! to a bridge in a fourth namespace, run Smallbank and list-append over UDP
//! and pass every check (the deployable cluster across namespaces).
//!
//! Each test makes its own namespaces (`skv<pid><tag>b` for the bridge,
//! `skv<pid><tag>0..2` for the nodes), creates every link inside them (the
//! root namespace's interfaces and routes are never touched), gives node `i`
//! the address `10.77.<pid % 256>.<i + 1>/24`, writes a cluster file with
//! `control_public = true` on those addresses, starts the nodes with
//! `ip netns exec`, and runs the bench from inside node 0's namespace. A
//! guard kills the node processes by pid and deletes the namespaces, also
//! when the test fails. Where the machine does not allow namespaces (not
//! root, no `ip`, `ip netns add` or a link refused) the test prints one line
//! saying why and passes.

mod support_deploy;

use std::fs::File;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use support_deploy::{wait_exit, wait_status, TOKEN};

/// Data port of every node (each node has a namespace, so ports never collide).
const DATA_PORT: u16 = 7100;
/// Control port of every node.
const CONTROL_PORT: u16 = 7200;
/// Longest the nodes may take to answer their first `/status`.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest one bench may take.
const BENCH_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest one `ip` command may take.
const IP_TIMEOUT: Duration = Duration::from_secs(10);
/// Nodes of the cluster.
const NODES: usize = 3;

/// One namespaced cluster at a time: six node processes and two benches at
/// once would crowd a two-core machine.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Why a namespace step failed: the machine does not allow it.
struct Refused(String);

/// Runs `ip ARGS`, bounded; `Err` with the command and its reason if it fails.
fn ip(args: &[&str]) -> Result<(), Refused> {
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
struct Netns {
    bridge: String,
    nodes: Vec<String>,
    /// Every namespace created so far (deleted on drop).
    made: Vec<String>,
    /// Node processes (killed by pid on drop).
    procs: Vec<Child>,
    subnet: u8,
}

impl Netns {
    /// Makes the bridge namespace and `NODES` node namespaces, each node
    /// joined to the bridge by a veth pair and given its address.
    fn build(tag: &str) -> Result<Netns, Refused> {
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
            ip(&["-n", ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(n)
    }

    fn add(&mut self, ns: &str) -> Result<(), Refused> {
        ip(&["netns", "add", ns])?;
        self.made.push(ns.to_string());
        Ok(())
    }

    /// Node `i`'s address with `port`.
    fn addr(&self, i: usize, port: u16) -> SocketAddr {
        SocketAddr::from(([10, 77, self.subnet, i as u8 + 1], port))
    }

    /// A three-node cluster file on the namespaces' addresses, in `dir`.
    fn cluster_file(&self, dir: &Path) -> std::path::PathBuf {
        let mut text = format!(
            "cluster_id = 5\ntoken = \"{TOKEN}\"\nreplication = {NODES}\n\n[table]\ncapacity_keys = 20000\nvalue_bytes_max = 256\n"
        );
        for i in 0..NODES {
            text.push_str(&format!(
                "\n[[node]]\nid = {i}\ndata = \"{}\"\ncontrol = \"{}\"\ncontrol_public = true\n",
                self.addr(i, DATA_PORT),
                self.addr(i, CONTROL_PORT)
            ));
        }
        let path = dir.join("cluster.toml");
        std::fs::write(&path, text).expect("write the cluster file");
        path
    }

    /// `ip netns exec NS splitkv ARGS`, output to `DIR/NAME.out` and `.err`
    /// (`ip netns exec` execs the binary, so the child's pid is the node's).
    fn exec(&self, ns: &str, args: &[&str], dir: &Path, name: &str) -> Child {
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
    fn start_nodes(&mut self, config: &Path, dir: &Path) {
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
fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> T {
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
fn namespace_exists(ns: &str) -> bool {
    Path::new("/run/netns").join(ns).exists()
}

/// Builds the namespaces and nodes, runs `bench WORKLOAD ARGS` from node 0's
/// namespace and returns its stdout (asserting exit 0 and "checks: ok"), or
/// `None` (after one line saying why) where namespaces are not allowed.
fn bench_in_namespaces(tag: &str, workload: &str, args: &[&str]) -> Option<String> {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let t0 = Instant::now();
    let mut net = match Netns::build(tag) {
        Ok(n) => n,
        Err(Refused(why)) => {
            println!("netns test skipped: network namespaces are not available here ({why})");
            return None;
        }
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = net.cluster_file(dir.path());
    net.start_nodes(&config, dir.path());
    let mut all = vec!["bench", workload, "--cluster", config.to_str().unwrap()];
    all.extend_from_slice(args);
    let mut bench = net.exec(&net.nodes[0], &all, dir.path(), "bench");
    let status = wait_exit(&mut bench, BENCH_TIMEOUT);
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
    let stdout = read("bench.out");
    assert_eq!(
        status.code(),
        Some(0),
        "{stdout}\n{}\nnode 0: {}",
        read("bench.err"),
        read("node0.err")
    );
    assert!(stdout.contains("checks: ok"), "{stdout}");
    println!("{workload} across namespaces:\n{stdout}");
    for (i, p) in net.procs.iter_mut().enumerate() {
        assert_eq!(p.try_wait().expect("try_wait"), None, "node {i} exited");
    }
    let controls: Vec<_> = (0..NODES).map(|i| net.addr(i, CONTROL_PORT)).collect();
    let statuses = in_netns(&net.nodes[0], || {
        controls
            .iter()
            .map(|a| wait_status(*a, Duration::from_secs(5)))
            .collect::<Vec<_>>()
    });
    for s in statuses {
        let received = s["sessions"]["packets_received"].as_u64().unwrap_or(0);
        assert!(received > 0, "no packets crossed the bridge: {s}");
        assert_eq!(s["sessions"]["sessions_failed"], 0, "{s}");
    }
    let names = net.made.clone();
    drop(net);
    for ns in &names {
        assert!(!namespace_exists(ns), "{ns} left behind");
    }
    assert!(t0.elapsed() < BENCH_TIMEOUT * 2, "took {:?}", t0.elapsed());
    Some(stdout)
}

#[test]
fn three_namespaced_node_processes_run_smallbank_over_veth_and_pass_every_check() {
    let args = [
        "--accounts-per-node",
        "500",
        "--duration",
        "1s",
        "--warmup",
        "200ms",
        "--inflight",
        "8",
    ];
    let Some(stdout) = bench_in_namespaces("s", "smallbank", &args) else {
        return;
    };
    assert!(stdout.contains("money check    ok"), "{stdout}");
    assert!(stdout.contains("replica check  ok"), "{stdout}");
}

#[test]
fn three_namespaced_node_processes_run_list_append_over_veth_and_pass_every_check() {
    let args = ["--transactions", "500", "--inflight", "4"];
    let Some(stdout) = bench_in_namespaces("l", "list-append", &args) else {
        return;
    };
    assert!(
        stdout.contains("history check (strict serializability): valid"),
        "{stdout}"
    );
    assert!(stdout.contains("lost-commit check: ok"), "{stdout}");
    assert!(stdout.contains("1500 submitted"), "{stdout}");
}

#[test]
fn a_failing_test_leaves_no_namespace_or_process_behind() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let made: Mutex<Option<(Vec<String>, u32)>> = Mutex::new(None);
    let outcome = std::thread::scope(|s| {
        s.spawn(|| {
            let mut net = Netns::build("f")?;
            let child = Command::new("ip")
                .args(["netns", "exec", &net.nodes[1], "sleep", "30"])
                .spawn()
                .expect("start a process in a namespace");
            *made.lock().unwrap() = Some((net.made.clone(), child.id()));
            net.procs.push(child);
            panic!("a deliberate failure, to check the teardown");
            #[allow(unreachable_code)]
            Ok::<(), Refused>(())
        })
        .join()
    });
    if let Ok(Err(Refused(why))) = outcome {
        println!("netns test skipped: network namespaces are not available here ({why})");
        return;
    }
    assert!(outcome.is_err(), "the deliberate failure did not happen");
    let (names, pid) = made.into_inner().unwrap().expect("namespaces were made");
    assert_eq!(names.len(), NODES + 1);
    for ns in &names {
        assert!(!namespace_exists(ns), "{ns} left behind");
    }
    // SAFETY: signal 0 only asks whether the process exists.
    let alive = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
    assert!(!alive, "process {pid} left running");
}
