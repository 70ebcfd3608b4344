//! [`ClusterBuilder::build_local_parts`]: one node of a larger cluster holds
//! only itself, loads only the rows it replicates, and reports under its own
//! node id; three of them over one network are the cluster split apart.

use super::{Cluster, ClusterError};
use splitkv_layout::Key;
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::net::Transport;

#[test]
fn a_local_node_holds_and_loads_only_itself() {
    let builder = Cluster::builder()
        .nodes(3)
        .replication(2)
        .capacity_keys(1_000)
        .value_bytes_max(8)
        .threads(1);
    let rows: Vec<(Key, Vec<u8>)> = (0..300).map(|i| (Key::new(1, i), vec![1u8; 8])).collect();
    let mut held = 0;
    for (n, t) in mem_network(3).into_iter().enumerate() {
        let node = n as u16;
        let mut parts = builder
            .build_local_parts(node, Box::new(t) as Box<dyn Transport>)
            .unwrap();
        assert_eq!(parts.node_ids(), &[node]);
        assert_eq!(parts.nodes.len(), 1);
        let other = (node + 1) % 3;
        assert!(matches!(
            parts.client(other),
            Err(ClusterError::BadNode { .. })
        ));
        let loaded = parts.load(rows.iter().cloned(), |_| {}).unwrap();
        let placement = parts.placement;
        let mine = rows
            .iter()
            .filter(|(k, _)| placement.is_replica(node, k))
            .count();
        assert!(
            mine > 0 && mine < rows.len(),
            "replication 2 of 3 holds some rows"
        );
        assert_eq!(loaded.rows as usize, mine);
        assert_eq!(parts.table(node).unwrap().len(), mine);
        assert!(parts.table(other).is_err());
        held += mine;
        let cluster = parts.start().unwrap();
        assert_eq!(cluster.node_ids(), &[node]);
        assert_eq!(cluster.stats().nodes[0].node, node);
        assert!(cluster.client(node).is_ok());
        cluster.shutdown().unwrap();
    }
    assert_eq!(held, 2 * rows.len(), "every row on both its replicas");
    let bad = builder.build_local_parts(3, Box::new(mem_network(1).pop().unwrap()));
    assert!(matches!(bad, Err(ClusterError::BadNode { node: 3, .. })));
}
