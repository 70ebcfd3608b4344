//! The commit point (every replica's LOG acknowledgement) at one node, NIC
//! server and host worker together, driven message by message as a coordinator
//! would: a replica's host table and NIC cache do not change on LOG, only at
//! the COMMIT decision, and an ABORT after LOG leaves them unchanged; a primary
//! unlocks only once its COMMIT append completed (Xenic §4.2 step 6); a late or
//! duplicated EXECUTE or LOG after its transaction finished takes nothing (no
//! orphan lock).

use splitkv_host::table::{HostTable, TableConfig, TableKind};
use splitkv_host::HostWorker;
use splitkv_layout::ring::ring_pair;
use splitkv_layout::robinhood_layout::{TableConfig as LayoutConfig, TableLayout};
use splitkv_layout::wire::{decode_packet, Body, BodyWriter, MsgKind, ReplyStatus};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, Region, TxId};
use splitkv_nic::dma::local::LocalDma;
use splitkv_nic::dma::DmaCompletion;
use splitkv_nic::index::{HostTableLayout, NicIndex};
use splitkv_nic::net::stack::{Stack, StackConfig};
use splitkv_nic::protocol::server::Server;
use splitkv_nic::protocol::Io;
use splitkv_nic::Placement;
use std::sync::Arc;

const VALUE_BYTES_MAX: usize = 16;
/// The coordinator the requests come from.
const PEER: u16 = 1;

/// Node 0 of 2, replication 2: every key on both nodes.
struct Rig {
    io: Io,
    index: NicIndex,
    server: Server,
    worker: HostWorker,
}

fn rig() -> Rig {
    let layout = TableLayout::new(&LayoutConfig::new(64, VALUE_BYTES_MAX)).unwrap();
    let (log_tx, log_rx) = ring_pair(1 << 16).unwrap();
    let (ack_tx, _ack_rx) = ring_pair(1 << 12).unwrap();
    let dma = LocalDma::new(Arc::new(Region::new(layout.region_bytes())), log_tx, 0);
    let table = HostTable::new(TableKind::Robinhood, &TableConfig::new(64, VALUE_BYTES_MAX));
    Rig {
        io: Io {
            node: 0,
            placement: Placement::new(2, 2).unwrap(),
            value_bytes_max: VALUE_BYTES_MAX,
            now: 0,
            net: Stack::new(0, 2, 4096, false, &StackConfig::default()).unwrap(),
            dma: Box::new(dma),
            w: BodyWriter::new(),
            send_fault: None,
        },
        index: NicIndex::new(HostTableLayout::Robinhood(layout), 64, 1),
        server: Server::new(),
        worker: HostWorker::new(table.unwrap(), log_rx, ack_tx),
    }
}

/// Transaction `slot` of coordinator [`PEER`], generation `gen`.
fn tx(slot: usize, gen: u32) -> TxId {
    TxId::new(PEER, slot, gen)
}

/// A key node 0 is the primary of (`primary`) or a backup of.
fn key(r: &Rig, primary: bool) -> Key {
    (0..)
        .map(|i| Key::new(0, i))
        .find(|k| (r.io.placement.primary(k) == 0) == primary)
        .unwrap()
}

fn v(version: u64) -> ObjectMeta {
    ObjectMeta::new(version, ObjectFlags::empty())
}

impl Rig {
    /// Hands one request to the server without completing any DMA.
    fn deliver(&mut self, w: &BodyWriter) {
        let body = Body::decode(w.kind(), w.bytes()).unwrap();
        self.server
            .handle(&mut self.io, &mut self.index, PEER, &body);
    }

    /// Completes every DMA request and runs the host worker.
    fn pump(&mut self) {
        let mut done: Vec<DmaCompletion> = Vec::new();
        for _ in 0..16 {
            self.io.now += 1;
            self.io.dma.poll(self.io.now, &mut done);
            for c in done.drain(..) {
                self.server.on_dma(&mut self.io, &mut self.index, &c);
            }
            self.server.retry_deferred(&mut self.io, &mut self.index);
            self.worker.run_iteration(self.io.now);
        }
    }

    /// Delivers, completes, and returns the (kind, status) of each reply.
    fn request(&mut self, w: &BodyWriter) -> Vec<(MsgKind, ReplyStatus)> {
        self.deliver(w);
        self.pump();
        self.replies()
    }

    fn replies(&mut self) -> Vec<(MsgKind, ReplyStatus)> {
        self.io.net.seal();
        let mut out = Vec::new();
        for p in self.io.net.batcher_mut().backlogs_mut()[PEER as usize].drain(..) {
            for m in decode_packet(&p).unwrap().1 {
                let body = m.unwrap().1;
                let status = match body {
                    Body::ExecuteResp { status, .. }
                    | Body::LogAck { status, .. }
                    | Body::CommitAck { status, .. } => status,
                    other => panic!("unexpected reply {other:?}"),
                };
                out.push((body.kind(), status));
            }
        }
        out
    }

