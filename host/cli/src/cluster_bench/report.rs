//! The reports of a bench across processes: the in-process bench's
//! [`Report`] (Smallbank) filled from every node's [`Results`], and the
//! history benches' lines.

use crate::cli::{table_name, HistoryBenchArgs, SmallbankArgs};
use crate::report::{describe, ratio, Report};
use hdrhistogram::Histogram;
use splitkv_bench::loadgen::LoadStats;
use splitkv_bench::remote::check::history_stats;
use splitkv_bench::remote::{RemoteHistoryReport, Results};
use splitkv_bench::replicas::ReplicaReport;
use splitkv_bench::smallbank::{MoneyReport, Smallbank, MIX};
use splitkv_bench::CheckError;
use std::time::Duration;

/// `f` of every node's counters, summed.
fn sum(results: &[Results], f: impl Fn(&Results) -> LoadStats) -> LoadStats {
    let mut s = LoadStats::default();
    results.iter().for_each(|r| s.add(&f(r)));
    s
}

/// Every node's window latency in one histogram (ns).
fn latency(results: &[Results]) -> Histogram<u64> {
    let mut h = Histogram::new(3).expect("valid histogram");
    for (v, n) in results.iter().flat_map(|r| r.latency_ns.iter()) {
        let _ = h.record_n(*v, *n);
    }
    h
}

/// The Smallbank report of a run across processes.
#[allow(clippy::too_many_arguments)]
pub fn smallbank(
    args: &SmallbankArgs,
    nodes: usize,
    replication: usize,
    workload: &Smallbank,
    results: &[Results],
    money: &Result<MoneyReport, CheckError>,
    replicas: &Result<ReplicaReport, CheckError>,
) -> Report {
    let w = sum(results, |r| LoadStats::from(&r.window));
    let all = sum(results, |r| LoadStats::from(&r.all));
    let hist = latency(results);
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    let c = |f: fn(&Results) -> u64| results.iter().map(f).sum::<u64>();
    let (packets, messages) = (c(|r| r.counters.packets), c(|r| r.counters.messages));
    let (hits, dma_reads) = (c(|r| r.counters.index_hits), c(|r| r.counters.dma_reads));
    let lookups = (hits + dma_reads).saturating_sub(c(|r| r.counters.lookup_rereads));
    let (balance_reads, balance_mean_cents) = match money {
        Ok(m) => (m.balance_reads, m.balance_mean),
        Err(_) => (0, 0),
    };
    let secs = args.duration.as_secs_f64();
    Report {
        workload: "smallbank",
        table: table_name(args.table),
        nodes,
        replication,
        accounts: workload.accounts,
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
        packets_sent: packets,
        messages_sent: messages,
        messages_per_packet: ratio(messages, packets),
        nic_cache_hit_rate: ratio(hits, lookups),
        dma_reads_per_committed: ratio(dma_reads, all.committed),
        balance_reads,
        balance_mean_cents,
        money_check: describe(money, crate::report::money_line),
        replica_check: describe(replicas, |m| {
            format!(
                "ok: {} backup rows match their primaries ({} rows held)",
                m.rows_compared, m.rows_total
            )
        }),
    }
}

/// Prints the history bench's lines for a run across processes.
#[allow(clippy::too_many_arguments)]
pub fn history(
    args: &HistoryBenchArgs,
    workload: &str,
    nodes: usize,
    replication: usize,
    results: &[Results],
    elapsed: Duration,
    checked: &Result<RemoteHistoryReport, CheckError>,
    replicas: &Result<ReplicaReport, CheckError>,
) {
    let s = history_stats(results);
    let secs = elapsed.as_secs_f64().max(1e-9);
    let packets: u64 = results.iter().map(|r| r.counters.packets).sum();
    let messages: u64 = results.iter().map(|r| r.counters.messages).sum();
    println!(
        "{workload} on {nodes} node processes (replication {replication}), {} keys, {} in flight per node, seed {}",
        args.keys, args.inflight, args.seed
    );
    println!(
        "transactions: {} submitted, {} committed, {} failed ({} conflicts), {} indeterminate",
        s.submitted,
        s.committed,
        s.failed_total(),
        s.conflicts(),
        s.indeterminate + s.bad_results
    );
    println!(
        "throughput: {:.0} committed tx/s over {:.2} s; {} packets, {:.2} messages/packet",
        s.committed as f64 / secs,
        secs,
        packets,
        ratio(messages, packets)
    );
    let verdict = describe(checked, |r| {
        format!(
            "valid ({} transactions, {} edges, {} ops)",
            r.checker.stats.txns.values().sum::<usize>(),
            r.checker.stats.edges.values().sum::<usize>(),
            r.ops
        )
    });
    println!("history check (strict serializability): {verdict}");
    let lost = match checked {
        Ok(r) => format!(
            "ok ({} keys checked, {} committed key writes, {} values matched)",
            r.lost.keys_checked, r.lost.committed_key_writes, r.lost.values_checked
        ),
        Err(CheckError::Failed { check, detail }) if *check == "lost-commit" => {
            format!("FAILED: {detail}")
        }
        Err(_) => "not run (an earlier check failed)".into(),
    };
    println!("lost-commit check: {lost}");
    println!(
        "replica check: {}",
        describe(replicas, |m| format!(
            "ok: {} backup rows match their primaries ({} rows held)",
            m.rows_compared, m.rows_total
        ))
    );
    sessions(results);
    if let Some(p) = &args.history {
        println!("history written to {}", p.display());
    }
}

/// Prints the session layer's counters over every node.
pub fn sessions(results: &[Results]) {
    let c = |f: fn(&Results) -> u64| results.iter().map(f).sum::<u64>();
    println!(
        "  sessions       {} retransmissions, {} duplicates dropped, {} sessions failed",
        c(|r| r.counters.retransmissions),
        c(|r| r.counters.duplicates_dropped),
        c(|r| r.counters.sessions_failed)
    );
}

/// Prints which node `--kill` killed and when (`line`), if one was: on
/// standard output, or standard error when standard output is JSON.
pub fn killed(line: Option<&str>, json: bool) {
    match line {
        Some(l) if json => eprintln!("{l}"),
        Some(l) => println!("{l}"),
        None => {}
    }
}
