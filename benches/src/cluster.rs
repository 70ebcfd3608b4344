//! A cluster running one [`Workload`]: n nodes with their load generators and
//! the workload's rows loaded on every replica. The same cluster runs under the
//! local threaded driver (the `splitkv` binary) and the deterministic
//! simulator (the sim tests); only the transports and the clock differ. The
//! checks live apart: the workload's own ([`Workload::check`], e.g.
//! [`crate::smallbank::check`]) and the replica check ([`crate::replicas`]).

use crate::loadgen::{CommittedTx, LoadGen, LoadGenConfig, LoadStats, RetryPolicy};
use crate::replicas::{check_replicas, ReplicaReport};
use crate::workload::{CheckError, Db, LoadError, Workload};
use hdrhistogram::Histogram;
use splitkv_host::table::TableKind;
use splitkv_host::{build_node, HostWorker, Node, NodeConfig, NodeError};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
use splitkv_nic::net::Transport;
use splitkv_nic::{Component, Nanos, NicRuntime, Placement, PlacementError, ProcedureRegistry};

/// Rows loaded between two calls of the loading progress callback.
pub const LOAD_PROGRESS_ROWS: u64 = 65_536;

/// Shape of a cluster run (the workload's own parameters are the workload's).
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Replicas per shard (primary + backups).
    pub replication: usize,
    /// Transactions each node's client keeps outstanding.
    pub inflight_per_node: usize,
    /// Seed of every random choice of the clients (generators and backoff).
    pub seed: u64,
    /// Transactions each node's client draws (`None`: until stopped).
    pub budget_per_node: Option<u64>,
    /// Keep the record of every committed transaction.
    pub record: bool,
    /// Conflict retries of the clients.
    pub retry: RetryPolicy,
    /// DMA completion latency in ns.
    pub dma_latency_ns: u64,
    /// Prefetch host-table lines when the NIC submits a DMA read.
    pub dma_prefetch: bool,
    /// Host table maximum displacement D_m.
    pub d_max: usize,
    /// NIC object-cache capacity per node, in objects.
    pub cache_objects: usize,
    /// Host table kind.
    pub table: TableKind,
}

impl ClusterSpec {
    /// Defaults of the main job: 3 nodes, replication 3, 64 transactions in
    /// flight per node, seed 1.
    pub fn new() -> ClusterSpec {
        ClusterSpec {
            nodes: 3,
            replication: 3,
            inflight_per_node: 64,
            seed: 1,
            budget_per_node: None,
            record: false,
            retry: RetryPolicy::default(),
            dma_latency_ns: 0,
            dma_prefetch: true,
            d_max: 16,
            cache_objects: splitkv_nic::index::CACHE_OBJECTS_DEFAULT,
            table: TableKind::Robinhood,
        }
    }
}

impl Default for ClusterSpec {
    fn default() -> Self {
        ClusterSpec::new()
    }
}

