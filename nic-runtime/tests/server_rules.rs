//! The server role (`nic-runtime/src/protocol/server.rs`) driven request by
//! request: read validation rejects a changed version and a locked key;
//! every request is answered, with the right reason (a rule the fuzz targets
//! check); a failing DMA engine finishes its requests and releases their locks;
//! COMMITs install only under their own locks and never move a version
//! backwards; metadata a peer plants is refused.

mod support;

use splitkv_layout::ring::ring_pair;
use splitkv_layout::wire::MESSAGE_SIZING_VALUE_BYTES;
use splitkv_layout::wire::{Body, BodyWriter, MsgKind, NodeId, ReplyStatus};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, Region, TxId};
use splitkv_nic::dma::local::LocalDma;
use splitkv_nic::dma::{DmaCompletion, DmaEngine, DmaError, DmaRead, HostMemoryError};
use splitkv_nic::net::batch::BatchError;
use splitkv_nic::net::stack::{Stack, StackConfig};
use splitkv_nic::protocol::server::{execute_resp_fits, SERVER_OPS_MAX};
use splitkv_nic::{Nanos, Placement};
use std::sync::Arc;
use support::server::{table_layout, ServerRig as Rig, MTU, PEER, VALUE_BYTES_MAX};

/// A reply, decoded and owned.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Execute(ReplyStatus, Vec<(Key, ObjectMeta)>),
    Validate(ReplyStatus),
    LogAck(ReplyStatus),
    CommitAck(ReplyStatus),
}

/// Node 0 of 2 (replication 1) over `dma`, its host log unread.
fn rig_with(dma: Box<dyn DmaEngine>, value_bytes_max: usize) -> Rig {
    Rig::with_dma(Placement::new(2, 1).unwrap(), dma, None, value_bytes_max)
}

/// A server over an empty host table (every uncached key is absent) and a
/// host log the test can read.
fn rig() -> Rig {
    Rig::new(Placement::new(2, 1).unwrap())
}

impl Rig {
    /// Delivers one request from [`PEER`], runs DMA to completion, and returns
    /// the replies sent.
    fn request(&mut self, w: &BodyWriter) -> Vec<Reply> {
        self.deliver(w);
        self.pump();
        self.replies()
    }

    fn replies(&mut self) -> Vec<Reply> {
        self.replies_with(|body| match body {
            Body::ExecuteResp { status, items, .. } => {
                Reply::Execute(status, items.iter().map(|i| (i.key, i.meta)).collect())
            }
            Body::ValidateResp { status, .. } => Reply::Validate(status),
            Body::LogAck { status, .. } => Reply::LogAck(status),
            Body::CommitAck { status, .. } => Reply::CommitAck(status),
            other => panic!("not a reply: {other:?}"),
        })
    }

    /// Records appended to the host log so far: (key, version, value).
    fn logged(&mut self) -> Vec<(Key, u64, Vec<u8>)> {
        self.logged_with(|r| (r.key, r.meta.version(), r.value.to_vec()))
    }

    fn cached_version(&self, key: &Key) -> Option<u64> {
        self.index.peek(key).map(|o| o.meta.version())
    }
}

fn k(i: u64) -> Key {
    Key::new(0, i)
}

/// Transaction `n` of a test as coordinators number them (`node | slot |
/// generation`): each its own coordinator slot, so none supersedes another
/// (a server refuses requests of an older generation of a slot).
fn id(n: u64) -> TxId {
    let n = n as usize;
    TxId::new(
        ((n / 1024) % 16) as NodeId,
        n % 1024,
        1 + (n / 16384) as u32,
    )
}

fn execute(tx: u64, reads: &[Key], locks: &[Key]) -> BodyWriter {
    let mut w = BodyWriter::new();
    w.begin_execute(id(tx));
    reads.iter().for_each(|k| w.push_read(k));
    locks.iter().for_each(|k| w.push_lock(k));
    w
}

fn validate(tx: u64, items: &[(Key, u64)]) -> BodyWriter {
    let mut w = BodyWriter::new();
    w.begin_validate(id(tx));
    items.iter().for_each(|(k, v)| w.push_version(k, *v));
    w
}

