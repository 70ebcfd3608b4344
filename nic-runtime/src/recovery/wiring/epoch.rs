//! The runtime's side of crash recovery (Xenic §4.2.1, Dandelion §4.4): it owns
//! one [`Recovery`] state machine, feeds it the recovery messages the
//! dispatcher received ([`MsgKind::Recovery`]), sends the messages it asks for,
//! and keeps the node paused (no new transactions) from a new configuration
//! with failed nodes until the machine's `Resume`.
//!
//! The runtime carries out every command: `Send` and `SuspectNode` here,
//! the others in `NicRuntime::recovery_command` — decisions recorded in the
//! host log by the server (`CommitPending`, `DropPending`), transactions
//! ended by the coordinator (`FinishCoordinated`), cached objects of
//! promoted shards dropped (`Promote`), and at `Resume` the epoch's
//! placement (backups of failed primaries promoted) and the end of the
//! pause. [`RecoveryActions`] counts them and keeps the times of the last
//! epoch's begin and resume and of the first commit after it.

use splitkv_layout::wire::{Flow, MsgKind, NodeId, NodeMask, RecoveryMsg};
use splitkv_layout::TxId;

use crate::membership::Configuration;
use crate::net::stack::Stack;
use crate::placement::{Placement, NODES_MAX};
use crate::recovery::{
    LocalEvidence, Recovery, RecoveryCommand, RecoveryConfig, RecoveryError, RecoveryPhase,
    EARLY_MESSAGES_MAX, LOCAL_EVIDENCE_ENTRIES_MAX,
};
use crate::Nanos;

/// Most received recovery messages kept between two iterations (the
/// machine takes them all at the start of the next one).
pub const RECOVERY_INBOX_MAX: usize = 2 * EARLY_MESSAGES_MAX;
pub use crate::membership::RECOVERY_SUSPECTS_MAX;

/// Counters of the runtime's recovery wiring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoveryRuntimeStats {
    /// Recovery epochs begun here (new configurations with failed nodes).
    pub epochs_begun: u64,
    /// Epochs resumed here (the machine's `Resume` command taken).
    pub epochs_resumed: u64,
    /// New configurations whose recovery could not begin (see [`RecoveryError`]).
    pub begin_refused: u64,
    /// Iterations that started no request because recovery was under way.
    pub paused_iterations: u64,
    /// Recovery messages received and handed to the machine.
    pub messages_received: u64,
    /// Recovery messages that did not decode (also counted as bad packets).
    pub messages_bad: u64,
    /// Recovery messages dropped because [`RECOVERY_INBOX_MAX`] were queued.
    pub inbox_dropped: u64,
    /// Recovery messages sent.
    pub messages_sent: u64,
    /// Recovery messages the stack or the encoder refused (the machine's
    /// timeouts then start another epoch).
    pub send_failed: u64,
    /// Suspicions dropped because [`RECOVERY_SUSPECTS_MAX`] were undrained.
    pub suspects_dropped: u64,
}

/// The recovery machine of one runtime, with its inbox and pause state.
#[derive(Debug)]
pub struct RecoveryRuntime {
    machine: Recovery,
    inbox: Vec<(NodeId, RecoveryMsg)>,
    suspects: Vec<NodeId>,
    paused: bool,
    /// Per node, its incarnation in the last configuration taken (`None`
    /// before the first).
    incarnations: Option<[u32; NODES_MAX]>,
    enc: Vec<u8>,
    stats: RecoveryRuntimeStats,
}

impl RecoveryRuntime {
    /// Node `node`'s recovery, serving with every node of `placement` live.
    pub fn new(node: NodeId, placement: Placement, config: RecoveryConfig) -> RecoveryRuntime {
        RecoveryRuntime {
            machine: Recovery::new(node, placement, config),
            inbox: Vec::with_capacity(RECOVERY_INBOX_MAX),
            suspects: Vec::new(),
            paused: false,
            incarnations: None,
            enc: Vec::new(),
            stats: RecoveryRuntimeStats::default(),
        }
    }

    /// The machine (phase, view, counters), for checks.
    pub fn machine(&self) -> &Recovery {
        &self.machine
    }

