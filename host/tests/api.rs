//! The application API and the node boundary: bad input gets a typed error or is
//! dropped and counted, and changes nothing.

use proptest::prelude::*;
use splitkv_host::{build_node, ClientError, Node, NodeConfig};
use splitkv_layout::host_nic::{HostToNic, LogApplied, TxStatus, ARGS_BYTES_MAX};
use splitkv_layout::wire::{BodyWriter, MsgHeader, MsgKind, PacketHeader};
use splitkv_layout::{Key, ObjectMeta, TxId};
use splitkv_nic::net::mem::{mem_network, MemTransport};
use splitkv_nic::net::stack::{CLUSTER_ID_DEFAULT, INCARNATION_DEFAULT};
use splitkv_nic::net::{Transport, TxPacket};
use splitkv_nic::{
    ClientClosed, Placement, ProcError, Procedure, ProcedureRegistry, ReadView, TxPlan, UserAbort,
    WriteSet,
};
use std::sync::Arc;

/// `put(id, value)`: writes `value` to key (0, id).
struct Put;

impl Procedure for Put {
    fn name(&self) -> &'static str {
        "put"
    }
    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        let id = args
            .get(..8)
            .ok_or(ProcError::BadArgs("put needs an 8-byte id"))?;
        plan.write(Key::new(0, u64::from_le_bytes(id.try_into().unwrap())));
        Ok(())
    }
    fn execute(
        &self,
        args: &[u8],
        _: &ReadView,
        w: &mut WriteSet,
        _: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        w.put(
            Key::new(0, u64::from_le_bytes(args[..8].try_into().unwrap())),
            &args[8..],
        );
        Ok(())
    }
}

/// A one-node cluster (replication 1) in a two-endpoint network; the second
/// endpoint is the test's, for sending raw packets.
fn node() -> (Node, MemTransport) {
    let mut net = mem_network(2);
    let peer = net.pop().unwrap();
    let t = net.pop().unwrap();
    let mut procs = ProcedureRegistry::new();
    procs.register(Arc::new(Put));
    let cfg = NodeConfig::new(0, Placement::new(2, 1).unwrap(), 1024, 8);
    (build_node(&cfg, procs, Box::new(t)).expect("node"), peer)
}

fn key_on_node0(placement: Placement) -> u64 {
    (0..)
        .find(|&i| placement.primary(&Key::new(0, i)) == 0)
        .unwrap()
}

fn run(n: &mut Node, passes: usize) {
    for i in 0..passes {
        n.nic.run_iteration(i as u64);
        n.worker.run_iteration(i as u64);
    }
}

fn outcome(n: &mut Node) -> (TxStatus, Vec<u8>) {
    let mut got = None;
    for _ in 0..1000 {
        run(n, 1);
        n.client
            .poll(1, |o| got = Some((o.status, o.result.to_vec())))
            .unwrap();
        if let Some(g) = got.take() {
            return g;
        }
    }
    panic!("no outcome");
}

fn put_args(id: u64, value: &[u8]) -> Vec<u8> {
    let mut a = id.to_le_bytes().to_vec();
    a.extend_from_slice(value);
    a
}

#[test]
fn oversized_value_is_rejected_and_changes_nothing() {
    let (mut n, _peer) = node();
    let id = key_on_node0(Placement::new(2, 1).unwrap());
    n.client.submit(1, 0, &put_args(id, b"8 bytes!")).unwrap();
    assert_eq!(outcome(&mut n).0, TxStatus::Committed);
    run(&mut n, 10);
    n.client.submit(2, 0, &put_args(id, b"nine byte")).unwrap();
    let (status, why) = outcome(&mut n);
    assert_eq!(status, TxStatus::TooLarge);
    assert_eq!(why, b"value too large");
    run(&mut n, 10);
    let mut v = Vec::new();
    let meta = n
        .worker
        .table()
        .get(&Key::new(0, id), &mut v)
        .expect("still there");
    assert_eq!((meta.version(), v.as_slice()), (1, &b"8 bytes!"[..]));
    assert_eq!(
        n.nic.index().locks_held(),
        0,
        "the rejected transaction released its lock"
    );
}

#[test]
fn oversized_arguments_are_a_typed_client_error() {
    let (mut n, _peer) = node();
    let err = n
        .client
        .submit(1, 0, &vec![0u8; ARGS_BYTES_MAX + 1])
        .unwrap_err();
    assert_eq!(
        err,
        ClientError::ArgsTooLarge {
            len: ARGS_BYTES_MAX + 1,
            max: ARGS_BYTES_MAX
        }
    );
    run(&mut n, 5);
    assert_eq!(
        n.nic.stats().coordinator.started,
        0,
        "nothing reached the node"
    );
}

