//! The rig of the NIC-restart tests (`nic_restart.rs`,
//! `nic_restart_recovery.rs`): whole runtimes on the in-memory network, four
//! nodes, replication 2, each node's host a stand-in that reads its host log
//! (LOG, COMMIT and ABORT records) and acknowledges it as applied, and a
//! transport that holds back or drops packets per destination.

#![allow(dead_code)] // each test file uses a part

use crate::support::{self, key_on, node_runtime, Shared};
use splitkv_layout::host_nic::{HostToNic, NicToHost, TxRequest, TxStatus};
use splitkv_layout::log_record::{LogKind, LogRecords};
use splitkv_layout::ring::{RingConsumer, RingProducer};
use splitkv_layout::{Key, TxId};
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::net::stack::StackConfig;
use splitkv_nic::net::{Transport, TxPacket};
use splitkv_nic::runtime::Availability;
use splitkv_nic::{
    Nanos, NicRuntime, Placement, ProcError, Procedure, ProcedureRegistry, ReadView, TxPlan,
    UserAbort, WriteSet,
};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

pub const NODES: usize = 4;
pub const STEP_NS: Nanos = 5_000;
/// Iterations any wait in these tests may take.
pub const ITERATIONS_MAX: usize = 2_000;

/// Writes the keys named by its arguments (8 bytes each), each to the first
/// 8 bytes of the arguments: the transaction's marker.
pub struct WriteArgs;

impl Procedure for WriteArgs {
    fn name(&self) -> &'static str {
        "write-args"
    }
    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        for c in args[8..].chunks(8) {
            plan.write(Key::new(0, u64::from_le_bytes(c.try_into().unwrap())));
        }
        Ok(())
    }
    fn execute(
        &self,
        args: &[u8],
        _: &ReadView,
        w: &mut WriteSet,
        _: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        for c in args[8..].chunks(8) {
            w.put(
                Key::new(0, u64::from_le_bytes(c.try_into().unwrap())),
                &args[..8],
            );
        }
        Ok(())
    }
}

/// The in-memory transport, holding every packet to the nodes in `blocked`
/// (a mask) until they are unblocked, in order; packets held for the nodes
/// in `lost` (a mask) are dropped instead (never sent: a NIC that died).
pub struct Gated {
    inner: splitkv_nic::net::mem::MemTransport,
    blocked: Arc<AtomicU32>,
    lost: Arc<AtomicU32>,
    held: Vec<(u16, Vec<u8>)>,
}

impl Gated {
    fn release(&mut self, now: Nanos) {
        let blocked = self.blocked.load(Ordering::Relaxed);
        let lost = self.lost.swap(0, Ordering::Relaxed);
        self.held.retain(|(dst, _)| lost & (1 << dst) == 0);
        let mut keep = Vec::new();
        for (dst, bytes) in self.held.drain(..) {
            if blocked & (1 << dst) != 0 {
                keep.push((dst, bytes));
            } else {
                let sent = self.inner.tx_burst(now, &[TxPacket { dst, bytes: &bytes }]);
                assert_eq!(sent, 1, "the test's in-memory queues are unbounded");
            }
        }
        self.held = keep;
    }
}