    /// The host table's (version, value) of `k`, if any.
    fn table(&self, k: &Key) -> Option<(u64, Vec<u8>)> {
        let mut value = Vec::new();
        let meta = self.worker.table().get(k, &mut value)?;
        Some((meta.version(), value))
    }
}

fn execute(tx: TxId, locks: &[Key]) -> BodyWriter {
    let mut w = BodyWriter::new();
    w.begin_execute(tx);
    locks.iter().for_each(|k| w.push_lock(k));
    w
}

fn items(kind: MsgKind, tx: TxId, items: &[(Key, u64, &[u8])]) -> BodyWriter {
    let mut w = BodyWriter::new();
    w.begin_items(kind, tx);
    items
        .iter()
        .for_each(|(k, ver, val)| w.push_item(k, v(*ver), val));
    w
}

fn abort(tx: TxId, keys: &[Key]) -> BodyWriter {
    let mut w = BodyWriter::new();
    w.begin_abort(tx);
    keys.iter().for_each(|k| w.push_abort_key(k));
    w
}

const OK: ReplyStatus = ReplyStatus::Ok;

#[test]
fn a_backup_applies_at_the_commit_decision_and_drops_at_abort() {
    let mut r = rig();
    let k = key(&r, false);
    let a = tx(1, 1);
    let log = items(MsgKind::Log, a, &[(k, 1, b"one")]);
    assert_eq!(r.request(&log), [(MsgKind::LogAck, OK)]);
    assert_eq!(r.table(&k), None, "LOG leaves the host table unchanged");
    assert!(r.index.peek(&k).is_none(), "and the NIC cache");
    assert_eq!(r.worker.pending_tx_ids().collect::<Vec<_>>(), [a]);
    // The backup's COMMIT carries no items: a decision record.
    let commit = items(MsgKind::Commit, a, &[]);
    assert_eq!(r.request(&commit), [(MsgKind::CommitAck, OK)]);
    assert_eq!(r.table(&k), Some((1, b"one".to_vec())), "applied at COMMIT");
    assert_eq!(r.worker.pending_tx_ids().count(), 0);
    // An ABORT after LOG: the pending record is dropped, nothing changes.
    let b = tx(2, 1);
    let log = items(MsgKind::Log, b, &[(k, 2, b"two")]);
    assert_eq!(r.request(&log), [(MsgKind::LogAck, OK)]);
    assert!(
        r.request(&abort(b, &[])).is_empty(),
        "ABORT is not answered"
    );
    assert_eq!(r.table(&k), Some((1, b"one".to_vec())));
    assert!(r.index.peek(&k).is_none());
    assert_eq!(r.worker.pending_tx_ids().count(), 0);
    assert_eq!((r.worker.stats().commits, r.worker.stats().aborts), (1, 1));
    // A late copy of that LOG is refused and leaves nothing pending.
    assert_eq!(r.request(&log), [(MsgKind::LogAck, ReplyStatus::Malformed)]);
    r.pump();
    assert_eq!(r.worker.pending_tx_ids().count(), 0);
    assert_eq!(r.table(&k), Some((1, b"one".to_vec())));
    assert!(r.worker.error().is_none());
}

#[test]
fn a_primary_installs_at_commit_and_unlocks_only_after_its_append() {
    let mut r = rig();
    let k = key(&r, true);
    let a = tx(3, 1);
    assert_eq!(r.request(&execute(a, &[k])), [(MsgKind::ExecuteResp, OK)]);
    let log = items(MsgKind::Log, a, &[(k, 1, b"new")]);
    assert_eq!(r.request(&log), [(MsgKind::LogAck, OK)]);
    assert!(r.index.peek(&k).is_none(), "LOG installs nothing");
    assert_eq!(r.table(&k), None);
    // COMMIT delivered, its append not completed yet: installed (pinned)
    // but still locked and not acknowledged (Xenic §4.2 step 6).
    r.deliver(&items(MsgKind::Commit, a, &[(k, 1, b"new")]));
    assert_eq!(r.index.lock_holder(&k), Some(a), "locked until appended");
    assert!(
        r.replies().is_empty(),
        "no acknowledgement before the append"
    );
    assert_eq!(r.index.peek(&k).map(|c| c.meta.version()), Some(1));
    r.pump();
    assert_eq!(r.replies(), [(MsgKind::CommitAck, OK)]);
    assert_eq!(r.index.lock_holder(&k), None, "unlocked once appended");
    assert_eq!(r.table(&k), Some((1, b"new".to_vec())));
}

