//! Copy reads on a running cluster (re-replication): a configuration that makes
//! node 2 copying gets a snapshot served by each of its shards' primaries
//! from their host tables (scanned on the host worker's thread,
//! [`super::copy_reads`]), node 2 reports itself caught up, and the
//! configuration that makes it a replica again ends its copy.

use super::membership::NodeMembership;
use super::Cluster;
use splitkv_layout::wire::NodeId;
use splitkv_layout::Key;
use splitkv_nic::membership::{Configuration, Membership, MembershipError};
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::net::Transport;
use splitkv_nic::Nanos;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const NODES: usize = 3;
/// Longest wait for the polling threads to act.
const WAIT: Duration = Duration::from_secs(20);

/// The configuration every node is handed, and the caught-up reports.
#[derive(Debug, Default)]
struct Manager {
    current: Configuration,
    /// Per node, the configuration it has not taken yet.
    pending: [Option<Configuration>; NODES],
    caught_up: Vec<(NodeId, u32)>,
}

impl Manager {
    fn issue(&mut self, c: Configuration) {
        self.current = c;
        self.pending = [Some(c); NODES];
    }
}

/// Node `.1`'s handle on the shared manager.
struct Member(Arc<Mutex<Manager>>, NodeId);

impl Membership for Member {
    fn node(&self) -> NodeId {
        self.1
    }
    fn current(&self) -> Configuration {
        self.0.lock().unwrap().current
    }
    fn lease_until(&self) -> Nanos {
        Nanos::MAX / 2
    }
    fn renew(&mut self, _: Nanos) -> Result<(), MembershipError> {
        Ok(())
    }
    fn report_suspect(&mut self, _: NodeId, _: Nanos) -> Result<(), MembershipError> {
        Ok(())
    }
    fn poll(&mut self, _: Nanos) -> Option<Configuration> {
        self.0.lock().unwrap().pending[self.1 as usize].take()
    }
    fn report_caught_up(&mut self, epoch: u32, _: Nanos) -> Result<(), MembershipError> {
        let mut m = self.0.lock().unwrap();
        m.caught_up.push((self.1, epoch));
        if m.current.epoch == epoch {
            if let Some(next) = m.current.caught_up(self.1) {
                m.issue(next);
            }
        }
        Ok(())
    }
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < WAIT, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_copying_node_gets_snapshots_from_the_primaries_host_tables_and_catches_up() {
    let transports = mem_network(NODES)
        .into_iter()
        .map(|t| Box::new(t) as Box<dyn Transport>)
        .collect();
    let mut parts = Cluster::builder()
        .nodes(NODES)
        .replication(2)
        .capacity_keys(1_000)
        .threads(2)
        .build_parts(transports)
        .unwrap();
    let rows: Vec<(Key, Vec<u8>)> = (0..300u64)
        .map(|i| (Key::new(1, i), i.to_le_bytes().to_vec()))
        .collect();
    parts.load(rows, |_| {}).unwrap();
    let origin = Instant::now();
    parts.set_clock_origin(origin);
    let manager = Arc::new(Mutex::new(Manager {
        current: Configuration::initial(NODES, 2),
        ..Manager::default()
    }));
    for n in 0..NODES as NodeId {
        let member = Member(manager.clone(), n);
        let m = NodeMembership::new(Box::new(member), origin, 1_000_000);
        parts.set_membership(n, m).unwrap();
    }
    let cluster = parts.start().unwrap();
    // Node 2 copying (as after a rejoin; configuring it out first would
    // fence this in-process node for good).
    let mut copying = Configuration {
        epoch: 2,
        copying: 0b100,
        ..Configuration::initial(NODES, 2)
    };
    for shard in [1, 2] {
        copying.shards[shard].joining = 0b100;
    }
    manager.lock().unwrap().issue(copying);
    // The copy ends in a configuration where node 2 is a replica again.
    wait_until("node 2 caught up and configured a replica", || {
        cluster.check().unwrap();
        manager.lock().unwrap().current.copying == 0
            && cluster.stats().nodes.iter().all(|n| n.epoch == 3)
    });
    wait_until("node 2 no longer copying", || {
        !cluster.stats().nodes[2].copying
    });
    cluster.check().unwrap();
    let stats = cluster.stats();
    let sources: Vec<_> = stats.nodes[..2].iter().map(|n| n.copy).collect();
    // Each shard node 2 replicates has a primary that scanned its table.
    assert!(sources.iter().any(|c| c.snapshots > 0), "{sources:?}");
    let objects: u64 = sources.iter().map(|c| c.snapshot_objects).sum();
    assert!(objects > 0, "{sources:?}");
    assert!(
        stats.nodes[2].copy.done_received > 0,
        "{:?}",
        stats.nodes[2].copy
    );
    assert_eq!(manager.lock().unwrap().caught_up, vec![(2, 2)]);
    cluster.shutdown().unwrap();
}
