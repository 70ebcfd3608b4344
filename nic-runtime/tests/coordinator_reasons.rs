//! The coordinator (`nic-runtime/src/protocol/coordinator.rs`) tells the
//! application why a transaction aborted (issue 9 §4): a server's refusal
//! reason becomes the outcome's status — a DMA or host-decode failure is
//! `HostFailure`, never a lock conflict — and metadata a peer planted in an
//! EXECUTE response aborts the transaction (releasing its locks) instead of
//! being trusted.

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
use std::sync::Arc;

/// Writes b"new" to key (0, 1).
struct WriteOne;

const KEY: Key = Key::new(0, 1);

impl Procedure for WriteOne {
    fn name(&self) -> &'static str {
        "write-one"
    }
    fn plan(&self, _: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        plan.write(KEY);
        Ok(())
    }
    fn execute(
        &self,
        _: &[u8],
        _: &ReadView,
        w: &mut WriteSet,
        _: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        w.put(KEY, b"new");
        Ok(())
    }
}

struct Rig {
    io: Io,
    coord: Coordinator,
    procs: ProcedureRegistry,
}

fn rig() -> Rig {
    let (log_tx, _log_rx) = splitkv_layout::ring::ring_pair(1 << 12).unwrap();
    let dma = LocalDma::new(Arc::new(splitkv_layout::Region::new(64)), log_tx, 0);
    let mut procs = ProcedureRegistry::new();
    procs.register(Arc::new(WriteOne));
    Rig {
        io: Io {
            node: 0,
            placement: Placement::new(3, 2).unwrap(),
            value_bytes_max: 64,
            now: 0,
            net: Stack::new(0, 3, 4096, false, &StackConfig::default()).unwrap(),
            dma: Box::new(dma),
            w: BodyWriter::new(),
            send_fault: None,
        },
        coord: Coordinator::new(),
        procs,
    }
}

impl Rig {
    /// Messages sent since the last call: (destination, kind, tx_id).
    fn sent(&mut self) -> Vec<(NodeId, MsgKind, u64)> {
        self.io.net.seal();
        let mut out = Vec::new();
        // Every destination's backlog, this node's own (the loopback) included.
        let packets: Vec<(NodeId, Vec<u8>)> = self
            .io
            .net
            .batcher_mut()
            .backlogs_mut()
            .iter_mut()
            .enumerate()
            .flat_map(|(d, q)| q.drain(..).map(move |p| (d as NodeId, p)))
            .collect();
        for (dst, bytes) in packets {
            let (_, msgs) = decode_packet(&bytes).unwrap();
            for m in msgs {
                let (_, body) = m.unwrap();
                out.push((dst, body.kind(), body.tx_id()));
            }
        }
        out
    }

    fn respond(&mut self, src: NodeId, w: &BodyWriter) {
        let body = Body::decode(w.kind(), w.bytes()).unwrap();
        self.coord
            .on_response(&mut self.io, &self.procs, src, &body);
    }

    fn outcome(&mut self) -> TxStatus {
        let o = self.coord.outcomes().pop_front().expect("an outcome");
        o.status
    }
}

/// Starts the transaction; returns its tx_id and the primary it went to.
fn start(r: &mut Rig) -> (u64, NodeId) {
    let req = TxRequest {
        req_id: 1,
        procedure: 0,
        args: b"",
    };
    r.coord.start(&mut r.io, &r.procs, &req);
    let sent = r.sent();
    let [(primary, MsgKind::Execute, tx)] = sent[..] else {
        panic!("one EXECUTE expected: {sent:?}");
    };
    assert_eq!(primary, r.io.placement.primary(&KEY));
    (tx, primary)
}

#[test]
fn a_host_failure_is_reported_as_such() {
    let mut r = rig();
    let (tx, primary) = start(&mut r);
    let mut w = BodyWriter::new();
    w.begin_execute_resp(tx, ReplyStatus::HostFailure);
    r.respond(primary, &w);
    assert_eq!(r.outcome(), TxStatus::HostFailure);
    let s = r.coord.stats();
    assert_eq!((s.host_failures, s.execute_aborts), (1, 1));
    assert!(r.sent().is_empty(), "nothing locked, nothing to release");
}

#[test]
fn planted_locked_bits_abort_and_release_the_locks() {
    let mut r = rig();
    let (tx, primary) = start(&mut r);
    let mut w = BodyWriter::new();
    w.begin_execute_resp(tx, ReplyStatus::Ok);
    w.push_item(&KEY, ObjectMeta::new(3, ObjectFlags::LOCKED), b"old");
    r.respond(primary, &w);
    assert_eq!(r.outcome(), TxStatus::Rejected);
    assert_eq!(r.coord.stats().malformed_responses, 1);
    assert_eq!(r.sent(), vec![(primary, MsgKind::Abort, tx)]);
}

#[test]
fn a_refused_log_aborts_with_its_reason() {
    let mut r = rig();
    let (tx, primary) = start(&mut r);
    let mut w = BodyWriter::new();
    w.begin_execute_resp(tx, ReplyStatus::Ok);
    w.push_item(&KEY, ObjectMeta::new(3, ObjectFlags::empty()), b"old");
    r.respond(primary, &w);
    let sent = r.sent();
    // LOG goes to every replica, primary included (issue 11's commit point).
    let mut backups: Vec<NodeId> = r.io.placement.backups(&KEY).collect();
    backups.insert(0, primary);
    assert_eq!(sent.len(), backups.len());
    assert!(sent
        .iter()
        .all(|&(_, kind, t)| kind == MsgKind::Log && t == tx));
    for (i, &b) in backups.iter().enumerate() {
        let status = if i == 0 {
            ReplyStatus::TooLarge
        } else {
            ReplyStatus::Ok
        };
        w.ack(MsgKind::LogAck, tx, status);
        r.respond(b, &w);
    }
    assert_eq!(r.outcome(), TxStatus::TooLarge);
    assert_eq!(r.coord.stats().log_refusals, 1);
    // The ABORT goes to every replica sent the LOG: they drop its records.
    let mut aborts = r.sent();
    aborts.sort_by_key(|&(d, _, _)| d);
    let mut want: Vec<_> = backups.iter().map(|&b| (b, MsgKind::Abort, tx)).collect();
    want.sort_by_key(|&(d, _, _)| d);
    assert_eq!(aborts, want);
}
