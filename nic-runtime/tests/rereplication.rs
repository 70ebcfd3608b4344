//! Re-replication through whole runtimes (`tla/Rereplicate.tla`):
//! three nodes over the in-memory network, replication 3, each with a
//! model host that applies its host log newest-version-wins (as the host
//! worker does) and serves snapshots. Node 2 crashes, the survivors recover,
//! node 2 restarts empty as a new incarnation and rejoins as a copying
//! backup while transactions keep committing (the copy carries deletes'
//! tombstones like any object); once copied it becomes a replica again (ranked last: node 0 keeps serving its shard).
//!
//! The written keys live in shards whose primaries never change here, and
//! no transaction is in flight at a configuration change: the model host
//! does not write the DMA-readable table, so a primary that dropped its
//! cached objects (promotion, a recovered commit) would read nothing there.

mod support;

use splitkv_layout::host_nic::{HostToNic, NicToHost, TxRequest, TxStatus};
use splitkv_layout::log_record::{LogKind, LogRecords};
use splitkv_layout::ring::{ring_pair, RingConsumer, RingProducer};
use splitkv_layout::robinhood_layout::{TableConfig, TableLayout};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, Region, TxId};
use splitkv_nic::dma::local::LocalDma;
use splitkv_nic::index::HostTableLayout;
use splitkv_nic::membership::Configuration;
use splitkv_nic::net::mem::{mem_network, MemTransport};
use splitkv_nic::net::stack::StackConfig;
use splitkv_nic::{
    HostPorts, Nanos, NicParts, NicRuntime, Placement, ProcError, Procedure, ProcedureRegistry,
    ReadView, TxPlan, UserAbort, WriteSet,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use support::Shared;

const STEP_NS: Nanos = 5_000;
/// Steps a phase of a test may take (a recovery epoch, a copy).
const PHASE_STEPS_MAX: usize = 4_000;
const NODES: usize = 3;
/// Objects every host holds from the start besides the written keys (in
/// table 1, spread over all shards), so a copy takes many chunks.
const FILLERS: u64 = 3_000;
/// Every this many fillers is a delete's tombstone (DELETED, version 2, no
/// value): a copy carries it like any object.
const TOMBSTONE_EVERY: u64 = 7;

/// Procedure 0: increments a counter in each key (read and written, so
/// every commit raises the keys' versions).
struct Incr(Vec<Key>);

impl Procedure for Incr {
    fn name(&self) -> &'static str {
        "incr"
    }
    fn plan(&self, _: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        self.0.iter().for_each(|k| plan.write(*k));
        Ok(())
    }
    fn execute(
        &self,
        _: &[u8],
        r: &ReadView,
        w: &mut WriteSet,
        _: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        for k in &self.0 {
            let n = r
                .get(k)
                .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
            w.put(*k, &(n + 1).to_le_bytes());
        }
        Ok(())
    }
}

/// The host worker's rules: LOG records pending until their decision, a
/// committed record applied only if newer than the table's version.
#[derive(Default)]
struct ModelHost {
    pending: HashMap<TxId, Vec<(Key, ObjectMeta, Vec<u8>)>>,
    table: BTreeMap<Key, (ObjectMeta, Vec<u8>)>,
}

impl ModelHost {
    fn apply(&mut self, buf: &[u8]) {
        for r in LogRecords::new(buf) {
            let r = r.unwrap();
            match r.kind {
                LogKind::Log => {
                    self.pending
                        .entry(r.tx_id)
                        .or_default()
                        .push((r.key, r.meta, r.value.to_vec()))
                }
                LogKind::Commit => {
                    for (k, m, v) in self.pending.remove(&r.tx_id).unwrap_or_default() {
                        match self.table.get(&k) {
                            // Newest wins: a version never decreases.
                            Some((held, _)) if held.version() >= m.version() => {}
                            _ => {
                                self.table.insert(k, (m, v));
                            }
                        }
                    }
                }
                // Dnl markers: nothing to apply or drop.
                LogKind::Lock | LogKind::Repl => {}
                _ => {
                    self.pending.remove(&r.tx_id);
                }
            }
        }
    }
}

struct Node {
    nic: NicRuntime,
    host: ModelHost,
    log: RingConsumer,
    acks: RingProducer,
    requests: RingProducer,
    outcomes: RingConsumer,
}