    /// The rebuild decided `tx_id`, a transaction this node's coordinator
    /// lost ([`Recovery::note_rebuild_decision`]); false if not kept.
    pub(crate) fn note_rebuild_decision(
        &mut self,
        tx_id: TxId,
        write_shards: NodeMask,
        commit: bool,
    ) -> bool {
        self.machine
            .note_rebuild_decision(tx_id, write_shards, commit)
    }

    /// Whether new transactions are held back (recovery under way).
    pub fn paused(&self) -> bool {
        self.paused
    }

    /// Counters.
    pub fn stats(&self) -> RecoveryRuntimeStats {
        self.stats
    }

    /// Counts one iteration that started no request because of the pause.
    pub fn count_paused_iteration(&mut self) {
        self.stats.paused_iterations += 1;
    }

    /// A received [`MsgKind::Recovery`] body from `from`: decoded and queued
    /// for the machine; returns `false` if it did not decode.
    pub fn on_wire(&mut self, from: NodeId, bytes: &[u8]) -> bool {
        let Ok(msg) = RecoveryMsg::decode(bytes) else {
            self.stats.messages_bad += 1;
            return false;
        };
        if self.inbox.len() < RECOVERY_INBOX_MAX {
            self.inbox.push((from, msg));
        } else {
            self.stats.inbox_dropped += 1;
        }
        true
    }

    /// A new configuration `config` with the nodes of `failed` crashed
    /// (a mask by node id) and replicas ordered by its roles (re-replication):
    /// pauses the node and starts the machine's epoch with `local` evidence.
    /// A configuration without failed nodes whose order is the current
    /// view's, after a view without failed nodes, changes nothing here.
    /// (A node that rejoins or ends its copy changes the order, so every
    /// node passes through a recovery epoch: every transaction begun before
    /// it is decided and applied before any write is sent to the new
    /// replica set, the join point of `crate::recovery::rereplication`.) A change of
    /// some node's incarnation (`config.incarnation`) always begins one: a
    /// node that took only the newest of several configurations — a copying
    /// node crashed (configured out, so the others began an epoch) and
    /// rejoined as a newer incarnation — sees the same members and order as
    /// before, yet the others are in that epoch and wait for its evidence
    /// (the chaos mix's seeds).
    ///
    /// # Errors
    /// [`RecoveryError`] from [`Recovery::begin_epoch`]; the node is not
    /// paused then.
    pub fn begin(
        &mut self,
        now: Nanos,
        config: &Configuration,
        failed: NodeMask,
        local: LocalEvidence,
    ) -> Result<(), RecoveryError> {
        let (epoch, roles) = (config.epoch, config.roles());
        let view = self.machine.view();
        let renewed = self
            .incarnations
            .replace(config.incarnation)
            .is_some_and(|was| was != config.incarnation);
        if failed.is_empty() && view.failed().is_empty() && view.roles() == roles && !renewed {
            return Ok(());
        }
        match self
            .machine
            .begin_epoch_with(now, epoch, failed, roles, local)
        {
            Ok(()) => {
                self.stats.epochs_begun += 1;
                self.paused = true;
                Ok(())
            }
            Err(e) => {
                self.stats.begin_refused += 1;
                Err(e)
            }
        }
    }

    /// Feeds the queued messages and the time to the machine; returns
    /// whether anything happened.
    pub fn step(&mut self, now: Nanos) -> bool {
        let work = !self.inbox.is_empty();
        for (from, msg) in self.inbox.drain(..) {
            self.stats.messages_received += 1;
            self.machine.on_message(now, from, msg);
        }
        work | self.machine.run_iteration(now)
    }

    /// Takes the machine's next command. `Send` and `SuspectNode` are
    /// carried out here (sending through `net`); every other command is
    /// returned for the runtime to carry out (`Resume` through
    /// [`RecoveryRuntime::resume`]).
    pub fn take_command(&mut self, net: &mut Stack) -> Option<RecoveryCommand> {
        while let Some(c) = self.machine.poll_command() {
            match c {
                RecoveryCommand::Send { to, msg } => self.send(net, to, &msg),
                RecoveryCommand::SuspectNode { node } => {
                    if self.suspects.len() < RECOVERY_SUSPECTS_MAX {
                        self.suspects.push(node);
                    } else {
                        self.stats.suspects_dropped += 1;
                    }
                }
                other => return Some(other),
            }
        }
        None
    }

