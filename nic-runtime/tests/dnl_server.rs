//! The Dnl skeleton's server actions (`protocol/server/dnl.rs`,
//! `dnl_steps.rs`; `tla/DnlSkeleton.tla` `Read`, `Lock`, `Replicate`,
//! `Unlock`, `Readable`) driven request by request at node 0 of 2
//! (replication 2: node 0 is the primary of some keys and a backup of the
//! others): Get answers values even when locked or not READABLE; Lock is
//! no-wait, checks versions and keeps the values pending; Unlock installs
//! or drops them; Replicate lowers READABLE at a backup and Readable
//! installs and raises it; every step is idempotent, and bad or late
//! requests get typed refusals.

mod support;

use splitkv_layout::log_record::LogKind;
use splitkv_layout::wire::{Body, BodyWriter, NodeId, NodeMask, ReplyStatus};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, TxId};
use splitkv_nic::Placement;
use support::server::ServerRig as Rig;

use ReplyStatus::{LockConflict, Malformed, Ok as OK, ValidationFailed};

/// A reply, decoded and owned.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    /// Status, clean bits, (key, version, value) per item.
    Get(ReplyStatus, u64, Vec<(Key, u64, Vec<u8>)>),
    Lock(ReplyStatus),
    Replicate(ReplyStatus),
    Unlock(ReplyStatus),
    Readable(ReplyStatus),
}

fn rig() -> Rig {
    Rig::new(Placement::new(2, 2).unwrap())
}

impl Rig {
    fn request(&mut self, w: &BodyWriter) -> Vec<Reply> {
        self.deliver(w);
        self.pump();
        self.replies_with(|body| match body {
            Body::GetResp {
                status,
                clean,
                items,
                ..
            } => Reply::Get(
                status,
                clean,
                items
                    .iter()
                    .map(|i| (i.key, i.meta.version(), i.value.to_vec()))
                    .collect(),
            ),
            Body::LockResp { status, .. } => Reply::Lock(status),
            Body::ReplicateAck { status, .. } => Reply::Replicate(status),
            Body::UnlockAck { status, .. } => Reply::Unlock(status),
            Body::ReadableAck { status, .. } => Reply::Readable(status),
            other => panic!("not a Dnl reply: {other:?}"),
        })
    }

    /// Records appended to the host log since the last call: (kind,
    /// transaction, key, version, value).
    fn logged(&mut self) -> Vec<(LogKind, TxId, Key, u64, Vec<u8>)> {
        self.logged_with(|r| (r.kind, r.tx_id, r.key, r.meta.version(), r.value.to_vec()))
    }

    /// The one Get of `key` by a transaction of its own: (clean, version, value).
    fn get(&mut self, key: Key) -> (bool, u64, Vec<u8>) {
        let mut w = BodyWriter::new();
        w.begin_get(id(900));
        w.push_get_key(&key);
        match self.request(&w).as_slice() {
            [Reply::Get(OK, clean, items)] if items.len() == 1 => {
                (clean & 1 == 1, items[0].1, items[0].2.clone())
            }
            other => panic!("Get answered {other:?}"),
        }
    }
}

/// Transaction `n`, each in a coordinator slot of its own (node 1).
fn id(n: usize) -> TxId {
    TxId::new(1, n, 1)
}

fn v(version: u64) -> ObjectMeta {
    ObjectMeta::new(version, ObjectFlags::empty())
}

/// A key whose primary is `node` (the `nth` such key).
fn key_at(node: NodeId, nth: usize) -> Key {
    let p = Placement::new(2, 2).unwrap();
    (0..)
        .map(|i| Key::new(0, i))
        .filter(|k| p.primary(k) == node)
        .nth(nth)
        .unwrap()
}

fn lock(tx: TxId, reads: &[(Key, u64)], items: &[(Key, u64, &[u8])]) -> BodyWriter {
    let mut w = BodyWriter::new();
    w.begin_lock(tx, NodeMask(0b01));
    reads.iter().for_each(|(k, ver)| w.push_version(k, *ver));
    items
        .iter()
        .for_each(|(k, ver, val)| w.push_item(k, v(*ver), val));
    w
}

