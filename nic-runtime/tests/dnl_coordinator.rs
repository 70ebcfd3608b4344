//! The coordinator's Dnl path (`protocol/coordinator/dnl.rs`;
//! `tla/DnlSkeleton.tla` `ExecDone` … `ReadableDone`) driven by hand at
//! node 0 of 3 (replication 2), its procedure writing one key at node 1 and
//! one at node 2, under each row. Dnl-4: Gets, then Lock at the primaries,
//! Replicate to the backups, Unlock at the lock holders, the commit
//! reported only at the Unlock acks, Readable to the backups, the slot free
//! only after their acks; an abort is reported at the refusal and unlocks
//! the nodes that locked. Dnl-2: Replicate to every replica, the commit
//! reported at its acks, Readable sent with Unlock. Dnl-1: Lock at every
//! replica, the commit reported at the Lock acks, an abort only after the
//! Unlock acks.

mod support;

use splitkv_layout::host_nic::{TxRequest, TxStatus};
use splitkv_layout::wire::{BodyWriter, MsgKind, NodeId, ReplyStatus};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, TxId};
use splitkv_nic::{CommitProtocol, Placement};
use support::coordinator::CoordinatorRig as Rig;

fn keys(placement: &Placement) -> Vec<Key> {
    let pick = |p: NodeId| {
        (0..)
            .map(|i| Key::new(0, i))
            .find(|k| placement.primary(k) == p)
            .unwrap()
    };
    vec![pick(1), pick(2)]
}

/// A Dnl-4 coordinator whose transaction has run its Gets and its
/// procedure (answered by both primaries): its Locks are the next messages.
fn started() -> (Rig, TxId) {
    started_with(CommitProtocol::Dnl4)
}

/// [`started`] under `protocol`.
fn started_with(protocol: CommitProtocol) -> (Rig, TxId) {
    let placement = Placement::new(3, 2).unwrap();
    let mut r = Rig::new(placement, keys(&placement));
    r.coord.set_commit_protocol(protocol);
    let req = TxRequest {
        req_id: 7,
        procedure: 0,
        args: b"",
    };
    r.coord.start(&mut r.io, &r.procs, &req);
    let gets = r.sent();
    assert_eq!(
        gets.iter().map(|g| (g.0, g.1)).collect::<Vec<_>>(),
        vec![(1, MsgKind::Get), (2, MsgKind::Get)],
        "one Get per primary"
    );
    let tx = gets[0].2;
    for (p, k) in [(1, keys(&placement)[0]), (2, keys(&placement)[1])] {
        let mut w = BodyWriter::new();
        w.begin_get_resp(tx, ReplyStatus::Ok, 1);
        w.push_item(&k, ObjectMeta::new(1, ObjectFlags::empty()), b"old");
        r.respond(p, &w);
    }
    (r, tx)
}

fn ack(r: &mut Rig, kind: MsgKind, tx: TxId, from: &[NodeId], status: ReplyStatus) {
    for &n in from {
        let mut w = BodyWriter::new();
        w.ack(kind, tx, status);
        r.respond(n, &w);
    }
}

/// Destinations of the messages sent since the last call, each of `kind`.
fn sent_to(r: &mut Rig, kind: MsgKind, tx: TxId) -> Vec<NodeId> {
    r.sent_kinds()
        .into_iter()
        .map(|(d, k, id)| {
            assert_eq!((k, id), (kind, tx));
            d
        })
        .collect()
}

