//! The history workloads as [`Workload`]s: Elle's list-append and the
//! read-write register (Kingsbury & Alvaro, VLDB'20), run on the same cluster
//! path as Smallbank ([`crate::cluster::BenchCluster`], on every driver), with
//! the history check as their [`Workload::check`]:
//!
//! 1. every client's [`HistoryGen`] recorded a Jepsen history; the histories
//!    are merged (and written as JSON lines if asked: `--history FILE`);
//! 2. the strict-serializability checker (`splitkv_check::checker`, Adya's
//!    anomalies with real-time edges) finds no anomaly;
//! 3. the lost-commit accounting (`splitkv_check::lost_commits`) matches every
//!    key's final version and value at its primary, read from the database,
//!    to the committed writes, and the fault-free counters (stale records,
//!    bad entries, decode errors) are zero.
//!
//! With [`TxApi::Txn`] ([`HistoryCheck::with_api`]) the register's
//! transactions run as one-shot `Txn`s ([`crate::register_txn`]) and the
//! same checks run on their history.
//!
//! One attempt per transaction ([`Workload::max_tries`] is 1): a conflict is
//! a `fail` in the history, never retried with the same unique values.

mod file;

pub use file::{check_file, FileCheckError};

use crate::api::{ApiError, TxApi};
use crate::history_gen::{write_history, HistoryGen, HistoryStats, MicroOpSource};
use crate::history_gen::{TxShape, WorkloadConfigError};
use crate::list_append::{self, ListAppendConfig, ListAppendGenerator, ListAppendTxn};
use crate::list_append::{LIST_TABLE, LIST_VALUE_BYTES_MAX};
use crate::register::{self, RegisterConfig, RegisterGenerator, RegisterTxn};
use crate::register::{REGISTER_TABLE, REGISTER_VALUE_BYTES};
use crate::register_txn::TxnRegisterSource;
use crate::workload::{CheckError, Db, RowIter, Workload};
use splitkv_check::checker::{self, CheckOptions, CheckReport, Model};
use splitkv_check::history::History;
use splitkv_check::lost_commits::{self, FinalRow, FinalValue, LostCommitReport, NodeCounters};
use splitkv_host::cluster::LOADED_VERSION;
use splitkv_layout::Key;
use splitkv_nic::procedure::txn::TXN_PROCEDURE_ID;
use splitkv_nic::ProcedureRegistry;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

pub use crate::history_gen::HISTORY_PROCEDURE;

/// Which history workload, with its generator configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryKind {
    /// Elle's list-append.
    ListAppend(ListAppendConfig),
    /// Read-write registers with unique values.
    Register(RegisterConfig),
}

/// The generator every client of a history workload runs.
pub type HistoryGenerator = HistoryGen<Box<dyn MicroOpSource>>;

/// A history workload: list-append or register, checked for strict
/// serializability and lost commits (module docs).
#[derive(Debug, Clone)]
pub struct HistoryCheck {
    /// The workload.
    pub kind: HistoryKind,
    /// Check real-time edges (strict serializability); off: plain serializability.
    pub realtime: bool,
    /// Where the check writes the merged history as JSON lines (before
    /// checking it, so a failing run leaves its history behind).
    pub history_path: Option<PathBuf>,
    /// How the transactions reach the store (set by [`HistoryCheck::with_api`]).
    api: TxApi,
}

impl HistoryCheck {
    /// List-append over `active_keys` hot keys, for `clients` clients drawing
    /// at most `budget_per_client` transactions each (the key space is sized
    /// for that).
    ///
    /// # Errors
    /// [`WorkloadConfigError`] for fewer than 2 keys or too many clients.
    pub fn list_append(
        active_keys: u64,
        clients: u64,
        budget_per_client: u64,
        shape: TxShape,
    ) -> Result<HistoryCheck, WorkloadConfigError> {
        let cfg = ListAppendConfig::new(active_keys, clients, budget_per_client, shape)?;
        Ok(HistoryCheck::new(HistoryKind::ListAppend(cfg)))
    }

