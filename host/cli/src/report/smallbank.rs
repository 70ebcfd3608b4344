//! What `splitkv bench smallbank` prints, in-process or deployed: one
//! [`Report`], as text or JSON.
//!
//! Transaction counts and rates (`committed`, `completed`, conflicts,
//! retries, latency) cover the measured interval only. NIC counters (packets,
//! messages, cache hits, DMA reads) cover the whole run, warm-up and drain
//! included, and are reported as ratios over it.

use super::{describe, ratio, replica_line, RunFigures};
use crate::cli::{table_name, SmallbankArgs};
use crate::Failure;
use splitkv_bench::replicas::ReplicaReport;
use splitkv_bench::smallbank::{MoneyReport, TxType, MIX};
use splitkv_bench::CheckError;
use std::collections::BTreeMap;
use std::fmt;

/// Inputs of [`Report::smallbank`].
pub struct SmallbankReport<'a> {
    /// The command line (the measured interval is its `--duration`).
    pub args: &'a SmallbankArgs,
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Replicas per shard.
    pub replication: usize,
    /// Accounts in the workload.
    pub accounts: u64,
    /// The run's counters.
    pub figures: &'a RunFigures,
    /// The money check's result.
    pub money: &'a Result<MoneyReport, CheckError>,
    /// The replica check's result.
    pub replicas: &'a Result<ReplicaReport, CheckError>,
}

/// The figures and check results of one run.
#[derive(Debug, PartialEq, serde::Serialize)]
pub struct Report {
    pub(crate) workload: &'static str,
    pub(crate) api: &'static str,
    pub(crate) table: &'static str,
    pub(crate) nodes: usize,
    pub(crate) replication: usize,
    pub(crate) accounts: u64,
    pub(crate) threads: usize,
    pub(crate) warmup_s: f64,
    pub(crate) duration_s: f64,
    pub(crate) seed: u64,
    pub(crate) max_tries: u32,
    pub(crate) committed: u64,
    pub(crate) committed_per_s: f64,
    pub(crate) completed: u64,
    pub(crate) completed_per_s: f64,
    pub(crate) user_aborted: u64,
    pub(crate) conflicts: u64,
    pub(crate) conflict_rate: f64,
    pub(crate) retries: u64,
    pub(crate) retries_per_committed: f64,
    pub(crate) gave_up: u64,
    pub(crate) failed: u64,
    pub(crate) committed_by_type: BTreeMap<&'static str, u64>,
    pub(crate) latency_us_p50: f64,
    pub(crate) latency_us_p99: f64,
    pub(crate) latency_us_p999: f64,
    pub(crate) packets_sent: u64,
    pub(crate) messages_sent: u64,
    pub(crate) messages_per_packet: f64,
    pub(crate) nic_cache_hit_rate: f64,
    pub(crate) dma_reads_per_committed: f64,
    pub(crate) balance_reads: u64,
    pub(crate) balance_mean_cents: i64,
    pub(crate) money_check: String,
    pub(crate) replica_check: String,
    /// With `--api txn`: what the transactions' `Txn` calls did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) txn: Option<TxnReport>,
}

/// The extra figures of a run through the one-shot `Txn` (measured interval).
#[derive(Debug, PartialEq, serde::Serialize)]
pub(crate) struct TxnReport {
    /// `Txn` calls committed (reads, writes, failed-compare writes).
    pub(crate) txn_calls_committed: u64,
    /// Per committed Smallbank transaction.
    pub(crate) txn_calls_per_committed: f64,
    /// Write `Txn`s whose compare failed and that started over.
    pub(crate) compare_failed_retries: u64,
    /// Per committed Smallbank transaction.
    pub(crate) compare_failed_retries_per_committed: f64,
}

