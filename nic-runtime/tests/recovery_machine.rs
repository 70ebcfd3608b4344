//! The crash-recovery state machine (`recovery::Recovery`) driven as a
//! cluster of instances against each other (`recovery/harness.rs`): single
//! crashes, crashes of the leader during recovery, silent nodes, messages of
//! other epochs, and seeded random histories.

#[path = "recovery/harness.rs"]
mod harness;

use harness::{Cluster, Coord, STEP_NS};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_layout::wire::{CoordPhase, Decision, NodeId, NodeMask, RecordKind, RecoveryMsg};
use splitkv_layout::TxId;
use splitkv_nic::recovery::{
    LocalEvidence, Recovery, RecoveryCommand, RecoveryConfig, RecoveryError, RecoveryPhase,
    DECISION_TIMEOUT_NS_DEFAULT, EARLY_MESSAGES_MAX, EVIDENCE_TIMEOUT_NS_DEFAULT,
};
use splitkv_nic::Placement;

fn shards(s: &[NodeId]) -> NodeMask {
    s.iter().copied().fold(NodeMask::EMPTY, NodeMask::with)
}

const UNDECIDED_LOG: Coord = Coord {
    phase: CoordPhase::Log,
    outcome: None,
    reported: false,
};

/// 3 nodes, replication 2 (shard s on nodes s and s+1); node 0 crashes.
#[test]
fn single_crash_decides_each_case() {
    let mut c = Cluster::new(3, 2);
    // A: shard 1 logged at both replicas 1, 2: commit.
    let a = Cluster::tx(0, 1);
    c.coordinate(a, shards(&[1]), UNDECIDED_LOG);
    c.record(1, a, 1, RecordKind::Log);
    c.record(2, a, 1, RecordKind::Log);
    // B: shard 1 logged at 1 only: abort (replica 2 lacks it).
    let b = Cluster::tx(0, 2);
    c.coordinate(b, shards(&[1]), UNDECIDED_LOG);
    c.record(1, b, 1, RecordKind::Log);
    // C: shards 0 and 2, logged everywhere (node 0 among them): commit.
    let t = Cluster::tx(0, 3);
    c.coordinate(t, shards(&[0, 2]), UNDECIDED_LOG);
    for (n, s) in [(0, 0), (1, 0), (2, 2), (0, 2)] {
        c.record(n, t, s, RecordKind::Log);
    }
    // D: coordinated by node 1, committed and reported; node 2 got its COMMIT.
    let d = Cluster::tx(1, 1);
    c.coordinate(
        d,
        shards(&[1]),
        Coord {
            phase: CoordPhase::Commit,
            outcome: Some(true),
            reported: true,
        },
    );
    c.record(1, d, 1, RecordKind::Log);
    c.record(2, d, 1, RecordKind::Commit);
    // E: coordinated by node 2, still validating: abort.
    let e = Cluster::tx(2, 1);
    c.coordinate(
        e,
        shards(&[2]),
        Coord {
            phase: CoordPhase::Validate,
            outcome: None,
            reported: false,
        },
    );
    c.crash(&[0]);
    assert_eq!(
        c.nodes[1].rec.phase(),
        RecoveryPhase::Collecting,
        "node 1 leads"
    );
    let steps = c.run(0);
    let out = c.check();
    assert_eq!(out.get(&a), Some(&true));
    assert_eq!(out.get(&b), Some(&false));
    assert_eq!(out.get(&t), Some(&true));
    assert_eq!(out.get(&d), Some(&true));
    assert_eq!(out.get(&e), Some(&false));
    assert_eq!(c.nodes[1].promoted, vec![0], "node 1 now serves shard 0");
    assert!(c.nodes[2].promoted.is_empty());
    assert!(c.nodes[1].resumed == vec![1] && c.nodes[2].resumed == vec![1]);
    assert!(steps <= 5, "two round trips: {steps} steps");
}

