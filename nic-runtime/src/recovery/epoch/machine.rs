//! One node's recovery state machine (see the module docs of
//! `crate::recovery` for the protocol): polled, time passed in, output as a
//! queue of [`RecoveryCommand`]s.

use splitkv_layout::TxId;
use std::collections::{BTreeSet, VecDeque};

use splitkv_layout::wire::{Decision, NodeId, NodeMask, RecoveryMsg};

use super::decide::EvidenceSet;
use super::types::{
    LocalEvidence, RecoveryCommand, RecoveryConfig, RecoveryError, RecoveryStats, COMMANDS_MAX,
    EARLY_MESSAGES_MAX, LOCAL_EVIDENCE_ENTRIES_MAX,
};
use super::unresumed::Unresumed;
use crate::placement::{Placement, PlacementView, NODES_MAX};
use crate::Nanos;

/// Where a node is in the current epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryPhase {
    /// Every decision of the current epoch is applied; transactions run.
    Serving,
    /// Leader: gathering every live node's evidence.
    Collecting,
    /// Not the leader: evidence sent, waiting for the leader's decisions.
    AwaitingDecisions,
    /// Leader: decisions sent and recorded here, waiting for every live
    /// node's `Applied`.
    AwaitingApplied,
    /// Not the leader: decisions recorded and `Applied` sent, waiting for
    /// the leader's `Resume`.
    AwaitingResume,
}

/// Which parts of a multi-part series arrived (at most 64 parts).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Parts {
    /// The series' part count; 0 until the first part arrives.
    parts: u16,
    seen: u64,
}

impl Parts {
    /// Records `part` of `parts`; `false` for a duplicate or a part count
    /// that disagrees with earlier parts.
    pub(super) fn add(&mut self, part: u16, parts: u16) -> bool {
        if (self.parts != 0 && self.parts != parts) || self.seen & (1 << part) != 0 {
            return false;
        }
        self.parts = parts;
        self.seen |= 1 << part;
        true
    }

    pub(super) fn complete(&self) -> bool {
        self.parts != 0 && self.seen.count_ones() == self.parts as u32
    }
}

/// One node's crash-recovery state machine (Xenic §4.2.1, Dandelion §4.4).
#[derive(Debug)]
pub struct Recovery {
    pub(super) node: NodeId,
    pub(super) config: RecoveryConfig,
    pub(super) epoch: u32,
    pub(super) view: PlacementView,
    /// The view of the last epoch this node resumed in (promotions are
    /// relative to it, so a crash during recovery loses none).
    pub(super) served: PlacementView,
    pub(super) phase: RecoveryPhase,
    pub(super) deadline: Nanos,
    pub(super) local: LocalEvidence,
    pub(super) evidence: EvidenceSet,
    /// Leader: per node, the parts of its evidence that arrived.
    pub(super) evidence_parts: [Parts; NODES_MAX],
    /// Leader: per node, the transactions it reported (it gets their decisions).
    pub(super) reported: Vec<BTreeSet<TxId>>,
    pub(super) decision_parts: Parts,
    /// This node's decisions for the current epoch.
    pub(super) decisions: Vec<Decision>,
    /// Leader: the live nodes whose `Applied` arrived.
    pub(super) applied: NodeMask,
    /// Leader: per coordinator node, the newest generation of its ids any
    /// live node's evidence reported.
    pub(super) generations: [u32; NODES_MAX],
    /// The newest generation of this node's own ids the leader reported.
    pub(super) own_generation: u32,
    pub(super) commands: VecDeque<RecoveryCommand>,
    pub(super) early: Vec<(NodeId, RecoveryMsg)>,
    /// The decisions this node recorded since it last resumed (reported
    /// again in every epoch until it does).
    pub(super) unresumed: Unresumed,
    pub(super) stats: RecoveryStats,
}

