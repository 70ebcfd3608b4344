//! `splitkv bench smallbank|list-append --cluster FILE --spawn --clients
//! external --kill 2@SECS` with etcd membership: each node's workload client
//! is a `splitkv-app-client` process attached to its node's application
//! socket (`[clients]`, served once the workload is loaded), not a client
//! inside the node. Node 2 is SIGKILLed mid-run; its client sees the socket
//! close and ends its run with the transactions it had in flight
//! indeterminate (no journal), the survivors recover and commit again, and
//! every check passes over the clients' own results and the nodes' rows:
//! money within the unknown transactions' range and replica agreement
//! (Smallbank), strict serializability with indeterminate transactions and
//! lost commits (list-append). Bounded: each run is one `splitkv bench` that
//! stops its nodes and clients; etcd is stopped when dropped.

#[path = "../../tests/etcd_support/mod.rs"]
mod etcd_support;
mod support_deploy;

use etcd_support::{fresh_membership, Etcd};
use std::process::Output;
use std::time::Duration;
use support_deploy::*;

/// Longest one bench run may take (4 s of run, start-up, drain, checks).
const RUN_MAX: Duration = Duration::from_secs(90);

/// A fresh etcd and a fresh socket directory, as the file's sections.
fn membership_and_sockets() -> (String, (Etcd, tempfile::TempDir)) {
    let (membership, etcd) = fresh_membership();
    let sockets = tempfile::tempdir().expect("tempdir");
    let clients = format!("\n[clients]\nsocket_dir = {:?}\n", sockets.path());
    (membership + &clients, (etcd, sockets))
}

fn bench_killing_node_2_with_external_clients(workload: &str, kill: &str, args: &[&str]) -> Output {
    client_program();
    let all = [&["--clients", "external", "--kill", kill][..], args].concat();
    let keys = Some(KILL_CAPACITY_KEYS);
    bench_on_three_within(workload, &all, keys, RUN_MAX, membership_and_sockets)
}

#[test]
fn external_clients_run_through_a_sigkilled_node_and_pass_every_check() {
    let out =
        bench_killing_node_2_with_external_clients("smallbank", "2@1.5", &KILL_SMALLBANK_ARGS);
    let (stdout, line) = assert_recovered_from_kill(&out);
    eprintln!("smallbank: {line}");
    assert!(line.contains("its external client ended"), "{line}");
    assert!(stdout.contains("money check    ok"), "{stdout}");
    assert!(stdout.contains("replica check  ok"), "{stdout}");
    let out =
        bench_killing_node_2_with_external_clients("list-append", "2@0.5", &KILL_LIST_APPEND_ARGS);
    let (stdout, line) = assert_recovered_from_kill(&out);
    eprintln!("list-append: {line}");
    // The killed node's client had transactions in flight: indeterminate.
    let indeterminate: u64 = stdout
        .lines()
        .find(|l| l.starts_with("transactions: "))
        .and_then(|l| {
            l.split(", ")
                .last()?
                .strip_suffix(" indeterminate")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no indeterminate count: {stdout}"));
    assert!(indeterminate > 0, "{stdout}");
    assert_history_checks_passed(&stdout);
}

/// A cluster file without `[clients]` cannot serve external clients: one
/// line naming the section, exit 2, before any node starts.
#[test]
fn external_clients_need_the_files_clients_section() {
    client_program();
    let file = cluster_file(3, 3, "");
    let path = file.path.to_str().unwrap();
    let out = splitkv(&[
        "bench",
        "smallbank",
        "--cluster",
        path,
        "--clients",
        "external",
        "--duration",
        "1s",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("[clients]"), "{stderr}");
}
