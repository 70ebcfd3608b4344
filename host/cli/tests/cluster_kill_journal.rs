//! `splitkv bench … --cluster FILE --spawn --kill NODE@SECS` without a
//! membership service: node 2 is SIGKILLed mid-run, the survivors go on
//! (their transactions that need node 2 end once their sessions declare it
//! failed), the killed node's client history is replayed from its journal,
//! and every check over the whole run (history with indeterminate
//! transactions, lost commits, surviving replicas, money with the unknown
//! range) passes; a bad `--kill` is one line and exit 2. The full recovery
//! (etcd configures node 2 out, the survivors commit again) is
//! `cluster_kill.rs`.

mod support_deploy;

use std::process::Output;
use std::time::{Duration, Instant};
use support_deploy::*;

/// `support_deploy::bench_on_three` with a 200 ms session silence.
fn bench_on_three(workload: &str, args: &[&str]) -> Output {
    let silence = "[protocol]\nsession_silence_ms = 200\n";
    support_deploy::bench_on_three(workload, args, None, || (silence.to_string(), ()))
}

fn assert_passed_with_kill(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{err}");
    assert!(stdout.contains("checks: ok"), "{stdout}");
    assert!(stdout.contains("killed: node 2 (SIGKILL) at"), "{stdout}");
    stdout
}

#[test]
fn smallbank_with_a_killed_node_passes_the_money_and_replica_checks() {
    let t0 = Instant::now();
    let out = bench_on_three(
        "smallbank",
        &[
            "--accounts-per-node",
            "500",
            "--duration",
            "1s",
            "--warmup",
            "100ms",
            "--inflight",
            "8",
            "--kill",
            "2@0.4",
        ],
    );
    let stdout = assert_passed_with_kill(&out);
    assert!(stdout.contains("money check    ok"), "{stdout}");
    assert!(stdout.contains("replica check  ok"), "{stdout}");
    assert!(t0.elapsed() < Duration::from_secs(60));
}

#[test]
fn list_append_with_a_killed_node_passes_the_history_and_lost_commit_checks() {
    let out = bench_on_three(
        "list-append",
        &[
            "--transactions",
            "3000",
            "--duration",
            "1500ms",
            "--inflight",
            "4",
            "--kill",
            "2@0.4",
        ],
    );
    let stdout = assert_passed_with_kill(&out);
    assert_history_checks_passed(&stdout);
}

#[test]
fn a_kill_of_no_node_or_without_spawn_is_refused() {
    let file = cluster_file(3, 3, "");
    let path = file.path.to_str().unwrap();
    let out = splitkv(&[
        "bench",
        "smallbank",
        "--cluster",
        path,
        "--spawn",
        "--kill",
        "7@1",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--kill: no node 7"), "{err}");
    let out = splitkv(&["bench", "smallbank", "--cluster", path, "--kill", "2@1"]);
    assert_eq!(out.status.code(), Some(2));
    let out = splitkv(&[
        "bench",
        "smallbank",
        "--cluster",
        path,
        "--spawn",
        "--kill",
        "2",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("NODE@SECS"), "{err}");
}
