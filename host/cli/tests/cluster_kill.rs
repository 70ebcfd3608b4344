//! `splitkv bench smallbank|list-append --cluster FILE --spawn --kill 2@1.5`
//! with etcd membership (feature `etcd`; a CI test of surviving faults
//! deployed): three UDP node processes and a private etcd on loopback; node 2
//! is SIGKILLed 1.5 s into a 4 s run (list-append: 0.5 s, before its clients
//! spend their budget); etcd configures it out once its 1 s lease runs out, the
//! survivors run the recovery epoch and commit again; the killed node's client
//! history is replayed from its journal; and every check over the whole run
//! passes: strict serializability with indeterminate transactions, lost
//! commits, agreement of the surviving replicas, money within the unknown
//! transactions' range; the same through the one-shot `Txn` (`--api txn`,
//! Smallbank and register). Bounded: each run is one `splitkv bench` that stops its
//! nodes; etcd is stopped by process id when dropped.

#[path = "../../tests/etcd_support/mod.rs"]
mod etcd_support;
mod support_deploy;

use etcd_support::fresh_membership;
use std::process::Output;
use std::time::Duration;
use support_deploy::*;

/// Longest one bench run may take (4 s of run, start-up, drain, checks).
const RUN_MAX: Duration = Duration::from_secs(60);

/// Runs `bench WORKLOAD --cluster F --spawn --threads 1 --kill KILL ARGS`
/// on a fresh three-node file with a fresh etcd for its membership (a
/// stored configuration without node 2 would keep a new node 2 out) and room
/// for the list-append keys of a budget that outlasts the kill.
fn bench_killing_node_2(workload: &str, kill: &str, args: &[&str]) -> Output {
    let all = [&["--kill", kill][..], args].concat();
    let keys = Some(KILL_CAPACITY_KEYS);
    bench_on_three_within(workload, &all, keys, RUN_MAX, fresh_membership)
}

/// Exit 0, every check passed, node 2 killed, and the survivors committed
/// after the kill; returns standard output.
fn assert_recovered(out: &Output) -> String {
    let (stdout, line) = assert_recovered_from_kill(out);
    eprintln!("{line}");
    stdout
}

/// The `--timeline` CSV (`kind,t_s,committed_total,committed_per_s,label`)
/// has the kill, epoch 2 and the recovery's resume in that order, and
/// commits after the resume; prints kill → resume and the rates around it.
fn assert_timeline_marks_the_kill_and_the_recovery(timeline: &std::path::Path) {
    for ext in ["png", "svg", "csv"] {
        let f = timeline.with_extension(ext);
        assert!(std::fs::metadata(&f).is_ok_and(|m| m.len() > 0), "{f:?}");
    }
    let csv = std::fs::read_to_string(timeline.with_extension("csv")).unwrap();
    let event = |label: &str| timeline_event(&csv, label);
    let (killed, epoch, resumed) = (
        event("node 2 killed"),
        event("epoch 2"),
        event("recovery resumed"),
    );
    assert!(killed <= epoch && epoch <= resumed, "{csv}");
    let last_total = |after: f64| -> u64 {
        csv.lines()
            .filter(|l| l.starts_with("sample,"))
            .filter_map(|l| {
                let mut f = l.split(',').skip(1);
                let t: f64 = f.next()?.parse().ok()?;
                let total: u64 = f.next()?.parse().ok()?;
                (t >= after).then_some(total)
            })
            .max()
            .unwrap_or(0)
    };
    let at_resume = csv
        .lines()
        .filter(|l| l.starts_with("sample,"))
        .filter_map(|l| {
            let mut f = l.split(',').skip(1);
            let t: f64 = f.next()?.parse().ok()?;
            let total: u64 = f.next()?.parse().ok()?;
            (t <= resumed).then_some(total)
        })
        .max()
        .unwrap_or(0);
    assert!(
        last_total(resumed) > at_resume,
        "no commits after the resume:\n{csv}"
    );
    eprintln!(
        "timeline: node 2 killed at {killed:.2} s, epoch 2 seen at {epoch:.2} s, resumed seen at {resumed:.2} s (bench polls every 50 ms): kill -> resumed {:.2} s",
        resumed - killed
    );
}

#[test]
fn smallbank_and_list_append_run_through_a_sigkilled_node_and_pass_every_check() {
    let dir = std::env::temp_dir().join(format!("splitkv-kill-timeline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let timeline = dir.join("smallbank-kill");
    let timeline_arg = ["--timeline", timeline.to_str().unwrap()];
    let args = [&KILL_SMALLBANK_ARGS[..], &timeline_arg[..]].concat();
    let out = bench_killing_node_2("smallbank", "2@1.5", &args);
    let stdout = assert_recovered(&out);
    assert!(stdout.contains("money check    ok"), "{stdout}");
    assert!(stdout.contains("replica check  ok"), "{stdout}");
    assert_timeline_marks_the_kill_and_the_recovery(&timeline);
    let _ = std::fs::remove_dir_all(&dir);
    let out = bench_killing_node_2("list-append", "2@0.5", &KILL_LIST_APPEND_ARGS);
    let stdout = assert_recovered(&out);
    assert_history_checks_passed(&stdout);
}

/// The same kill through the one-shot `Txn` (`--api txn`): Smallbank's read
/// and write `Txn`s and the register's `Txn`s in flight on the killed node's
/// client are replayed from its journal, and every check passes.
#[test]
fn smallbank_and_register_through_the_txn_run_through_a_sigkilled_node_and_pass_every_check() {
    let args = [&["--api", "txn"][..], &KILL_SMALLBANK_ARGS[..]].concat();
    let out = bench_killing_node_2("smallbank", "2@1.5", &args);
    let stdout = assert_recovered(&out);
    assert!(stdout.contains(", api txn"), "{stdout}");
    assert!(stdout.contains("money check    ok"), "{stdout}");
    assert!(stdout.contains("replica check  ok"), "{stdout}");
    let args = [&["--api", "txn"][..], &KILL_LIST_APPEND_ARGS[..]].concat();
    let out = bench_killing_node_2("register", "2@0.5", &args);
    let stdout = assert_recovered(&out);
    assert!(stdout.contains(", api txn"), "{stdout}");
    assert_history_checks_passed(&stdout);
}