    /// Registers over `keys` keys.
    ///
    /// # Errors
    /// [`WorkloadConfigError`] for fewer than 2 keys.
    pub fn register(keys: u64, shape: TxShape) -> Result<HistoryCheck, WorkloadConfigError> {
        let cfg = RegisterConfig::new(keys, shape)?;
        Ok(HistoryCheck::new(HistoryKind::Register(cfg)))
    }

    /// `kind`, strict serializability, no history file.
    pub fn new(kind: HistoryKind) -> HistoryCheck {
        HistoryCheck {
            kind,
            realtime: true,
            history_path: None,
            api: TxApi::Shipped,
        }
    }

    /// The same workload with its transactions reaching the store through
    /// `api`: the register's through one `Txn` each ([`crate::register_txn`]).
    ///
    /// # Errors
    /// [`ApiError::InteractiveNotBuilt`]; [`ApiError::ListAppendTxn`] for
    /// list-append through the `Txn`.
    pub fn with_api(mut self, api: TxApi) -> Result<HistoryCheck, ApiError> {
        let api = api.check_built()?;
        if api == TxApi::Txn && matches!(self.kind, HistoryKind::ListAppend(_)) {
            return Err(ApiError::ListAppendTxn);
        }
        self.api = api;
        Ok(self)
    }

    /// How the transactions reach the store.
    pub fn api(&self) -> TxApi {
        self.api
    }

    /// The checker's data model.
    pub fn model(&self) -> Model {
        match self.kind {
            HistoryKind::ListAppend(_) => Model::ListAppend,
            HistoryKind::Register(_) => Model::Register,
        }
    }

    fn table(&self) -> u32 {
        match self.kind {
            HistoryKind::ListAppend(_) => LIST_TABLE,
            HistoryKind::Register(_) => REGISTER_TABLE,
        }
    }

    /// Keys loaded before the run (ids `0..keys_total` of the workload's table).
    pub fn keys_total(&self) -> u64 {
        match self.kind {
            HistoryKind::ListAppend(c) => c.keys_total(),
            HistoryKind::Register(c) => c.keys,
        }
    }

    fn decode(&self, key: u64, bytes: &[u8]) -> Result<FinalValue, String> {
        match self.kind {
            HistoryKind::ListAppend(_) => list_append::decode_list(key, bytes)
                .map(FinalValue::List)
                .map_err(|e| e.to_string()),
            HistoryKind::Register(_) => register::decode_register(key, bytes)
                .map(FinalValue::Register)
                .map_err(|e| e.to_string()),
        }
    }

    /// Every key of the workload's table as its primary holds it.
    /// Writes `history` to `path` (if given), then checks it for strict
    /// serializability under this workload's model; an invalid history is a
    /// [`CheckError::Failed`] naming its anomalies. One step of
    /// [`Workload::check`], shared with the check across node processes.
    pub(crate) fn check_strict(
        &self,
        history: &History,
        path: Option<&std::path::Path>,
    ) -> Result<CheckReport, CheckError> {
        let failed = |check, detail| CheckError::Failed { check, detail };
        if let Some(path) = path {
            write_history(path, history)
                .map_err(|e| failed("history", format!("writing {}: {e}", path.display())))?;
        }
        let opts = CheckOptions {
            model: self.model(),
            realtime: self.realtime,
            ..CheckOptions::default()
        };
        let report = checker::check(history, &opts)
            .map_err(|e| failed("history", format!("malformed history: {e}")))?;
        if !report.valid {
            let first = report.anomalies.first().map(|a| a.to_string());
            return Err(failed(
                "strict-serializability",
                format!(
                    "anomalies found: {} (first: {})",
                    anomaly_names(&report),
                    first.unwrap_or_default()
                ),
            ));
        }
        Ok(report)
    }

