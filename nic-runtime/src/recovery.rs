//! Faults: what the NIC runtime does when a node or its NIC crashes
//! (recovery epochs, the NIC restart and its rebuild, re-replication, and
//! a restarted node's admission), with the runtime's wiring for each.
//!
//! - [`epoch`] — crash recovery's per-node state machine (Xenic §4.2.1,
//!   Dandelion §4.4); its public types are re-exported here;
//! - [`restart`] — a NIC runtime that crashes alone restarts and rebuilds
//!   its volatile state from its peers;
//! - [`rereplication`] — copies that bring a new backup up to date;
//! - [`wiring`] — the runtime's side of recovery epochs, re-replication and
//!   admission (`impl NicRuntime` blocks).

pub mod epoch;
pub mod rereplication;
pub mod restart;
pub mod wiring;

pub(crate) use epoch::lost_outcome;
pub use epoch::{
    decide, DecisionReason, EvidenceSet, LocalEvidence, Recovery, RecoveryCommand, RecoveryConfig,
    RecoveryError, RecoveryPhase, RecoveryStats, TxEvidence, COMMANDS_MAX,
    DECISION_TIMEOUT_NS_DEFAULT, EARLY_MESSAGES_MAX, EVIDENCE_TIMEOUT_NS_DEFAULT,
    LOCAL_EVIDENCE_ENTRIES_MAX, RECOVERY_TXS_MAX,
};