#[test]
fn dnl4_commits_in_order_and_reports_at_the_unlock_acks() {
    let (mut r, tx) = started();
    assert_eq!(sent_to(&mut r, MsgKind::Lock, tx), vec![1, 2]);
    ack(&mut r, MsgKind::LockResp, tx, &[1, 2], ReplyStatus::Ok);
    // Every read is written: no validation; each key's backup is sent its value.
    let backups = sent_to(&mut r, MsgKind::Replicate, tx);
    assert!(!backups.is_empty());
    ack(&mut r, MsgKind::ReplicateAck, tx, &backups, ReplyStatus::Ok);
    assert_eq!(sent_to(&mut r, MsgKind::Unlock, tx), vec![1, 2]);
    assert!(
        r.coord.outcomes().is_empty(),
        "not reported before the Unlock acks"
    );
    ack(&mut r, MsgKind::UnlockAck, tx, &[1], ReplyStatus::Ok);
    assert!(r.coord.outcomes().is_empty());
    ack(&mut r, MsgKind::UnlockAck, tx, &[2], ReplyStatus::Ok);
    let outcome = r.coord.outcomes().pop_front().unwrap();
    assert_eq!((outcome.req_id, outcome.status), (7, TxStatus::Committed));
    assert_eq!(sent_to(&mut r, MsgKind::Readable, tx), backups);
    assert_eq!(
        r.coord.inflight(),
        1,
        "the slot waits for the Readable acks"
    );
    ack(&mut r, MsgKind::ReadableAck, tx, &backups, ReplyStatus::Ok);
    assert_eq!(r.coord.inflight(), 0);
    assert_eq!(r.coord.stats().committed, 1);
}

#[test]
fn a_refused_lock_is_reported_at_once_and_unlocks_the_holders() {
    let (mut r, tx) = started();
    assert_eq!(sent_to(&mut r, MsgKind::Lock, tx), vec![1, 2]);
    ack(&mut r, MsgKind::LockResp, tx, &[1], ReplyStatus::Ok);
    ack(
        &mut r,
        MsgKind::LockResp,
        tx,
        &[2],
        ReplyStatus::LockConflict,
    );
    let outcome = r.coord.outcomes().pop_front().unwrap();
    assert_eq!(
        outcome.status,
        TxStatus::LockConflict,
        "reported at the decision"
    );
    assert_eq!(
        sent_to(&mut r, MsgKind::Unlock, tx),
        vec![1],
        "only the node that locked"
    );
    assert_eq!(r.coord.inflight(), 1);
    ack(&mut r, MsgKind::UnlockAck, tx, &[1], ReplyStatus::Ok);
    assert_eq!(r.coord.inflight(), 0);
    assert!(r.sent().is_empty(), "no Readable after an abort");
}

/// The nodes holding a replica of either written key, in order.
fn replicas(r: &Rig) -> Vec<NodeId> {
    let p = r.io.placement;
    let ks = keys(&p);
    (0..3)
        .filter(|&n| ks.iter().any(|k| p.is_replica(n, k)))
        .collect()
}

/// The nodes that are a backup of either written key, in order.
fn backups(r: &Rig) -> Vec<NodeId> {
    let p = r.io.placement;
    let ks = keys(&p);
    (0..3)
        .filter(|&n| ks.iter().any(|k| p.backups(k).any(|b| b == n)))
        .collect()
}

/// Dnl-1 (`tla/Dnl1.tla`): Lock at every replica of the read and write
/// sets, the commit reported at the last Lock ack (one round trip), then
/// Unlock at every lock holder; no Replicate and no Readable.
#[test]
fn dnl1_locks_every_replica_and_reports_at_the_lock_acks() {
    let (mut r, tx) = started_with(CommitProtocol::Dnl1);
    let all = replicas(&r);
    assert_eq!(
        sent_to(&mut r, MsgKind::Lock, tx),
        all,
        "primaries and backups"
    );
    let (last, first) = all.split_last().unwrap();
    ack(&mut r, MsgKind::LockResp, tx, first, ReplyStatus::Ok);
    assert!(r.coord.outcomes().is_empty(), "every Lock ack first");
    ack(&mut r, MsgKind::LockResp, tx, &[*last], ReplyStatus::Ok);
    let outcome = r.coord.outcomes().pop_front().unwrap();
    assert_eq!(outcome.status, TxStatus::Committed, "after one round trip");
    assert_eq!(sent_to(&mut r, MsgKind::Unlock, tx), all);
    ack(&mut r, MsgKind::UnlockAck, tx, &all, ReplyStatus::Ok);
    assert_eq!(r.coord.inflight(), 0);
    assert!(r.sent().is_empty(), "Dnl-1 sends no Readable");
    let s = r.coord.stats();
    assert_eq!(s.commits_by_round_trips, [0, 1, 0, 0, 0]);
    assert_eq!(
        (s.lock_requests, s.read_only_lock_requests),
        (all.len() as u64, 0)
    );
}

