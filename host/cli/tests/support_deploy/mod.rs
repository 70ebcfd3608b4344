//! What the deployed-cluster tests share: cluster files on loopback with
//! ports the OS picked (bound, then released, so peers can name each other's
//! UDP ports; a run that loses a port to another test is retried), a raw
//! HTTP/1.0 call to a control endpoint, and bounded waits.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Token of the test cluster files.
pub const TOKEN: &str = "test-token";

/// Attempts of a run whose ports another test took meanwhile.
pub const PORT_RETRIES: usize = 3;

/// List-append transactions per client in the runs that kill node 2:
/// more than a client draws in 0.5 s on an idle machine, so the survivors
/// still have some after the kill (12,000 ran out before it on the idle
/// 2-core machine, 2026-11-28: "survivors committed 0 transactions after
/// it"; the runs' `--duration` bounds them either way).
pub const KILL_LIST_APPEND_BUDGET: &str = "40000";
/// The Smallbank run of the deployed kill tests (`cluster_kill`,
/// `cluster_rejoin`, `cluster_replace`), before its fault flags.
pub const KILL_SMALLBANK_ARGS: [&str; 8] = [
    "--accounts-per-node",
    "500",
    "--duration",
    "3800ms",
    "--warmup",
    "200ms",
    "--inflight",
    "8",
];
/// The list-append run of the deployed kill tests, before its fault flags.
/// A list-append client stops at its budget, which a fast machine spends in
/// about 1.5 s (24k draws/s on 3 clients): killed at 0.5 s, the survivors
/// still have transactions after the recovery (~1.3 s).
pub const KILL_LIST_APPEND_ARGS: [&str; 6] = [
    "--transactions",
    KILL_LIST_APPEND_BUDGET,
    "--duration",
    "4s",
    "--inflight",
    "4",
];
/// Host table capacity (keys per node) for that budget's key space.
pub const KILL_CAPACITY_KEYS: u64 = 400_000;

/// Lowest port [`free_ports`] picks from.
const PORT_LOW: u16 = 20_000;

/// `n` pairs of a free loopback UDP port and a free loopback TCP port, all
/// distinct, held until all are chosen, then released. They lie below the
/// kernel's ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`)
/// where it leaves room: a port from that range can be handed to an
/// outgoing connection (the bench's status polls, the etcd clients) before
/// a node binds it, and a restarted node binds its ports again seconds
/// after its kill. The search starts at a place drawn from the process id
/// and a counter, so parallel tests seldom try the same ports.
fn free_ports(n: usize) -> Vec<(u16, u16)> {
    static CALLS: AtomicU32 = AtomicU32::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(0);
    let mut held = Vec::with_capacity(n);
    if low <= PORT_LOW + 1_000 {
        for _ in 0..n {
            let udp = UdpSocket::bind("127.0.0.1:0").expect("bind udp");
            let tcp = TcpListener::bind("127.0.0.1:0").expect("bind tcp");
            held.push((udp, tcp));
        }
    } else {
        let span = u32::from(low - PORT_LOW);
        let call = CALLS.fetch_add(1, Ordering::Relaxed);
        let start = std::process::id()
            .wrapping_mul(7_919)
            .wrapping_add(call.wrapping_mul(104_729));
        let mut k = 0;
        while held.len() < n {
            assert!(
                k < span,
                "no {n} free loopback port pairs in {PORT_LOW}..{low}"
            );
            let port = |d: u32| PORT_LOW + (start.wrapping_add(k + d) % span) as u16;
            let (data, control) = (port(0), port(1));
            k += 2;
            let udp = UdpSocket::bind(("127.0.0.1", data));
            let tcp = TcpListener::bind(("127.0.0.1", control));
            if let (Ok(u), Ok(t)) = (udp, tcp) {
                held.push((u, t));
            }
        }
    }
    let port = |a: std::io::Result<SocketAddr>| a.expect("local address").port();
    held.iter()
        .map(|(u, t)| (port(u.local_addr()), port(t.local_addr())))
        .collect()
}

/// A cluster file of `nodes` nodes on loopback (fresh ports), `extra` TOML
/// added before the nodes, written into a fresh temporary directory.
pub struct ClusterFile {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
    pub controls: Vec<SocketAddr>,
}