fn unlock(tx: TxId, commit: bool, keys: &[Key], items: &[(Key, u64, &[u8])]) -> BodyWriter {
    let mut w = BodyWriter::new();
    w.begin_unlock(tx, commit);
    keys.iter().for_each(|k| w.push_unlock_key(k));
    items
        .iter()
        .for_each(|(k, ver, val)| w.push_item(k, v(*ver), val));
    w
}

fn replicate(tx: TxId, items: &[(Key, u64, &[u8])]) -> BodyWriter {
    let mut w = BodyWriter::new();
    w.begin_replicate(tx, NodeMask(0b11));
    items
        .iter()
        .for_each(|(k, ver, val)| w.push_item(k, v(*ver), val));
    w
}

fn readable(tx: TxId, items: &[(Key, u64, &[u8])]) -> BodyWriter {
    let mut w = BodyWriter::new();
    w.begin_readable(tx);
    items
        .iter()
        .for_each(|(k, ver, val)| w.push_item(k, v(*ver), val));
    w
}

/// Commits `value` at version `ver` of `key` (primary here) through Lock
/// and Unlock by transaction `tx`.
fn commit(r: &mut Rig, tx: TxId, key: Key, ver: u64, value: &[u8]) {
    let item = [(key, ver, value)];
    assert_eq!(
        r.request(&lock(tx, &[(key, ver - 1)], &item)),
        vec![Reply::Lock(OK)]
    );
    assert_eq!(
        r.request(&unlock(tx, true, &[], &item)),
        vec![Reply::Unlock(OK)]
    );
    r.logged();
}

/// TLA `Lock` then `Unlock` commit: the lock is taken no-wait with the
/// version checked, the value is a pending LOG record invisible to Gets
/// until Unlock installs it with a COMMIT record and releases the lock; a
/// retransmitted Unlock is answered `Ok` again and changes nothing.
#[test]
fn lock_keeps_values_pending_until_unlock_commits_them() {
    let mut r = rig();
    let (a, b) = (key_at(0, 0), key_at(0, 1));
    let t = id(1);
    let w = lock(t, &[(a, 0), (b, 0)], &[(a, 1, b"new")]);
    assert_eq!(r.request(&w), vec![Reply::Lock(OK)]);
    assert_eq!(r.index.lock_holder(&a), Some(t));
    assert_eq!(r.index.lock_holder(&b), Some(t));
    assert_eq!(
        r.logged(),
        vec![(LogKind::Log, t, a, 1, b"new".to_vec())],
        "the value is a pending record"
    );
    assert_eq!(
        r.get(a),
        (false, 0, vec![]),
        "a locked key's value and version come back, not clean, the pending value unseen"
    );
    let w = unlock(t, true, &[b], &[(a, 1, b"new")]);
    assert_eq!(r.request(&w), vec![Reply::Unlock(OK)]);
    assert_eq!(
        r.logged().iter().map(|l| (l.0, l.1)).collect::<Vec<_>>(),
        vec![(LogKind::Commit, t)]
    );
    assert_eq!(
        (r.index.lock_holder(&a), r.index.lock_holder(&b)),
        (None, None)
    );
    assert_eq!(r.get(a), (true, 1, b"new".to_vec()), "installed at Unlock");
    assert_eq!(r.request(&w), vec![Reply::Unlock(OK)], "idempotent");
    assert!(r.logged().is_empty(), "a retransmission appends nothing");
    let late = lock(t, &[(a, 1)], &[]);
    assert_eq!(
        r.request(&late),
        vec![Reply::Lock(Malformed)],
        "finished here"
    );
    assert_eq!(r.index.lock_holder(&a), None);
}