impl Node {
    fn new(id: u16, net: Arc<Mutex<MemTransport>>, keys: &[Key], incarnation: u32) -> Node {
        let placement = Placement::new(NODES, NODES).unwrap();
        let mut procedures = ProcedureRegistry::new();
        procedures.register(Arc::new(Incr(keys.to_vec())));
        let layout = TableLayout::new(&TableConfig::new(64, 64)).unwrap();
        let (log_tx, log) = ring_pair(1 << 18).unwrap();
        let (requests, req_rx) = ring_pair(1 << 12).unwrap();
        let (out_tx, outcomes) = ring_pair(1 << 12).unwrap();
        let (acks, ack_rx) = ring_pair(1 << 12).unwrap();
        let dma = LocalDma::new(Arc::new(Region::new(layout.region_bytes())), log_tx, 0);
        let nic = NicRuntime::new(NicParts {
            node: id,
            placement,
            table: HostTableLayout::Robinhood(layout),
            value_bytes_max: 64,
            procedures,
            dma: Box::new(dma),
            transport: Box::new(Shared(net)),
            host: HostPorts::one_client(req_rx, out_tx, ack_rx),
            cache_objects: 64,
            seed: 1,
            net: StackConfig {
                incarnation,
                ..StackConfig::default()
            },
            commit: Default::default(),
        })
        .unwrap();
        Node {
            nic,
            host: ModelHost::default(),
            log,
            acks,
            requests,
            outcomes,
        }
    }

    /// One NIC iteration, the model host's turn, and the snapshot reads.
    fn step(&mut self, now: Nanos) {
        self.nic.run_iteration(now);
        let host = &mut self.host;
        support::drain_host_log(&mut self.log, &mut self.acks, |entry| host.apply(entry));
        let table = &self.host.table;
        self.nic
            .serve_copy_reads(&mut |f: &mut dyn FnMut(Key, ObjectMeta, &[u8])| {
                table.iter().for_each(|(k, (m, v))| f(*k, *m, v))
            })
            .unwrap();
    }

    fn submit(&mut self, req_id: u64) -> bool {
        let mut buf = Vec::new();
        HostToNic::TxRequest(TxRequest {
            req_id,
            procedure: 0,
            args: b"",
        })
        .encode(&mut buf);
        self.requests.try_push(&buf).is_ok()
    }

    fn outcomes(&mut self, out: &mut Vec<TxStatus>) {
        let mut buf = Vec::new();
        while self.outcomes.try_pop(&mut buf).unwrap() {
            let NicToHost::TxOutcome(o) = NicToHost::decode(&buf).unwrap();
            out.push(o.status);
        }
    }
}

/// The cluster: nodes (a crashed one is `None`), their endpoints, time,
/// the current configuration and the outcomes seen.
struct Cluster {
    nodes: Vec<Option<Node>>,
    nets: Vec<Arc<Mutex<MemTransport>>>,
    keys: Vec<Key>,
    now: Nanos,
    config: Configuration,
    outcomes: Vec<TxStatus>,
    submitted: u64,
}

impl Cluster {
    /// The cluster; one transaction writes two keys of each of `shards`.
    fn new(shards: &[u16]) -> Cluster {
        let placement = Placement::new(NODES, NODES).unwrap();
        let keys: Vec<Key> = shards
            .iter()
            .flat_map(|&s| {
                (0..10_000u64)
                    .map(|i| Key::new(0, i))
                    .filter(move |k| placement.shard(k) == s)
                    .take(2)
            })
            .collect();
        let nets: Vec<_> = mem_network(NODES)
            .into_iter()
            .map(|t| Arc::new(Mutex::new(t)))
            .collect();
        let nodes = (0..NODES as u16)
            .map(|i| {
                let mut n = Node::new(i, nets[i as usize].clone(), &keys, 1);
                for f in 0..FILLERS {
                    let object = match f % TOMBSTONE_EVERY {
                        0 => (ObjectMeta::new(2, ObjectFlags::DELETED), Vec::new()),
                        _ => (
                            ObjectMeta::new(1, Default::default()),
                            f.to_le_bytes().to_vec(),
                        ),
                    };
                    n.host.table.insert(Key::new(1, f), object);
                }
                Some(n)
            })
            .collect();
        Cluster {
            nodes,
            nets,
            keys,
            now: 0,
            config: Configuration::initial(NODES, NODES),
            outcomes: Vec::new(),
            submitted: 0,
        }
    }

