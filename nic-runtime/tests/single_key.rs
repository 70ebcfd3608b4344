//! Single-key calls (`protocol/single_key.rs`, `protocol/server/get_one.rs`)
//! driven by hand: the caller sends one request to the key's primary and
//! turns its one reply (or its absence) into the application's outcome;
//! the primary serves a GetOne from its index or host table, refuses a
//! locked key as a retryable lock conflict and a key it is not primary of
//! as unavailable, and coordinates a shipped write itself.

use splitkv_layout::app::txn::{Branch, GetResult, Op, Txn, TxnResult};
use splitkv_layout::host_nic::{TxRequest, TxStatus};
use splitkv_layout::wire::{Body, BodyWriter, MsgKind, NodeId, ReplyStatus};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, TxId, KEY_BYTES};
use splitkv_nic::protocol::coordinator::DEADLINE_SCAN_INTERVAL_NS;
use splitkv_nic::protocol::single_key::{
    SingleKey, GET_ONE_PROCEDURE_ID, WRITE_ONE_DEADLINE_PHASES, WRITE_ONE_PROCEDURE_ID,
};
use splitkv_nic::Placement;
use support::coordinator::CoordinatorRig;
use support::server::{ServerRig, PEER};

mod support;

/// The phase deadline of the caller under test (ns): longer than the
/// deadline scan's interval, so each check below scans.
const PHASE_NS: u64 = 2 * DEADLINE_SCAN_INTERVAL_NS;
/// Tickets of the caller under test.
const TICKETS: usize = 8;

/// A key whose primary is `node` under `placement`.
fn key_at(placement: &Placement, node: NodeId) -> Key {
    (0..)
        .map(|i| Key::new(3, i))
        .find(|k| placement.primary(k) == node)
        .unwrap()
}

/// Node 0 of 3 (replication 2) as caller, past first contact with its
/// peers (writes are shipped).
fn caller() -> (CoordinatorRig, SingleKey) {
    let (mut rig, single) = caller_before_first_contact();
    rig.hear_from(1);
    rig.hear_from(2);
    (rig, single)
}

/// Node 0 of 3 (replication 2) as caller, having heard from no peer.
fn caller_before_first_contact() -> (CoordinatorRig, SingleKey) {
    let rig = CoordinatorRig::new(Placement::new(3, 2).unwrap(), vec![]);
    (rig, SingleKey::new(TICKETS, PHASE_NS))
}

/// A write whose primary this node has not heard from yet is not shipped
/// (the session may address a process that never ran, which would leave
/// its outcome unknown): it is coordinated here, its EXECUTE going to the
/// primary; a get is sent all the same.
#[test]
fn before_first_contact_a_write_is_coordinated_here_and_a_get_sent() {
    let (mut rig, mut single) = caller_before_first_contact();
    let k = key_at(&rig.io.placement, 1);
    let args = put_args(&[k]);
    let put = TxRequest {
        req_id: 0,
        procedure: WRITE_ONE_PROCEDURE_ID,
        args: &args,
    };
    single.start(&mut rig.io, &mut rig.coord, &rig.procs, &put);
    let kinds: Vec<_> = rig.sent_kinds().iter().map(|s| (s.0, s.1)).collect();
    assert_eq!(kinds, vec![(1, MsgKind::Execute)]);
    assert_eq!(single.stats().write_one_coordinated_here, 1);
    assert_eq!(single.stats().write_one_sent, 0);
    let mut buf = Vec::new();
    single.start(
        &mut rig.io,
        &mut rig.coord,
        &rig.procs,
        &get_request(1, &k, &mut buf),
    );
    let kinds: Vec<_> = rig.sent_kinds().iter().map(|s| (s.0, s.1)).collect();
    assert_eq!(kinds, vec![(1, MsgKind::GetOne)]);
    // Once a packet of the primary's process arrived, writes are shipped.
    rig.hear_from(1);
    let put = TxRequest { req_id: 2, ..put };
    single.start(&mut rig.io, &mut rig.coord, &rig.procs, &put);
    let kinds: Vec<_> = rig.sent_kinds().iter().map(|s| (s.0, s.1)).collect();
    assert_eq!(kinds, vec![(1, MsgKind::WriteOne)]);
}

