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

use etcd_support::{membership_toml, Etcd};
use std::process::Output;
use std::time::Duration;
use support_deploy::*;

/// Longest one bench run may take (a few seconds of run, the rejoin,
/// start-up, drain, checks).
const RUN_MAX: Duration = Duration::from_secs(90);
/// List-append transactions per client (as in cluster_kill).
const LIST_APPEND_BUDGET: &str = "12000";
/// Host table capacity (keys per node) for that budget's key space.
const CAPACITY_KEYS: u64 = 120_000;

/// Runs `bench WORKLOAD … --kill KILL --restart RESTART ARGS` on a fresh
/// three-node file with a fresh etcd.
fn bench_restarting_node_2(workload: &str, kill: &str, restart: &str, args: &[&str]) -> Output {
    let all = [&["--kill", kill, "--restart", restart][..], args].concat();
    bench_on_three_within(workload, &all, Some(CAPACITY_KEYS), RUN_MAX, || {
        let etcd = Etcd::start();
        (membership_toml(&etcd.endpoint), etcd)
    })
}

/// Exit 0, every check passed, the survivors committed after the kill,
/// and node 2 was restarted, admitted and is a replica again; returns
/// standard output.
fn assert_rejoined(out: &Output) -> String {
    let (stdout, killed) = assert_recovered_from_kill(out);
    let err = String::from_utf8_lossy(&out.stderr);
    let restart = stdout
        .lines()
        .find(|l| l.starts_with("restart: node 2 started again at"))
        .unwrap_or_else(|| panic!("no restart line: {stdout}\n{err}"));
    assert!(!restart.contains("never"), "{restart}");
    assert!(restart.contains("its role \"replica\""), "{restart}");
    let done: u64 = restart
        .rsplit("copy Done messages received ")
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{restart}"));
    assert!(done > 0, "node 2 got no copy: {restart}");
    eprintln!("{killed}\n{restart}");
    stdout
}

/// The `--timeline` CSV has the kill, the restart, the admission and the
/// restored degree, in that order.
fn assert_timeline_marks_the_rejoin(timeline: &std::path::Path) {
    let csv = std::fs::read_to_string(timeline.with_extension("csv")).unwrap();
    let event = |label: &str| -> f64 {
        csv.lines()
            .find(|l| l.starts_with("event,") && l.ends_with(label))
            .and_then(|l| l.split(',').nth(1)?.parse().ok())
            .unwrap_or_else(|| panic!("no event {label:?} in\n{csv}"))
    };
    let times = [
        event("node 2 killed"),
        event("node 2 restarted"),
        event("node 2 admitted"),
        event("replication restored"),
    ];
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}\n{csv}");
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
    let stdout = assert_rejoined(&out);
    assert!(stdout.contains("money check    ok"), "{stdout}");
    assert!(stdout.contains("replica check  ok"), "{stdout}");
    assert_timeline_marks_the_rejoin(&timeline);
    let _ = std::fs::remove_dir_all(&dir);
    let out = bench_restarting_node_2(
        "list-append",
        "2@0.5",
        "2@2.0",
        &[
            "--transactions",
            LIST_APPEND_BUDGET,
            "--duration",
            "4s",
            "--inflight",
            "4",
        ],
    );
    let stdout = assert_rejoined(&out);
    assert!(
        stdout.contains("history check (strict serializability): valid"),
        "{stdout}"
    );
    assert!(stdout.contains("lost-commit check: ok"), "{stdout}");
}