    /// One step of every live node; node 0 keeps `load` transactions in flight.
    fn step(&mut self, load: bool) {
        self.now += STEP_NS;
        for n in self.nodes.iter_mut().flatten() {
            n.step(self.now);
            n.outcomes(&mut self.outcomes);
        }
        let done = self.outcomes.len() as u64;
        if load && self.submitted < done + 2 {
            if let Some(n0) = self.nodes[0].as_mut() {
                if n0.submit(self.submitted) {
                    self.submitted += 1;
                }
            }
        }
    }

    /// Applies `config` at every live node, once no transaction is in flight.
    fn apply(&mut self, config: Configuration) {
        self.config = config;
        for n in self.nodes.iter_mut().flatten() {
            n.nic.apply_configuration(&config);
        }
    }

    /// Steps until `done` holds, at most [`PHASE_STEPS_MAX`] steps.
    fn until(&mut self, load: bool, what: &str, mut done: impl FnMut(&mut Cluster) -> bool) {
        for _ in 0..PHASE_STEPS_MAX {
            if done(self) {
                return;
            }
            self.step(load);
        }
        panic!("{what}: not within {PHASE_STEPS_MAX} steps");
    }

    fn resumed(&self) -> bool {
        self.nodes.iter().flatten().all(|n| !n.nic.recovering())
    }

    fn committed(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|s| **s == TxStatus::Committed)
            .count()
    }

    /// Crash node `n` (it is never stepped again) and recover without it.
    fn crash(&mut self, n: usize) {
        self.drain();
        self.crash_now(n);
    }

    /// [`Cluster::crash`] at once, whatever is in flight.
    fn crash_now(&mut self, n: usize) {
        self.nodes[n] = None;
        let c = self.config.without(1 << n);
        self.apply(c);
        self.until(true, "recovery", |c| c.resumed());
    }

    /// Node `n` restarts empty (incarnation `inc`) and rejoins, copying.
    fn restart(&mut self, n: usize, inc: u32) {
        self.drain();
        self.nodes[n] = Some(Node::new(n as u16, self.nets[n].clone(), &self.keys, inc));
        let c = self
            .config
            .rejoining(n as u16, inc)
            .expect("node out of the configuration");
        self.apply(c);
    }

    /// Every transaction submitted got its outcome.
    fn drain(&mut self) {
        self.until(false, "drain", |c| c.outcomes.len() as u64 == c.submitted);
        for _ in 0..50 {
            self.step(false);
        }
    }

    /// Every live host holds the same objects.
    fn hosts_agree(&self) {
        let mut hosts = self.nodes.iter().flatten().map(|n| &n.host.table);
        let first = hosts.next().unwrap();
        assert!(first.len() as u64 >= FILLERS);
        let tombstones = first
            .values()
            .filter(|(m, v)| m.is_deleted() && v.is_empty());
        assert_eq!(tombstones.count() as u64, FILLERS.div_ceil(TOMBSTONE_EVERY));
        for h in hosts {
            assert!(
                h == first,
                "hosts differ: {} vs {} objects",
                h.len(),
                first.len()
            );
        }
    }

    /// The counter value every replica holds for each key (asserting they agree).
    fn values(&self) -> Vec<(u64, u64)> {
        self.keys
            .iter()
            .map(|k| {
                let held: Vec<_> = self
                    .nodes
                    .iter()
                    .flatten()
                    .map(|n| n.host.table.get(k).cloned())
                    .collect();
                assert!(
                    held.windows(2).all(|w| w[0] == w[1]),
                    "replicas disagree on {k:?}: {held:?}"
                );
                let (m, v) = held[0].clone().expect("every replica holds the key");
                (m.version(), u64::from_le_bytes(v.try_into().unwrap()))
            })
            .collect()
    }
}

