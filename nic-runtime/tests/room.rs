//! The room rule for inserts into a full table at a primary's NIC runtime
//! (`protocol/server/room.rs`), driven message by message as a coordinator
//! would: an EXECUTE whose absent write-set keys pass the shard's quota is
//! refused with `TableFull` and holds no lock; ABORT gives a reservation back;
//! COMMIT turns it into a key (once, even if duplicated); a present key
//! needs no room, nor does an insert over a delete's tombstone (which keeps
//! its slot: no room comes back).

mod support;

use splitkv_layout::ring::RingConsumer;
use splitkv_layout::wire::{decode_packet, Body, BodyWriter, MsgKind, ReplyStatus};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, TxId};
use splitkv_nic::net::mem::{mem_network, MemTransport};
use splitkv_nic::net::stack::StackConfig;
use splitkv_nic::net::{Transport, TxPacket};
use splitkv_nic::{NicRuntime, Placement};
use support::{lone_runtime, peer_packet, LoneRuntime};

const VALUE_BYTES_MAX: usize = 8;

/// Node 0 (the primary under test, quota 2) and node 1 (the test, acting as
/// coordinator), replication 1.
struct Rig {
    nic: NicRuntime,
    peer: MemTransport,
    now: u64,
    /// Number of node 1's next packet to node 0.
    seq: u32,
    /// Keys of shard 0.
    keys: Vec<Key>,
    _log: RingConsumer,
}

impl Rig {
    fn new(quota: u64) -> Rig {
        let mut net = mem_network(2);
        let peer = net.pop().unwrap();
        let transport = net.pop().unwrap();
        let placement = Placement::new(2, 1).unwrap();
        let LoneRuntime { mut nic, log, .. } = lone_runtime(
            placement,
            transport,
            VALUE_BYTES_MAX,
            StackConfig::default(),
        );
        nic.room_mut().set_quota(quota);
        let keys = (0..)
            .map(|i| Key::new(0, i))
            .filter(|k| placement.primary(k) == 0)
            .take(8)
            .collect();
        Rig {
            nic,
            peer,
            now: 0,
            seq: 0,
            keys,
            _log: log,
        }
    }

    /// Sends one message built by `build` from node 1, runs the runtime, and
    /// returns the statuses of the replies (execute, commit acks).
    fn send(&mut self, kind: MsgKind, build: impl FnOnce(&mut BodyWriter)) -> Vec<ReplyStatus> {
        let mut w = BodyWriter::new();
        build(&mut w);
        assert_eq!(w.kind(), kind, "the body is of the kind sent");
        // As node 1's session numbers its packets to node 0.
        let pkt = peer_packet(self.seq, &w);
        self.seq += 1;
        self.peer.tx_burst(
            self.now,
            &[TxPacket {
                dst: 0,
                bytes: &pkt,
            }],
        );
        for _ in 0..10 {
            self.now += 1;
            self.nic.run_iteration(self.now);
        }
        let mut replies = Vec::new();
        self.peer.rx_burst(self.now, 16, &mut |p| {
            let (_, msgs) = decode_packet(p).unwrap();
            for m in msgs {
                match m.unwrap().1 {
                    Body::ExecuteResp { status, .. } | Body::CommitAck { status, .. } => {
                        replies.push(status)
                    }
                    other => panic!("unexpected reply {other:?}"),
                }
            }
        });
        replies
    }

    fn execute(&mut self, tx_id: u64, locks: &[usize]) -> Vec<ReplyStatus> {
        let tx_id = slot_id(tx_id);
        let keys: Vec<Key> = locks.iter().map(|&i| self.keys[i]).collect();
        self.send(MsgKind::Execute, |w| {
            w.begin_execute(tx_id);
            keys.iter().for_each(|k| w.push_lock(k));
        })
    }

    fn abort(&mut self, tx_id: u64, keys: &[usize]) {
        let tx_id = slot_id(tx_id);
        let keys: Vec<Key> = keys.iter().map(|&i| self.keys[i]).collect();
        let replies = self.send(MsgKind::Abort, |w| {
            w.begin_abort(tx_id);
            keys.iter().for_each(|k| w.push_abort_key(k));
        });
        assert!(replies.is_empty(), "ABORT is not answered");
    }

    fn commit(&mut self, tx_id: u64, keys: &[usize]) -> Vec<ReplyStatus> {
        let tx_id = slot_id(tx_id);
        let keys: Vec<Key> = keys.iter().map(|&i| self.keys[i]).collect();
        self.send(MsgKind::Commit, |w| {
            w.begin_items(MsgKind::Commit, tx_id);
            keys.iter()
                .for_each(|k| w.push_item(k, ObjectMeta(1), &[7]));
        })
    }