    /// The sessions with the nodes of `renewed` (a mask by node id) were
    /// renewed for a newer incarnation, or this node's NIC runtime
    /// restarted: the machine queues again the messages of its current step
    /// to each ([`Recovery::resend_to`]). Returns whether any was queued.
    pub fn peers_renewed(&mut self, renewed: u32) -> bool {
        let mut any = false;
        for n in (0..NODES_MAX as NodeId).filter(|n| renewed & (1 << n) != 0) {
            any |= self.machine.resend_to(n);
        }
        any
    }

    /// Ends the pause: every decision of the epoch is applied.
    pub fn resume(&mut self) {
        self.stats.epochs_resumed += 1;
        self.paused = false;
    }

    fn send(&mut self, net: &mut Stack, to: NodeId, msg: &RecoveryMsg) {
        self.enc.clear();
        let sent = msg.encode(&mut self.enc).is_ok()
            && net
                .try_insert_raw(to, Flow::Recovery, MsgKind::Recovery, &self.enc)
                .is_ok();
        if sent {
            self.stats.messages_sent += 1;
        } else {
            self.stats.send_failed += 1;
        }
    }

    /// Moves the nodes the machine suspects (silent during recovery) into
    /// `out`, for the membership layer to start another epoch without them.
    pub fn drain_suspects(&mut self, out: &mut Vec<NodeId>) {
        out.append(&mut self.suspects);
    }

    /// Whether the machine is serving (every decision of its epoch applied).
    pub fn serving(&self) -> bool {
        self.machine.phase() == RecoveryPhase::Serving
    }
}

/// What the runtime did with the recovery machine's commands, and when
/// (simulated or real time as passed to `run_iteration`, ns), to measure
/// crash → resumed service.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoveryActions {
    /// `CommitPending`: decided commit, and this node held the LOG undecided.
    pub committed_pending: u64,
    /// `DropPending`: decided abort, and this node held the LOG undecided.
    pub dropped_pending: u64,
    /// `CommitPending`/`DropPending` for a transaction already decided here.
    pub already_decided: u64,
    /// `FinishCoordinated` for a transaction this coordinator still held.
    pub finished_coordinated: u64,
    /// Of those, decided commit.
    pub finished_committed: u64,
    /// Shards this node was promoted to serve as primary.
    pub promoted_shards: u64,
    /// Cached objects of promoted shards dropped (read from the host table
    /// from then on).
    pub promoted_objects_dropped: u64,
    /// Iterations that held recovery's next command back until the host
    /// applied every decision recorded here.
    pub settle_waits: u64,
    /// When the last recovery epoch began here (ns).
    pub last_begun_ns: Nanos,
    /// When the last recovery epoch resumed here (ns).
    pub last_resumed_ns: Nanos,
    /// When this node's coordinator first committed a transaction after the
    /// last resume (ns); 0 until it did.
    pub first_commit_after_resume_ns: Nanos,
    /// When this node, being copied (re-replication), last had every shard
    /// it joins from their primaries and handed its caught-up report to the
    /// membership layer (ns); 0 if it never was.
    pub copy_caught_up_ns: Nanos,
    /// Host-log records left out of this node's evidence for want of room
    /// ([`LOCAL_EVIDENCE_ENTRIES_MAX`]; pending LOG records go first).
    pub evidence_left_out: u64,
}

impl crate::runtime::NicRuntime {
    /// Whether new transactions are held back while recovery runs.
    pub fn recovering(&self) -> bool {
        self.recovery.paused()
    }

    /// The recovery state machine (phase, view, counters), for checks.
    pub fn recovery(&self) -> &crate::recovery::Recovery {
        self.recovery.machine()
    }

    /// Counters of the runtime's recovery wiring.
    pub fn recovery_stats(&self) -> RecoveryRuntimeStats {
        self.recovery.stats()
    }

    /// What the runtime did with recovery's commands, and when.
    pub fn recovery_actions(&self) -> RecoveryActions {
        self.actions
    }

    /// Moves the nodes recovery suspects (silent during an epoch change)
    /// into `out`, for the membership layer.
    pub fn drain_recovery_suspects(&mut self, out: &mut Vec<NodeId>) {
        self.recovery.drain_suspects(out);
    }

    /// Why the last configuration's recovery epoch could not begin, if it could not.
    pub fn recovery_refusal(&self) -> Option<crate::recovery::RecoveryError> {
        self.recovery_refusal
    }