pub fn cluster_file(nodes: usize, replication: usize, extra: &str) -> ClusterFile {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut text = format!(
        "cluster_id = 5\ntoken = \"{TOKEN}\"\nreplication = {replication}\n\n[table]\ncapacity_keys = 20000\nvalue_bytes_max = 256\n{extra}\n"
    );
    let mut controls = Vec::new();
    for (id, (data, control)) in free_ports(nodes).into_iter().enumerate() {
        text.push_str(&format!(
            "\n[[node]]\nid = {id}\ndata = \"127.0.0.1:{data}\"\ncontrol = \"127.0.0.1:{control}\"\n"
        ));
        controls.push(SocketAddr::from(([127, 0, 0, 1], control)));
    }
    let path = dir.path().join("cluster.toml");
    std::fs::write(&path, text).expect("write cluster file");
    ClusterFile {
        dir,
        path,
        controls,
    }
}

/// Bound on building the external client program when it is not there yet.
pub const CLIENT_BUILD_TIMEOUT: Duration = Duration::from_secs(900);

/// The external client program (`splitkv-app-client`) next to the `splitkv`
/// under test, built (or found up to date) once per test binary, so a stale
/// copy is never run.
pub fn client_program() -> PathBuf {
    static BUILT: std::sync::Once = std::sync::Once::new();
    let splitkv = std::path::Path::new(env!("CARGO_BIN_EXE_splitkv"));
    let program = splitkv.with_file_name("splitkv-app-client");
    BUILT.call_once(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo)
            .args(["build", "--release", "-p", "splitkv-app-client"])
            .stdin(Stdio::null())
            .spawn()
            .expect("start cargo");
        let status = wait_exit(&mut build, CLIENT_BUILD_TIMEOUT);
        assert!(status.success(), "building splitkv-app-client: {status}");
    });
    assert!(program.is_file(), "{} missing", program.display());
    program
}

/// Runs the binary with `args`, stdout and stderr captured.
pub fn splitkv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_splitkv"))
        .args(args)
        .output()
        .expect("run splitkv")
}

/// A node process, killed when dropped (so a failing test leaves no
/// busy-polling process behind).
pub struct NodeProc(pub Child);