impl Report {
    /// The report of a Smallbank run.
    pub fn smallbank(r: SmallbankReport<'_>) -> Report {
        let (args, f) = (r.args, r.figures);
        let mut w = f.window;
        // Through the `Txn`: the Smallbank transactions' counts, the `Txn`
        // calls' conflicts and retries.
        let txn = f.txn.map(|t| {
            let tw = t.window;
            w.committed = tw.committed;
            w.user_aborted = tw.user_aborted;
            w.gave_up = tw.gave_up;
            w.failed = tw.failed;
            w.committed_by_procedure = [0; splitkv_bench::workload::PROCEDURES_MAX];
            w.committed_by_procedure[..tw.committed_by_type.len()]
                .copy_from_slice(&tw.committed_by_type);
            TxnReport {
                txn_calls_committed: f.window.committed,
                txn_calls_per_committed: ratio(f.window.committed, tw.committed),
                compare_failed_retries: tw.compare_retries,
                compare_failed_retries_per_committed: ratio(tw.compare_retries, tw.committed),
            }
        });
        let us = |q: f64| f.latency_ns.value_at_quantile(q) as f64 / 1000.0;
        let (balance_reads, balance_mean_cents) = match r.money {
            Ok(m) => (m.balance_reads, m.balance_mean),
            Err(_) => (0, 0),
        };
        let secs = args.duration.as_secs_f64();
        Report {
            workload: "smallbank",
            api: args.api.name(),
            table: table_name(args.table),
            nodes: r.nodes,
            replication: r.replication,
            accounts: r.accounts,
            threads: args.threads,
            warmup_s: args.warmup.as_secs_f64(),
            duration_s: secs,
            seed: args.seed,
            max_tries: args.max_tries,
            committed: w.committed,
            committed_per_s: w.committed as f64 / secs,
            completed: w.completed(),
            completed_per_s: w.completed() as f64 / secs,
            user_aborted: w.user_aborted,
            conflicts: w.conflicts,
            conflict_rate: w.conflict_rate(),
            retries: w.retries,
            retries_per_committed: w.retries_per_commit(),
            gave_up: w.gave_up,
            failed: w.failed,
            committed_by_type: MIX
                .iter()
                .map(|(t, _)| (t.name(), w.committed_by_procedure[*t as usize]))
                .collect(),
            latency_us_p50: us(0.5),
            latency_us_p99: us(0.99),
            latency_us_p999: us(0.999),
            packets_sent: f.nic.packets,
            messages_sent: f.nic.messages,
            messages_per_packet: ratio(f.nic.messages, f.nic.packets),
            nic_cache_hit_rate: ratio(f.nic.index_hits, f.nic.lookups()),
            dma_reads_per_committed: ratio(f.nic.dma_reads, f.all.committed),
            balance_reads,
            balance_mean_cents,
            money_check: describe(r.money, money_line),
            replica_check: replica_line(r.replicas),
            txn,
        }
    }

    /// Prints the report: pretty JSON with `json`, else its text lines.
    ///
    /// # Errors
    /// [`Failure::Internal`] if it does not serialise.
    pub fn print(&self, json: bool) -> Result<(), Failure> {
        if json {
            let text =
                serde_json::to_string_pretty(self).map_err(|e| Failure::Internal(e.to_string()))?;
            outln!("{text}");
        } else {
            out!("{self}");
        }
        Ok(())
    }
}

