//! # splitkv-bench
//!
//! Workloads, load generators and end-of-run checks that the `splitkv` binary
//! (package `splitkv`, `host/cli/`) and the simulator tests run. It depends on
//! the checkers (`splitkv-check`) but not on the simulator: the simulator
//! drives this crate's cluster (`splitkv_sim::cluster`), not the other way
//! round.
//!
//! The client half of the workloads (generators, codecs, history recording,
//! the load generator over a port, the results' JSON shapes) is the crate
//! `splitkv-workloads`, which links nothing of the store so that an external
//! client program (`splitkv-app-client`) can run it; this crate re-exports
//! it under the same paths (`api`, `history_gen`, `loadgen`, `smallbank`, …).
//!
//! - [`workload`]: the [`Workload`] trait (procedures, load, generator, check;
//!   FoundationDB's `fdbserver/workloads/` shape) and the database view checks read;
//! - [`smallbank`]: Smallbank as FaSST/DrTM define it, with its money check;
//! - [`list_append`] and [`register`]: Elle's list-append and read-write
//!   register transactions and generators;
//! - [`history`]: both as [`Workload`]s on the same cluster path, whose check
//!   is the strict-serializability checker (`splitkv_check::checker`) and the
//!   lost-commit accounting (`splitkv_check::lost_commits`); checking a
//!   history file;
//! - [`history_gen`]: the generator that records those histories (Jepsen's shape);
//! - [`history_observer`]: the same histories recorded from an application's
//!   own calls through the embedding API (`ClusterBuilder::observe_calls`);
//! - [`api`]: how transactions reach the store ([`TxApi`]): shipped
//!   procedures or the one-shot `Txn` ([`register_txn`], [`smallbank::txn`]);
//! - [`loadgen`]: the closed-loop client (conflict retries with seeded backoff,
//!   measurement window, outcome trace hash);
//! - [`cluster`]: n nodes running one workload, the path every driver runs
//!   (the local threaded driver here; the simulator's, with its faults, in
//!   `splitkv_sim::cluster`);
//! - [`replicas`]: the replica check, for any workload;
//! - [`remote`]: workloads across processes (one node per process), node
//!   side and driver side;
//! - [`lookup_report`]: Xenic Table 2 (objects read and DMA round trips per NIC lookup);
//! - [`measure`]: helpers of the microbenchmarks and examples.
#![warn(missing_docs)]

pub mod api;
pub mod cluster;
pub mod history;
pub mod history_gen;
pub mod history_observer;
pub mod list_append;
pub mod loadgen;
pub mod lookup_report;
pub mod measure;
mod micro_txn;
pub mod register;
pub mod register_txn;
pub mod remote;
pub mod replicas;
pub mod smallbank;
pub mod workload;

pub use api::{ApiError, TxApi};
pub use cluster::{BenchCluster, BuildError, ClusterSpec, ThreadRun};
pub use smallbank::Smallbank;
pub use workload::{AttemptOutcome, CheckError, Db, TxCall, TxGenerator, Workload};

/// A cluster running Smallbank.
pub type SmallbankCluster = BenchCluster<Smallbank>;
