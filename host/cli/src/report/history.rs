//! What `splitkv bench list-append|register` prints, in-process or
//! deployed: one [`Summary`], as text lines or one JSON object (the same
//! keys either way).
//!
//! A deployed run's text has three more things: its packets on the
//! throughput line, the replica check and the session counters
//! ([`Deployed`]); an in-process run prints none of them.

use super::{ratio, NicTotals, SessionTotals};
use crate::cli::HistoryBenchArgs;
use splitkv_bench::history::HistoryReport;
use splitkv_bench::history_gen::HistoryStats;
use splitkv_bench::remote::RemoteHistoryReport;
use splitkv_bench::CheckError;
use std::fmt;
use std::time::Duration;

/// What a history bench prints.
pub struct Summary<'a> {
    /// The workload's name (`list-append`, `register`).
    pub workload: &'a str,
    /// The command line.
    pub args: &'a HistoryBenchArgs,
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Replicas per shard.
    pub replication: usize,
    /// The clients' counters, summed.
    pub stats: HistoryStats,
    /// How long the run took (rates are per second of it; at least 1 ns).
    pub elapsed: Duration,
    /// What the history check found, or why it failed.
    pub checked: Result<Checked, &'a CheckError>,
    /// What only a deployed run reports; `None` in-process.
    pub deployed: Option<Deployed>,
}

/// What a passed history check found, in the figures the report prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    /// Transactions the checker saw.
    pub transactions: usize,
    /// Dependency edges it inferred.
    pub edges: usize,
    /// Operations in the merged history.
    pub ops: usize,
    /// Keys whose final state the lost-commit check read.
    pub keys_checked: u64,
    /// (committed transaction, key) writes found in the final versions.
    pub committed_key_writes: u64,
    /// Final values matched to their writers.
    pub values_checked: u64,
}

impl From<&HistoryReport> for Checked {
    fn from(r: &HistoryReport) -> Checked {
        Checked {
            transactions: r.checker.stats.txns.values().sum(),
            edges: r.checker.stats.edges.values().sum(),
            ops: r.ops,
            keys_checked: r.lost.keys_checked,
            committed_key_writes: r.lost.committed_key_writes,
            values_checked: r.lost.values_checked,
        }
    }
}

impl From<&RemoteHistoryReport> for Checked {
    fn from(r: &RemoteHistoryReport) -> Checked {
        Checked {
            transactions: r.checker.stats.txns.values().sum(),
            edges: r.checker.stats.edges.values().sum(),
            ops: r.ops,
            keys_checked: r.lost.keys_checked,
            committed_key_writes: r.lost.committed_key_writes,
            values_checked: r.lost.values_checked,
        }
    }
}

/// The lines only a deployed history run prints.
#[derive(Debug, Clone)]
pub struct Deployed {
    /// Every node's NIC counters (packets and messages are printed).
    pub nic: NicTotals,
    /// Every node's session counters.
    pub sessions: SessionTotals,
    /// The replica check's line ([`super::replica_line`]).
    pub replica_check: String,
}

impl Summary<'_> {
    /// Prints the summary: one JSON object with `json`, else its lines.
    pub fn print(&self, json: bool) {
        if json {
            println!("{}", self.json());
        } else {
            print!("{self}");
        }
    }

    fn secs(&self) -> f64 {
        self.elapsed.as_secs_f64().max(1e-9)
    }

    fn verdict(&self) -> String {
        match &self.checked {
            Ok(c) => format!(
                "valid ({} transactions, {} edges, {} ops)",
                c.transactions, c.edges, c.ops
            ),
            Err(e) => format!("FAILED: {e}"),
        }
    }

    fn lost(&self) -> String {
        match &self.checked {
            Ok(c) => format!(
                "ok ({} keys checked, {} committed key writes, {} values matched)",
                c.keys_checked, c.committed_key_writes, c.values_checked
            ),
            Err(CheckError::Failed { check, detail }) if *check == "lost-commit" => {
                format!("FAILED: {detail}")
            }
            Err(_) => "not run (an earlier check failed)".into(),
        }
    }

    /// The JSON object (keys as an in-process run has always printed them).
    pub fn json(&self) -> serde_json::Value {
        let s = &self.stats;
        serde_json::json!({
            "workload": self.workload,
            "nodes": self.nodes,
            "replication": self.replication,
            "keys": self.args.keys,
            "inflight": self.args.inflight,
            "seed": self.args.seed,
            "threads": self.args.threads,
            "submitted": s.submitted,
            "committed": s.committed,
            "failed": s.failed_total(),
            "conflicts": s.conflicts(),
            "indeterminate": s.indeterminate + s.bad_results,
            "seconds": self.secs(),
            "committed_per_s": s.committed as f64 / self.secs(),
            "history_check": self.verdict(),
            "history_valid": self.checked.is_ok(),
            "lost_commit_check": self.lost(),
            "history_file": self.args.history.as_ref().map(|p| p.display().to_string()),
        })
    }
}

/// The summary as text lines, each ending in a newline.
impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (s, secs, a) = (&self.stats, self.secs(), self.args);
        let on = match self.deployed {
            Some(_) => "node processes",
            None => "nodes",
        };
        writeln!(
            f,
            "{} on {} {on} (replication {}), {} keys, {} in flight per node, seed {}",
            self.workload, self.nodes, self.replication, a.keys, a.inflight, a.seed
        )?;
        writeln!(
            f,
            "transactions: {} submitted, {} committed, {} failed ({} conflicts), {} indeterminate",
            s.submitted,
            s.committed,
            s.failed_total(),
            s.conflicts(),
            s.indeterminate + s.bad_results
        )?;
        let packets = match &self.deployed {
            Some(d) => format!(
                "; {} packets, {:.2} messages/packet",
                d.nic.packets,
                ratio(d.nic.messages, d.nic.packets)
            ),
            None => String::new(),
        };
        writeln!(
            f,
            "throughput: {:.0} committed tx/s over {secs:.2} s{packets}",
            s.committed as f64 / secs
        )?;
        writeln!(
            f,
            "history check (strict serializability): {}",
            self.verdict()
        )?;
        writeln!(f, "lost-commit check: {}", self.lost())?;
        if let Some(d) = &self.deployed {
            writeln!(f, "replica check: {}", d.replica_check)?;
            writeln!(f, "{}", d.sessions.line())?;
        }
        if let Some(p) = &a.history {
            writeln!(f, "history written to {}", p.display())?;
        }
        Ok(())
    }
}
