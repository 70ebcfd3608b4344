//! The recovery state machine's interface: its bounds, configuration, input
//! ([`LocalEvidence`]), output ([`RecoveryCommand`]), errors and counters.

use splitkv_layout::wire::{
    CoordEvidence, NodeId, RecordEvidence, RecoveryMsg, DECISIONS_PER_MESSAGE_MAX,
    EVIDENCE_ENTRIES_PER_MESSAGE_MAX, RECOVERY_PARTS_MAX,
};
use splitkv_layout::TxId;

use super::decide::RecoveryRule;
use crate::placement::{PlacementError, NODES_MAX};
use crate::Nanos;

/// How long the recovery leader waits for every live node's evidence before
/// it suspects the silent ones (20 ms; Rowan reports 26 ms to a new
/// configuration, crash recovery's target is under 100 ms to resumed service).
pub const EVIDENCE_TIMEOUT_NS_DEFAULT: Nanos = 20_000_000;
/// How long a node waits for the leader's decisions before it suspects the
/// leader (40 ms: longer than the leader's own evidence wait).
pub const DECISION_TIMEOUT_NS_DEFAULT: Nanos = 40_000_000;
/// Most evidence entries (coordinated transactions plus records) one node
/// reports in one epoch: 16 384. A runtime bounds its coordinator slots and
/// host log so that it never holds more.
pub const LOCAL_EVIDENCE_ENTRIES_MAX: usize = RECOVERY_PARTS_MAX * EVIDENCE_ENTRIES_PER_MESSAGE_MAX;
/// Most distinct transactions the leader tracks in one epoch.
pub const RECOVERY_TXS_MAX: usize = NODES_MAX * LOCAL_EVIDENCE_ENTRIES_MAX;
/// Most messages of a later epoch kept until this node learns that epoch
/// (a node may hear a peer's evidence before its own membership update).
pub const EARLY_MESSAGES_MAX: usize = 4 * RECOVERY_PARTS_MAX;
/// Most commands queued in one epoch: evidence or decision sends to every
/// node, two per local evidence entry (apply and finish), one promotion per
/// shard, one suspicion per node, and the resume.
pub const COMMANDS_MAX: usize =
    NODES_MAX * RECOVERY_PARTS_MAX + 2 * LOCAL_EVIDENCE_ENTRIES_MAX + 2 * NODES_MAX + 1;

// A node's decisions always fit the parts of one Decisions series: it gets
// at most one decision per transaction it reported.
const _: () = assert!(LOCAL_EVIDENCE_ENTRIES_MAX <= RECOVERY_PARTS_MAX * DECISIONS_PER_MESSAGE_MAX);
// Parts are tracked in a u64 bitmap.
const _: () = assert!(RECOVERY_PARTS_MAX <= 64);

/// Timeouts and decision rule of one node's recovery state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryConfig {
    /// Leader: wait for evidence before suspecting silent nodes (ns).
    pub evidence_timeout_ns: Nanos,
    /// Non-leader: wait for decisions before suspecting the leader (ns).
    pub decision_timeout_ns: Nanos,
    /// The rule the records decide by, the cluster's commit protocol's
    /// (default: Xenic OCC's).
    pub rule: RecoveryRule,
}

impl RecoveryConfig {
    /// The timeouts for sessions that declare a peer failed after
    /// `silence_ns`: the evidence wait is at least half of it and the
    /// decision wait at least all of it (never less than the defaults).
    /// Nodes learn a new configuration at different times (a deployed
    /// membership polls its manager: etcd every 100 ms), and a node is
    /// suspected only after it was as silent as a session would allow: a
    /// shorter wait took a leader that learned the configuration late for a
    /// failed one, and a suspicion configures its node out.
    pub fn for_silence(silence_ns: Nanos) -> RecoveryConfig {
        RecoveryConfig {
            evidence_timeout_ns: EVIDENCE_TIMEOUT_NS_DEFAULT.max(silence_ns / 2),
            decision_timeout_ns: DECISION_TIMEOUT_NS_DEFAULT.max(silence_ns),
            rule: RecoveryRule::XenicOcc,
        }
    }

    /// This configuration deciding by `rule`.
    pub fn with_rule(self, rule: RecoveryRule) -> RecoveryConfig {
        RecoveryConfig { rule, ..self }
    }
}

impl Default for RecoveryConfig {
    fn default() -> Self {
        RecoveryConfig {
            evidence_timeout_ns: EVIDENCE_TIMEOUT_NS_DEFAULT,
            decision_timeout_ns: DECISION_TIMEOUT_NS_DEFAULT,
            rule: RecoveryRule::XenicOcc,
        }
    }
}

