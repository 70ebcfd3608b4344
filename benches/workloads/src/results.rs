//! What a client saw, as JSON: its outcome counters ([`LoadCounters`]),
//! Smallbank's figures ([`SmallbankSummary`]) and a history client's
//! recording ([`HistorySummary`]). A deployed node answers them to its bench
//! driver (`splitkv_bench::remote::protocol::Results`) and an external
//! client program writes them ([`ClientResults`]): one shape for both.

use crate::history_gen::HistoryStats;
use crate::loadgen::LoadStats;
use crate::smallbank::txn::TxnFigures;
use crate::smallbank::SmallbankGenerator;
use crate::tx::PROCEDURES_MAX;
use serde::{Deserialize, Serialize};
use splitkv_layout::host_nic::TxStatus;

/// Outcome counters of a node's client ([`LoadStats`] as JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadCounters {
    /// Transactions drawn.
    pub drawn: u64,
    /// Attempts submitted.
    pub attempts: u64,
    /// Retries submitted.
    pub retries: u64,
    /// Committed.
    pub committed: u64,
    /// Conflict aborts.
    pub conflicts: u64,
    /// Gave up after the last try.
    pub gave_up: u64,
    /// Aborted by the procedure.
    pub user_aborted: u64,
    /// Ended any other way.
    pub failed: u64,
    /// Outcome unknown (may have committed).
    #[serde(default)]
    pub unknown: u64,
    /// Committed by procedure id.
    pub committed_by_procedure: Vec<u64>,
}

impl From<LoadStats> for LoadCounters {
    fn from(s: LoadStats) -> LoadCounters {
        LoadCounters {
            drawn: s.drawn,
            attempts: s.attempts,
            retries: s.retries,
            committed: s.committed,
            conflicts: s.conflicts,
            gave_up: s.gave_up,
            user_aborted: s.user_aborted,
            failed: s.failed,
            unknown: s.unknown,
            committed_by_procedure: s.committed_by_procedure.to_vec(),
        }
    }
}

impl From<&LoadCounters> for LoadStats {
    fn from(c: &LoadCounters) -> LoadStats {
        let mut by = [0u64; PROCEDURES_MAX];
        for (a, b) in by.iter_mut().zip(&c.committed_by_procedure) {
            *a = *b;
        }
        LoadStats {
            drawn: c.drawn,
            attempts: c.attempts,
            retries: c.retries,
            committed: c.committed,
            conflicts: c.conflicts,
            gave_up: c.gave_up,
            user_aborted: c.user_aborted,
            failed: c.failed,
            unknown: c.unknown,
            committed_by_procedure: by,
        }
    }
}

/// A history generator's counters ([`HistoryStats`] as JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryCounters {
    /// Drawn.
    pub submitted: u64,
    /// Committed.
    pub committed: u64,
    /// Failed, by [`TxStatus`] wire value.
    pub failed: Vec<u64>,
    /// Committed with an undecodable result.
    pub bad_results: u64,
    /// Without an outcome at the end.
    pub indeterminate: u64,
}

impl From<HistoryStats> for HistoryCounters {
    fn from(s: HistoryStats) -> HistoryCounters {
        HistoryCounters {
            submitted: s.submitted,
            committed: s.committed,
            failed: s.failed.to_vec(),
            bad_results: s.bad_results,
            indeterminate: s.indeterminate,
        }
    }
}

impl From<&HistoryCounters> for HistoryStats {
    fn from(c: &HistoryCounters) -> HistoryStats {
        let mut failed = [0u64; TxStatus::ALL.len()];
        for (a, b) in failed.iter_mut().zip(&c.failed) {
            *a = *b;
        }
        HistoryStats {
            submitted: c.submitted,
            committed: c.committed,
            failed,
            bad_results: c.bad_results,
            indeterminate: c.indeterminate,
        }
    }
}

/// What a Smallbank client's generator saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmallbankSummary {
    /// Money created by committed transactions (cents).
    pub money_created: i64,
    /// Committed Balance transactions.
    pub balance_reads: u64,
    /// Sum of their totals (cents).
    pub balance_total_sum: i64,
    /// The range (cents, lowest and highest) of money the transactions of
    /// unknown outcome may have created.
    #[serde(default)]
    pub money_unknown: (i64, i64),
    /// With the `Txn` api: what the Smallbank transactions did (each several
    /// `Txn`s). Absent with the shipped api.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txn: Option<TxnSummary>,
}

/// The figures of a Smallbank client running through the `Txn`
/// ([`crate::smallbank::txn`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnSummary {
    /// Every transaction that ended.
    pub all: TxnFigures,
    /// Those that ended within the measured interval.
    pub window: TxnFigures,
}

impl SmallbankSummary {
    /// The summary of a (finished) Smallbank generator.
    pub fn of(g: &SmallbankGenerator) -> SmallbankSummary {
        let (balance_reads, balance_total_sum) = g.balance_reads();
        SmallbankSummary {
            money_created: g.money_created(),
            balance_reads,
            balance_total_sum,
            money_unknown: g.money_unknown(),
            txn: g.txn_client().map(|c| TxnSummary {
                all: c.figures(),
                window: c.window_figures(),
            }),
        }
    }
}

/// What a history client recorded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HistorySummary {
    /// Its counters.
    pub stats: HistoryCounters,
    /// Its operations as Jepsen JSON objects, times in the node's clock.
    pub ops: Vec<serde_json::Value>,
}

/// Version of [`ClientResults`]; bumped on any change of its shape.
pub const CLIENT_RESULTS_VERSION: u32 = 2;

/// What an external client program saw in its run, as it writes it (JSON):
/// the counters, latency and workload figures a deployed node reports for
/// its in-node client, in the same shapes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientResults {
    /// [`CLIENT_RESULTS_VERSION`].
    pub version: u32,
    /// The node the client was attached to.
    pub node: u16,
    /// The client's number (`ClientSpec::client`).
    pub client: u16,
    /// Every outcome.
    pub all: LoadCounters,
    /// Outcomes within the measured interval.
    pub window: LoadCounters,
    /// Length of the measured interval as the client timed it (ns).
    pub window_ns: u64,
    /// The machine's `CLOCK_MONOTONIC` (ns) when the client's clock read 0:
    /// its history's times shift by it to compare with another client's on
    /// the same machine.
    pub clock_origin_ns: u64,
    /// CPU time the client's process ran (ns; Linux's
    /// `/proc/self/schedstat`, 0 where it cannot be read).
    #[serde(default)]
    pub cpu_ns: u64,
    /// Time the client's process was runnable but waited for a CPU (ns;
    /// the same source): how much the machine's other work delayed it.
    #[serde(default)]
    pub run_queue_wait_ns: u64,
    /// Latency (ns) of the window's commits: `(value, count)` pairs (with
    /// Smallbank through the `Txn`, of its transactions, each several calls).
    pub latency_ns: Vec<(u64, u64)>,
    /// Smallbank's generator summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smallbank: Option<SmallbankSummary>,
    /// A history workload's recording (its ops' times are the client's
    /// clock: ns since its run started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistorySummary>,
    /// Why the client stopped early (its connection failed): the
    /// transactions it had in flight then have unknown outcomes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Whether `error` is the node closing the connection (its process
    /// died or stopped): a node killed on purpose ends its clients' runs
    /// so, with their transactions in flight indeterminate (`info` in a
    /// history, unknown money in Smallbank's summary), as a killed node's
    /// in-node client's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub node_closed: bool,
}

/// A latency histogram as `(value, count)` pairs, the shape results carry.
pub fn latency_pairs(h: &hdrhistogram::Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}
