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
//! read is written); an abort at once. Recovery ([`decide`], TLA
//! `Dnl4Decide`, also Dnl-2's rule: [`Evidence::Records`]) commits an
//! undecided transaction iff a surviving replica holds its REPL record and
//! every surviving replica of every written shard holds one of its value
//! records. Read-only transactions run Dnl-RO ([`super::dnl_ro`]).
//!
//! Driven by the coordinator's Dnl path (`coordinator/dnl.rs`).

use super::skeleton::{At, Evidence, Report, Row, Step};
use crate::placement::PlacementView;
use crate::recovery::decide::{LogQuorum, TxEvidence};

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

/// TLA `Dnl4Decide`'s own part (Dandelion §4.4; Dnl-4 and Dnl-2), for a
/// transaction that no live coordinator's decision and no surviving
/// COMMIT or ABORT record decided (the recovery leader's rules before it,
/// `recovery/epoch/decide.rs`): commit iff some surviving replica holds its
/// REPL record and every surviving replica that `quorum` names of every
/// shard it writes holds a value record of it there (its Lock's values, a
/// REPL or a COMMIT). A REPL is sent only after the decision, so without
/// one no commit was decided and an abort may have been reported (the
/// must-fail model `Dnl4ReplIgnored`); with one, every replica keeps the
/// values it needs and no value is copied (Design A).
pub fn decide(e: &TxEvidence, view: &PlacementView, quorum: LogQuorum) -> bool {
    // Mutation switch (`Dnl4Decide` without its REPL condition: a lock
    // holder's values alone commit a transaction whose abort was already
    // reported), killed by `sim/tests/dnl_recovery_scenario.rs`.
    let repl = e.repl_record || super::dnl_mutant_is("dnl4_recovery_ignores_repl");
    repl && e.every_replica_holds(view, quorum, &e.log_holders)
}
