//! `splitkv bench smallbank|list-append --cluster FILE --spawn --kill 2@… --restart 2@…`
//! with etcd membership (feature `etcd`; issue 12's first CI test): three
//! UDP node processes and a private etcd on loopback; node 2 is SIGKILLed
//! mid-run, the survivors recover and keep committing, node 2's process is
//! started again, rejoins empty as a new incarnation, gets its shards
//! copied from the primaries and becomes a replica again (the bench waits
//! for the replication degree to be restored); every check over the whole
//! run passes, the rejoined node's rows included as a full replica.
//! Bounded: each run is one `splitkv bench` that stops its nodes (and
//! fails by itself if the degree is not restored in time); etcd is stopped
//! by process id when dropped.

#[path = "../../tests/etcd_support/mod.rs"]
mod etcd_support;
mod support_deploy;

use etcd_support::fresh_membership;
use std::process::Output;
use std::time::Duration;
use support_deploy::*;

/// Longest one bench run may take (a few seconds of run, the rejoin,
/// start-up, drain, checks).
const RUN_MAX: Duration = Duration::from_secs(90);
/// Runs `bench WORKLOAD … --kill KILL --restart RESTART ARGS` on a fresh
/// three-node file with a fresh etcd.
fn bench_restarting_node_2(workload: &str, kill: &str, restart: &str, args: &[&str]) -> Output {
    let all = [&["--kill", kill, "--restart", restart][..], args].concat();
    let keys = Some(KILL_CAPACITY_KEYS);
    bench_on_three_within(workload, &all, keys, RUN_MAX, fresh_membership)
}

#[test]
fn smallbank_and_list_append_run_through_a_kill_and_a_rejoin_and_pass_every_check() {
    let dir = std::env::temp_dir().join(format!("splitkv-rejoin-timeline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let timeline = dir.join("smallbank-rejoin");
    // Restarted after the survivors' recovery (about 1.4 s after the
    // kill), so the report's kill -> resumed time is the recovery's alone.
    let out = bench_restarting_node_2(
        "smallbank",
        "2@1.0",
        "2@3.0",
        &[
            "--timeline",
            timeline.to_str().unwrap(),
            "--accounts-per-node",
            "500",
            "--duration",
            "3800ms",
            "--warmup",
            "200ms",
            "--inflight",
            "8",
        ],
    );
    let (stdout, _) = assert_rejoined(&out, "restart");
    assert!(stdout.contains("money check    ok"), "{stdout}");
    assert!(stdout.contains("replica check  ok"), "{stdout}");
    assert_timeline_marks_the_rejoin(&timeline, "restarted");
    let _ = std::fs::remove_dir_all(&dir);
    let out = bench_restarting_node_2(
        "list-append",
        "2@0.5",
        "2@2.0",
        &[
            "--transactions",
            KILL_LIST_APPEND_BUDGET,
            "--duration",
            "4s",
            "--inflight",
            "4",
        ],
    );
    let (stdout, _) = assert_rejoined(&out, "restart");
    assert!(
        stdout.contains("history check (strict serializability): valid"),
        "{stdout}"
    );
    assert!(stdout.contains("lost-commit check: ok"), "{stdout}");
}
