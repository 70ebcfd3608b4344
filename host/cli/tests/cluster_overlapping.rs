//! Overlapping faults in node processes with etcd membership (feature
//! `etcd`; the chaos mix deployed): `splitkv bench smallbank|list-append
//! --cluster FILE --spawn --kill 2@… --restart 2@… --nic-crash N@…` on three
//! UDP node processes and a private etcd on loopback. Node 2 is SIGKILLed, a
//! survivor's NIC runtime crashes alone while the cluster deals with that
//! (Smallbank: node 1's, about when the recovery epoch begins, once node
//! 2's 1 s lease ran out; list-append: node 0's, the copy source, about
//! when node 2's process, started again, is admitted and copied), and node 2
//! rejoins. Every check over the whole run passes, the replication degree
//! is restored, the crashed NIC runtime serves again, and the survivors
//! kept committing. The simulator's chaos mix places such overlaps exactly
//! (a NIC restart inside a recovery epoch, of a copy source, of the copying
//! node); here they come from wall-clock times, so the test asserts the
//! order of the faults, not which step each one hit.
//! Bounded: each run is one `splitkv bench` that stops its nodes (and fails
//! by itself if the degree is not restored in time); etcd is stopped by
//! process id when dropped.

#[path = "../../tests/etcd_support/mod.rs"]
mod etcd_support;
mod support_deploy;

use etcd_support::fresh_membership;
use std::path::Path;
use std::time::Duration;
use support_deploy::*;

/// Longest one bench run may take (a few seconds of run, the rejoin,
/// start-up, drain, checks).
const RUN_MAX: Duration = Duration::from_secs(90);

/// The report's `nic-crash:` line for `node`: it restarted once and serves
/// again. Returns the line.
fn assert_nic_rebuilt(stdout: &str, node: u16) -> String {
    let prefix = format!("nic-crash: node {node}'s NIC runtime restarted at");
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no nic-crash line: {stdout}"));
    assert!(line.contains("restarts 1,"), "{line}");
    assert!(line.contains("serving again: yes"), "{line}");
    eprintln!("{line}");
    line.to_string()
}

/// The times (s) of the timeline's events `labels`, in that order.
fn event_times(timeline: &Path, labels: &[&str]) -> Vec<f64> {
    let csv = std::fs::read_to_string(timeline.with_extension("csv")).unwrap();
    labels.iter().map(|l| timeline_event(&csv, l)).collect()
}

/// One test, its runs in turn: six busy-polling node processes at once
/// would share two cores.
#[test]
fn overlapping_faults_in_node_processes_pass_every_check() {
    a_nic_runtime_crash_during_a_kills_recovery_and_rejoin_passes_every_check();
    a_copy_sources_nic_runtime_crash_during_a_rejoin_passes_every_check();
}

fn a_nic_runtime_crash_during_a_kills_recovery_and_rejoin_passes_every_check() {
    let dir = std::env::temp_dir().join(format!("splitkv-overlap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let timeline = dir.join("smallbank-overlap");
    let faults = [
        "--kill",
        "2@1.0",
        "--nic-crash",
        "1@2.05",
        "--restart",
        "2@3.0",
        "--timeline",
        timeline.to_str().unwrap(),
    ];
    let args = [&faults[..], &KILL_SMALLBANK_ARGS[..]].concat();
    let keys = Some(KILL_CAPACITY_KEYS);
    let out = bench_on_three_within("smallbank", &args, keys, RUN_MAX, fresh_membership);
    let (stdout, _) = assert_rejoined(&out, "restart");
    assert!(stdout.contains("money check    ok"), "{stdout}");
    assert!(stdout.contains("replica check  ok"), "{stdout}");
    assert_nic_rebuilt(&stdout, 1);
    let labels = [
        "node 2 killed",
        "node 1 NIC runtime restarted",
        "node 2 restarted",
        "replication restored",
    ];
    let t = event_times(&timeline, &labels);
    assert!(t.windows(2).all(|w| w[0] <= w[1]), "{labels:?} at {t:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn a_copy_sources_nic_runtime_crash_during_a_rejoin_passes_every_check() {
    let faults = [
        "--kill",
        "2@0.5",
        "--restart",
        "2@1.5",
        "--nic-crash",
        "0@1.6",
    ];
    let args = [&faults[..], &KILL_LIST_APPEND_ARGS[..]].concat();
    let keys = Some(KILL_CAPACITY_KEYS);
    let out = bench_on_three_within("list-append", &args, keys, RUN_MAX, fresh_membership);
    let (stdout, _) = assert_rejoined(&out, "restart");
    assert_history_checks_passed(&stdout);
    assert!(stdout.contains("replica check: ok"), "{stdout}");
    assert_nic_rebuilt(&stdout, 0);
}