/// The report as aligned text lines, each ending in a newline.
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "smallbank: {} nodes, replication {}, {} accounts, {} threads, {:.1} s after {:.1} s warm-up, seed {}, table {}{}",
            self.nodes, self.replication, self.accounts, self.threads, self.duration_s, self.warmup_s, self.seed, self.table,
            if self.txn.is_some() { ", api txn" } else { "" }
        )?;
        writeln!(
            f,
            "  committed      {:>12} ({:.0} tx/s)",
            self.committed, self.committed_per_s
        )?;
        writeln!(
            f,
            "  completed      {:>12} ({:.0} tx/s: committed + {} insufficient-funds rollbacks)",
            self.completed, self.completed_per_s, self.user_aborted
        )?;
        writeln!(
            f,
            "  conflicts      {:>12} ({:.2}% of attempts; {:.3} retries per committed, max {} tries, {} gave up)",
            self.conflicts,
            100.0 * self.conflict_rate,
            self.retries_per_committed,
            self.max_tries,
            self.gave_up
        )?;
        if self.failed > 0 {
            writeln!(
                f,
                "  failed         {:>12} (rejected, table full, too large or unavailable)",
                self.failed
            )?;
        }
        // SendPayment's insufficient-funds rollbacks complete it too.
        let mix: Vec<String> = self
            .committed_by_type
            .iter()
            .map(|(t, n)| {
                let done = n + self.user_aborted * (*t == TxType::SendPayment.name()) as u64;
                format!("{t} {:.1}%", 100.0 * ratio(done, self.completed))
            })
            .collect();
        writeln!(f, "  completed mix  {}", mix.join(", "))?;
        writeln!(
            f,
            "  latency (µs)   p50 {:.1}  p99 {:.1}  p99.9 {:.1}",
            self.latency_us_p50, self.latency_us_p99, self.latency_us_p999
        )?;
        if let Some(t) = &self.txn {
            writeln!(
                f,
                "  Txn calls      {:>12} committed ({:.2} per committed transaction; conflicts above count calls)",
                t.txn_calls_committed, t.txn_calls_per_committed
            )?;
            writeln!(
                f,
                "  compare failed {:>12} retries from the values read ({:.3} per committed transaction)",
                t.compare_failed_retries, t.compare_failed_retries_per_committed
            )?;
        }
        writeln!(
            f,
            "  packets sent   {:>12} ({:.2} messages/packet)",
            self.packets_sent, self.messages_per_packet
        )?;
        writeln!(
            f,
            "  NIC cache      {:.1}% hits, {:.2} DMA reads per committed transaction",
            100.0 * self.nic_cache_hit_rate,
            self.dma_reads_per_committed
        )?;
        writeln!(
            f,
            "  Balance        {} reads, mean total {:.2}",
            self.balance_reads,
            self.balance_mean_cents as f64 / 100.0
        )?;
        writeln!(f, "  money check    {}", self.money_check)?;
        writeln!(f, "  replica check  {}", self.replica_check)
    }
}

/// The money check's line: an equation, or a range when some transactions'
/// outcomes are unknown (a killed node's clients, timed-out transactions).
pub(crate) fn money_line(m: &MoneyReport) -> String {
    if m.unknown == (0, 0) {
        return format!(
            "ok: total {} = initial {} + created {}",
            m.total, m.initial, m.created
        );
    }
    format!(
        "ok: total {} within initial {} + created {} + unknown [{}, {}]",
        m.total, m.initial, m.created, m.unknown.0, m.unknown.1
    )
}

#[cfg(test)]
mod tests {
    use super::super::NicTotals;
    use super::*;
    use crate::cli::Bench;
    use hdrhistogram::Histogram;
    use splitkv_bench::loadgen::LoadStats;

    fn report(unknown: (i64, i64), total: i64) -> MoneyReport {
        MoneyReport {
            initial: 1_000,
            created: 50,
            unknown,
            total,
            balance_reads: 0,
            balance_mean: 0,
        }
    }

    #[test]
    fn money_line_is_an_equation_without_unknown_outcomes_and_a_range_with_them() {
        assert_eq!(
            money_line(&report((0, 0), 1_050)),
            "ok: total 1050 = initial 1000 + created 50"
        );
        assert_eq!(
            money_line(&report((-20, 30), 1_060)),
            "ok: total 1060 within initial 1000 + created 50 + unknown [-20, 30]"
        );
    }

    /// `splitkv bench smallbank --duration 2s --warmup 1s`.
    fn args() -> SmallbankArgs {
        let argv = [
            "splitkv",
            "bench",
            "smallbank",
            "--duration",
            "2s",
            "--warmup",
            "1s",
        ];
        match crate::report::bench_args(&argv) {
            Bench::Smallbank(a) => a,
            other => panic!("{other:?}"),
        }
    }

