use super::*;
use crate::placement::Placement;
use splitkv_layout::wire::CoordPhase;

const XENIC: RecoveryRule = RecoveryRule::XenicOcc;

#[test]
fn a_backup_chosen_in_this_configuration_is_not_asked_for_older_logs() {
    use crate::membership::Configuration;
    // 4 nodes, replication 3: coordinator 0 crashes after every replica
    // of shard 0 (0, 1, 2) logged its write, and node 3 becomes the
    // shard's new backup in that same configuration.
    let p = Placement::new(4, 3).unwrap();
    let c = Configuration::initial(4, 3).without(1 << 0);
    let view = PlacementView::with_roles(p, NodeMask::EMPTY.with(0), c.roles()).unwrap();
    assert_eq!(view.live_replicas(0).collect::<Vec<_>>(), vec![1, 2, 3]);
    let mut e = TxEvidence::default();
    for holder in [1, 2] {
        e.add_record(holder, rec(0, RecordKind::Log, 0b1));
    }
    // The commit may have been reported: recovery commits it.
    assert_eq!(
        e.decide_tx_caught_up(TxId::new(0, 0, 1), &view, XENIC),
        (true, DecisionReason::EveryReplicaLogged)
    );
    // Asking the new backup too (the broken variant) aborts it.
    assert_eq!(
        e.decide_tx(TxId::new(0, 0, 1), &view, XENIC),
        (false, DecisionReason::NotLogged)
    );
    // A caught-up member that lacks the LOG still aborts it.
    let mut short = TxEvidence::default();
    short.add_record(1, rec(0, RecordKind::Log, 0b1));
    assert_eq!(
        short.decide_tx_caught_up(TxId::new(0, 0, 1), &view, XENIC),
        (false, DecisionReason::NotLogged)
    );
}

#[test]
fn a_new_backup_that_caught_up_is_asked_whatever_the_leader_served() {
    use crate::membership::Configuration;
    // Rejoin Smallbank seed 282 (5 nodes, replication 3): node 0
    // crashed; node 1 became shard 3's new backup (3, 4, 0 → 3, 4, 1)
    // and caught up; node 0 rejoined as a new process, the lowest live
    // id and so the recovery leader, whose last served view is the
    // first configuration's. Node 3 coordinated a write to shard 3 whose
    // LOG reached 3 and 4 but not node 1.
    let p = Placement::new(5, 3).unwrap();
    let c = Configuration::initial(5, 3).without(1 << 0);
    assert!(c.shards[3].joining & (1 << 1) != 0, "node 1 joins shard 3");
    let c = c.caught_up(1).unwrap().rejoining(0, 2).unwrap();
    let view = PlacementView::with_roles(p, NodeMask::EMPTY, c.roles()).unwrap();
    assert_eq!(view.live_replicas(3).collect::<Vec<_>>(), vec![3, 4, 1]);
    assert!(view.joining(3).is_empty() && view.renewed().contains(0));
    let tx = TxId::new(3, 0, 0x8e);
    let mut e = logged_at(tx, 3, &[3, 4]);
    e.add_coordinator(coord(CoordOutcome::Undecided, 0b1000));
    assert_eq!(
        e.decide_tx_caught_up(tx, &view, XENIC),
        (false, DecisionReason::NotLogged),
        "node 1, a caught-up replica, never took the LOG"
    );
}

#[test]
fn a_restarted_member_is_not_asked_for_its_previous_process_logs() {
    use crate::membership::Configuration;
    // 3 nodes, replication 3: node 1 coordinated a transaction writing
    // shard 0, whose LOG every replica acknowledged (its commit may have
    // been reported); node 1 crashes and, before that epoch resumed,
    // rejoins as a new process holding nothing.
    let p = Placement::new(3, 3).unwrap();
    let c = Configuration::initial(3, 3).without(1 << 1);
    let c = c.rejoining(1, 2).unwrap();
    let view = PlacementView::with_roles(p, NodeMask::EMPTY, c.roles()).unwrap();
    assert!(view.renewed().contains(1));
    assert!(
        view.live_replicas(0).any(|n| n == 1),
        "node 1 joins shard 0 again"
    );
    let tx = TxId::new(1, 0, 5);
    let e = logged_at(tx, 0, &[0, 2]);
    assert_eq!(
        e.decide_tx_caught_up(tx, &view, XENIC),
        (true, DecisionReason::EveryReplicaLogged),
        "the new process of node 1 lost the LOG with its predecessor"
    );
}

