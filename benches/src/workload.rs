//! The `Workload` trait: what a benchmark or checker workload supplies to run on
//! a splitkv cluster, in the shape of FoundationDB's `fdbserver/workloads/`
//! (each workload a setup, a start and a check).
//!
//! A workload has four parts:
//!
//! 1. **procedures** ([`Workload::register`]): the shipped procedures (Xenic
//!    §4.2.2) it calls, registered into an empty [`ProcedureRegistry`] on every
//!    node, so the ids the generator draws are the ones the nodes run;
//! 2. **load** ([`Workload::initial_rows`]): the initial rows, which the
//!    cluster loads through the embedding API (`ClusterParts::load`, every
//!    row on all its replicas) before the run starts;
//! 3. **generator** ([`Workload::generator`]): one [`TxGenerator`] per client
//!    (node), seeded, drawing the next transaction (procedure id + encoded
//!    arguments) and told every outcome of the transactions it drew;
//! 4. **check** ([`Workload::check`]): after the cluster quiesced, reads the
//!    database ([`Db`]: every node's host table) and compares it with what the
//!    generators saw. A check must read the database; the clients' bookkeeping
//!    alone proves nothing.
//!
//! The cluster ([`crate::cluster::BenchCluster`]) is generic over a workload
//! and is the one path the `splitkv` binary and the simulator tests both run,
//! for Smallbank and for the history workloads (list-append and register,
//! [`crate::history`], whose check is the strict-serializability checker).
//! Conflict retries are the load generator's ([`crate::loadgen`]), not the
//! workload's: a generator sees each attempt's outcome (with
//! [`AttemptOutcome::attempt`] and [`AttemptOutcome::last`]) but never resubmits itself.
//!
//! # Writing one
//!
//! A complete example, run on the cluster path with a check that reads the
//! database, is `benches/tests/workload.rs` (a counter per key). In outline:
//!
//! ```ignore
//! struct Counter { keys: u64 }
//! struct CounterGen { rng: Xoshiro256PlusPlus, keys: u64, committed: u64 }
//! impl TxGenerator for CounterGen {
//!     fn next(&mut self, call: &mut TxCall) {
//!         call.procedure = INCREMENT;
//!         call.args.extend_from_slice(&self.rng.gen_range(0..self.keys).to_le_bytes());
//!     }
//!     fn on_outcome(&mut self, o: &AttemptOutcome<'_>) {
//!         self.committed += (o.status == TxStatus::Committed) as u64;
//!     }
//! }
//! impl Workload for Counter {
//!     type Generator = CounterGen;
//!     type Report = u64;
//!     fn name(&self) -> &'static str { "counter" }
//!     fn register(&self, reg: &mut ProcedureRegistry) { reg.register(Arc::new(Increment)); }
//!     fn rows(&self) -> u64 { self.keys }
//!     fn value_bytes_max(&self) -> usize { 8 }
//!     fn initial_rows(&self) -> RowIter<'_> {
//!         Box::new((0..self.keys).map(|k| (Key::new(0, k), 0u64.to_le_bytes().to_vec())))
//!     }
//!     fn generator(&self, client: u16, seed: u64) -> CounterGen { /* seed ^ client */ }
//!     fn check(&self, db: &Db<'_>, gens: &[&CounterGen]) -> Result<u64, CheckError> {
//!         // sum of the counters read at their primaries == committed increments
//!     }
//! }
//! ```

use splitkv_host::cluster::NodeParts;
use splitkv_host::HostWorker;
use splitkv_layout::wire::NodeMask;
use splitkv_layout::{Key, ObjectMeta};
use splitkv_nic::{Placement, PlacementView, ProcedureRegistry};

pub use splitkv_workloads::tx::{AttemptOutcome, TxCall, TxGenerator, PROCEDURES_MAX};

/// The initial rows of a workload: `(key, value)` pairs, each loaded on all
/// the key's replicas.
pub type RowIter<'a> = Box<dyn Iterator<Item = (Key, Vec<u8>)> + 'a>;

/// A workload: procedures, initial rows, a generator per client, and a check
/// over the database at the end. See the module docs.
pub trait Workload: Sync {
    /// The per-client transaction source.
    type Generator: TxGenerator;
    /// What a passing check found (printed by the binary).
    type Report: std::fmt::Debug;

