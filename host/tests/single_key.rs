//! Single-key calls in one round at the key's primary (Dandelion §3
//! GetOne/PutOne/InsertOne; `splitkv_nic::protocol::single_key`) on an
//! in-process cluster of three nodes driven step by step on this thread:
//! a get of a key locked by a stalled write is refused as a retryable lock
//! conflict and reads the new value once the write committed; a put and an
//! insert go through the primary's own transaction; and each call's
//! messages on the network are counted (a GetOne is one request and one
//! reply; a PutOne one round trip caller ↔ primary plus the primary's
//! replication).

use splitkv_client::{Call, CallError, KvClient, Reply, Ticket};
use splitkv_host::cluster::ClusterParts;
use splitkv_host::{Client, Cluster};
use splitkv_layout::app::AbortReason;
use splitkv_layout::Key;
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::net::Transport;

/// The value a get returns, whatever its version.
fn value(r: Result<Reply, CallError>) -> Result<Vec<u8>, CallError> {
    r.map(|r| match r {
        Reply::Value(v) => v.value,
        other => panic!("a get answers a value, got {other:?}"),
    })
}

/// Most passes a call may take to end (far more than its messages need).
const PASSES_MAX: usize = 20_000;
/// Virtual nanoseconds per pass: far below the phase deadline, so no
/// deadline fires while a node is held back.
const PASS_NS: u64 = 100;

struct Rig {
    parts: ClusterParts,
    now: u64,
}

impl Rig {
    fn new() -> Rig {
        let transports = mem_network(3)
            .into_iter()
            .map(|t| Box::new(t) as Box<dyn Transport>)
            .collect();
        let parts = Cluster::builder()
            .nodes(3)
            .replication(3)
            .value_bytes_max(16)
            .clients_per_node(2)
            .build_parts(transports)
            .expect("parts");
        Rig { parts, now: 1 }
    }

    /// One pass over every node but `held` (its NIC runtime and host worker).
    fn pass(&mut self, held: Option<usize>) {
        self.now += PASS_NS;
        for (i, n) in self.parts.nodes.iter_mut().enumerate() {
            if Some(i) != held {
                n.nic.run_iteration(self.now);
                n.worker.run_iteration(self.now);
            }
        }
    }

    /// Passes until `ticket` of `client` ends (bounded by [`PASSES_MAX`]).
    fn finish(
        &mut self,
        client: &mut Client,
        ticket: Ticket,
        held: Option<usize>,
    ) -> Result<Reply, CallError> {
        for _ in 0..PASSES_MAX {
            self.pass(held);
            if let Some(c) = client.poll_one().expect("poll") {
                assert_eq!(c.ticket, ticket);
                return c.result;
            }
        }
        panic!("call {ticket:?} did not end in {PASSES_MAX} passes");
    }

    fn call(&mut self, client: &mut Client, call: Call<'_>) -> Result<Reply, CallError> {
        let t = KvClient::submit(client, call).expect("submit");
        self.finish(client, t, None)
    }

    /// Passes until every node is quiescent.
    fn settle(&mut self) {
        for _ in 0..PASSES_MAX {
            self.pass(None);
            if self.parts.is_quiescent() {
                return;
            }
        }
        panic!("cluster did not settle");
    }

    /// Network messages sent by every node so far (loopback excluded).
    fn network_messages(&self) -> u64 {
        let n = &self.parts.nodes;
        n.iter().map(|n| n.nic.stats().net.batch.messages).sum()
    }

    /// A key whose primary is `node`.
    fn key_at(&self, node: u16) -> Key {
        (0..)
            .map(|i| Key::new(1, i))
            .find(|k| self.parts.placement.primary(k) == node)
            .expect("some key")
    }
}