impl Transport for Gated {
    fn mtu(&self) -> usize {
        self.inner.mtu()
    }
    fn is_lossy(&self) -> bool {
        self.inner.is_lossy()
    }
    fn tx_burst(&mut self, now: Nanos, packets: &[TxPacket<'_>]) -> usize {
        self.release(now);
        let blocked = self.blocked.load(Ordering::Relaxed);
        for p in packets {
            if blocked & (1 << p.dst) != 0 || self.held.iter().any(|(d, _)| *d == p.dst) {
                self.held.push((p.dst, p.bytes.to_vec()));
            } else {
                assert_eq!(self.inner.tx_burst(now, std::slice::from_ref(p)), 1);
            }
        }
        packets.len()
    }
    fn tx_flush(&mut self, now: Nanos) {
        self.release(now);
        self.inner.tx_flush(now);
    }
    fn rx_burst(&mut self, now: Nanos, max: usize, on: &mut dyn FnMut(&[u8])) -> usize {
        // Polled every iteration: packets unblocked since go out now.
        if !self.held.is_empty() {
            self.release(now);
            self.inner.tx_flush(now);
        }
        self.inner.rx_burst(now, max, on)
    }
}

/// What a node's host log held: LOG records per transaction (key, value),
/// and the decided transactions.
#[derive(Default)]
pub struct HostLog {
    pub logs: HashMap<TxId, Vec<(Key, Vec<u8>)>>,
    pub commits: HashSet<TxId>,
    pub aborts: HashSet<TxId>,
}

pub struct Node {
    pub nic: NicRuntime,
    pub requests: RingProducer,
    pub outcomes: RingConsumer,
    pub log: RingConsumer,
    pub acks: RingProducer,
    pub host: HostLog,
    /// Outcomes by request id.
    pub told: HashMap<u64, TxStatus>,
    /// Blocked destinations of this node's packets.
    pub blocked: Arc<AtomicU32>,
    /// Destinations whose held packets are dropped at the next release.
    pub lost: Arc<AtomicU32>,
    /// This node's network endpoint, which a fresh process takes over
    /// ([`fresh_process`]).
    pub endpoint: Shared<Gated>,
}

impl Node {
    /// One NIC iteration, then the host stand-in and the client.
    pub fn step(&mut self, now: Nanos) {
        self.nic.run_iteration(now);
        let host = &mut self.host;
        support::drain_host_log(&mut self.log, &mut self.acks, |entry| {
            for r in LogRecords::new(entry) {
                let r = r.unwrap();
                match r.kind {
                    LogKind::Log => {
                        let e = host.logs.entry(r.tx_id).or_default();
                        e.push((r.key, r.value.to_vec()));
                    }
                    LogKind::Commit => _ = host.commits.insert(r.tx_id),
                    LogKind::Abort => _ = host.aborts.insert(r.tx_id),
                    LogKind::Lock | LogKind::Repl => {}
                }
            }
        });
        let mut buf = Vec::new();
        while self.outcomes.try_pop(&mut buf).unwrap() {
            let NicToHost::TxOutcome(o) = NicToHost::decode(&buf).unwrap();
            assert!(self.told.insert(o.req_id, o.status).is_none(), "told twice");
        }
    }

