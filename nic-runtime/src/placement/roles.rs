//! Which nodes replicate each shard, and in which order (for
//! re-replication): [`Roles`].

use super::NODES_MAX;
use splitkv_layout::wire::{NodeId, NodeMask};

/// Node ids fit a nibble: a shard's serving order packs into one `u64`.
const _: () = assert!(NODES_MAX <= 16, "node ids are packed four bits each");

/// The replica sets of every shard and their serving order.
///
/// A shard's *members* are its replicas: caught-up replicas first, in
/// serving order, then its *joining* backups (being copied: sent every LOG
/// of the shard, never primary, not yet counted towards the replication
/// degree). A healthy cluster's roles are the ring ([`Roles::ring`]: shard
/// `s` has members `s, s+1, …, s+R-1` mod nodes, in that order); after a
/// crash, survivors that were no replica of a shard may be chosen as its
/// new backups, and a restarted node (a *renewed* incarnation, holding
/// nothing) joins the shards still below the degree. Derived from a
/// configuration (`Configuration::roles`), so every node agrees.
///
/// Serving order ranks caught-up replicas by the epoch from which each is
/// one (earlier first, ring position breaking ties), so a primary only
/// changes when it fails: a node that catches up later never takes a
/// primary role back (that would need a lock handover).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Roles {
    /// Per shard, its members in serving order, four bits per node id,
    /// first in the low bits.
    order: [u64; NODES_MAX],
    /// Per shard, how many members `order` holds.
    len: [u8; NODES_MAX],
    /// Per shard, its members as a mask.
    members: [NodeMask; NODES_MAX],
    /// Per shard, its joining backups (a subset of its members).
    joining: [NodeMask; NODES_MAX],
    /// Restarted incarnations that have not caught up yet.
    renewed: NodeMask,
    /// Whether these are the ring roles (the fast path of placement).
    ring: bool,
}

impl Roles {
    /// The ring roles of `nodes` nodes with `replication` replicas per shard
    /// (both at least 1, `replication ≤ nodes ≤` [`NODES_MAX`]; larger
    /// values are clamped): shard `s` has members `s, s+1, …` in order.
    pub fn ring(nodes: usize, replication: usize) -> Roles {
        let n = nodes.clamp(1, NODES_MAX);
        let r = replication.clamp(1, n);
        let mut roles = Roles::empty();
        for s in 0..n {
            for i in 0..r {
                roles.push(s as NodeId, ((s + i) % n) as NodeId);
            }
        }
        roles.ring = true;
        roles
    }

    /// Roles with no member anywhere (to be filled by [`Roles::push`]).
    pub(crate) fn empty() -> Roles {
        Roles {
            order: [0; NODES_MAX],
            len: [0; NODES_MAX],
            members: [NodeMask::EMPTY; NODES_MAX],
            joining: [NodeMask::EMPTY; NODES_MAX],
            renewed: NodeMask::EMPTY,
            ring: false,
        }
    }

    /// Appends `node` as the next member of `shard` in serving order (a
    /// node already a member, or ids ≥ [`NODES_MAX`], are ignored).
    pub(crate) fn push(&mut self, shard: NodeId, node: NodeId) {
        let (s, n) = (shard as usize, node as usize);
        if s >= NODES_MAX || n >= NODES_MAX || self.members[s].contains(node) {
            return;
        }
        self.order[s] |= (node as u64) << (4 * self.len[s] as u32);
        self.len[s] += 1;
        self.members[s] = self.members[s].with(node);
    }

    /// Appends `node` as a joining backup of `shard` (after every member
    /// pushed so far).
    pub(crate) fn push_joining(&mut self, shard: NodeId, node: NodeId) {
        self.push(shard, node);
        if let Some(j) = self.joining.get_mut(shard as usize) {
            *j = j.with(node);
        }
    }

    /// Marks the nodes of `renewed` as restarted incarnations still being
    /// caught up.
    pub(crate) fn set_renewed(&mut self, renewed: NodeMask) {
        self.renewed = renewed;
    }

    /// These roles, marked as the ring's when they equal
    /// [`Roles::ring`]`(nodes, replication)` (the placement's fast path).
    pub(crate) fn finish(mut self, nodes: usize, replication: usize) -> Roles {
        self.ring = true;
        self.ring = self == Roles::ring(nodes, replication);
        self
    }

