//! Which nodes replicate each shard, and in which order (issue 12,
//! re-replication): [`Roles`].

use super::NODES_MAX;
use splitkv_layout::wire::{NodeId, NodeMask};

/// Node ids fit a nibble: a shard's serving order packs into one `u64`.
const _: () = assert!(NODES_MAX <= 16, "node ids are packed four bits each");

/// The replica sets of every shard and their serving order (issue 12).
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
