//! `splitkv bench smallbank|list-append --cluster FILE --spawn --nic-crash
//! 1@1.0` with etcd membership (feature `etcd`; the CI test of a
//! NIC-runtime-only crash and the NIC restart): three UDP node processes and a
//! private etcd on loopback; 1 s into the run node 1's NIC runtime crashes
//! alone (`POST /fault/nic-restart`): it restarts with the next
//! incarnation and rebuilds its locks from its peers, while its host, data,
//! lease and client live on (its client's transactions in flight are
//! `Unknown`). No node is configured out; the run goes on, ends once node 1
//! serves again, and every check over the whole run passes: strict
//! serializability with indeterminate transactions, lost commits, replica
//! agreement over all three nodes, money within the unknown transactions'
//! range; and the cluster, node 1's own client too, committed after the
//! restart. Bounded: each run is
//! one `splitkv bench` that stops its nodes; etcd is stopped by process id
//! when dropped.

#[path = "../../tests/etcd_support/mod.rs"]
mod etcd_support;
mod support_deploy;

use etcd_support::{membership_toml, Etcd};
use std::process::Output;
use std::time::Duration;
use support_deploy::*;

/// Longest one bench run may take (about 3 s of run, start-up, drain, checks).
const RUN_MAX: Duration = Duration::from_secs(60);
/// List-append transactions per client: more than a client draws in 1 s on
/// a fast machine, so the clients still have some after the restart.
const LIST_APPEND_BUDGET: &str = "40000";
/// Host table capacity (keys per node) for that budget's key space.
const CAPACITY_KEYS: u64 = 400_000;

/// Runs `bench WORKLOAD --cluster F --spawn --threads 1 --nic-crash 1@1.0
/// ARGS` on a fresh three-node file with a fresh etcd.
fn bench_crashing_nic_1(workload: &str, args: &[&str]) -> Output {
    let all = [&["--nic-crash", "1@1.0"][..], args].concat();
    bench_on_three_within(workload, &all, Some(CAPACITY_KEYS), RUN_MAX, || {
        let etcd = Etcd::start();
        (membership_toml(&etcd.endpoint), etcd)
    })
}

/// A number after `key` in `line`.
fn number_after(line: &str, key: &str) -> u64 {
    line.split(key)
        .nth(1)
        .and_then(|t| {
            t.split(|c: char| !c.is_ascii_digit())
                .find(|w| !w.is_empty())
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {key:?} in {line}"))
}

/// Exit 0, every check passed, node 1's NIC runtime restarted once and
/// serves again, and the cluster committed after the restart (and, if
/// `own_after`, node 1's own client: a time-bounded run; a list-append
/// client may have spent its budget before the restart); returns standard
/// output.
fn assert_rebuilt(out: &Output, own_after: bool) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{err}");
    assert!(stdout.contains("checks: ok"), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("nic-crash: node 1's NIC runtime restarted at"))
        .unwrap_or_else(|| panic!("no nic-crash line: {stdout}\n{err}"));
    assert_eq!(number_after(line, "restarts "), 1, "{line}");
    assert!(line.contains("serving again: yes"), "{line}");
    let after = number_after(line, "the cluster committed ");
    assert!(
        after > 0,
        "nothing committed after the NIC restart: {stdout}\n{err}"
    );
    let own = number_after(line, "node 1's own client ");
    assert!(
        own > 0 || !own_after,
        "node 1's client committed nothing after its NIC restart: {stdout}\n{err}"
    );
    eprintln!("{line}");
    if std::env::var("SHOW").is_ok() {
        eprintln!("{stdout}");
    }
    stdout
}

#[test]
fn smallbank_and_list_append_run_through_a_nic_runtime_crash_and_pass_every_check() {
    let out = bench_crashing_nic_1(
        "smallbank",
        &[
            "--accounts-per-node",
            "500",
            "--duration",
            "2800ms",
            "--warmup",
            "200ms",
            "--inflight",
            "8",
        ],
    );
    let stdout = assert_rebuilt(&out, true);
    assert!(stdout.contains("money check    ok"), "{stdout}");
    assert!(stdout.contains("replica check  ok"), "{stdout}");
    let out = bench_crashing_nic_1(
        "list-append",
        &[
            "--transactions",
            LIST_APPEND_BUDGET,
            "--duration",
            "3s",
            "--inflight",
            "4",
        ],
    );
    let stdout = assert_rebuilt(&out, false);
    assert_history_checks_passed(&stdout);
}
