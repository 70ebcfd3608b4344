//! A NIC runtime that restarts alone while crash recovery runs
//! (`recovery::restart`, `recovery`): a rejoined process, a rebuild a recovery
//! epoch overtakes, and a coordinator whose COMMIT reached one replica only
//! before its NIC restarted (`tla/LostCoordinator.tla`). Same rig as
//! `nic_restart.rs` (`restart_rig`).

use restart_rig::*;
use std::sync::atomic::Ordering;
use support::key_on;

mod restart_rig;
mod support;

#[test]
fn a_rejoined_node_leaves_its_predecessors_transactions_to_crash_recovery() {
    use splitkv_nic::membership::Configuration;
    let (mut nodes, mut now, t1) = t1_logged_at_node_2();
    // Node 0 is configured out and back as a new process (renewed): T1 is
    // its predecessor's, and the rejoin's recovery epoch decides it.
    let rejoined = Configuration::initial(NODES, 2)
        .without(1)
        .rejoining(0, 5)
        .unwrap();
    configure(&mut nodes, &rejoined);
    // Node 0's NIC runtime restarts inside that epoch: it must not decide
    // T1 as well (a second decider could split it).
    restart(&mut nodes[0], now, 6);
    nodes[0].blocked.store(0, Ordering::Relaxed);
    let s = rebuilt_and_resumed(&mut nodes, &mut now, &[0, 1, 2, 3]);
    assert_eq!((s.decided_commit, s.decided_abort), (0, 0), "{s:?}");
    assert_eq!(s.left_to_recovery, 1, "{s:?}");
    // Crash recovery decided T1, one way at every replica holding its LOG.
    until(&mut nodes, &mut now, "T1 decided at node 2", |n| {
        n[2].host.aborts.contains(&t1) || n[2].host.commits.contains(&t1)
    });
    let committed = nodes[2].host.commits.contains(&t1);
    for n in &nodes[2..] {
        if n.host.logs.contains_key(&t1) {
            assert_eq!(n.host.commits.contains(&t1), committed);
            assert_eq!(n.host.aborts.contains(&t1), !committed);
        }
    }
}

/// Chaos Smallbank seed 135 of 5 nodes: a node's NIC runtime restarted
/// while its transaction's LOG was on its way, and a recovery epoch began
/// before its rebuild had every report; the rebuild then committed the
/// transaction at two replicas while the epoch's leader, seeing its live
/// coordinator silent about it, aborted it at the third. Once a recovery
/// epoch began since the restart, the rebuild leaves its lost transactions
/// to the recovery, which decides each one way at every replica.
#[test]
fn a_rebuild_overtaken_by_a_recovery_epoch_leaves_its_lost_transactions_to_it() {
    use splitkv_nic::membership::Configuration;
    let (mut nodes, mut now, t1) = t1_logged_at_node_2();
    // Node 0's NIC restarts (same process: not renewed). T1's LOG goes on
    // to node 3, whose report to node 0's rebuild is held back.
    restart(&mut nodes[0], now, 2);
    nodes[3].blocked.store(1 << 0, Ordering::Relaxed);
    nodes[0].blocked.store(0, Ordering::Relaxed);
    until(
        &mut nodes,
        &mut now,
        "T1's LOG at node 3, node 2's report in",
        |n| n[3].host.logs.contains_key(&t1) && n[0].nic.rebuild_stats().reports > 0,
    );
    // Node 1 is configured out: a recovery epoch begins before node 0's
    // rebuild has every report.
    let next = Configuration::initial(NODES, 2).without(1 << 1);
    configure(&mut nodes, &next);
    nodes[3].blocked.store(0, Ordering::Relaxed);
    let s = rebuilt_and_resumed(&mut nodes, &mut now, &[0, 2, 3]);
    assert_eq!((s.decided_commit, s.decided_abort), (0, 0), "{s:?}");
    assert!(s.left_to_recovery >= 1, "{s:?}");
    until(&mut nodes, &mut now, "T1 decided at nodes 2 and 3", |n| {
        [2, 3]
            .iter()
            .all(|&i| n[i].host.aborts.contains(&t1) || n[i].host.commits.contains(&t1))
    });
    let committed = nodes[2].host.commits.contains(&t1);
    for i in [2, 3] {
        let n = &nodes[i];
        assert_eq!(n.host.commits.contains(&t1), committed, "node {i}");
        assert_eq!(n.host.aborts.contains(&t1), !committed, "node {i}");
    }
}

