//! # Faults: the NIC runtime's fault wing
//!
//! Everything the NIC runtime does when a node or its NIC crashes lives
//! here; the rest of the crate serves transactions. The user-visible names
//! are the code's: the fault is a *NIC crash* (`--nic-crash`,
//! `--faults nic-crash`, `/fault/nic-restart`), what follows is the *NIC
//! restart*, which *rebuilds*; a whole node's crash is followed by a
//! *recovery epoch*, *re-replication* and, for the restarted node, its
//! *admission*.
//!
//! | Module | What it does | Paper, spec |
//! |---|---|---|
//! | [`epoch`] | Crash recovery's per-node machine: evidence to the leader, decisions, `Applied`, `Resume`; promotes backups of lost primaries. Pure: no runtime, no I/O. | Xenic §4.2.1, Dandelion §4.4; `tla/XenicOCCMsgs.tla`, `tla/LogQuorum.tla`, `tla/LostCoordinator.tla` |
//! | [`restart`] | A NIC runtime that crashed alone restarts over the same host memory: volatile state dropped, peers queried, locks and lost transactions rebuilt from their reports (the `impl NicRuntime` steps are in `restart/{restart_nic,requery,decide}.rs`, the messages in `restart/messages.rs`). | Xenic §4.2.1 (a); `tla/XenicRestart.tla` |
//! | [`rereplication`] | Copies that bring a new or rejoined backup up to date while transactions run, until it counts as a replica. | `tla/Rereplicate.tla` |
//! | [`wiring`] | The runtime's side: `epoch.rs` (the machine's inbox, pause, commands), `admission.rs` (a restarted node's process waits for a configuration naming it), `rereplication.rs` (copies' snapshots and caught-up report), `mode.rs` ([`NicMode`](wiring::mode::NicMode)). | |
//!
//! The server's and coordinator's parts of the rebuild stay in
//! `protocol/server/rebuild.rs` and `protocol/coordinator/rebuild.rs`:
//! they are `impl Server` / `impl Coordinator` blocks over those types'
//! private tables (the per-slot record table, the transaction contexts),
//! which the wing reaches only through their public methods. The wing
//! reaches the protocol engine through [`crate::protocol::Io`] (node,
//! placement, packets, DMA) and the transaction-id slot space through
//! [`crate::slots`]; the membership reaches the runtime through
//! [`crate::membership::MembershipPort`].
//!
//! ## How they interact
//! - A **configuration with failed nodes** (the membership's, applied by
//!   `NicRuntime::apply_configuration`) begins a recovery epoch at every
//!   live node; the node starts no transaction until the leader's
//!   `Resume`. A configuration naming a **joining** backup goes through an
//!   epoch too, and at its `Resume` the shard's primary starts copying.
//! - A **NIC restart inside a recovery epoch** (chaos does this) keeps the
//!   recovery machine (its evidence is host memory); the machine sends its
//!   step's messages again, and the rebuild leaves its lost transactions to
//!   the recovery. Copies to or from the restarted NIC begin again from a
//!   new snapshot.
//! - A **restarted node's process** (a new incarnation, empty host) drops
//!   every peer message but recovery's and starts nothing until a
//!   configuration admits it; it then joins as a copying backup.
//!
//! The runtime's state is one [`NicMode`](wiring::mode::NicMode), with the
//! precedence **stopped > rebuilding > recovering > awaiting admission >
//! serving** when several hold at once; only `Serving` starts client
//! transactions. Draining and fencing (a lease that ran out) are the host
//! node's states, not the NIC runtime's.
//!
//! ## Bounds
//! Each bound lives with the module that enforces it: the epoch machine's
//! in [`epoch`] (`RECOVERY_TXS_MAX`, `EARLY_MESSAGES_MAX`, ...), the
//! rebuild's in [`restart`] (`REBUILD_RECORDS_MAX`, ...), the copies' in
//! [`rereplication`] (`COPY_OBJECTS_MAX`, ...), the runtime's inbox in
//! [`wiring::epoch`] (`RECOVERY_INBOX_MAX`), what the membership drains in
//! [`crate::membership`] (`RECOVERY_SUSPECTS_MAX`), the slot space in
//! [`crate::slots`]. Faults are not on the hot path: recovery allocates.
//!
//! The epoch machine's public types are re-exported here
//! (`splitkv_nic::recovery::{Recovery, TxEvidence, ...}`).

pub mod epoch;
pub mod rereplication;
pub mod restart;
pub mod wiring;

pub(crate) use epoch::lost_outcome;
pub use epoch::{
    decide, DecisionReason, EvidenceSet, LocalEvidence, Recovery, RecoveryCommand, RecoveryConfig,
    RecoveryError, RecoveryPhase, RecoveryRule, RecoveryStats, TxEvidence, COMMANDS_MAX,
    DECISION_TIMEOUT_NS_DEFAULT, EARLY_MESSAGES_MAX, EVIDENCE_TIMEOUT_NS_DEFAULT,
    LOCAL_EVIDENCE_ENTRIES_MAX, RECOVERY_TXS_MAX,
};