    /// Short lower-case name ("smallbank").
    fn name(&self) -> &'static str;

    /// Registers the workload's procedures into an empty registry (the same on
    /// every node).
    fn register(&self, reg: &mut ProcedureRegistry);

    /// How many distinct keys the run may hold at most (sizes the host tables).
    fn rows(&self) -> u64;

    /// Largest value the workload writes, in bytes (sizes the host tables).
    fn value_bytes_max(&self) -> usize;

    /// Every initial row (at most [`Workload::rows`] distinct keys, each once).
    fn initial_rows(&self) -> RowIter<'_>;

    /// Most attempts per transaction this workload allows, whatever the
    /// cluster's retry policy says (`None`: no cap). The history workloads
    /// say 1: a retried attempt would reuse the failed attempt's unique
    /// values, and a history checker could not tell them apart.
    fn max_tries(&self) -> Option<u32> {
        None
    }

    /// The generator of client `client`, seeded from `seed` (distinct clients
    /// must draw distinct sequences from one seed).
    fn generator(&self, client: u16, seed: u64) -> Self::Generator;

    /// Checks the quiesced database against what the generators saw.
    fn check(&self, db: &Db<'_>, gens: &[&Self::Generator]) -> Result<Self::Report, CheckError>;

    /// Writes the client history the generators recorded to `path` (Jepsen's
    /// JSON lines), whatever state the run ended in: the simulator keeps the
    /// histories of failing and stalled seeds for an outside checker. Call
    /// after every generator finished (`BenchCluster::finish`). Returns
    /// whether this workload records a history (the default: it does not,
    /// and writes nothing).
    ///
    /// # Errors
    /// [`CheckError::Failed`] if the history cannot be merged or written.
    fn write_history(
        &self,
        gens: &[&Self::Generator],
        path: &std::path::Path,
    ) -> Result<bool, CheckError> {
        let _ = (gens, path);
        Ok(false)
    }
}

/// A check that failed after a run (a workload's, or the replica check).
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
    /// A workload's own check failed (for workloads without a variant here).
    #[error("{check} check failed: {detail}")]
    Failed {
        /// Which check.
        check: &'static str,
        /// What it found.
        detail: String,
    },
    /// The run did not quiesce.
    #[error("the cluster did not quiesce: {0}")]
    NotQuiescent(String),
}

/// Read access to a quiesced cluster's data: every node's host table and the
/// placement. Only valid when no transaction is in flight and every host log
/// is applied (the cluster hands one out only then).
#[derive(Debug, Clone, Copy)]
pub struct Db<'a> {
    /// Placement of keys on nodes, with the replica sets being served
    /// ([`Placement::roles`]: re-replication may move them).
    pub placement: Placement,
    /// Every node's components (NIC runtime, host worker owning the table), by node.
    pub nodes: &'a [NodeParts],
    /// Crashed nodes: their tables are not read, and a key's primary is its
    /// first surviving replica ([`PlacementView`], crash recovery's placement).
    pub failed: NodeMask,
}

impl Db<'_> {
    /// The placement view over the survivors, with the placement's replica
    /// sets (the healthy view when `failed` is empty or names every node).
    pub fn view(&self) -> PlacementView {
        PlacementView::with_roles(self.placement, self.failed, self.placement.roles())
            .unwrap_or_else(|_| PlacementView::healthy(self.placement))
    }

    /// Whether `node`'s table is read (it did not crash).
    pub fn is_live(&self, node: u16) -> bool {
        !self.failed.contains(node)
    }

    /// The value (into `value_out`) and metadata of `key` at its primary
    /// among the survivors (`None` also when every replica crashed).
    pub fn get(&self, key: &Key, value_out: &mut Vec<u8>) -> Option<ObjectMeta> {
        self.get_at(self.view().primary(key)?, key, value_out)
    }

    /// The value (into `value_out`) and metadata of `key` on node `node`
    /// (`None` also when `node` is outside the cluster).
    pub fn get_at(&self, node: u16, key: &Key, value_out: &mut Vec<u8>) -> Option<ObjectMeta> {
        self.nodes
            .get(node as usize)?
            .worker
            .table()
            .get(key, value_out)
    }

    /// The host workers (owning the tables), by node.
    pub fn workers(&self) -> impl ExactSizeIterator<Item = &HostWorker> {
        self.nodes.iter().map(|n| &n.worker)
    }
}