fn items(kind: MsgKind, tx: u64, items: &[(Key, ObjectMeta, &[u8])]) -> BodyWriter {
    let mut w = BodyWriter::new();
    w.begin_items(kind, id(tx));
    items.iter().for_each(|(k, m, v)| w.push_item(k, *m, v));
    w
}

fn v(version: u64) -> ObjectMeta {
    ObjectMeta::new(version, ObjectFlags::empty())
}

const OK: ReplyStatus = ReplyStatus::Ok;

/// Locks `key` for `tx` and commits `value` at `version` through the server.
fn commit(r: &mut Rig, tx: u64, key: Key, version: u64, value: &[u8]) {
    assert!(matches!(
        &r.request(&execute(tx, &[], &[key]))[..],
        [Reply::Execute(OK, _)]
    ));
    let c = items(MsgKind::Commit, tx, &[(key, v(version), value)]);
    assert_eq!(r.request(&c), vec![Reply::CommitAck(OK)]);
}

#[test]
fn validation_rejects_a_changed_version_and_a_locked_key() {
    let mut r = rig();
    let (a, b, c) = (k(1), k(2), k(3));
    commit(&mut r, 10, a, 3, b"three");
    // Cached (pinned) key: unchanged passes, changed fails.
    assert_eq!(
        r.request(&validate(11, &[(a, 3)])),
        vec![Reply::Validate(OK)]
    );
    commit(&mut r, 12, a, 4, b"four");
    assert_eq!(
        r.request(&validate(11, &[(a, 3)])),
        vec![Reply::Validate(ReplyStatus::ValidationFailed)]
    );
    // A key read from the host table by DMA (absent: version 0).
    assert_eq!(
        r.request(&validate(11, &[(b, 0)])),
        vec![Reply::Validate(OK)]
    );
    assert_eq!(
        r.request(&validate(11, &[(b, 1)])),
        vec![Reply::Validate(ReplyStatus::ValidationFailed)]
    );
    // A read-set key locked by another transaction: VALIDATE and EXECUTE say no.
    assert!(matches!(
        &r.request(&execute(13, &[], &[a]))[..],
        [Reply::Execute(OK, _)]
    ));
    assert_eq!(
        r.request(&validate(11, &[(a, 4)])),
        vec![Reply::Validate(ReplyStatus::ValidationFailed)]
    );
    assert_eq!(
        r.request(&execute(11, &[a, c], &[])),
        vec![Reply::Execute(ReplyStatus::LockConflict, vec![])]
    );
    // Its own lock is no conflict.
    assert_eq!(
        r.request(&validate(13, &[(a, 4)])),
        vec![Reply::Validate(OK)]
    );
    let s = r.server.stats();
    assert_eq!((s.validation_failures, s.lock_conflicts), (3, 1));
}

#[test]
fn duplicated_and_stale_commits_never_roll_the_cache_back() {
    let mut r = rig();
    let key = k(5);
    commit(&mut r, 20, key, 1, b"first");
    commit(&mut r, 21, key, 2, b"second");
    assert_eq!(r.logged().len(), 2);
    // The first COMMIT again (duplicated or late): its lock is gone.
    let dup = items(MsgKind::Commit, 20, &[(key, v(1), b"first")]);
    assert_eq!(
        r.request(&dup),
        vec![Reply::CommitAck(ReplyStatus::Malformed)]
    );
    // A COMMIT for a key another transaction holds.
    assert!(matches!(
        &r.request(&execute(22, &[], &[key]))[..],
        [Reply::Execute(OK, _)]
    ));
    let stale = items(MsgKind::Commit, 23, &[(key, v(3), b"stale")]);
    assert_eq!(
        r.request(&stale),
        vec![Reply::CommitAck(ReplyStatus::Malformed)]
    );
    assert_eq!(r.cached_version(&key), Some(2));
    assert_eq!(r.index.peek(&key).unwrap().value, b"second");
    assert!(r.logged().is_empty(), "refused COMMITs append nothing");
    assert_eq!(
        r.index.lock_holder(&key),
        Some(id(22)),
        "nor release another's lock"
    );
    assert!(r.server.fatal().is_none(), "a duplicate is not fatal");
    // A LOG (here of an older version) is logged pending, for the host to
    // apply at a decision; it changes nothing in the NIC cache (the commit point).
    let late = items(MsgKind::Log, 19, &[(key, v(1), b"late")]);
    assert_eq!(r.request(&late), vec![Reply::LogAck(OK)]);
    assert_eq!(r.cached_version(&key), Some(2));
    assert_eq!(r.index.peek(&key).unwrap().value, b"second");
}

