//! What the whole-runtime tests share: node 0's NIC runtime over a Robinhood
//! layout and local DMA, alone with its rings, and packets as node 1's
//! session would send them.

#![allow(dead_code)] // each test file uses a part

pub mod coordinator;
pub mod server;

use splitkv_layout::host_nic::{HostToNic, LogApplied};
use splitkv_layout::ring::{ring_pair, RingConsumer, RingProducer};
use splitkv_layout::robinhood_layout::{TableConfig, TableLayout};
use splitkv_layout::wire::{BodyWriter, MsgHeader, NodeId, PacketHeader};
use splitkv_layout::Region;
use splitkv_nic::dma::local::LocalDma;
use splitkv_nic::index::HostTableLayout;
use splitkv_nic::net::mem::MemTransport;
use splitkv_nic::net::stack::{StackConfig, CLUSTER_ID_DEFAULT, INCARNATION_DEFAULT};
use splitkv_nic::{HostPorts, NicParts, NicRuntime, Placement, ProcedureRegistry};
use std::sync::{Arc, Mutex};

/// A node's runtime and the host ends of its rings (kept open).
pub struct LoneRuntime {
    /// The runtime under test.
    pub nic: NicRuntime,
    /// The host log it appends to.
    pub log: RingConsumer,
    /// The host workers' acknowledgement ring, as the host writes it.
    pub acks: RingProducer,
    /// The client's request ring, as the application writes it.
    pub requests: RingProducer,
    /// The client's outcome ring, as the application reads it.
    pub outcomes: RingConsumer,
}

/// Node 0 of `placement` over `transport` with network stack `net`: a
/// 64-key Robinhood layout with values of at most `value_bytes_max` bytes,
/// one client, no procedures.
pub fn lone_runtime(
    placement: Placement,
    transport: MemTransport,
    value_bytes_max: usize,
    net: StackConfig,
) -> LoneRuntime {
    node_runtime(
        0,
        placement,
        transport,
        value_bytes_max,
        net,
        ProcedureRegistry::new(),
    )
}

/// Node `node` of `placement` over `transport` with network stack `net` and
/// `procedures`: a 64-key Robinhood layout with values of at most
/// `value_bytes_max` bytes, one client.
pub fn node_runtime(
    node: NodeId,
    placement: Placement,
    transport: impl splitkv_nic::net::Transport + 'static,
    value_bytes_max: usize,
    net: StackConfig,
    procedures: ProcedureRegistry,
) -> LoneRuntime {
    let layout = TableLayout::new(&TableConfig::new(64, value_bytes_max)).unwrap();
    let (log_tx, log) = ring_pair(1 << 16).unwrap();
    let (requests, req_rx) = ring_pair(1 << 12).unwrap();
    let (out_tx, outcomes) = ring_pair(1 << 12).unwrap();
    let (acks, ack_rx) = ring_pair(1 << 12).unwrap();
    let dma = LocalDma::new(Arc::new(Region::new(layout.region_bytes())), log_tx, 0);
    let nic = NicRuntime::new(NicParts {
        node,
        placement,
        table: HostTableLayout::Robinhood(layout),
        value_bytes_max,
        procedures,
        dma: Box::new(dma),
        transport: Box::new(transport),
        host: HostPorts::one_client(req_rx, out_tx, ack_rx),
        cache_objects: 64,
        seed: 1,
        net,
        commit: Default::default(),
    })
    .unwrap();
    LoneRuntime {
        nic,
        log,
        acks,
        requests,
        outcomes,
    }
}

/// The body in `w` as the one message of a packet from node 1 to node 0
/// (both their first incarnation), numbered `seq` in node 1's session with
/// node 0.
pub fn peer_packet(seq: u32, w: &BodyWriter) -> Vec<u8> {
    let mut msg = Vec::new();
    MsgHeader::whole(w.kind(), w.bytes().len() as u32).encode(&mut msg);
    msg.extend_from_slice(w.bytes());
    let mut pkt = Vec::new();
    PacketHeader {
        src: 1,
        dst: 0,
        count: 1,
        len: msg.len() as u32,
        cluster_id: CLUSTER_ID_DEFAULT,
        src_incarnation: INCARNATION_DEFAULT,
        dst_incarnation: INCARNATION_DEFAULT,
        seq,
        ..PacketHeader::default()
    }
    .encode(&mut pkt);
    pkt.extend_from_slice(&msg);
    pkt
}

/// A key of table 0 whose replicas under `placement` are exactly `want`,
/// primary first.
pub fn key_on(placement: &Placement, want: &[u16]) -> splitkv_layout::Key {
    (0..10_000u64)
        .map(|i| splitkv_layout::Key::new(0, i))
        .find(|k| {
            placement.primary(k) == want[0]
                && (0..placement.nodes() as u16)
                    .all(|n| placement.is_replica(n, k) == want.contains(&n))
        })
        .expect("a key with those replicas")
}

/// A stand-in for a host worker's turn: hands every entry of the host log
/// `log` to `apply`, then, if there was any, acknowledges the log as applied
/// up to what was consumed (recovery and a NIC restart wait for that).
pub fn drain_host_log(
    log: &mut RingConsumer,
    acks: &mut RingProducer,
    mut apply: impl FnMut(&[u8]),
) {
    let mut buf = Vec::new();
    let mut popped = false;
    while log.try_pop(&mut buf).unwrap() {
        popped = true;
        apply(&buf);
    }
    if popped {
        buf.clear();
        HostToNic::LogApplied(LogApplied {
            applied_bytes: log.consumed_bytes(),
        })
        .encode(&mut buf);
        acks.try_push(&buf).unwrap();
    }
}

/// A node's network endpoint shared by its successive runtimes (only one
/// polls it at a time): a test keeps it, so a restarted runtime gets it
/// again.
pub struct Shared<T>(pub Arc<Mutex<T>>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<T: splitkv_nic::net::Transport> splitkv_nic::net::Transport for Shared<T> {
    fn mtu(&self) -> usize {
        self.0.lock().unwrap().mtu()
    }
    fn is_lossy(&self) -> bool {
        self.0.lock().unwrap().is_lossy()
    }
    fn tx_burst(&mut self, now: splitkv_nic::Nanos, p: &[splitkv_nic::net::TxPacket<'_>]) -> usize {
        self.0.lock().unwrap().tx_burst(now, p)
    }
    fn tx_flush(&mut self, now: splitkv_nic::Nanos) {
        self.0.lock().unwrap().tx_flush(now)
    }
    fn rx_burst(
        &mut self,
        now: splitkv_nic::Nanos,
        max: usize,
        on: &mut dyn FnMut(&[u8]),
    ) -> usize {
        self.0.lock().unwrap().rx_burst(now, max, on)
    }
}
