//! Dnl-4 (Dandelion §4.2.3, largely FaRM's protocol; `tla/Dnl4.tla`), a
//! row of the skeleton ([`super::skeleton`]):
//!
//! - **Locking**: the write set at primaries (TLA `Lock`), no-wait, checking
//!   the versions read;
//! - **Read validation**: the other reads at their primaries
//!   (`ValidateReads`);
//! - **Replication**: the write set to backups (`Replicate`), which lower
//!   READABLE;
//! - **Unlocking**: the primaries install the writes and unlock (`Unlock`).
//!
//! Commit is reported after the Unlock acks (4 round trips, 3 when every
//! read is written); an abort at once. Recovery commits a transaction whose
//! coordinator crashed iff a live node holds its REPL or COMMIT record
//! ([`Evidence::Records`]). Read-only transactions run Dnl-RO
//! ([`super::dnl_ro`]).
//!
//! Driven by the coordinator's Dnl path (`coordinator/dnl.rs`); recovery
//! (`decide`) is not built yet.

use super::skeleton::{At, Evidence, Report, Row, Step};

/// Dnl-4's row (the spec's `Dnl4Row`).
pub const ROW: Row = Row {
    lock_at: At::P,
    lock_reads: false,
    validate: true,
    replicate_at: At::B,
    report_commit: Report::After(Step::Unlock),
    report_abort: Report::Decision,
    evidence: Evidence::Records,
    readable: true,
};