/// What this node knows at the start of an epoch change, gathered by the
/// runtime: every transaction its coordinator still knows (it forgets one
/// only after every replica acknowledged the decision), and every record its
/// host log holds that is pending (LOG without decision) or not yet
/// reclaimed (COMMIT, ABORT), one entry per `(transaction, shard)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalEvidence {
    /// Transactions this node coordinates.
    pub coordinated: Vec<CoordEvidence>,
    /// Records this node holds as a replica.
    pub records: Vec<RecordEvidence>,
    /// Per coordinator node (index), the newest generation of its
    /// transaction ids this node's per-slot fences saw (0: none; at most
    /// `MASK_NODES_MAX` entries): the leader tells each node the newest over
    /// every live node, and a coordinator whose process restarted numbers
    /// its transactions above it (no id used twice, none refused as late).
    pub generations: Vec<u32>,
}

impl LocalEvidence {
    /// Entries in all.
    pub fn len(&self) -> usize {
        self.coordinated.len() + self.records.len()
    }
    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An action the recovery state machine asks its node to take, in order.
/// The node takes every queued command before it starts another epoch
/// (`Recovery::begin_epoch` refuses while any is queued).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecoveryCommand {
    /// Send `msg` to node `to` on the recovery flow, in the current epoch.
    Send {
        /// Destination node.
        to: NodeId,
        /// The message.
        msg: RecoveryMsg,
    },
    /// Commit: append a COMMIT record for `tx_id` and apply its pending LOG
    /// records (NIC cache and host table), for every shard this node holds.
    CommitPending {
        /// Transaction id.
        tx_id: TxId,
    },
    /// Abort: append an ABORT record for `tx_id` and drop its pending LOG
    /// records (the ABORT record is evidence for a later epoch).
    DropPending {
        /// Transaction id.
        tx_id: TxId,
    },
    /// This node coordinated `tx_id`: report the outcome to the client if not
    /// yet reported, release its locks if it holds any, and free its slot.
    FinishCoordinated {
        /// Transaction id.
        tx_id: TxId,
        /// The decision.
        commit: bool,
    },
    /// Become `shard`'s primary (Xenic §4.2.1): rebuild its NIC index
    /// entries (versions from the host table, which now holds every
    /// committed record; no locks: every earlier transaction is decided).
    Promote {
        /// The shard.
        shard: NodeId,
    },
    /// `node` went silent during recovery: ask the membership for a new
    /// epoch without it.
    SuspectNode {
        /// The silent node.
        node: NodeId,
    },
    /// Every decision of `epoch` is applied here: serve transactions again
    /// (requests arriving before this are refused as busy).
    Resume {
        /// The epoch now served.
        epoch: u32,
        /// The newest generation of this node's transaction ids that any
        /// live node's per-slot fences saw: its coordinator numbers its free
        /// slots above it (`Coordinator::number_above`; a restarted process
        /// starts at generation 1, and its peers' fences hold its
        /// predecessor's).
        generation: u32,
    },
}

/// Why an epoch change cannot start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecoveryError {
    /// Commands are still queued: take them first.
    #[error("{0} recovery commands are still queued")]
    CommandsPending(usize),
    /// Epochs only grow.
    #[error("epoch {given} is not newer than the current epoch {current}")]
    EpochNotNewer {
        /// The current epoch.
        current: u32,
        /// The epoch given.
        given: u32,
    },
    /// The failed set does not fit the cluster, or names this node.
    #[error("bad failed set: {0}")]
    Placement(#[from] PlacementError),
    /// This node is in the failed set.
    #[error("node {0} is in the failed set of its own epoch")]
    SelfFailed(NodeId),
    /// More local evidence than [`LOCAL_EVIDENCE_ENTRIES_MAX`].
    #[error("{entries} evidence entries exceed the maximum {max}")]
    TooMuchEvidence {
        /// Entries given.
        entries: usize,
        /// The bound.
        max: usize,
    },
}

/// Counters of one node's recovery state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecoveryStats {
    /// Epoch changes begun.
    pub epochs_begun: u64,
    /// Epochs whose decisions were all applied (service resumed).
    pub epochs_resumed: u64,
    /// Messages of an older epoch, dropped.
    pub old_epoch_dropped: u64,
    /// Messages of a later epoch dropped because [`EARLY_MESSAGES_MAX`] were kept.
    pub early_dropped: u64,
    /// Messages dropped as unexpected: from a failed node, evidence at a
    /// non-leader, decisions from a non-leader or after resuming, duplicate
    /// or inconsistent parts.
    pub unexpected_dropped: u64,
    /// Transactions the leader could not track ([`RECOVERY_TXS_MAX`]).
    pub txs_over_limit: u64,
    /// Suspicions raised by timeouts.
    pub suspicions: u64,
    /// Steps whose messages were queued again for a peer whose session was
    /// renewed (`Recovery::resend_to`).
    pub resends: u64,
    /// Of those asked for, resends not queued because the command queue
    /// was within one series of [`COMMANDS_MAX`] (the step's timeout then
    /// suspects the silent node).
    pub resends_over_limit: u64,
}