/// 5 nodes, replication 3: node 2 crashes, then the leader (node 0) crashes
/// before it has decided; node 1 suspects it and the next epoch finishes.
#[test]
fn leader_crash_while_collecting_restarts_recovery() {
    let mut c = Cluster::new(5, 3);
    let a = Cluster::tx(2, 1); // shard 3 on 3, 4, 0: logged at all
    c.coordinate(a, shards(&[3]), UNDECIDED_LOG);
    for n in [3, 4, 0] {
        c.record(n, a, 3, RecordKind::Log);
    }
    let b = Cluster::tx(2, 2); // shard 1 on 1, 2, 3: logged at 1 and 2
    c.coordinate(b, shards(&[1]), UNDECIDED_LOG);
    c.record(1, b, 1, RecordKind::Log);
    c.record(2, b, 1, RecordKind::Log);
    c.crash(&[2]);
    // Node 0 collects but crashes silently before deciding: nothing it
    // would send leaves it.
    c.nodes[0].mute = true;
    let t0 = c.now;
    c.run(0);
    assert_eq!(c.epoch, 2, "a second epoch without the leader");
    assert!(c.failed.contains(0) && c.failed.contains(2));
    assert!(
        c.now - t0 >= DECISION_TIMEOUT_NS_DEFAULT,
        "suspected after the timeout"
    );
    let out = c.check();
    assert_eq!(out.get(&a), Some(&true));
    assert_eq!(out.get(&b), Some(&false), "replica 3 never got the LOG");
    assert_eq!(c.nodes[1].rec.view().leader(), 1);
    assert_eq!(c.nodes[3].promoted, vec![2], "shard 2 moves to node 3");
    assert_eq!(c.nodes[1].promoted, vec![0], "shard 0 moves to node 1");
}

/// The leader decides and reaches only node 1 before it crashes: node 1
/// records its decisions but cannot resume (no `Resume`); the next epoch
/// decides again, and may differ where no survivor recorded the earlier
/// decision and nobody acted on it.
#[test]
fn leader_crash_mid_broadcast_decides_again() {
    let mut c = Cluster::new(4, 3);
    let a = Cluster::tx(3, 1); // shard 1 on 1, 2, 3: logged at all
    c.coordinate(a, shards(&[1]), UNDECIDED_LOG);
    for n in [1, 2, 3] {
        c.record(n, a, 1, RecordKind::Log);
    }
    let b = Cluster::tx(3, 2); // shard 2 on 2, 3, 0: logged at 2, 3
    c.coordinate(b, shards(&[2]), UNDECIDED_LOG);
    c.record(2, b, 2, RecordKind::Log);
    c.record(3, b, 2, RecordKind::Log);
    c.crash(&[3]);
    c.step(0); // evidence reaches leader 0, which decides
    assert_eq!(c.nodes[0].rec.phase(), RecoveryPhase::AwaitingApplied);
    c.take_commands(0, 1); // only the decisions to node 1 leave node 0
    c.nodes[0].alive = false;
    c.step(0);
    c.take_commands(1, usize::MAX);
    assert!(c.nodes[1].resumed.is_empty(), "no Resume from the leader");
    assert_eq!(c.nodes[1].rec.phase(), RecoveryPhase::AwaitingResume);
    assert_eq!(c.nodes[1].records[&(a, 1)], RecordKind::Commit);
    assert_eq!(c.nodes[2].rec.phase(), RecoveryPhase::AwaitingDecisions);
    c.run(0);
    assert_eq!(c.epoch, 2, "the silent leader was suspected");
    let out = c.check();
    assert_eq!(out.get(&a), Some(&true));
    // Epoch 1 aborted b (survivor 0 lacked its LOG) but no survivor recorded
    // that; with 0 gone, b's only surviving replica holds the LOG.
    assert_eq!(out.get(&b), Some(&true));
}

/// Replication 4 (f = 3). The coordinator (node 2) lost its own LOG of b,
/// so epoch 1 aborts b; the leader crashes after every node recorded that
/// but before `Resume`, and then the coordinator and the replica without the
/// LOG crash too. The recorded ABORTs keep b aborted. Without the `Applied`
/// round, a coordinator that reported the abort at once could be
/// contradicted here (its survivors hold only LOG records).
#[test]
fn recorded_decisions_survive_more_crashes() {
    let mut c = Cluster::new(5, 4);
    let b = Cluster::tx(2, 1); // shard 1 on 1, 2, 3, 4: logged at 1, 3, 4
    c.coordinate(b, shards(&[1]), UNDECIDED_LOG);
    for n in [1, 3, 4] {
        c.record(n, b, 1, RecordKind::Log);
    }
    c.crash(&[0]);
    for _ in 0..3 {
        c.step(0); // evidence, decisions, Applied
    }
    let leader = &c.nodes[1].rec;
    assert_eq!(leader.phase(), RecoveryPhase::Serving, "Resume queued");
    assert!(
        c.reported.is_empty(),
        "nobody reported before every node recorded"
    );
    assert_eq!(c.nodes[3].records[&(b, 1)], RecordKind::Abort);
    c.nodes[1].rec.poll_command(); // drop one Resume on the way, then crash
    c.nodes[1].alive = false;
    c.crash(&[1, 2]);
    c.run(0);
    let out = c.check();
    assert_eq!(out.get(&b), Some(&false));
    assert_eq!(c.epoch, 2);
}