    /// The members of `shard` in serving order (failed ones included).
    pub fn members(&self, shard: NodeId) -> Replicas {
        let s = shard as usize;
        if s >= NODES_MAX {
            return Replicas { order: 0, len: 0 };
        }
        Replicas {
            order: self.order[s],
            len: self.len[s],
        }
    }

    /// The members of `shard` as a mask.
    pub fn member_mask(&self, shard: NodeId) -> NodeMask {
        self.members
            .get(shard as usize)
            .copied()
            .unwrap_or(NodeMask::EMPTY)
    }

    /// The joining backups of `shard` (being copied, never primary).
    pub fn joining(&self, shard: NodeId) -> NodeMask {
        self.joining
            .get(shard as usize)
            .copied()
            .unwrap_or(NodeMask::EMPTY)
    }

    /// Every node joining some shard.
    pub fn joining_any(&self) -> NodeMask {
        self.joining
            .iter()
            .fold(NodeMask::EMPTY, |a, j| NodeMask(a.0 | j.0))
    }

    /// The restarted incarnations not caught up yet: what their previous
    /// incarnation coordinated is orphaned.
    pub fn renewed(&self) -> NodeMask {
        self.renewed
    }

    /// Whether these are the ring roles, unchanged.
    pub fn is_ring(&self) -> bool {
        self.ring
    }
}

/// Why [`Roles::from_shards`] refused a description of replica sets (one
/// read from outside: a node's report, a file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RolesError {
    /// Not one description per shard (a cluster has one shard per node).
    #[error("{given} shards described, the cluster of {nodes} nodes has {nodes}")]
    ShardCount {
        /// Shards described.
        given: usize,
        /// Nodes (and shards) of the cluster.
        nodes: usize,
    },
    /// A node id outside the cluster.
    #[error("shard {shard}: node {node} is outside the cluster of {nodes} nodes")]
    NodeOutside {
        /// The shard.
        shard: usize,
        /// The node named.
        node: usize,
        /// Nodes of the cluster.
        nodes: usize,
    },
    /// A node listed twice as a member of one shard.
    #[error("shard {shard}: node {node} is listed twice")]
    Repeated {
        /// The shard.
        shard: usize,
        /// The node named twice.
        node: usize,
    },
    /// A joining node that is not a member, or a caught-up member listed
    /// after a joining one (joining backups come last in serving order).
    #[error("shard {shard}: joining node {node} is not among the last members")]
    JoiningOrder {
        /// The shard.
        shard: usize,
        /// The joining node.
        node: usize,
    },
}

impl Roles {
    /// The roles `shards` describes for a cluster of `nodes` nodes with
    /// `replication` replicas per shard: per shard, its members in serving
    /// order (joining backups last) and which of them are joining;
    /// `renewed` are the restarted incarnations not caught up yet. The
    /// inverse of [`Roles::members`] and [`Roles::joining`] over every
    /// shard.
    ///
    /// # Errors
    /// [`RolesError`] when the description does not fit the cluster; nothing
    /// is built then.
    pub fn from_shards(
        nodes: usize,
        replication: usize,
        shards: &[(Vec<NodeId>, NodeMask)],
        renewed: NodeMask,
    ) -> Result<Roles, RolesError> {
        let n = nodes.min(NODES_MAX);
        if shards.len() != n {
            return Err(RolesError::ShardCount {
                given: shards.len(),
                nodes,
            });
        }
        let mut roles = Roles::empty();
        for (s, (members, joining)) in shards.iter().enumerate() {
            let outside = |node: usize| RolesError::NodeOutside {
                shard: s,
                node,
                nodes,
            };
            if let Some(j) = joining.iter().find(|&j| j as usize >= n) {
                return Err(outside(j as usize));
            }
            let mut seen_joining = false;
            for &m in members {
                if m as usize >= n {
                    return Err(outside(m as usize));
                }
                if roles.members[s].contains(m) {
                    return Err(RolesError::Repeated {
                        shard: s,
                        node: m as usize,
                    });
                }
                if joining.contains(m) {
                    seen_joining = true;
                    roles.push_joining(s as NodeId, m);
                } else if seen_joining {
                    let node = joining.iter().next().unwrap_or(m) as usize;
                    return Err(RolesError::JoiningOrder { shard: s, node });
                } else {
                    roles.push(s as NodeId, m);
                }
            }
            if let Some(j) = joining.iter().find(|&j| !roles.members[s].contains(j)) {
                return Err(RolesError::JoiningOrder {
                    shard: s,
                    node: j as usize,
                });
            }
        }
        if let Some(r) = renewed.iter().find(|&r| r as usize >= n) {
            return Err(RolesError::NodeOutside {
                shard: 0,
                node: r as usize,
                nodes,
            });
        }
        roles.set_renewed(renewed);
        Ok(roles.finish(nodes, replication))
    }
}

