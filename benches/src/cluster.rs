//! A Smallbank cluster: n nodes with their load generators, the data loaded on
//! every replica, and the two end-of-run checks (money and replicas). The same
//! cluster runs under the local threaded driver (the `splitkv` command) and the
//! deterministic simulator (tests); only the transports differ.

use crate::loadgen::{CommittedTx, LoadGen, LoadStats};
use crate::smallbank::{self, account_keys, Generator, INITIAL_BALANCE};
use splitkv_host::{build_node, HostWorker, NodeConfig, NodeError};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
use splitkv_nic::net::Transport;
use splitkv_nic::{Component, NicRuntime, Placement, PlacementError, ProcedureRegistry};

/// Shape of a Smallbank run.
#[derive(Debug, Clone)]
pub struct SmallbankSpec {
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Replicas per shard (primary + backups).
    pub replication: usize,
    /// Accounts per node (the cluster holds `nodes ×` this many).
    pub accounts_per_node: u64,
    /// Hot-set size override (default: 4% of all accounts).
    pub hot_accounts: Option<u64>,
    /// Transactions each node's client keeps outstanding.
    pub inflight_per_node: usize,
    /// Seed of every random choice.
    pub seed: u64,
    /// Transactions each node's client submits (`None`: until stopped).
    pub budget_per_node: Option<u64>,
    /// Keep the record of every committed transaction.
    pub record: bool,
    /// DMA completion latency in ns.
    pub dma_latency_ns: u64,
    /// Prefetch host-table lines when the NIC submits a DMA read.
    pub dma_prefetch: bool,
    /// Host table maximum displacement D_m.
    pub d_max: usize,
    /// NIC object-cache capacity per node, in objects.
    pub cache_objects: usize,
    /// Host table kind.
    pub table: splitkv_host::table::TableKind,
}

impl SmallbankSpec {
    /// Defaults of the main job: 3 nodes, replication 3, 100,000 accounts per node.
    pub fn new() -> SmallbankSpec {
        SmallbankSpec {
            nodes: 3,
            replication: 3,
            accounts_per_node: 100_000,
            hot_accounts: None,
            inflight_per_node: 64,
            seed: 1,
            budget_per_node: None,
            record: false,
            dma_latency_ns: 0,
            dma_prefetch: true,
            d_max: 16,
            cache_objects: splitkv_nic::index::CACHE_OBJECTS_DEFAULT,
            table: splitkv_host::table::TableKind::Robinhood,
        }
    }

    /// All accounts in the cluster.
    pub fn accounts(&self) -> u64 {
        self.accounts_per_node * self.nodes as u64
    }
}

impl Default for SmallbankSpec {
    fn default() -> Self {
        SmallbankSpec::new()
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
    /// Fewer than two accounts, or one transport per node not supplied.
    #[error("{0}")]
    Spec(String),
}

/// A check that failed after a run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// The balances do not add up to what the committed transactions predict.
    #[error("money check failed: balances sum to {actual}, but the initial total {initial} plus {created} created by committed transactions is {expected}")]
    Money {
        /// Sum of all balances at the primaries.
        actual: i64,
        /// Initial total.
        initial: i64,
        /// Money created by committed transactions.
        created: i64,
        /// `initial + created`.
        expected: i64,
    },
    /// A row is missing at its primary.
    #[error("row {0:?} is missing at its primary")]
    MissingRow(Key),
    /// A replica differs from its primary.
    #[error("replica check failed: node {node} holds {key:?} at version {replica_version}, its primary node {primary} at version {primary_version}{detail}")]
    Replica {
        /// The backup.
        node: u16,
        /// The primary.
        primary: u16,
        /// The key.
        key: Key,
        /// Version at the backup.
        replica_version: u64,
        /// Version at the primary.
        primary_version: u64,
        /// Extra detail.
        detail: &'static str,
    },
    /// A node holds a different number of rows than it replicates.
    #[error("replica check failed: node {node} holds {actual} rows but replicates {expected}")]
    RowCount {
        /// The node.
        node: u16,
        /// Rows held.
        actual: usize,
        /// Rows it should hold.
        expected: usize,
    },
    /// The run did not quiesce.
    #[error("the cluster did not quiesce: {0}")]
    NotQuiescent(String),
}