/// TLA `Lock` refusals: a key held by another transaction (no-wait: nothing
/// stays locked) and a version changed since it was read (the locks taken
/// are released); `Unlock` abort drops the pending values with an ABORT
/// record.
#[test]
fn lock_refuses_held_keys_and_changed_versions_and_abort_drops_values() {
    let mut r = rig();
    let (a, b, c) = (key_at(0, 0), key_at(0, 1), key_at(0, 2));
    commit(&mut r, id(1), c, 1, b"c1");
    let holder = id(2);
    assert_eq!(
        r.request(&lock(holder, &[(a, 0)], &[(a, 1, b"x")])),
        vec![Reply::Lock(OK)]
    );
    let t = id(3);
    assert_eq!(
        r.request(&lock(t, &[(b, 0), (a, 0)], &[])),
        vec![Reply::Lock(LockConflict)]
    );
    assert_eq!(r.index.lock_holder(&b), None, "all or nothing");
    let stale = id(4);
    assert_eq!(
        r.request(&lock(stale, &[(b, 0), (c, 0)], &[(c, 1, b"stale")])),
        vec![Reply::Lock(ValidationFailed)],
        "c is at version 1 now"
    );
    assert_eq!(
        (r.index.lock_holder(&b), r.index.lock_holder(&c)),
        (None, None)
    );
    assert_eq!(r.server.stats().lock_conflicts, 1);
    assert_eq!(r.server.stats().validation_failures, 1);
    r.logged();
    let w = unlock(holder, false, &[], &[(a, 1, b"x")]);
    assert_eq!(r.request(&w), vec![Reply::Unlock(OK)]);
    assert_eq!(
        r.logged().iter().map(|l| (l.0, l.1)).collect::<Vec<_>>(),
        vec![(LogKind::Abort, holder)]
    );
    assert_eq!(r.index.lock_holder(&a), None);
    assert_eq!(r.get(a), (true, 0, vec![]), "dropped, never installed");
}

/// An abort reaching a node where the transaction locked nothing is
/// answered at once and finishes it there: a Lock arriving later (reordered)
/// is refused, so no lock is left with nobody to release it.
#[test]
fn an_abort_before_the_lock_fences_the_late_lock() {
    let mut r = rig();
    let a = key_at(0, 0);
    let t = id(1);
    assert_eq!(
        r.request(&unlock(t, false, &[a], &[])),
        vec![Reply::Unlock(OK)]
    );
    assert_eq!(
        r.request(&lock(t, &[(a, 0)], &[])),
        vec![Reply::Lock(Malformed)]
    );
    assert_eq!(r.index.lock_holder(&a), None);
    assert!(r.logged().is_empty());
    assert_eq!(r.server.stats().late_requests, 1);
}

/// TLA `Replicate` at a backup then `Readable`: the value is a pending
/// record, READABLE is lowered (Gets answer the old value, not clean),
/// then Readable installs it, appends COMMIT and raises READABLE; both are
/// idempotent.
#[test]
fn replicate_lowers_readable_and_readable_installs_and_raises_it() {
    let mut r = rig();
    let k = key_at(1, 0); // node 0 is a backup of k
    let t = id(1);
    let item = [(k, 1, &b"repl"[..])];
    assert_eq!(r.request(&replicate(t, &item)), vec![Reply::Replicate(OK)]);
    assert!(!r.index.is_readable(&k));
    assert_eq!(r.logged(), vec![(LogKind::Log, t, k, 1, b"repl".to_vec())]);
    assert_eq!(
        r.get(k),
        (false, 0, vec![]),
        "the pending value is not visible"
    );
    assert_eq!(r.request(&replicate(t, &item)), vec![Reply::Replicate(OK)]);
    assert!(
        r.logged().is_empty(),
        "a retransmitted Replicate appends nothing"
    );
    assert_eq!(r.request(&readable(t, &item)), vec![Reply::Readable(OK)]);
    assert!(r.index.is_readable(&k));
    assert_eq!(
        r.logged().iter().map(|l| (l.0, l.1)).collect::<Vec<_>>(),
        vec![(LogKind::Commit, t)]
    );
    assert_eq!(r.get(k), (true, 1, b"repl".to_vec()));
    assert_eq!(r.request(&readable(t, &item)), vec![Reply::Readable(OK)]);
    assert!(
        r.logged().is_empty(),
        "a retransmitted Readable appends nothing"
    );
}

