//! Dnl-1 (Dandelion §4.2.3; `tla/Dnl1.tla`), a row of the skeleton
//! ([`super::skeleton`]):
//!
//! - **Locking**: the read and write sets at primaries and backups (TLA
//!   `Lock`), no-wait, checking the versions read at every replica; the
//!   request carries the written values;
//! - no Read validation and no Replication;
//! - **Unlocking**: every replica installs the writes and unlocks
//!   (`Unlock`).
//!
//! Commit is reported after the Lock acks (one round trip); an abort only
//! after the Unlock acks (two), so that recovery never finds the locks of
//! a reported abort everywhere and commits it (the must-fail model
//! `Dnl1EarlyAbortReport`). Locked backups refuse GetOne, so READABLE is
//! not needed. Recovery commits iff a live node holds COMMIT or every live
//! replica of every locked key holds the LOCK ([`Evidence::AllLocked`]).
//! Read-only transactions run Dnl-RO ([`super::dnl_ro`]).
//!
//! Driven by the coordinator's Dnl path (`coordinator/dnl.rs`); recovery
//! (`decide`) is not built yet.

use super::skeleton::{At, Evidence, Report, Row, Step};
use crate::placement::PlacementView;
use crate::recovery::decide::{LogQuorum, TxEvidence};

/// Dnl-1's row (the spec's `Dnl1Row`).
pub const ROW: Row = Row {
    lock_at: At::PB,
    lock_reads: true,
    validate: false,
    replicate_at: At::NONE,
    report_commit: Report::Decision,
    report_abort: Report::After(Step::Unlock),
    evidence: Evidence::AllLocked,
    readable: true,
};

/// TLA `Dnl1Decide`'s own part (Dandelion §4.4), for a transaction that no
/// live coordinator's decision and no surviving COMMIT or ABORT record
/// decided (`recovery/epoch/decide.rs`): commit iff every surviving replica
/// that `quorum` names of every shard it locks (its Lock said which: the
/// read and write sets' shards) holds its LOCK there. A commit is reported
/// after every Lock ack, so a reported commit leaves the LOCK at every
/// replica; an abort only after the Unlock acks, which leave an ABORT record
/// at every lock holder (must-fail model `Dnl1EarlyAbortReport`).
pub fn decide(e: &TxEvidence, view: &PlacementView, quorum: LogQuorum) -> bool {
    // Mutation switch ("some surviving replica" instead of every: a
    // transaction a backup refused commits), killed by
    // `sim/tests/dnl_recovery_scenario.rs`.
    if super::dnl_mutant_is("dnl1_recovery_some_locked") {
        let asked = e.write_shards;
        let some = |s: u16| !e.lock_holders[s as usize].is_empty();
        return !asked.is_empty() && asked.iter().all(some);
    }
    e.every_replica_holds(view, quorum, &e.lock_holders)
}