#[test]
fn a_commit_duplicated_while_in_flight_is_answered_once_with_ok() {
    let mut r = rig();
    let key = k(8);
    assert!(matches!(
        &r.request(&execute(24, &[], &[key]))[..],
        [Reply::Execute(OK, _)]
    ));
    let c = items(MsgKind::Commit, 24, &[(key, v(1), b"once")]);
    let body = Body::decode(c.kind(), c.bytes()).unwrap();
    r.server.handle(&mut r.io, &mut r.index, PEER, &body);
    r.server.handle(&mut r.io, &mut r.index, PEER, &body);
    r.pump();
    assert_eq!(r.replies(), vec![Reply::CommitAck(OK)]);
    assert_eq!(r.logged().len(), 1);
    assert_eq!(r.cached_version(&key), Some(1));
}

#[test]
fn planted_metadata_bits_are_refused() {
    let mut r = rig();
    let key = k(6);
    for meta in [
        v(4).with_flags(ObjectFlags::LOCKED),
        // DELETED with a value (a tombstone has none).
        v(4).with_flags(ObjectFlags::DELETED),
        ObjectMeta(0),
    ] {
        let log = items(MsgKind::Log, 30, &[(key, meta, b"x")]);
        assert_eq!(
            r.request(&log),
            vec![Reply::LogAck(ReplyStatus::Malformed)],
            "{meta:?}"
        );
    }
    assert!(r.logged().is_empty());
    assert_eq!(r.cached_version(&key), None);
    assert_eq!(r.server.stats().malformed, 3);
    assert!(r.server.fatal().is_none());
}

#[test]
fn a_tombstone_commits_like_a_write_and_reads_as_absent_with_its_version() {
    let mut r = rig();
    let key = k(9);
    commit(&mut r, 50, key, 1, b"one");
    let tomb = v(2).with_flags(ObjectFlags::DELETED);
    assert_eq!(
        r.request(&items(MsgKind::Log, 51, &[(key, tomb, b"")])),
        vec![Reply::LogAck(OK)],
        "a LOG of a tombstone"
    );
    assert!(matches!(
        &r.request(&execute(52, &[], &[key]))[..],
        [Reply::Execute(OK, _)]
    ));
    let c = items(MsgKind::Commit, 52, &[(key, tomb, b"")]);
    assert_eq!(r.request(&c), vec![Reply::CommitAck(OK)]);
    assert_eq!(r.index.peek(&key).map(|o| o.meta), Some(tomb));
    assert!(r.index.peek(&key).unwrap().value.is_empty());
    assert_eq!(
        r.request(&execute(53, &[key], &[])),
        vec![Reply::Execute(OK, vec![(key, tomb)])],
        "read back absent, at the tombstone's version"
    );
    assert_eq!(
        r.request(&validate(54, &[(key, 1)])),
        vec![Reply::Validate(ReplyStatus::ValidationFailed)],
        "a reader of the deleted version fails validation"
    );
    // An insert over it takes the version after the tombstone.
    commit(&mut r, 55, key, 3, b"three");
    assert_eq!(r.cached_version(&key), Some(3));
    let logged = r.logged();
    assert!(logged.contains(&(key, 2, Vec::new())), "{logged:?}");
    assert_eq!(r.server.stats().malformed, 0);
}

#[test]
fn oversized_values_are_refused_with_a_reply() {
    let mut r = rig();
    let big = [7u8; VALUE_BYTES_MAX + 1];
    let log = items(MsgKind::Log, 40, &[(k(1), v(1), &big)]);
    assert_eq!(r.request(&log), vec![Reply::LogAck(ReplyStatus::TooLarge)]);
    assert!(
        r.server.fatal().is_none(),
        "a backup refusing LOG keeps running"
    );
    // A primary that cannot take a COMMIT (past the commit point) answers and stops.
    assert!(matches!(
        &r.request(&execute(41, &[], &[k(2)]))[..],
        [Reply::Execute(OK, _)]
    ));
    let c = items(MsgKind::Commit, 41, &[(k(2), v(1), &big)]);
    assert_eq!(r.request(&c), vec![Reply::CommitAck(ReplyStatus::TooLarge)]);
    assert!(r.server.fatal().unwrap().contains("cannot take the COMMIT"));
    assert!(r.logged().is_empty());
    assert_eq!(r.cached_version(&k(2)), None, "nothing installed");
}

