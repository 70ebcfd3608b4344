//! Placement: key → shard → primary and backups (DESIGN.md, "Data and metadata").
//!
//! There is one shard per node. A key's shard is chosen from the high bits of its
//! hash (the host table uses the low bits for the home slot, so the two choices are
//! independent). Shard `s` has primary `s` and backups `s+1, …, s+f` (mod nodes).
//! Every node computes the same answer with no coordination.
//!
//! After crashes, a [`PlacementView`] (one per epoch) adds the set of failed
//! nodes (issue 11, Xenic §4.2.1): shards keep their ids (a key's shard never
//! changes), the primary of a shard is its first surviving replica in replica
//! order, and its backups are the surviving rest, so the replication degree is
//! reduced until re-replication restores it.
//!
//! Re-replication (issue 12, [`crate::rereplication`]) adds [`Roles`]: a node
//! that comes back after a crash rejoins every shard of its ring position,
//! but never takes its old primary role back (that would need a lock
//! handover). Replicas are ordered by rank, then ring order: nodes that were
//! replicas from the start have rank 0, a node that finished its copy later
//! ranks after every node that finished earlier, and a node still being
//! copied ranks last ([`ROLE_RANK_COPYING`]) and is never primary. A primary
//! therefore only changes when it fails. Ranks come from the configuration
//! (`Configuration::roles`), so every node computes the same order.

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
    /// (Also: a copying set naming a failed node or one outside the cluster.)
    #[error("failed nodes {failed:#06x} must be a proper subset of the {nodes} nodes")]
    Failed {
        /// The failed set, one bit per node id.
        failed: u16,
        /// Node count.
        nodes: usize,
    },
}

/// The rank of a node being copied (re-replication, issue 12): after every
/// caught-up replica, never primary.
pub const ROLE_RANK_COPYING: u8 = u8::MAX;

/// How the live replicas of a shard are ordered (issue 12): a rank per node
/// (0: a replica from the start; higher: caught up later;
/// [`ROLE_RANK_COPYING`]: still being copied). A shard's replicas are its
/// ring members ordered by (rank, ring position); its primary is the first
/// of them that is not copying. Derived from a configuration
/// (`Configuration::roles`), so every node agrees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Roles {
    /// Per node id, its rank (entries past the node count are unused).
    pub rank: [u8; NODES_MAX],
}

impl Roles {
    /// The nodes being copied (rank [`ROLE_RANK_COPYING`]), a mask by node id.
    pub fn copying(&self) -> NodeMask {
        (0..NODES_MAX as NodeId)
            .filter(|&n| self.rank[n as usize] == ROLE_RANK_COPYING)
            .fold(NodeMask::EMPTY, NodeMask::with)
    }

    /// Whether every node has rank 0 (the ring order, no re-replication).
    pub fn is_ring(&self) -> bool {
        self.rank.iter().all(|&r| r == 0)
    }
}

/// The live replicas of one shard in serving order (no allocation).
#[derive(Debug, Clone, Copy)]
pub struct Replicas {
    ids: [NodeId; NODES_MAX],
    len: u8,
    next: u8,
}

impl Iterator for Replicas {
    type Item = NodeId;
    fn next(&mut self) -> Option<NodeId> {
        (self.next < self.len).then(|| {
            self.next += 1;
            self.ids[self.next as usize - 1]
        })
    }
}

/// Deterministic placement of keys on nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    nodes: u16,
    replication: u16,
    /// Failed nodes, one bit per node id (0 in a healthy cluster): a key's
    /// primary is its shard's first surviving replica (Xenic §4.2.1
    /// promotion), and failed nodes are nobody's replica.
    failed: u16,
    /// The order of replicas (issue 12); all zero: ring order.
    roles: Roles,
}

