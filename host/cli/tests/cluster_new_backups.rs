//! More nodes than replicas, deployed (re-replication onto survivors): four UDP
//! node processes, replication 3, and a private etcd on loopback. Node 2 is
//! SIGKILLed mid-run; the survivors recover, choose new backups among
//! themselves for the shards that lost a replica, copy them while transactions
//! keep running, and every check passes over the replica sets the nodes served
//! at the end (Smallbank: every key held by three survivors again). Then
//! list-append through a kill and a rejoin: node 2 comes back as a spare (the
//! survivors already hold every shard three times) and the history, lost-commit
//! and replica checks pass. Bounded like the other deployed kill tests; etcd is
//! stopped by process id when dropped.

#[path = "../../tests/etcd_support/mod.rs"]
mod etcd_support;
mod support_deploy;

use etcd_support::fresh_membership;
use std::time::{Duration, Instant};
use support_deploy::*;

/// Longest one bench run may take.
const RUN_MAX: Duration = Duration::from_secs(90);
/// Four nodes, replication 3.
const SHAPE: (usize, usize) = (4, 3);

#[test]
fn four_nodes_replication_three_restore_the_degree_among_survivors_and_pass_every_check() {
    let keys = Some(KILL_CAPACITY_KEYS);
    let t0 = Instant::now();
    let smallbank = [&["--kill", "2@1.0"][..], &KILL_SMALLBANK_ARGS[..]].concat();
    let out = bench_on(SHAPE, "smallbank", &smallbank, keys, fresh_membership);
    let (stdout, killed) = assert_recovered_from_kill(&out);
    assert!(stdout.contains("money check    ok"), "{stdout}");
    // The new backups caught up: the configuration holds every shard at
    // the degree again without node 2 (before the fix of the caught-up
    // report, survivors stayed joining backups to the end).
    assert!(
        killed.contains("replication degree restored without it at"),
        "{killed}"
    );
    // 500 accounts per node, two rows each: 4000 keys, each on three
    // survivors once the new backups were copied.
    assert!(
        stdout.contains(
            "replica check  ok: 8000 backup rows match their primaries (12000 rows held)"
        ),
        "{stdout}"
    );
    let faults = ["--kill", "2@0.5", "--restart", "2@2.0"];
    let list_append = [&faults[..], &KILL_LIST_APPEND_ARGS[..]].concat();
    let out = bench_on(SHAPE, "list-append", &list_append, keys, fresh_membership);
    let (stdout, _) = assert_recovered_from_kill(&out);
    assert_history_checks_passed(&stdout);
    assert!(stdout.contains("replica check: ok"), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("restart: node 2 started again"))
        .unwrap_or_else(|| panic!("no restart line: {stdout}"));
    assert!(line.contains("replication restored at"), "{line}");
    assert!(
        t0.elapsed() < 2 * RUN_MAX * PORT_RETRIES as u32,
        "{:?}",
        t0.elapsed()
    );
}
