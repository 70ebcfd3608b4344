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
mod support_netns;

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use support_deploy::{assert_history_checks_passed, TOKEN};
use support_netns::{namespace_exists, Netns, Refused, CONTROL_PORT, DATA_PORT, NODES};

/// Longest one bench may take.
const BENCH_TIMEOUT: Duration = Duration::from_secs(60);

/// One namespaced cluster at a time: six node processes and two benches at
/// once would crowd a two-core machine.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A three-node cluster file on `net`'s addresses, in `dir`.
fn cluster_file(net: &Netns, dir: &Path) -> std::path::PathBuf {
    let mut text = format!(
        "cluster_id = 5\ntoken = \"{TOKEN}\"\nreplication = {NODES}\n\n[table]\ncapacity_keys = 20000\nvalue_bytes_max = 256\n"
    );
    for i in 0..NODES {
        text.push_str(&format!(
            "\n[[node]]\nid = {i}\ndata = \"{}\"\ncontrol = \"{}\"\ncontrol_public = true\n",
            net.addr(i, DATA_PORT),
            net.addr(i, CONTROL_PORT)
        ));
    }
    let path = dir.join("cluster.toml");
    std::fs::write(&path, text).expect("write the cluster file");
    path
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
    let config = cluster_file(&net, dir.path());
    let stdout = net.run_bench(&config, dir.path(), workload, args, BENCH_TIMEOUT);
    println!("{workload} across namespaces:\n{stdout}");
    let statuses = net.statuses();
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
    assert_history_checks_passed(&stdout);
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
