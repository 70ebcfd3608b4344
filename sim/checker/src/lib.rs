//! # splitkv-check
//!
//! The checkers of a run, apart from the code they check (TigerBeetle's
//! `src/testing/`, FoundationDB's workload `check`): what clients saw, and
//! whether the database and the clients agree that it was strictly
//! serializable and nothing committed was lost. The crate depends on nothing
//! of the store — its inputs are plain histories, versions and counters — so
//! the same checks read a simulated run, a threaded one, a deployed cluster's
//! or any Jepsen-shaped history file.
//!
//! - [`history`]: client histories in Jepsen's shape ([`history::History`]:
//!   invoke and completion operations of micro-ops, read and written as JSON
//!   lines), the input of both checks;
//! - [`checker`]: the strict-serializability checker of those histories
//!   (Elle-style list-append and register inference, Adya's anomalies,
//!   real-time edges; [`checker::check`]), and seeded valid histories to
//!   measure it on ([`checker::generate`]);
//! - [`lost_commits`]: lost- and phantom-commit accounting of a history
//!   against the database's final state ([`lost_commits::check`]), and the
//!   counters that must stay zero in a fault-free run.
//!
//! The simulator (`splitkv-sim`) re-exports the three modules under its own
//! name (`splitkv_sim::{history, checker, lost_commits}`), where they lived
//! before they became a crate of their own.
#![warn(missing_docs)]

pub mod checker;
pub mod history;
pub mod lost_commits;
