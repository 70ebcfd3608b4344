//! `splitkv bench list-append`: Elle's list-append workload (unique appended
//! elements, keys retired after a bounded number of appends) on an in-process
//! cluster, then the strict-serializability and lost-commit checks
//! ([`crate::bench_history`]).

use crate::cli::HistoryBenchArgs;
use crate::Failure;
use splitkv_bench::history::HistoryCheck;

/// Runs the bench; a failed check is [`Failure::Check`].
pub fn run(args: &HistoryBenchArgs) -> Result<(), Failure> {
    let (shape, run) = (args.shape(), &args.run);
    let workload = HistoryCheck::list_append(args.keys, run.nodes as u64, run.transactions, shape)
        .map_err(|e| Failure::BadInput(e.to_string()))?
        .with_api(run.api)
        .map_err(|e| Failure::BadInput(e.to_string()))?;
    crate::bench_history::run(workload, run, args.keys, shape)
}