/// What the money check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoneyReport {
    /// Initial total.
    pub initial: i64,
    /// Money created by committed transactions.
    pub created: i64,
    /// Final total (equal to `initial + created` when the check passed).
    pub total: i64,
}

/// What the replica check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaReport {
    /// Rows compared against their primary (over all backups).
    pub rows_compared: u64,
    /// Rows held over all nodes.
    pub rows_total: u64,
}

/// n nodes running Smallbank.
pub struct SmallbankCluster {
    /// The spec it was built from.
    pub spec: SmallbankSpec,
    /// Placement of keys.
    pub placement: Placement,
    /// NIC runtimes, by node.
    pub nics: Vec<NicRuntime>,
    /// Host workers (and their tables), by node.
    pub workers: Vec<HostWorker>,
    /// Load generators, by node.
    pub loadgens: Vec<LoadGen>,
}

impl std::fmt::Debug for SmallbankCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmallbankCluster")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl SmallbankCluster {
    /// Builds the nodes over `transports` (one per node, in node order) and loads
    /// every account on all its replicas; `progress(rows)` is called as rows load.
    pub fn build(
        spec: SmallbankSpec,
        transports: Vec<Box<dyn Transport>>,
        mut progress: impl FnMut(u64),
    ) -> Result<SmallbankCluster, BuildError> {
        let placement = Placement::new(spec.nodes, spec.replication)?;
        if spec.accounts() < 2 {
            return Err(BuildError::Spec(
                "smallbank needs at least 2 accounts".into(),
            ));
        }
        if transports.len() != spec.nodes {
            return Err(BuildError::Spec(format!(
                "{} transports for {} nodes",
                transports.len(),
                spec.nodes
            )));
        }
        let rows = 2 * spec.accounts();
        let per_node = rows * spec.replication as u64 / spec.nodes as u64;
        let capacity = (per_node + per_node / 8 + 1024) as usize;
        let gen = Generator::new(spec.accounts(), spec.hot_accounts);
        let (mut nics, mut workers, mut loadgens) = (Vec::new(), Vec::new(), Vec::new());
        for (n, t) in transports.into_iter().enumerate() {
            let mut procs = ProcedureRegistry::new();
            smallbank::register(&mut procs);
            let mut cfg = NodeConfig::new(n as u16, placement, capacity, 8);
            cfg.table.d_max = spec.d_max;
            cfg.dma_latency_ns = spec.dma_latency_ns;
            cfg.dma_prefetch = spec.dma_prefetch;
            cfg.cache_objects = spec.cache_objects;
            cfg.table_kind = spec.table;
            let node = build_node(&cfg, procs, t)?;
            nics.push(node.nic);
            workers.push(node.worker);
            loadgens.push(LoadGen::new(
                n as u16,
                node.client,
                gen.clone(),
                spec.seed,
                spec.inflight_per_node,
                spec.budget_per_node,
                spec.record,
            ));
        }
        let meta = ObjectMeta::new(1, ObjectFlags::empty());
        let value = INITIAL_BALANCE.to_le_bytes();
        let mut loaded = 0u64;
        for a in 0..spec.accounts() {
            for k in account_keys(a) {
                for (n, w) in workers.iter_mut().enumerate() {
                    if placement.is_replica(n as u16, &k) {
                        w.table_mut()
                            .upsert(k, meta, &value)
                            .map_err(|e| BuildError::Node(NodeError::Table(e)))?;
                    }
                }
            }
            loaded += 2;
            if loaded.is_multiple_of(65_536) {
                progress(loaded);
            }
        }
        progress(loaded);
        Ok(SmallbankCluster {
            spec,
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

    /// Stops every load generator from submitting.
    pub fn stop_load(&mut self) {
        self.loadgens.iter_mut().for_each(LoadGen::stop);
    }

    /// Whether every transaction finished and every node is idle (call after
    /// [`SmallbankCluster::stop_load`] or with a budget).
    pub fn is_quiescent(&mut self) -> bool {
        self.loadgens.iter().all(LoadGen::is_done)
            && self.nics.iter_mut().all(NicRuntime::is_quiescent)
            && self.workers.iter_mut().all(HostWorker::is_quiescent)
    }

    /// Runs every component on this thread, advancing `now` by `tick_ns` per
    /// pass, until quiescent; fails after `max_passes`.
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

    /// Load counters summed over nodes.
    pub fn load_stats(&self) -> LoadStats {
        let mut s = LoadStats::default();
        for l in &self.loadgens {
            s.add(&l.stats());
        }
        s
    }

    /// Every committed transaction, node by node, in outcome order (if recorded).
    pub fn committed_record(&self) -> Vec<CommittedTx> {
        self.loadgens
            .iter()
            .flat_map(|l| l.record().unwrap_or(&[]).iter().cloned())
            .collect()
    }

    /// Check 1: the sum of all balances at their primaries equals the initial
    /// total plus the money created by committed transactions.
    pub fn check_money(&self) -> Result<MoneyReport, CheckError> {
        let initial = 2 * INITIAL_BALANCE * self.spec.accounts() as i64;
        let created = self.load_stats().money_created;
        let mut total = 0i64;
        let mut buf = Vec::new();
        for a in 0..self.spec.accounts() {
            for k in account_keys(a) {
                let p = self.placement.primary(&k) as usize;
                if self.workers[p].table().get(&k, &mut buf).is_none() || buf.len() != 8 {
                    return Err(CheckError::MissingRow(k));
                }
                total += i64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
            }
        }
        if total != initial + created {
            return Err(CheckError::Money {
                actual: total,
                initial,
                created,
                expected: initial + created,
            });
        }
        Ok(MoneyReport {
            initial,
            created,
            total,
        })
    }

    /// Check 2: every node holds exactly the rows it replicates, each with the
    /// same value and version as at its primary.
    pub fn check_replicas(&self) -> Result<ReplicaReport, CheckError> {
        let mut expected = vec![0usize; self.spec.nodes];
        for a in 0..self.spec.accounts() {
            for k in account_keys(a) {
                for (n, e) in expected.iter_mut().enumerate() {
                    *e += self.placement.is_replica(n as u16, &k) as usize;
                }
            }
        }
        let mut report = ReplicaReport {
            rows_compared: 0,
            rows_total: 0,
        };
        let mut buf = Vec::new();
        for (n, w) in self.workers.iter().enumerate() {
            let t = w.table();
            if t.len() != expected[n] {
                return Err(CheckError::RowCount {
                    node: n as u16,
                    actual: t.len(),
                    expected: expected[n],
                });
            }
            let mut err = None;
            t.for_each(|k, meta, value| {
                if err.is_some() {
                    return;
                }
                report.rows_total += 1;
                let p = self.placement.primary(&k);
                let fail = |pv: u64, detail| CheckError::Replica {
                    node: n as u16,
                    primary: p,
                    key: k,
                    replica_version: meta.version(),
                    primary_version: pv,
                    detail,
                };
                if !self.placement.is_replica(n as u16, &k) {
                    err = Some(fail(0, " (the node is not a replica of this key)"));
                    return;
                }
                if p as usize == n {
                    return;
                }
                match self.workers[p as usize].table().get(&k, &mut buf) {
                    None => err = Some(fail(0, " (missing at the primary)")),
                    Some(pm) if pm.version() != meta.version() => {
                        err = Some(fail(pm.version(), ""))
                    }
                    Some(pm) if buf != value => {
                        err = Some(fail(pm.version(), " (same version, different value)"))
                    }
                    Some(_) => report.rows_compared += 1,
                }
            });
            if let Some(e) = err {
                return Err(e);
            }
        }
        Ok(report)
    }
}
