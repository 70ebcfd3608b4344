//! A unit-test cluster of recovery state machines: each node's host-log
//! records and coordinator table as plain maps, a message queue between the
//! machines (every message encoded and decoded on the way), and a membership
//! that fails a suspected node and starts the next epoch.

use std::collections::{BTreeMap, VecDeque};

use splitkv_layout::wire::{
    CoordEvidence, CoordOutcome, CoordPhase, NodeId, NodeMask, RecordEvidence, RecordKind,
    RecoveryMsg,
};
use splitkv_layout::TxId;
use splitkv_nic::recovery::{
    LocalEvidence, Recovery, RecoveryCommand, RecoveryConfig, RecoveryPhase,
};
use splitkv_nic::{Placement, PlacementView};

/// Virtual time one harness step takes (1 ms).
pub const STEP_NS: u64 = 1_000_000;
/// Most steps any test runs before it fails as stuck.
pub const STEPS_MAX: usize = 2_000;

/// A transaction as its coordinator knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coord {
    /// Commit-protocol phase.
    pub phase: CoordPhase,
    /// Its decision, if any.
    pub outcome: Option<bool>,
    /// Whether the decision was reported to the client.
    pub reported: bool,
}

/// One simulated node.
#[derive(Debug)]
pub struct Node {
    /// Its recovery state machine.
    pub rec: Recovery,
    /// Still running.
    pub alive: bool,
    /// Drops everything it sends (a silent node).
    pub mute: bool,
    /// `(tx, shard)` → latest record kind in its host log.
    pub records: BTreeMap<(TxId, NodeId), RecordKind>,
    /// Transactions it coordinates.
    pub coordinated: BTreeMap<TxId, Coord>,
    /// Shards it was promoted to.
    pub promoted: Vec<NodeId>,
    /// Epochs it resumed in.
    pub resumed: Vec<u32>,
}

/// The cluster.
pub struct Cluster {
    /// The static placement.
    pub placement: Placement,
    /// Nodes by id.
    pub nodes: Vec<Node>,
    /// The written shards of every transaction.
    pub writes: BTreeMap<TxId, NodeMask>,
    /// Messages in flight: (from, to, encoded message).
    pub net: VecDeque<(NodeId, NodeId, Vec<u8>)>,
    /// Virtual time.
    pub now: u64,
    /// The membership's epoch.
    pub epoch: u32,
    /// The membership's failed set.
    pub failed: NodeMask,
    /// Outcomes clients were told before the crashes.
    pub reported: BTreeMap<TxId, bool>,
    suspects: Vec<NodeId>,
}

impl Cluster {
    /// `nodes` nodes with replication `replication`, all serving epoch 0.
    pub fn new(nodes: usize, replication: usize) -> Cluster {
        let placement = Placement::new(nodes, replication).unwrap();
        let nodes = (0..nodes as NodeId)
            .map(|n| Node {
                rec: Recovery::new(n, placement, RecoveryConfig::default()),
                alive: true,
                mute: false,
                records: BTreeMap::new(),
                coordinated: BTreeMap::new(),
                promoted: Vec::new(),
                resumed: Vec::new(),
            })
            .collect();
        Cluster {
            placement,
            nodes,
            writes: BTreeMap::new(),
            net: VecDeque::new(),
            now: 0,
            epoch: 0,
            failed: NodeMask::EMPTY,
            reported: BTreeMap::new(),
            suspects: Vec::new(),
        }
    }

    /// The transaction id of generation `generation` of coordinator `c`'s
    /// slot 0.
    pub fn tx(c: NodeId, generation: u32) -> TxId {
        TxId::new(c, 0, generation)
    }

    /// Registers a transaction writing `shards` at its coordinator.
    pub fn coordinate(&mut self, tx: TxId, shards: NodeMask, coord: Coord) {
        self.writes.insert(tx, shards);
        if let (true, Some(o)) = (coord.reported, coord.outcome) {
            self.reported.insert(tx, o);
        }
        self.nodes[tx.coordinator() as usize]
            .coordinated
            .insert(tx, coord);
    }

    /// Puts a record of `kind` for `(tx, shard)` in `node`'s host log.
    pub fn record(&mut self, node: NodeId, tx: TxId, shard: NodeId, kind: RecordKind) {
        self.nodes[node as usize].records.insert((tx, shard), kind);
    }

