//! The driver side of a bench across processes: the checks over what every
//! node sent back ([`Results`]), with the same rules as the in-process bench.
//!
//! The nodes' rows are put back into a *mirror*: the cluster the in-process
//! bench would build (same placement and workload), assembled but never run,
//! whose host tables are filled with each node's rows as that node holds
//! them. The replica check ([`check_replicas`]) then runs unchanged; the
//! money check reads the balances at their primaries as
//! [`crate::smallbank::check_money`] does, from the clients' summaries; the
//! history check merges every node's history (times moved to the machine's
//! monotonic clock, see [`merged_history`]) and runs the strict-serializability
//! checker and the lost-commit accounting over the primaries' rows.

use super::protocol::*;
use crate::cluster::{builder, ClusterSpec};
use crate::history::HistoryCheck;
use crate::history_gen::HistoryStats;
use crate::replicas::{check_replicas, ReplicaReport};
use crate::smallbank::{check_money_range, MoneyReport, Smallbank};
use crate::workload::{CheckError, Db, Workload};
use splitkv_check::checker::CheckReport;
use splitkv_check::history::{History, Op};
use splitkv_check::lost_commits::{self, LostCommitReport};
use splitkv_host::cluster::ClusterParts;
use splitkv_layout::wire::{NodeId, NodeMask};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::net::Transport;
use splitkv_nic::placement::Roles;
use splitkv_nic::Placement;
use std::path::Path;

/// What the history check of a run across processes found.
#[derive(Debug, Clone)]
pub struct RemoteHistoryReport {
    /// Operations in the merged history.
    pub ops: usize,
    /// The checker's report.
    pub checker: CheckReport,
    /// The lost-commit accounting.
    pub lost: LostCommitReport,
}

/// The nodes' rows in a mirror cluster (see the module docs).
pub struct Mirror {
    parts: ClusterParts,
    /// The mirror's placement with the replica sets the nodes served at
    /// the end ([`served_roles`]).
    placement: Placement,
    /// Nodes that died during the run (their rows are gone): the checks
    /// read each key at its first surviving replica, as the survivors serve it.
    failed: NodeMask,
}

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mirror").finish_non_exhaustive()
    }
}

fn failed(check: &'static str, detail: impl Into<String>) -> CheckError {
    CheckError::Failed {
        check,
        detail: detail.into(),
    }
}

impl Mirror {
    /// A mirror of `nodes` nodes with `replication` replicas running
    /// `workload`, holding each node's `results[n].rows`, with the replica
    /// sets the nodes served at the end ([`served_roles`]).
    ///
    /// # Errors
    /// [`CheckError::Failed`] if the mirror cannot be built, a row does not
    /// fit it (a node sent a malformed row), or the nodes' replica sets do
    /// not fit the cluster or disagree.
    pub fn new<W: Workload>(
        workload: &W,
        nodes: usize,
        replication: usize,
        results: &[Results],
    ) -> Result<Mirror, CheckError> {
        let mut spec = ClusterSpec::new();
        spec.nodes = nodes;
        spec.replication = replication;
        let transports = mem_network(nodes)
            .into_iter()
            .map(|t| Box::new(t) as Box<dyn Transport>)
            .collect();
        // Room for every row a node may hold, whatever the workload inserted.
        let rows: usize = results.iter().map(|r| r.rows.len()).sum();
        let b = builder(&spec, workload).capacity_keys(rows.max(workload.rows() as usize).max(1));
        let mut parts = b
            .build_parts(transports)
            .map_err(|e| failed("replica", format!("mirror: {e}")))?;
        let placement = match served_roles(nodes, replication, results)? {
            Some(roles) => parts.placement.with_roles(roles),
            None => parts.placement,
        };
        for r in results {
            let n = parts
                .index_of(r.node)
                .map_err(|e| failed("replica", e.to_string()))?;
            let table = parts.nodes[n].worker.table_mut();
            for row in &r.rows {
                let key = Key::new(row.table, row.id);
                let value = from_hex(&row.value).ok_or_else(|| {
                    failed("replica", format!("node {}: {key:?} is not hex", r.node))
                })?;
                let meta = ObjectMeta::new(row.version, ObjectFlags::empty());
                table
                    .upsert(key, meta, &value)
                    .map_err(|e| failed("replica", format!("node {}: {key:?}: {e}", r.node)))?;
            }
        }
        Ok(Mirror {
            parts,
            placement,
            failed: NodeMask::EMPTY,
        })
    }

    /// The same mirror with the nodes of `failed` dead (killed during the
    /// run): reads go to each key's first surviving replica, and the replica
    /// check compares the surviving replicas only.
    pub fn with_failed(mut self, failed: NodeMask) -> Mirror {
        self.failed = failed;
        self
    }