#[test]
fn an_execute_whose_response_cannot_fit_a_message_is_refused_before_it_runs() {
    // 4 KiB values: 17 items pass the message limit (MESSAGE_BYTES_MAX, sized
    // for 16 such items), 16 do not; both are far over one packet (the
    // response travels as fragments).
    let (log_tx, _log_rx) = ring_pair(1 << 16).unwrap();
    let dma = LocalDma::new(
        Arc::new(Region::new(table_layout().region_bytes())),
        log_tx,
        0,
    );
    let value_bytes_max = MESSAGE_SIZING_VALUE_BYTES;
    let mut r = rig_with(Box::new(dma), value_bytes_max);
    let keys: Vec<Key> = (1..=17).map(k).collect();
    assert!(!execute_resp_fits(17, value_bytes_max));
    assert!(execute_resp_fits(16, value_bytes_max));
    assert_eq!(
        r.request(&execute(50, &keys[..1], &keys[1..])),
        vec![Reply::Execute(ReplyStatus::TooLarge, vec![])]
    );
    assert_eq!(r.index.locks_held(), 0, "nothing locked");
    assert_eq!(r.server.stats().dma_reads, 0, "nothing read");
    assert!(matches!(
        &r.request(&execute(51, &keys[..1], &keys[1..16]))[..],
        [Reply::Execute(OK, items)] if items.len() == 16
    ));
}

#[test]
fn requests_beyond_the_server_slots_are_refused_as_busy() {
    // The DMA engine never completes appends here (no pump), so every LOG
    // keeps its slot.
    let mut r = rig();
    for tx in 0..SERVER_OPS_MAX as u64 {
        let log = items(MsgKind::Log, tx, &[(k(tx), v(1), b"x")]);
        let body = Body::decode(log.kind(), log.bytes()).unwrap();
        r.server.handle(&mut r.io, &mut r.index, PEER, &body);
    }
    assert_eq!(r.server.inflight(), SERVER_OPS_MAX);
    let _ = r.replies();
    // A newer generation of a slot in use: a live transaction.
    let log = items(MsgKind::Log, SERVER_OPS_MAX as u64, &[(k(1), v(2), b"y")]);
    let body = Body::decode(log.kind(), log.bytes()).unwrap();
    r.server.handle(&mut r.io, &mut r.index, PEER, &body);
    assert_eq!(r.replies(), vec![Reply::LogAck(ReplyStatus::Busy)]);
    assert_eq!(r.server.stats().busy_refusals, 1);
    // Once the appends complete, every LOG is acknowledged.
    r.pump();
    let acks = r.replies();
    assert_eq!(acks.len(), SERVER_OPS_MAX);
    assert!(acks.iter().all(|a| *a == Reply::LogAck(OK)));
}

/// A DMA engine whose reads or appends fail: refused at submission, or
/// completed with an error.
struct FailingDma {
    at_submit: bool,
    failed: Vec<(u64, DmaError)>,
}

fn memory_error() -> DmaError {
    let e = Region::new(64).check(4096, 8).unwrap_err();
    DmaError::Memory(HostMemoryError::OutOfBounds(e))
}

impl DmaEngine for FailingDma {
    fn submit_read(&mut self, _: Nanos, token: u64, _: &[DmaRead]) -> Result<(), DmaError> {
        if self.at_submit {
            return Err(memory_error());
        }
        self.failed.push((token, memory_error()));
        Ok(())
    }
    fn submit_log_append(&mut self, _: Nanos, token: u64, _: &[u8]) -> Result<(), DmaError> {
        let e = DmaError::Log(splitkv_layout::ring::RingError::Corrupt("test"));
        if self.at_submit {
            return Err(e);
        }
        self.failed.push((token, e));
        Ok(())
    }
    fn poll(&mut self, _: Nanos, out: &mut Vec<DmaCompletion>) {
        out.extend(self.failed.drain(..).map(|(token, e)| DmaCompletion {
            token,
            result: Err(e),
        }));
    }
    fn data(&self) -> &[u8] {
        &[]
    }
    fn inflight(&self) -> usize {
        self.failed.len()
    }
}