    /// 900 committed and 80 insufficient-funds rollbacks in the window
    /// (1000 committed over the run), 3 failed; latencies 1.0/1.5/2.0 µs
    /// at p50/p99/p99.9; 1000 packets of 2.5 messages; 850 NIC hits in
    /// 1000 lookups, 200 DMA reads.
    fn figures() -> RunFigures {
        let mut window = LoadStats {
            attempts: 1_000,
            retries: 30,
            committed: 900,
            conflicts: 50,
            gave_up: 2,
            user_aborted: 80,
            failed: 3,
            ..LoadStats::default()
        };
        let by_type = [
            (TxType::Amalgamate, 135),
            (TxType::Balance, 135),
            (TxType::DepositChecking, 135),
            (TxType::SendPayment, 180),
            (TxType::TransactSaving, 180),
            (TxType::WriteCheck, 135),
        ];
        for (t, n) in by_type {
            window.committed_by_procedure[t as usize] = n;
        }
        let all = LoadStats {
            committed: 1_000,
            ..window
        };
        let mut latency_ns = Histogram::new(3).expect("valid histogram");
        for (v, n) in [(1_000, 50), (1_500, 49), (2_000, 1)] {
            latency_ns.record_n(v, n).expect("in range");
        }
        let nic = NicTotals {
            packets: 1_000,
            messages: 2_500,
            index_hits: 850,
            dma_reads: 200,
            lookup_rereads: 50,
        };
        RunFigures {
            window,
            all,
            latency_ns,
            nic,
            txn: None,
        }
    }

    /// The JSON keys of a report, in their order.
    const REPORT_KEYS: [&str; 35] = [
        "workload",
        "api",
        "table",
        "nodes",
        "replication",
        "accounts",
        "threads",
        "warmup_s",
        "duration_s",
        "seed",
        "max_tries",
        "committed",
        "committed_per_s",
        "completed",
        "completed_per_s",
        "user_aborted",
        "conflicts",
        "conflict_rate",
        "retries",
        "retries_per_committed",
        "gave_up",
        "failed",
        "committed_by_type",
        "latency_us_p50",
        "latency_us_p99",
        "latency_us_p999",
        "packets_sent",
        "messages_sent",
        "messages_per_packet",
        "nic_cache_hit_rate",
        "dma_reads_per_committed",
        "balance_reads",
        "balance_mean_cents",
        "money_check",
        "replica_check",
    ];

    #[test]
    fn the_report_of_hand_made_figures_prints_these_lines_and_keys() {
        let money = Ok(MoneyReport {
            balance_reads: 120,
            balance_mean: 12_345,
            ..report((0, 0), 1_050)
        });
        let replicas = Ok(ReplicaReport {
            rows_compared: 400,
            rows_total: 600,
            undecided: 0,
        });
        let r = Report::smallbank(SmallbankReport {
            args: &args(),
            nodes: 3,
            replication: 3,
            accounts: 300,
            figures: &figures(),
            money: &money,
            replicas: &replicas,
        });
        let expected = [
            "smallbank: 3 nodes, replication 3, 300 accounts, 2 threads, 2.0 s after 1.0 s warm-up, seed 1, table robinhood",
            "  committed               900 (450 tx/s)",
            "  completed               980 (490 tx/s: committed + 80 insufficient-funds rollbacks)",
            "  conflicts                50 (5.00% of attempts; 0.033 retries per committed, max 10 tries, 2 gave up)",
            "  failed                    3 (rejected, table full, too large or unavailable)",
            "  completed mix  Amalgamate 13.8%, Balance 13.8%, DepositChecking 13.8%, SendPayment 26.5%, TransactSaving 18.4%, WriteCheck 13.8%",
            "  latency (µs)   p50 1.0  p99 1.5  p99.9 2.0",
            "  packets sent           1000 (2.50 messages/packet)",
            "  NIC cache      85.0% hits, 0.20 DMA reads per committed transaction",
            "  Balance        120 reads, mean total 123.45",
            "  money check    ok: total 1050 = initial 1000 + created 50",
            "  replica check  ok: 400 backup rows match their primaries (600 rows held)",
        ];
        assert_eq!(r.to_string(), expected.map(|l| format!("{l}\n")).concat());
        let json = serde_json::to_string(&r).expect("serialises");
        let top: Vec<String> =
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&json)
                .expect("an object")
                .keys()
                .cloned()
                .collect();
        assert_eq!(top.len(), REPORT_KEYS.len(), "{json}");
        let at = |k: &str| {
            json.find(&format!("\"{k}\":"))
                .unwrap_or_else(|| panic!("{k}: {json}"))
        };
        assert!(
            REPORT_KEYS.windows(2).all(|w| at(w[0]) < at(w[1])),
            "{json}"
        );
        assert!(json.contains("\"completed_per_s\":490.0"), "{json}");
    }
}
