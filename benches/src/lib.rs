//! # splitkv-bench
//!
//! Workloads, load generators and end-of-run checks, and the `splitkv` command
//! that runs them. Today: Smallbank ([`smallbank`]) with a closed-loop load
//! generator ([`loadgen`]) on an n-node cluster ([`cluster`]).
//!
//! The `splitkv` binary lives here rather than in `splitkv-host` (DESIGN.md puts
//! it in `host/`) because it links the workloads, and the workloads depend on
//! the host crate: the one-way dependency rule wins.
#![warn(missing_docs)]

pub mod cluster;
pub mod history_client;
pub mod list_append;
pub mod loadgen;
pub mod lookup_report;
pub mod measure;
pub mod register;
pub mod smallbank;

pub use cluster::{CheckError, SmallbankCluster, SmallbankSpec};
