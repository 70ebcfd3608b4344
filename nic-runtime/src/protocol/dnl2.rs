//! Dnl-2 (Dandelion §4.2.3; `tla/Dnl2.tla`), a row of the skeleton
//! ([`super::skeleton`]):
//!
//! - **Locking**: the read and write sets at primaries (TLA `Lock`),
//!   no-wait, checking the versions read, so there is no Read validation;
//! - **Replication**: the write set to primaries and backups
//!   (`Replicate`); backups lower READABLE;
//! - **Unlocking**: the primaries install the writes and unlock (`Unlock`).
//!
//! Commit is reported after the Replicate acks (2 round trips), before
//! Unlocking; an abort at once. Recovery follows Dnl-4's rule
//! ([`Evidence::Records`]). Read-only transactions run Dnl-RO
//! ([`super::dnl_ro`]).
//!
//! Driven by the coordinator's Dnl path (`coordinator/dnl.rs`); recovery
//! is not built yet.

use super::skeleton::{At, Evidence, Report, Row, Step};

/// Dnl-2's row (the spec's `Dnl2Row`).
pub const ROW: Row = Row {
    lock_at: At::P,
    lock_reads: true,
    validate: false,
    replicate_at: At::PB,
    report_commit: Report::After(Step::Replicate),
    report_abort: Report::Decision,
    evidence: Evidence::Records,
    readable: true,
};
