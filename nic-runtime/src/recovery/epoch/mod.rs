//! Crash recovery (Xenic §4.2.1, Dandelion §4.4, FaRM-style): a
//! self-contained, polled state machine per node that decides every
//! transaction in flight after a crash, promotes backups of lost primaries
//! and resumes service, never contradicting a decision already reported to a
//! client (replication `f + 1`, at most `f` crashed nodes).
//!
//! # Assumptions about the commit protocol
//! - LOG (the write set with its new values) goes to *every* replica of each
//!   written shard, primary and backups, and carries the set of written
//!   shards; the commit point is every replica's LOG acknowledgement.
//! - Replicas hold a LOG record pending until its transaction's COMMIT
//!   (decision) record arrives; an ABORT after LOG drops it. A LOG without
//!   decision is exactly the evidence recovery reads.
//! - A coordinator reports commit only after every LOG and COMMIT
//!   acknowledgement; it reports abort only before any LOG was sent, or after
//!   every replica holding the LOG acknowledged the ABORT (see
//!   [`decide`] for why the second half is needed); a timed-out
//!   transaction's client learns "unknown outcome".
//! - The transaction id names its coordinator ([`splitkv_layout::TxId::coordinator`]).
//!
//! # Steps
//! 1. The membership declares a new epoch with a failed set; the runtime
//!    stops serving, bumps the packet epoch (`Stack::set_epoch`; old-epoch
//!    packets are dropped and counted) and calls [`Recovery::begin_epoch`]
//!    with its [`LocalEvidence`]: the transactions its coordinator knows
//!    (phase, decision, reported?) and the records its host log holds.
//! 2. Every node sends its evidence to the recovery leader, the lowest live
//!    node id ([`crate::placement::PlacementView::leader`]), as
//!    [`RecoveryMsg::Evidence`](splitkv_layout::wire::RecoveryMsg::Evidence) parts,
//!    with the newest generation of each node's transaction ids its
//!    per-slot fences saw.
//! 3. The leader, once every live node's evidence is in, decides each
//!    transaction by the rule in [`decide`] and sends each node the
//!    decisions of the transactions that node reported
//!    ([`RecoveryMsg::Decisions`](splitkv_layout::wire::RecoveryMsg::Decisions) parts),
//!    and the newest generation of that node's own ids any live node saw.
//! 4. Each node records its decisions in its host log
//!    ([`RecoveryCommand::CommitPending`], [`RecoveryCommand::DropPending`]:
//!    a COMMIT or ABORT record each) and answers
//!    [`RecoveryMsg::Applied`](splitkv_layout::wire::RecoveryMsg::Applied).
//! 5. Once every live node has answered, the leader sends
//!    [`RecoveryMsg::Resume`](splitkv_layout::wire::RecoveryMsg::Resume).
//!    Only then does a node act on the decisions where anyone can see them:
//!    its coordinator reports outcomes to clients
//!    ([`RecoveryCommand::FinishCoordinated`]), it is promoted to primary of
//!    every shard whose earlier primaries failed and whose first surviving
//!    replica it is ([`RecoveryCommand::Promote`]: the NIC index is rebuilt
//!    from the host table, which now holds every committed record; there are
//!    no locks left to rebuild, since every earlier transaction is decided),
//!    and it resumes ([`RecoveryCommand::Resume`]), its coordinator
//!    numbering its free slots above that generation: a restarted process
//!    starts at generation 1, and its peers' fences hold its
//!    predecessor's ids (`tests/nic_restart_recovery.rs`).
//!
//! Why step 4 comes before anyone acts: an abort decided because a live
//! replica lacked the LOG could turn into a commit in a later epoch if that
//! replica crashed, unless the LOG holders recorded the abort (rule 3). Once
//! every live node recorded the epoch's decisions they hold in every later
//! epoch (commits: every surviving replica keeps a LOG or COMMIT record;
//! aborts: every surviving LOG holder has the ABORT record). A leader that
//! crashes before `Resume` leaves decisions that some nodes may have
//! recorded (and whose commits their hosts applied) while others never
//! heard them: every node reports what it recorded for a recovery it has
//! not resumed from in each later epoch — its decision records, and its
//! coordinated transactions' decisions as their outcomes — so the next
//! leader decides those the same way (`unresumed.rs`).
//!
//! Timeouts: the leader suspects every node whose evidence has not arrived
//! within [`RecoveryConfig::evidence_timeout_ns`], a non-leader suspects the
//! leader when its decisions have not arrived within
//! [`RecoveryConfig::decision_timeout_ns`] ([`RecoveryCommand::SuspectNode`]);
//! the membership then starts another epoch, and recovery starts over with
//! the evidence as it is then. Decisions stay consistent across such
//! restarts, as argued above.
//!
//! Lost messages: within an epoch the sessions deliver every message, except
//! those held for a peer's process that is gone (a session renewed for a
//! newer incarnation: a NIC runtime restarted, or a node addressed as an
//! incarnation it no longer is). The runtime then has the machine send its
//! current step's messages to that peer again ([`Recovery::resend_to`],
//! `resend.rs`), and each receiver takes a message at most once.
//!
//! # Messages and bounds
//! [`RecoveryMsg`](splitkv_layout::wire::RecoveryMsg) (shared-layout, `wire/recovery.rs`) on the recovery flow;
//! a node reports at most [`LOCAL_EVIDENCE_ENTRIES_MAX`] entries, in parts of
//! at most `EVIDENCE_ENTRIES_PER_MESSAGE_MAX`; the leader tracks at most
//! [`RECOVERY_TXS_MAX`] transactions; messages of a later epoch are kept up
//! to [`EARLY_MESSAGES_MAX`]; the command queue holds at most
//! [`COMMANDS_MAX`] per epoch. Recovery is not on the hot path: it allocates.
//!
//! # Wiring (`crate::recovery::wiring::epoch`)
//! - Messages: [`MsgKind::Recovery`](splitkv_layout::wire::MsgKind::Recovery)
//!   on the recovery flow, dispatched to the machine.
//! - Begin: `NicRuntime::apply_configuration` with failed nodes bumps the
//!   epoch, lets the coordinator end what its deadline rules end at once
//!   (`set_live`), releases the locks of failed coordinators' transactions
//!   that have no LOG at this primary (`Server::release_orphan_locks`),
//!   gathers the evidence — the coordinator's transactions in flight
//!   (`Coordinator::evidence`) and the records the server holds
//!   (`Server::recovery_evidence`: every pending LOG record, and every
//!   COMMIT and ABORT record of its per-slot record table, the newest of
//!   each coordinator slot, whatever the coordinator's state; each LOG
//!   carries its transaction's written-shard set) — and begins the epoch
//!   (the machine adds what it recorded since this node last resumed).
//! - During the epoch the evidence stays true: no new transaction starts, a
//!   LOG that arrives (a retransmission re-stamped with the new epoch) is
//!   refused as busy, and the coordinator neither takes responses nor runs
//!   its deadline rules; its transactions wait for the decisions.
//! - `CommitPending`/`DropPending` (`Server::apply_recovered`): the COMMIT or
//!   ABORT decision record is appended to the host log (after the LOG
//!   records if they are still being appended; the host worker then applies
//!   or drops the pending records), every lock the transaction holds here is
//!   released, and on commit those keys' cached objects are dropped. The
//!   runtime takes the machine's next command (its `Applied` answer, or the
//!   resume) only once every append completed and the host acknowledged
//!   applying the log through it, so at `Resume` every host table holds
//!   every decided write.
//! - `FinishCoordinated` (`Coordinator::finish_recovered`): the client hears
//!   Committed or Unavailable (never a second answer after an "unknown
//!   outcome"), an abort sends ABORT to every primary of the write set and
//!   every replica sent the LOG, and the slot is freed.
//! - `Promote`: the shard's cached objects are dropped; `Resume`: every
//!   node serves the epoch's [`PlacementView::serving`](crate::placement::PlacementView::serving)
//!   placement (a shard's first surviving replica is its primary) and
//!   starts transactions again.
//! - The leader also aborts a transaction whose coordinator is live and did
//!   not report it ([`decide`]).
//! - `RecoveryActions` (runtime) counts what was done and keeps when the
//!   last epoch began and resumed and when the first transaction committed
//!   after it (crash → resumed service, `sim/tests/crash_harness.rs`).
//!
//! Re-replication, restarted nodes and NIC-only restarts live in
//! `crate::recovery::rereplication`, `crate::membership` and `crate::recovery::restart`;
//! the steps above are modelled in `tla/XenicOCCMsgs.tla` (three nodes, the
//! ring's replica sets).
//!
//! # Not done
//! - A promoted primary's insert quota ([`crate::protocol::server::Room`])
//!   still counts only the shard it was first primary of, and a recovered
//!   commit counts every key its transaction locked here as written.
//! - Rule 4's [`decide::LogQuorum`] (whom it asks for the LOG) is modelled
//!   alone in `tla/LogQuorum.tla` (one shard, one transaction, members that
//!   crash, join, catch up and restart between transactions); the large
//!   model (`XenicOCCMsgs.tla`) has no new backups and no restarted members.
//! - A coordinator whose NIC restarted after sending COMMIT to some
//!   replicas only is covered by every replica reporting its decision
//!   records (rules 2–3 come before "forgot"; `tests/nic_restart_recovery.rs` has
//!   the epoch beginning before and after the replica heard of the
//!   restart; `tla/LostCoordinator.tla` models one such transaction, and
//!   its models with the two earlier reporting rules must fail). The large
//!   models (`XenicRestart.tla`) still restart a NIC only outside a
//!   recovery. Transaction ids carry no NIC incarnation, so the leader
//!   cannot tell a transaction the coordinator let go from one it lost;
//!   the decision records stand in for that.
//! - A NIC runtime that restarts during a recovery keeps its machine, but
//!   a whole-node crash loses `unresumed.rs`'s record; that is safe only
//!   because the crashed node's decision records die with it.

pub mod decide;
mod machine;
mod resend;
mod steps;
mod types;
mod unresumed;

pub use decide::{DecisionReason, EvidenceSet, RecoveryRule, TxEvidence};
pub use machine::{Recovery, RecoveryPhase};
pub use types::{
    LocalEvidence, RecoveryCommand, RecoveryConfig, RecoveryError, RecoveryStats, COMMANDS_MAX,
    DECISION_TIMEOUT_NS_DEFAULT, EARLY_MESSAGES_MAX, EVIDENCE_TIMEOUT_NS_DEFAULT,
    LOCAL_EVIDENCE_ENTRIES_MAX, RECOVERY_TXS_MAX,
};
pub(crate) use unresumed::lost_outcome;