impl Placement {
    /// A placement over `nodes` nodes with `replication` replicas per shard
    /// (primary plus `replication - 1` backups).
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
            roles: Roles::default(),
        })
    }

    /// This placement with replicas ordered by `roles` (issue 12; see
    /// [`Roles`]): a node being copied is a backup of its ring shards (it is
    /// sent every LOG) but never primary.
    pub fn with_roles(self, roles: Roles) -> Placement {
        Placement { roles, ..self }
    }

    /// The replica order this placement serves ([`Placement::with_roles`]).
    pub fn roles(&self) -> Roles {
        self.roles
    }

    /// The live replicas of `shard` in serving order: ring members that have
    /// not failed, by (rank, ring position).
    pub fn ordered_replicas(&self, shard: NodeId) -> Replicas {
        let mut r = Replicas {
            ids: [0; NODES_MAX],
            len: 0,
            next: 0,
        };
        for n in self.shard_replicas(shard).filter(|&n| self.live(n)) {
            // Insertion by rank; equal ranks keep ring order.
            let rank = self.roles.rank[n as usize];
            let mut i = r.len as usize;
            while i > 0 && self.roles.rank[r.ids[i - 1] as usize] > rank {
                r.ids[i] = r.ids[i - 1];
                i -= 1;
            }
            r.ids[i] = n;
            r.len += 1;
        }
        r
    }

    /// The primary of `shard`: its first live replica in serving order that
    /// is not being copied; `None` if there is none.
    pub fn shard_primary(&self, shard: NodeId) -> Option<NodeId> {
        self.ordered_replicas(shard)
            .next()
            .filter(|&n| self.roles.rank[n as usize] != ROLE_RANK_COPYING)
    }

    /// This placement as it is served once the nodes of `failed` crashed
    /// and recovery promoted the first surviving replica of each shard
    /// (see [`PlacementView`]): [`Placement::primary`], [`Placement::backups`]
    /// and [`Placement::is_replica`] skip failed nodes; shards and
    /// [`Placement::shard_replicas`] keep their ids and members. A shard with
    /// no surviving replica keeps its failed primary (requests to it fail).
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

    /// The primary of `key`: its shard's id while no node has failed,
    /// otherwise the shard's first surviving replica.
    #[inline]
    pub fn primary(&self, key: &Key) -> NodeId {
        let s = self.shard(key);
        if self.failed == 0 && self.roles.is_ring() {
            return s;
        }
        self.shard_primary(s).unwrap_or(s)
    }

    /// The surviving backups of `key`'s shard, in serving order (nodes being
    /// copied last).
    #[inline]
    pub fn backups(&self, key: &Key) -> impl Iterator<Item = NodeId> {
        let p = self.primary(key);
        self.ordered_replicas(self.shard(key))
            .filter(move |&b| b != p)
    }

    /// The replicas of shard `shard` (primary first, then the backups in
    /// order): `shard, shard+1, …, shard+replication-1` (mod nodes).
    #[inline]
    pub fn shard_replicas(&self, shard: NodeId) -> impl Iterator<Item = NodeId> {
        let n = self.nodes;
        (0..self.replication).map(move |i| (shard + i) % n)
    }

    /// The shards `node` holds a replica of (as primary first, then as
    /// backup): `replication` of them, `node, node-1, …` (mod nodes).
    #[inline]
    pub fn shards_of(&self, node: NodeId) -> impl Iterator<Item = NodeId> {
        let n = self.nodes;
        (0..self.replication).map(move |i| (node + n - i) % n)
    }

    /// Whether `node` holds a replica (primary or backup) of `key` and has
    /// not failed.
    #[inline]
    pub fn is_replica(&self, node: NodeId, key: &Key) -> bool {
        let s = self.shard(key);
        self.live(node) && (node + self.nodes - s) % self.nodes < self.replication
    }
}

/// One epoch's placement (issue 11, Xenic §4.2.1): a [`Placement`] whose
/// failed set ([`Placement::with_failed`]) is checked to leave a live node,
/// with the questions recovery asks of it. There is one rule, in
/// [`Placement`]: a shard's primary is its first surviving replica in
/// replica order (`shard, shard+1, …`); its backups are the surviving rest,
/// in order. The view adds that a shard all of whose replicas failed is
/// *lost* (more than `replication − 1` of its replicas crashed) and has no
/// primary. Pure and deterministic: every node with the same failed set
/// computes the same view, and serves [`PlacementView::serving`] once the
/// epoch resumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlacementView {
    /// The placement with this view's failed set.
    serving: Placement,
}

impl PlacementView {
    /// The view of `placement` (its own failed set is replaced) with the
    /// nodes in `failed` crashed.
    ///
    /// # Errors
    /// [`PlacementError::Failed`] when `failed` names a node id ≥ the node
    /// count, or every node (someone must survive to recover).
    pub fn new(placement: Placement, failed: NodeMask) -> Result<PlacementView, PlacementError> {
        Self::with_roles(placement, failed, Roles::default())
    }