/// Replication 4 (f = 3). Epoch 1 aborts b (its coordinator, node 2, is a
/// replica without the LOG); the decisions reach only node 2 before the
/// leader crashes, and then node 2 crashes too. The survivors hold only
/// LOG records and commit b in epoch 2, which is safe only because node 2
/// reported nothing before every live node recorded the abort (`Cluster::check`
/// compares with what clients were told; this test fails if a node acts on
/// decisions before `Resume`).
#[test]
fn coordinator_reports_only_after_every_node_recorded() {
    let mut c = Cluster::new(5, 4);
    let b = Cluster::tx(2, 1); // shard 1 on 1, 2, 3, 4: logged at 1, 3, 4
    c.coordinate(b, shards(&[1]), UNDECIDED_LOG);
    for n in [1, 3, 4] {
        c.record(n, b, 1, RecordKind::Log);
    }
    c.crash(&[0]);
    c.step(0); // evidence reaches leader 1, which decides
    c.take_commands(1, 1); // the decisions to node 2 only
    c.nodes[1].alive = false;
    c.step(0); // node 2 records the abort
    c.take_commands(2, usize::MAX);
    assert_ne!(c.nodes[2].rec.phase(), RecoveryPhase::AwaitingDecisions);
    c.crash(&[1, 2]);
    c.run(0);
    assert_eq!(c.check().get(&b), Some(&true));
    assert!(c.reported.is_empty());
}

/// A live node that stays silent is suspected by the leader after the
/// evidence timeout and failed by the membership.
#[test]
fn silent_node_is_suspected_by_the_leader() {
    let mut c = Cluster::new(4, 2);
    c.nodes[2].mute = true;
    c.crash(&[3]);
    for _ in 0..(EVIDENCE_TIMEOUT_NS_DEFAULT / STEP_NS) as usize - 1 {
        c.step(0);
        assert_eq!(c.epoch, 1);
    }
    c.run(0);
    assert_eq!(c.epoch, 2);
    assert_eq!(c.failed, shards(&[2, 3]));
    assert!(c.nodes[0].rec.stats().suspicions >= 1);
    c.check();
}

fn evidence(epoch: u32) -> RecoveryMsg {
    RecoveryMsg::Evidence {
        epoch,
        part: 0,
        parts: 1,
        coordinated: vec![],
        records: vec![],
        generations: vec![],
    }
}

