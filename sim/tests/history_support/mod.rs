//! Shared by the history tests (`history_sim.rs`, `history_threads.rs`): a
//! small cluster running one history workload (list-append or register),
//! assembled in one place ([`HistoryCluster::build`], today through
//! `splitkv_host::build_node`, later the `Cluster::builder()` API), and the
//! end-of-run checks: write the history as JSON lines, read it back, check it
//! with the strict-serializability checker, and account for lost and phantom
//! commits against the primaries' final state.
#![allow(dead_code)]

use splitkv_bench::history_client::{
    write_history, HistoryClient, HistoryClientStats, HistoryWorkload, TxShape,
};
use splitkv_bench::list_append::{
    self, ListAppendConfig, ListAppendGenerator, ListAppendTxn, LIST_TABLE, LIST_VALUE_BYTES_MAX,
};
use splitkv_bench::register::{
    self, RegisterConfig, RegisterGenerator, RegisterTxn, REGISTER_TABLE, REGISTER_VALUE_BYTES,
};
use splitkv_host::{build_node, HostWorker, NodeConfig};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
use splitkv_nic::net::Transport;
use splitkv_nic::{Component, Nanos, NicRuntime, Placement, ProcedureRegistry};
use splitkv_sim::checker::{self, CheckOptions, CheckReport, Model};
use splitkv_sim::history::History;
use splitkv_sim::lost_commits::{self, FinalRow, FinalValue, LostCommitReport, NodeCounters};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Version every key is loaded with.
pub const INITIAL_VERSION: u64 = 1;

/// Which workload, with its generator configuration.
#[derive(Debug, Clone, Copy)]
pub enum Workload {
    /// Elle's list-append.
    ListAppend(ListAppendConfig),
    /// Read-write registers.
    Register(RegisterConfig),
}

impl Workload {
    /// List-append over `active_keys` hot keys for `nodes` clients of `budget` each.
    pub fn list_append(active_keys: u64, nodes: usize, budget: u64, shape: TxShape) -> Workload {
        Workload::ListAppend(
            ListAppendConfig::new(active_keys, nodes as u64, budget, shape).expect("config"),
        )
    }

    /// Registers over `keys` keys.
    pub fn register(keys: u64, shape: TxShape) -> Workload {
        Workload::Register(RegisterConfig::new(keys, shape).expect("config"))
    }

    fn table(&self) -> u32 {
        match self {
            Workload::ListAppend(_) => LIST_TABLE,
            Workload::Register(_) => REGISTER_TABLE,
        }
    }

    fn keys_total(&self) -> u64 {
        match self {
            Workload::ListAppend(c) => c.keys_total(),
            Workload::Register(c) => c.keys,
        }
    }

    fn value_bytes_max(&self) -> usize {
        match self {
            Workload::ListAppend(_) => LIST_VALUE_BYTES_MAX,
            Workload::Register(_) => REGISTER_VALUE_BYTES,
        }
    }

    fn model(&self) -> Model {
        match self {
            Workload::ListAppend(_) => Model::ListAppend,
            Workload::Register(_) => Model::Register,
        }
    }

    fn generator(&self, client: u64, seed: u64) -> Box<dyn HistoryWorkload> {
        match *self {
            Workload::ListAppend(c) => Box::new(ListAppendGenerator::new(c, client, seed)),
            Workload::Register(c) => Box::new(RegisterGenerator::new(c, client, seed)),
        }
    }

    fn registry(&self) -> ProcedureRegistry {
        let mut r = ProcedureRegistry::new();
        match self {
            Workload::ListAppend(_) => r.register(Arc::new(ListAppendTxn)),
            Workload::Register(_) => r.register(Arc::new(RegisterTxn)),
        };
        r
    }

    fn decode(&self, key: u64, bytes: &[u8]) -> FinalValue {
        match self {
            Workload::ListAppend(_) => FinalValue::List(
                list_append::decode_list(key, bytes).expect("a stored list decodes"),
            ),
            Workload::Register(_) => FinalValue::Register(
                register::decode_register(key, bytes).expect("a stored register decodes"),
            ),
        }
    }
}