impl Recovery {
    /// Node `node`'s machine, serving epoch 0 with every node of `placement` live.
    pub fn new(node: NodeId, placement: Placement, config: RecoveryConfig) -> Recovery {
        let view = PlacementView::healthy(placement);
        Recovery {
            node,
            config,
            epoch: 0,
            view,
            served: view,
            phase: RecoveryPhase::Serving,
            deadline: 0,
            local: LocalEvidence::default(),
            evidence: EvidenceSet::new(),
            evidence_parts: [Parts::default(); NODES_MAX],
            reported: vec![BTreeSet::new(); NODES_MAX],
            decision_parts: Parts::default(),
            decisions: Vec::new(),
            applied: NodeMask::EMPTY,
            generations: [0; NODES_MAX],
            own_generation: 0,
            commands: VecDeque::new(),
            early: Vec::new(),
            unresumed: Unresumed::default(),
            stats: RecoveryStats::default(),
        }
    }

    /// The current epoch.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }
    /// The current epoch's placement.
    pub fn view(&self) -> &PlacementView {
        &self.view
    }
    /// Where this node is in the current epoch.
    pub fn phase(&self) -> RecoveryPhase {
        self.phase
    }
    /// Counters.
    pub fn stats(&self) -> RecoveryStats {
        self.stats
    }
    /// This node's NIC runtime restarted alone and its rebuild decided
    /// `tx_id`, a transaction its coordinator lost (`commit` or not;
    /// `write_shards` as its records carry them): reported as the
    /// coordinator's outcome in every epoch's evidence until this node
    /// resumes (`unresumed.rs`, third fact). Returns false if the bound
    /// (`unresumed::LOST_DECISIONS_MAX`) left
    /// it out.
    pub fn note_rebuild_decision(
        &mut self,
        tx_id: TxId,
        write_shards: NodeMask,
        commit: bool,
    ) -> bool {
        self.unresumed.record_lost(tx_id, write_shards, commit)
    }
    /// The next command to take, oldest first.
    pub fn poll_command(&mut self) -> Option<RecoveryCommand> {
        self.commands.pop_front()
    }
    /// Commands waiting.
    pub fn commands_pending(&self) -> usize {
        self.commands.len()
    }

    /// A new epoch from the membership: nodes in `failed` crashed. Stops
    /// service and sends `local` to the recovery leader (or, at the leader,
    /// starts collecting). The node must take every queued command first and
    /// gather `local` after them, so that decisions it applied show as
    /// COMMIT and ABORT records. The decisions this node recorded for a
    /// recovery it has not resumed from are added to `local` (`unresumed.rs`).
    ///
    /// # Errors
    /// [`RecoveryError`] for commands still queued, an epoch not newer than
    /// the current one, a failed set that does not fit the cluster or names
    /// this node, or more than [`LOCAL_EVIDENCE_ENTRIES_MAX`] entries;
    /// nothing changes then.
    pub fn begin_epoch(
        &mut self,
        now: Nanos,
        epoch: u32,
        failed: splitkv_layout::wire::NodeMask,
        local: LocalEvidence,
    ) -> Result<(), RecoveryError> {
        let roles = self.view.roles();
        self.begin_epoch_with(now, epoch, failed, roles, local)
    }

