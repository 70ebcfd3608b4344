//! The steps of one epoch's recovery at one node (see the module docs of
//! `crate::recovery`): evidence out and in, decisions out and in, the
//! `Applied` round that makes decisions stable before anyone acts on them,
//! and the resume.

use splitkv_layout::TxId;
use std::collections::{BTreeMap, BTreeSet};

use splitkv_layout::wire::{
    CoordEvidence, Decision, NodeId, RecordEvidence, RecordKind, RecoveryMsg,
    DECISIONS_PER_MESSAGE_MAX, EVIDENCE_ENTRIES_PER_MESSAGE_MAX,
};

use super::machine::{Recovery, RecoveryPhase};
use super::types::{RecoveryCommand, RECOVERY_TXS_MAX};
use crate::protocol::newer_generation;
use crate::Nanos;

/// Mutation switch `drop_recovered_commits`: a recovery's commit decisions
/// drop the pending LOG records instead of committing them, so a
/// transaction reported committed loses its writes at every replica that
/// held it undecided. Killed by the history check of the simulator's
/// list-append seeds under crashes (`scripts/mutation`: a lost append is a
/// real-time cycle). Declared in `Cargo.toml` check-cfg.
const DROP_RECOVERED_COMMITS: bool = cfg!(splitkv_mutation = "drop_recovered_commits");