fn get_request<'a>(ticket: u64, key: &Key, buf: &'a mut Vec<u8>) -> TxRequest<'a> {
    buf.resize(KEY_BYTES, 0);
    key.encode(buf);
    TxRequest {
        req_id: ticket,
        procedure: GET_ONE_PROCEDURE_ID,
        args: buf,
    }
}

fn put_args(keys: &[Key]) -> Vec<u8> {
    let ops: Vec<Op<'_>> = keys
        .iter()
        .map(|k| Op::Put {
            key: *k,
            value: b"v",
        })
        .collect();
    let mut args = Vec::new();
    Txn::encode(&[], &ops, &[], &mut args).unwrap();
    args
}

fn outcome(rig: &mut CoordinatorRig) -> (u64, TxStatus, Vec<u8>) {
    let o = rig.coord.outcomes().pop_front().expect("an outcome");
    (o.req_id, o.status, o.result)
}

#[test]
fn a_get_one_is_one_request_and_its_reply_the_outcome() {
    let (mut rig, mut single) = caller();
    let k = key_at(&rig.io.placement, 2);
    let mut buf = Vec::new();
    let req = get_request(5, &k, &mut buf);
    single.start(&mut rig.io, &mut rig.coord, &rig.procs, &req);
    let sent = rig.sent_kinds();
    let [(2, MsgKind::GetOne, id)] = sent[..] else {
        panic!("one GetOne to the primary expected: {sent:?}");
    };
    assert_eq!(single.inflight(), 1);
    // A reply from a node that is not the primary, or of another
    // generation, is stale.
    let mut w = BodyWriter::new();
    w.begin_get_one_resp(id, ReplyStatus::Ok);
    w.push_item(&k, ObjectMeta::new(4, ObjectFlags::empty()), b"val");
    let body = Body::decode(w.kind(), w.bytes()).unwrap();
    single.on_reply(&rig.io, &mut rig.coord, 1, &body);
    let other = TxId::new(0, id.slot(), id.generation() + 1);
    let mut w2 = BodyWriter::new();
    w2.begin_get_one_resp(other, ReplyStatus::Ok);
    let stale = Body::decode(w2.kind(), w2.bytes()).unwrap();
    single.on_reply(&rig.io, &mut rig.coord, 2, &stale);
    assert_eq!(single.stats().stale_replies, 2);
    assert!(rig.coord.outcomes().is_empty());
    single.on_reply(&rig.io, &mut rig.coord, 2, &body);
    let (ticket, status, result) = outcome(&mut rig);
    assert_eq!((ticket, status), (5, TxStatus::Committed));
    let r = TxnResult::decode(&result).unwrap();
    assert_eq!(r.branch(), Branch::Success);
    assert_eq!(
        r.gets().collect::<Vec<_>>(),
        vec![GetResult::Found {
            version: 4,
            value: b"val"
        }]
    );
    single.on_reply(&rig.io, &mut rig.coord, 2, &body);
    assert!(
        rig.coord.outcomes().is_empty(),
        "a duplicate reply ends nothing"
    );
    assert_eq!(single.inflight(), 0);
}

#[test]
fn a_locked_key_is_a_retryable_conflict_and_an_absent_key_not_found() {
    let (mut rig, mut single) = caller();
    let k = key_at(&rig.io.placement, 1);
    let mut buf = Vec::new();
    for (ticket, status) in [(0, ReplyStatus::LockConflict), (1, ReplyStatus::Ok)] {
        let req = get_request(ticket, &k, &mut buf);
        single.start(&mut rig.io, &mut rig.coord, &rig.procs, &req);
        let [(1, MsgKind::GetOne, id)] = rig.sent_kinds()[..] else {
            panic!("one GetOne");
        };
        let mut w = BodyWriter::new();
        w.begin_get_one_resp(id, status);
        if status.is_ok() {
            w.push_item(&k, ObjectMeta(ObjectFlags::DELETED.bits()), b"");
        }
        let body = Body::decode(w.kind(), w.bytes()).unwrap();
        single.on_reply(&rig.io, &mut rig.coord, 1, &body);
    }
    let (_, locked, _) = outcome(&mut rig);
    assert_eq!(locked, TxStatus::LockConflict);
    assert!(locked.is_conflict(), "retryable");
    let (_, absent, result) = outcome(&mut rig);
    assert_eq!(absent, TxStatus::Committed);
    let r = TxnResult::decode(&result).unwrap();
    assert_eq!(r.gets().collect::<Vec<_>>(), vec![GetResult::NotFound]);
}

