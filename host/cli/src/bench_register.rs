//! `splitkv bench register`: read-write registers with unique written values
//! on an in-process cluster, then the strict-serializability and lost-commit
//! checks ([`crate::bench_history`]); and `splitkv bench micro`, Dandelion
//! §7's O(G,P) micro-benchmark on the same registers (G gets and P puts of
//! distinct random keys per transaction; 8-byte values where Dandelion's are
//! 16 bytes: a register holds its unique `u64`).

use crate::cli::{HistoryBenchArgs, MicroArgs};
use crate::Failure;
use splitkv_bench::history::HistoryCheck;

/// Runs `bench register`; a failed check is [`Failure::Check`].
pub fn run(args: &HistoryBenchArgs) -> Result<(), Failure> {
    let shape = args.shape();
    let workload = HistoryCheck::register(args.keys, shape)
        .map_err(|e| Failure::BadInput(e.to_string()))?
        .with_api(args.run.api)
        .map_err(|e| Failure::BadInput(e.to_string()))?;
    crate::bench_history::run(workload, &args.run, args.keys, shape)
}

/// Runs `bench micro`; a failed check is [`Failure::Check`].
pub fn run_micro(args: &MicroArgs) -> Result<(), Failure> {
    let shape = args.shape().map_err(Failure::BadInput)?;
    let workload = HistoryCheck::register(args.keys, shape)
        .map_err(|e| Failure::BadInput(e.to_string()))?
        .with_api(args.run.api)
        .map_err(|e| Failure::BadInput(e.to_string()))?;
    crate::bench_history::run(workload, &args.run, args.keys, shape)
}