    /// The view of `placement` (its own failed set and roles are replaced)
    /// with the nodes in `failed` crashed and replicas ordered by `roles`
    /// (issue 12).
    ///
    /// # Errors
    /// [`PlacementError::Failed`] as [`PlacementView::new`], or when a node
    /// being copied is failed or outside the cluster.
    pub fn with_roles(
        placement: Placement,
        failed: NodeMask,
        roles: Roles,
    ) -> Result<PlacementView, PlacementError> {
        let all = Self::all(placement.nodes());
        let copying = roles.copying();
        if !failed.is_subset(all)
            || failed == all
            || !copying.is_subset(all)
            || copying.0 & failed.0 != 0
        {
            return Err(PlacementError::Failed {
                failed: failed.0,
                nodes: placement.nodes(),
            });
        }
        Ok(PlacementView {
            serving: placement.with_failed(failed).with_roles(roles),
        })
    }

    fn all(nodes: usize) -> NodeMask {
        NodeMask(((1u32 << nodes) - 1) as u16)
    }

    /// The view with no failed node.
    pub fn healthy(placement: Placement) -> PlacementView {
        PlacementView {
            serving: placement.with_failed(NodeMask::EMPTY),
        }
    }

    /// The static placement underneath (no failed node, ring order).
    pub fn placement(&self) -> Placement {
        self.serving
            .with_failed(NodeMask::EMPTY)
            .with_roles(Roles::default())
    }

    /// The replica order of this view (issue 12).
    pub fn roles(&self) -> Roles {
        self.serving.roles()
    }

    /// The live nodes being copied (issue 12): backups of their ring
    /// shards that are not yet counted as replicas.
    pub fn copying(&self) -> NodeMask {
        self.roles().copying()
    }

    /// The placement nodes serve in this view: the static one with this
    /// view's failed set (primaries promoted).
    pub fn serving(&self) -> Placement {
        self.serving
    }

    /// The failed nodes.
    pub fn failed(&self) -> NodeMask {
        self.serving.failed()
    }

    /// The live nodes (never empty).
    pub fn live(&self) -> NodeMask {
        NodeMask(Self::all(self.serving.nodes()).0 & !self.failed().0)
    }

    /// Whether `node` is a live member of the cluster.
    pub fn is_live(&self, node: NodeId) -> bool {
        self.live().contains(node)
    }

    /// The recovery leader: the lowest live node id.
    pub fn leader(&self) -> NodeId {
        self.live().iter().next().expect("a view has a live node")
    }

    /// The surviving replicas of `shard`, primary first, in serving order
    /// (nodes being copied last; they receive every LOG, so recovery counts
    /// them as replicas whose records are evidence).
    pub fn live_replicas(&self, shard: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        self.serving.ordered_replicas(shard)
    }

    /// The primary of `shard` in this view ([`Placement::primary`]'s rule);
    /// `None` if the shard is lost (no surviving replica that is not being
    /// copied).
    pub fn shard_primary(&self, shard: NodeId) -> Option<NodeId> {
        self.serving.shard_primary(shard)
    }

    /// The surviving backups of `shard`, in serving order.
    pub fn shard_backups(&self, shard: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        let p = self.shard_primary(shard);
        self.live_replicas(shard).filter(move |&n| Some(n) != p)
    }

    /// The caught-up replicas of `shard` (live and not being copied), in
    /// serving order: the shard's replication degree is restored when there
    /// are [`Placement::replication`] of them.
    pub fn caught_up_replicas(&self, shard: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        let copying = self.copying();
        self.live_replicas(shard)
            .filter(move |&n| !copying.contains(n))
    }

    /// The primary of `key` in this view; `None` if its shard is lost.
    pub fn primary(&self, key: &Key) -> Option<NodeId> {
        self.shard_primary(self.serving.shard(key))
    }

    /// The surviving backups of `key`, in replica order.
    pub fn backups(&self, key: &Key) -> impl Iterator<Item = NodeId> + '_ {
        self.shard_backups(self.serving.shard(key))
    }

    /// The shards with no surviving replica.
    pub fn lost_shards(&self) -> NodeMask {
        (0..self.serving.nodes() as NodeId)
            .filter(|&s| self.shard_primary(s).is_none())
            .fold(NodeMask::EMPTY, NodeMask::with)
    }

    /// The shards `node` is primary of in this view but was not in `before`
    /// (the shards it must be promoted to serve).
    pub fn promoted(&self, before: &PlacementView, node: NodeId) -> NodeMask {
        (0..self.serving.nodes() as NodeId)
            .filter(|&s| {
                self.shard_primary(s) == Some(node) && before.shard_primary(s) != Some(node)
            })
            .fold(NodeMask::EMPTY, NodeMask::with)
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