#[test]
fn unanswered_calls_end_unavailable_or_unknown_at_their_deadlines() {
    let (mut rig, mut single) = caller();
    let k = key_at(&rig.io.placement, 1);
    let mut buf = Vec::new();
    let req = get_request(0, &k, &mut buf);
    single.start(&mut rig.io, &mut rig.coord, &rig.procs, &req);
    let args = put_args(&[k]);
    let put = TxRequest {
        req_id: 1,
        procedure: WRITE_ONE_PROCEDURE_ID,
        args: &args,
    };
    single.start(&mut rig.io, &mut rig.coord, &rig.procs, &put);
    let kinds: Vec<_> = rig.sent_kinds().iter().map(|s| (s.0, s.1)).collect();
    assert_eq!(kinds, vec![(1, MsgKind::GetOne), (1, MsgKind::WriteOne)]);
    rig.io.now = PHASE_NS + 1;
    assert!(single.check_deadlines(&rig.io, &mut rig.coord, 0));
    assert_eq!(
        outcome(&mut rig).1,
        TxStatus::Unavailable,
        "a get wrote nothing"
    );
    assert!(rig.coord.outcomes().is_empty(), "the write waits longer");
    rig.io.now = PHASE_NS * WRITE_ONE_DEADLINE_PHASES + 1;
    assert!(single.check_deadlines(&rig.io, &mut rig.coord, 0));
    assert_eq!(
        outcome(&mut rig).1,
        TxStatus::Unknown,
        "the write may commit"
    );
    // A failed primary ends a call at once.
    let req = get_request(2, &k, &mut buf);
    single.start(&mut rig.io, &mut rig.coord, &rig.procs, &req);
    assert!(single.check_deadlines(&rig.io, &mut rig.coord, 1 << 1));
    assert_eq!(
        outcome(&mut rig),
        (
            2,
            TxStatus::Unavailable,
            b"no answer from the key's primary".to_vec()
        )
    );
    assert_eq!(single.stats().given_up, 3);
    assert_eq!(single.inflight(), 0);
}

#[test]
fn arguments_that_name_no_single_key_are_rejected_before_anything_is_sent() {
    let (mut rig, mut single) = caller();
    let placement = rig.io.placement;
    let (a, b) = (key_at(&placement, 1), key_at(&placement, 2));
    let two = put_args(&[a, b]);
    let bad_get = [1u8; 3];
    let reqs = [
        (GET_ONE_PROCEDURE_ID, &bad_get[..]),
        (WRITE_ONE_PROCEDURE_ID, &two[..]),
        (WRITE_ONE_PROCEDURE_ID, &bad_get[..]),
    ];
    for (i, (procedure, args)) in reqs.into_iter().enumerate() {
        let req = TxRequest {
            req_id: i as u64,
            procedure,
            args,
        };
        single.start(&mut rig.io, &mut rig.coord, &rig.procs, &req);
        assert_eq!(outcome(&mut rig).1, TxStatus::Rejected, "request {i}");
    }
    assert!(rig.sent_kinds().is_empty());
    assert_eq!(single.stats().rejected, 3);
}

