//! `splitkv bench register`: read-write registers with unique written values
//! on an in-process cluster, then the strict-serializability and lost-commit
//! checks ([`crate::bench_history`]).

use crate::cli::HistoryBenchArgs;
use crate::Failure;
use splitkv_bench::history::HistoryCheck;

/// Runs the bench; a failed check is [`Failure::Check`].
pub fn run(args: &HistoryBenchArgs) -> Result<(), Failure> {
    let shape = crate::bench_history::tx_shape(args.shape);
    let workload =
        HistoryCheck::register(args.keys, shape).map_err(|e| Failure::BadInput(e.to_string()))?;
    crate::bench_history::run(workload, args)
}
