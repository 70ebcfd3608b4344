//! Whole nodes (NIC runtime, host log, host worker, client) on the simulated
//! network, driven pass by pass by a test script (the commit-point
//! counterexample and TLC trace replay). The script holds links, delivers
//! chosen held packets, submits transactions and crashes nodes; it reads
//! what each node's host log received (a [`LogTap`] between the NIC runtime
//! and the host worker), its locks, its stored values and its client's
//! outcomes.
//!
//! Three nodes, replication 2 (the counterexample's cluster): with the spec's
//! names n1, n2, n3 = nodes 0, 1, 2, key k1 has replicas {0, 1} (primary 0) and
//! k2 has replicas {1, 2} (primary 1), found by the placement ([`key_on`]).

#![allow(dead_code)] // each test file uses a part

pub mod evidence;
pub mod packets;
pub mod replay;
pub mod tap;
pub mod tlc;

use packets::{decode_msgs, Msg};
use splitkv_host::table::{HostTable, TableConfig, TableKind};
use splitkv_host::{Client, HostWorker};
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::ring::ring_pair;
use splitkv_layout::wire::NodeId;
use splitkv_layout::{Key, TxId};
use splitkv_nic::dma::local::LocalDma;
use splitkv_nic::net::stack::StackConfig;
use splitkv_nic::{
    CommitProtocol, HostPorts, Nanos, NicParts, NicRuntime, Placement, ProcError, Procedure,
    ProcedureRegistry, ReadView, TxPlan, UserAbort, WriteSet,
};
use splitkv_sim::{SimConfig, SimNetwork, SimTransport};
use std::collections::BTreeMap;
use std::sync::Arc;
use tap::LogTap;

/// Nodes in the cluster (the commit-point counterexample's).
pub const NODES: usize = 3;
/// Replicas per shard.
pub const REPLICATION: usize = 2;
/// Virtual time per pass.
pub const TICK_NS: Nanos = 200;
/// Largest value; values here are transaction names.
pub const VALUE_BYTES_MAX: usize = 64;
/// Keys each host table holds.
const TABLE_KEYS: usize = 64;
/// Bytes of each ring (host log, requests, outcomes, acks).
const RING_BYTES: usize = 1 << 16;
/// What a transaction reads for a key that was never written (the spec's
/// `Init0`).
pub const INIT: &str = "init";

/// Procedure 0: reads every key of its arguments and writes its own name to
/// the first `written` of them (the spec's read-modify-write; the others are
/// only read). Arguments: one byte of name length, the name, one byte
/// `written`, then key ids (table 0) as little-endian u64. Result: the
/// values read, in key order, separated by `,` ([`INIT`] for an absent key).
pub struct Rmw;

/// The arguments of [`Rmw`] for transaction `name` writing every key of `keys`.
pub fn rmw_args(name: &str, keys: &[Key]) -> Vec<u8> {
    rmw_args_reading(name, keys.len(), keys)
}

/// The arguments of [`Rmw`] for transaction `name` over `keys`, writing the
/// first `written` and only reading the rest.
pub fn rmw_args_reading(name: &str, written: usize, keys: &[Key]) -> Vec<u8> {
    let mut a = vec![name.len() as u8];
    a.extend_from_slice(name.as_bytes());
    a.push(written as u8);
    for k in keys {
        a.extend_from_slice(&k.id.to_le_bytes());
    }
    a
}

/// The name, the count written and the keys of [`Rmw`]'s arguments.
type RmwArgs<'a> = (&'a [u8], usize, Vec<Key>);

fn rmw_parse(args: &[u8]) -> Result<RmwArgs<'_>, ProcError> {
    let n = *args.first().ok_or(ProcError::BadArgs("empty"))? as usize;
    let name = args.get(1..1 + n).ok_or(ProcError::BadArgs("name"))?;
    let written = *args.get(1 + n).ok_or(ProcError::BadArgs("written"))? as usize;
    let keys = &args[2 + n..];
    if !keys.len().is_multiple_of(8) || written > keys.len() / 8 {
        return Err(ProcError::BadArgs("keys"));
    }
    let keys = keys
        .chunks_exact(8)
        .map(|c| Key::new(0, u64::from_le_bytes(c.try_into().unwrap())))
        .collect();
    Ok((name, written, keys))
}

impl Procedure for Rmw {
    fn name(&self) -> &'static str {
        "rmw"
    }
    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        let (_, written, keys) = rmw_parse(args)?;
        keys.iter().take(written).for_each(|k| plan.write(*k));
        keys.iter().skip(written).for_each(|k| plan.read(*k));
        Ok(())
    }
    fn execute(
        &self,
        args: &[u8],
        reads: &ReadView,
        writes: &mut WriteSet,
        result: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        let (name, written, keys) = rmw_parse(args).map_err(|_| UserAbort)?;
        for (i, k) in keys.iter().enumerate() {
            if i > 0 {
                result.push(b',');
            }
            result.extend_from_slice(reads.get(k).unwrap_or(INIT.as_bytes()));
            if i < written {
                writes.put(*k, name);
            }
        }
        Ok(())
    }
}