/// Dnl-1's abort is reported only after the Unlock acks (the must-fail
/// model `Dnl1EarlyAbortReport`), with the refusal's reason.
#[test]
fn dnl1_reports_an_abort_after_the_unlock_acks() {
    let (mut r, tx) = started_with(CommitProtocol::Dnl1);
    let all = replicas(&r);
    assert_eq!(sent_to(&mut r, MsgKind::Lock, tx), all);
    let (refuser, lockers) = all.split_last().unwrap();
    ack(&mut r, MsgKind::LockResp, tx, lockers, ReplyStatus::Ok);
    ack(
        &mut r,
        MsgKind::LockResp,
        tx,
        &[*refuser],
        ReplyStatus::LockConflict,
    );
    assert!(r.coord.outcomes().is_empty(), "not at the decision");
    assert_eq!(sent_to(&mut r, MsgKind::Unlock, tx), lockers);
    let (last, first) = lockers.split_last().unwrap();
    ack(&mut r, MsgKind::UnlockAck, tx, first, ReplyStatus::Ok);
    assert!(r.coord.outcomes().is_empty(), "not before every Unlock ack");
    ack(&mut r, MsgKind::UnlockAck, tx, &[*last], ReplyStatus::Ok);
    let outcome = r.coord.outcomes().pop_front().unwrap();
    assert_eq!(outcome.status, TxStatus::LockConflict);
    assert_eq!(r.coord.inflight(), 0);
    assert_eq!(r.coord.stats().committed, 0);
}

