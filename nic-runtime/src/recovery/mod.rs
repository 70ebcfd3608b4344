//! Crash recovery (issue 11; Xenic §4.2.1, Dandelion §4.4, FaRM-style).
//!
//! - [`decide`] — the decision rule: commit or abort each transaction in
//!   flight from the survivors' evidence.
pub mod decide;

pub use decide::{DecisionReason, EvidenceSet, TxEvidence};