#[test]
fn a_shipped_write_is_coordinated_at_the_primary_and_answered_with_its_outcome() {
    // Node 0 is the primary here; the caller is node 2.
    let (mut rig, mut single) = caller();
    let k = key_at(&rig.io.placement, 0);
    let args = put_args(&[k]);
    let id = TxId::new(2, 3, 7);
    let procs = &rig.procs;
    single.on_write_one(&mut rig.io, &mut rig.coord, procs, false, 2, id, &args);
    assert_eq!(single.stats().write_one_refused, 1, "not serving: refused");
    single.on_write_one(&mut rig.io, &mut rig.coord, procs, true, 2, id, &args);
    // In destination order: its own EXECUTE (loopback), then the refusal.
    let sent = rig.sent_kinds();
    let [(0, MsgKind::Execute, tx), refusal] = sent[..] else {
        panic!("an EXECUTE of the primary's own transaction: {sent:?}");
    };
    assert_eq!(refusal, (2, MsgKind::WriteOneResp, id));
    assert_eq!(tx.coordinator(), 0, "coordinated by the primary");
    assert_eq!(rig.coord.stats().started, 1);
    // Its EXECUTE is refused (a lock conflict): the outcome goes to the
    // caller, not to a client of this node.
    let mut w = BodyWriter::new();
    w.begin_execute_resp(tx, ReplyStatus::LockConflict);
    rig.respond(0, &w);
    assert!(single.reply_forwarded(&mut rig.io, &mut rig.coord));
    assert!(rig.coord.outcomes().is_empty());
    rig.io.net.seal();
    let mut replies = Vec::new();
    for p in rig.io.net.batcher_mut().backlogs_mut()[2].drain(..) {
        for m in splitkv_layout::wire::decode_packet(&p).unwrap().1 {
            if let Body::WriteOneResp { tx_id, status, .. } = m.unwrap().1 {
                replies.push((tx_id, status));
            }
        }
    }
    assert_eq!(replies, vec![(id, TxStatus::LockConflict)]);
    assert_eq!(single.inflight(), 0);
}

/// Node 0 of 2 (replication 2) as the primary serving GetOnes from [`PEER`].
fn primary() -> ServerRig {
    ServerRig::new(Placement::new(2, 2).unwrap())
}

fn get_replies(rig: &mut ServerRig) -> Vec<(ReplyStatus, Option<ObjectMeta>)> {
    rig.replies_with(|b| match b {
        Body::GetOneResp { status, items, .. } => (status, items.iter().next().map(|i| i.meta)),
        other => panic!("a GetOne reply expected, got {other:?}"),
    })
}

#[test]
fn the_primary_refuses_a_locked_key_and_a_key_it_is_not_primary_of() {
    let mut rig = primary();
    let mine = key_at(&rig.io.placement, 0);
    let theirs = key_at(&rig.io.placement, 1);
    let id = TxId::new(PEER, 0, 1);
    assert!(rig.index.try_lock(mine, TxId::new(PEER, 9, 1)));
    rig.server
        .get_one(&mut rig.io, &mut rig.index, PEER, id, mine);
    rig.server
        .get_one(&mut rig.io, &mut rig.index, PEER, id, theirs);
    assert_eq!(
        get_replies(&mut rig),
        vec![
            (ReplyStatus::LockConflict, None),
            (ReplyStatus::Unavailable, None)
        ]
    );
    let s = rig.server.stats();
    assert_eq!((s.get_ones, s.get_one_locked), (2, 1));
    assert_eq!(rig.server.inflight(), 0, "refusals take no slot");
}

#[test]
fn the_primary_reads_an_unlocked_key_and_takes_no_lock() {
    let mut rig = primary();
    let k = key_at(&rig.io.placement, 0);
    let id = TxId::new(PEER, 0, 1);
    rig.server.get_one(&mut rig.io, &mut rig.index, PEER, id, k);
    rig.pump();
    let replies = get_replies(&mut rig);
    let [(ReplyStatus::Ok, Some(meta))] = replies[..] else {
        panic!("one answer with the key's metadata: {replies:?}");
    };
    assert!(
        meta.flags().contains(ObjectFlags::DELETED),
        "absent in an empty table"
    );
    assert_eq!(rig.index.lock_holder(&k), None);
    assert_eq!(rig.server.inflight(), 0);
}