/// The members of one shard in serving order (no allocation).
#[derive(Debug, Clone, Copy)]
pub struct Replicas {
    order: u64,
    len: u8,
}

impl Iterator for Replicas {
    type Item = NodeId;
    fn next(&mut self) -> Option<NodeId> {
        (self.len > 0).then(|| {
            let n = (self.order & 0xF) as NodeId;
            self.order >>= 4;
            self.len -= 1;
            n
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.len as usize, Some(self.len as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_roles_list_each_shard_from_itself() {
        let r = Roles::ring(5, 3);
        assert!(r.is_ring());
        assert_eq!(r.members(3).collect::<Vec<_>>(), vec![3, 4, 0]);
        assert_eq!(r.member_mask(4), NodeMask(0b0_0011 | 0b1_0000));
        assert!(r.joining_any().is_empty() && r.renewed().is_empty());
        assert_eq!(r.members(NODES_MAX as NodeId).count(), 0);
    }

    #[test]
    fn described_shards_build_the_roles_they_describe_and_bad_ones_are_refused() {
        let ring = Roles::ring(4, 3);
        let describe = |r: &Roles| -> Vec<(Vec<NodeId>, NodeMask)> {
            (0..4)
                .map(|s| (r.members(s).collect(), r.joining(s)))
                .collect()
        };
        let back = Roles::from_shards(4, 3, &describe(&ring), NodeMask::EMPTY).unwrap();
        assert_eq!(back, ring);
        assert!(back.is_ring());
        let mut moved = describe(&ring);
        moved[1] = (vec![2, 3, 0], NodeMask::EMPTY.with(0));
        let r = Roles::from_shards(4, 3, &moved, NodeMask::EMPTY.with(1)).unwrap();
        assert!(!r.is_ring());
        assert_eq!(r.members(1).collect::<Vec<_>>(), vec![2, 3, 0]);
        assert_eq!(r.joining(1), NodeMask::EMPTY.with(0));
        assert_eq!(r.renewed(), NodeMask::EMPTY.with(1));
        let bad = |shards: &[(Vec<NodeId>, NodeMask)]| {
            Roles::from_shards(4, 3, shards, NodeMask::EMPTY).unwrap_err()
        };
        assert_eq!(
            bad(&moved[..3]),
            RolesError::ShardCount { given: 3, nodes: 4 }
        );
        let mut outside = moved.clone();
        outside[2].0.push(9);
        assert!(matches!(
            bad(&outside),
            RolesError::NodeOutside {
                shard: 2,
                node: 9,
                ..
            }
        ));
        let mut twice = moved.clone();
        twice[3].0.push(3);
        assert_eq!(bad(&twice), RolesError::Repeated { shard: 3, node: 3 });
        let mut order = moved.clone();
        order[1] = (vec![0, 2, 3], NodeMask::EMPTY.with(0));
        assert_eq!(bad(&order), RolesError::JoiningOrder { shard: 1, node: 0 });
        let mut stranger = moved;
        stranger[0].1 = NodeMask::EMPTY.with(3).with(1);
        assert!(matches!(
            bad(&stranger),
            RolesError::JoiningOrder { shard: 0, .. }
        ));
    }

    #[test]
    fn pushed_members_keep_their_order_and_are_not_repeated() {
        let mut r = Roles::empty();
        r.push(2, 15);
        r.push(2, 0);
        r.push_joining(2, 7);
        r.push(2, 0);
        assert_eq!(r.members(2).collect::<Vec<_>>(), vec![15, 0, 7]);
        assert_eq!(r.joining(2), NodeMask::EMPTY.with(7));
        assert_eq!(r.joining_any(), NodeMask::EMPTY.with(7));
        assert!(!r.is_ring());
        assert_ne!(r, Roles::empty());
    }
}
