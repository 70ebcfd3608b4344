//! The replica sets the nodes report with their rows (re-replication): the mirror
//! reads each shard at the members the nodes served, so a cluster that
//! moved a shard to another node after a crash passes the replica check,
//! which fails the same rows under the ring's replica sets; and reports
//! that disagree or do not fit the cluster are refused.

use super::*;
use crate::smallbank::Smallbank;

const NODES: usize = 4;
const REPLICATION: usize = 3;

/// The ring's replica sets, except shard 1 served by nodes 2, 3 and 0 (node
/// 1 failed, node 0 copied as its new backup), as the nodes report them
/// in epoch `epoch`.
fn moved(epoch: u32) -> ServedRoles {
    let members = (0..NODES as u16)
        .map(|s| match s {
            1 => vec![2, 3, 0],
            _ => (0..REPLICATION as u16)
                .map(|i| (s + i) % NODES as u16)
                .collect(),
        })
        .collect();
    ServedRoles {
        epoch,
        members,
        joining: vec![Vec::new(); NODES],
        renewed: Vec::new(),
    }
}

/// Every node's results holding the Smallbank rows of `w` that `roles`
/// gives it, reporting `roles` (or nothing, for `report = false`).
fn results(w: &Smallbank, roles: &ServedRoles, report: bool) -> Vec<Results> {
    let placement = Placement::new(NODES, REPLICATION).unwrap();
    let mut out: Vec<Results> = (0..NODES as u16)
        .map(|n| Results {
            roles: report.then(|| roles.clone()),
            ..super::kill_tests::survivor(n, true)
        })
        .collect();
    for (key, value) in w.initial_rows() {
        let shard = placement.shard(&key) as usize;
        for &m in &roles.members[shard] {
            out[m as usize].rows.push(Row {
                table: key.table,
                id: key.id,
                version: 1,
                value: to_hex(&value),
            });
        }
    }
    out
}

#[test]
fn the_replica_check_reads_the_replica_sets_the_nodes_served() {
    let w = Smallbank::new(200, None).unwrap();
    let served = results(&w, &moved(4), true);
    let m = Mirror::new(&w, NODES, REPLICATION, &served).unwrap();
    let m = m.with_failed(NodeMask::EMPTY.with(1));
    m.check_replicas().unwrap();
    // The same rows read under the ring's replica sets: node 0 holds shard
    // 1's rows, which the ring does not give it.
    let ring = Mirror::new(&w, NODES, REPLICATION, &results(&w, &moved(4), false)).unwrap();
    let r = ring.with_failed(NodeMask::EMPTY.with(1)).check_replicas();
    assert!(r.is_err(), "{r:?}");
}

#[test]
fn the_newest_epoch_s_replica_sets_count_and_disagreeing_or_bad_ones_are_refused() {
    let mut rs = vec![survivor_roles(0, moved(4)), survivor_roles(2, moved(4))];
    let ring = Roles::ring(NODES, REPLICATION);
    rs.push(survivor_roles(
        3,
        ServedRoles {
            epoch: 2,
            ..moved(0)
        },
    ));
    let roles = served_roles(NODES, REPLICATION, &rs).unwrap().unwrap();
    assert_ne!(roles, ring);
    assert_eq!(roles.members(1).collect::<Vec<_>>(), vec![2, 3, 0]);
    assert_eq!(served_roles(NODES, REPLICATION, &[]).unwrap(), None);
    let mut other = moved(4);
    other.members[1] = vec![2, 3, 1];
    rs.push(survivor_roles(1, other));
    let e = served_roles(NODES, REPLICATION, &rs).unwrap_err();
    assert!(
        e.to_string().contains("different replica sets in epoch 4"),
        "{e}"
    );
    let mut bad = moved(5);
    bad.members[3] = vec![3, 3];
    let e = served_roles(NODES, REPLICATION, &[survivor_roles(0, bad)]).unwrap_err();
    assert!(e.to_string().contains("listed twice"), "{e}");
}

fn survivor_roles(node: u16, roles: ServedRoles) -> Results {
    let w = Smallbank::new(2, None).unwrap();
    let mut r = results(&w, &roles, true).swap_remove(node as usize);
    r.rows.clear();
    r
}