    /// [`Recovery::begin_epoch`] with the replicas of the new epoch ordered
    /// by `roles` (re-replication: a configuration that adds a node being copied,
    /// or ends a copy). The view's promotions follow that order; a node
    /// being copied is never promoted.
    ///
    /// # Errors
    /// As [`Recovery::begin_epoch`]; also a copying set that names a failed node.
    pub fn begin_epoch_with(
        &mut self,
        now: Nanos,
        epoch: u32,
        failed: splitkv_layout::wire::NodeMask,
        roles: crate::placement::Roles,
        local: LocalEvidence,
    ) -> Result<(), RecoveryError> {
        if !self.commands.is_empty() {
            return Err(RecoveryError::CommandsPending(self.commands.len()));
        }
        if epoch <= self.epoch {
            return Err(RecoveryError::EpochNotNewer {
                current: self.epoch,
                given: epoch,
            });
        }
        let view = PlacementView::with_roles(self.view.placement(), failed, roles)?;
        if !view.is_live(self.node) {
            return Err(RecoveryError::SelfFailed(self.node));
        }
        let mut local = local;
        self.unresumed.add_to(&mut local);
        if local.len() > LOCAL_EVIDENCE_ENTRIES_MAX {
            return Err(RecoveryError::TooMuchEvidence {
                entries: local.len(),
                max: LOCAL_EVIDENCE_ENTRIES_MAX,
            });
        }
        self.stats.epochs_begun += 1;
        self.epoch = epoch;
        self.view = view;
        self.local = local;
        self.evidence = EvidenceSet::new();
        self.evidence_parts = [Parts::default(); NODES_MAX];
        self.reported.iter_mut().for_each(BTreeSet::clear);
        self.decision_parts = Parts::default();
        self.decisions.clear();
        self.applied = NodeMask::EMPTY;
        self.generations = [0; NODES_MAX];
        self.own_generation = 0;
        if view.leader() == self.node {
            self.phase = RecoveryPhase::Collecting;
            self.deadline = now.saturating_add(self.config.evidence_timeout_ns);
            let local = std::mem::take(&mut self.local);
            self.add_evidence(self.node, &local.coordinated, &local.records);
            self.add_generations(&local.generations);
            self.local = local;
            self.evidence_parts[self.node as usize].add(0, 1);
            self.try_finish_collecting(now);
        } else {
            self.phase = RecoveryPhase::AwaitingDecisions;
            self.deadline = now.saturating_add(self.config.decision_timeout_ns);
            self.send_evidence();
        }
        let early = std::mem::take(&mut self.early);
        for (from, msg) in early {
            if msg.epoch() == epoch {
                self.on_message(now, from, msg);
            } else if msg.epoch() > epoch {
                self.early.push((from, msg));
            } else {
                self.stats.old_epoch_dropped += 1;
            }
        }
        Ok(())
    }

    /// A recovery message from node `from` (the packet's source).
    pub fn on_message(&mut self, now: Nanos, from: NodeId, msg: RecoveryMsg) {
        if msg.epoch() < self.epoch {
            self.stats.old_epoch_dropped += 1;
            return;
        }
        if msg.epoch() > self.epoch {
            if self.early.len() < EARLY_MESSAGES_MAX {
                self.early.push((from, msg));
            } else {
                self.stats.early_dropped += 1;
            }
            return;
        }
        if !self.view.is_live(from) {
            self.stats.unexpected_dropped += 1;
            return;
        }
        match msg {
            RecoveryMsg::Evidence {
                part,
                parts,
                coordinated,
                records,
                generations,
                ..
            } => {
                let e = (&coordinated[..], &records[..], &generations[..]);
                self.on_evidence(now, from, part, parts, e)
            }
            RecoveryMsg::Decisions {
                part,
                parts,
                decisions,
                generation,
                ..
            } => self.on_decisions(now, from, part, parts, &decisions, generation),
            RecoveryMsg::Applied { .. } => self.on_applied(from),
            RecoveryMsg::Resume { .. } => self.on_resume(from),
        }
    }

    /// Raises suspicions when a step timed out; returns whether it did any work.
    pub fn run_iteration(&mut self, now: Nanos) -> bool {
        if self.phase == RecoveryPhase::Serving || now < self.deadline {
            return false;
        }
        match self.phase {
            RecoveryPhase::Collecting | RecoveryPhase::AwaitingApplied => {
                let silent: Vec<NodeId> = self
                    .view
                    .live()
                    .iter()
                    .filter(|&n| !self.heard_from(n))
                    .collect();
                silent.into_iter().for_each(|n| self.suspect(n));
                self.deadline = now.saturating_add(self.config.evidence_timeout_ns);
            }
            RecoveryPhase::AwaitingDecisions | RecoveryPhase::AwaitingResume => {
                self.suspect(self.view.leader());
                self.deadline = now.saturating_add(self.config.decision_timeout_ns);
            }
            RecoveryPhase::Serving => {}
        }
        true
    }

    /// Leader: whether `n` did what the current step waits for.
    fn heard_from(&self, n: NodeId) -> bool {
        match self.phase {
            RecoveryPhase::Collecting => self.evidence_parts[n as usize].complete(),
            _ => self.applied.contains(n),
        }
    }

    fn suspect(&mut self, node: NodeId) {
        self.stats.suspicions += 1;
        self.push(RecoveryCommand::SuspectNode { node });
    }

    pub(super) fn push(&mut self, c: RecoveryCommand) {
        debug_assert!(self.commands.len() < COMMANDS_MAX, "command bound");
        self.commands.push_back(c);
    }
}