/// Which of node 0's rebuild messages a recovery epoch overtakes in
/// [`commit_at_node_2_only_then_recovery`].
#[derive(Clone, Copy, PartialEq)]
enum Overtaken {
    /// Node `0`'s report (its query went through).
    Report(usize),
    /// Node 2's query: node 2 does not know node 0's NIC restarted when
    /// the epoch begins.
    QueryToNode2,
}

/// T1 (node 0) commits at node 2 and not at node 3: node 0's NIC restarts
/// after its COMMIT reached node 2, its COMMIT to node 3 never sent. The
/// rebuild message `overtaken` names is held back until a recovery epoch
/// (node 1 configured out) has begun; then steps until node 3 decided T1
/// and returns whether it committed.
fn commit_at_node_2_only_then_recovery(overtaken: Overtaken) -> bool {
    use splitkv_nic::membership::Configuration;
    let k = key_on(&placement(), &[2, 3]);
    let mut nodes = cluster();
    let mut now = 0;
    nodes[0].submit(1, &[k]);
    until(&mut nodes, &mut now, "T1's LOG at node 3", |n| {
        !n[3].host.logs.is_empty()
    });
    nodes[0].blocked.store(1 << 3, Ordering::Relaxed);
    let t1 = *nodes[3].host.logs.keys().next().unwrap();
    until(&mut nodes, &mut now, "T1 committed at node 2", |n| {
        n[2].host.commits.contains(&t1)
    });
    assert!(!nodes[3].host.commits.contains(&t1));
    nodes[0].lost.store(1 << 3, Ordering::Relaxed);
    restart(&mut nodes[0], now, 2);
    // The node whose packets are held back, and the replicas whose
    // reports node 0 awaits before the epoch begins.
    let (held, answered): (usize, &[usize]) = match overtaken {
        Overtaken::Report(held) => {
            nodes[held].blocked.store(1 << 0, Ordering::Relaxed);
            nodes[0].blocked.store(0, Ordering::Relaxed);
            (held, &[2, 3])
        }
        Overtaken::QueryToNode2 => {
            nodes[0].blocked.store(1 << 2, Ordering::Relaxed);
            (0, &[3])
        }
    };
    until(
        &mut nodes,
        &mut now,
        "the replicas' queries answered",
        |n| {
            n[0].nic.rebuild_stats().reports >= answered.len() as u64
                && answered
                    .iter()
                    .all(|&i| n[i].nic.rebuild_stats().queries_answered > 0)
        },
    );
    assert_eq!(
        nodes[2].nic.rebuild_stats().queries_answered,
        (overtaken != Overtaken::QueryToNode2) as u64,
        "node 2 got the query"
    );
    let next = Configuration::initial(NODES, 2).without(1 << 1);
    configure(&mut nodes, &next);
    nodes[held].blocked.store(0, Ordering::Relaxed);
    until(&mut nodes, &mut now, "T1 decided at node 3", |n| {
        n[3].host.aborts.contains(&t1) || n[3].host.commits.contains(&t1)
    });
    assert_ne!(
        nodes[3].host.commits.contains(&t1),
        nodes[3].host.aborts.contains(&t1)
    );
    nodes[3].host.commits.contains(&t1)
}

