//! `splitkv bench … --cluster FILE --spawn`: three node processes on
//! loopback UDP (`--threads 1` each) run Smallbank and list-append and pass
//! every check across processes (money, replicas, strict serializability,
//! lost commits), also with 1% injected loss, duplication and reordering
//! (retransmissions and duplicates reported); a node killed mid-run is a
//! failed peer in the others' `/status` within the configured silence, and
//! a bench whose node dies says so in one line, exit 2.

mod support_deploy;

use std::process::Output;
use std::time::Duration;
use support_deploy::*;

/// `support_deploy::bench_on_three` with `extra` TOML in the file.
fn bench_on_three(workload: &str, extra: &str, args: &[&str]) -> Output {
    support_deploy::bench_on_three(workload, args, None, || (extra.to_string(), ()))
}

fn assert_passed(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{err}");
    assert!(stdout.contains("checks: ok"), "{stdout}");
    stdout
}

#[test]
fn three_node_processes_run_smallbank_and_pass_every_check() {
    let t0 = std::time::Instant::now();
    let out = bench_on_three(
        "smallbank",
        "",
        &[
            "--accounts-per-node",
            "500",
            "--duration",
            "1s",
            "--warmup",
            "200ms",
            "--inflight",
            "8",
        ],
    );
    let stdout = assert_passed(&out);
    assert!(stdout.contains("money check    ok"), "{stdout}");
    assert!(stdout.contains("replica check  ok"), "{stdout}");
    let committed: u64 = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("committed"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(committed > 0, "{stdout}");
    assert!(t0.elapsed() < Duration::from_secs(60));
}

#[test]
fn three_node_processes_run_list_append_and_pass_every_check() {
    let out = bench_on_three(
        "list-append",
        "",
        &["--transactions", "500", "--inflight", "4"],
    );
    let stdout = assert_passed(&out);
    assert_history_checks_passed(&stdout);
    assert!(stdout.contains("1500 submitted"), "{stdout}");
}

#[test]
fn three_node_processes_pass_every_check_under_injected_loss_duplication_and_reordering() {
    let faults = "[transport]\nloss_ppm = 10000\nduplicate_ppm = 10000\nreorder_ppm = 10000\n";
    let out = bench_on_three(
        "smallbank",
        faults,
        &[
            "--accounts-per-node",
            "500",
            "--duration",
            "1s",
            "--warmup",
            "200ms",
            "--inflight",
            "8",
        ],
    );
    let stdout = assert_passed(&out);
    assert_retransmitted(&stdout);
    let out = bench_on_three("list-append", faults, &["--transactions", "500"]);
    let stdout = assert_passed(&out);
    assert_retransmitted(&stdout);
}

/// The report's session line shows retransmissions and dropped duplicates.
fn assert_retransmitted(stdout: &str) {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("sessions"))
        .unwrap_or_else(|| panic!("no sessions line: {stdout}"));
    let n: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.trim_end_matches(',').parse().ok())
        .collect();
    assert!(n.len() == 3 && n[0] > 0 && n[1] > 0 && n[2] == 0, "{line}");
}

#[test]
fn a_node_killed_mid_run_is_a_failed_peer_in_the_others_status_within_the_silence() {
    let silence = Duration::from_millis(200);
    let file = cluster_file(3, 3, "[protocol]\nsession_silence_ms = 200\n");
    let mut nodes: Vec<_> = (0..3).map(|i| spawn_node(&file, i)).collect();
    let load =
        r#"{"version":1,"workload":{"kind":"smallbank","accounts":300,"hot_accounts":null}}"#;
    let start = r#"{"version":1,"seed":1,"inflight":8,"budget":null,"max_tries":10,"warmup_ms":0,"run_ms":null}"#;
    for a in &file.controls {
        wait_status(*a, Duration::from_secs(15));
        assert_eq!(http(*a, "POST", "/load", Some(TOKEN), load).unwrap().0, 200);
    }
    for a in &file.controls {
        assert_eq!(
            http(*a, "POST", "/workload/start", Some(TOKEN), start)
                .unwrap()
                .0,
            200
        );
    }
    let before = wait_status(file.controls[0], Duration::from_secs(5));
    assert_eq!(
        before["sessions"]["failed_peers"],
        serde_json::json!([]),
        "{before}"
    );
    nodes[2].kill().unwrap();
    nodes[2].wait().unwrap();
    let killed = std::time::Instant::now();
    for a in &file.controls[..2] {
        loop {
            let s = wait_status(*a, Duration::from_secs(5));
            if s["sessions"]["failed_peers"] == serde_json::json!([2]) {
                assert!(
                    s["sessions"]["sessions_failed"].as_u64().unwrap() >= 1,
                    "{s}"
                );
                break;
            }
            assert!(
                killed.elapsed() < silence + Duration::from_secs(3),
                "{a}: {s}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    for n in &mut nodes[..2] {
        let _ = n.kill();
        let _ = n.wait();
    }
}

#[test]
fn a_node_that_dies_mid_run_is_one_line_and_exit_2() {
    let file = cluster_file(3, 3, "");
    let mut nodes: Vec<_> = (0..3).map(|i| spawn_node(&file, i)).collect();
    for a in &file.controls {
        wait_status(*a, Duration::from_secs(15));
    }
    let bench = std::process::Command::new(env!("CARGO_BIN_EXE_splitkv"))
        .args([
            "bench",
            "smallbank",
            "--cluster",
            file.path.to_str().unwrap(),
        ])
        .args([
            "--accounts-per-node",
            "200",
            "--duration",
            "30s",
            "--warmup",
            "0s",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the bench");
    // Once node 2 runs its client, kill it.
    let t0 = std::time::Instant::now();
    while wait_status(file.controls[2], Duration::from_secs(5))["state"] != "running" {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the run did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    nodes[2].kill().unwrap();
    nodes[2].wait().unwrap();
    let out = bench.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("node 2"), "{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(25),
        "reported within the run"
    );
    for n in &mut nodes[..2] {
        let _ = n.kill();
        let _ = n.wait();
    }
}
