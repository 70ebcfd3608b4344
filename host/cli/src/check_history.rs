//! `splitkv check history FILE`: the project's strict-serializability checker
//! (`splitkv_check::checker`) over any Jepsen-shaped JSON-lines history, through
//! the same code as the sim's `check_history` example
//! (`splitkv_bench::history::check_file`). Valid: exit 0; anomalies: the
//! report (every kind, each listed anomaly in full) and exit 1; a file that
//! cannot be read or checked: exit 2.

use crate::cli::{CheckHistoryArgs, HistoryModel};
use crate::Failure;
use splitkv_bench::history::check_file;
use splitkv_check::checker::{CheckOptions, Model};

/// Checks the file and prints the report.
pub fn run(args: &CheckHistoryArgs) -> Result<(), Failure> {
    let opts = CheckOptions {
        model: match args.model {
            None => Model::Infer,
            Some(HistoryModel::ListAppend) => Model::ListAppend,
            Some(HistoryModel::Register) => Model::Register,
        },
        realtime: !args.no_realtime,
        ..CheckOptions::default()
    };
    let (history, report) =
        check_file(&args.file, &opts).map_err(|e| Failure::BadInput(e.to_string()))?;
    out!("{report}");
    outln!("{} operations", history.len());
    if report.valid {
        Ok(())
    } else {
        let kinds = splitkv_bench::history::anomaly_names(&report);
        Err(Failure::Check(format!("anomalies found: {kinds}")))
    }
}
