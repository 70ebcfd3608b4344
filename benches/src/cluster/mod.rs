//! A cluster running one [`Workload`]: n nodes assembled by the embedding API
//! (`splitkv_host::cluster::Cluster::builder()` → `build_parts`), the
//! workload's rows loaded through its `load`, and one load generator per node.
//! The same cluster runs under the deterministic simulator (the sim tests
//! and `splitkv sim` poll [`BenchCluster::components`] through
//! `splitkv_sim::cluster`, which also drives its faults) and the local
//! threaded driver (the `splitkv` binary, [`BenchCluster::run_threads`],
//! which hands the parts to the API's polling threads and takes them back
//! with `shutdown`); only the transports and the clock differ. The checks
//! live apart: the workload's own ([`Workload::check`], e.g.
//! [`crate::smallbank::check`] or the history check of [`crate::history`])
//! and the replica check ([`crate::replicas`]).

use crate::loadgen::{CommittedTx, LoadGen, LoadGenConfig, LoadStats, RetryPolicy};
use crate::replicas::{check_replicas, ReplicaReport};
use crate::workload::{CheckError, Db, Workload};
use hdrhistogram::Histogram;
use splitkv_host::cluster::{Cluster, ClusterBuilder, ClusterError, ClusterParts, LoadError};
use splitkv_host::deploy::ClientSettings;
use splitkv_host::node::NodeConfig;
use splitkv_host::table::TableKind;
use splitkv_layout::wire::{NodeId, NodeMask};
use splitkv_nic::net::Transport;
use splitkv_nic::{CommitProtocol, Component, Nanos, ProcedureRegistry};

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
    /// Polling threads of the local threaded driver ([`BenchCluster::run_threads`]).
    pub threads: usize,
    /// Silence after which a node declares a peer failed, ns (`None`: the
    /// session default).
    pub session_silence_ns: Option<Nanos>,
    /// Serve applications in other processes on every node
    /// (`ClusterBuilder::serve_applications`, L5 §III): how external
    /// workload clients attach (`None`: no socket).
    pub applications: Option<ClientSettings>,
    /// The commit protocol every node runs (default Xenic OCC; one not
    /// implemented yet fails the build with `NodeError::Commit`).
    pub commit: CommitProtocol,
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
            threads: splitkv_host::cluster::THREADS_DEFAULT,
            session_silence_ns: None,
            applications: None,
            commit: CommitProtocol::XenicOcc,
        }
    }
}

impl Default for ClusterSpec {
    fn default() -> Self {
        ClusterSpec::new()
    }
}

/// Why a cluster could not be built or run.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The embedding API refused the shape, could not assemble a node, or a
    /// polling thread panicked (`ClusterError::Panicked`: binaries map it to
    /// their internal-error exit code).
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The initial rows did not load.
    #[error("load: {0}")]
    Load(#[from] LoadError),
    /// A load generator could not be taken back from the polling threads.
    #[error("application component {0} is not a load generator of this cluster")]
    LostLoadGen(usize),
}

/// n nodes running workload `W`.
pub struct BenchCluster<W: Workload> {
    /// The spec it was built from.
    pub spec: ClusterSpec,
    /// The workload.
    pub workload: W,
    /// Every node's components (NIC runtime, host worker), as the embedding
    /// API hands them out.
    pub parts: ClusterParts,
    /// Load generators, by node.
    pub loadgens: Vec<LoadGen<W::Generator>>,
    /// Crashed nodes (set by the simulated runs): excluded from the end of a
    /// run ([`BenchCluster::is_quiescent`]) and from the checks' reads
    /// ([`Db::failed`]).
    pub failed: NodeMask,
}

impl<W: Workload> std::fmt::Debug for BenchCluster<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BenchCluster")
            .field("workload", &self.workload.name())
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

/// The embedding API's builder for `spec` running `workload`: the one place
/// a bench cluster's node settings are made.
pub fn builder<W: Workload>(spec: &ClusterSpec, workload: &W) -> ClusterBuilder {
    let mut procedures = ProcedureRegistry::new();
    workload.register(&mut procedures);
    let b = Cluster::builder()
        .nodes(spec.nodes)
        .replication(spec.replication)
        .table(spec.table)
        .capacity_keys(workload.rows().max(1) as usize)
        .value_bytes_max(workload.value_bytes_max())
        .procedures(procedures)
        .clients_per_node(1)
        .threads(spec.threads)
        .seed(spec.seed)
        .dma_latency_ns(spec.dma_latency_ns)
        .commit_protocol(spec.commit)
        .configure(node_settings(spec));
    match &spec.applications {
        Some(settings) => b.serve_applications(settings.clone()),
        None => b,
    }
}