/// The evidence of `tx`, writing shard `shard` only, whose LOG
/// `holders` hold.
fn logged_at(tx: TxId, shard: u16, holders: &[NodeId]) -> TxEvidence {
    let mut e = TxEvidence::default();
    for &holder in holders {
        let r = RecordEvidence {
            tx_id: tx,
            ..rec(shard, RecordKind::Log, 1 << shard)
        };
        e.add_record(holder, r);
    }
    e
}

fn coord(outcome: CoordOutcome, shards: u16) -> CoordEvidence {
    CoordEvidence {
        tx_id: TxId::new(0, 0, 1),
        phase: CoordPhase::Log,
        outcome,
        reported: false,
        write_shards: NodeMask(shards),
    }
}

fn rec(shard: u16, kind: RecordKind, shards: u16) -> RecordEvidence {
    RecordEvidence {
        tx_id: TxId::new(0, 0, 1),
        shard,
        kind,
        write_shards: NodeMask(shards),
    }
}

/// 3 nodes, replication 2 (shard 0 on nodes 0 and 1, shard 1 on 1 and
/// 2), node 2 crashed; the transaction writes shards 0 and 1.
fn view() -> PlacementView {
    PlacementView::new(Placement::new(3, 2).unwrap(), NodeMask::EMPTY.with(2)).unwrap()
}

/// Every combination of a coordinator (absent or with each outcome) and,
/// for each surviving (shard, replica) pair, no record or one of each
/// kind; the decision is checked against the rules written out again.
#[test]
fn exhaustive_over_two_shards() {
    let coords = [
        None,
        Some(CoordOutcome::Undecided),
        Some(CoordOutcome::Commit),
        Some(CoordOutcome::Abort),
    ];
    let kinds = [
        None,
        Some(RecordKind::Log),
        Some(RecordKind::Commit),
        Some(RecordKind::Abort),
    ];
    let slots = [(0u16, 0u16), (0, 1), (1, 1)];
    let mut seen = std::collections::HashSet::new();
    for c in coords {
        for combo in 0..kinds.len().pow(slots.len() as u32) {
            let ks: Vec<_> = (0..slots.len())
                .map(|i| kinds[combo / kinds.len().pow(i as u32) % kinds.len()])
                .collect();
            let mut e = TxEvidence::default();
            if let Some(o) = c {
                e.add_coordinator(coord(o, 0b11));
            }
            for (&(shard, holder), k) in slots.iter().zip(&ks) {
                if let Some(k) = k {
                    e.add_record(holder, rec(shard, *k, 0b11));
                }
            }
            let any = |kind| ks.contains(&Some(kind));
            let logged = ks
                .iter()
                .all(|k| matches!(k, Some(RecordKind::Log | RecordKind::Commit)));
            let want = match c {
                Some(CoordOutcome::Commit) => true,
                Some(CoordOutcome::Abort) => false,
                _ if any(RecordKind::Commit) => true,
                _ if any(RecordKind::Abort) => false,
                _ => logged,
            };
            let (got, why) = e.decide(&view(), XENIC);
            assert_eq!(got, want, "coordinator {c:?}, records {ks:?}: {why:?}");
            seen.insert(why);
        }
    }
    assert_eq!(seen.len(), 5, "every rule is exercised: {seen:?}");
}

#[test]
fn write_shards_come_from_any_record() {
    // Only shard 0's LOGs survived, but they name shard 1 as written too.
    let mut e = TxEvidence::default();
    e.add_record(0, rec(0, RecordKind::Log, 0b11));
    e.add_record(1, rec(0, RecordKind::Log, 0b11));
    assert_eq!(e.decide(&view(), XENIC), (false, DecisionReason::NotLogged));
    e.add_record(1, rec(1, RecordKind::Log, 0b11));
    assert_eq!(
        e.decide(&view(), XENIC),
        (true, DecisionReason::EveryReplicaLogged)
    );
}

#[test]
fn a_surviving_replica_without_the_log_aborts() {
    // Shard 0: node 0 holds the LOG, node 1 (alive) never received it.
    let mut e = TxEvidence::default();
    e.add_record(0, rec(0, RecordKind::Log, 0b01));
    assert_eq!(e.decide(&view(), XENIC), (false, DecisionReason::NotLogged));
}