/// Dnl-2 (`tla/Dnl2.tla`): Lock at the primaries, Replicate to every
/// replica, the commit reported at the Replicate acks (two round trips),
/// then Unlock at the primaries and Readable at the backups at once; the
/// slot is free once both are acknowledged, in either order.
#[test]
fn dnl2_reports_at_the_replicate_acks_and_sends_readable_with_unlock() {
    let (mut r, tx) = started_with(CommitProtocol::Dnl2);
    assert_eq!(sent_to(&mut r, MsgKind::Lock, tx), vec![1, 2]);
    ack(&mut r, MsgKind::LockResp, tx, &[1, 2], ReplyStatus::Ok);
    let all = replicas(&r);
    assert_eq!(
        sent_to(&mut r, MsgKind::Replicate, tx),
        all,
        "primaries too"
    );
    assert!(r.coord.outcomes().is_empty());
    ack(&mut r, MsgKind::ReplicateAck, tx, &all, ReplyStatus::Ok);
    let outcome = r.coord.outcomes().pop_front().unwrap();
    assert_eq!(outcome.status, TxStatus::Committed, "after two round trips");
    let mut unlocks = Vec::new();
    let mut readables = Vec::new();
    for (d, kind, id) in r.sent_kinds() {
        assert_eq!(id, tx);
        match kind {
            MsgKind::Unlock => unlocks.push(d),
            MsgKind::Readable => readables.push(d),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((unlocks, readables.clone()), (vec![1, 2], backups(&r)));
    ack(
        &mut r,
        MsgKind::ReadableAck,
        tx,
        &readables,
        ReplyStatus::Ok,
    );
    assert_eq!(r.coord.inflight(), 1, "the Unlock acks are still due");
    ack(&mut r, MsgKind::UnlockAck, tx, &[1, 2], ReplyStatus::Ok);
    assert_eq!(r.coord.inflight(), 0);
    assert!(r.sent().is_empty(), "Readable went out once");
    assert_eq!(r.coord.stats().commits_by_round_trips, [0, 0, 1, 0, 0]);
}

/// A Lock overdue at its phase deadline aborts the transaction
/// (`Unavailable`); the silent node may hold locks, so it is sent the
/// Unlock(abort) too. Dnl-1 reports that abort only after every Unlock
/// ack, with its reason; Dnl-4 at once.
#[test]
fn an_overdue_lock_is_reported_at_the_rows_abort_point() {
    use splitkv_nic::protocol::coordinator::PHASE_DEADLINE_NS_DEFAULT;
    for protocol in [CommitProtocol::Dnl1, CommitProtocol::Dnl4] {
        let (mut r, tx) = started_with(protocol);
        let locked = sent_to(&mut r, MsgKind::Lock, tx);
        let (silent, answered) = locked.split_last().unwrap();
        ack(&mut r, MsgKind::LockResp, tx, answered, ReplyStatus::Ok);
        r.io.now += PHASE_DEADLINE_NS_DEFAULT + 1;
        r.coord.check_deadlines(&mut r.io, &r.procs);
        assert_eq!(
            sent_to(&mut r, MsgKind::Unlock, tx),
            locked,
            "{protocol}: the silent node is unlocked too"
        );
        let early = r.coord.outcomes().pop_front();
        if protocol == CommitProtocol::Dnl1 {
            assert_eq!(early, None, "Dnl-1: not before the Unlock acks");
            ack(&mut r, MsgKind::UnlockAck, tx, answered, ReplyStatus::Ok);
            assert!(r.coord.outcomes().is_empty());
            ack(&mut r, MsgKind::UnlockAck, tx, &[*silent], ReplyStatus::Ok);
            let outcome = r.coord.outcomes().pop_front().unwrap();
            assert_eq!(outcome.status, TxStatus::Unavailable);
            assert_eq!(outcome.result, b"a replica is unavailable");
        } else {
            let outcome = early.expect("Dnl-4: reported at the decision");
            assert_eq!(outcome.status, TxStatus::Unavailable);
            ack(&mut r, MsgKind::UnlockAck, tx, &locked, ReplyStatus::Ok);
        }
        assert_eq!(r.coord.inflight(), 0, "{protocol}");
    }
}

/// An Unlock refused `Busy` (the node is still checking the Lock a
/// deadline's abort did not wait for) goes to that node again, and the
/// slot is free only once it answered `Ok`: no lock stays held.
#[test]
fn an_unlock_refused_busy_is_sent_again() {
    use splitkv_nic::protocol::coordinator::PHASE_DEADLINE_NS_DEFAULT;
    let (mut r, tx) = started();
    assert_eq!(sent_to(&mut r, MsgKind::Lock, tx), vec![1, 2]);
    ack(&mut r, MsgKind::LockResp, tx, &[1], ReplyStatus::Ok);
    r.io.now += PHASE_DEADLINE_NS_DEFAULT + 1;
    r.coord.check_deadlines(&mut r.io, &r.procs);
    assert_eq!(sent_to(&mut r, MsgKind::Unlock, tx), vec![1, 2]);
    ack(&mut r, MsgKind::UnlockAck, tx, &[1], ReplyStatus::Ok);
    ack(&mut r, MsgKind::UnlockAck, tx, &[2], ReplyStatus::Busy);
    assert_eq!(sent_to(&mut r, MsgKind::Unlock, tx), vec![2], "again");
    assert_eq!(r.coord.inflight(), 1);
    ack(&mut r, MsgKind::UnlockAck, tx, &[2], ReplyStatus::Ok);
    assert_eq!(r.coord.inflight(), 0);
    let s = r.coord.stats();
    assert_eq!((s.unlock_resends, s.commit_refusals), (1, 0));
}