    /// What `node` reports at an epoch change, the least the machine relies
    /// on: every pending LOG record, and the COMMIT and ABORT records of
    /// failed coordinators' transactions (`Server::recovery_evidence`
    /// reports every decision record it holds, a superset; the TLA+ model's
    /// servers report these).
    pub fn local_evidence(&self, node: NodeId) -> LocalEvidence {
        let n = &self.nodes[node as usize];
        LocalEvidence {
            coordinated: n
                .coordinated
                .iter()
                .map(|(&tx_id, c)| CoordEvidence {
                    tx_id,
                    phase: c.phase,
                    outcome: match c.outcome {
                        None => CoordOutcome::Undecided,
                        Some(true) => CoordOutcome::Commit,
                        Some(false) => CoordOutcome::Abort,
                    },
                    reported: c.reported,
                    write_shards: self.writes[&tx_id],
                })
                .collect(),
            records: n
                .records
                .iter()
                .filter(|(&(tx_id, _), &kind)| {
                    kind == RecordKind::Log || self.failed.contains(tx_id.coordinator())
                })
                .map(|(&(tx_id, shard), &kind)| RecordEvidence {
                    tx_id,
                    shard,
                    kind,
                    write_shards: self.writes[&tx_id],
                })
                .collect(),
            // The fences: the newest generation of each coordinator's ids
            // among the records held here.
            generations: (0..self.nodes.len() as NodeId)
                .map(|c| {
                    let ids = n.records.keys().map(|&(tx_id, _)| tx_id);
                    ids.filter(|t| t.coordinator() == c)
                        .map(|t| t.generation())
                        .max()
                        .unwrap_or(0)
                })
                .collect(),
        }
    }

    /// Crashes `nodes` once they have taken their queued commands (the most
    /// a node can have done before it dies); the membership starts the next
    /// epoch on the survivors.
    pub fn crash(&mut self, nodes: &[NodeId]) {
        for &n in nodes {
            if self.nodes[n as usize].alive {
                self.take_commands(n, usize::MAX);
            }
            self.nodes[n as usize].alive = false;
            self.failed = self.failed.with(n);
        }
        self.epoch += 1;
        for n in 0..self.nodes.len() as NodeId {
            if self.nodes[n as usize].alive {
                self.take_commands(n, usize::MAX);
                let local = self.local_evidence(n);
                let (now, epoch, failed) = (self.now, self.epoch, self.failed);
                self.nodes[n as usize]
                    .rec
                    .begin_epoch(now, epoch, failed, local)
                    .unwrap();
            }
        }
    }

    /// Takes every queued command of `node`; returns how many.
    pub fn take_commands(&mut self, node: NodeId, max: usize) -> usize {
        let mut taken = 0;
        while taken < max {
            let Some(c) = self.nodes[node as usize].rec.poll_command() else {
                break;
            };
            taken += 1;
            self.execute(node, c);
        }
        taken
    }

    fn execute(&mut self, node: NodeId, c: RecoveryCommand) {
        let n = &mut self.nodes[node as usize];
        match c {
            RecoveryCommand::Send { to, msg } => {
                let mut bytes = Vec::new();
                msg.encode(&mut bytes).unwrap();
                if !n.mute {
                    self.net.push_back((node, to, bytes));
                }
            }
            RecoveryCommand::CommitPending { tx_id } | RecoveryCommand::DropPending { tx_id } => {
                let commit = matches!(c, RecoveryCommand::CommitPending { .. });
                let kind = if commit {
                    RecordKind::Commit
                } else {
                    RecordKind::Abort
                };
                for ((tx, _), k) in n.records.iter_mut().filter(|((tx, _), _)| *tx == tx_id) {
                    assert!(
                        *k == RecordKind::Log || *k == kind,
                        "{tx:#x} decided twice differently"
                    );
                    *k = kind;
                }
            }
            RecoveryCommand::FinishCoordinated { tx_id, commit } => {
                let t = n.coordinated.get_mut(&tx_id).expect("coordinated here");
                if let Some(o) = t.outcome {
                    assert_eq!(
                        o, commit,
                        "{tx_id:#x}: the coordinator's decision overturned"
                    );
                }
                t.outcome = Some(commit);
                t.reported = true;
                self.reported.insert(tx_id, commit);
            }
            RecoveryCommand::Promote { shard } => n.promoted.push(shard),
            // A silent node's suspicions do not reach the membership either.
            RecoveryCommand::SuspectNode { node } if !n.mute => self.suspects.push(node),
            RecoveryCommand::SuspectNode { .. } => {}
            RecoveryCommand::Resume { epoch, .. } => n.resumed.push(epoch),
        }
    }