#[test]
fn unknown_procedure_and_bad_args_are_rejected() {
    let (mut n, _peer) = node();
    n.client.submit(1, 9, b"").unwrap();
    let (status, why) = outcome(&mut n);
    assert_eq!(status, TxStatus::Rejected);
    assert_eq!(String::from_utf8(why).unwrap(), "unknown procedure 9");
    n.client.submit(2, 0, b"short").unwrap();
    assert_eq!(outcome(&mut n).0, TxStatus::Rejected);
}

#[test]
fn a_corrupt_request_ring_entry_closes_only_that_client() {
    let mut net = mem_network(2);
    let _peer = net.pop().unwrap();
    let t = net.pop().unwrap();
    let mut procs = ProcedureRegistry::new();
    procs.register(Arc::new(Put));
    let mut cfg = NodeConfig::new(0, Placement::new(2, 1).unwrap(), 1024, 8);
    cfg.clients = 2;
    let mut n = build_node(&cfg, procs, Box::new(t)).expect("node");
    let id = key_on_node0(Placement::new(2, 1).unwrap());
    n.client.submit_raw(b"\xffgarbage").unwrap();
    n.client.submit(1, 0, &put_args(id, b"after")).unwrap();
    n.more_clients[0]
        .submit(7, 0, &put_args(id, b"ok"))
        .unwrap();
    run(&mut n, 20);
    let mut got = Vec::new();
    n.more_clients[0]
        .poll(8, |o| got.push((o.req_id, o.status)))
        .unwrap();
    assert_eq!(
        got,
        vec![(7, TxStatus::Committed)],
        "the other client is served"
    );
    assert_eq!(
        n.client.poll(8, |_| {}).unwrap(),
        0,
        "the closed client's later request is not run"
    );
    let stats = n.nic.stats();
    assert_eq!(stats.clients.clients_closed, 1);
    assert_eq!(stats.coordinator.started, 1);
    assert!(matches!(
        n.nic.client_closed(0),
        Some(ClientClosed::BadEntry(_))
    ));
    assert_eq!(n.nic.client_closed(1), None);
    // The closed client stays closed; the open one keeps working.
    n.more_clients[0]
        .submit(8, 0, &put_args(id, b"again"))
        .unwrap();
    run(&mut n, 20);
    let mut again = Vec::new();
    n.more_clients[0].poll(8, |o| again.push(o.req_id)).unwrap();
    assert_eq!(again, vec![8]);
}

#[test]
fn a_non_request_message_on_a_request_ring_closes_the_client() {
    let (mut n, _peer) = node();
    let mut bytes = Vec::new();
    HostToNic::LogApplied(LogApplied { applied_bytes: 0 }).encode(&mut bytes);
    n.client.submit_raw(&bytes).unwrap();
    run(&mut n, 5);
    assert_eq!(n.nic.client_closed(0), Some(&ClientClosed::NotARequest));
    assert_eq!(n.nic.stats().clients.clients_closed, 1);
}

fn send(peer: &mut MemTransport, bytes: Vec<u8>) {
    peer.tx_burst(
        0,
        &[TxPacket {
            dst: 0,
            bytes: &bytes,
        }],
    );
}

#[test]
fn oversized_value_from_a_peer_never_reaches_the_host_log() {
    let (mut n, mut peer) = node();
    let mut w = BodyWriter::new();
    w.begin_items(MsgKind::Log, TxId::from_bits(5));
    w.push_item(&Key::new(0, 1), ObjectMeta(1), &[0u8; 9]);
    let mut pkt = Vec::new();
    let mut msg = Vec::new();
    MsgHeader::whole(MsgKind::Log, w.bytes().len() as u32).encode(&mut msg);
    msg.extend_from_slice(w.bytes());
    PacketHeader {
        src: 1,
        dst: 0,
        count: 1,
        len: msg.len() as u32,
        // As node 1's session would send its first packet to node 0.
        cluster_id: CLUSTER_ID_DEFAULT,
        src_incarnation: INCARNATION_DEFAULT,
        dst_incarnation: INCARNATION_DEFAULT,
        seq: 0,
        ..PacketHeader::default()
    }
    .encode(&mut pkt);
    pkt.extend_from_slice(&msg);
    send(&mut peer, pkt);
    run(&mut n, 10);
    assert_eq!(n.nic.stats().bad_packets, 1);
    assert_eq!(n.worker.stats().entries, 0);
    assert!(n.worker.table().is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn random_packets_never_panic_and_change_nothing(pkts in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 1..20)) {
        let (mut n, mut peer) = node();
        let count = pkts.len() as u64;
        for p in pkts {
            send(&mut peer, p);
        }
        run(&mut n, 5);
        prop_assert_eq!(n.nic.stats().bad_packets, count);
        prop_assert!(n.worker.table().is_empty());
        prop_assert_eq!(n.nic.index().locks_held(), 0);
    }
}