impl Recovery {
    /// Non-leader: sends the local evidence to the leader in parts.
    pub(super) fn send_evidence(&mut self) {
        let leader = self.view.leader();
        let parts = self
            .local
            .len()
            .div_ceil(EVIDENCE_ENTRIES_PER_MESSAGE_MAX)
            .max(1);
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
                generations: self.local.generations.clone(),
            });
            (c, r) = (&c[nc..], &r[nr..]);
        }
        for msg in msgs {
            self.push(RecoveryCommand::Send { to: leader, msg });
        }
    }

    /// Leader: adds node `from`'s evidence.
    pub(super) fn add_evidence(&mut self, from: NodeId, c: &[CoordEvidence], r: &[RecordEvidence]) {
        if !self.evidence.add(from, c, r, RECOVERY_TXS_MAX) {
            self.stats.txs_over_limit += 1;
        }
        let ids = c.iter().map(|e| e.tx_id).chain(r.iter().map(|e| e.tx_id));
        self.reported[from as usize].extend(ids);
    }

    /// Leader: merges a node's newest generations per coordinator.
    pub(super) fn add_generations(&mut self, g: &[u32]) {
        for (mine, &theirs) in self.generations.iter_mut().zip(g) {
            *mine = newer_generation(*mine, theirs);
        }
    }

    /// Leader: part `part` of `parts` of node `from`'s evidence: its
    /// coordinator's and its records' entries, and its generations.
    pub(super) fn on_evidence(
        &mut self,
        now: Nanos,
        from: NodeId,
        part: u16,
        parts: u16,
        (c, r, g): (&[CoordEvidence], &[RecordEvidence], &[u32]),
    ) {
        if self.phase != RecoveryPhase::Collecting
            || !self.evidence_parts[from as usize].add(part, parts)
        {
            self.stats.unexpected_dropped += 1;
            return;
        }
        self.add_evidence(from, c, r);
        self.add_generations(g);
        self.try_finish_collecting(now);
    }

    /// Leader: once every live node's evidence is in, decides every
    /// transaction, sends each node the decisions of the transactions it
    /// reported, and records its own.
    pub(super) fn try_finish_collecting(&mut self, now: Nanos) {
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
            self.send_decisions(n);
        }
        self.decisions = self.decisions_for(me);
        self.own_generation = self.generations[me as usize];
        self.record_decisions();
        self.applied = self.applied.with(me);
        self.phase = RecoveryPhase::AwaitingApplied;
        self.deadline = now.saturating_add(self.config.evidence_timeout_ns);
        self.try_resume();
    }

    /// Leader: sends node `n` the decisions of the transactions it
    /// reported, in parts.
    pub(super) fn send_decisions(&mut self, n: NodeId) {
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
                generation: self.generations[n as usize],
            };
            self.push(RecoveryCommand::Send { to: n, msg });
        }
    }

    fn decisions_for(&self, n: NodeId) -> Vec<Decision> {
        self.reported[n as usize]
            .iter()
            .filter_map(|&tx_id| {
                let e = self.evidence.get(tx_id)?;
                Some(Decision {
                    tx_id,
                    commit: e.decide_tx_caught_up(tx_id, &self.view, self.config.rule).0,
                })
            })
            .collect()
    }

    pub(super) fn on_decisions(
        &mut self,
        now: Nanos,
        from: NodeId,
        part: u16,
        parts: u16,
        d: &[Decision],
        generation: u32,
    ) {
        if self.phase != RecoveryPhase::AwaitingDecisions
            || from != self.view.leader()
            || !self.decision_parts.add(part, parts)
        {
            self.stats.unexpected_dropped += 1;
            return;
        }
        self.decisions.extend_from_slice(d);
        self.own_generation = newer_generation(self.own_generation, generation);
        if self.decision_parts.complete() {
            self.record_decisions();
            let msg = RecoveryMsg::Applied { epoch: self.epoch };
            self.push(RecoveryCommand::Send { to: from, msg });
            self.phase = RecoveryPhase::AwaitingResume;
            self.deadline = now.saturating_add(self.config.decision_timeout_ns);
        }
    }

    /// Records this node's decisions in its host log: pending LOG records
    /// committed or dropped, each leaving a COMMIT or ABORT record; keeps
    /// them, and those of the transactions it coordinates, as evidence
    /// until it resumes (`unresumed.rs`).
    fn record_decisions(&mut self) {
        // This node's pending LOG records, by transaction.
        let mut pending: BTreeMap<TxId, Vec<RecordEvidence>> = BTreeMap::new();
        for r in self
            .local
            .records
            .iter()
            .filter(|r| r.kind == RecordKind::Log)
        {
            pending.entry(r.tx_id).or_default().push(*r);
        }
        let coordinated: BTreeSet<TxId> = self.local.coordinated.iter().map(|c| c.tx_id).collect();
        for i in 0..self.decisions.len() {
            let d = self.decisions[i];
            let logs = pending.get(&d.tx_id).map_or(&[][..], Vec::as_slice);
            self.unresumed
                .record(d, logs, coordinated.contains(&d.tx_id));
            if pending.contains_key(&d.tx_id) {
                self.push(if d.commit && !DROP_RECOVERED_COMMITS {
                    RecoveryCommand::CommitPending { tx_id: d.tx_id }
                } else {
                    RecoveryCommand::DropPending { tx_id: d.tx_id }
                });
            }
        }
    }

    pub(super) fn on_applied(&mut self, from: NodeId) {
        if self.phase != RecoveryPhase::AwaitingApplied || self.applied.contains(from) {
            self.stats.unexpected_dropped += 1;
            return;
        }
        self.applied = self.applied.with(from);
        self.try_resume();
    }

    /// Leader: once every live node recorded its decisions, tells them to
    /// resume and resumes.
    fn try_resume(&mut self) {
        if !self.view.live().is_subset(self.applied) {
            return;
        }
        let me = self.node;
        for n in self.view.live().iter().filter(|&n| n != me) {
            let msg = RecoveryMsg::Resume { epoch: self.epoch };
            self.push(RecoveryCommand::Send { to: n, msg });
        }
        self.resume();
    }

    pub(super) fn on_resume(&mut self, from: NodeId) {
        if self.phase != RecoveryPhase::AwaitingResume || from != self.view.leader() {
            self.stats.unexpected_dropped += 1;
            return;
        }
        self.resume();
    }

    /// Every live node recorded the decisions, so they hold in any later
    /// epoch: coordinated transactions are finished (reported), shards
    /// promoted, service resumed.
    fn resume(&mut self) {
        let coordinated: BTreeSet<TxId> = self.local.coordinated.iter().map(|c| c.tx_id).collect();
        for i in 0..self.decisions.len() {
            let d = self.decisions[i];
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
        self.push(RecoveryCommand::Resume {
            epoch: self.epoch,
            generation: self.own_generation,
        });
        self.unresumed.clear();
        self.served = self.view;
        self.phase = RecoveryPhase::Serving;
        self.stats.epochs_resumed += 1;
    }
}
