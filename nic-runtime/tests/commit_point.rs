//! The commit point (every replica's LOG acknowledgement) at the coordinator
//! (`nic-runtime/src/protocol/coordinator.rs`): LOG goes to every replica of
//! every written key, primary included; no COMMIT leaves before every one of
//! them acknowledged; then COMMIT goes to every replica sent the LOG, with
//! items (to install) only for the keys the destination is primary of, and
//! the outcome is reported only once every COMMIT was acknowledged.

use splitkv_layout::host_nic::{TxRequest, TxStatus};
use splitkv_layout::wire::{BodyWriter, MsgKind, NodeId, ReplyStatus};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
use splitkv_nic::Placement;
use std::collections::BTreeMap;
use support::coordinator::CoordinatorRig;

mod support;

const NODES: usize = 3;

type Rig = CoordinatorRig;

/// The two keys the transaction writes: primaries nodes 1 and 2 (so their
/// replicas are {1, 2} and {2, 0}: the coordinator's own node is a backup, as
/// in the TLC counterexample's trace).
fn written_keys(placement: &Placement) -> Vec<Key> {
    let pick = |p: NodeId| {
        (0..)
            .map(|i| Key::new(0, i))
            .find(|k| placement.primary(k) == p)
            .unwrap()
    };
    vec![pick(1), pick(2)]
}

/// Coordinator at node 0 of 3, replication 2, writing [`written_keys`].
fn rig() -> Rig {
    let placement = Placement::new(NODES, 2).unwrap();
    Rig::new(placement, written_keys(&placement))
}

/// Every replica of each written key, with the keys it holds.
fn replicas(r: &Rig) -> BTreeMap<NodeId, Vec<Key>> {
    let mut out: BTreeMap<NodeId, Vec<Key>> = BTreeMap::new();
    for k in written_keys(&r.io.placement) {
        let p = r.io.placement.primary(&k);
        for n in std::iter::once(p).chain(r.io.placement.backups(&k)) {
            out.entry(n).or_default().push(k);
        }
    }
    out
}

#[test]
fn no_commit_before_every_replica_logged_and_commit_goes_to_every_replica() {
    let mut r = rig();
    let req = TxRequest {
        req_id: 9,
        procedure: 0,
        args: b"",
    };
    r.coord.start(&mut r.io, &r.procs, &req);
    let execs = r.sent();
    assert_eq!(execs.len(), 2, "one EXECUTE per primary: {execs:?}");
    let tx_id = execs[0].2;
    for (p, kind, _, keys) in &execs {
        assert_eq!(*kind, MsgKind::Execute);
        let mut w = BodyWriter::new();
        w.begin_execute_resp(tx_id, ReplyStatus::Ok);
        for k in keys {
            w.push_item(k, ObjectMeta::new(1, ObjectFlags::empty()), b"old");
        }
        r.respond(*p, &w);
    }
    // LOG to every replica of every written key, primaries included.
    let logs = r.sent();
    let replicas = replicas(&r);
    let mut got: BTreeMap<NodeId, Vec<Key>> = BTreeMap::new();
    for (d, kind, id, keys) in logs {
        assert_eq!((kind, id), (MsgKind::Log, tx_id));
        got.insert(d, keys);
    }
    assert_eq!(got, replicas, "LOG destinations and their items");
    assert_eq!(replicas.len(), NODES, "the coordinator's node is a replica");
    // All acknowledgements but one: nothing is committed yet.
    let nodes: Vec<NodeId> = replicas.keys().copied().collect();
    let mut w = BodyWriter::new();
    for &n in &nodes[..nodes.len() - 1] {
        w.ack(MsgKind::LogAck, tx_id, ReplyStatus::Ok);
        r.respond(n, &w);
        assert!(r.sent().is_empty(), "no COMMIT before every LOG ack");
    }
    assert_eq!(r.coord.stats().committed, 0);
    w.ack(MsgKind::LogAck, tx_id, ReplyStatus::Ok);
    r.respond(nodes[nodes.len() - 1], &w);
    // COMMIT to every replica; items only for the keys it is primary of.
    let commits = r.sent();
    assert_eq!(commits.len(), replicas.len(), "{commits:?}");
    for (d, kind, id, keys) in &commits {
        assert_eq!((*kind, *id), (MsgKind::Commit, tx_id));
        let primary_of: Vec<Key> = written_keys(&r.io.placement)
            .into_iter()
            .filter(|k| r.io.placement.primary(k) == *d)
            .collect();
        assert_eq!(keys, &primary_of, "COMMIT items at node {d}");
    }
    assert_eq!(r.coord.stats().committed, 1);
    // Reported only once every COMMIT was acknowledged.
    for (i, &n) in nodes.iter().enumerate() {
        assert!(r.coord.outcomes().is_empty(), "reported after {i} acks");
        w.ack(MsgKind::CommitAck, tx_id, ReplyStatus::Ok);
        r.respond(n, &w);
    }
    let o = r.coord.outcomes().pop_front().expect("an outcome");
    assert_eq!((o.req_id, o.status), (9, TxStatus::Committed));
}