/// Shape of a history run.
#[derive(Debug, Clone, Copy)]
pub struct HistorySpec {
    /// Nodes (one history client each).
    pub nodes: usize,
    /// Replicas per key.
    pub replication: usize,
    /// The workload.
    pub workload: Workload,
    /// Transactions outstanding per client (its Jepsen processes).
    pub inflight_per_node: usize,
    /// Transactions per client.
    pub budget_per_node: u64,
    /// Seed of the generators.
    pub seed: u64,
    /// DMA completion latency.
    pub dma_latency_ns: Nanos,
}

/// The client type every node runs.
pub type Client = HistoryClient<Box<dyn HistoryWorkload>>;

/// n nodes running one history workload.
pub struct HistoryCluster {
    /// The spec.
    pub spec: HistorySpec,
    /// Key placement.
    pub placement: Placement,
    /// NIC runtimes by node.
    pub nics: Vec<NicRuntime>,
    /// Host workers by node.
    pub workers: Vec<HostWorker>,
    /// History clients by node.
    pub clients: Vec<Client>,
}

impl HistoryCluster {
    /// Builds the nodes over `transports` and loads every key of the workload
    /// (the empty value, version [`INITIAL_VERSION`]) on all its replicas.
    pub fn build(spec: HistorySpec, transports: Vec<Box<dyn Transport>>) -> HistoryCluster {
        let placement = Placement::new(spec.nodes, spec.replication).expect("placement");
        let w = spec.workload;
        let capacity = w.keys_total() as usize * 2 + 1024;
        let (mut nics, mut workers, mut clients) = (Vec::new(), Vec::new(), Vec::new());
        for (n, t) in transports.into_iter().enumerate() {
            let mut cfg = NodeConfig::new(n as u16, placement, capacity, w.value_bytes_max());
            cfg.dma_latency_ns = spec.dma_latency_ns;
            let node = build_node(&cfg, w.registry(), t).expect("node");
            nics.push(node.nic);
            workers.push(node.worker);
            clients.push(HistoryClient::new(
                node.client,
                w.generator(n as u64, spec.seed),
                0,
                (n * spec.inflight_per_node) as u64,
                spec.inflight_per_node,
                Some(spec.budget_per_node),
            ));
        }
        let meta = ObjectMeta::new(INITIAL_VERSION, ObjectFlags::empty());
        for id in 0..w.keys_total() {
            let k = Key::new(w.table(), id);
            for (n, worker) in workers.iter_mut().enumerate() {
                if placement.is_replica(n as u16, &k) {
                    worker.table_mut().upsert(k, meta, &[]).expect("load");
                }
            }
        }
        HistoryCluster {
            spec,
            placement,
            nics,
            workers,
            clients,
        }
    }

    /// Every component, node by node: NIC runtime, host worker, client.
    pub fn components(&mut self) -> Vec<&mut dyn Component> {
        let mut v: Vec<&mut dyn Component> = Vec::new();
        for ((nic, w), c) in self
            .nics
            .iter_mut()
            .zip(self.workers.iter_mut())
            .zip(self.clients.iter_mut())
        {
            v.push(nic);
            v.push(w);
            v.push(c);
        }
        v
    }

    /// Whether every client is done and every node idle.
    pub fn is_quiescent(&mut self) -> bool {
        self.clients.iter().all(Client::is_done)
            && self.nics.iter_mut().all(NicRuntime::is_quiescent)
            && self.workers.iter_mut().all(HostWorker::is_quiescent)
    }

    /// Client counters summed over nodes.
    pub fn stats(&self) -> HistoryClientStats {
        let mut s = HistoryClientStats::default();
        for c in &self.clients {
            s.add(&c.stats());
        }
        s
    }

    /// Ends the run at `now` and returns the merged history of every client.
    pub fn finish(&mut self, now: Nanos) -> History {
        History::merge(self.clients.iter_mut().map(|c| c.finish(now)))
    }

