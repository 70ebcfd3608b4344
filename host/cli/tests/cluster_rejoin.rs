//! `splitkv bench smallbank|list-append --cluster FILE --spawn --kill 2@… --restart 2@…`
//! with etcd membership (feature `etcd`; the CI test of a restarted node's
//! rejoin): three UDP node processes and a private etcd on loopback; node 2 is
//! SIGKILLed mid-run, the survivors recover and keep committing, node 2's
//! process is started again, rejoins empty as a new incarnation, gets its
//! shards copied from the primaries and becomes a replica again (the bench
//! waits for the replication degree to be restored); every check over the whole
//! run passes, the rejoined node's rows included as a full replica. Bounded:
//! each run is one `splitkv bench` that stops its nodes (and fails by itself if
//! the degree is not restored in time); etcd is stopped by process id when
//! dropped.

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
    brought_back_runs_pass_every_check("restart", "restarted", RUN_MAX, fresh_membership, |_| {});
}