#[test]
fn get_of_a_locked_key_is_retryable_and_reads_the_write_once_committed() {
    let mut rig = Rig::new();
    let k = rig.key_at(0);
    let mut writer = rig.parts.client(1).unwrap();
    let mut reader = rig.parts.client(1).unwrap();
    assert_eq!(
        rig.call(&mut writer, Call::Put(k, b"v1")),
        Ok(Reply::Written)
    );
    assert_eq!(
        value(rig.call(&mut reader, Call::Get(k))),
        Ok(b"v1".to_vec())
    );
    // A put whose backup (node 2) does not run: its LOG is never
    // acknowledged, so the primary (node 0) keeps the key locked.
    let put = KvClient::submit(&mut writer, Call::Put(k, b"v2")).unwrap();
    for _ in 0..200 {
        rig.pass(Some(2));
    }
    assert!(
        rig.parts.nodes[0].nic.index().lock_holder(&k).is_some(),
        "the stalled put holds the key's lock at its primary"
    );
    let got = KvClient::submit(&mut reader, Call::Get(k)).unwrap();
    match rig.finish(&mut reader, got, Some(2)) {
        Err(CallError::Aborted {
            reason: AbortReason::LockConflict,
            ..
        }) => {}
        other => panic!("a get of a locked key is a lock conflict, got {other:?}"),
    }
    let primary = rig.parts.nodes[0].nic.stats().server;
    assert_eq!((primary.get_ones, primary.get_one_locked), (2, 1));
    // Node 2 runs again: the put commits and the next get reads it.
    assert_eq!(rig.finish(&mut writer, put, None), Ok(Reply::Written));
    assert_eq!(
        value(rig.call(&mut reader, Call::Get(k))),
        Ok(b"v2".to_vec())
    );
    rig.settle();
    let mut v = Vec::new();
    for node in 0..3 {
        let t = rig.parts.table(node).unwrap();
        assert!(t.get(&k, &mut v).is_some(), "node {node} has the key");
        assert_eq!(v, b"v2", "node {node} holds the committed value");
    }
}

#[test]
fn insert_and_put_run_at_the_primary_and_absent_keys_are_not_found() {
    let mut rig = Rig::new();
    let k = rig.key_at(2);
    let mut c = rig.parts.client(0).unwrap();
    assert_eq!(rig.call(&mut c, Call::Get(k)), Err(CallError::KeyNotFound));
    assert_eq!(rig.call(&mut c, Call::Insert(k, b"a")), Ok(Reply::Written));
    match rig.call(&mut c, Call::Insert(k, b"b")) {
        Err(CallError::Aborted {
            reason: AbortReason::CompareFailed,
            ..
        }) => {}
        other => panic!("a second insert finds the key, got {other:?}"),
    }
    assert_eq!(rig.call(&mut c, Call::Put(k, b"c")), Ok(Reply::Written));
    assert_eq!(value(rig.call(&mut c, Call::Get(k))), Ok(b"c".to_vec()));
    let primary = rig.parts.nodes[2].nic.stats();
    assert_eq!(
        primary.single_key.write_one_started, 3,
        "coordinated at the primary"
    );
    assert_eq!(primary.coordinator.started, 3, "as transactions of its own");
    let caller = rig.parts.nodes[0].nic.stats();
    assert_eq!(
        caller.coordinator.started, 0,
        "the caller coordinates nothing"
    );
    assert_eq!(caller.single_key.write_one_replies, 3);
    assert_eq!(caller.single_key.get_one_replies, 2);
}

#[test]
fn a_get_one_is_one_request_and_one_reply_and_a_put_one_one_round_trip_plus_replication() {
    let mut rig = Rig::new();
    let k = rig.key_at(0);
    let mut c = rig.parts.client(1).unwrap();
    assert_eq!(rig.call(&mut c, Call::Put(k, b"x")), Ok(Reply::Written));
    rig.settle();

    let before = rig.network_messages();
    assert_eq!(value(rig.call(&mut c, Call::Get(k))), Ok(b"x".to_vec()));
    rig.settle();
    assert_eq!(
        rig.network_messages() - before,
        2,
        "GetOne: one request to the primary, one reply"
    );

    let before = rig.network_messages();
    assert_eq!(rig.call(&mut c, Call::Put(k, b"y")), Ok(Reply::Written));
    rig.settle();
    // WriteOne and its reply between caller and primary; LOG, its ack,
    // COMMIT and its ack between the primary and each of its 2 backups.
    let replication = 4 * 2;
    assert_eq!(
        rig.network_messages() - before,
        2 + replication,
        "PutOne: one round trip to the primary plus its replication"
    );
}
