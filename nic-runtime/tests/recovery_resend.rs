//! `Recovery::resend_to` (`recovery/epoch/resend.rs`): a session renewed inside
//! a recovery epoch drops what it held for the peer's old process, and the
//! machines on both ends send their step's messages again. Driven with the
//! recovery harness (`recovery/harness.rs`): 4 nodes, replication 3, node 0
//! crashes, node 1 leads and nodes 2 and 3 follow; the session between 1
//! and 2 is renewed while one message of each kind is in flight between
//! them.

#[path = "recovery/harness.rs"]
mod harness;

use harness::{Cluster, Coord, STEPS_MAX};
use splitkv_layout::wire::{CoordPhase, NodeMask, RecordKind, RecoveryMsg};
use splitkv_layout::TxId;
use splitkv_nic::recovery::EVIDENCE_TIMEOUT_NS_DEFAULT;

/// Which message the renewal loses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lost {
    Evidence,
    Decisions,
    Applied,
    Resume,
}

impl Lost {
    /// Every kind, in protocol order.
    const ALL: [Lost; 4] = [Lost::Evidence, Lost::Decisions, Lost::Applied, Lost::Resume];

    fn is(self, msg: &RecoveryMsg) -> bool {
        matches!(
            (self, msg),
            (Lost::Evidence, RecoveryMsg::Evidence { .. })
                | (Lost::Decisions, RecoveryMsg::Decisions { .. })
                | (Lost::Applied, RecoveryMsg::Applied { .. })
                | (Lost::Resume, RecoveryMsg::Resume { .. })
        )
    }
}

/// A cluster in epoch 1 after node 0 crashed, with one transaction of
/// node 2 logged at every replica of shard 1 (nodes 1, 2 and 3): a commit.
fn crashed() -> (Cluster, TxId) {
    let mut c = Cluster::new(4, 3);
    let tx = Cluster::tx(2, 1);
    let coord = Coord {
        phase: CoordPhase::Log,
        outcome: None,
        reported: false,
    };
    c.coordinate(tx, NodeMask::EMPTY.with(1), coord);
    c.record(1, tx, 1, RecordKind::Log);
    c.record(2, tx, 1, RecordKind::Log);
    c.record(3, tx, 1, RecordKind::Log);
    c.crash(&[0]);
    (c, tx)
}

/// Runs the cluster until it settles; the first time a message of kind
/// `lost` is in flight between nodes 1 and 2, their session is renewed:
/// everything in flight between them is dropped, and if `resend` both
/// machines are told (`resend_to`). Returns the steps taken and the
/// transaction's outcome.
fn run_with_renewal(lost: Lost, resend: bool) -> (Cluster, usize, Option<bool>) {
    let (mut c, tx) = crashed();
    for i in 0..STEPS_MAX {
        assert!(!c.settled(), "{lost:?}: settled before one was in flight");
        for n in [1, 2, 3] {
            c.take_commands(n, usize::MAX);
        }
        let between = |&(from, to, _): &(u16, u16, Vec<u8>)| matches!((from, to), (1, 2) | (2, 1));
        let hit = c.net.iter().filter(|m| between(m)).any(|(_, _, b)| {
            let msg = RecoveryMsg::decode(b).unwrap();
            lost.is(&msg)
        });
        if hit {
            c.net.retain(|m| !between(m));
            if resend {
                assert!(c.nodes[1].rec.resend_to(2) | c.nodes[2].rec.resend_to(1));
            }
            let steps = i + c.run(0);
            let out = c.check();
            return (c, steps, out.get(&tx).copied());
        }
        c.step(0);
    }
    panic!("{lost:?}: never in flight in {STEPS_MAX} steps");
}

#[test]
fn a_renewed_session_loses_no_step_of_recovery() {
    for lost in Lost::ALL {
        let (c, steps, outcome) = run_with_renewal(lost, true);
        assert_eq!(c.epoch, 1, "{lost:?}: nobody suspected");
        assert!(
            steps <= 6,
            "{lost:?}: a round trip more, not a timeout: {steps}"
        );
        assert_eq!(outcome, Some(true), "{lost:?}");
        assert_eq!(c.nodes[1].resumed, vec![1], "{lost:?}");
        assert_eq!(c.nodes[2].resumed, vec![1], "{lost:?}");
        let resends = c.nodes[1].rec.stats().resends + c.nodes[2].rec.stats().resends;
        assert!(resends >= 1, "{lost:?}: counted");
    }
}

/// Without the resend, the lost message is waited for until a step's
/// timeout suspects a live node and the membership configures it out.
#[test]
fn without_the_resend_a_live_node_is_suspected() {
    for lost in Lost::ALL {
        let (c, steps, _) = run_with_renewal(lost, false);
        assert_eq!(c.epoch, 2, "{lost:?}: another epoch");
        assert!(
            c.failed.contains(1) || c.failed.contains(2),
            "{lost:?}: a live node failed"
        );
        assert!(steps as u64 * harness::STEP_NS >= EVIDENCE_TIMEOUT_NS_DEFAULT);
    }
}

/// Resends when nothing was lost (both ends told at every step, in every
/// phase) change nothing: each receiver takes a message at most once.
#[test]
fn resends_of_what_arrived_are_taken_once() {
    let (mut c, tx) = crashed();
    let mut steps = 0;
    while !c.settled() {
        assert!(steps < 20, "settles");
        c.nodes[1].rec.resend_to(2);
        c.nodes[2].rec.resend_to(1);
        c.step(0);
        steps += 1;
    }
    assert_eq!(c.check().get(&tx), Some(&true));
    assert_eq!(c.epoch, 1);
    assert!(
        (1..4).all(|n| c.nodes[n].resumed == vec![1]),
        "resumed once"
    );
    let dropped: u64 = (1..3)
        .map(|n| c.nodes[n].rec.stats().unexpected_dropped)
        .sum();
    assert!(dropped > 0, "the duplicates were seen and dropped");
    // A node outside the epoch's live set, or this node, gets nothing.
    assert!(!c.nodes[1].rec.resend_to(0) && !c.nodes[1].rec.resend_to(1));
}