/// Readables of two transactions replicated to one key arrive in either
/// order: the newest version wins, and READABLE comes back up only with the
/// Readable of the transaction that lowered it last.
#[test]
fn readable_keeps_the_newest_version_and_the_last_lowering() {
    let mut r = rig();
    let k = key_at(1, 0);
    let (t1, t2) = (id(1), id(2));
    let (i1, i2) = ([(k, 1, &b"one"[..])], [(k, 2, &b"two"[..])]);
    assert_eq!(r.request(&replicate(t1, &i1)), vec![Reply::Replicate(OK)]);
    assert_eq!(r.request(&replicate(t2, &i2)), vec![Reply::Replicate(OK)]);
    assert_eq!(r.request(&readable(t2, &i2)), vec![Reply::Readable(OK)]);
    assert!(r.index.is_readable(&k), "t2 lowered it last");
    assert_eq!(r.request(&readable(t1, &i1)), vec![Reply::Readable(OK)]);
    assert_eq!(r.get(k), (true, 2, b"two".to_vec()), "never backwards");
}

/// A Dnl-2 primary's Replicate carries no value (its values came with its
/// Lock): a REPL marker, READABLE untouched.
#[test]
fn a_primary_replicate_without_values_is_a_marker() {
    let mut r = rig();
    let a = key_at(0, 0);
    let t = id(1);
    assert_eq!(
        r.request(&lock(t, &[(a, 0)], &[(a, 1, b"p")])),
        vec![Reply::Lock(OK)]
    );
    r.logged();
    assert_eq!(r.request(&replicate(t, &[])), vec![Reply::Replicate(OK)]);
    assert_eq!(
        r.logged().iter().map(|l| (l.0, l.1)).collect::<Vec<_>>(),
        vec![(LogKind::Repl, t)]
    );
    assert!(r.index.is_readable(&a));
}

/// Requests that break a rule get typed refusals, counted, and change
/// nothing: a commit by a transaction that holds no lock here, a Readable
/// with no REPL record here, a Lock writing a key it does not name, planted
/// metadata, a Get of a key this node does not replicate, and any request
/// of a superseded generation.
#[test]
fn broken_requests_are_refused_and_counted() {
    let placement = Placement::new(3, 1).unwrap();
    let mut r = Rig::new(placement);
    let mine = (0..)
        .map(|i| Key::new(0, i))
        .find(|k| placement.primary(k) == 0)
        .unwrap();
    let other = (0..)
        .map(|i| Key::new(0, i))
        .find(|k| placement.primary(k) != 0)
        .unwrap();
    let item = [(mine, 1, &b"x"[..])];
    assert_eq!(
        r.request(&unlock(id(1), true, &[], &item)),
        vec![Reply::Unlock(Malformed)]
    );
    assert_eq!(
        r.request(&readable(id(2), &item)),
        vec![Reply::Readable(Malformed)]
    );
    assert_eq!(
        r.request(&lock(id(3), &[], &item)),
        vec![Reply::Lock(Malformed)],
        "an item's key is among the keys locked"
    );
    let mut w = BodyWriter::new();
    w.begin_replicate(id(4), NodeMask(1));
    w.push_item(&mine, ObjectMeta::new(1, ObjectFlags::LOCKED), b"x");
    assert_eq!(r.request(&w), vec![Reply::Replicate(Malformed)]);
    let mut w = BodyWriter::new();
    w.begin_get(id(5));
    w.push_get_key(&other);
    assert_eq!(
        r.request(&w),
        vec![Reply::Get(ReplyStatus::Unavailable, 0, vec![])]
    );
    let newer = TxId::new(1, 6, 2);
    assert_eq!(
        r.request(&lock(newer, &[(mine, 0)], &[])),
        vec![Reply::Lock(OK)]
    );
    let older = TxId::new(1, 6, 1);
    assert_eq!(
        r.request(&replicate(older, &item)),
        vec![Reply::Replicate(Malformed)]
    );
    assert_eq!(
        r.request(&lock(older, &[(mine, 0)], &[])),
        vec![Reply::Lock(Malformed)]
    );
    let stats = r.server.stats();
    assert_eq!(stats.malformed, 5);
    assert_eq!(stats.late_requests, 2);
    assert_eq!(stats.dnl_requests, 8);
    assert_eq!(r.index.lock_holder(&mine), Some(newer));
    assert_eq!(
        r.logged().iter().map(|l| (l.0, l.1)).collect::<Vec<_>>(),
        vec![(LogKind::Lock, newer)],
        "only the valid Lock left a record (a marker: no value here)"
    );
}

