//! `splitkv`: the one binary (DESIGN.md, `host/cli/`). Today it runs workloads
//! on an in-process cluster (`splitkv bench smallbank`, `splitkv bench
//! lookup`); `node`, `sim` and `nic` subcommands come later, one file each.
//!
//! Exit codes: 0 success; 1 a check failed (the message says which);
//! 2 a bad flag (one line on stderr, before anything starts); 3 an internal
//! error (a panicking thread, with the panic's message on stderr, or a
//! cluster that could not be built).

mod bench_lookup;
mod bench_smallbank;
mod cli;
mod report;

use clap::Parser;
use cli::{Bench, Cli, Command};
use std::process::ExitCode;

/// Exit code: a check failed.
const EXIT_CHECK_FAILED: u8 = 1;
/// Exit code: a bad flag.
const EXIT_BAD_FLAG: u8 = 2;
/// Exit code: an internal error.
const EXIT_INTERNAL: u8 = 3;

/// Why a subcommand did not succeed.
#[derive(Debug)]
pub enum Failure {
    /// A check failed (exit 1).
    Check(String),
    /// Something that should not happen (exit 3): a cluster that could not
    /// be built, or a polling thread that panicked (the embedding API stops
    /// the whole cluster at once and reports the panic's message).
    Internal(String),
}

impl From<splitkv_bench::BuildError> for Failure {
    fn from(e: splitkv_bench::BuildError) -> Failure {
        Failure::Internal(e.to_string())
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let first = e.to_string();
            eprintln!(
                "{}",
                first.lines().next().unwrap_or("error: bad command line")
            );
            return ExitCode::from(EXIT_BAD_FLAG);
        }
    };
    let valid = match &cli.command {
        Command::Bench(Bench::Smallbank(a)) => a.validate(),
        Command::Bench(Bench::Lookup(a)) => a.validate(),
    };
    if let Err(e) = valid {
        eprintln!("error: {e}");
        return ExitCode::from(EXIT_BAD_FLAG);
    }
    let result = match &cli.command {
        Command::Bench(Bench::Smallbank(a)) => bench_smallbank::run(a),
        Command::Bench(Bench::Lookup(a)) => {
            bench_lookup::run(a).map_err(|e| Failure::Internal(e.to_string()))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Check(e)) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_CHECK_FAILED)
        }
        Err(Failure::Internal(e)) => {
            eprintln!("internal error: {e}");
            ExitCode::from(EXIT_INTERNAL)
        }
    }
}