#[test]
fn a_copy_concurrent_with_writes_ends_with_every_replica_holding_the_last_commit() {
    let mut c = Cluster::new(&[0, 1]);
    c.until(true, "first commits", |c| c.committed() >= 10);
    c.crash(2);
    let before = c.committed();
    c.until(true, "commits after the crash", |c| {
        c.committed() >= before + 10
    });

    c.restart(2, 2);
    c.until(true, "rejoin epoch", |c| c.resumed());
    assert!(
        c.nodes[2].as_ref().unwrap().nic.copying(),
        "node 2 is being copied"
    );
    let at_join = c.committed();
    let mut caught_up = None;
    c.until(true, "copy", |c| {
        caught_up = c.nodes[2].as_mut().unwrap().nic.take_caught_up();
        caught_up.is_some()
    });
    let during = c.committed() - at_join;
    assert_eq!(caught_up, Some(c.config.epoch));
    let next = c.config.caught_up(2).unwrap();
    c.drain();
    c.apply(next);
    c.until(true, "catch-up epoch", |c| c.resumed());
    let after = c.committed();
    c.until(true, "commits after catch-up", |c| {
        c.committed() >= after + 10
    });
    c.drain();

    c.hosts_agree();
    let committed = c.committed() as u64;
    for (version, count) in c.values() {
        // One increment per committed transaction (versions count writes).
        assert_eq!((version, count), (committed, committed));
    }
    let src = c.nodes[0].as_ref().unwrap().nic.copy_stats();
    assert!(src.done_sent >= 1 && src.objects_acked >= 2, "{src:?}");
    assert!(during > 0, "transactions committed during the copy");
    // Node 0 still serves shard 0 and node 1 shard 1; node 2 is the last backup.
    let view = *c.nodes[1].as_ref().unwrap().nic.recovery().view();
    assert_eq!(view.shard_primary(0), Some(0));
    assert_eq!(view.shard_primary(1), Some(1));
    assert_eq!(view.shard_primary(2), Some(0));
    assert_eq!(view.live_replicas(2).collect::<Vec<_>>(), vec![0, 1, 2]);
    assert_eq!(view.caught_up_replicas(0).count(), NODES, "degree restored");
}

#[test]
fn a_copy_abandoned_by_a_crash_does_not_count() {
    let mut c = Cluster::new(&[0]);
    c.until(true, "first commits", |c| c.committed() >= 5);
    c.crash(2);
    c.restart(2, 2);
    c.until(false, "rejoin epoch", |c| c.resumed());
    let first = c.config.epoch;
    // Node 1 crashes once node 0's copy is under way (before node 2 has it).
    c.until(false, "copy under way", |c| {
        c.nodes[0].as_ref().unwrap().nic.copy_stats().chunks_sent > 0
    });
    assert!(c.nodes[2].as_ref().unwrap().nic.copying());
    c.crash_now(1);
    let stats = |c: &Cluster| c.nodes[0].as_ref().unwrap().nic.copy_stats();
    assert!(stats(&c).abandoned >= 1, "{:?}", stats(&c));
    // The copy begins again in the new epoch; only its Dones count.
    let mut caught_up = None;
    c.until(true, "copy after the crash", |c| {
        caught_up = c.nodes[2].as_mut().unwrap().nic.take_caught_up();
        caught_up.is_some()
    });
    assert_eq!(caught_up, Some(first + 1));
    assert!(
        stats(&c).copies_begun >= 2 * NODES as u64 - 1,
        "{:?}",
        stats(&c)
    );
    c.drain();
    c.apply(c.config.caught_up(2).unwrap());
    c.until(true, "catch-up epoch", |c| c.resumed());
    let view = *c.nodes[0].as_ref().unwrap().nic.recovery().view();
    assert_eq!(view.caught_up_replicas(0).collect::<Vec<_>>(), vec![0, 2]);
    c.drain();
    c.hosts_agree();
    let committed = c.committed() as u64;
    for (version, count) in c.values() {
        assert_eq!((version, count), (committed, committed));
    }
}