    /// One step: every live node's commands taken, every message delivered
    /// (in queue order, or rotated by `rotate` for a different order),
    /// time advanced, timeouts run, suspected nodes failed.
    pub fn step(&mut self, rotate: usize) {
        for n in 0..self.nodes.len() as NodeId {
            if self.nodes[n as usize].alive {
                self.take_commands(n, usize::MAX);
            }
        }
        let len = self.net.len();
        if len > 0 {
            self.net.rotate_left(rotate % len);
        }
        while let Some((from, to, bytes)) = self.net.pop_front() {
            let msg = RecoveryMsg::decode(&bytes).unwrap();
            let now = self.now;
            if self.nodes[to as usize].alive {
                self.nodes[to as usize].rec.on_message(now, from, msg);
            }
        }
        self.now += STEP_NS;
        for n in self.nodes.iter_mut().filter(|n| n.alive) {
            n.rec.run_iteration(self.now);
        }
        let suspects: Vec<NodeId> = std::mem::take(&mut self.suspects)
            .into_iter()
            .filter(|&s| !self.failed.contains(s))
            .collect();
        if !suspects.is_empty() {
            let mut s = suspects;
            s.sort();
            s.dedup();
            self.crash(&s);
        }
    }

    /// Whether every live node serves the membership's epoch with nothing queued.
    pub fn settled(&self) -> bool {
        self.net.is_empty()
            && self.nodes.iter().filter(|n| n.alive).all(|n| {
                n.rec.phase() == RecoveryPhase::Serving
                    && n.rec.epoch() == self.epoch
                    && n.rec.commands_pending() == 0
            })
    }

    /// Steps until settled; returns the steps taken.
    ///
    /// # Panics
    /// After [`STEPS_MAX`] steps.
    pub fn run(&mut self, rotate: usize) -> usize {
        for i in 0..STEPS_MAX {
            if self.settled() {
                return i;
            }
            self.step(rotate.wrapping_add(i));
        }
        panic!("recovery did not settle in {STEPS_MAX} steps");
    }

    /// The current view.
    pub fn view(&self) -> PlacementView {
        PlacementView::new(self.placement, self.failed).unwrap()
    }

    /// Checks the state after recovery: nothing pending at a survivor;
    /// replicas agree (a commit is applied at every surviving replica of
    /// every written shard, an abort at none); every reported decision and
    /// every surviving coordinator's decision stands; each shard whose
    /// primary failed was promoted at its new primary. Returns every decided
    /// transaction's outcome.
    pub fn check(&self) -> BTreeMap<TxId, bool> {
        let v = self.view();
        let live = || self.nodes.iter().enumerate().filter(|(_, n)| n.alive);
        let mut outcome: BTreeMap<TxId, bool> = BTreeMap::new();
        for (id, n) in live() {
            for (&(tx, s), &k) in &n.records {
                assert_ne!(
                    k,
                    RecordKind::Log,
                    "node {id}: {tx:#x} shard {s} still pending"
                );
                let c = k == RecordKind::Commit;
                assert_eq!(
                    *outcome.entry(tx).or_insert(c),
                    c,
                    "replicas disagree on {tx:#x}"
                );
            }
            for (&tx, c) in &n.coordinated {
                if let Some(o) = c.outcome {
                    assert_eq!(*outcome.entry(tx).or_insert(o), o, "coordinator of {tx:#x}");
                }
            }
        }
        for (&tx, &commit) in &outcome {
            if commit {
                for s in self.writes[&tx].iter() {
                    for r in v.live_replicas(s) {
                        let k = self.nodes[r as usize].records.get(&(tx, s));
                        assert_eq!(
                            k,
                            Some(&RecordKind::Commit),
                            "{tx:#x} missing at {r}, shard {s}"
                        );
                    }
                }
            }
        }
        for (&tx, &r) in &self.reported {
            let known = outcome.get(&tx).copied();
            assert!(
                known == Some(r) || (known.is_none() && !r),
                "{tx:#x} reported {r}, now {known:?}"
            );
        }
        for s in 0..self.nodes.len() as NodeId {
            if let Some(p) = v.shard_primary(s) {
                let promoted = self.nodes[p as usize].promoted.contains(&s);
                assert_eq!(promoted, p != s, "shard {s}, primary {p}");
            }
        }
        outcome
    }
}
