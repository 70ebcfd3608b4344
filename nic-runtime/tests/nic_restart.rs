//! A NIC runtime that restarts alone (issue 12; `runtime::restart`), over
//! whole runtimes on the in-memory network: four nodes, replication 2, node
//! 2 restarted with a new incarnation while transactions commit. Each
//! node's host is a stand-in that reads its host log (LOG, COMMIT and ABORT
//! records) and acknowledges it as applied.

use splitkv_layout::host_nic::{HostToNic, NicToHost, TxRequest, TxStatus};
use splitkv_layout::log_record::{LogKind, LogRecords};
use splitkv_layout::ring::{RingConsumer, RingProducer};
use splitkv_layout::Key;
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
use std::sync::Arc;
use support::{key_on, node_runtime};

mod support;

const NODES: usize = 4;
const STEP_NS: Nanos = 5_000;
/// Iterations any wait in these tests may take.
const ITERATIONS_MAX: usize = 2_000;

/// Writes the keys named by its arguments (8 bytes each), each to the first
/// 8 bytes of the arguments: the transaction's marker.
struct WriteArgs;

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
struct Gated {
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
struct HostLog {
    logs: HashMap<u64, Vec<(Key, Vec<u8>)>>,
    commits: HashSet<u64>,
    aborts: HashSet<u64>,
}

struct Node {
    nic: NicRuntime,
    requests: RingProducer,
    outcomes: RingConsumer,
    log: RingConsumer,
    acks: RingProducer,
    host: HostLog,
    /// Outcomes by request id.
    told: HashMap<u64, TxStatus>,
    /// Blocked destinations of this node's packets.
    blocked: Arc<AtomicU32>,
    /// Destinations whose held packets are dropped at the next release.
    lost: Arc<AtomicU32>,
}

impl Node {
    /// One NIC iteration, then the host stand-in and the client.
    fn step(&mut self, now: Nanos) {
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
    fn submit(&mut self, req_id: u64, keys: &[Key]) {
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

fn placement() -> Placement {
    Placement::new(NODES, 2).unwrap()
}

fn cluster() -> Vec<Node> {
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
        let mut procedures = ProcedureRegistry::new();
        procedures.register(Arc::new(WriteArgs));
        let rt = node_runtime(
            id as u16,
            placement(),
            gated,
            64,
            StackConfig::default(),
            procedures,
        );
        nodes.push(Node {
            nic: rt.nic,
            requests: rt.requests,
            outcomes: rt.outcomes,
            log: rt.log,
            acks: rt.acks,
            host: HostLog::default(),
            told: HashMap::new(),
            blocked,
            lost,
        });
    }
    nodes
}

fn step_all(nodes: &mut [Node], now: &mut Nanos) {
    *now += STEP_NS;
    nodes.iter_mut().for_each(|n| n.step(*now));
}

/// Steps every node until `done`, at most [`ITERATIONS_MAX`] times.
fn until(nodes: &mut [Node], now: &mut Nanos, what: &str, done: impl Fn(&[Node]) -> bool) {
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

fn restart(n: &mut Node, now: Nanos, incarnation: u32) {
    n.nic.restart_nic(now, incarnation).unwrap();
    assert_eq!(n.nic.incarnation(), incarnation);
}

/// [`t1_held_on_its_way_to_node_3`] once T1's LOG is in node 2's host
/// log; returns the nodes, the time and T1's transaction id.
fn t1_logged_at_node_2() -> (Vec<Node>, Nanos, u64) {
    let (mut nodes, mut now, _) = t1_held_on_its_way_to_node_3();
    until(&mut nodes, &mut now, "T1's LOG at node 2", |n| {
        !n[2].host.logs.is_empty()
    });
    let t1 = *nodes[2].host.logs.keys().next().unwrap();
    (nodes, now, t1)
}

/// Steps until node 0 serves again and none of `live` is recovering;
/// returns node 0's rebuild counters.
fn rebuilt_and_resumed(
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
fn configure(nodes: &mut [Node], c: &splitkv_nic::membership::Configuration) {
    nodes.iter_mut().for_each(|n| n.nic.apply_configuration(c));
}

/// A cluster in which T1 (node 0, request 1) writes a key `k` of
/// replicas 2 and 3 and holds its lock at node 2, its packets to node 3
/// held back (node 0's `blocked`); returns the nodes, the time and `k`.
fn t1_held_on_its_way_to_node_3() -> (Vec<Node>, Nanos, Key) {
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

#[test]
fn a_restarted_nic_takes_back_its_peers_locks_before_it_serves() {
    let (mut nodes, mut now, k) = t1_held_on_its_way_to_node_3();
    for _ in 0..20 {
        step_all(&mut nodes, &mut now);
    }
    assert!(nodes[0].told.is_empty(), "T1 waits for node 3's LOG ack");
    let t1 = nodes[2].nic.index().lock_holder(&k).unwrap();

    restart(&mut nodes[2], now, 2);
    assert_eq!(nodes[2].nic.index().locks_held(), 0, "locks are volatile");
    assert!(matches!(
        nodes[2].nic.availability(),
        Availability::Rebuilding { .. }
    ));
    until(&mut nodes, &mut now, "node 2 rebuilt", |n| {
        n[2].nic.availability() == Availability::Serving
    });
    assert_eq!(
        nodes[2].nic.index().lock_holder(&k),
        Some(t1),
        "T1's lock came back from its coordinator"
    );
    let s = nodes[2].nic.rebuild_stats();
    assert_eq!(
        (s.restarts, s.rebuilds_done, s.locks_reinstalled),
        (1, 1, 1)
    );

    // The rebuilt lock is served: a conflicting writer is refused.
    nodes[1].submit(2, &[k]);
    until(&mut nodes, &mut now, "T2's outcome", |n| {
        n[1].told.contains_key(&2)
    });
    assert_eq!(nodes[1].told[&2], TxStatus::LockConflict);

    // T1 goes on and commits at both replicas; then k is free.
    nodes[0].blocked.store(0, Ordering::Relaxed);
    until(&mut nodes, &mut now, "T1's outcome", |n| {
        n[0].told.contains_key(&1)
    });
    assert_eq!(nodes[0].told[&1], TxStatus::Committed);
    until(&mut nodes, &mut now, "T1's COMMIT records", |n| {
        n[2].host.commits.contains(&t1) && n[3].host.commits.contains(&t1)
    });
    nodes[1].submit(3, &[k]);
    until(&mut nodes, &mut now, "T3's outcome", |n| {
        n[1].told.contains_key(&3)
    });
    assert_eq!(nodes[1].told[&3], TxStatus::Committed);
    until(&mut nodes, &mut now, "no lock left", |n| {
        n.iter().all(|x| x.nic.index().locks_held() == 0)
    });
}

#[test]
fn an_unavailable_node_refuses_execute_rather_than_serve_without_locks() {
    let p = placement();
    let k = key_on(&p, &[2, 3]);
    let mut nodes = cluster();
    let mut now = 0;
    for _ in 0..5 {
        step_all(&mut nodes, &mut now);
    }
    // Node 3 is silent toward node 2: node 2 waits for its report.
    nodes[3].blocked.store(1 << 2, Ordering::Relaxed);
    restart(&mut nodes[2], now, 2);
    nodes[1].submit(1, &[k]);
    until(&mut nodes, &mut now, "the outcome", |n| {
        n[1].told.contains_key(&1)
    });
    assert_eq!(nodes[1].told[&1], TxStatus::Unavailable);
    assert!(
        nodes[2].nic.rebuild_stats().requests_refused
            + nodes[2].nic.rebuild_stats().answered_refused
            >= 1
    );
    assert_eq!(
        nodes[2].nic.availability(),
        Availability::Rebuilding {
            waiting_for: 1 << 3
        }
    );
    nodes[3].blocked.store(0, Ordering::Relaxed);
    until(&mut nodes, &mut now, "node 2 rebuilt", |n| {
        n[2].nic.availability() == Availability::Serving
    });
    nodes[1].submit(2, &[k]);
    until(&mut nodes, &mut now, "the outcome", |n| {
        n[1].told.contains_key(&2)
    });
    assert_eq!(nodes[1].told[&2], TxStatus::Committed);
    assert!(
        nodes[2].nic.restart_nic(now, 2).is_err(),
        "incarnation 2 is the current one"
    );
}

/// A run where every node submits transactions writing two of `keys`, node
/// 2 restarting at iteration `at`; returns the nodes once every outcome is in.
fn run_with_restart(at: usize, seed: u64) -> Vec<Node> {
    let keys: Vec<Key> = (0..12).map(|i| Key::new(0, i)).collect();
    let mut nodes = cluster();
    let mut now = 0;
    let mut rng = seed | 1;
    let mut next = |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    const PER_NODE: u64 = 24;
    const OUTSTANDING_MAX: u64 = 3;
    let mut submitted = [0u64; NODES];
    for i in 0..ITERATIONS_MAX {
        if i == at {
            restart(&mut nodes[2], now, 2);
        }
        for (id, n) in nodes.iter_mut().enumerate() {
            let open = submitted[id] - n.told.len() as u64;
            if submitted[id] < PER_NODE && open < OUTSTANDING_MAX {
                let a = keys[next(12) as usize];
                let b = keys[next(12) as usize];
                let req = (id as u64) << 32 | submitted[id];
                let both = [a, b];
                n.submit(req, if a == b { &both[..1] } else { &both[..] });
                submitted[id] += 1;
            }
        }
        step_all(&mut nodes, &mut now);
        let all_told = nodes.iter().all(|n| n.told.len() as u64 == PER_NODE);
        if i > at && all_told && nodes[2].nic.availability() == Availability::Serving {
            for _ in 0..50 {
                step_all(&mut nodes, &mut now);
            }
            return nodes;
        }
    }
    for (i, n) in nodes.iter().enumerate() {
        eprintln!(
            "node {i}: told {} of {}, {:?} {:?}\n  {:?} inflight {}",
            n.told.len(),
            submitted[i],
            n.nic.availability(),
            n.nic.rebuild_stats(),
            n.nic.stats().coordinator,
            n.nic.stats().clients.requests,
        );
    }
    panic!("restart at {at}: not every outcome within {ITERATIONS_MAX} iterations");
}

/// The checks of a run: a transaction told committed has its writes decided
/// commit at every replica; one told aborted is committed nowhere; no
/// replica decides a transaction differently from another; no LOG record
/// stays undecided; no lock stays held.
fn check(nodes: &[Node], at: usize) {
    let p = placement();
    let mut decided: HashMap<u64, bool> = HashMap::new();
    for (id, n) in nodes.iter().enumerate() {
        for tx in n.host.logs.keys() {
            let c = n.host.commits.contains(tx);
            assert!(
                c || n.host.aborts.contains(tx),
                "restart at {at}: tx {tx:#x} undecided at node {id}"
            );
            let d = *decided.entry(*tx).or_insert(c);
            assert_eq!(d, c, "restart at {at}: tx {tx:#x} decided both ways");
        }
        assert_eq!(
            n.nic.index().locks_held(),
            0,
            "restart at {at}: node {id} holds locks"
        );
    }
    for n in nodes {
        for (req, status) in &n.told {
            let marker = req.to_le_bytes();
            // The transactions (at any replica) that wrote this request's marker.
            let txs: HashSet<u64> = nodes
                .iter()
                .flat_map(|m| m.host.logs.iter())
                .filter(|(_, w)| w.iter().any(|(_, v)| v[..] == marker))
                .map(|(tx, _)| *tx)
                .collect();
            let committed = txs.iter().any(|tx| decided.get(tx) == Some(&true));
            match status {
                TxStatus::Committed => {
                    assert!(
                        committed,
                        "restart at {at}: request {req:#x} told committed, not committed"
                    );
                    for m in nodes
                        .iter()
                        .flat_map(|m| m.host.logs.iter())
                        .filter(|(tx, _)| txs.contains(tx))
                    {
                        for (k, _) in m.1 {
                            for r in 0..NODES as u16 {
                                if p.is_replica(r, k) {
                                    let hn = &nodes[r as usize].host;
                                    assert!(
                                        txs.iter().any(|tx| hn.commits.contains(tx)
                                            && hn.logs[tx].iter().any(|(kk, _)| kk == k)),
                                        "restart at {at}: request {req:#x}'s write lost at node {r}"
                                    );
                                }
                            }
                        }
                    }
                }
                TxStatus::Unknown => {}
                _ => assert!(
                    !committed,
                    "restart at {at}: request {req:#x} told {status:?}, committed"
                ),
            }
        }
    }
}

#[test]
fn a_restart_in_the_middle_of_commits_loses_no_committed_write_and_leaves_no_lock() {
    let mut unknown = 0;
    let mut reinstalled = 0;
    for (i, at) in (3..60).step_by(4).enumerate() {
        let nodes = run_with_restart(at, 0x5EED + i as u64);
        check(&nodes, at);
        let s = nodes[2].nic.rebuild_stats();
        assert_eq!((s.restarts, s.rebuilds_done), (1, 1), "restart at {at}");
        unknown += s.outcomes_unknown;
        reinstalled += s.locks_reinstalled;
    }
    // The restarts hit transactions in flight.
    assert!(
        unknown > 0 && reinstalled > 0,
        "unknown {unknown}, reinstalled {reinstalled}"
    );
}

/// The restarted node's new transactions are numbered above its lost ones
/// (the peers' reports carry the newest generation their per-slot fences
/// saw, `Coordinator::number_above`): none is refused as late, so no client
/// hears `Rejected`. Numbered from generation 1 again, they were refused
/// until they passed the old ones (100–400 `Rejected` outcomes per
/// restart in the simulator's nic-crash seeds).
#[test]
fn a_restarted_nic_numbers_its_new_transactions_above_the_lost_ones() {
    let mut after = 0;
    for (i, at) in (20..60).step_by(8).enumerate() {
        let nodes = run_with_restart(at, 0xF3_0CE + i as u64);
        check(&nodes, at);
        for (id, n) in nodes.iter().enumerate() {
            let rejected = n.told.values().filter(|s| **s == TxStatus::Rejected);
            assert_eq!(rejected.count(), 0, "restart at {at}: node {id}");
        }
        after += nodes[2]
            .told
            .values()
            .filter(|s| **s == TxStatus::Committed)
            .count();
    }
    assert!(after > 0, "the restarted node committed");
}

#[test]
fn a_rejoined_node_leaves_its_predecessors_transactions_to_crash_recovery() {
    use splitkv_nic::membership::Configuration;
    let (mut nodes, mut now, t1) = t1_logged_at_node_2();
    // Node 0 is configured out and back as a new process (renewed): T1 is
    // its predecessor's, and the rejoin's recovery epoch decides it.
    let rejoined = Configuration::initial(NODES, 2)
        .without(1)
        .rejoining(0, 5)
        .unwrap();
    configure(&mut nodes, &rejoined);
    // Node 0's NIC runtime restarts inside that epoch: it must not decide
    // T1 as well (a second decider could split it).
    restart(&mut nodes[0], now, 6);
    nodes[0].blocked.store(0, Ordering::Relaxed);
    let s = rebuilt_and_resumed(&mut nodes, &mut now, &[0, 1, 2, 3]);
    assert_eq!((s.decided_commit, s.decided_abort), (0, 0), "{s:?}");
    assert_eq!(s.left_to_recovery, 1, "{s:?}");
    // Crash recovery decided T1, one way at every replica holding its LOG.
    until(&mut nodes, &mut now, "T1 decided at node 2", |n| {
        n[2].host.aborts.contains(&t1) || n[2].host.commits.contains(&t1)
    });
    let committed = nodes[2].host.commits.contains(&t1);
    for n in &nodes[2..] {
        if n.host.logs.contains_key(&t1) {
            assert_eq!(n.host.commits.contains(&t1), committed);
            assert_eq!(n.host.aborts.contains(&t1), !committed);
        }
    }
}

/// Chaos Smallbank seed 135 of 5 nodes: a node's NIC runtime restarted
/// while its transaction's LOG was on its way, and a recovery epoch began
/// before its rebuild had every report; the rebuild then committed the
/// transaction at two replicas while the epoch's leader, seeing its live
/// coordinator silent about it, aborted it at the third. Once a recovery
/// epoch began since the restart, the rebuild leaves its lost transactions
/// to the recovery, which decides each one way at every replica.
#[test]
fn a_rebuild_overtaken_by_a_recovery_epoch_leaves_its_lost_transactions_to_it() {
    use splitkv_nic::membership::Configuration;
    let (mut nodes, mut now, t1) = t1_logged_at_node_2();
    // Node 0's NIC restarts (same process: not renewed). T1's LOG goes on
    // to node 3, whose report to node 0's rebuild is held back.
    restart(&mut nodes[0], now, 2);
    nodes[3].blocked.store(1 << 0, Ordering::Relaxed);
    nodes[0].blocked.store(0, Ordering::Relaxed);
    until(
        &mut nodes,
        &mut now,
        "T1's LOG at node 3, node 2's report in",
        |n| n[3].host.logs.contains_key(&t1) && n[0].nic.rebuild_stats().reports > 0,
    );
    // Node 1 is configured out: a recovery epoch begins before node 0's
    // rebuild has every report.
    let next = Configuration::initial(NODES, 2).without(1 << 1);
    configure(&mut nodes, &next);
    nodes[3].blocked.store(0, Ordering::Relaxed);
    let s = rebuilt_and_resumed(&mut nodes, &mut now, &[0, 2, 3]);
    assert_eq!((s.decided_commit, s.decided_abort), (0, 0), "{s:?}");
    assert!(s.left_to_recovery >= 1, "{s:?}");
    until(&mut nodes, &mut now, "T1 decided at nodes 2 and 3", |n| {
        [2, 3]
            .iter()
            .all(|&i| n[i].host.aborts.contains(&t1) || n[i].host.commits.contains(&t1))
    });
    let committed = nodes[2].host.commits.contains(&t1);
    for i in [2, 3] {
        let n = &nodes[i];
        assert_eq!(n.host.commits.contains(&t1), committed, "node {i}");
        assert_eq!(n.host.aborts.contains(&t1), !committed, "node {i}");
    }
}

/// Which of node 0's rebuild messages a recovery epoch overtakes in
/// [`commit_at_node_2_only_then_recovery`].
#[derive(Clone, Copy, PartialEq)]
enum Overtaken {
    /// Node `0`'s report (its query went through).
    Report(usize),
    /// Node 2's query: node 2 does not know node 0's NIC restarted when
    /// the epoch begins.
    QueryToNode2,
}

/// T1 (node 0) commits at node 2 and not at node 3: node 0's NIC restarts
/// after its COMMIT reached node 2, its COMMIT to node 3 never sent. The
/// rebuild message `overtaken` names is held back until a recovery epoch
/// (node 1 configured out) has begun; then steps until node 3 decided T1
/// and returns whether it committed.
fn commit_at_node_2_only_then_recovery(overtaken: Overtaken) -> bool {
    use splitkv_nic::membership::Configuration;
    let k = key_on(&placement(), &[2, 3]);
    let mut nodes = cluster();
    let mut now = 0;
    nodes[0].submit(1, &[k]);
    until(&mut nodes, &mut now, "T1's LOG at node 3", |n| {
        !n[3].host.logs.is_empty()
    });
    nodes[0].blocked.store(1 << 3, Ordering::Relaxed);
    let t1 = *nodes[3].host.logs.keys().next().unwrap();
    until(&mut nodes, &mut now, "T1 committed at node 2", |n| {
        n[2].host.commits.contains(&t1)
    });
    assert!(!nodes[3].host.commits.contains(&t1));
    nodes[0].lost.store(1 << 3, Ordering::Relaxed);
    restart(&mut nodes[0], now, 2);
    // The node whose packets are held back, and the replicas whose
    // reports node 0 awaits before the epoch begins.
    let (held, answered): (usize, &[usize]) = match overtaken {
        Overtaken::Report(held) => {
            nodes[held].blocked.store(1 << 0, Ordering::Relaxed);
            nodes[0].blocked.store(0, Ordering::Relaxed);
            (held, &[2, 3])
        }
        Overtaken::QueryToNode2 => {
            nodes[0].blocked.store(1 << 2, Ordering::Relaxed);
            (0, &[3])
        }
    };
    until(
        &mut nodes,
        &mut now,
        "the replicas' queries answered",
        |n| {
            n[0].nic.rebuild_stats().reports >= answered.len() as u64
                && answered
                    .iter()
                    .all(|&i| n[i].nic.rebuild_stats().queries_answered > 0)
        },
    );
    assert_eq!(
        nodes[2].nic.rebuild_stats().queries_answered,
        (overtaken != Overtaken::QueryToNode2) as u64,
        "node 2 got the query"
    );
    let next = Configuration::initial(NODES, 2).without(1 << 1);
    configure(&mut nodes, &next);
    nodes[held].blocked.store(0, Ordering::Relaxed);
    until(&mut nodes, &mut now, "T1 decided at node 3", |n| {
        n[3].host.aborts.contains(&t1) || n[3].host.commits.contains(&t1)
    });
    assert_ne!(
        nodes[3].host.commits.contains(&t1),
        nodes[3].host.aborts.contains(&t1)
    );
    nodes[3].host.commits.contains(&t1)
}

/// A NIC runtime restarts after its COMMIT reached one replica and before
/// the other, and a recovery epoch overtakes its rebuild: the COMMIT record
/// a peer reported to the rebuild is this coordinator's outcome in the
/// epoch's evidence, so the leader commits the transaction at the replica
/// still holding the LOG instead of aborting it by its "forgot" rule.
#[test]
fn a_commit_record_reported_to_an_overtaken_rebuild_is_the_coordinators_outcome() {
    assert!(
        commit_at_node_2_only_then_recovery(Overtaken::Report(3)),
        "node 3 aborted what node 2 committed"
    );
}

/// As above, but the replica holding the COMMIT record had not reported to
/// the rebuild when the epoch began (its query came); its evidence reports
/// that COMMIT record, and the leader's rule 2 comes before its "forgot"
/// rule.
#[test]
fn a_replica_reports_the_commit_records_of_a_restarted_coordinator() {
    assert!(
        commit_at_node_2_only_then_recovery(Overtaken::Report(2)),
        "node 3 aborted what node 2 committed"
    );
}

/// As above, but the epoch begins before the restarted coordinator's query
/// reached the replica holding the COMMIT record: that replica cannot know
/// the coordinator lost the transaction. Every replica reports the decision
/// records it holds, so the leader's rule 2 commits the transaction at the
/// replica still holding the LOG instead of its "forgot" rule aborting it.
#[test]
fn a_replica_reports_its_commit_records_before_it_learns_the_coordinator_restarted() {
    assert!(
        commit_at_node_2_only_then_recovery(Overtaken::QueryToNode2),
        "node 3 aborted what node 2 committed"
    );
}