#[test]
fn a_failing_dma_engine_finishes_requests_and_releases_locks() {
    for at_submit in [true, false] {
        let dma = FailingDma {
            at_submit,
            failed: Vec::new(),
        };
        let mut r = rig_with(Box::new(dma), VALUE_BYTES_MAX);
        let (a, b) = (k(1), k(2));
        assert_eq!(
            r.request(&execute(60, &[a], &[b])),
            vec![Reply::Execute(ReplyStatus::HostFailure, vec![])],
            "at_submit {at_submit}"
        );
        assert_eq!(r.index.locks_held(), 0, "the lock on {b:?} is released");
        assert_eq!(r.server.inflight(), 0);
        assert_eq!(
            r.request(&validate(61, &[(a, 0)])),
            vec![Reply::Validate(ReplyStatus::HostFailure)]
        );
        let s = r.server.stats();
        assert_eq!(
            (s.lock_conflicts, s.validation_failures),
            (0, 0),
            "not a conflict"
        );
        assert!(s.dma_errors >= 2);
        // An append the host log refuses: answered, and the node must stop.
        let log = items(MsgKind::Log, 62, &[(a, v(1), b"x")]);
        assert_eq!(
            r.request(&log),
            vec![Reply::LogAck(ReplyStatus::HostFailure)]
        );
        assert!(r.server.fatal().unwrap().contains("host log refused"));
        assert_eq!(r.server.inflight(), 0);
    }
}

/// A message the stack refuses (here: a backlog bound of one packet with
/// batching off) is recorded as the node's typed send fault instead of a
/// panic; the first refusal is kept.
#[test]
fn a_refused_send_becomes_a_typed_fault() {
    let mut r = rig();
    let cfg = StackConfig {
        batching: false,
        session: splitkv_nic::net::session::SessionConfig {
            backlog_packets: 1,
            ..Default::default()
        },
        ..StackConfig::default()
    };
    r.io.net = Stack::new(0, 2, MTU, false, &cfg).unwrap();
    r.io.w
        .ack(MsgKind::LogAck, TxId::from_bits(1), ReplyStatus::Ok);
    r.io.send(PEER);
    assert!(r.io.send_fault.is_none());
    r.io.send(PEER);
    let f = r.io.send_fault.clone().expect("the second send is refused");
    assert_eq!(f.dest, PEER);
    assert!(matches!(f.error, BatchError::BacklogFull { max: 1, .. }));
    assert!(f.reason.contains("not sendable"), "{}", f.reason);
}

/// A LOG whose records make a host-log entry of exactly
/// `log_entry_bytes_max(value_bytes_max)` bytes (16 values at the node's
/// limit) is appended; one record more would make an entry the host log is
/// not built to take, and is refused with `TooLarge` before anything changes.
#[test]
fn log_entries_are_bounded_by_the_largest_transaction() {
    use splitkv_layout::log_record::{log_entry_bytes_max, LOG_RECORD_HEADER_BYTES};
    use splitkv_layout::TX_VALUES_MAX;
    let mut r = rig();
    let value = [3u8; VALUE_BYTES_MAX];
    let full: Vec<(Key, ObjectMeta, &[u8])> = (0..TX_VALUES_MAX as u64)
        .map(|i| (k(100 + i), v(1), &value[..]))
        .collect();
    assert_eq!(
        TX_VALUES_MAX * (LOG_RECORD_HEADER_BYTES + VALUE_BYTES_MAX),
        log_entry_bytes_max(VALUE_BYTES_MAX)
    );
    assert_eq!(
        r.request(&items(MsgKind::Log, 60, &full)),
        vec![Reply::LogAck(OK)]
    );
    assert_eq!(r.logged().len(), TX_VALUES_MAX);
    let mut over = full.clone();
    over.push((k(200), v(1), &value[..1]));
    assert_eq!(
        r.request(&items(MsgKind::Log, 61, &over)),
        vec![Reply::LogAck(ReplyStatus::TooLarge)]
    );
    assert!(r.logged().is_empty(), "nothing appended");
    assert_eq!(r.cached_version(&k(200)), None, "nothing installed");
    assert!(r.server.fatal().is_none());
}
