//! The configuration a membership issues: epoch, live nodes and
//! every shard's replicas, with its pure transitions, shared by the
//! simulated manager and the etcd one so both issue the same
//! configurations; and the rule by which a manager takes a suspect report
//! ([`Configuration::takes_suspicion`]).

use crate::placement::{Roles, NODES_MAX};
use splitkv_layout::wire::{NodeId, NodeMask};

/// A configuration: its epoch, the nodes in it, and (for
/// re-replication) every shard's replicas — which of them are still being
/// copied, and since when each caught-up one is a replica, which fixes the
/// order of the shard's replicas ([`Configuration::roles`]).
///
/// There is one shard per node id below [`Configuration::nodes`]. The
/// transitions ([`Configuration::without`], [`Configuration::rejoining`],
/// [`Configuration::caught_up`]) are pure, so the simulated manager and the
/// etcd one issue the same configurations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Configuration {
    /// Epoch: one higher for each new configuration (the first is 1).
    pub epoch: u32,
    /// The live nodes, a mask by [`NodeId`] (bit `n` for node `n`).
    pub live: u32,
    /// Live nodes that rejoined as a new incarnation (holding nothing) and
    /// have not reported caught up yet (re-replication). A subset of `live`.
    pub copying: u32,
    /// Per node id, the incarnation the membership admitted when it last
    /// rejoined (0: its first, never restarted). Peers reset their session
    /// with a newer incarnation, so their packets reach the new process.
    pub incarnation: [u32; NODES_MAX],
    /// Nodes in the cluster (shards, one per node id).
    pub nodes: u8,
    /// The replication degree every shard is brought back to.
    pub replication: u8,
    /// Per shard id, its replicas (entries from `nodes` on are unused).
    pub shards: [ShardReplicas; NODES_MAX],
}

/// One shard's replicas in a [`Configuration`] (re-replication).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ShardReplicas {
    /// Its live members (caught-up replicas and joining backups), a mask by
    /// node id.
    pub members: u32,
    /// Members still being copied (a subset of `members`): sent every LOG
    /// of the shard, not yet replicas, never primary.
    pub joining: u32,
    /// Per node id, the epoch from which it is a caught-up replica of this
    /// shard (0: from the start): replicas serve in that order, so a node
    /// that caught up later never takes a primary role back.
    pub since: [u32; NODES_MAX],
}

const _: () = assert!(NODES_MAX <= 32, "node sets are u32 masks");

impl Configuration {
    /// The first configuration of a cluster of `nodes` nodes with
    /// `replication` replicas per shard (clamped to `1..=nodes` and
    /// [`NODES_MAX`]): epoch 1, every node live, shard `s` replicated on
    /// `s, s+1, …` (mod nodes), the ring of [`crate::placement::Placement`].
    pub fn initial(nodes: usize, replication: usize) -> Configuration {
        let n = nodes.clamp(1, NODES_MAX);
        let r = replication.clamp(1, n);
        let mut c = Configuration {
            epoch: 1,
            live: (1u64 << n).wrapping_sub(1) as u32,
            nodes: n as u8,
            replication: r as u8,
            ..Default::default()
        };
        let ring = Roles::ring(n, r);
        for (s, sh) in c.shards[..n].iter_mut().enumerate() {
            sh.members = u32::from(ring.member_mask(s as NodeId).0);
        }
        c
    }

    /// Whether `node` is in this configuration.
    pub fn contains(&self, node: NodeId) -> bool {
        (node as usize) < NODES_MAX && self.live & (1 << node) != 0
    }

    /// The next configuration: epoch + 1, without the nodes of `gone` (a
    /// mask), and every shard that fell below the replication degree given
    /// new joining backups among the survivors that are not its members yet
    /// (in ring order from the shard's own position), as many as
    /// there are.
    pub fn without(&self, gone: u32) -> Configuration {
        let mut next = Configuration {
            epoch: self.epoch.wrapping_add(1),
            live: self.live & !gone,
            copying: self.copying & !gone,
            ..*self
        };
        for sh in next.shards.iter_mut() {
            sh.members &= !gone;
            sh.joining &= !gone;
            for n in (0..NODES_MAX).filter(|n| gone & (1 << n) != 0) {
                sh.since[n] = 0;
            }
        }
        next.fill_shards();
        next
    }

    /// Adds live non-members as joining backups to every shard below the
    /// replication degree, in ring order from the shard's position.
    fn fill_shards(&mut self) {
        let n = self.nodes as usize;
        for s in 0..n.min(NODES_MAX) {
            for i in 0..n {
                let sh = &mut self.shards[s];
                if sh.members.count_ones() >= self.replication as u32 {
                    break;
                }
                let bit = 1u32 << ((s + i) % n);
                if self.live & bit != 0 && sh.members & bit == 0 {
                    sh.members |= bit;
                    sh.joining |= bit;
                }
            }
        }
    }

    /// The next configuration with incarnation `incarnation` of node `node`
    /// (restarted, holding nothing) back in it (rejoin): epoch + 1,
    /// `node` live and copying, and a joining backup of every shard still
    /// below the replication degree (none, when survivors already took its
    /// place). `None` if `node` is outside the cluster or already live.
    pub fn rejoining(&self, node: NodeId, incarnation: u32) -> Option<Configuration> {
        if node as usize >= (self.nodes as usize).min(NODES_MAX) {
            return None;
        }
        let bit = 1u32 << node;
        (self.live & bit == 0).then(|| {
            let mut next = Configuration {
                epoch: self.epoch.wrapping_add(1),
                live: self.live | bit,
                copying: self.copying | bit,
                ..*self
            };
            next.incarnation[node as usize] = incarnation;
            next.fill_shards();
            next
        })
    }

