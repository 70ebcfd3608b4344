//! What `splitkv bench list-append|register` prints, in-process or
//! deployed: one [`Summary`], as text lines or one JSON object (the same
//! keys either way).
//!
//! A deployed run's text has three more things: its packets on the
//! throughput line, the replica check and the session counters
//! ([`Deployed`]); an in-process run prints none of them.

use super::{ratio, NicTotals, SessionTotals};
use crate::cli::HistoryRunArgs;
use splitkv_bench::history::HistoryReport;
use splitkv_bench::history_gen::HistoryStats;
use splitkv_bench::history_gen::TxShape;
use splitkv_bench::remote::RemoteHistoryReport;
use splitkv_bench::CheckError;
use splitkv_check::checker::CheckReport;
use splitkv_check::lost_commits::LostCommitReport;
use std::fmt;
use std::time::Duration;

/// What a history bench prints.
pub struct Summary<'a> {
    /// The workload's name (`list-append`, `register`).
    pub workload: &'a str,
    /// The command line's options every history bench takes.
    pub args: &'a HistoryRunArgs,
    /// Keys of the workload.
    pub keys: u64,
    /// What its transactions looked like.
    pub shape: TxShape,
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

impl Checked {
    /// What a passing check of `ops` history operations found.
    fn of(ops: usize, checker: &CheckReport, lost: &LostCommitReport) -> Checked {
        Checked {
            transactions: checker.stats.txns.values().sum(),
            edges: checker.stats.edges.values().sum(),
            ops,
            keys_checked: lost.keys_checked,
            committed_key_writes: lost.committed_key_writes,
            values_checked: lost.values_checked,
        }
    }
}

impl From<&HistoryReport> for Checked {
    fn from(r: &HistoryReport) -> Checked {
        Checked::of(r.ops, &r.checker, &r.lost)
    }
}

impl From<&RemoteHistoryReport> for Checked {
    fn from(r: &RemoteHistoryReport) -> Checked {
        Checked::of(r.ops, &r.checker, &r.lost)
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
            outln!("{}", self.json());
        } else {
            out!("{self}");
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
            "api": self.args.api.name(),
            "nodes": self.nodes,
            "replication": self.replication,
            "keys": self.keys,
            "shape": self.shape.to_string(),
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
        let api = match a.api.is_shipped() {
            true => String::new(),
            false => format!(", api {}", a.api.name()),
        };
        writeln!(
            f,
            "{} ({}) on {} {on} (replication {}), {} keys, {} in flight per node, seed {}{api}",
            self.workload, self.shape, self.nodes, self.replication, self.keys, a.inflight, a.seed
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Bench;
    use splitkv_layout::host_nic::TxStatus;

    /// `splitkv bench list-append --history /tmp/h.jsonl` (3 nodes,
    /// replication 3, 8 keys, 4 in flight, seed 1).
    fn args() -> crate::cli::HistoryBenchArgs {
        let argv = [
            "splitkv",
            "bench",
            "list-append",
            "--history",
            "/tmp/h.jsonl",
        ];
        match crate::report::bench_args(&argv) {
            Bench::ListAppend(a) => a,
            other => panic!("{other:?}"),
        }
    }

    /// 10 submitted: 6 committed, 3 failed (2 of them conflicts), 1
    /// indeterminate, over 2 s.
    fn summary<'a>(
        args: &'a crate::cli::HistoryBenchArgs,
        checked: Result<Checked, &'a CheckError>,
        deployed: Option<Deployed>,
    ) -> Summary<'a> {
        let mut stats = HistoryStats {
            submitted: 10,
            committed: 6,
            indeterminate: 1,
            ..HistoryStats::default()
        };
        for s in [
            TxStatus::LockConflict,
            TxStatus::ValidationFailed,
            TxStatus::TableFull,
        ] {
            stats.failed[s as usize] = 1;
        }
        Summary {
            workload: "list-append",
            args: &args.run,
            keys: args.keys,
            shape: args.shape(),
            nodes: 3,
            replication: 3,
            stats,
            elapsed: Duration::from_secs(2),
            checked,
            deployed,
        }
    }

