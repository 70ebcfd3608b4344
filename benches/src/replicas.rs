//! The replica check, for any workload: after the cluster quiesced, every node
//! holds exactly the rows it replicates, each with its primary's value and
//! version. It needs no list of keys: each row a node holds must be one it
//! replicates and match the primary's copy, and each node must hold as many
//! rows as the primaries hold of the keys it replicates (so no row is missing).
//!
//! After crashes (crash recovery) only the survivors are compared: a crashed
//! node's table is not read, and a key's primary is its first surviving replica
//! in replica order ([`splitkv_nic::PlacementView`] of [`Db::failed`]). A
//! crashed coordinator's transaction may have reached its commit point (every
//! replica holds its LOG record) with its COMMIT delivered to some survivors
//! only: until recovery decides it, a survivor without the COMMIT holds the
//! newer version as a *pending* LOG record. Such a difference is counted as
//! undecided ([`ReplicaReport::undecided`]), allowed only when nodes crashed
//! and only when the older side holds exactly the newer side's version and
//! value pending; any other difference fails.

use crate::workload::CheckError;
use crate::workload::Db;
use splitkv_layout::log_record::LogKind;
use splitkv_layout::Key;

/// What the replica check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaReport {
    /// Rows compared against their primary (over all backups).
    pub rows_compared: u64,
    /// Rows held over all nodes.
    pub rows_total: u64,
    /// Rows that differ from their primary only by a pending LOG record of
    /// an undecided transaction (after crashes, before recovery).
    pub undecided: u64,
}

/// Whether `node` of `db` holds a pending (undecided) LOG record writing
/// `key` at `version` with `value`.
fn holds_pending(db: &Db<'_>, node: u16, key: &Key, version: u64, value: &[u8]) -> bool {
    let Some(parts) = db.nodes.get(node as usize) else {
        return false;
    };
    let w = &parts.worker;
    w.pending_tx_ids().any(|tx| {
        w.pending_records(tx).into_iter().flatten().any(|r| {
            r.is_ok_and(|r| {
                r.kind == LogKind::Log
                    && r.key == *key
                    && r.meta.version() == version
                    && r.value == value
            })
        })
    })
}

/// Checks every node of `db` against the primaries.
///
/// # Errors
/// [`CheckError::Replica`] for the first row that a node should not hold or
/// that differs from its primary; [`CheckError::RowCount`] if a node holds
/// fewer or more rows than it replicates.
pub fn check_replicas(db: &Db<'_>) -> Result<ReplicaReport, CheckError> {
    let nodes = db.nodes.len();
    let view = db.view();
    let mut expected = vec![0usize; nodes];
    for (n, w) in db.workers().enumerate() {
        if !db.is_live(n as u16) {
            continue;
        }
        w.table().for_each(|k, _, _| {
            if view.primary(&k) == Some(n as u16) {
                for (r, e) in expected.iter_mut().enumerate() {
                    *e += (db.is_live(r as u16) && db.placement.is_replica(r as u16, &k)) as usize;
                }
            }
        });
    }
    let mut report = ReplicaReport {
        rows_compared: 0,
        rows_total: 0,
        undecided: 0,
    };
    for (n, w) in db.workers().enumerate() {
        if !db.is_live(n as u16) {
            continue;
        }
        let t = w.table();
        if t.len() != expected[n] {
            return Err(CheckError::RowCount {
                node: n as u16,
                actual: t.len(),
                expected: expected[n],
            });
        }
        let mut err = None;
        let mut buf = Vec::new();
        t.for_each(|k, meta, value| {
            if err.is_some() {
                return;
            }
            report.rows_total += 1;
            let p = view.primary(&k).unwrap_or(n as u16);
            let fail = |pv: u64, detail| CheckError::Replica {
                node: n as u16,
                primary: p,
                key: k,
                replica_version: meta.version(),
                primary_version: pv,
                detail,
            };
            if !db.placement.is_replica(n as u16, &k) {
                err = Some(fail(0, " (the node is not a replica of this key)"));
            } else if p as usize != n {
                match db.get_at(p, &k, &mut buf) {
                    None => err = Some(fail(0, " (missing at the primary)")),
                    Some(pm) if pm.version() != meta.version() => {
                        let (pv, rv) = (pm.version(), meta.version());
                        let undecided = !db.failed.is_empty()
                            && if pv < rv {
                                holds_pending(db, p, &k, rv, value)
                            } else {
                                holds_pending(db, n as u16, &k, pv, &buf)
                            };
                        if undecided {
                            report.undecided += 1;
                        } else {
                            err = Some(fail(pv, ""))
                        }
                    }
                    Some(pm) if buf != value => {
                        err = Some(fail(pm.version(), " (same version, different value)"))
                    }
                    Some(_) => report.rows_compared += 1,
                }
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
    }
    Ok(report)
}
