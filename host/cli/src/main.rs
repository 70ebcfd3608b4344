//! `splitkv`: the one binary (DESIGN.md, `host/cli/`). It runs workloads on an
//! in-process cluster (`splitkv bench smallbank|list-append|register`,
//! `splitkv bench lookup`) or on a deployed one (`--cluster FILE [--spawn]`,
//! [`cluster_bench`]), runs one node of a deployed cluster (`splitkv node`,
//! [`node`]), checks recorded histories (`splitkv check history`) and runs
//! many seeds under the deterministic simulator (`splitkv sim`, [`sim`]); a
//! `nic` subcommand comes later.
//!
//! Exit codes: 0 success; 1 a check failed (the message says which);
//! 2 a bad flag or unreadable input (one line on stderr, before anything
//! starts), a bad cluster file, or a deployed node that cannot be reached or
//! died during the run; 3 an internal error (a panicking polling thread, which stops the
//! whole cluster, with the panic's message on stderr, or a cluster that could
//! not be built); 4 a node that fail-stopped by design (`splitkv node`: its
//! membership fenced it — lease run out, configured out; a supervisor starts
//! it again and it rejoins as a new incarnation).

#[macro_use]
mod out;
mod bench_external;
mod bench_history;
mod bench_list_append;
mod bench_lookup;
mod bench_register;
mod bench_smallbank;
mod check_history;
mod cli;
mod cluster_bench;
mod etcd_admin;
mod external;
mod http;
mod node;
mod report;
mod sim;
mod status;
mod timeline;

use clap::Parser;
use cli::{Bench, Check, Cli, Command, Etcd};
use std::process::ExitCode;

/// Exit code: a check failed.
const EXIT_CHECK_FAILED: u8 = 1;
/// Exit code: a bad flag.
const EXIT_BAD_FLAG: u8 = 2;
/// Exit code: an internal error.
const EXIT_INTERNAL: u8 = 3;
/// Exit code: a node fail-stopped by design (fenced by its membership).
pub const EXIT_FAIL_STOP: u8 = 4;

/// Why a subcommand did not succeed.
#[derive(Debug)]
pub enum Failure {
    /// A check failed (exit 1).
    Check(String),
    /// Something that should not happen (exit 3): a cluster that could not
    /// be built, or a polling thread that panicked (the embedding API stops
    /// the whole cluster at once and reports the panic's message).
    Internal(String),
    /// Input refused after parsing (a history file that does not read, a
    /// workload shape the generator cannot serve): exit 2.
    BadInput(String),
    /// A node stopped serving by design (exit [`EXIT_FAIL_STOP`]): its
    /// membership fenced it (lease run out, configured out), so starting
    /// it again is safe (it rejoins empty as a new incarnation).
    FailStop(String),
    /// Nothing answered where the input said to ask (exit 3).
    Unreachable(String),
}

impl From<splitkv_bench::BuildError> for Failure {
    fn from(e: splitkv_bench::BuildError) -> Failure {
        Failure::Internal(e.to_string())
    }
}

/// A command-line error of clap's as one line: its paragraph before the
/// usage text, lines joined ("… were not provided: --spawn"), so the one
/// line says what is missing.
fn one_line(clap_error: &str) -> String {
    let text: Vec<&str> = clap_error
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    if text.is_empty() {
        "error: bad command line".into()
    } else {
        text.join(" ")
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
            eprintln!("{}", one_line(&e.to_string()));
            return ExitCode::from(EXIT_BAD_FLAG);
        }
    };
    let valid = match &cli.command {
        Command::Bench(Bench::Smallbank(a)) => a.validate(),
        Command::Bench(Bench::Lookup(a)) => a.validate(),
        Command::Bench(Bench::ListAppend(a) | Bench::Register(a)) => a.validate(),
        Command::Bench(Bench::Micro(a)) => a.validate(),
        Command::Check(Check::History(_)) => Ok(()),
        Command::Node(a) => a.validate(),
        Command::Sim(a) => a.validate(),
        Command::Etcd(_) => Ok(()),
        Command::Status(a) => a.validate(),
    };
    if let Err(e) = valid {
        eprintln!("error: {e}");
        return ExitCode::from(EXIT_BAD_FLAG);
    }
    // A panic on a polling thread stops the cluster and comes back as
    // `ClusterError::Panicked` (exit 3 with its message); a panic on this
    // thread is caught here and exits 3 as well.
    let result = std::panic::catch_unwind(|| dispatch(&cli.command)).unwrap_or_else(|p| {
        Err(Failure::Internal(format!(
            "panicked: {}",
            panic_message(&*p)
        )))
    });
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
        Err(Failure::BadInput(e)) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_BAD_FLAG)
        }
        Err(Failure::Unreachable(e)) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_INTERNAL)
        }
        Err(Failure::FailStop(e)) => {
            eprintln!("stopped: {e}");
            ExitCode::from(EXIT_FAIL_STOP)
        }
    }
}

/// The message of a caught panic's payload (`"panic"` when it is neither a
/// `&str` nor a `String`).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}

/// Runs the subcommand.
fn dispatch(command: &Command) -> Result<(), Failure> {
    match command {
        Command::Bench(Bench::Smallbank(a)) if a.deployed.cluster.is_some() => {
            cluster_bench::smallbank(a)
        }
        Command::Bench(Bench::ListAppend(a)) if a.run.deployed.cluster.is_some() => {
            cluster_bench::history(&a.run, a.keys, a.shape(), false)
        }
        Command::Bench(Bench::Register(a)) if a.run.deployed.cluster.is_some() => {
            cluster_bench::history(&a.run, a.keys, a.shape(), true)
        }
        Command::Bench(Bench::Micro(a)) if a.run.deployed.cluster.is_some() => {
            let shape = a.shape().map_err(Failure::BadInput)?;
            cluster_bench::history(&a.run, a.keys, shape, true)
        }
        Command::Node(a) => node::run(a),
        Command::Bench(Bench::Smallbank(a)) => bench_smallbank::run(a),
        Command::Bench(Bench::Lookup(a)) => {
            bench_lookup::run(a).map_err(|e| Failure::Internal(e.to_string()))
        }
        Command::Bench(Bench::ListAppend(a)) => bench_list_append::run(a),
        Command::Bench(Bench::Register(a)) => bench_register::run(a),
        Command::Bench(Bench::Micro(a)) => bench_register::run_micro(a),
        Command::Check(Check::History(a)) => check_history::run(a),
        Command::Sim(a) => sim::run(a),
        Command::Status(a) => status::run(a),
        Command::Etcd(Etcd::Show(a)) => etcd_admin::show(a),
        Command::Etcd(Etcd::Clear(a)) => etcd_admin::clear(a),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_clap_error_becomes_one_line_that_names_what_is_missing() {
        let e = "error: the following required arguments were not provided:\n  --spawn\n\nUsage: splitkv bench smallbank --spawn --kill <NODE@SECS>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            super::one_line(e),
            "error: the following required arguments were not provided: --spawn"
        );
        assert_eq!(super::one_line("\n"), "error: bad command line");
        assert_eq!(
            super::one_line("error: unexpected value 'x'"),
            "error: unexpected value 'x'"
        );
    }
}
