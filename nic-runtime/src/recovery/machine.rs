//! One node's recovery state machine (see the module docs of
//! `crate::recovery` for the protocol): polled, time passed in, output as a
//! queue of [`RecoveryCommand`]s.

use std::collections::{BTreeSet, VecDeque};

use splitkv_layout::wire::{
    CoordEvidence, Decision, NodeId, RecordEvidence, RecordKind, RecoveryMsg,
    DECISIONS_PER_MESSAGE_MAX, EVIDENCE_ENTRIES_PER_MESSAGE_MAX,
};

use super::decide::EvidenceSet;
use super::types::{
    LocalEvidence, RecoveryCommand, RecoveryConfig, RecoveryError, RecoveryStats, COMMANDS_MAX,
    EARLY_MESSAGES_MAX, LOCAL_EVIDENCE_ENTRIES_MAX, RECOVERY_TXS_MAX,
};
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
}

/// Which parts of a multi-part series arrived (at most 64 parts).
#[derive(Debug, Clone, Copy, Default)]
struct Parts {
    /// The series' part count; 0 until the first part arrives.
    parts: u16,
    seen: u64,
}

impl Parts {
    /// Records `part` of `parts`; `false` for a duplicate or a part count
    /// that disagrees with earlier parts.
    fn add(&mut self, part: u16, parts: u16) -> bool {
        if (self.parts != 0 && self.parts != parts) || self.seen & (1 << part) != 0 {
            return false;
        }
        self.parts = parts;
        self.seen |= 1 << part;
        true
    }

    fn complete(&self) -> bool {
        self.parts != 0 && self.seen.count_ones() == self.parts as u32
    }
}

/// One node's recovery state machine (issue 11; Xenic §4.2.1, Dandelion §4.4).
#[derive(Debug)]
pub struct Recovery {
    node: NodeId,
    config: RecoveryConfig,
    epoch: u32,
    view: PlacementView,
    /// The view of the last epoch this node resumed in (promotions are
    /// relative to it, so a crash during recovery loses none).
    served: PlacementView,
    phase: RecoveryPhase,
    deadline: Nanos,
    local: LocalEvidence,
    evidence: EvidenceSet,
    /// Leader: per node, the parts of its evidence that arrived.
    evidence_parts: [Parts; NODES_MAX],
    /// Leader: per node, the transactions it reported (it gets their decisions).
    reported: Vec<BTreeSet<u64>>,
    decision_parts: Parts,
    decisions: Vec<Decision>,
    commands: VecDeque<RecoveryCommand>,
    early: Vec<(NodeId, RecoveryMsg)>,
    stats: RecoveryStats,
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
            commands: VecDeque::new(),
            early: Vec::new(),
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
    /// COMMIT and ABORT records.
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
        if !self.commands.is_empty() {
            return Err(RecoveryError::CommandsPending(self.commands.len()));
        }
        if epoch <= self.epoch {
            return Err(RecoveryError::EpochNotNewer {
                current: self.epoch,
                given: epoch,
            });
        }
        let view = PlacementView::new(self.view.placement(), failed)?;
        if !view.is_live(self.node) {
            return Err(RecoveryError::SelfFailed(self.node));
        }
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
        if view.leader() == self.node {
            self.phase = RecoveryPhase::Collecting;
            self.deadline = now.saturating_add(self.config.evidence_timeout_ns);
            let local = std::mem::take(&mut self.local);
            self.add_evidence(self.node, &local.coordinated, &local.records);
            self.local = local;
            self.evidence_parts[self.node as usize].add(0, 1);
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
        self.try_finish_collecting();
        Ok(())
    }

