//! The coordinator's Dnl-4 path (`protocol/coordinator/dnl.rs`;
//! `tla/DnlSkeleton.tla` `ExecDone` … `ReadableDone`) driven by hand at
//! node 0 of 3 (replication 2), its procedure writing one key at node 1 and
//! one at node 2: Gets, then Lock at the primaries, Replicate to the
//! backups, Unlock at the lock holders, the commit reported only at the
//! Unlock acks, Readable to the backups, the slot free only after their
//! acks; an abort is reported at the refusal and unlocks the nodes that
//! locked.

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
    let placement = Placement::new(3, 2).unwrap();
    let mut r = Rig::new(placement, keys(&placement));
    r.coord.set_commit_protocol(CommitProtocol::Dnl4);
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