    /// Submits request `req_id` writing `keys`.
    pub fn submit(&mut self, req_id: u64, keys: &[Key]) {
        let mut args = req_id.to_le_bytes().to_vec();
        keys.iter()
            .for_each(|k| args.extend_from_slice(&k.id.to_le_bytes()));
        let mut buf = Vec::new();
        HostToNic::TxRequest(TxRequest {
            req_id,
            procedure: 0,
            args: &args,
        })
        .encode(&mut buf);
        self.requests.try_push(&buf).unwrap();
    }
}

pub fn placement() -> Placement {
    Placement::new(NODES, 2).unwrap()
}

pub fn cluster() -> Vec<Node> {
    let mut nodes = Vec::new();
    for (id, t) in mem_network(NODES).into_iter().enumerate() {
        let blocked = Arc::new(AtomicU32::new(0));
        let lost = Arc::new(AtomicU32::new(0));
        let gated = Gated {
            inner: t,
            blocked: blocked.clone(),
            lost: lost.clone(),
            held: Vec::new(),
        };
        let endpoint = Shared(Arc::new(Mutex::new(gated)));
        nodes.push(process(
            id as u16,
            endpoint,
            StackConfig::default(),
            blocked,
            lost,
        ));
    }
    nodes
}

/// Node `id`'s process over `endpoint`, with an empty host.
fn process(
    id: u16,
    endpoint: Shared<Gated>,
    net: StackConfig,
    blocked: Arc<AtomicU32>,
    lost: Arc<AtomicU32>,
) -> Node {
    let mut procedures = ProcedureRegistry::new();
    procedures.register(Arc::new(WriteArgs));
    let rt = node_runtime(id, placement(), endpoint.clone(), 64, net, procedures);
    Node {
        nic: rt.nic,
        requests: rt.requests,
        outcomes: rt.outcomes,
        log: rt.log,
        acks: rt.acks,
        host: HostLog::default(),
        told: HashMap::new(),
        blocked,
        lost,
        endpoint,
    }
}

/// Node `id`'s process restarted (a whole process: its NIC runtime, host
/// and client start empty) as incarnation `incarnation`, on the same
/// network endpoint.
pub fn fresh_process(nodes: &mut [Node], id: usize, incarnation: u32) {
    let old = &nodes[id];
    let (endpoint, blocked, lost) = (old.endpoint.clone(), old.blocked.clone(), old.lost.clone());
    let net = StackConfig {
        incarnation,
        ..StackConfig::default()
    };
    nodes[id] = process(id as u16, endpoint, net, blocked, lost);
}

pub fn step_all(nodes: &mut [Node], now: &mut Nanos) {
    *now += STEP_NS;
    nodes.iter_mut().for_each(|n| n.step(*now));
}

/// Steps every node until `done`, at most [`ITERATIONS_MAX`] times.
pub fn until(nodes: &mut [Node], now: &mut Nanos, what: &str, done: impl Fn(&[Node]) -> bool) {
    for _ in 0..ITERATIONS_MAX {
        if done(nodes) {
            return;
        }
        step_all(nodes, now);
    }
    for (i, n) in nodes.iter().enumerate() {
        eprintln!(
            "node {i}: {:?} {:?}\n  {:?}",
            n.nic.availability(),
            n.nic.rebuild_stats(),
            n.nic.stats().net.sessions
        );
    }
    panic!("not within {ITERATIONS_MAX} iterations: {what}");
}

pub fn restart(n: &mut Node, now: Nanos, incarnation: u32) {
    n.nic.restart_nic(now, incarnation).unwrap();
    assert_eq!(n.nic.incarnation(), incarnation);
}

/// [`t1_held_on_its_way_to_node_3`] once T1's LOG is in node 2's host
/// log; returns the nodes, the time and T1's transaction id.
pub fn t1_logged_at_node_2() -> (Vec<Node>, Nanos, TxId) {
    let (mut nodes, mut now, _) = t1_held_on_its_way_to_node_3();
    until(&mut nodes, &mut now, "T1's LOG at node 2", |n| {
        !n[2].host.logs.is_empty()
    });
    let t1 = *nodes[2].host.logs.keys().next().unwrap();
    (nodes, now, t1)
}

/// Steps until node 0 serves again and none of `live` is recovering;
/// returns node 0's rebuild counters.
pub fn rebuilt_and_resumed(
    nodes: &mut [Node],
    now: &mut Nanos,
    live: &[usize],
) -> splitkv_nic::runtime::RebuildStats {
    until(nodes, now, "node 0 rebuilt, recovery resumed", |n| {
        n[0].nic.availability() == Availability::Serving
            && !live.iter().any(|&i| n[i].nic.recovering())
    });
    nodes[0].nic.rebuild_stats()
}

/// Applies configuration `c` at every node (a recovery epoch begins).
pub fn configure(nodes: &mut [Node], c: &splitkv_nic::membership::Configuration) {
    nodes.iter_mut().for_each(|n| n.nic.apply_configuration(c));
}

/// A cluster in which T1 (node 0, request 1) writes a key `k` of
/// replicas 2 and 3 and holds its lock at node 2, its packets to node 3
/// held back (node 0's `blocked`); returns the nodes, the time and `k`.
pub fn t1_held_on_its_way_to_node_3() -> (Vec<Node>, Nanos, Key) {
    let k = key_on(&placement(), &[2, 3]);
    let mut nodes = cluster();
    let mut now = 0;
    nodes[0].blocked.store(1 << 3, Ordering::Relaxed);
    nodes[0].submit(1, &[k]);
    until(&mut nodes, &mut now, "T1 locks k at node 2", |n| {
        n[2].nic.index().lock_holder(&k).is_some()
    });
    (nodes, now, k)
}
