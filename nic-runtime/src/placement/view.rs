//! One epoch's placement: [`PlacementView`].

use super::{Placement, PlacementError, Roles};
use splitkv_layout::wire::{NodeId, NodeMask};
use splitkv_layout::Key;

/// One epoch's placement (crash recovery, Xenic §4.2.1): a [`Placement`] whose
/// failed set ([`Placement::with_failed`]) is checked to leave a live node,
/// with the questions recovery asks of it. There is one rule, in
/// [`Placement`]: a shard's primary is its first surviving member in
/// serving order ([`Roles`]; the ring `shard, shard+1, …` at first) that
/// is not joining; its backups are the surviving rest, in order. The view adds that a shard all of whose replicas failed is
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
        Self::with_roles(placement, failed, placement.ring_roles())
    }

    /// The view of `placement` (its own failed set and roles are replaced)
    /// with the nodes in `failed` crashed and replicas ordered by `roles`
    /// (re-replication).
    ///
    /// # Errors
    /// [`PlacementError::Failed`] as [`PlacementView::new`], or when a
    /// joining or renewed node is failed or outside the cluster.
    pub fn with_roles(
        placement: Placement,
        failed: NodeMask,
        roles: Roles,
    ) -> Result<PlacementView, PlacementError> {
        let all = Self::all(placement.nodes());
        let copying = NodeMask(roles.joining_any().0 | roles.renewed().0);
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
        let ring = self.serving.ring_roles();
        self.serving.with_failed(NodeMask::EMPTY).with_roles(ring)
    }

    /// The replica order of this view (re-replication).
    pub fn roles(&self) -> Roles {
        self.serving.roles()
    }

    /// The joining backups of `shard` (re-replication): live members being
    /// copied, not yet counted as replicas, never primary.
    pub fn joining(&self, shard: NodeId) -> NodeMask {
        self.roles().joining(shard)
    }

    /// The restarted incarnations not caught up yet (rejoin): whatever
    /// their previous incarnation coordinated is orphaned.
    pub fn renewed(&self) -> NodeMask {
        self.roles().renewed()
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

    /// The surviving members of `shard`, primary first, in serving order
    /// (joining backups last; they receive every LOG, so recovery counts
    /// their records as evidence).
    pub fn live_replicas(&self, shard: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        self.serving.ordered_replicas(shard)
    }

    /// The primary of `shard` in this view ([`Placement::primary`]'s rule);
    /// `None` if the shard is lost (no surviving member that is not joining).
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
        let joining = self.joining(shard);
        self.live_replicas(shard)
            .filter(move |&n| !joining.contains(n))
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