    const CHECKED: Checked = Checked {
        transactions: 10,
        edges: 12,
        ops: 20,
        keys_checked: 8,
        committed_key_writes: 5,
        values_checked: 7,
    };

    fn deployed() -> Deployed {
        Deployed {
            nic: NicTotals {
                packets: 1_000,
                messages: 2_500,
                ..NicTotals::default()
            },
            sessions: SessionTotals {
                retransmissions: 4,
                duplicates_dropped: 3,
                sessions_failed: 0,
            },
            replica_check: "ok: 400 backup rows match their primaries (600 rows held)".into(),
        }
    }

    fn lines(l: &[&str]) -> String {
        l.iter().map(|l| format!("{l}\n")).collect()
    }

    #[test]
    fn in_process_and_deployed_runs_print_these_lines() {
        let args = args();
        let head =
            "transactions: 10 submitted, 6 committed, 3 failed (2 conflicts), 1 indeterminate";
        let verdict =
            "history check (strict serializability): valid (10 transactions, 12 edges, 20 ops)";
        let lost =
            "lost-commit check: ok (8 keys checked, 5 committed key writes, 7 values matched)";
        let written = "history written to /tmp/h.jsonl";
        assert_eq!(
            summary(&args, Ok(CHECKED), None).to_string(),
            lines(&[
                "list-append (mixed) on 3 nodes (replication 3), 8 keys, 4 in flight per node, seed 1",
                head,
                "throughput: 3 committed tx/s over 2.00 s",
                verdict,
                lost,
                written,
            ])
        );
        assert_eq!(
            summary(&args, Ok(CHECKED), Some(deployed())).to_string(),
            lines(&[
                "list-append (mixed) on 3 node processes (replication 3), 8 keys, 4 in flight per node, seed 1",
                head,
                "throughput: 3 committed tx/s over 2.00 s; 1000 packets, 2.50 messages/packet",
                verdict,
                lost,
                "replica check: ok: 400 backup rows match their primaries (600 rows held)",
                "  sessions       4 retransmissions, 3 duplicates dropped, 0 sessions failed",
                written,
            ])
        );
    }

    #[test]
    fn in_process_and_deployed_runs_print_the_same_json_keys() {
        let args = args();
        let local = summary(&args, Ok(CHECKED), None).json();
        let remote = summary(&args, Ok(CHECKED), Some(deployed())).json();
        assert_eq!(local, remote);
        let keys: Vec<&str> = local
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        let mut expected = [
            "workload",
            "api",
            "nodes",
            "replication",
            "keys",
            "shape",
            "inflight",
            "seed",
            "threads",
            "submitted",
            "committed",
            "failed",
            "conflicts",
            "indeterminate",
            "seconds",
            "committed_per_s",
            "history_check",
            "history_valid",
            "lost_commit_check",
            "history_file",
        ];
        expected.sort_unstable();
        assert_eq!(keys, expected);
        assert_eq!(local["committed_per_s"], 3.0);
        assert_eq!(local["history_file"], "/tmp/h.jsonl");
    }

    #[test]
    fn a_failed_lost_commit_check_is_named_and_an_earlier_failure_skips_it() {
        let args = args();
        let lost = CheckError::Failed {
            check: "lost-commit",
            detail: "key 3 lost a write".into(),
        };
        let text = summary(&args, Err(&lost), None).to_string();
        assert!(
            text.contains("\nlost-commit check: FAILED: key 3 lost a write\n"),
            "{text}"
        );
        assert!(
            text.contains("\nhistory check (strict serializability): FAILED: "),
            "{text}"
        );
        let history = CheckError::Failed {
            check: "history",
            detail: "G1c".into(),
        };
        let s = summary(&args, Err(&history), None);
        assert!(s
            .to_string()
            .contains("\nlost-commit check: not run (an earlier check failed)\n"));
        assert_eq!(s.json()["history_valid"], false);
    }
}
