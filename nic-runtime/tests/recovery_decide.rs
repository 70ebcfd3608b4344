//! Crash recovery's decision rule (`recovery::TxEvidence::decide`) against a
//! model of one transaction's messages (Xenic §4.2 with the commit point at
//! every replica's LOG acknowledgement: LOG to every replica of each written
//! shard, COMMIT after every LOG acknowledgement).
//!
//! Random histories: the coordinator aborts early or validates; LOG reaches
//! each replica (appended), is refused, or is lost; with every LOG appended
//! the coordinator decides commit and sends COMMIT (each delivered or lost),
//! with a refusal it decides abort and sends ABORT to the LOG holders, with a
//! loss it waits (unknown outcome). The history stops at a random step and at
//! most `f` random nodes crash (the coordinator among them or not).
//!
//! Reporting rule modelled: a commit is reported only after every replica's
//! LOG and COMMIT acknowledgements; an abort only before any LOG was sent, or
//! after the abort was decided and every LOG holder acknowledged the ABORT.
//! The decision never contradicts a reported one nor a live coordinator's,
//! and a commit finds the LOG on every surviving replica of every written
//! shard (so every survivor can apply it). A final test keeps the
//! counterexample for the weaker abort-reporting rule.

use proptest::prelude::*;
use splitkv_layout::wire::{
    CoordEvidence, CoordOutcome, CoordPhase, NodeId, NodeMask, RecordEvidence, RecordKind,
};
use splitkv_layout::TxId;
use splitkv_nic::recovery::{RecoveryRule, TxEvidence};
use splitkv_nic::{Placement, PlacementView};

/// One history's parameters: nodes, replication, coordinator, written
/// shards, the choice bytes that drive the history, the stop step and the
/// crashed set.
#[derive(Debug, Clone)]
struct Case {
    nodes: usize,
    replication: usize,
    coordinator: NodeId,
    writes: NodeMask,
    choices: Vec<u8>,
    stop: usize,
    crashed: NodeMask,
}

fn case() -> impl Strategy<Value = Case> {
    (2usize..=6)
        .prop_flat_map(|n| (Just(n), 1..=n))
        .prop_flat_map(|(n, r)| {
            (
                Just(n),
                Just(r),
                0..n as NodeId,
                0u16..(1 << n),
                prop::collection::vec(any::<u8>(), 64),
                0usize..64,
                prop::collection::btree_set(0..n as NodeId, 0..r),
            )
        })
        .prop_map(
            |(nodes, replication, coordinator, w, choices, stop, crashed)| Case {
                nodes,
                replication,
                coordinator,
                writes: NodeMask(w),
                choices,
                stop,
                crashed: crashed.into_iter().fold(NodeMask::EMPTY, NodeMask::with),
            },
        )
}

/// What happened by the stop step.
#[derive(Debug, Default)]
struct History {
    phase: Option<CoordPhase>,
    outcome: Option<bool>,
    reported: Option<bool>,
    /// `(shard, replica, kind)` of every record appended.
    records: Vec<(NodeId, NodeId, RecordKind)>,
}

/// Runs the history of `c` up to its stop step; `weak_abort_report`: report
/// an abort as soon as it is decided (the rule the last test refutes).
fn run(c: &Case, weak_abort_report: bool) -> History {
    let p = Placement::new(c.nodes, c.replication).unwrap();
    let mut h = History {
        phase: Some(CoordPhase::Execute),
        ..History::default()
    };
    let mut step = 0usize;
    let mut choice = c.choices.iter().copied().cycle();
    let mut go = || {
        step += 1;
        step <= c.stop
    };
    if choice.next().unwrap() % 4 == 0 || c.writes.is_empty() {
        // Abort in execution/validation, or a read-only transaction that
        // validates and commits; no record anywhere.
        if !go() {
            return h;
        }
        let commit = c.writes.is_empty() && choice.next().unwrap() % 2 == 0;
        h.phase = Some(CoordPhase::Validate);
        h.outcome = Some(commit);
        if go() {
            h.reported = Some(commit);
        }
        return h;
    }
    h.phase = Some(CoordPhase::Log);
    let targets: Vec<(NodeId, NodeId)> = c
        .writes
        .iter()
        .filter(|&s| (s as usize) < c.nodes)
        .flat_map(|s| p.shard_replicas(s).map(move |n| (s, n)))
        .collect();
    let (mut refused, mut lost) = (false, false);
    for &(s, n) in &targets {
        if !go() {
            return h;
        }
        match choice.next().unwrap() % 8 {
            0 => refused = true,
            1 => lost = true,
            _ => h.records.push((s, n, RecordKind::Log)),
        }
    }
    if lost && !refused {
        return h; // waits for an acknowledgement that never comes
    }
    if !go() {
        return h;
    }
    h.outcome = Some(!refused);
    if !refused {
        h.phase = Some(CoordPhase::Commit);
    }
    if refused && weak_abort_report {
        h.reported = Some(false);
    }
    let holders: Vec<(NodeId, NodeId)> = h.records.iter().map(|&(s, n, _)| (s, n)).collect();
    let kind = if refused {
        RecordKind::Abort
    } else {
        RecordKind::Commit
    };
    let mut all_acked = true;
    for (s, n) in holders {
        if !go() {
            return h;
        }
        if choice.next().unwrap() % 4 == 0 {
            all_acked = false;
        } else {
            let r = h.records.iter_mut().find(|r| (r.0, r.1) == (s, n)).unwrap();
            r.2 = kind;
        }
    }
    if all_acked && go() {
        h.reported = Some(!refused);
    }
    h
}