#[test]
fn a_lost_shard_aborts() {
    let v = PlacementView::new(Placement::new(3, 1).unwrap(), NodeMask::EMPTY.with(1)).unwrap();
    let mut e = TxEvidence::default();
    e.add_record(0, rec(0, RecordKind::Log, 0b11));
    assert_eq!(e.decide(&v, XENIC), (false, DecisionReason::NotLogged));
}

#[test]
fn read_only_undecided_aborts() {
    let mut e = TxEvidence::default();
    e.add_coordinator(coord(CoordOutcome::Undecided, 0));
    assert_eq!(e.decide(&view(), XENIC), (false, DecisionReason::NotLogged));
}

#[test]
fn a_live_coordinator_that_let_go_of_a_transaction_aborts_it() {
    // Every surviving replica holds the LOG (rule 4 would commit), but
    // its coordinator, node 0, is live and no longer holds it.
    let mut e = TxEvidence::default();
    for (shard, holder) in [(0, 0), (0, 1), (1, 1)] {
        e.add_record(holder, rec(shard, RecordKind::Log, 0b11));
    }
    let by = |node: NodeId| TxId::new(node, 0, 7);
    assert_eq!(
        e.decide_tx(by(0), &view(), XENIC),
        (false, DecisionReason::CoordinatorForgot)
    );
    assert_eq!(
        e.decide_tx(by(2), &view(), XENIC),
        (true, DecisionReason::EveryReplicaLogged),
        "a crashed coordinator's transaction goes by the records"
    );
    e.add_coordinator(coord(CoordOutcome::Commit, 0b11));
    assert_eq!(
        e.decide_tx(by(0), &view(), XENIC),
        (true, DecisionReason::CoordinatorDecided)
    );
}

#[test]
fn evidence_set_is_bounded() {
    let mut s = EvidenceSet::new();
    // Coordinated by node 2, which crashed.
    let r = |generation: u32| RecordEvidence {
        tx_id: TxId::new(2, 0, generation),
        ..rec(1, RecordKind::Log, 0b10)
    };
    assert!(s.add(1, &[], &[r(1), r(2)], 2));
    assert!(s.add(1, &[], &[r(2)], 2), "a known transaction still fits");
    assert!(!s.add(1, &[], &[r(3)], 2));
    assert_eq!(s.len(), 2);
    assert_eq!(
        s.decide_all(&view(), XENIC).collect::<Vec<_>>(),
        vec![(TxId::new(2, 0, 1), true), (TxId::new(2, 0, 2), true)]
    );
}

/// Dnl-4/2's rule (`dnl4::decide`, TLA `Dnl4Decide`) and Dnl-1's
/// (`dnl1::decide`, `Dnl1Decide`) over every combination of records at the
/// surviving (shard, replica) pairs of [`view`], checked against the rules
/// written out again; the transaction's coordinator crashed.
#[test]
fn dnl_rules_exhaustive_over_two_shards() {
    // Per surviving (shard, holder): nothing, a Lock with values, a Lock
    // marker (keys locked, no value), a REPL, a COMMIT, an ABORT.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Held {
        None,
        LockValues,
        LockMarker,
        Repl,
        Commit,
        Abort,
    }
    let kinds = [
        Held::None,
        Held::LockValues,
        Held::LockMarker,
        Held::Repl,
        Held::Commit,
        Held::Abort,
    ];
    let slots = [(0u16, 0u16), (0, 1), (1, 1)];
    let tx = TxId::new(2, 0, 1);
    let (mut commits, mut aborts) = (0, 0);
    for rule in [Evidence::Records, Evidence::AllLocked] {
        for combo in 0..kinds.len().pow(slots.len() as u32) {
            let hs: Vec<_> = (0..slots.len())
                .map(|i| kinds[combo / kinds.len().pow(i as u32) % kinds.len()])
                .collect();
            let mut e = TxEvidence::default();
            for (&(shard, holder), h) in slots.iter().zip(&hs) {
                let r = |kind| RecordEvidence {
                    tx_id: tx,
                    ..rec(shard, kind, 0b11)
                };
                let kinds: &[RecordKind] = match h {
                    Held::None => &[],
                    Held::LockValues => &[RecordKind::Lock, RecordKind::Log],
                    Held::LockMarker => &[RecordKind::Lock],
                    Held::Repl => &[RecordKind::Repl],
                    Held::Commit => &[RecordKind::Commit],
                    Held::Abort => &[RecordKind::Abort],
                };
                kinds.iter().for_each(|&k| e.add_record(holder, r(k)));
            }
            let any = |h| hs.contains(&h);
            let every = |ok: &dyn Fn(Held) -> bool| hs.iter().all(|&h| ok(h));
            let want = if any(Held::Commit) {
                true
            } else if any(Held::Abort) {
                false
            } else {
                match rule {
                    Evidence::Records => {
                        any(Held::Repl) && every(&|h| matches!(h, Held::LockValues | Held::Repl))
                    }
                    Evidence::AllLocked => {
                        every(&|h| matches!(h, Held::LockValues | Held::LockMarker))
                    }
                }
            };
            let (got, why) = e.decide_tx(tx, &view(), RecoveryRule::Dnl(rule));
            assert_eq!(got, want, "{rule:?}, records {hs:?}: {why:?}");
            if got {
                commits += 1;
            } else {
                aborts += 1;
            }
        }
    }
    assert!(commits > 0 && aborts > 0, "both outcomes are exercised");
}