    /// COMMITs `meta` with `value` to key `i` (which `tx_id` holds locked).
    fn commit_one(
        &mut self,
        tx_id: u64,
        i: usize,
        meta: ObjectMeta,
        value: &[u8],
    ) -> Vec<ReplyStatus> {
        let (tx_id, key) = (slot_id(tx_id), self.keys[i]);
        self.send(MsgKind::Commit, |w| {
            w.begin_items(MsgKind::Commit, tx_id);
            w.push_item(&key, meta, value);
        })
    }

    fn room(&self) -> (u64, u64) {
        (self.nic.room().count(), self.nic.room().reserved())
    }

    fn holder(&self, i: usize) -> Option<TxId> {
        self.nic.index().lock_holder(&self.keys[i])
    }
}

/// Transaction `n` of the test as a coordinator numbers it: its own slot,
/// generation 1 (a server refuses an older generation of a slot).
fn slot_id(n: u64) -> TxId {
    TxId::new(0, n as usize, 1)
}

#[test]
fn execute_reserves_abort_releases_commit_counts() {
    use ReplyStatus::{Malformed, Ok, TableFull};
    let mut r = Rig::new(2);
    assert_eq!(
        r.execute(1, &[0, 1]),
        [Ok],
        "two absent keys fit a quota of 2"
    );
    assert_eq!(r.room(), (0, 2));
    assert_eq!(r.execute(2, &[2]), [TableFull]);
    assert_eq!(r.holder(2), None, "a refused EXECUTE holds no lock");
    assert_eq!(r.nic.stats().server.table_full, 1);
    r.abort(1, &[1]);
    assert_eq!(r.room(), (0, 1), "ABORT gives the reservation back");
    assert_eq!(r.execute(3, &[2]), [Ok]);
    assert_eq!(r.room(), (0, 2));
    assert_eq!(r.commit(1, &[0]), [Ok]);
    assert_eq!(r.room(), (1, 1), "COMMIT turns a reservation into a key");
    assert_eq!(
        r.commit(1, &[0]),
        [Malformed],
        "a duplicate COMMIT is refused"
    );
    assert_eq!(r.room(), (1, 1), "and counts nothing");
    assert_eq!(r.execute(4, &[0]), [Ok], "a present key needs no room");
    assert_eq!(r.room(), (1, 1));
    assert_eq!(
        r.execute(5, &[3]),
        [TableFull],
        "1 key + 1 reserved = quota"
    );
    r.abort(4, &[0]);
    r.abort(3, &[2]);
    assert_eq!(r.room(), (1, 0));
    assert_eq!(r.execute(6, &[3]), [Ok]);
    assert_eq!(r.commit(6, &[3]), [Ok]);
    assert_eq!(r.room(), (2, 0));
    assert_eq!(
        r.nic.fault(),
        None,
        "refusals before the commit point stop nothing"
    );
}

#[test]
fn a_tombstone_keeps_its_room_and_an_insert_over_it_needs_none() {
    use ReplyStatus::{Ok, TableFull};
    let mut r = Rig::new(1);
    assert_eq!(r.execute(1, &[0]), [Ok]);
    assert_eq!(r.commit(1, &[0]), [Ok]);
    assert_eq!(r.room(), (1, 0), "the shard is full");
    // Delete key 0: its tombstone (DELETED, the next version, no value).
    assert_eq!(r.execute(2, &[0]), [Ok]);
    let tombstone = ObjectMeta::new(2, ObjectFlags::DELETED);
    assert_eq!(r.commit_one(2, 0, tombstone, b""), [Ok]);
    assert_eq!(r.room(), (1, 0), "the tombstone keeps its slot");
    assert_eq!(r.execute(3, &[1]), [TableFull], "no room came back");
    // Re-insert key 0 over its tombstone: no reservation needed.
    assert_eq!(r.execute(4, &[0]), [Ok]);
    assert_eq!(r.room(), (1, 0));
    assert_eq!(r.commit_one(4, 0, ObjectMeta(3), b"x"), [Ok]);
    assert_eq!(r.room(), (1, 0));
    assert_eq!(r.nic.fault(), None);
}

#[test]
fn a_node_without_a_quota_admits_every_insert_and_counts_it() {
    let mut r = Rig::new(splitkv_nic::protocol::server::ROOM_KEYS_UNLIMITED);
    assert_eq!(r.execute(1, &[0, 1, 2, 3, 4, 5, 6, 7]), [ReplyStatus::Ok]);
    assert_eq!(r.room(), (0, 8));
    assert_eq!(r.commit(1, &[0, 1, 2, 3, 4, 5, 6, 7]), [ReplyStatus::Ok]);
    assert_eq!(r.room(), (8, 0));
}