/// The leader's evidence from the survivors of `h`.
fn evidence(c: &Case, h: &History) -> TxEvidence {
    let mut e = TxEvidence::default();
    let tx_id = TxId::new(c.coordinator, 0, 1);
    if !c.crashed.contains(c.coordinator) {
        e.add_coordinator(CoordEvidence {
            tx_id,
            phase: h.phase.unwrap(),
            outcome: match h.outcome {
                None => CoordOutcome::Undecided,
                Some(true) => CoordOutcome::Commit,
                Some(false) => CoordOutcome::Abort,
            },
            reported: h.reported.is_some(),
            write_shards: c.writes,
        });
    }
    for &(shard, n, kind) in &h.records {
        if !c.crashed.contains(n) {
            e.add_record(
                n,
                RecordEvidence {
                    tx_id,
                    shard,
                    kind,
                    write_shards: c.writes,
                },
            );
        }
    }
    e
}

fn view(c: &Case) -> PlacementView {
    PlacementView::new(Placement::new(c.nodes, c.replication).unwrap(), c.crashed).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn never_contradicts_a_reported_decision(c in case()) {
        let h = run(&c, false);
        let v = view(&c);
        let e = evidence(&c, &h);
        if e == TxEvidence::default() {
            // Nobody survived who knows the transaction: recovery decides
            // nothing, which only a read-only transaction may come to.
            prop_assert!(c.writes.is_empty() || h.reported != Some(true), "{:?}", h);
            return Ok(());
        }
        let (commit, why) = e.decide(&v, RecoveryRule::XenicOcc);
        if let Some(reported) = h.reported {
            prop_assert_eq!(commit, reported, "reported {} but decided {:?} ({:?})", reported, commit, why);
        }
        if !c.crashed.contains(c.coordinator) {
            if let Some(decided) = h.outcome {
                prop_assert_eq!(commit, decided, "live coordinator's decision overturned");
            }
        }
        if commit {
            // Every survivor of every written shard can apply the commit.
            for s in c.writes.iter() {
                for n in v.live_replicas(s) {
                    prop_assert!(
                        h.records.iter().any(|&(rs, rn, k)| rs == s && rn == n && k != RecordKind::Abort),
                        "committed, but surviving replica {} of shard {} has no LOG", n, s
                    );
                }
            }
        }
    }
}

/// With replication 3 (f = 2), a coordinator that reports an abort as soon
/// as one replica refuses its LOG is contradicted when it and the refusing
/// replica crash: the two survivors hold the LOG and nothing else.
#[test]
fn weak_abort_reporting_is_contradicted() {
    // 4 nodes; shard 1 on nodes 1, 2, 3; coordinator 0.
    let c = Case {
        nodes: 4,
        replication: 3,
        coordinator: 0,
        writes: NodeMask::EMPTY.with(1),
        // validate; LOG ok at 1, ok at 2, refused at 3; ABORTs all lost.
        choices: vec![1, 2, 2, 0, 0, 0, 0],
        stop: 64,
        crashed: NodeMask::EMPTY.with(0).with(3),
    };
    let h = run(&c, true);
    assert_eq!(h.reported, Some(false), "{h:?}");
    let (commit, _) = evidence(&c, &h).decide(&view(&c), RecoveryRule::XenicOcc);
    assert!(commit, "the weak rule's report is contradicted: {h:?}");
    // With the rule modelled above (ABORT acknowledged by every LOG holder
    // first), the same history reports nothing.
    assert_eq!(run(&c, false).reported, None);
}
