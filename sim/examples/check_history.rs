//! Checks a history for strict serializability and prints the report and the
//! time the check took.
//!
//! ```text
//! cargo run --release -p splitkv-sim --example check_history -- history.jsonl
//! cargo run --release -p splitkv-sim --example check_history -- --generate 100000
//! cargo run --release -p splitkv-sim --example check_history -- --generate 100000 --write h.jsonl
//! ```
//!
//! Exit code: 0 valid, 1 anomalies found, 2 the history could not be read or
//! checked.

use clap::{Parser, ValueEnum};
use splitkv_bench::history::check_file;
use splitkv_check::checker::generate::{serial_history, GenConfig};
use splitkv_check::checker::{check, CheckOptions, CheckReport, Model};
use splitkv_check::history::History;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ModelArg {
    Infer,
    List,
    Register,
}

/// Check a client history (JSON lines, Jepsen's shape) for strict
/// serializability.
#[derive(Debug, Parser)]
struct Args {
    /// The history file to check (JSON lines).
    file: Option<PathBuf>,
    /// Instead of reading a file, generate a valid history of this many
    /// transactions.
    #[arg(long)]
    generate: Option<usize>,
    /// Client processes of the generated history.
    #[arg(long, default_value_t = 16)]
    processes: u64,
    /// Keys in use at once in the generated history.
    #[arg(long, default_value_t = 256)]
    keys: u64,
    /// Writes to a key before it is retired, in the generated history.
    #[arg(long, default_value_t = 32)]
    writes_per_key: usize,
    /// Seed of the generated history.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the generated history to this file.
    #[arg(long)]
    write: Option<PathBuf>,
    /// The data model.
    #[arg(long, value_enum, default_value = "infer")]
    model: ModelArg,
    /// Check plain serializability (no real-time edges).
    #[arg(long)]
    no_realtime: bool,
    /// Anomalies of each kind printed in full.
    #[arg(long, default_value_t = 8)]
    anomalies: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("check_history: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &Args) -> Result<bool, Box<dyn std::error::Error>> {
    let model = match args.model {
        ModelArg::Infer => Model::Infer,
        ModelArg::List => Model::ListAppend,
        ModelArg::Register => Model::Register,
    };
    let opts = CheckOptions {
        model,
        realtime: !args.no_realtime,
        anomalies_per_kind_max: args.anomalies,
    };
    let start = Instant::now();
    let (history, report) = match (&args.file, args.generate) {
        (_, Some(txns)) => {
            let history = serial_history(&GenConfig {
                seed: args.seed,
                txns,
                processes: args.processes,
                keys_active: args.keys,
                writes_per_key_max: args.writes_per_key,
                model: if model == Model::Register {
                    model
                } else {
                    Model::ListAppend
                },
                ..GenConfig::default()
            });
            if let Some(path) = &args.write {
                history.write_jsonl(std::io::BufWriter::new(std::fs::File::create(path)?))?;
            }
            let generated = start.elapsed();
            let start = Instant::now();
            let report = check(&history, &opts)?;
            println!("generated in {:.3} s", generated.as_secs_f64());
            print_checked(&history, &report, start.elapsed());
            return Ok(report.valid);
        }
        // The same code as `splitkv check history FILE`.
        (Some(path), None) => check_file(path, &opts)?,
        (None, None) => return Err("give a history file or --generate N".into()),
    };
    print_checked(&history, &report, start.elapsed());
    Ok(report.valid)
}

fn print_checked(history: &History, report: &CheckReport, took: std::time::Duration) {
    print!("{report}");
    println!(
        "{} operations; read and checked in {:.3} s",
        history.len(),
        took.as_secs_f64()
    );
}