    /// The lost-commit accounting of `history` against the final `rows`
    /// (every key loaded at [`LOADED_VERSION`]).
    pub(crate) fn check_lost(
        &self,
        history: &History,
        rows: &BTreeMap<u64, FinalRow>,
    ) -> Result<LostCommitReport, CheckError> {
        let initial: BTreeMap<u64, u64> = (0..self.keys_total())
            .map(|k| (k, LOADED_VERSION))
            .collect();
        lost_commits::check(history, &initial, rows).map_err(|e| CheckError::Failed {
            check: "lost-commit",
            detail: e.to_string(),
        })
    }

    /// Every key of the workload's table as its primary in `db` holds it.
    pub(crate) fn final_rows(&self, db: &Db<'_>) -> Result<BTreeMap<u64, FinalRow>, CheckError> {
        let mut rows = BTreeMap::new();
        let mut buf = Vec::new();
        for id in 0..self.keys_total() {
            let key = Key::new(self.table(), id);
            let Some(meta) = db.get(&key, &mut buf) else {
                continue;
            };
            let value = self.decode(id, &buf).map_err(|detail| CheckError::Failed {
                check: "lost-commit",
                detail: format!("key {id}: stored value does not decode: {detail}"),
            })?;
            let version = meta.version();
            rows.insert(id, FinalRow { version, value });
        }
        Ok(rows)
    }
}

/// What a history check found (valid or not: an invalid history is a
/// [`CheckError::Failed`] whose detail names the anomalies).
#[derive(Debug, Clone)]
pub struct HistoryReport {
    /// The clients' counters, summed.
    pub stats: HistoryStats,
    /// Operations in the merged history.
    pub ops: usize,
    /// The checker's report.
    pub checker: CheckReport,
    /// The lost-commit accounting.
    pub lost: LostCommitReport,
    /// Longest final list, or most writes of a register, over all keys.
    pub hottest_key_writes: u64,
}

/// The merged history of `gens` (each finished).
///
/// # Errors
/// [`CheckError::Failed`] if a generator was not finished
/// ([`crate::cluster::BenchCluster::finish`]).
pub fn merged_history(gens: &[&HistoryGenerator]) -> Result<History, CheckError> {
    if !gens.iter().all(|g| g.is_finished()) {
        return Err(CheckError::Failed {
            check: "history",
            detail: "the run was not finished: completions are unrecorded".into(),
        });
    }
    Ok(History::merge(gens.iter().map(|g| g.ops().to_vec())))
}

/// The host worker's stale records that count as a fault at `node`: none
/// at a node that was copied (re-replication: a new backup or a rejoined node
/// skips the forwarded records its snapshot already held, by design).
pub fn stale_records_counted(node: &splitkv_host::cluster::NodeParts) -> u64 {
    if node.nic.copy_stats().caught_up > 0 {
        0
    } else {
        node.worker.stats().stale
    }
}

/// The fault-free counters of every node (zero in a fault-free run).
pub fn node_counters(db: &Db<'_>) -> Vec<NodeCounters> {
    db.nodes
        .iter()
        .enumerate()
        .map(|(n, parts)| {
            let (w, s) = (parts.worker.stats(), parts.nic.stats());
            NodeCounters {
                node: n as u16,
                stale_records: stale_records_counted(parts),
                bad_entries: w.bad_entries,
                host_decode_errors: s.server.host_decode_errors,
                bad_packets: s.bad_packets,
                bad_ring_entries: s.bad_ring_entries,
            }
        })
        .collect()
}

/// "G2-item x3, G-single x1": every anomaly kind found with its count.
pub fn anomaly_names(report: &CheckReport) -> String {
    let kinds: Vec<String> = report
        .found
        .iter()
        .map(|(k, n)| format!("{} x{n}", k.name()))
        .collect();
    kinds.join(", ")
}

impl Workload for HistoryCheck {
    type Generator = HistoryGenerator;
    type Report = HistoryReport;

