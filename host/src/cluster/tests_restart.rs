//! [`Cluster::restart_nic`]: a node's NIC runtime restarts on its
//! polling thread (a NIC-runtime-only crash), rebuilds from its
//! peers over the in-process network and serves again, under a newer
//! incarnation; a node the process does not hold is refused.

use super::{Cluster, ClusterError};
use std::time::{Duration, Instant};

/// Longest the restarted node may take to serve again (a rebuild over the
/// in-process network takes a few milliseconds).
const SERVING_AGAIN_MAX: Duration = Duration::from_secs(10);

#[test]
fn a_restarted_nic_runtime_rebuilds_and_serves_again_under_a_new_incarnation() {
    let cluster = Cluster::builder()
        .nodes(3)
        .replication(3)
        .capacity_keys(1_000)
        .value_bytes_max(8)
        .threads(2)
        .build()
        .unwrap();
    let before = loop {
        let s = cluster.stats().nodes[1].clone();
        if s.nic_incarnation != 0 || cluster.now() > 50_000_000 {
            break s;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    assert_eq!(before.rebuild.restarts, 0);
    assert!(before.nic_serving);
    let restarting = cluster.shared.nic_restarting[1].clone();
    assert!(!restarting.load(std::sync::atomic::Ordering::Acquire));
    cluster.restart_nic(1).unwrap();
    let t0 = Instant::now();
    let after = loop {
        let s = cluster.stats().nodes[1].clone();
        if s.rebuild.rebuilds_done == 1 && s.nic_serving {
            break s;
        }
        assert!(t0.elapsed() < SERVING_AGAIN_MAX, "{:?}", s.rebuild);
        std::thread::sleep(Duration::from_millis(2));
    };
    assert_eq!(after.rebuild.restarts, 1);
    // Its gateway's flag is clear again once it serves (set meanwhile).
    let t0 = Instant::now();
    while restarting.load(std::sync::atomic::Ordering::Acquire) {
        assert!(
            t0.elapsed() < SERVING_AGAIN_MAX,
            "the restart flag stayed set"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(after.nic_incarnation, before.nic_incarnation + 1);
    // The other nodes were not restarted.
    for n in [0, 2] {
        assert_eq!(cluster.stats().nodes[n].rebuild.restarts, 0);
    }
    assert!(matches!(
        cluster.restart_nic(3),
        Err(ClusterError::BadNode { node: 3, .. })
    ));
    cluster.check().unwrap();
    cluster.shutdown().unwrap();
}
