//! Measurement, not a check (`#[ignore]`d; run it by hand): Smallbank on
//! three `splitkv node` processes over DPDK's `net_af_packet` (veths and a
//! bridge in network namespaces this test makes, as `dpdk_netns.rs` does),
//! on three node processes over kernel UDP in the same namespaces, and on
//! the in-process cluster; two alternating rounds. Prints one table:
//! completed and committed transactions per second, p50/p99 latency, user
//! and system CPU of every process involved (the nodes' from
//! `/proc/PID/stat` over the bench's life, the bench's own from `wait4`),
//! CPU time per committed transaction, and on DPDK the port's send and
//! receive bursts per committed transaction (net_af_packet makes one
//! `sendto` system call per send burst).
//!
//! ```text
//! cargo test -p splitkv --features dpdk --release --test smallbank_cpu -- --ignored --nocapture
//! ```
//!
//! Bounded: each bench has a deadline ([`BENCH_TIMEOUT`]); nodes are killed
//! and namespaces deleted when a run ends (`support_netns`). Where
//! namespaces are not allowed it prints why and measures only the
//! in-process cluster.

mod support_deploy;
mod support_netns;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support_deploy::TOKEN;
use support_netns::{mac, Netns, Refused, CONTROL_PORT, DATA_PORT, NODES};

/// Longest one bench may take (load, warm-up, measurement, checks).
const BENCH_TIMEOUT: Duration = Duration::from_secs(120);
/// Smallbank's arguments in every configuration.
const ARGS: [&str; 6] = [
    "--accounts-per-node",
    "10000",
    "--duration",
    "5s",
    "--warmup",
    "1s",
];
/// Rounds of the three configurations, alternating.
const ROUNDS: usize = 2;

/// CPU seconds, user and system.
#[derive(Debug, Clone, Copy, Default)]
struct Cpu {
    user_s: f64,
    sys_s: f64,
}

impl std::ops::Add for Cpu {
    type Output = Cpu;
    fn add(self, o: Cpu) -> Cpu {
        Cpu {
            user_s: self.user_s + o.user_s,
            sys_s: self.sys_s + o.sys_s,
        }
    }
}

impl std::ops::Sub for Cpu {
    type Output = Cpu;
    fn sub(self, o: Cpu) -> Cpu {
        Cpu {
            user_s: self.user_s - o.user_s,
            sys_s: self.sys_s - o.sys_s,
        }
    }
}

/// One configuration's figures.
#[derive(Debug, Default)]
struct Row {
    name: &'static str,
    committed_per_s: f64,
    completed_per_s: f64,
    p50_us: f64,
    p99_us: f64,
    committed: f64,
    cpu: Cpu,
    /// DPDK send and receive bursts over every node (0 elsewhere).
    bursts: (u64, u64),
}

/// A process's CPU so far, from `/proc/PID/stat` (utime, stime).
fn proc_cpu(pid: u32) -> Cpu {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    let after = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // SAFETY: sysconf has no preconditions.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    // Fields 14 and 15 of stat(5), 11 and 12 after the state (field 3).
    Cpu {
        user_s: f[11].parse::<f64>().expect("utime") / tick,
        sys_s: f[12].parse::<f64>().expect("stime") / tick,
    }
}

