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
use std::time::Duration;
use support_deploy::*;

/// Longest one bench run may take (a few seconds of run, the rejoin,
/// start-up, drain, checks).
const RUN_MAX: Duration = Duration::from_secs(90);
#[test]
fn smallbank_and_list_append_run_through_a_kill_and_a_rejoin_and_pass_every_check() {
    let dir = std::env::temp_dir().join(format!("splitkv-rejoin-timeline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let timeline = dir.join("smallbank-rejoin");
    let (smallbank, list_append) =
        smallbank_and_list_append_brought_back("--restart", &timeline, RUN_MAX, fresh_membership);
    let (stdout, _) = assert_rejoined(&smallbank, "restart");
    assert!(stdout.contains("money check    ok"), "{stdout}");
    assert!(stdout.contains("replica check  ok"), "{stdout}");
    assert_timeline_marks_the_rejoin(&timeline, "restarted");
    let _ = std::fs::remove_dir_all(&dir);
    let (stdout, _) = assert_rejoined(&list_append, "restart");
    assert!(
        stdout.contains("history check (strict serializability): valid"),
        "{stdout}"
    );
    assert!(stdout.contains("lost-commit check: ok"), "{stdout}");
}