/// Why a cluster could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Bad node count or replication degree.
    #[error(transparent)]
    Placement(#[from] PlacementError),
    /// A node could not be assembled.
    #[error("node: {0}")]
    Node(#[from] NodeError),
    /// The initial rows did not load.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// Not one transport per node.
    #[error("{transports} transports for {nodes} nodes")]
    Transports {
        /// Transports given.
        transports: usize,
        /// Nodes asked for.
        nodes: usize,
    },
}

/// n nodes running workload `W`.
pub struct BenchCluster<W: Workload> {
    /// The spec it was built from.
    pub spec: ClusterSpec,
    /// The workload.
    pub workload: W,
    /// Placement of keys.
    pub placement: Placement,
    /// NIC runtimes, by node.
    pub nics: Vec<NicRuntime>,
    /// Host workers (and their tables), by node.
    pub workers: Vec<HostWorker>,
    /// Load generators, by node.
    pub loadgens: Vec<LoadGen<W::Generator>>,
}

impl<W: Workload> std::fmt::Debug for BenchCluster<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BenchCluster")
            .field("workload", &self.workload.name())
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

/// Assembles node `n`: the one place a bench cluster builds its nodes.
fn assemble_node(
    spec: &ClusterSpec,
    placement: Placement,
    capacity_keys: usize,
    value_bytes_max: usize,
    n: usize,
    procedures: ProcedureRegistry,
    transport: Box<dyn Transport>,
) -> Result<Node, NodeError> {
    let mut cfg = NodeConfig::new(n as u16, placement, capacity_keys, value_bytes_max);
    cfg.table.d_max = spec.d_max;
    cfg.dma_latency_ns = spec.dma_latency_ns;
    cfg.dma_prefetch = spec.dma_prefetch;
    cfg.cache_objects = spec.cache_objects;
    cfg.table_kind = spec.table;
    build_node(&cfg, procedures, transport)
}

impl<W: Workload> BenchCluster<W> {
    /// Builds the nodes over `transports` (one per node, in node order) and loads
    /// the workload's rows on all their replicas; `progress(rows)` is called as
    /// rows load.
    ///
    /// # Errors
    /// [`BuildError`] for a bad shape, a node that cannot be built, or a row
    /// that does not load.
    pub fn build(
        spec: ClusterSpec,
        workload: W,
        transports: Vec<Box<dyn Transport>>,
        mut progress: impl FnMut(u64),
    ) -> Result<BenchCluster<W>, BuildError> {
        let placement = Placement::new(spec.nodes, spec.replication)?;
        if transports.len() != spec.nodes {
            return Err(BuildError::Transports {
                transports: transports.len(),
                nodes: spec.nodes,
            });
        }
        let per_node = workload.rows() * spec.replication as u64 / spec.nodes as u64;
        let capacity = (per_node + per_node / 8 + 1024) as usize;
        let (mut nics, mut workers, mut loadgens) = (Vec::new(), Vec::new(), Vec::new());
        for (n, t) in transports.into_iter().enumerate() {
            let mut procs = ProcedureRegistry::new();
            workload.register(&mut procs);
            let node = assemble_node(
                &spec,
                placement,
                capacity,
                workload.value_bytes_max(),
                n,
                procs,
                t,
            )?;
            nics.push(node.nic);
            workers.push(node.worker);
            let cfg = LoadGenConfig {
                seed: spec.seed,
                inflight_max: spec.inflight_per_node,
                budget: spec.budget_per_node,
                record: spec.record,
                retry: spec.retry,
            };
            let gen = workload.generator(n as u16, spec.seed);
            loadgens.push(LoadGen::new(n as u16, node.client, gen, cfg));
        }
        let meta = ObjectMeta::new(1, ObjectFlags::empty());
        let mut loaded = 0u64;
        workload.load(&mut |k: Key, value: &[u8]| {
            for (n, w) in workers.iter_mut().enumerate() {
                if placement.is_replica(n as u16, &k) {
                    w.table_mut()
                        .upsert(k, meta, value)
                        .map_err(|source| LoadError::Table {
                            key: k,
                            node: n as u16,
                            source,
                        })?;
                }
            }
            loaded += 1;
            if loaded.is_multiple_of(LOAD_PROGRESS_ROWS) {
                progress(loaded);
            }
            Ok(())
        })?;
        progress(loaded);
        Ok(BenchCluster {
            spec,
            workload,
            placement,
            nics,
            workers,
            loadgens,
        })
    }

    /// Every component, node by node: NIC runtime, host worker, load generator.
    pub fn components(&mut self) -> Vec<&mut dyn Component> {
        let mut v: Vec<&mut dyn Component> = Vec::new();
        for ((nic, w), l) in self
            .nics
            .iter_mut()
            .zip(self.workers.iter_mut())
            .zip(self.loadgens.iter_mut())
        {
            v.push(nic);
            v.push(w);
            v.push(l);
        }
        v
    }

    /// Counts into the window figures only outcomes taken at
    /// `from_ns <= now < until_ns` (see [`LoadGen::set_window`]).
    pub fn set_window(&mut self, from_ns: Nanos, until_ns: Nanos) {
        self.loadgens
            .iter_mut()
            .for_each(|l| l.set_window(from_ns, until_ns));
    }

    /// Stops every load generator from drawing new transactions.
    pub fn stop_load(&mut self) {
        self.loadgens.iter_mut().for_each(LoadGen::stop);
    }

    /// Whether every transaction finished and every node is idle (call after
    /// [`BenchCluster::stop_load`] or with a budget).
    pub fn is_quiescent(&mut self) -> bool {
        self.loadgens.iter().all(LoadGen::is_done)
            && self.nics.iter_mut().all(NicRuntime::is_quiescent)
            && self.workers.iter_mut().all(HostWorker::is_quiescent)
    }

    /// Runs every component on this thread, advancing `now` by `tick_ns` per
    /// pass, until quiescent; returns the time reached.
    ///
    /// # Errors
    /// [`CheckError::NotQuiescent`] after `max_passes` passes.
    pub fn drain(
        &mut self,
        mut now: u64,
        tick_ns: u64,
        max_passes: u64,
    ) -> Result<u64, CheckError> {
        for _ in 0..max_passes {
            if self.is_quiescent() {
                return Ok(now);
            }
            for c in self.components() {
                c.run_iteration(now);
            }
            now += tick_ns;
        }
        Err(CheckError::NotQuiescent(format!(
            "after {max_passes} passes: {:?}",
            self.loadgens.iter().map(|l| l.stats()).collect::<Vec<_>>()
        )))
    }

    /// Counters over every outcome, summed over nodes.
    pub fn load_stats(&self) -> LoadStats {
        self.sum(LoadGen::stats)
    }

    /// Counters over the outcomes within the window, summed over nodes.
    pub fn window_stats(&self) -> LoadStats {
        self.sum(LoadGen::window_stats)
    }

    fn sum(&self, f: impl Fn(&LoadGen<W::Generator>) -> LoadStats) -> LoadStats {
        let mut s = LoadStats::default();
        for l in &self.loadgens {
            s.add(&f(l));
        }
        s
    }

    /// Latency (ns) of the transactions committed within the window, all nodes.
    pub fn latency_ns(&self) -> Histogram<u64> {
        let mut h = self.loadgens[0].latency_ns().clone();
        for l in &self.loadgens[1..] {
            h.add(l.latency_ns()).expect("same histogram bounds");
        }
        h
    }

    /// Every committed transaction, node by node, in outcome order (if recorded).
    pub fn committed_record(&self) -> Vec<CommittedTx> {
        self.loadgens
            .iter()
            .flat_map(|l| l.record().unwrap_or(&[]).iter().cloned())
            .collect()
    }

    /// An order-sensitive hash of every client's outcomes (node by node).
    pub fn outcome_trace_hash(&self) -> u64 {
        self.loadgens.iter().fold(0, |h, l| {
            crate::loadgen::fold_trace(h, &l.trace_hash().to_le_bytes())
        })
    }

    /// The data, for checks (meaningful once quiescent).
    pub fn db(&self) -> Db<'_> {
        Db {
            placement: self.placement,
            workers: &self.workers,
        }
    }

    /// The workload's own check over the database.
    ///
    /// # Errors
    /// What the workload's check reports.
    pub fn check(&self) -> Result<W::Report, CheckError> {
        let gens: Vec<&W::Generator> = self.loadgens.iter().map(LoadGen::generator).collect();
        self.workload.check(&self.db(), &gens)
    }

    /// The replica check ([`crate::replicas`]).
    ///
    /// # Errors
    /// [`CheckError::Replica`] or [`CheckError::RowCount`].
    pub fn check_replicas(&self) -> Result<ReplicaReport, CheckError> {
        check_replicas(&self.db())
    }
}
