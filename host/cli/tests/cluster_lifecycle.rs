//! A deployed cluster's lifecycle against one etcd that lives across the
//! whole test, as every real deployment keeps its etcd (feature `etcd`):
//! three `splitkv bench smallbank --cluster FILE --spawn` runs on one
//! cluster id and etcd prefix, each stopping its nodes at the end (a whole
//! cluster stopped and started again: the next cluster generation, its data
//! gone by design): a run in which node 2 is SIGKILLed and restarted, then
//! a run with no fault, then a run in which node 2 is SIGKILLed and not
//! restarted. Every check of every run passes: the restarted cluster serves
//! under a configuration that matches where its rows are, and recovers
//! from a kill as a fresh one does (before cluster generations, the second
//! run failed its money and replica checks and the third's survivors
//! stalled). Bounded: each run stops its nodes by itself.

#[path = "../../tests/etcd_support/mod.rs"]
mod etcd_support;
mod support_deploy;

use etcd_support::{membership_toml, Etcd};
use std::time::Duration;
use support_deploy::*;

/// Longest one bench run may take.
const RUN_MAX: Duration = Duration::from_secs(90);

#[test]
fn a_cluster_stopped_and_started_again_on_one_etcd_passes_every_check_each_time() {
    let etcd = Etcd::start();
    let same_etcd = || (membership_toml(&etcd.endpoint), ());
    let keys = Some(KILL_CAPACITY_KEYS);
    let rejoin = [
        &["--kill", "2@1.0", "--restart", "2@3.0"][..],
        &KILL_SMALLBANK_ARGS[..],
    ]
    .concat();
    let out = bench_on_three_within("smallbank", &rejoin, keys, RUN_MAX, same_etcd);
    assert_rejoined(&out, "restart");

    let out = bench_on_three_within("smallbank", &KILL_SMALLBANK_ARGS, keys, RUN_MAX, same_etcd);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{err}");
    assert!(stdout.contains("money check    ok"), "{stdout}");
    assert!(stdout.contains("replica check  ok"), "{stdout}");

    let kill = [&["--kill", "2@1.0"][..], &KILL_SMALLBANK_ARGS[..]].concat();
    let out = bench_on_three_within("smallbank", &kill, keys, RUN_MAX, same_etcd);
    let (stdout, line) = assert_recovered_from_kill(&out);
    assert!(stdout.contains("money check    ok"), "{stdout}");
    eprintln!("{line}");
}
