//! # splitkv-workloads
//!
//! The client half of splitkv's workloads: what a client needs to draw
//! transactions, submit them and keep what it saw, with nothing of the store
//! in it. The in-node clients of `splitkv-bench` run it over a node's NIC
//! client port; the external client program (`splitkv-app-client`) runs it
//! over an application connection (`splitkv-client`).
//!
//! - [`tx`]: a transaction ([`TxCall`]), an attempt's outcome
//!   ([`AttemptOutcome`]), a generator ([`TxGenerator`]);
//! - [`loadgen`]: the closed-loop load generator over a port
//!   ([`loadgen::TxPort`]): conflict retries with seeded backoff, window,
//!   latency histogram, outcome trace hash;
//! - [`api`]: how transactions reach the store ([`TxApi`]);
//! - [`smallbank`]: Smallbank's configuration, codec, semantics, generator
//!   and `Txn` client (FaSST/DrTM);
//! - [`list_append`] and [`register`]: Elle's list-append and read-write
//!   register generators and codec (VLDB'20 §4);
//! - [`history_gen`]: the generator that records their histories (Jepsen's shape);
//! - [`spec`]: what one client runs ([`spec::ClientSpec`]), as a bench driver
//!   hands it to an external client;
//! - [`results`]: what a client saw, as JSON (one shape for a deployed node's
//!   in-node client and an external client).
#![warn(missing_docs)]

pub mod api;
pub mod history_gen;
pub mod list_append;
pub mod loadgen;
pub mod register;
pub mod results;
pub mod smallbank;
pub mod spec;
pub mod tx;

pub use api::{ApiError, TxApi};
pub use tx::{AttemptOutcome, TxCall, TxGenerator, PROCEDURES_MAX};

/// Times of a run: nanoseconds on the driver's clock (the NIC runtime's
/// `Nanos`, a `u64` too).
pub type Nanos = u64;

/// Procedure id of the built-in one-shot `Txn` (`splitkv_layout::app::txn`):
/// the NIC runtime's `splitkv_nic::procedure::txn::TXN_PROCEDURE_ID`, which
/// `splitkv-bench` asserts equal at compile time.
pub const TXN_PROCEDURE_ID: u32 = u32::MAX - 1;

/// Encoded arguments a procedure cannot take (the reason, for the NIC
/// runtime's `ProcError::BadArgs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("bad arguments: {0}")]
pub struct BadArgs(pub &'static str);