/// Xenic OCC's rule 4 over the same LOG records commits where Dnl-4's
/// aborts: no REPL survived, so no commit was decided and an abort may have
/// been reported (the must-fail model `Dnl4ReplIgnored`).
#[test]
fn dnl4_needs_a_repl_where_xenic_needs_none() {
    let tx = TxId::new(2, 0, 1);
    let mut e = TxEvidence::default();
    for (shard, holder) in [(0, 0), (0, 1), (1, 1)] {
        let r = RecordEvidence {
            tx_id: tx,
            ..rec(shard, RecordKind::Log, 0b11)
        };
        e.add_record(holder, r);
    }
    let dnl4 = RecoveryRule::Dnl(Evidence::Records);
    assert_eq!(
        e.decide_tx(tx, &view(), dnl4),
        (false, DecisionReason::NotLogged)
    );
    assert_eq!(
        e.decide_tx(tx, &view(), XENIC),
        (true, DecisionReason::EveryReplicaLogged)
    );
    e.add_record(
        1,
        RecordEvidence {
            tx_id: tx,
            ..rec(1, RecordKind::Repl, 0b11)
        },
    );
    assert_eq!(
        e.decide_tx(tx, &view(), dnl4),
        (true, DecisionReason::DnlValuesHeld)
    );
}

#[test]
fn recovery_rule_follows_the_commit_protocol() {
    use crate::protocol::CommitProtocol;
    assert_eq!(
        RecoveryRule::of(CommitProtocol::XenicOcc),
        RecoveryRule::XenicOcc
    );
    for (p, e) in [
        (CommitProtocol::Dnl4, Evidence::Records),
        (CommitProtocol::Dnl2, Evidence::Records),
        (CommitProtocol::Dnl1, Evidence::AllLocked),
    ] {
        assert_eq!(RecoveryRule::of(p), RecoveryRule::Dnl(e));
    }
}

/// A Dnl-2 or Dnl-1 LOCK of a key only read names its shard, which the
/// Dnl-4/2 rule does not ask about: the written shards' values decide
/// (Dnl-2 micro seed 13 under crash aborted a reported commit when a read
/// key's LOCK made its shard count as written).
#[test]
fn a_lock_of_a_read_key_does_not_make_its_shard_written() {
    let tx = TxId::new(2, 0, 1);
    let r = |shard, kind| RecordEvidence {
        tx_id: tx,
        ..rec(shard, kind, 0b01)
    };
    let mut e = TxEvidence::default();
    // Shard 0 written: its survivors 0 and 1 hold values and a REPL; node
    // 1 locked a key only read in shard 1.
    e.add_record(0, r(0, RecordKind::Log));
    e.add_record(1, r(0, RecordKind::Repl));
    e.add_record(1, r(1, RecordKind::Lock));
    assert_eq!(e.write_shards, NodeMask(0b01));
    let dnl2 = RecoveryRule::Dnl(Evidence::Records);
    assert_eq!(
        e.decide_tx(tx, &view(), dnl2),
        (true, DecisionReason::DnlValuesHeld)
    );
}