/// Room for inserts (`server/room.rs`) is decided by the primary's Lock,
/// under its locks: absent keys past the shard's quota refuse the Lock with
/// `TableFull` and release its locks; a committed insert turns its
/// reservation into a key.
#[test]
fn a_lock_of_absent_keys_past_the_quota_is_refused_with_table_full() {
    let mut r = rig();
    let (a, b) = (key_at(0, 0), key_at(0, 1));
    r.server.room_mut().set_quota(1);
    commit(&mut r, id(1), a, 1, b"a");
    assert_eq!(r.server.room().count(), 1);
    assert_eq!(
        r.request(&lock(id(2), &[(b, 0)], &[(b, 1, b"b")])),
        vec![Reply::Lock(ReplyStatus::TableFull)]
    );
    assert_eq!(r.index.lock_holder(&b), None);
    assert_eq!(
        (r.server.room().reserved(), r.server.stats().table_full),
        (0, 1)
    );
    assert!(r.logged().is_empty(), "nothing appended");
}

/// An Unlock that overtakes its transaction's Lock here (the Lock's
/// versions still being read) is refused with `Busy`, never applied to a
/// half-taken lock; once the Lock is answered the Unlock goes through.
#[test]
fn an_unlock_during_its_lock_is_busy() {
    let mut r = rig();
    let a = key_at(0, 0);
    let t = id(1);
    r.deliver(&lock(t, &[(a, 0)], &[(a, 1, b"x")]));
    let w = unlock(t, false, &[], &[(a, 1, b"x")]);
    assert_eq!(
        r.request(&w),
        vec![Reply::Unlock(ReplyStatus::Busy), Reply::Lock(OK)],
        "refused at once, the Lock answered when its read completes"
    );
    assert_eq!(r.index.lock_holder(&a), Some(t));
    assert_eq!(r.request(&w), vec![Reply::Unlock(OK)]);
    assert_eq!(r.index.lock_holder(&a), None);
    assert_eq!(
        r.logged().iter().map(|l| l.0).collect::<Vec<_>>(),
        vec![LogKind::Log, LogKind::Abort]
    );
}

/// A request naming a transaction slot that does not exist (a coordinator
/// node or slot out of range) is refused with `Malformed`, counted as late,
/// and changes nothing; every step answers in its own kind.
#[test]
fn requests_of_slots_that_do_not_exist_are_refused() {
    use splitkv_nic::placement::NODES_MAX;
    use splitkv_nic::slots::SLOTS_PER_NODE;
    let mut r = rig();
    let (a, b) = (key_at(0, 0), key_at(1, 0));
    for bad in [
        TxId::new(NODES_MAX as NodeId, 0, 1),
        TxId::new(1, SLOTS_PER_NODE, 1),
    ] {
        assert_eq!(
            r.request(&lock(bad, &[(a, 0)], &[])),
            vec![Reply::Lock(Malformed)]
        );
        let item = [(b, 1, &b"x"[..])];
        assert_eq!(
            r.request(&replicate(bad, &item)),
            vec![Reply::Replicate(Malformed)]
        );
        assert_eq!(
            r.request(&unlock(bad, false, &[a], &[])),
            vec![Reply::Unlock(Malformed)]
        );
        assert_eq!(
            r.request(&readable(bad, &item)),
            vec![Reply::Readable(Malformed)]
        );
    }
    assert_eq!(r.server.stats().late_requests, 8);
    assert_eq!(r.index.lock_holder(&a), None);
    assert!(r.index.is_readable(&b));
    assert!(r.logged().is_empty());
}