/// Old-epoch messages are dropped and counted; a later epoch's message is
/// kept (boundedly) and taken once this node reaches that epoch; bad input
/// to `begin_epoch` is a typed error.
#[test]
fn messages_of_other_epochs_and_bad_epochs() {
    let p = Placement::new(3, 2).unwrap();
    let mut r = Recovery::new(0, p, RecoveryConfig::default());
    let failed = NodeMask::EMPTY.with(2);
    r.on_message(0, 1, evidence(1)); // early: kept
    for _ in 0..EARLY_MESSAGES_MAX + 3 {
        r.on_message(0, 1, evidence(5));
    }
    assert_eq!(r.stats().early_dropped, 4);
    r.begin_epoch(0, 1, failed, LocalEvidence::default())
        .unwrap();
    // Node 1's early evidence completed the collection at once.
    assert_eq!(r.phase(), RecoveryPhase::AwaitingApplied);
    r.on_message(0, 1, RecoveryMsg::Applied { epoch: 1 });
    assert_eq!(r.phase(), RecoveryPhase::Serving);
    let cmds: Vec<_> = std::iter::from_fn(|| r.poll_command()).collect();
    assert!(matches!(
        cmds[0],
        RecoveryCommand::Send {
            to: 1,
            msg: RecoveryMsg::Decisions { .. }
        }
    ));
    assert!(matches!(
        cmds[1],
        RecoveryCommand::Send {
            to: 1,
            msg: RecoveryMsg::Resume { epoch: 1 }
        }
    ));
    assert_eq!(
        cmds.last(),
        Some(&RecoveryCommand::Resume {
            epoch: 1,
            generation: 0
        })
    );
    r.on_message(0, 1, evidence(0));
    assert_eq!(r.stats().old_epoch_dropped, 1);
    r.on_message(0, 1, evidence(1));
    assert_eq!(r.stats().unexpected_dropped, 1, "evidence after deciding");
    assert!(matches!(
        r.begin_epoch(0, 1, failed, LocalEvidence::default()),
        Err(RecoveryError::EpochNotNewer { .. })
    ));
    assert!(matches!(
        r.begin_epoch(0, 2, NodeMask::EMPTY.with(0), LocalEvidence::default()),
        Err(RecoveryError::SelfFailed(0))
    ));
    assert!(matches!(
        r.begin_epoch(0, 2, NodeMask(0b1000), LocalEvidence::default()),
        Err(RecoveryError::Placement(_))
    ));
    // Decisions from a node that is not the leader are ignored.
    let mut f = Recovery::new(2, p, RecoveryConfig::default());
    f.begin_epoch(0, 1, NodeMask::EMPTY, LocalEvidence::default())
        .unwrap();
    f.on_message(
        0,
        1,
        RecoveryMsg::Decisions {
            epoch: 1,
            part: 0,
            parts: 1,
            decisions: vec![Decision {
                tx_id: TxId::from_bits(1),
                commit: true,
            }],
            generation: 0,
        },
    );
    assert_eq!(f.phase(), RecoveryPhase::AwaitingDecisions);
    assert_eq!(f.stats().unexpected_dropped, 1);
}

/// The leader takes, per coordinator, the newest generation of its ids
/// that any live node's evidence reports, and tells each node its own, in
/// its decisions and the `Resume` command (a restarted process numbers its
/// transactions above it).
#[test]
fn each_node_hears_the_newest_generation_of_its_ids_any_live_node_saw() {
    let p = Placement::new(3, 2).unwrap();
    let mut leader = Recovery::new(0, p, RecoveryConfig::default());
    let mut other = Recovery::new(1, p, RecoveryConfig::default());
    let local = |g: Vec<u32>| LocalEvidence {
        generations: g,
        ..LocalEvidence::default()
    };
    let failed = NodeMask::EMPTY.with(2);
    // Node 1's ids: node 0's fences saw generation 7, its own 3; node 0's
    // ids: 3 at node 0, 2 at node 1.
    leader
        .begin_epoch(0, 1, failed, local(vec![3, 7, 0]))
        .unwrap();
    other
        .begin_epoch(0, 1, failed, local(vec![2, 3, 9]))
        .unwrap();
    let mut to_leader = Vec::new();
    while let Some(c) = other.poll_command() {
        if let RecoveryCommand::Send { to: 0, msg } = c {
            to_leader.push(msg);
        }
    }
    to_leader
        .into_iter()
        .for_each(|m| leader.on_message(0, 1, m));
    let mut to_other = Vec::new();
    while let Some(c) = leader.poll_command() {
        match c {
            RecoveryCommand::Send { to: 1, msg } => to_other.push(msg),
            RecoveryCommand::Resume { generation, .. } => panic!("resumed early {generation}"),
            _ => {}
        }
    }
    let heard: Vec<u32> = to_other
        .iter()
        .filter_map(|m| match m {
            RecoveryMsg::Decisions { generation, .. } => Some(*generation),
            _ => None,
        })
        .collect();
    assert_eq!(heard, vec![7], "node 1's newest id anywhere");
    to_other.into_iter().for_each(|m| other.on_message(0, 0, m));
    while let Some(c) = other.poll_command() {
        if let RecoveryCommand::Send { to: 0, msg } = c {
            leader.on_message(0, 1, msg);
        }
    }
    let resumed = |r: &mut Recovery| {
        std::iter::from_fn(|| r.poll_command()).find_map(|c| match c {
            RecoveryCommand::Resume { generation, .. } => Some(generation),
            _ => None,
        })
    };
    assert_eq!(resumed(&mut leader), Some(3), "node 0's newest id anywhere");
    other.on_message(0, 0, RecoveryMsg::Resume { epoch: 1 });
    assert_eq!(resumed(&mut other), Some(7));
}

