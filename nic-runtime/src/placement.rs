//! Placement: key → shard → primary and backups (DESIGN.md, "Data and metadata").
//!
//! There is one shard per node. A key's shard is chosen from the high bits of its
//! hash (the host table uses the low bits for the home slot, so the two choices are
//! independent). Shard `s` has primary `s` and backups `s+1, …, s+f` (mod nodes).
//! Every node computes the same answer with no coordination.
//!
//! After crashes, a [`PlacementView`] (one per epoch) adds the set of failed
//! nodes (crash recovery, Xenic §4.2.1): shards keep their ids (a key's shard
//! never changes), the primary of a shard is its first surviving replica in
//! replica order, and its backups are the surviving rest, so the replication
//! degree is reduced until re-replication restores it.
//!
//! Re-replication ([`crate::recovery::rereplication`]) replaces the ring
//! by [`Roles`]: per shard, its members in serving order. After a crash,
//! survivors that were no replica of a shard may become its new backups
//! (when the cluster has more nodes than the replication degree), and a node
//! that comes back joins the shards still short of replicas. Members that
//! caught up earlier serve first, so a primary only changes when it fails;
//! a member still being copied (*joining*) is never primary. Roles come from
//! the configuration (`Configuration::roles`), so every node computes the
//! same order.

mod roles;
mod view;

pub use roles::{Replicas, Roles, RolesError};
pub use view::PlacementView;

use splitkv_layout::wire::{NodeId, NodeMask, MASK_NODES_MAX};
use splitkv_layout::Key;

/// Most nodes in a cluster (DESIGN.md: 3–10 nodes; bounded for fixed-size arrays).
pub const NODES_MAX: usize = 16;
const _: () = assert!(NODES_MAX <= MASK_NODES_MAX, "a NodeMask names every node");

/// Bad cluster shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// Zero nodes, or more than [`NODES_MAX`].
    #[error("node count must be between 1 and {NODES_MAX}, got {0}")]
    Nodes(usize),
    /// Replication degree zero or larger than the node count.
    #[error(
        "replication degree must be between 1 and the node count ({nodes}), got {replication}"
    )]
    Replication {
        /// Requested replication degree.
        replication: usize,
        /// Node count.
        nodes: usize,
    },
    /// A failed-node set naming a node outside the cluster, or every node.
    /// (Also: joining or renewed nodes that are failed or outside the
    /// cluster.)
    #[error("failed nodes {failed:#06x} must be a proper subset of the {nodes} nodes")]
    Failed {
        /// The failed set, one bit per node id.
        failed: u16,
        /// Node count.
        nodes: usize,
    },
}

/// Deterministic placement of keys on nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    nodes: u16,
    replication: u16,
    /// Failed nodes, one bit per node id (0 in a healthy cluster): a key's
    /// primary is its shard's first surviving member (Xenic §4.2.1
    /// promotion), and failed nodes are nobody's replica.
    failed: u16,
    /// Each shard's members in serving order (re-replication); the ring at first.
    roles: Roles,
}

impl Placement {
    /// A placement over `nodes` nodes with `replication` replicas per shard
    /// (primary plus `replication - 1` backups), in ring order.
    ///
    /// # Errors
    /// [`PlacementError::Nodes`] or [`PlacementError::Replication`] for a
    /// shape outside `1 ≤ replication ≤ nodes ≤` [`NODES_MAX`].
    pub fn new(nodes: usize, replication: usize) -> Result<Placement, PlacementError> {
        if nodes == 0 || nodes > NODES_MAX {
            return Err(PlacementError::Nodes(nodes));
        }
        if replication == 0 || replication > nodes {
            return Err(PlacementError::Replication { replication, nodes });
        }
        Ok(Placement {
            nodes: nodes as u16,
            replication: replication as u16,
            failed: 0,
            roles: Roles::ring(nodes, replication),
        })
    }

    /// This placement with each shard's members given by `roles` (re-replication;
    /// see [`Roles`]): a joining backup is sent every LOG of its shard but
    /// is never primary.
    pub fn with_roles(self, roles: Roles) -> Placement {
        Placement { roles, ..self }
    }

    /// The ring roles of this placement's shape ([`Roles::ring`]).
    pub fn ring_roles(&self) -> Roles {
        Roles::ring(self.nodes(), self.replication())
    }

    /// The replica sets this placement serves ([`Placement::with_roles`]).
    pub fn roles(&self) -> Roles {
        self.roles
    }

    /// The live members of `shard` in serving order (members that have
    /// not failed; joining backups last).
    pub fn ordered_replicas(&self, shard: NodeId) -> impl Iterator<Item = NodeId> {
        let failed = self.failed;
        self.roles
            .members(shard)
            .filter(move |&n| failed & (1 << n) == 0)
    }

    /// The primary of `shard`: its first live member in serving order that
    /// is not joining; `None` if there is none.
    pub fn shard_primary(&self, shard: NodeId) -> Option<NodeId> {
        let joining = self.roles.joining(shard);
        self.ordered_replicas(shard)
            .next()
            .filter(|&n| !joining.contains(n))
    }