    /// Recovery messages and timeouts; carries out the commands that change
    /// local state (see [`RecoveryRuntime::take_command`]). A command after
    /// a recorded decision waits until the host applied it (the `Applied`
    /// answer, and the resume, promise that the host table holds every
    /// decision: `Server::appends_settled`).
    pub(crate) fn poll_recovery(&mut self, now: Nanos) -> bool {
        let mut work = self.recovery.step(now);
        loop {
            if self.recovery.machine().commands_pending() > 0
                && !self.server.appends_settled(self.host_applied)
            {
                self.actions.settle_waits += 1;
                break;
            }
            let Some(c) = self.recovery.take_command(&mut self.io.net) else {
                break;
            };
            work = true;
            self.recovery_command(now, c);
        }
        if self.actions.first_commit_after_resume_ns == 0
            && self.actions.last_resumed_ns != 0
            && self.coordinator.stats().committed > self.committed_at_resume
        {
            self.actions.first_commit_after_resume_ns = now;
        }
        work
    }

    /// What this node knows at an epoch change: its coordinator's
    /// transactions in flight, the records its host log holds (pending
    /// LOG records; the decision records of its per-slot record table), up
    /// to the machine's bound (records left out for want of room are
    /// counted, [`RecoveryActions::evidence_left_out`]), and per node the
    /// newest generation of its ids this node's fences saw.
    pub(crate) fn local_evidence(&mut self) -> LocalEvidence {
        let mut local = LocalEvidence::default();
        self.coordinator
            .evidence(self.io.node, &self.io.placement, &mut local.coordinated);
        self.restart.lost_commits(&mut local.coordinated);
        let room = LOCAL_EVIDENCE_ENTRIES_MAX.saturating_sub(local.coordinated.len());
        let left_out = self.server.recovery_evidence(room, &mut local.records);
        self.actions.evidence_left_out += left_out as u64;
        local.generations = (0..self.io.placement.nodes() as NodeId)
            .map(|n| self.server.newest_generation(n))
            .collect();
        local
    }

    /// Carries out one command that changes local state.
    pub(crate) fn recovery_command(&mut self, now: Nanos, c: RecoveryCommand) {
        let a = &mut self.actions;
        match c {
            RecoveryCommand::CommitPending { tx_id } | RecoveryCommand::DropPending { tx_id } => {
                let commit = matches!(c, RecoveryCommand::CommitPending { .. });
                if self
                    .server
                    .apply_recovered(&mut self.io, &mut self.index, tx_id, commit)
                {
                    a.committed_pending += commit as u64;
                    a.dropped_pending += !commit as u64;
                } else {
                    a.already_decided += 1;
                }
            }
            RecoveryCommand::FinishCoordinated { tx_id, commit } => {
                if self
                    .coordinator
                    .finish_recovered(&mut self.io, tx_id, commit)
                {
                    a.finished_coordinated += 1;
                    a.finished_committed += commit as u64;
                }
            }
            // Xenic §4.2.1: the new primary serves the shard from its host
            // table, which holds every decided write; nothing it cached of
            // the shard is trusted.
            RecoveryCommand::Promote { shard } => {
                let placement = self.io.placement;
                a.promoted_shards += 1;
                a.promoted_objects_dropped +=
                    self.index.forget_where(|k| placement.shard(k) == shard) as u64;
            }
            // Every node serves the epoch's placement from now on: the
            // first surviving replica of each shard is its primary.
            RecoveryCommand::Resume { generation, .. } => {
                // A restarted process's coordinator starts at generation 1;
                // its peers' fences hold its predecessor's ids.
                self.coordinator.number_above(generation);
                self.io.placement = self.recovery.machine().view().serving();
                self.recovery.resume();
                // Re-replication begins here, from scratch.
                let (epoch, view) = (
                    self.recovery.machine().epoch(),
                    *self.recovery.machine().view(),
                );
                self.copies.on_resume(epoch, &view);
                a.last_resumed_ns = now;
                a.first_commit_after_resume_ns = 0;
                self.committed_at_resume = self.coordinator.stats().committed;
            }
            RecoveryCommand::Send { .. } | RecoveryCommand::SuspectNode { .. } => {}
        }
    }
}
