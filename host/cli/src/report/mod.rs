//! What `splitkv bench smallbank|list-append|register` prints, built once
//! for a run in-process and a run on a deployed cluster (`--cluster`).
//!
//! Each path only fills the inputs: a Smallbank run its [`RunFigures`]
//! ([`RunFigures::of_cluster`] from the in-process cluster,
//! [`RunFigures::of_results`] from the deployed nodes' `/results`), which
//! [`Report::smallbank`] turns into the one [`Report`] (text or JSON); a
//! history run its [`history::Summary`]. A deployed run adds what only it
//! has: the session layer's counters ([`SessionTotals`]) and, for a history
//! bench, its packets and the replica check.
//!
//! - [`figures`]: the counters a run leaves, summed over nodes.
//! - [`smallbank`]: the Smallbank report and its money line.
//! - [`history`]: the history benches' summary.

pub mod figures;
pub mod history;
pub mod smallbank;

pub use figures::{NicTotals, RunFigures, SessionTotals};
pub use smallbank::{Report, SmallbankReport};

use splitkv_bench::replicas::ReplicaReport;
use splitkv_bench::CheckError;

/// `a / b`, or 0 when `b` is 0.
pub(crate) fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// A check's result as one line: `ok`'s text of what it found, or
/// `FAILED: ` and the error.
pub(crate) fn describe<T>(r: &Result<T, CheckError>, ok: impl Fn(&T) -> String) -> String {
    match r {
        Ok(m) => ok(m),
        Err(e) => format!("FAILED: {e}"),
    }
}

/// The replica check's line.
pub(crate) fn replica_line(r: &Result<ReplicaReport, CheckError>) -> String {
    describe(r, |m| {
        format!(
            "ok: {} backup rows match their primaries ({} rows held)",
            m.rows_compared, m.rows_total
        )
    })
}

/// The `splitkv bench …` arguments of a command line (tests).
#[cfg(test)]
pub(crate) fn bench_args(argv: &[&str]) -> crate::cli::Bench {
    use clap::Parser;
    match crate::cli::Cli::try_parse_from(argv)
        .expect("valid command line")
        .command
    {
        crate::cli::Command::Bench(b) => b,
        other => panic!("not a bench: {other:?}"),
    }
}
