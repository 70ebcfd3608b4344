//! The runtime's side of crash recovery (issue 11; Xenic §4.2.1, Dandelion
//! §4.4): it owns one [`Recovery`] state machine, feeds it the recovery
//! messages the dispatcher received ([`MsgKind::Recovery`]), sends the
//! messages it asks for, and keeps the node paused (no new transactions)
//! from a new configuration with failed nodes until the machine's `Resume`.
//!
//! What is wired so far: the wire kind, dispatch, pausing, the `Send`,
//! `SuspectNode` and `Resume` commands (at `Resume` every node switches to
//! the epoch's placement, which promotes backups of failed primaries). The
//! other commands (`CommitPending`, `DropPending`, `FinishCoordinated`,
//! `Promote`) are handed to the runtime ([`RecoveryRuntime::take_command`]),
//! which counts them in [`UnwiredCommands`] without acting on them yet.

use splitkv_layout::wire::{Flow, MsgKind, NodeId, NodeMask, RecoveryMsg};

use crate::net::stack::Stack;
use crate::placement::Placement;
use crate::recovery::{
    LocalEvidence, Recovery, RecoveryCommand, RecoveryConfig, RecoveryError, RecoveryPhase,
    EARLY_MESSAGES_MAX,
};
use crate::Nanos;

/// Most received recovery messages kept between two iterations (the
/// machine takes them all at the start of the next one).
pub const RECOVERY_INBOX_MAX: usize = 2 * EARLY_MESSAGES_MAX;
/// Most suspicions kept for the membership layer until drained
/// ([`RecoveryRuntime::drain_suspects`]).
pub const RECOVERY_SUSPECTS_MAX: usize = 64;

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
            enc: Vec::new(),
            stats: RecoveryRuntimeStats::default(),
        }
    }

    /// The machine (phase, view, counters), for checks.
    pub fn machine(&self) -> &Recovery {
        &self.machine
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

    /// A new configuration of `epoch` with the nodes of `failed` crashed
    /// (a mask by node id): pauses the node and starts the machine's epoch
    /// with `local` evidence. A configuration without failed nodes changes
    /// nothing here.
    ///
    /// # Errors
    /// [`RecoveryError`] from [`Recovery::begin_epoch`]; the node is not
    /// paused then.
    pub fn begin(
        &mut self,
        now: Nanos,
        epoch: u32,
        failed: NodeMask,
        local: LocalEvidence,
    ) -> Result<(), RecoveryError> {
        if failed.is_empty() && self.machine.view().failed().is_empty() {
            return Ok(());
        }
        match self.machine.begin_epoch(now, epoch, failed, local) {
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

/// Commands not carried out yet, by kind (the wiring's missing steps).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnwiredCommands {
    /// `CommitPending` commands taken but not applied to the host log.
    pub commit_pending: u64,
    /// `DropPending` commands taken but not applied to the host log.
    pub drop_pending: u64,
    /// `Promote` commands taken. The promotion itself is the placement
    /// switch every node makes at `Resume`; the NIC cache is not touched
    /// (a backup caches none of its shards' objects).
    pub promote: u64,
    /// `FinishCoordinated` commands taken (the coordinator's own deadline
    /// rules end the transaction; the decision is not applied to it).
    pub finish_coordinated: u64,
    /// Of those, decided commit.
    pub finish_committed: u64,
}

impl super::NicRuntime {
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

    /// Recovery commands taken but not carried out yet, by kind.
    pub fn recovery_unwired(&self) -> UnwiredCommands {
        self.unwired
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
    /// local state (see [`RecoveryRuntime::take_command`]).
    pub(super) fn poll_recovery(&mut self, now: Nanos) -> bool {
        let mut work = self.recovery.step(now);
        while let Some(c) = self.recovery.take_command(&mut self.io.net) {
            work = true;
            self.recovery_command(c);
        }
        work
    }

    /// What this node knows at an epoch change: its coordinator's
    /// transactions in flight. (Records its host log holds are not gathered
    /// yet: LOG does not carry the written-shard set; see the module docs.)
    pub(super) fn local_evidence(&self) -> LocalEvidence {
        let mut local = LocalEvidence::default();
        self.coordinator
            .evidence(self.io.node, &self.io.placement, &mut local.coordinated);
        local
    }

    /// Carries out one command that changes local state.
    pub(super) fn recovery_command(&mut self, c: RecoveryCommand) {
        let u = &mut self.unwired;
        match c {
            RecoveryCommand::CommitPending { .. } => u.commit_pending += 1,
            RecoveryCommand::DropPending { .. } => u.drop_pending += 1,
            RecoveryCommand::Promote { .. } => u.promote += 1,
            // The coordinator's deadline rules already ended (and reported)
            // its transactions with failed peers.
            RecoveryCommand::FinishCoordinated { commit, .. } => {
                u.finish_coordinated += 1;
                u.finish_committed += commit as u64;
            }
            // Every node serves the epoch's placement from now on: the
            // first surviving replica of each shard is its primary.
            RecoveryCommand::Resume { .. } => {
                let failed = self.recovery.machine().view().failed();
                self.io.placement = self.io.placement.with_failed(failed);
                self.recovery.resume();
            }
            RecoveryCommand::Send { .. } | RecoveryCommand::SuspectNode { .. } => {}
        }
    }
}