/// Crash recovery's evidence of a Dnl transaction here
/// (`server/dnl_recovery.rs`): a lock holder reports a LOCK per shard it
/// locks and a value record per shard its Lock carried values of; a backup
/// a REPL and a value record per shard replicated. A recovery commit then
/// appends one COMMIT after the pending records, releases the locks and
/// raises READABLE; the coordinator's late Unlock and Replicate are
/// answered `Ok` and append nothing, and a Replicate this node never took
/// is refused as late.
#[test]
fn recovery_reads_dnl_records_and_commits_them_from_this_replica() {
    use splitkv_layout::wire::{RecordEvidence, RecordKind};
    let mut r = rig();
    let (a, b, c) = (key_at(0, 0), key_at(0, 1), key_at(1, 0));
    let t = id(3);
    let w = lock(t, &[(a, 0), (b, 0)], &[(a, 1, b"new")]);
    assert_eq!(r.request(&w), vec![Reply::Lock(OK)]);
    assert_eq!(
        r.request(&replicate(t, &[(c, 1, b"cee")])),
        vec![Reply::Replicate(OK)]
    );
    r.logged();
    assert!(!r.index.is_readable(&c));
    let mut ev: Vec<RecordEvidence> = Vec::new();
    assert_eq!(r.server.recovery_evidence(64, &mut ev), 0);
    let mut got: Vec<_> = ev.iter().map(|e| (e.tx_id, e.shard, e.kind)).collect();
    got.sort_by_key(|&(_, s, k)| (s, k as u8));
    assert_eq!(
        got,
        vec![
            (t, 0, RecordKind::Log),
            (t, 0, RecordKind::Lock),
            (t, 1, RecordKind::Log),
            (t, 1, RecordKind::Repl),
        ]
    );
    assert!(r.server.apply_recovered(&mut r.io, &mut r.index, t, true));
    r.pump();
    assert_eq!(
        r.logged().iter().map(|l| (l.0, l.1)).collect::<Vec<_>>(),
        vec![(LogKind::Commit, t)],
        "one COMMIT: the host installs this replica's own pending records"
    );
    assert_eq!(
        (r.index.lock_holder(&a), r.index.lock_holder(&b)),
        (None, None)
    );
    assert!(r.index.is_readable(&c));
    let mut ev = Vec::new();
    r.server.recovery_evidence(64, &mut ev);
    assert!(ev.iter().all(|e| e.kind == RecordKind::Commit), "{ev:?}");
    let late = unlock(t, true, &[b], &[(a, 1, b"new")]);
    assert_eq!(r.request(&late), vec![Reply::Unlock(OK)]);
    assert_eq!(
        r.request(&replicate(t, &[(c, 1, b"cee")])),
        vec![Reply::Replicate(OK)]
    );
    assert!(r.logged().is_empty(), "decided: nothing more is appended");
    // Lock holder only: decided by recovery before its Replicate arrived.
    let u = id(6);
    assert_eq!(
        r.request(&lock(u, &[(b, 0)], &[(b, 1, b"bee")])),
        vec![Reply::Lock(OK)]
    );
    assert!(r.server.apply_recovered(&mut r.io, &mut r.index, u, false));
    r.pump();
    r.logged();
    assert_eq!(
        r.request(&replicate(u, &[(c, 2, b"cee")])),
        vec![Reply::Replicate(Malformed)]
    );
    assert!(r.logged().is_empty() && r.index.is_readable(&c));
    assert!(!r.server.apply_recovered(&mut r.io, &mut r.index, t, true));
}

/// A recovery abort drops the pending records (one ABORT) and releases the
/// locks; a Lock still reading its versions when a recovery epoch begins
/// has no record, is dropped at once (its locks released) and ends without
/// an answer or a record.
#[test]
fn recovery_aborts_dnl_records_and_drops_unrecorded_locks() {
    let mut r = rig();
    let (a, b) = (key_at(0, 0), key_at(0, 1));
    let t = id(4);
    let w = lock(t, &[(a, 0)], &[(a, 1, b"new")]);
    assert_eq!(r.request(&w), vec![Reply::Lock(OK)]);
    r.logged();
    assert!(r.server.apply_recovered(&mut r.io, &mut r.index, t, false));
    r.pump();
    assert_eq!(
        r.logged().iter().map(|l| (l.0, l.1)).collect::<Vec<_>>(),
        vec![(LogKind::Abort, t)]
    );
    assert_eq!(r.index.lock_holder(&a), None);
    let u = id(5);
    r.deliver(&lock(u, &[(b, 0)], &[(b, 1, b"bee")]));
    assert_eq!(
        r.index.lock_holder(&b),
        Some(u),
        "locked, versions being read"
    );
    assert_eq!(r.server.drop_unrecorded_dnl_locks(&mut r.index), 1);
    assert_eq!(r.index.lock_holder(&b), None);
    r.pump();
    assert!(r.replies_with(|_| ()).is_empty(), "no answer");
    assert!(r.logged().is_empty(), "no record");
    assert_eq!(
        r.request(&lock(u, &[(b, 0)], &[])),
        vec![Reply::Lock(Malformed)],
        "finished here: a copy locks nothing"
    );
    assert_eq!(r.server.drop_unrecorded_dnl_locks(&mut r.index), 0);
}

