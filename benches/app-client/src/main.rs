//! `splitkv-app-client`: one workload client (Smallbank, list-append or
//! register) as its own process, linking only `splitkv-client` and
//! `splitkv-workloads` — nothing of the store. It connects to a node's
//! application socket (L5 §III), resolves the workload's procedure names,
//! runs the same closed-loop load generator an in-node client runs (retry
//! policy, in-flight depth, measurement window) over the rings for the
//! spec's warm-up and run, lets what is in flight finish, and writes what it
//! saw ([`splitkv_workloads::results::ClientResults`]) as JSON.
//!
//! ```text
//! splitkv-app-client --socket /tmp/splitkv-1/node-0.sock --node 0 \
//!     --spec '{"workload":{"kind":"smallbank",...},"client":0,...}' --out c0.json
//! ```
//!
//! The bench (`splitkv bench smallbank --clients external`) starts these;
//! the spec is `splitkv_workloads::spec::ClientSpec` as JSON.

mod port;
mod run;

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// One workload client as its own process (module docs).
#[derive(Debug, Parser)]
#[command(name = "splitkv-app-client", version)]
struct Args {
    /// The node's application socket (`<socket_dir>/node-N.sock`).
    #[arg(long, value_name = "PATH")]
    socket: PathBuf,
    /// The node's id (recorded in the results; checked against the node's).
    #[arg(long, value_name = "N")]
    node: u16,
    /// What to run: a `ClientSpec` as JSON.
    #[arg(long, value_name = "JSON")]
    spec: String,
    /// Write the results there (default: standard output).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// How long to wait for the node's socket to accept (ms).
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    connect_wait_ms: u64,
    /// How long the in-flight transactions may take to finish after the run
    /// (ms); those still without an outcome then are left unknown.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    drain_ms: u64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run::main(&run::Options {
        socket: args.socket,
        node: args.node,
        spec: args.spec,
        out: args.out,
        connect_wait_ms: args.connect_wait_ms,
        drain_ms: args.drain_ms,
    }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("splitkv-app-client: {e}");
            ExitCode::FAILURE
        }
    }
}