#[test]
fn configurations_order_a_returning_node_last_and_never_primary() {
    use splitkv_layout::wire::NodeMask;
    use splitkv_nic::placement::PlacementView;
    // Three nodes, replication 3: no survivor can take a lost node's place,
    // so the returning node joins every shard again.
    let p = Placement::new(3, 3).unwrap();
    let c1 = Configuration::initial(3, 3);
    assert_eq!(c1.rejoining(1, 2), None, "node 1 is live");
    let c2 = c1.without(1 << 0);
    assert!(c2.shards[..3].iter().all(|s| s.joining == 0), "{c2:?}");
    let c3 = c2.rejoining(0, 2).unwrap();
    assert_eq!((c3.epoch, c3.live, c3.copying), (3, 0b111, 0b001));
    assert_eq!(c3.incarnation[0], 2);
    assert!(c3.shards[..3].iter().all(|s| s.joining == 0b001));
    let v3 = PlacementView::with_roles(p, NodeMask::EMPTY, c3.roles()).unwrap();
    // Shard 0: node 0 is a joining backup, last, not primary.
    assert_eq!(v3.live_replicas(0).collect::<Vec<_>>(), vec![1, 2, 0]);
    assert_eq!(v3.shard_primary(0), Some(1));
    assert_eq!(v3.caught_up_replicas(0).count(), 2);
    assert_eq!(v3.renewed(), NodeMask::EMPTY.with(0));
    assert_eq!(c3.caught_up(1), None, "node 1 is not copying");
    let c4 = c3.caught_up(0).unwrap();
    assert_eq!((c4.epoch, c4.copying, c4.shards[0].since[0]), (4, 0, 4));
    let v4 = PlacementView::with_roles(p, NodeMask::EMPTY, c4.roles()).unwrap();
    assert_eq!(v4.live_replicas(0).collect::<Vec<_>>(), vec![1, 2, 0]);
    assert_eq!(v4.caught_up_replicas(0).count(), 3, "degree restored");
    // Node 1 crashes and returns later: it ranks after node 0, which caught
    // up first, and shard 0's primary is node 2 (never a returning node while
    // an original replica lives).
    let c6 = c4
        .without(1 << 1)
        .rejoining(1, 2)
        .unwrap()
        .caught_up(1)
        .unwrap();
    let v6 = PlacementView::with_roles(p, NodeMask::EMPTY, c6.roles()).unwrap();
    assert_eq!(v6.live_replicas(0).collect::<Vec<_>>(), vec![2, 0, 1]);
    // A joining node is never failed at once; a view that says so is refused.
    assert!(PlacementView::with_roles(p, NodeMask::EMPTY.with(0), c3.roles()).is_err());
    // The ring's configuration gives the ring's roles (the fast path).
    assert_eq!(c1.roles(), p.ring_roles());
    assert!(c1.roles().is_ring() && !c4.roles().is_ring());
}

#[test]
fn with_more_nodes_than_replicas_survivors_become_the_new_backups() {
    use splitkv_layout::wire::NodeMask;
    use splitkv_nic::placement::PlacementView;
    // Four nodes, replication 3: shard s lives on s, s+1, s+2 (mod 4).
    let p = Placement::new(4, 3).unwrap();
    let c2 = Configuration::initial(4, 3).without(1 << 0);
    // Every shard node 0 held gets the one survivor that was no replica.
    let joining: Vec<u32> = c2.shards[..4].iter().map(|s| s.joining).collect();
    assert_eq!(joining, vec![0b1000, 0, 0b0010, 0b0100]);
    assert!(c2.shards[..4].iter().all(|s| s.members.count_ones() == 3));
    assert!(
        c2.is_copying(3) && c2.copying == 0,
        "a survivor is not renewed"
    );
    let v2 = PlacementView::with_roles(p, NodeMask::EMPTY.with(0), c2.roles()).unwrap();
    assert_eq!(v2.live_replicas(0).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert_eq!(v2.shard_primary(0), Some(1));
    assert_eq!(v2.caught_up_replicas(0).count(), 2);
    assert_eq!(v2.renewed(), NodeMask::EMPTY);
    // Node 0 comes back: every shard is at the degree, so it joins none,
    // and its report of the end of its copy only clears its renewal.
    let c3 = c2.rejoining(0, 2).unwrap();
    assert!(c3.shards[..4].iter().all(|s| s.members & 1 == 0));
    assert!(c3.is_copying(0));
    let c4 = c3.caught_up(0).unwrap();
    assert!(!c4.is_copying(0) && c4.is_copying(3));
    // The survivors catch up: shard 0 is {1, 2, 3} with 3 last.
    let c5 = c4
        .caught_up(3)
        .unwrap()
        .caught_up(1)
        .unwrap()
        .caught_up(2)
        .unwrap();
    assert!((0..4).all(|n| !c5.is_copying(n)));
    let v5 = PlacementView::with_roles(p, NodeMask::EMPTY, c5.roles()).unwrap();
    assert_eq!(v5.live_replicas(0).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert!((0..4).all(|s| v5.caught_up_replicas(s).count() == 3));
    // Node 1 then fails: shard 0's primary passes to 2, and node 0 (a
    // spare) is chosen for the shards node 1 held, joining last.
    let c6 = c5.without(1 << 1);
    let v6 = PlacementView::with_roles(p, NodeMask::EMPTY.with(1), c6.roles()).unwrap();
    assert_eq!(v6.live_replicas(0).collect::<Vec<_>>(), vec![2, 3, 0]);
    assert_eq!(v6.joining(0), NodeMask::EMPTY.with(0));
    assert_eq!(v6.shard_primary(1), Some(2));
}