/// The per-node settings `spec` makes beyond the builder's calls (D_m, DMA
/// prefetch, NIC cache, session silence, commit protocol): what [`builder`]
/// configures, for a driver that configures a node again (a restarted node's
/// new incarnation, which must run the cluster's protocol too).
pub fn node_settings(spec: &ClusterSpec) -> impl Fn(&mut NodeConfig) + Send + Sync + 'static {
    let (d_max, prefetch, cache) = (spec.d_max, spec.dma_prefetch, spec.cache_objects);
    let (silence, commit) = (spec.session_silence_ns, spec.commit);
    move |cfg| {
        cfg.commit = commit;
        cfg.table.d_max = d_max;
        cfg.dma_prefetch = prefetch;
        cfg.cache_objects = cache;
        if let Some(ns) = silence {
            cfg.net.session.silence_ns = ns;
        }
    }
}

impl<W: Workload> BenchCluster<W> {
    /// Builds the nodes over `transports` (one per node, in node order) with
    /// the embedding API and loads the workload's rows on all their replicas
    /// through it; `progress(rows)` is called as rows load.
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
        let mut parts = builder(&spec, &workload).build_parts(transports)?;
        parts.load(workload.initial_rows(), |p| progress(p.rows))?;
        let mut retry = spec.retry;
        if let Some(cap) = workload.max_tries() {
            retry.max_tries = retry.max_tries.min(cap.max(1));
        }
        let mut loadgens = Vec::with_capacity(spec.nodes);
        for n in 0..spec.nodes as u16 {
            let cfg = LoadGenConfig {
                seed: spec.seed,
                inflight_max: spec.inflight_per_node,
                budget: spec.budget_per_node,
                record: spec.record,
                retry,
            };
            let gen = workload.generator(n, spec.seed);
            loadgens.push(LoadGen::new(n, parts.client(n)?, gen, cfg));
        }
        Ok(BenchCluster {
            spec,
            workload,
            parts,
            loadgens,
            failed: NodeMask::EMPTY,
        })
    }

    /// Every component, node by node: NIC runtime, host worker, load generator.
    pub fn components(&mut self) -> Vec<&mut dyn Component> {
        let mut v: Vec<&mut dyn Component> = Vec::with_capacity(3 * self.loadgens.len());
        for (node, l) in self.parts.nodes.iter_mut().zip(self.loadgens.iter_mut()) {
            v.push(&mut node.nic);
            v.push(&mut node.worker);
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
    /// [`BenchCluster::stop_load`] or with a budget), over the nodes not in
    /// [`BenchCluster::failed`] (a crashed node's client never learns its
    /// in-flight outcomes).
    pub fn is_quiescent(&mut self) -> bool {
        let failed = self.failed;
        let live = |n: usize| !failed.contains(n as NodeId);
        let clients = self.loadgens.iter().enumerate();
        clients.filter(|(n, _)| live(*n)).all(|(_, l)| l.is_done())
            && self
                .parts
                .nodes
                .iter_mut()
                .enumerate()
                .filter(|(n, _)| live(*n))
                .all(|(_, p)| p.nic.is_quiescent() && p.worker.is_quiescent())
    }

    /// Runs every component on this thread, advancing `now` by `tick_ns` per
    /// pass, until quiescent, then ends the run at the time reached
    /// ([`BenchCluster::finish`]) and returns it.
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
                self.finish(now);
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

    /// Ends the run at `now`: every load generator stops drawing and its
    /// generator stamps what it recorded ([`LoadGen::finish`]). Call once the
    /// cluster is quiescent ([`BenchCluster::drain`] does), before the checks.
    pub fn finish(&mut self, now: Nanos) {
        self.loadgens.iter_mut().for_each(|l| l.finish(now));
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

    /// The data, for checks (meaningful once quiescent): the placement
    /// with the replica sets a surviving node serves (after
    /// re-replication a shard's members may be other nodes than its ring's).
    pub fn db(&self) -> Db<'_> {
        let roles = (0..self.parts.nodes.len())
            .find(|&n| !self.failed.contains(n as u16))
            .map(|n| self.parts.nodes[n].nic.recovery().view().roles())
            .unwrap_or_else(|| self.parts.placement.ring_roles());
        Db {
            placement: self.parts.placement.with_roles(roles),
            nodes: &self.parts.nodes,
            failed: self.failed,
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

    /// Writes the recorded client history to `path`, if the workload records
    /// one ([`Workload::write_history`]); call after [`BenchCluster::finish`].
    ///
    /// # Errors
    /// What the workload reports.
    pub fn write_history(&self, path: &std::path::Path) -> Result<bool, CheckError> {
        let gens: Vec<&W::Generator> = self.loadgens.iter().map(LoadGen::generator).collect();
        self.workload.write_history(&gens, path)
    }

    /// The replica check ([`crate::replicas`]).
    ///
    /// # Errors
    /// [`CheckError::Replica`] or [`CheckError::RowCount`].
    pub fn check_replicas(&self) -> Result<ReplicaReport, CheckError> {
        check_replicas(&self.db())
    }
}

mod threads;
pub use threads::{ThreadRun, PROGRESS_PERIOD};