#[test]
fn late_executes_and_logs_take_nothing() {
    let mut r = rig();
    let k = key(&r, true);
    let refused = [(MsgKind::ExecuteResp, ReplyStatus::Malformed)];
    // Aborted: a duplicated EXECUTE arriving after the ABORT.
    let a = tx(4, 1);
    assert_eq!(r.request(&execute(a, &[k])), [(MsgKind::ExecuteResp, OK)]);
    assert!(r.request(&abort(a, &[k])).is_empty());
    assert_eq!(r.request(&execute(a, &[k])), refused);
    assert_eq!(r.index.lock_holder(&k), None, "no orphan lock");
    let late_log = items(MsgKind::Log, a, &[(k, 1, b"x")]);
    assert_eq!(
        r.request(&late_log),
        [(MsgKind::LogAck, ReplyStatus::Malformed)]
    );
    // Committed: the same after its COMMIT released the lock.
    let c = tx(5, 7);
    assert_eq!(r.request(&execute(c, &[k])), [(MsgKind::ExecuteResp, OK)]);
    let log = items(MsgKind::Log, c, &[(k, 1, b"y")]);
    assert_eq!(r.request(&log), [(MsgKind::LogAck, OK)]);
    let commit = items(MsgKind::Commit, c, &[(k, 1, b"y")]);
    assert_eq!(r.request(&commit), [(MsgKind::CommitAck, OK)]);
    assert_eq!(r.request(&execute(c, &[k])), refused);
    assert_eq!(r.index.lock_holder(&k), None);
    // An older generation of a slot whose newer one was seen.
    assert_eq!(r.request(&execute(tx(5, 6), &[k])), refused);
    assert_eq!(r.index.lock_holder(&k), None);
    // Refused at EXECUTE (a conflict): its late copy is refused too.
    let holder = tx(6, 1);
    assert_eq!(
        r.request(&execute(holder, &[k])),
        [(MsgKind::ExecuteResp, OK)]
    );
    let loser = tx(7, 1);
    let conflict = [(MsgKind::ExecuteResp, ReplyStatus::LockConflict)];
    assert_eq!(r.request(&execute(loser, &[k])), conflict);
    assert!(r.request(&abort(holder, &[k])).is_empty());
    assert_eq!(r.request(&execute(loser, &[k])), refused);
    assert_eq!(r.index.lock_holder(&k), None);
    assert_eq!(r.server.stats().late_requests, 5);
}

/// The single-read validation skip (with the commit point): an EXECUTE read by
/// DMA is re-checked when the DMA completes, and a version a COMMIT installed
/// in the NIC index while the read was in flight replaces the older one read.
#[test]
fn a_read_completing_after_a_commit_returns_the_committed_version() {
    let mut r = rig();
    let k = key(&r, true);
    let mut w = BodyWriter::new();
    w.begin_execute(tx(8, 1));
    w.push_read(&k);
    r.deliver(&w); // not cached: a DMA read, not completed yet
    let writer = tx(9, 1);
    assert!(r.index.try_lock(k, writer), "as its EXECUTE would");
    r.deliver(&items(MsgKind::Commit, writer, &[(k, 5, b"five")]));
    r.pump();
    r.io.net.seal();
    let mut read = None;
    for p in r.io.net.batcher_mut().backlogs_mut()[PEER as usize].drain(..) {
        for m in decode_packet(&p).unwrap().1 {
            if let Body::ExecuteResp { status, items, .. } = m.unwrap().1 {
                let it = items.iter().next().unwrap();
                read = Some((status, it.meta.version(), it.value.to_vec()));
            }
        }
    }
    assert_eq!(read, Some((OK, 5, b"five".to_vec())));
    assert_eq!(r.server.stats().refreshed_reads, 1);
}

/// A retried or duplicated LOG is never appended twice: while the first is
/// being appended it gets no answer of its own, after that it is answered
/// at once; the COMMIT then applies each record once (no stale records).
#[test]
fn a_duplicated_log_is_appended_once() {
    let mut r = rig();
    let k = key(&r, false);
    let a = tx(10, 1);
    let log = items(MsgKind::Log, a, &[(k, 1, b"one")]);
    r.deliver(&log);
    r.deliver(&log);
    r.pump();
    assert_eq!(r.replies(), [(MsgKind::LogAck, OK)], "answered once");
    assert_eq!(r.request(&log), [(MsgKind::LogAck, OK)], "answered at once");
    let commit = items(MsgKind::Commit, a, &[]);
    assert_eq!(r.request(&commit), [(MsgKind::CommitAck, OK)]);
    assert_eq!(r.table(&k), Some((1, b"one".to_vec())));
    assert_eq!((r.worker.stats().applied, r.worker.stats().stale), (1, 0));
    assert_eq!(r.server.stats().log_appends, 2, "one LOG, one decision");
}