    /// The shards with fewer caught-up replicas than the replication
    /// degree (0 once re-replication restored the degree).
    pub fn short_shards(&self) -> usize {
        let n = (self.nodes as usize).min(NODES_MAX);
        self.shards[..n]
            .iter()
            .filter(|s| (s.members & !s.joining).count_ones() < u32::from(self.replication))
            .count()
    }

    /// The nodes joining some shard as new backups (being copied), a mask
    /// by node id.
    pub fn joining_any(&self) -> u32 {
        self.shards.iter().fold(0, |m, s| m | s.joining)
    }

    /// Whether `node` is being copied: a restarted incarnation that has not
    /// caught up, or a joining backup of some shard.
    pub fn is_copying(&self, node: NodeId) -> bool {
        let bit = 1u32.checked_shl(node as u32).unwrap_or(0);
        bit != 0 && (self.copying & bit != 0 || self.shards.iter().any(|s| s.joining & bit != 0))
    }

    /// The next configuration with node `node`'s copy done (re-replication):
    /// epoch + 1, `node` no longer copying and a replica of every shard it
    /// was joining since the new epoch. `None` if `node` is not copying
    /// ([`Configuration::is_copying`]).
    pub fn caught_up(&self, node: NodeId) -> Option<Configuration> {
        if (node as usize) >= NODES_MAX || !self.is_copying(node) {
            return None;
        }
        let bit = 1u32 << node;
        let mut next = Configuration {
            epoch: self.epoch.wrapping_add(1),
            copying: self.copying & !bit,
            ..*self
        };
        for sh in next.shards.iter_mut().filter(|s| s.joining & bit != 0) {
            sh.joining &= !bit;
            sh.since[node as usize] = next.epoch;
        }
        Some(next)
    }

    /// The replica sets and order this configuration fixes (re-replication,
    /// [`Roles`]): per shard, its caught-up members by (`since`, ring
    /// position from the shard), then its joining backups in ring order;
    /// `copying` nodes as renewed.
    pub fn roles(&self) -> Roles {
        let n = (self.nodes as usize).min(NODES_MAX);
        let mut roles = Roles::empty();
        for s in 0..n {
            let sh = &self.shards[s];
            let ring = |i: usize| (s + i) % n;
            let mut caught: Vec<usize> = (0..n)
                .map(ring)
                .filter(|&m| (sh.members & !sh.joining) & (1 << m) != 0)
                .collect();
            caught.sort_by_key(|&m| sh.since[m]);
            for m in caught {
                roles.push(s as NodeId, m as NodeId);
            }
            for m in (0..n).map(ring).filter(|&m| sh.joining & (1 << m) != 0) {
                roles.push_joining(s as NodeId, m as NodeId);
            }
        }
        roles.set_renewed(NodeMask((self.copying & 0xFFFF) as u16));
        roles.finish(n, self.replication as usize)
    }

    /// Whether leaving out the nodes of `gone` (a mask) would leave some
    /// shard that has a caught-up replica now with none: its data held by
    /// no node of the next configuration (joining backups hold only part
    /// of it).
    pub fn strands_a_shard(&self, gone: u32) -> bool {
        let n = (self.nodes as usize).min(NODES_MAX);
        self.shards[..n].iter().any(|s| {
            let caught = s.members & !s.joining;
            caught != 0 && caught & !gone == 0
        })
    }

    /// Whether a manager that already suspects the nodes of `suspected` (a
    /// mask) takes `reporter`'s report that `suspect`'s session fell silent
    /// (DESIGN.md "Faults"). It does if `reporter` and `suspect`
    /// are distinct members of this configuration, `reporter` is not a
    /// suspect itself, and leaving out every suspect would not strand a
    /// shard ([`Configuration::strands_a_shard`]). A node cut off from its
    /// peers suspects every one of them, and taking a suspect's word, or
    /// configuring out the last replicas of a shard on suspicion, fenced
    /// live nodes one after another (rejoin Smallbank seed 34 of 5 nodes:
    /// four of five, and a shard with no replica left). A suspect not taken
    /// keeps renewing; if it really is gone its lease still runs out.
    pub fn takes_suspicion(&self, suspected: u32, reporter: NodeId, suspect: NodeId) -> bool {
        let bit = |n: NodeId| 1u32.checked_shl(u32::from(n)).unwrap_or(0);
        reporter != suspect
            && self.contains(reporter)
            && self.contains(suspect)
            && suspected & bit(reporter) == 0
            && !self.strands_a_shard(suspected | bit(suspect))
    }

    /// The suspects a manager takes from `reports` ((reporter, suspect),
    /// oldest first), each judged by [`Configuration::takes_suspicion`]
    /// against the ones taken before it; a mask by node id. The etcd
    /// manager's nodes each evaluate the reports stored in etcd this way,
    /// so nodes reading one revision agree on the suspects.
    pub fn taken_suspicions(&self, reports: impl IntoIterator<Item = (NodeId, NodeId)>) -> u32 {
        reports.into_iter().fold(0, |taken, (reporter, suspect)| {
            if self.takes_suspicion(taken, reporter, suspect) {
                taken | 1 << suspect
            } else {
                taken
            }
        })
    }

    /// The recovery leader: the lowest live node id, if any node is live
    /// (crash recovery: decisions are made once per epoch by it).
    pub fn leader(&self) -> Option<NodeId> {
        (self.live != 0).then(|| self.live.trailing_zeros() as NodeId)
    }
}