    fn name(&self) -> &'static str {
        match self.kind {
            HistoryKind::ListAppend(_) => "list-append",
            HistoryKind::Register(_) => "register",
        }
    }

    /// The workload's procedure (with the `Txn` api none: every registry
    /// has the built-in `Txn`).
    fn register(&self, reg: &mut ProcedureRegistry) {
        if self.api == TxApi::Txn {
            return;
        }
        match self.kind {
            HistoryKind::ListAppend(_) => reg.register(Arc::new(ListAppendTxn)),
            HistoryKind::Register(_) => reg.register(Arc::new(RegisterTxn)),
        };
    }

    fn rows(&self) -> u64 {
        self.keys_total()
    }

    fn value_bytes_max(&self) -> usize {
        match self.kind {
            HistoryKind::ListAppend(_) => LIST_VALUE_BYTES_MAX,
            HistoryKind::Register(_) => REGISTER_VALUE_BYTES,
        }
    }

    /// Every key with the empty value (an empty list, an unwritten register).
    fn initial_rows(&self) -> RowIter<'_> {
        let table = self.table();
        Box::new((0..self.keys_total()).map(move |id| (Key::new(table, id), Vec::new())))
    }

    fn generator(&self, client: u16, seed: u64) -> HistoryGenerator {
        let (source, procedure): (Box<dyn MicroOpSource>, u32) = match (self.kind, self.api) {
            (HistoryKind::ListAppend(c), _) => (
                Box::new(ListAppendGenerator::new(c, client as u64, seed)),
                HISTORY_PROCEDURE,
            ),
            (HistoryKind::Register(c), TxApi::Txn) => {
                let inner = RegisterGenerator::new(c, client as u64, seed);
                (Box::new(TxnRegisterSource::new(inner)), TXN_PROCEDURE_ID)
            }
            (HistoryKind::Register(c), _) => (
                Box::new(RegisterGenerator::new(c, client as u64, seed)),
                HISTORY_PROCEDURE,
            ),
        };
        HistoryGen::for_client(source, procedure, client)
    }

    fn max_tries(&self) -> Option<u32> {
        Some(1)
    }

    fn write_history(
        &self,
        gens: &[&HistoryGenerator],
        path: &std::path::Path,
    ) -> Result<bool, CheckError> {
        let history = merged_history(gens)?;
        write_history(path, &history).map_err(|e| CheckError::Failed {
            check: "history",
            detail: format!("writing {}: {e}", path.display()),
        })?;
        Ok(true)
    }

    fn check(&self, db: &Db<'_>, gens: &[&HistoryGenerator]) -> Result<HistoryReport, CheckError> {
        let history = merged_history(gens)?;
        let mut stats = HistoryStats::default();
        gens.iter().for_each(|g| stats.add(&g.stats()));
        self.check_history(db, &history, stats)
    }
}

impl HistoryCheck {
    /// The workload's check over a history its clients recorded (merged)
    /// and their summed counters `stats`: strict serializability, then the
    /// lost-commit accounting against the rows of `db`, then the
    /// fault-free counters. What [`Workload::check`] runs over the in-node
    /// generators, for clients that ran elsewhere (external processes).
    ///
    /// # Errors
    /// [`CheckError`] of the first check that fails.
    pub fn check_history(
        &self,
        db: &Db<'_>,
        history: &History,
        stats: HistoryStats,
    ) -> Result<HistoryReport, CheckError> {
        let report = self.check_strict(history, self.history_path.as_deref())?;
        let rows = self.final_rows(db)?;
        let lost = self.check_lost(history, &rows)?;
        lost_commits::check_fault_free_counters(&node_counters(db)).map_err(|e| {
            CheckError::Failed {
                check: "fault-free counters",
                detail: e.to_string(),
            }
        })?;
        let hottest_key_writes = rows
            .values()
            .map(|r| match &r.value {
                FinalValue::List(l) => l.len() as u64,
                FinalValue::Register(_) => r.version - LOADED_VERSION,
            })
            .max()
            .unwrap_or(0);
        Ok(HistoryReport {
            stats,
            ops: history.len(),
            checker: report,
            lost,
            hottest_key_writes,
        })
    }
}
