//! `PlacementView` (crash recovery): the per-epoch placement after crashes.
//! Every key has exactly one primary among the live nodes; with at most
//! `replication − 1` failures every shard keeps a replica; the view is a pure
//! function of the placement and the failed set.

use proptest::prelude::*;
use splitkv_layout::wire::NodeMask;
use splitkv_layout::Key;
use splitkv_nic::{Placement, PlacementError, PlacementView, NODES_MAX};

/// A cluster shape and a failed set of at most `replication − 1` nodes
/// (never all of them).
fn shape() -> impl Strategy<Value = (usize, usize, NodeMask)> {
    (1..=NODES_MAX)
        .prop_flat_map(|nodes| (Just(nodes), 1..=nodes))
        .prop_flat_map(|(nodes, r)| {
            let f = (r - 1).min(nodes - 1);
            (
                Just(nodes),
                Just(r),
                prop::collection::btree_set(0..nodes as u16, 0..=f),
            )
        })
        .prop_map(|(n, r, failed)| {
            (
                n,
                r,
                failed.into_iter().fold(NodeMask::EMPTY, NodeMask::with),
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn one_live_primary_and_no_lost_shard((nodes, r, failed) in shape(), ids in prop::collection::vec(any::<u64>(), 1..50)) {
        let p = Placement::new(nodes, r).unwrap();
        let v = PlacementView::new(p, failed).unwrap();
        prop_assert!(v.lost_shards().is_empty());
        prop_assert!(v.is_live(v.leader()));
        prop_assert!(v.live().iter().all(|n| n >= v.leader()));
        for id in ids {
            let k = Key::new(1, id);
            let shard = p.shard(&k);
            let prim = v.primary(&k).expect("no shard is lost with ≤ f failures");
            prop_assert!(v.is_live(prim));
            prop_assert!(p.is_replica(prim, &k));
            // The first surviving replica in replica order.
            let first = p.shard_replicas(shard).find(|&n| !failed.contains(n));
            prop_assert_eq!(Some(prim), first);
            let backups: Vec<_> = v.backups(&k).collect();
            prop_assert!(!backups.contains(&prim));
            prop_assert!(backups.iter().all(|&b| v.is_live(b) && p.is_replica(b, &k)));
            prop_assert_eq!(backups.len() + 1, r - (0..nodes as u16).filter(|&n| failed.contains(n) && p.is_replica(n, &k)).count());
            // Exactly one live node calls itself the key's primary.
            let claimants = v.live().iter().filter(|&n| v.primary(&k) == Some(n)).count();
            prop_assert_eq!(claimants, 1);
            // Deterministic.
            prop_assert_eq!(PlacementView::new(p, failed).unwrap().primary(&k), Some(prim));
        }
    }

    #[test]
    fn promotion_is_exactly_the_shards_of_failed_primaries((nodes, r, failed) in shape()) {
        let p = Placement::new(nodes, r).unwrap();
        let before = PlacementView::healthy(p);
        let after = PlacementView::new(p, failed).unwrap();
        let mut promoted = NodeMask::EMPTY;
        for n in after.live().iter() {
            let m = after.promoted(&before, n);
            prop_assert_eq!(m.0 & promoted.0, 0, "a shard promoted twice");
            promoted = NodeMask(promoted.0 | m.0);
        }
        prop_assert_eq!(promoted, failed, "shard s has primary s while healthy");
    }
}

#[test]
fn lost_shard_when_every_replica_failed() {
    let p = Placement::new(4, 2).unwrap();
    let v = PlacementView::new(p, NodeMask::EMPTY.with(1).with(2)).unwrap();
    assert_eq!(v.lost_shards(), NodeMask::EMPTY.with(1));
    assert_eq!(v.shard_primary(1), None);
    assert_eq!(v.shard_primary(2), Some(3));
    assert_eq!(v.shard_primary(0), Some(0));
    assert_eq!(v.shard_backups(0).count(), 0, "replica 1 of shard 0 failed");
    assert_eq!(v.leader(), 0);
}

#[test]
fn rejects_bad_failed_sets() {
    let p = Placement::new(3, 2).unwrap();
    assert!(matches!(
        PlacementView::new(p, NodeMask::EMPTY.with(3)),
        Err(PlacementError::Failed { .. })
    ));
    assert!(matches!(
        PlacementView::new(p, NodeMask(0b111)),
        Err(PlacementError::Failed { .. })
    ));
    let v = PlacementView::new(p, NodeMask(0b011)).unwrap();
    assert_eq!(v.leader(), 2);
    assert_eq!(v.live(), NodeMask(0b100));
}