/// A key of table 0 whose replicas, primary first, are exactly `want`.
pub fn key_on(placement: &Placement, want: &[NodeId]) -> Key {
    (0..100_000u64)
        .map(|i| Key::new(0, i))
        .find(|k| {
            placement.primary(k) == want[0]
                && (0..placement.nodes() as NodeId)
                    .all(|n| placement.is_replica(n, k) == want.contains(&n))
        })
        .expect("a key with those replicas")
}

/// One node's components.
pub struct ScriptNode {
    /// The protocol engine.
    pub nic: NicRuntime,
    /// Records what the NIC runtime appends to the host log, then passes it on.
    pub tap: LogTap,
    /// Applies the host log to the table.
    pub worker: HostWorker,
    /// The application's client.
    pub client: Client,
    /// False once crashed (never polled again).
    pub alive: bool,
}

fn build_node(
    node: NodeId,
    placement: Placement,
    transport: SimTransport,
    commit: CommitProtocol,
) -> ScriptNode {
    let table = HostTable::new(
        TableKind::Robinhood,
        &TableConfig::new(TABLE_KEYS, VALUE_BYTES_MAX),
    )
    .expect("table");
    let (memory, layout) = table.dma();
    let (log_tx, log_rx) = ring_pair(RING_BYTES).unwrap();
    let (tap_tx, tap_rx) = ring_pair(RING_BYTES).unwrap();
    let (req_tx, req_rx) = ring_pair(RING_BYTES).unwrap();
    let (out_tx, out_rx) = ring_pair(RING_BYTES).unwrap();
    let (ack_tx, ack_rx) = ring_pair(RING_BYTES).unwrap();
    let mut procedures = ProcedureRegistry::new();
    procedures.register(Arc::new(Rmw));
    let nic = NicRuntime::new(NicParts {
        node,
        placement,
        table: layout,
        value_bytes_max: table.value_bytes_max(),
        procedures,
        dma: Box::new(LocalDma::new(memory, log_tx, 0)),
        transport: Box::new(transport),
        host: HostPorts::one_client(req_rx, out_tx, ack_rx),
        cache_objects: TABLE_KEYS,
        seed: node as u64,
        net: StackConfig::default(),
        commit,
    })
    .expect("runtime");
    ScriptNode {
        nic,
        tap: LogTap::new(log_rx, tap_tx),
        worker: HostWorker::new(table, tap_rx, ack_tx),
        client: Client::new(req_tx, out_rx),
        alive: true,
    }
}

/// The scripted cluster.
pub struct Cluster {
    /// Key placement (3 nodes, replication 2).
    pub placement: Placement,
    /// The simulated network (holds, deliveries, crashes).
    pub net: SimNetwork,
    /// Nodes by id.
    pub nodes: Vec<ScriptNode>,
    /// Virtual time.
    pub now: Nanos,
    /// Client outcomes: (node, req_id) → (status, result).
    pub outcomes: BTreeMap<(NodeId, u64), (TxStatus, Vec<u8>)>,
}

impl Cluster {
    /// Three fresh nodes running Xenic OCC on a network without faults,
    /// seeded by `seed`.
    pub fn new(seed: u64) -> Cluster {
        Cluster::with_protocol(seed, CommitProtocol::XenicOcc)
    }

    /// Three fresh nodes running `commit` on a network without faults,
    /// seeded by `seed`.
    pub fn with_protocol(seed: u64, commit: CommitProtocol) -> Cluster {
        let placement = Placement::new(NODES, REPLICATION).unwrap();
        let cfg = SimConfig {
            seed,
            ..SimConfig::default()
        };
        let (net, ends) = SimNetwork::new(NODES, cfg);
        let nodes = ends
            .into_iter()
            .enumerate()
            .map(|(i, t)| build_node(i as NodeId, placement, t, commit))
            .collect();
        Cluster {
            placement,
            net,
            nodes,
            now: 0,
            outcomes: BTreeMap::new(),
        }
    }

    /// Holds every link between two distinct nodes.
    pub fn hold_all(&self) {
        for s in 0..NODES as NodeId {
            for d in (0..NODES as NodeId).filter(|d| *d != s) {
                self.net.hold(s, d, true, self.now);
            }
        }
    }