    /// Every key's version at load.
    pub fn initial_versions(&self) -> BTreeMap<u64, u64> {
        (0..self.spec.workload.keys_total())
            .map(|k| (k, INITIAL_VERSION))
            .collect()
    }

    /// Every key of the workload's table as its primary holds it now.
    pub fn final_rows(&self) -> BTreeMap<u64, FinalRow> {
        let w = self.spec.workload;
        let mut rows = BTreeMap::new();
        let mut buf = Vec::new();
        for id in 0..w.keys_total() {
            let k = Key::new(w.table(), id);
            let p = self.placement.primary(&k) as usize;
            if let Some(meta) = self.workers[p].table().get(&k, &mut buf) {
                let value = w.decode(id, &buf);
                rows.insert(
                    id,
                    FinalRow {
                        version: meta.version(),
                        value,
                    },
                );
            }
        }
        rows
    }

    /// The counters that stay zero in a fault-free run, node by node.
    pub fn counters(&self) -> Vec<NodeCounters> {
        (0..self.spec.nodes)
            .map(|n| {
                let (w, s) = (self.workers[n].stats(), self.nics[n].stats());
                NodeCounters {
                    node: n as u16,
                    stale_records: w.stale,
                    bad_entries: w.bad_entries,
                    host_decode_errors: s.server.host_decode_errors,
                    bad_packets: s.bad_packets,
                    bad_ring_entries: s.bad_ring_entries,
                }
            })
            .collect()
    }
}

/// What the checks of one run found.
#[derive(Debug)]
pub struct Checked {
    /// The client counters.
    pub stats: HistoryClientStats,
    /// The checker's report (valid or not).
    pub report: CheckReport,
    /// The lost-commit accounting (passing, or the panic names the violation).
    pub lost: LostCommitReport,
    /// Operations in the history.
    pub ops: usize,
    /// Longest final list, or highest final version, over all keys.
    pub hottest_key_writes: u64,
}

/// Writes `history` to a JSONL file named `name`, reads it back, checks it
/// with the checker and the lost-commit accounting, and checks the fault-free
/// counters. Panics on an invalid history, naming every anomaly kind found
/// ("anomalies found: G2-item ...": the mutation script greps for it).
pub fn check_run(cluster: &HistoryCluster, history: &History, name: &str) -> Checked {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.jsonl"));
    write_history(&path, history).expect("write history");
    let file = std::fs::File::open(&path).expect("open history");
    let read = History::read_jsonl(std::io::BufReader::new(file)).expect("read history");
    assert_eq!(&read, history, "the history survives JSONL");
    let opts = CheckOptions {
        model: cluster.spec.workload.model(),
        ..CheckOptions::default()
    };
    let report = checker::check(&read, &opts).expect("well-formed history");
    if !report.valid {
        let kinds: Vec<String> = report
            .found
            .iter()
            .map(|(k, n)| format!("{} x{n}", k.name()))
            .collect();
        for a in report.anomalies.iter().take(4) {
            eprintln!("{a}");
        }
        panic!(
            "{name}: anomalies found: {} (history in {})",
            kinds.join(", "),
            path.display()
        );
    }
    let rows = cluster.final_rows();
    let lost = lost_commits::check(&read, &cluster.initial_versions(), &rows).unwrap_or_else(|e| {
        panic!(
            "{name}: {e}\n{:#?}",
            &e.violations[..e.violations.len().min(8)]
        )
    });
    lost_commits::check_fault_free_counters(&cluster.counters())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let hottest_key_writes = rows
        .values()
        .map(|r| match &r.value {
            FinalValue::List(l) => l.len() as u64,
            FinalValue::Register(_) => r.version - INITIAL_VERSION,
        })
        .max()
        .unwrap_or(0);
    Checked {
        stats: cluster.stats(),
        report,
        lost,
        ops: read.len(),
        hottest_key_writes,
    }
}