    /// A recovery message from node `from` (the packet's source).
    pub fn on_message(&mut self, _now: Nanos, from: NodeId, msg: RecoveryMsg) {
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
                ..
            } => self.on_evidence(from, part, parts, &coordinated, &records),
            RecoveryMsg::Decisions {
                part,
                parts,
                decisions,
                ..
            } => self.on_decisions(from, part, parts, &decisions),
        }
    }

    /// Raises suspicions when a step timed out; returns whether it did any work.
    pub fn run_iteration(&mut self, now: Nanos) -> bool {
        if self.phase == RecoveryPhase::Serving || now < self.deadline {
            return false;
        }
        match self.phase {
            RecoveryPhase::Collecting => {
                let silent: Vec<NodeId> = self
                    .view
                    .live()
                    .iter()
                    .filter(|&n| !self.evidence_parts[n as usize].complete())
                    .collect();
                silent.into_iter().for_each(|n| self.suspect(n));
                self.deadline = now.saturating_add(self.config.evidence_timeout_ns);
            }
            RecoveryPhase::AwaitingDecisions => {
                self.suspect(self.view.leader());
                self.deadline = now.saturating_add(self.config.decision_timeout_ns);
            }
            RecoveryPhase::Serving => {}
        }
        true
    }

    fn suspect(&mut self, node: NodeId) {
        self.stats.suspicions += 1;
        self.push(RecoveryCommand::SuspectNode { node });
    }

    fn push(&mut self, c: RecoveryCommand) {
        debug_assert!(self.commands.len() < COMMANDS_MAX, "command bound");
        self.commands.push_back(c);
    }

    fn send_evidence(&mut self) {
        let leader = self.view.leader();
        let entries = self.local.len();
        let parts = entries.div_ceil(EVIDENCE_ENTRIES_PER_MESSAGE_MAX).max(1);
        let (mut c, mut r) = (&self.local.coordinated[..], &self.local.records[..]);
        let mut msgs = Vec::with_capacity(parts);
        for part in 0..parts {
            let nc = c.len().min(EVIDENCE_ENTRIES_PER_MESSAGE_MAX);
            let nr = r.len().min(EVIDENCE_ENTRIES_PER_MESSAGE_MAX - nc);
            msgs.push(RecoveryMsg::Evidence {
                epoch: self.epoch,
                part: part as u16,
                parts: parts as u16,
                coordinated: c[..nc].to_vec(),
                records: r[..nr].to_vec(),
            });
            (c, r) = (&c[nc..], &r[nr..]);
        }
        for msg in msgs {
            self.push(RecoveryCommand::Send { to: leader, msg });
        }
    }

    fn add_evidence(&mut self, from: NodeId, c: &[CoordEvidence], r: &[RecordEvidence]) {
        if !self.evidence.add(from, c, r, RECOVERY_TXS_MAX) {
            self.stats.txs_over_limit += 1;
        }
        let ids = c.iter().map(|e| e.tx_id).chain(r.iter().map(|e| e.tx_id));
        self.reported[from as usize].extend(ids);
    }

    fn on_evidence(
        &mut self,
        from: NodeId,
        part: u16,
        parts: u16,
        c: &[CoordEvidence],
        r: &[RecordEvidence],
    ) {
        if self.phase != RecoveryPhase::Collecting
            || !self.evidence_parts[from as usize].add(part, parts)
        {
            self.stats.unexpected_dropped += 1;
            return;
        }
        self.add_evidence(from, c, r);
        self.try_finish_collecting();
    }

    /// Leader: once every live node's evidence is in, decides every
    /// transaction, sends each node the decisions of the transactions it
    /// reported, and applies its own.
    fn try_finish_collecting(&mut self) {
        if self.phase != RecoveryPhase::Collecting
            || !self
                .view
                .live()
                .iter()
                .all(|n| self.evidence_parts[n as usize].complete())
        {
            return;
        }
        let me = self.node;
        for n in self.view.live().iter().filter(|&n| n != me) {
            let decisions = self.decisions_for(n);
            let parts = decisions.len().div_ceil(DECISIONS_PER_MESSAGE_MAX).max(1);
            for part in 0..parts {
                let lo = part * DECISIONS_PER_MESSAGE_MAX;
                let hi = decisions.len().min(lo + DECISIONS_PER_MESSAGE_MAX);
                let msg = RecoveryMsg::Decisions {
                    epoch: self.epoch,
                    part: part as u16,
                    parts: parts as u16,
                    decisions: decisions[lo..hi].to_vec(),
                };
                self.push(RecoveryCommand::Send { to: n, msg });
            }
        }
        let own = self.decisions_for(self.node);
        self.apply(&own);
    }

    fn decisions_for(&self, n: NodeId) -> Vec<Decision> {
        self.reported[n as usize]
            .iter()
            .filter_map(|&tx_id| {
                let e = self.evidence.get(tx_id)?;
                Some(Decision {
                    tx_id,
                    commit: e.decide(&self.view).0,
                })
            })
            .collect()
    }

    fn on_decisions(&mut self, from: NodeId, part: u16, parts: u16, d: &[Decision]) {
        if self.phase != RecoveryPhase::AwaitingDecisions
            || from != self.view.leader()
            || !self.decision_parts.add(part, parts)
        {
            self.stats.unexpected_dropped += 1;
            return;
        }
        self.decisions.extend_from_slice(d);
        if self.decision_parts.complete() {
            let decisions = std::mem::take(&mut self.decisions);
            self.apply(&decisions);
        }
    }

    /// Applies this node's decisions: pending records committed or dropped,
    /// coordinated transactions finished, shards promoted, service resumed.
    fn apply(&mut self, decisions: &[Decision]) {
        let pending: BTreeSet<u64> = self
            .local
            .records
            .iter()
            .filter(|r| r.kind == RecordKind::Log)
            .map(|r| r.tx_id)
            .collect();
        let coordinated: BTreeSet<u64> = self.local.coordinated.iter().map(|c| c.tx_id).collect();
        for d in decisions {
            if pending.contains(&d.tx_id) {
                self.push(if d.commit {
                    RecoveryCommand::CommitPending { tx_id: d.tx_id }
                } else {
                    RecoveryCommand::DropPending { tx_id: d.tx_id }
                });
            }
            if coordinated.contains(&d.tx_id) {
                self.push(RecoveryCommand::FinishCoordinated {
                    tx_id: d.tx_id,
                    commit: d.commit,
                });
            }
        }
        for shard in self.view.promoted(&self.served, self.node).iter() {
            self.push(RecoveryCommand::Promote { shard });
        }
        self.push(RecoveryCommand::Resume { epoch: self.epoch });
        self.served = self.view;
        self.phase = RecoveryPhase::Serving;
        self.stats.epochs_resumed += 1;
    }
}