    /// One pass: every live node's NIC runtime, log tap, host worker and
    /// client, in node order.
    pub fn pass(&mut self) {
        self.now += TICK_NS;
        self.net.tick(self.now);
        for (id, n) in self.nodes.iter_mut().enumerate() {
            if !n.alive {
                continue;
            }
            n.nic.run_iteration(self.now);
            n.tap.pump();
            n.worker.run_iteration(self.now);
            let outcomes = &mut self.outcomes;
            n.client
                .poll(16, |o| {
                    outcomes.insert((id as NodeId, o.req_id), (o.status, o.result.to_vec()));
                })
                .expect("outcome ring");
        }
    }

    /// `count` passes.
    pub fn run(&mut self, count: usize) {
        (0..count).for_each(|_| self.pass());
    }

    /// Passes until `done` holds (checked after each), at most `max`; whether
    /// it held.
    pub fn run_until(&mut self, max: usize, mut done: impl FnMut(&Cluster) -> bool) -> bool {
        for _ in 0..max {
            self.pass();
            if done(self) {
                return true;
            }
        }
        false
    }

    /// Submits [`Rmw`] of `name` writing every key of `keys` at `node`'s
    /// client as `req_id`.
    pub fn submit(&mut self, node: NodeId, req_id: u64, name: &str, keys: &[Key]) {
        self.submit_reading(node, req_id, name, keys.len(), keys);
    }

    /// Submits [`Rmw`] of `name` over `keys`, writing the first `written`,
    /// at `node`'s client as `req_id`.
    pub fn submit_reading(
        &mut self,
        node: NodeId,
        req_id: u64,
        name: &str,
        written: usize,
        keys: &[Key],
    ) {
        self.nodes[node as usize]
            .client
            .submit(req_id, 0, &rmw_args_reading(name, written, keys))
            .expect("submit");
    }

    /// Crashes `node` now: its packets are dropped, it is never polled again.
    pub fn crash(&mut self, node: NodeId) {
        self.net.crash(node, self.now);
        self.nodes[node as usize].alive = false;
    }

    /// The held packets of link `src → dst`, in link order, with their
    /// protocol messages.
    pub fn held(&self, src: NodeId, dst: NodeId) -> Vec<(u64, Vec<Msg>)> {
        self.net
            .held(src, dst)
            .into_iter()
            .map(|p| (p.seq, decode_msgs(&p.bytes)))
            .collect()
    }

    /// Delivers, in link order, the held packets of `src → dst` up to and
    /// including the first that carries a message `want` accepts; returns
    /// every protocol message delivered, or `None` (nothing delivered) if no
    /// held packet carries one.
    pub fn deliver_through(
        &self,
        src: NodeId,
        dst: NodeId,
        want: impl Fn(&Msg) -> bool,
    ) -> Option<Vec<Msg>> {
        let held = self.held(src, dst);
        let last = held.iter().position(|(_, m)| m.iter().any(&want))?;
        let mut out = Vec::new();
        for (seq, msgs) in held.into_iter().take(last + 1) {
            assert!(self.net.deliver_held(src, dst, seq), "packet {seq} held");
            out.extend(msgs);
        }
        Some(out)
    }

    /// Delivers the held packets of `src → dst` from the head of the link
    /// while `ok` accepts all their messages (ack-only packets included).
    pub fn deliver_while(&self, src: NodeId, dst: NodeId, ok: impl Fn(&Msg) -> bool) {
        for (seq, msgs) in self.held(src, dst) {
            if !msgs.iter().all(&ok) {
                return;
            }
            assert!(self.net.deliver_held(src, dst, seq), "packet {seq} held");
        }
    }

    /// The value `node` stores for `key`: the newer of its NIC cache's and
    /// its host table's copies, `None` if neither holds the key.
    pub fn stored(&self, node: NodeId, key: &Key) -> Option<Vec<u8>> {
        let n = &self.nodes[node as usize];
        let mut v = Vec::new();
        let table = n.worker.table().get(key, &mut v).map(|m| (m.version(), v));
        let cached = n
            .nic
            .index()
            .peek(key)
            .map(|o| (o.meta.version(), o.value.clone()));
        match (table, cached) {
            (Some(t), Some(c)) => Some(if c.0 >= t.0 { c.1 } else { t.1 }),
            (t, c) => t.or(c).map(|x| x.1),
        }
    }

    /// The transaction holding `key`'s lock at `node`, if any.
    pub fn lock_holder(&self, node: NodeId, key: &Key) -> Option<TxId> {
        self.nodes[node as usize].nic.index().lock_holder(key)
    }

    /// The live nodes.
    pub fn live(&self) -> impl Iterator<Item = NodeId> + '_ {
        (0..NODES as NodeId).filter(|n| self.nodes[*n as usize].alive)
    }
}
