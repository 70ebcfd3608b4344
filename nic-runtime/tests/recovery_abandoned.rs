//! A recovery abandoned after some node recorded its decisions:
//! the next epoch must decide the same way (`recovery/epoch/unresumed.rs`;
//! `tla/XenicOCCMsgs.tla` with `KeepRecovered`, must-fail model
//! `XenicForgetRecovered.cfg`). Each scenario loses one recovery message
//! with its leader, so that what the survivors' servers report
//! (`harness.rs` reports records as `Server::recovery_evidence` does) hides
//! the recorded decision. Killed mutants: `forget_recovered_records`,
//! `forget_recovered_outcome` (`scripts/mutation`).

#[path = "recovery/harness.rs"]
mod harness;

use harness::{Cluster, Coord};
use splitkv_layout::wire::{CoordPhase, NodeId, NodeMask, RecordKind};
use splitkv_layout::TxId;

/// 4 nodes, replication 3; `tx` is coordinated by node 1 and writes shard
/// 2, whose replicas (2, 3, 0) all hold its LOG; its coordinator is still
/// waiting for the LOG acknowledgements. Node 3 crashes: node 0 leads the
/// recovery, and rule 4 commits `tx`.
fn logged_everywhere_then_crash() -> (Cluster, TxId) {
    let mut c = Cluster::new(4, 3);
    let replicas: Vec<NodeId> = c.view().live_replicas(2).collect();
    assert_eq!(replicas.len(), 3);
    assert!(
        !replicas.contains(&1),
        "the coordinator replicates nothing it writes"
    );
    let tx = Cluster::tx(1, 7);
    let undecided = Coord {
        phase: CoordPhase::Log,
        outcome: None,
        reported: false,
    };
    c.coordinate(tx, NodeMask::EMPTY.with(2), undecided);
    for r in replicas {
        c.record(r, tx, 2, RecordKind::Log);
    }
    c.crash(&[3]);
    // Evidence in: the leader decides, records its own decision and queues
    // the decisions for nodes 1 and 2.
    c.step(0);
    (c, tx)
}

/// The leader (node 0) sends what it queued; its one message to the
/// coordinator (node 1, a `what` message) is lost.
fn lose_leaders_message_to_the_coordinator(c: &mut Cluster, what: &str) {
    c.take_commands(0, usize::MAX);
    let before = c.net.len();
    c.net.retain(|&(_, to, _)| to != 1);
    assert_eq!(c.net.len(), before - 1, "one {what} message to node 1 lost");
}

/// The leader's decisions reach replica 2 (which records the COMMIT) but
/// not the coordinator, and the leader crashes: the next leader hears an
/// undecided coordinator and no pending LOG anywhere. Replica 2 must report
/// the COMMIT record it appended for the recovery it has not resumed from.
#[test]
fn a_replica_reports_the_decision_it_recorded_for_an_abandoned_recovery() {
    let (mut c, tx) = logged_everywhere_then_crash();
    lose_leaders_message_to_the_coordinator(&mut c, "Decisions");
    c.step(0);
    c.crash(&[0]);
    assert_eq!(
        c.nodes[2].records.get(&(tx, 2)),
        Some(&RecordKind::Commit),
        "replica 2 applied the commit before the leader crashed"
    );
    c.run(0);
    let out = c.check();
    assert_eq!(
        out.get(&tx),
        Some(&true),
        "a commit replica 2 recorded and applied was decided again as abort"
    );
}

/// Every node records the commit and the leader resumes, but its Resume to
/// the coordinator is lost with it: the replicas have resumed (and report
/// nothing about a live coordinator's transaction), the coordinator has
/// not. The coordinator must report the decision it recorded as its own.
#[test]
fn a_coordinator_reports_the_decision_it_recorded_for_an_abandoned_recovery() {
    let (mut c, tx) = logged_everywhere_then_crash();
    c.step(0); // decisions delivered and recorded at nodes 1 and 2
    c.step(0); // their Applied delivered: the leader resumes
    lose_leaders_message_to_the_coordinator(&mut c, "Resume");
    c.step(0);
    c.take_commands(2, usize::MAX);
    assert_eq!(c.nodes[2].resumed, vec![1], "replica 2 resumed epoch 1");
    assert!(c.nodes[1].resumed.is_empty(), "the coordinator did not");
    c.crash(&[0]);
    c.run(0);
    let out = c.check();
    assert_eq!(
        out.get(&tx),
        Some(&true),
        "a commit every replica recorded was decided again as abort at its coordinator"
    );
}