    /// This placement as it is served once the nodes of `failed` crashed
    /// and recovery promoted the first surviving member of each shard
    /// (see [`PlacementView`]): [`Placement::primary`], [`Placement::backups`]
    /// and [`Placement::is_replica`] skip failed nodes; shards and
    /// [`Placement::shard_replicas`] keep their ids and members. A shard with
    /// no surviving member keeps its failed primary (requests to it fail).
    pub fn with_failed(self, failed: NodeMask) -> Placement {
        let all = ((1u32 << self.nodes) - 1) as u16;
        Placement {
            failed: failed.0 & all,
            ..self
        }
    }

    /// The failed nodes this placement skips ([`Placement::with_failed`]).
    pub fn failed(&self) -> NodeMask {
        NodeMask(self.failed)
    }

    #[inline]
    fn live(&self, node: NodeId) -> bool {
        self.failed & (1 << node) == 0
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.nodes as usize
    }

    /// Replication degree (replicas per shard).
    pub fn replication(&self) -> usize {
        self.replication as usize
    }

    /// The shard of `key`: the node id of its primary while no node has
    /// failed; shards keep their ids across epochs ([`PlacementView`]).
    #[inline]
    pub fn shard(&self, key: &Key) -> NodeId {
        (((key.hash64() >> 32) * self.nodes as u64) >> 32) as NodeId
    }

    /// The primary of `key`: its shard's id in the ring, otherwise the
    /// shard's first live member that is not joining.
    #[inline]
    pub fn primary(&self, key: &Key) -> NodeId {
        let s = self.shard(key);
        if self.failed == 0 && self.roles.is_ring() {
            return s;
        }
        self.shard_primary(s).unwrap_or(s)
    }

    /// The surviving backups of `key`'s shard, in serving order (joining
    /// backups last).
    #[inline]
    pub fn backups(&self, key: &Key) -> impl Iterator<Item = NodeId> {
        let p = self.primary(key);
        self.ordered_replicas(self.shard(key))
            .filter(move |&b| b != p)
    }

    /// The members of shard `shard` in serving order, failed ones included:
    /// in the ring, `shard, shard+1, …, shard+replication-1` (mod nodes).
    #[inline]
    pub fn shard_replicas(&self, shard: NodeId) -> impl Iterator<Item = NodeId> {
        self.roles.members(shard)
    }

    /// The shards `node` is a member of, by shard id (in the ring:
    /// `replication` of them, `node-replication+1, …, node` mod nodes).
    #[inline]
    pub fn shards_of(&self, node: NodeId) -> impl Iterator<Item = NodeId> {
        let roles = self.roles;
        (0..self.nodes).filter(move |&s| roles.member_mask(s).contains(node))
    }

    /// Whether `node` holds a replica (primary or backup, joining included)
    /// of `key` and has not failed.
    #[inline]
    pub fn is_replica(&self, node: NodeId, key: &Key) -> bool {
        self.live(node) && self.roles.member_mask(self.shard(key)).contains(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_primary_is_replaced_by_its_first_surviving_backup() {
        let p = Placement::new(3, 2).unwrap();
        let f = p.with_failed(NodeMask::EMPTY.with(2));
        for id in 0..1_000u64 {
            let k = Key::new(1, id);
            let s = p.shard(&k);
            assert_eq!(f.shard(&k), s);
            let want: Vec<_> = PlacementView::new(p, f.failed())
                .unwrap()
                .live_replicas(s)
                .collect();
            let got: Vec<_> = std::iter::once(f.primary(&k))
                .chain(f.backups(&k))
                .collect();
            assert_eq!(got, want, "shard {s}");
            assert!(!f.is_replica(2, &k));
        }
    }

    #[test]
    fn rejects_bad_shapes() {
        assert_eq!(Placement::new(0, 1), Err(PlacementError::Nodes(0)));
        assert!(Placement::new(3, 4).is_err());
        assert!(Placement::new(3, 0).is_err());
        assert!(Placement::new(NODES_MAX + 1, 1).is_err());
    }

    #[test]
    fn replicas_are_distinct_and_balanced() {
        let p = Placement::new(5, 3).unwrap();
        let mut primaries = [0usize; 5];
        for id in 0..10_000u64 {
            let k = Key::new(1, id);
            let prim = p.primary(&k);
            primaries[prim as usize] += 1;
            let b: Vec<_> = p.backups(&k).collect();
            assert_eq!(b.len(), 2);
            assert!(!b.contains(&prim) && b[0] != b[1]);
            let replicas = (0..5).filter(|&n| p.is_replica(n, &k)).count();
            assert_eq!(replicas, 3);
            assert!(p.is_replica(prim, &k) && b.iter().all(|&n| p.is_replica(n, &k)));
        }
        for node in 0..5 {
            let r: Vec<_> = p.shard_replicas(node).collect();
            assert_eq!(r[0], node, "primary first");
            for s in p.shards_of(node) {
                assert!(p.shard_replicas(s).any(|n| n == node), "{node} in {s}");
            }
            assert_eq!(p.shards_of(node).count(), 3);
            let k = Key::new(1, node as u64);
            let by_key: Vec<_> = std::iter::once(p.primary(&k))
                .chain(p.backups(&k))
                .collect();
            let by_shard: Vec<_> = p.shard_replicas(p.primary(&k)).collect();
            assert_eq!(by_key, by_shard);
        }
        assert!(
            primaries.iter().all(|&c| c > 1800 && c < 2200),
            "{primaries:?}"
        );
    }
}