impl std::ops::Deref for NodeProc {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for NodeProc {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for NodeProc {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Starts `splitkv node` for node `id` of `file` on one polling thread.
pub fn spawn_node(file: &ClusterFile, id: u16) -> NodeProc {
    let child = Command::new(env!("CARGO_BIN_EXE_splitkv"))
        .arg("node")
        .arg("--config")
        .arg(&file.path)
        .args(["--id", &id.to_string(), "--threads", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start splitkv node");
    NodeProc(child)
}

/// One HTTP/1.0 call: `(status, body)`; `token` adds the bearer header.
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        s,
        "{method} {path} HTTP/1.0\r\n{auth}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    Ok((status, body))
}

/// Polls `GET /status` at `addr` until it answers (at most `limit`).
pub fn wait_status(addr: SocketAddr, limit: Duration) -> serde_json::Value {
    let start = Instant::now();
    loop {
        if let Ok((200, body)) = http(addr, "GET", "/status", None, "") {
            return serde_json::from_str(&body).expect("status is JSON");
        }
        assert!(
            start.elapsed() < limit,
            "{addr} did not answer within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `child` to exit (at most `limit`; killed and failed after).
pub fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("the process did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends `signal` to `child`.
pub fn signal(child: &Child, signal: i32) {
    // SAFETY: the child is ours and not yet reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, signal) };
}

/// Whether a failed run lost a port to another process (then retried).
pub fn lost_a_port(out: &Output) -> bool {
    let err = String::from_utf8_lossy(&out.stderr);
    out.status.code() == Some(2) && (err.contains("in use") || err.contains("exited"))
}

/// Runs `splitkv bench WORKLOAD --cluster F --spawn --threads 1 ARGS` on a
/// fresh three-node file, replication 3, retrying when a port was taken.
/// `setup` gives the file's extra TOML and whatever must live for the run
/// (a fresh etcd, say: a stored configuration would outlive one run);
/// `capacity_keys` replaces the file's table capacity (keys per node).
pub fn bench_on_three<G>(
    workload: &str,
    args: &[&str],
    capacity_keys: Option<u64>,
    setup: impl FnMut() -> (String, G),
) -> Output {
    bench_on((3, 3), workload, args, capacity_keys, setup)
}

/// [`bench_on_three`] on a fresh file of `shape.0` nodes, replication
/// `shape.1`.
pub fn bench_on<G>(
    shape: (usize, usize),
    workload: &str,
    args: &[&str],
    capacity_keys: Option<u64>,
    mut setup: impl FnMut() -> (String, G),
) -> Output {
    let mut last = None;
    for _ in 0..PORT_RETRIES {
        let (extra, _alive) = setup();
        let file = cluster_file(shape.0, shape.1, &extra);
        if let Some(keys) = capacity_keys {
            let text = std::fs::read_to_string(&file.path).unwrap();
            let text = text.replace("capacity_keys = 20000", &format!("capacity_keys = {keys}"));
            std::fs::write(&file.path, text).unwrap();
        }
        let path = file.path.to_str().unwrap().to_string();
        let mut all = vec![
            "bench",
            workload,
            "--cluster",
            &path,
            "--spawn",
            "--threads",
            "1",
        ];
        all.extend_from_slice(args);
        let out = splitkv(&all);
        if !lost_a_port(&out) {
            return out;
        }
        last = Some(out);
    }
    last.unwrap()
}

/// [`bench_on_three`], asserting that each try took at most `run_max` (the
/// whole call at most `run_max` times [`PORT_RETRIES`]).
pub fn bench_on_three_within<G>(
    workload: &str,
    args: &[&str],
    capacity_keys: Option<u64>,
    run_max: Duration,
    setup: impl FnMut() -> (String, G),
) -> Output {
    let t0 = Instant::now();
    let out = bench_on_three(workload, args, capacity_keys, setup);
    assert!(
        t0.elapsed() < run_max * PORT_RETRIES as u32,
        "{:?}",
        t0.elapsed()
    );
    out
}

/// The sampling interval of a `--timeline` (`host/cli/src/timeline.rs`).
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// Longest gap between two consecutive timeline samples of a deployed run
/// (the bench samples every [`SAMPLE_INTERVAL`] whatever it is doing, a
/// node's restart included; a loaded machine delays a pass a little).
pub const SAMPLE_GAP_MAX: Duration = Duration::from_millis(300);

/// The two runs of `cluster_rejoin` and `cluster_replace`, checked: node 2
/// killed, then brought back by `--{verb}` (`restart` or `replace`), each
/// run on a fresh three-node file from `setup` (a fresh etcd), at most
/// `run_max`: Smallbank (kill at 1.0 s, back at 1.2 s, before the
/// survivors' recovery) with its money and replica checks and a timeline
/// that marks the kill, node 2 `how` (`restarted`, `replaced`), its
/// admission and the restored degree in order, and was sampled throughout
/// ([`assert_timeline_sampled_throughout`]: a bench that waited in its
/// sampling loop for the new process's endpoint, load and client start
/// left a gap of 405 ms); then
/// list-append (kill at 0.5 s, back at 2.0 s) with its history and
/// lost-commit checks. Each run passes [`assert_rejoined`], and `line`
/// asserts what else its report line says.
pub fn brought_back_runs_pass_every_check<G>(
    verb: &str,
    how: &str,
    run_max: Duration,
    mut setup: impl FnMut() -> (String, G),
    line: impl Fn(&str),
) {
    let dir = std::env::temp_dir().join(format!("splitkv-{verb}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let timeline = dir.join(format!("smallbank-{verb}"));
    let keys = Some(KILL_CAPACITY_KEYS);
    let back = format!("--{verb}");
    let timeline_arg = timeline.to_str().unwrap();
    let faults = [
        "--kill",
        "2@1.0",
        &back,
        "2@1.2",
        "--timeline",
        timeline_arg,
    ];
    let smallbank = [&faults[..], &KILL_SMALLBANK_ARGS[..]].concat();
    let out = bench_on_three_within("smallbank", &smallbank, keys, run_max, &mut setup);
    let (stdout, l) = assert_rejoined(&out, verb);
    line(&l);
    assert!(stdout.contains("money check    ok"), "{stdout}");
    assert!(stdout.contains("replica check  ok"), "{stdout}");
    assert_timeline_marks_the_rejoin(&timeline, how);
    assert_timeline_sampled_throughout(&timeline);
    let _ = std::fs::remove_dir_all(&dir);
    let faults = ["--kill", "2@0.5", &back, "2@2.0"];
    let list_append = [&faults[..], &KILL_LIST_APPEND_ARGS[..]].concat();
    let out = bench_on_three_within("list-append", &list_append, keys, run_max, setup);
    let (stdout, l) = assert_rejoined(&out, verb);
    line(&l);
    assert!(
        stdout.contains("history check (strict serializability): valid"),
        "{stdout}"
    );
    assert!(stdout.contains("lost-commit check: ok"), "{stdout}");
}

/// A history bench's report (`stdout`) says its history is strictly
/// serializable and no commit was lost.
pub fn assert_history_checks_passed(stdout: &str) {
    assert!(
        stdout.contains("history check (strict serializability): valid"),
        "{stdout}"
    );
    assert!(stdout.contains("lost-commit check: ok"), "{stdout}");
}

/// Exit 0, every check passed, node 2 killed, and the survivors committed
/// after the kill; returns standard output and the report's kill line.
pub fn assert_recovered_from_kill(out: &Output) -> (String, String) {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{err}");
    assert!(stdout.contains("checks: ok"), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("killed: node 2 (SIGKILL) at"))
        .unwrap_or_else(|| panic!("no kill line: {stdout}"))
        .to_string();
    let after: u64 = line
        .split("survivors committed ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(
        after > 0,
        "the survivors committed nothing after the kill: {stdout}\n{err}"
    );
    (stdout, line)
}

/// Exit 0, every check passed, the survivors committed after the kill,
/// and node 2 was started again (`verb`: `restart`, or `replace` on a new
/// machine), admitted, got copies and is a replica again; returns standard
/// output and the report's line about it.
pub fn assert_rejoined(out: &Output, verb: &str) -> (String, String) {
    let (stdout, killed) = assert_recovered_from_kill(out);
    let err = String::from_utf8_lossy(&out.stderr);
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("{verb}: node 2 started again")))
        .unwrap_or_else(|| panic!("no {verb} line: {stdout}\n{err}"))
        .to_string();
    assert!(!line.contains("never"), "{line}");
    assert!(line.contains("its role \"replica\""), "{line}");
    let done: u64 = line
        .rsplit("copy Done messages received ")
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(done > 0, "node 2 got no copy: {line}");
    eprintln!("{killed}\n{line}");
    (stdout, line)
}

/// The time (s) of the event labelled `label` in a `--timeline` CSV
/// (`kind,t_s,committed_total,committed_per_s,label`); panics with the CSV
/// if it has none.
pub fn timeline_event(csv: &str, label: &str) -> f64 {
    csv.lines()
        .find(|l| l.starts_with("event,") && l.ends_with(label))
        .and_then(|l| l.split(',').nth(1)?.parse().ok())
        .unwrap_or_else(|| panic!("no event {label:?} in\n{csv}"))
}

/// The `--timeline` CSV has the kill, node 2 started again (`how`:
/// `restarted` or `replaced`), its admission and the restored degree, in
/// that order.
pub fn assert_timeline_marks_the_rejoin(timeline: &std::path::Path, how: &str) {
    let csv = std::fs::read_to_string(timeline.with_extension("csv")).unwrap();
    let event = |label: &str| timeline_event(&csv, label);
    let times = [
        event("node 2 killed"),
        event(&format!("node 2 {how}")),
        event("node 2 admitted"),
        event("replication restored"),
    ];
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}\n{csv}");
}

/// The `--timeline` CSV's samples come at most [`SAMPLE_GAP_MAX`] apart
/// over the whole run (kills and restarts included).
pub fn assert_timeline_sampled_throughout(timeline: &std::path::Path) {
    let csv = std::fs::read_to_string(timeline.with_extension("csv")).unwrap();
    let times: Vec<f64> = csv
        .lines()
        .filter(|l| l.starts_with("sample,"))
        .filter_map(|l| l.split(',').nth(1)?.parse().ok())
        .collect();
    assert!(times.len() >= 10, "{} samples\n{csv}", times.len());
    let (at, max) = (times.windows(2).map(|w| w[1] - w[0]).enumerate())
        .fold((0, 0f64), |m, (i, g)| if g > m.1 { (i, g) } else { m });
    eprintln!(
        "timeline: {} samples, at most {max:.3} s apart",
        times.len()
    );
    assert!(
        max <= SAMPLE_GAP_MAX.as_secs_f64(),
        "no sample from {:.3} s to {:.3} s (every {SAMPLE_INTERVAL:?} expected)\n{csv}",
        times[at],
        times[at + 1]
    );
}