/// Waits for `child` to exit within [`BENCH_TIMEOUT`] (killing it past
/// that) and returns its exit code and CPU (`wait4`'s rusage).
fn wait_cpu(child: &mut Child) -> (i32, Cpu) {
    let pid = child.id() as libc::pid_t;
    let start = Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: all-zero is a valid rusage.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: our child's pid; valid out-pointers.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        assert!(r >= 0, "wait4: {}", std::io::Error::last_os_error());
        if r == pid {
            let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            let code = if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                -1
            };
            return (
                code,
                Cpu {
                    user_s: tv(ru.ru_utime),
                    sys_s: tv(ru.ru_stime),
                },
            );
        }
        if start.elapsed() > BENCH_TIMEOUT {
            let _ = child.kill();
            panic!("the bench did not exit within {BENCH_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The number after `label` in the bench's report (`committed  N (X tx/s)`
/// gives N; `label` "(" gives X).
fn figure(out: &str, line: &str, nth: usize) -> f64 {
    let l = out
        .lines()
        .find(|l| l.trim_start().starts_with(line))
        .unwrap_or_else(|| panic!("no `{line}` in:\n{out}"));
    l[l.find(line).unwrap() + line.len()..]
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter(|s| !s.is_empty())
        .nth(nth)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no figure {nth} in `{l}`"))
}

fn row(name: &'static str, out: &str, cpu: Cpu, bursts: (u64, u64)) -> Row {
    assert!(out.contains("money check    ok"), "{out}");
    assert!(out.contains("replica check  ok"), "{out}");
    Row {
        name,
        committed: figure(out, "committed", 0),
        committed_per_s: figure(out, "committed", 1),
        completed_per_s: figure(out, "completed", 1),
        p50_us: figure(out, "latency (µs)   p50", 0),
        p99_us: figure(out, "latency (µs)   p50", 2),
        cpu,
        bursts,
    }
}

/// The in-process cluster: `splitkv bench smallbank --threads 2`.
fn in_process(dir: &Path) -> Row {
    let out = dir.join("inproc.out");
    let mut child = Command::new(env!("CARGO_BIN_EXE_splitkv"))
        .args(["bench", "smallbank", "--threads", "2"])
        .args(ARGS)
        .stdout(std::fs::File::create(&out).expect("log"))
        .stderr(Stdio::null())
        .spawn()
        .expect("start the bench");
    let (code, cpu) = wait_cpu(&mut child);
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    assert_eq!(code, 0, "{text}");
    row("in-process (2 threads)", &text, cpu, (0, 0))
}

/// A three-node cluster file on `net`'s addresses: UDP, or DPDK on
/// `net_af_packet` over each node's `eth0`.
fn cluster_file(net: &Netns, dir: &Path, dpdk: bool) -> PathBuf {
    let mut text = format!(
        "cluster_id = 7\ntoken = \"{TOKEN}\"\nreplication = {NODES}\n\n\
         [table]\ncapacity_keys = 100000\nvalue_bytes_max = 256\n"
    );
    if dpdk {
        text.push_str(
            "\n[transport]\nkind = \"dpdk\"\ndevice = \"net_af_packet0\"\n\
             eal_args = [\"--no-pci\", \"--no-huge\", \"-m\", \"256\", \
             \"--vdev=net_af_packet0,iface=eth0\", \"--log-level=lib.eal:error\"]\n",
        );
    }
    for i in 0..NODES {
        text.push_str(&format!(
            "\n[[node]]\nid = {i}\ndata = \"{}\"\ncontrol = \"{}\"\ncontrol_public = true\n",
            net.addr(i, DATA_PORT),
            net.addr(i, CONTROL_PORT)
        ));
        if dpdk {
            text.push_str(&format!("mac = \"{}\"\n", mac(i)));
        }
    }
    let path = dir.join(if dpdk { "dpdk.toml" } else { "udp.toml" });
    std::fs::write(&path, text).expect("write the cluster file");
    path
}

/// Three node processes (`--threads 1` each) in namespaces, the bench run
/// from node 0's.
fn processes(tag: &str, dir: &Path, dpdk: bool) -> Result<Row, Refused> {
    let mut net = Netns::build(tag)?;
    let config = cluster_file(&net, dir, dpdk);
    net.start_nodes(&config, dir);
    let pids: Vec<u32> = net.procs.iter().map(|p| p.id()).collect();
    let before: Vec<Cpu> = pids.iter().map(|&p| proc_cpu(p)).collect();
    let mut all = vec!["bench", "smallbank", "--cluster", config.to_str().unwrap()];
    all.extend_from_slice(&ARGS);
    let mut bench = net.exec(&net.nodes[0], &all, dir, "bench");
    let (code, bench_cpu) = wait_cpu(&mut bench);
    let nodes_cpu = pids
        .iter()
        .zip(&before)
        .fold(Cpu::default(), |acc, (&p, &b)| acc + (proc_cpu(p) - b));
    let text = std::fs::read_to_string(dir.join("bench.out")).unwrap_or_default();
    assert_eq!(code, 0, "{text}");
    let statuses = net.statuses();
    let burst = |dir: &str| -> u64 {
        statuses
            .iter()
            .map(|s| s["dpdk"][dir]["bursts"].as_u64().unwrap_or(0))
            .sum()
    };
    let name = if dpdk {
        "3 processes, DPDK af_packet"
    } else {
        "3 processes, UDP"
    };
    Ok(row(
        name,
        &text,
        nodes_cpu + bench_cpu,
        (burst("tx"), burst("rx")),
    ))
}

fn print(rows: &[Row]) {
    println!(
        "| configuration | committed tx/s | completed tx/s | p50 µs | p99 µs | user s | sys s | \
         CPU µs per committed | of it user µs | vs in-process | send / receive bursts per committed |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut base = None;
    for r in rows {
        let per = (r.cpu.user_s + r.cpu.sys_s) / r.committed;
        if r.name.starts_with("in-process") {
            base = Some(per); // each round against its own in-process run
        }
        let ratio = base.map_or("-".to_string(), |b| format!("{:.2}×", per / b));
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} | {:.1} | {:.1} | {} | {:.2} / {:.2} |",
            r.name,
            r.committed_per_s,
            r.completed_per_s,
            r.p50_us,
            r.p99_us,
            r.cpu.user_s,
            r.cpu.sys_s,
            per * 1e6,
            r.cpu.user_s / r.committed * 1e6,
            ratio,
            r.bursts.0 as f64 / r.committed,
            r.bursts.1 as f64 / r.committed,
        );
    }
}

#[test]
#[ignore = "a measurement (about a minute per round); run by hand, see the module docs"]
fn smallbank_cpu_per_transaction_dpdk_udp_in_process() {
    let mut rows = Vec::new();
    for round in 0..ROUNDS {
        let dir = tempfile::tempdir().expect("tempdir");
        rows.push(in_process(dir.path()));
        for (tag, dpdk) in [("d", true), ("u", false)] {
            let tag = format!("{tag}{round}");
            match processes(&tag, dir.path(), dpdk) {
                Ok(r) => rows.push(r),
                Err(Refused(why)) => println!("node processes skipped: no namespaces ({why})"),
            }
        }
    }
    print(&rows);
}