/// Generates one transaction's history (as in `recovery_decide.rs`) into `c`.
fn random_tx(c: &mut Cluster, rng: &mut Xoshiro256PlusPlus, tx: TxId) {
    let n = c.nodes.len() as u64;
    let mut roll = |k: u64| rng.next_u64() % k;
    let mut w = NodeMask::EMPTY;
    for _ in 0..1 + roll(3) {
        w = w.with(roll(n) as NodeId);
    }
    let targets: Vec<(NodeId, NodeId)> = w
        .iter()
        .flat_map(|s| c.placement.shard_replicas(s).map(move |r| (s, r)))
        .collect();
    let mut coord = Coord {
        phase: CoordPhase::Execute,
        outcome: None,
        reported: false,
    };
    if roll(4) == 0 {
        coord.outcome = Some(false);
        coord.reported = roll(2) == 0;
        c.coordinate(tx, w, coord);
        return;
    }
    coord.phase = CoordPhase::Log;
    let (mut refused, mut lost) = (false, false);
    let mut holders = Vec::new();
    for &(s, r) in &targets {
        match roll(6) {
            0 => refused = true,
            1 => lost = true,
            _ => holders.push((s, r)),
        }
    }
    let decided = refused || !lost;
    let kind = if refused {
        RecordKind::Abort
    } else {
        RecordKind::Commit
    };
    let mut all_acked = true;
    for &(s, r) in &holders {
        let k = if decided && roll(3) != 0 {
            kind
        } else {
            RecordKind::Log
        };
        all_acked &= k == kind;
        c.record(r, tx, s, k);
    }
    if decided {
        coord.outcome = Some(!refused);
        coord.phase = if refused {
            CoordPhase::Log
        } else {
            CoordPhase::Commit
        };
        coord.reported = all_acked && roll(2) == 0;
    }
    c.coordinate(tx, w, coord);
}

/// Seeded random clusters and histories, one or two crash waves of at most
/// `f` nodes in all (the second during recovery), messages delivered in
/// rotated orders: every run settles and passes `Cluster::check`.
#[test]
fn random_histories_recover_consistently() {
    let mut decided = [0usize; 2];
    for seed in 0..300u64 {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let nodes = 3 + (rng.next_u64() % 5) as usize;
        let replication = 2 + (rng.next_u64() % (nodes as u64 - 1)).min(2) as usize;
        let mut c = Cluster::new(nodes, replication);
        for generation in 0..20 {
            let coord = (rng.next_u64() % nodes as u64) as NodeId;
            random_tx(&mut c, &mut rng, Cluster::tx(coord, generation));
        }
        let mut order: Vec<NodeId> = (0..nodes as NodeId).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
        }
        let f = replication - 1;
        let first = 1 + (rng.next_u64() % f as u64) as usize;
        c.crash(&order[..first]);
        if first < f && rng.next_u64() % 2 == 0 {
            let rotate = rng.next_u64() as usize;
            for _ in 0..rng.next_u64() % 3 {
                c.step(rotate);
            }
            if !c.settled() {
                c.crash(&order[first..first + 1]);
            }
        }
        c.run(rng.next_u64() as usize);
        for (_, commit) in c.check() {
            decided[commit as usize] += 1;
        }
    }
    assert!(
        decided[0] > 100 && decided[1] > 100,
        "both outcomes exercised: {decided:?}"
    );
}

#[test]
fn recovery_waits_grow_with_the_session_silence_but_never_below_the_defaults() {
    // The sim's 30 ms silence keeps the defaults.
    assert_eq!(
        RecoveryConfig::for_silence(30_000_000),
        RecoveryConfig::default()
    );
    // A deployed 1 s silence: a leader learning the configuration 100 ms
    // late (etcd's poll) is not suspected.
    let c = RecoveryConfig::for_silence(1_000_000_000);
    assert_eq!(c.evidence_timeout_ns, 500_000_000);
    assert_eq!(c.decision_timeout_ns, 1_000_000_000);
    assert!(c.decision_timeout_ns > c.evidence_timeout_ns);
}