    /// The rows as a database view.
    pub fn db(&self) -> Db<'_> {
        Db {
            placement: self.placement,
            nodes: &self.parts.nodes,
            failed: self.failed,
        }
    }

    /// The replica check over the (surviving) nodes' rows.
    ///
    /// # Errors
    /// As [`check_replicas`].
    pub fn check_replicas(&self) -> Result<ReplicaReport, CheckError> {
        check_replicas(&self.db())
    }

    /// Smallbank's money check: balances at their primaries against the
    /// initial total plus the money the clients' committed transactions
    /// created, within the range the transactions of unknown outcome allow
    /// (the rule of [`crate::smallbank::check_money`]).
    ///
    /// # Errors
    /// [`CheckError::MissingRow`], [`CheckError::Money`], or
    /// [`CheckError::Failed`] if a node sent no Smallbank summary.
    pub fn check_money(
        &self,
        w: &Smallbank,
        results: &[Results],
    ) -> Result<MoneyReport, CheckError> {
        let mut created = 0i64;
        let (mut reads, mut sum) = (0u64, 0i64);
        let mut unknown = (0i64, 0i64);
        for r in results {
            let s = r.smallbank.ok_or_else(|| {
                failed(
                    "money",
                    format!("node {} sent no Smallbank summary", r.node),
                )
            })?;
            created += s.money_created;
            reads += s.balance_reads;
            sum += s.balance_total_sum;
            unknown.0 += s.money_unknown.0;
            unknown.1 += s.money_unknown.1;
        }
        check_money_range(w, &self.db(), created, unknown, reads, sum)
    }

    /// The history check of [`HistoryCheck`] across processes: every node's
    /// history merged (written to `history_path` first if given), checked for
    /// strict serializability, then the lost-commit accounting against the
    /// primaries' rows and the nodes' fault-free counters.
    ///
    /// # Errors
    /// [`CheckError::Failed`] naming the check and what it found.
    pub fn check_history(
        &self,
        w: &HistoryCheck,
        results: &[Results],
        history_path: Option<&Path>,
    ) -> Result<RemoteHistoryReport, CheckError> {
        let history = merged_history(results)?;
        let report = w.check_strict(&history, history_path)?;
        let rows = w.final_rows(&self.db())?;
        let lost = w.check_lost(&history, &rows)?;
        let counters: Vec<lost_commits::NodeCounters> = results
            .iter()
            .map(|r| lost_commits::NodeCounters {
                node: r.node,
                stale_records: r.counters.stale_records,
                bad_entries: r.counters.bad_entries,
                host_decode_errors: r.counters.host_decode_errors,
                bad_packets: r.counters.bad_packets,
                bad_ring_entries: r.counters.bad_ring_entries,
            })
            .collect();
        lost_commits::check_fault_free_counters(&counters)
            .map_err(|e| failed("fault-free counters", e.to_string()))?;
        Ok(RemoteHistoryReport {
            ops: history.len(),
            checker: report,
            lost,
        })
    }
}

/// The replica sets the nodes served at the end of the run: those of the
/// newest epoch any node reported ([`Results::roles`]), `None` when no node
/// reported any (the ring's then hold).
///
/// # Errors
/// [`CheckError::Failed`] when a node's replica sets do not fit a cluster
/// of `nodes` nodes with `replication` replicas, or two nodes of that epoch
/// disagree on them.
pub fn served_roles(
    nodes: usize,
    replication: usize,
    results: &[Results],
) -> Result<Option<Roles>, CheckError> {
    let newest = results
        .iter()
        .filter_map(|r| r.roles.as_ref().map(|roles| (r.node, roles)))
        .max_by_key(|(_, roles)| roles.epoch);
    let Some((first, newest)) = newest else {
        return Ok(None);
    };
    let roles_of = |node: u16, s: &ServedRoles| {
        let shards: Vec<(Vec<NodeId>, NodeMask)> = s
            .members
            .iter()
            .zip(s.joining.iter().chain(std::iter::repeat(&Vec::new())))
            .map(|(m, j)| (m.clone(), j.iter().fold(NodeMask::EMPTY, |a, &n| a.with(n))))
            .collect();
        let renewed = s.renewed.iter().fold(NodeMask::EMPTY, |a, &n| a.with(n));
        Roles::from_shards(nodes, replication, &shards, renewed)
            .map_err(|e| failed("replica", format!("node {node}'s replica sets: {e}")))
    };
    let roles = roles_of(first, newest)?;
    for r in results {
        if let Some(s) = r.roles.as_ref().filter(|s| s.epoch == newest.epoch) {
            if roles_of(r.node, s)? != roles {
                let detail = format!(
                    "nodes {first} and {} serve different replica sets in epoch {}",
                    r.node, newest.epoch
                );
                return Err(failed("replica", detail));
            }
        }
    }
    Ok(Some(roles))
}

/// Every node's history merged into one, each node's operations moved from
/// its clock to the machine's monotonic clock by its origin (the middle of
/// [`ClockOrigin`]'s bounds: one shift per node keeps each process's order).
/// The bounds are a few hundred ns apart at most, far below the network
/// delays between two nodes' operations; a real-time edge between
/// operations closer than that could be wrong either way. Across machines
/// this would need synchronised clocks.
///
/// # Errors
/// [`CheckError::Failed`] if a node sent no history or a malformed operation.
pub fn merged_history(results: &[Results]) -> Result<History, CheckError> {
    let mut parts = Vec::with_capacity(results.len());
    for r in results {
        let h = r
            .history
            .as_ref()
            .ok_or_else(|| failed("history", format!("node {} sent no history", r.node)))?;
        let shift = r.clock.lo_ns + (r.clock.hi_ns.saturating_sub(r.clock.lo_ns)) / 2;
        let mut ops = Vec::with_capacity(h.ops.len());
        for v in &h.ops {
            let mut op =
                Op::from_json(v).map_err(|e| failed("history", format!("node {}: {e}", r.node)))?;
            op.time_ns = op.time_ns.saturating_add(shift);
            ops.push(op);
        }
        parts.push(ops);
    }
    Ok(History::merge(parts))
}

/// The history counters of every node, summed.
pub fn history_stats(results: &[Results]) -> HistoryStats {
    let mut s = HistoryStats::default();
    for h in results.iter().filter_map(|r| r.history.as_ref()) {
        s.add(&HistoryStats::from(&h.stats));
    }
    s
}

#[cfg(test)]
#[path = "kill_tests.rs"]
mod kill_tests;

#[cfg(test)]
#[path = "roles_tests.rs"]
mod roles_tests;