/// A NIC runtime restarts after its COMMIT reached one replica and before
/// the other, and a recovery epoch overtakes its rebuild: the COMMIT record
/// a peer reported to the rebuild is this coordinator's outcome in the
/// epoch's evidence, so the leader commits the transaction at the replica
/// still holding the LOG instead of aborting it by its "forgot" rule.
#[test]
fn a_commit_record_reported_to_an_overtaken_rebuild_is_the_coordinators_outcome() {
    assert!(
        commit_at_node_2_only_then_recovery(Overtaken::Report(3)),
        "node 3 aborted what node 2 committed"
    );
}

/// As above, but the replica holding the COMMIT record had not reported to
/// the rebuild when the epoch began (its query came); its evidence reports
/// that COMMIT record, and the leader's rule 2 comes before its "forgot"
/// rule.
#[test]
fn a_replica_reports_the_commit_records_of_a_restarted_coordinator() {
    assert!(
        commit_at_node_2_only_then_recovery(Overtaken::Report(2)),
        "node 3 aborted what node 2 committed"
    );
}

/// As above, but the epoch begins before the restarted coordinator's query
/// reached the replica holding the COMMIT record: that replica cannot know
/// the coordinator lost the transaction. Every replica reports the decision
/// records it holds, so the leader's rule 2 commits the transaction at the
/// replica still holding the LOG instead of its "forgot" rule aborting it.
#[test]
fn a_replica_reports_its_commit_records_before_it_learns_the_coordinator_restarted() {
    assert!(
        commit_at_node_2_only_then_recovery(Overtaken::QueryToNode2),
        "node 3 aborted what node 2 committed"
    );
}

/// A node's process restarts (a new incarnation, everything empty) and
/// rejoins: its fresh coordinator numbers its transactions above its
/// predecessor's, whose ids its peers' per-slot fences hold (the recovery
/// leader's decisions of the epoch that admits it carry the newest
/// generation any live node saw). Numbered from 1 again, they were refused
/// as late at those peers, and an id used twice could meet its
/// predecessor's COMMIT record in a recovery's evidence.
#[test]
fn a_restarted_process_numbers_its_transactions_above_its_predecessors() {
    use splitkv_layout::host_nic::TxStatus;
    use splitkv_nic::membership::Configuration;
    let k = key_on(&placement(), &[2, 3]);
    let mut nodes = cluster();
    let mut now = 0;
    for req in 1..=20 {
        nodes[0].submit(req, &[k]);
        until(&mut nodes, &mut now, "a committed transaction", |n| {
            n[0].told.contains_key(&req)
        });
        assert_eq!(nodes[0].told[&req], TxStatus::Committed);
    }
    let newest_old = nodes[2].host.commits.iter().map(|t| t.generation()).max();
    assert!(newest_old >= Some(20), "{newest_old:?}");
    // Node 0's process dies; the others configure it out and recover.
    let out = Configuration::initial(NODES, 2).without(1);
    fresh_process(&mut nodes, 0, 5);
    configure(&mut nodes[1..], &out);
    until(&mut nodes, &mut now, "node 0 configured out", |n| {
        n[1..].iter().all(|n| !n.nic.recovering())
    });
    // Its new process is admitted as a rejoining incarnation.
    let back = out.rejoining(0, 5).unwrap();
    configure(&mut nodes, &back);
    until(&mut nodes, &mut now, "node 0 admitted", |n| {
        n.iter().all(|n| !n.nic.recovering())
    });
    nodes[0].submit(100, &[k]);
    until(
        &mut nodes,
        &mut now,
        "the new process's transaction told",
        |n| n[0].told.contains_key(&100),
    );
    assert_eq!(nodes[0].told[&100], TxStatus::Committed);
    let new = nodes[2]
        .host
        .commits
        .iter()
        .filter(|t| t.coordinator() == 0)
        .map(|t| t.generation())
        .max();
    assert!(
        new > newest_old,
        "new {new:?}, predecessor's {newest_old:?}"
    );
}
