//! Issue 11's commit point at the coordinator
//! (`nic-runtime/src/protocol/coordinator.rs`): LOG goes to every replica of
//! every written key, primary included; no COMMIT leaves before every one of
//! them acknowledged; then COMMIT goes to every replica sent the LOG, with
//! items (to install) only for the keys the destination is primary of, and
//! the outcome is reported only once every COMMIT was acknowledged.

use splitkv_layout::host_nic::{TxRequest, TxStatus};
use splitkv_layout::wire::{decode_packet, Body, BodyWriter, MsgKind, NodeId, ReplyStatus};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
use splitkv_nic::dma::local::LocalDma;
use splitkv_nic::net::stack::{Stack, StackConfig};
use splitkv_nic::protocol::coordinator::Coordinator;
use splitkv_nic::protocol::Io;
use splitkv_nic::{
    Placement, ProcError, Procedure, ProcedureRegistry, ReadView, TxPlan, UserAbort, WriteSet,
};
use std::collections::BTreeMap;
use std::sync::Arc;

const NODES: usize = 3;

/// Writes b"new" to each of its keys (given in the rig).
struct WriteAll(Vec<Key>);

impl Procedure for WriteAll {
    fn name(&self) -> &'static str {
        "write-all"
    }
    fn plan(&self, _: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        self.0.iter().for_each(|k| plan.write(*k));
        Ok(())
    }
    fn execute(
        &self,
        _: &[u8],
        _: &ReadView,
        w: &mut WriteSet,
        _: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        self.0.iter().for_each(|k| w.put(*k, b"new"));
        Ok(())
    }
}

/// A message the coordinator sent: destination, kind, transaction id, keys
/// of its items (the locks of an EXECUTE).
type Sent = (NodeId, MsgKind, u64, Vec<Key>);

struct Rig {
    io: Io,
    coord: Coordinator,
    procs: ProcedureRegistry,
    keys: Vec<Key>,
}

/// Coordinator at node 0 of 3, replication 2; the transaction writes two
/// keys whose primaries are nodes 1 and 2 (so their replicas are {1, 2} and
/// {2, 0}: the coordinator's own node is a backup, as in the trace).
fn rig() -> Rig {
    let placement = Placement::new(NODES, 2).unwrap();
    let pick = |p: NodeId| {
        (0..)
            .map(|i| Key::new(0, i))
            .find(|k| placement.primary(k) == p)
            .unwrap()
    };
    let keys = vec![pick(1), pick(2)];
    let (log_tx, _log_rx) = splitkv_layout::ring::ring_pair(1 << 12).unwrap();
    let dma = LocalDma::new(Arc::new(splitkv_layout::Region::new(64)), log_tx, 0);
    let mut procs = ProcedureRegistry::new();
    procs.register(Arc::new(WriteAll(keys.clone())));
    Rig {
        io: Io {
            node: 0,
            placement,
            value_bytes_max: 64,
            now: 0,
            net: Stack::new(0, NODES, 4096, false, &StackConfig::default()).unwrap(),
            dma: Box::new(dma),
            w: BodyWriter::new(),
            send_fault: None,
        },
        coord: Coordinator::new(),
        procs,
        keys,
    }
}

impl Rig {
    /// Messages sent since the last call, in destination order.
    fn sent(&mut self) -> Vec<Sent> {
        self.io.net.seal();
        let mut out = Vec::new();
        let backlogs = self.io.net.batcher_mut().backlogs_mut();
        for (d, q) in backlogs.iter_mut().enumerate() {
            for p in q.drain(..) {
                for m in decode_packet(&p).unwrap().1 {
                    let body = m.unwrap().1;
                    let keys = match body {
                        Body::Execute { locks, .. } => locks.iter().collect(),
                        Body::Log { items, .. } | Body::Commit { items, .. } => {
                            items.iter().map(|i| i.key).collect()
                        }
                        _ => Vec::new(),
                    };
                    out.push((d as NodeId, body.kind(), body.tx_id(), keys));
                }
            }
        }
        out
    }

    fn respond(&mut self, src: NodeId, w: &BodyWriter) {
        let body = Body::decode(w.kind(), w.bytes()).unwrap();
        self.coord
            .on_response(&mut self.io, &self.procs, src, &body);
    }

    /// Every replica of each written key, with the keys it holds.
    fn replicas(&self) -> BTreeMap<NodeId, Vec<Key>> {
        let mut out: BTreeMap<NodeId, Vec<Key>> = BTreeMap::new();
        for k in &self.keys {
            let p = self.io.placement.primary(k);
            for n in std::iter::once(p).chain(self.io.placement.backups(k)) {
                out.entry(n).or_default().push(*k);
            }
        }
        out
    }
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
    let replicas = r.replicas();
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
        let primary_of: Vec<Key> = r
            .keys
            .iter()
            .copied()
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
