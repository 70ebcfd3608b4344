//! A coordinator alone with its `Io` (node 0): the coordinator tests drive it
//! by hand, reading what it sent and feeding it responses.

use splitkv_layout::wire::{decode_packet, Body, BodyWriter, MsgKind, NodeId, ReplyStatus};
use splitkv_layout::{Key, TxId};
use splitkv_nic::dma::local::LocalDma;
use splitkv_nic::net::stack::{Stack, StackConfig};
use splitkv_nic::net::Transport;
use splitkv_nic::protocol::coordinator::Coordinator;
use splitkv_nic::protocol::Io;
use splitkv_nic::{
    Placement, ProcError, Procedure, ProcedureRegistry, ReadView, TxPlan, UserAbort, WriteSet,
};
use std::sync::Arc;

/// The value [`WriteKeys`] writes.
pub const WRITTEN: &[u8] = b"new";

/// Procedure 0 of a [`CoordinatorRig`]: writes [`WRITTEN`] to each key.
pub struct WriteKeys(pub Vec<Key>);

impl Procedure for WriteKeys {
    fn name(&self) -> &'static str {
        "write-keys"
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
        self.0.iter().for_each(|k| w.put(*k, WRITTEN));
        Ok(())
    }
}

/// A message the coordinator sent: destination, kind, transaction id, keys
/// of its items (the locks of an EXECUTE, the writes of a LOG or COMMIT).
pub type Sent = (NodeId, MsgKind, TxId, Vec<Key>);

/// Node 0's coordinator, its `Io` (local DMA, a stack nobody drains but the
/// test) and a registry holding [`WriteKeys`] as procedure 0.
pub struct CoordinatorRig {
    /// Node 0's `Io`; tests move `io.now` themselves.
    pub io: Io,
    /// The coordinator under test.
    pub coord: Coordinator,
    /// Its procedures.
    pub procs: ProcedureRegistry,
}

impl CoordinatorRig {
    /// Node 0 of `placement` at time 0, its procedure writing `keys`.
    pub fn new(placement: Placement, keys: Vec<Key>) -> CoordinatorRig {
        let (log_tx, _log_rx) = splitkv_layout::ring::ring_pair(1 << 12).unwrap();
        let dma = LocalDma::new(Arc::new(splitkv_layout::Region::new(64)), log_tx, 0);
        let mut procs = ProcedureRegistry::new();
        procs.register(Arc::new(WriteKeys(keys)));
        let nodes = placement.nodes();
        CoordinatorRig {
            io: Io {
                node: 0,
                placement,
                value_bytes_max: 64,
                now: 0,
                net: Stack::new(0, nodes, 4096, false, &StackConfig::default()).unwrap(),
                dma: Box::new(dma),
                w: BodyWriter::new(),
                send_fault: None,
            },
            coord: Coordinator::new(),
            procs,
        }
    }

    /// Messages sent since the last call, in destination order (this node's
    /// own backlog, the loopback, included).
    pub fn sent(&mut self) -> Vec<Sent> {
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

    /// [`CoordinatorRig::sent`] without the keys: (destination, kind, tx_id).
    pub fn sent_kinds(&mut self) -> Vec<(NodeId, MsgKind, TxId)> {
        self.sent()
            .into_iter()
            .map(|(d, kind, tx, _)| (d, kind, tx))
            .collect()
    }

    /// One packet of `peer`'s process reaches node 0's sessions (first
    /// contact: [`Sessions::heard_from`](splitkv_nic::net::session::Sessions::heard_from)
    /// holds for `peer` from then on); its message goes nowhere else.
    pub fn hear_from(&mut self, peer: NodeId) {
        let nodes = self.io.placement.nodes();
        let mut net = splitkv_nic::net::mem::mem_network(nodes);
        let mut other = Stack::new(peer, nodes, 4096, false, &StackConfig::default()).unwrap();
        let mut w = BodyWriter::new();
        w.begin_get_one_resp(TxId::new(0, 0, 0), ReplyStatus::Busy);
        other.try_insert(0, &w).unwrap();
        other.flush(self.io.now, &mut net[peer as usize]);
        let (now, stack) = (self.io.now, &mut self.io.net);
        let got = net[0].rx_burst(now, 8, &mut |p: &[u8]| {
            assert!(
                stack.receive(now, p).is_some(),
                "the packet passes the session checks"
            );
        });
        assert_eq!(got, 1, "one packet from node {peer}");
    }

    /// Hands the response in `w` from `src` to the coordinator.
    pub fn respond(&mut self, src: NodeId, w: &BodyWriter) {
        let body = Body::decode(w.kind(), w.bytes()).unwrap();
        self.coord
            .on_response(&mut self.io, &self.procs, src, &body);
    }
}