/// Dnl-1's Locking at a backup (`tla/Dnl1.tla`: `lockAt = {"P", "B"}`):
/// the Lock takes the backup's lock no-wait and checks the version there,
/// keeps the value pending, and reserves no room (room is decided at the
/// primary: an absent key passes a full quota here); a Get at the locked
/// backup is not clean (GetOne refuses it); Unlock(commit) at the backup
/// installs the value with a COMMIT record and releases the lock.
#[test]
fn a_backup_lock_holder_installs_at_unlock_and_reserves_no_room() {
    let mut r = rig();
    let (b, c) = (key_at(1, 0), key_at(1, 1));
    r.server.room_mut().set_quota(0);
    let t = id(1);
    let w = lock(t, &[(b, 0), (c, 0)], &[(b, 1, b"dnl1")]);
    assert_eq!(r.request(&w), vec![Reply::Lock(OK)], "a backup locks");
    assert_eq!(r.index.lock_holder(&b), Some(t));
    assert_eq!(r.index.lock_holder(&c), Some(t));
    assert_eq!(r.server.room().reserved(), 0, "no room taken at a backup");
    assert_eq!(
        r.logged(),
        vec![(LogKind::Log, t, b, 1, b"dnl1".to_vec())],
        "the value is pending at the backup"
    );
    assert!(!r.get(b).0, "a locked backup is not clean");
    let w = unlock(t, true, &[c], &[(b, 1, b"dnl1")]);
    assert_eq!(r.request(&w), vec![Reply::Unlock(OK)]);
    assert_eq!(
        r.logged().iter().map(|l| (l.0, l.1)).collect::<Vec<_>>(),
        vec![(LogKind::Commit, t)]
    );
    assert_eq!(
        (r.index.lock_holder(&b), r.index.lock_holder(&c)),
        (None, None)
    );
    assert_eq!(r.get(b), (true, 1, b"dnl1".to_vec()), "installed at Unlock");
    let stale = lock(id(2), &[(b, 0)], &[]);
    assert_eq!(
        r.request(&stale),
        vec![Reply::Lock(ValidationFailed)],
        "the backup checks versions against its installed value"
    );
}

/// Dnl-2's Replicate at a node that is the primary of one written key (its
/// value came with Lock) and a backup of another: only the backup's value
/// travels and is kept pending, READABLE goes down on that key only, and
/// Readable installs it.
#[test]
fn a_dnl2_replicate_carries_only_the_backup_values() {
    let mut r = rig();
    let (a, b) = (key_at(0, 0), key_at(1, 0));
    let t = id(1);
    let w = lock(t, &[(a, 0)], &[(a, 1, b"p")]);
    assert_eq!(r.request(&w), vec![Reply::Lock(OK)]);
    r.logged();
    let w = replicate(t, &[(b, 1, b"bk")]);
    assert_eq!(r.request(&w), vec![Reply::Replicate(OK)]);
    assert_eq!(r.logged(), vec![(LogKind::Log, t, b, 1, b"bk".to_vec())]);
    assert!(r.index.is_readable(&a), "the primary's key stays readable");
    assert!(!r.index.is_readable(&b), "the backup's key is lowered");
    let w = unlock(t, true, &[], &[(a, 1, b"p")]);
    assert_eq!(r.request(&w), vec![Reply::Unlock(OK)]);
    let w = readable(t, &[(b, 1, b"bk")]);
    assert_eq!(r.request(&w), vec![Reply::Readable(OK)]);
    assert_eq!(r.get(a), (true, 1, b"p".to_vec()));
    assert_eq!(r.get(b), (true, 1, b"bk".to_vec()));
}
