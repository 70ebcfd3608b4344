//! [`NodeMembership`] on a polling thread: the agent applies a
//! configuration to the running node, and once the lease runs out the node
//! is fenced (its runtime no longer polled, the cluster stopped with
//! [`ClusterError::Fenced`]); the membership's clock is shifted onto the
//! cluster's.

use super::membership::NodeMembership;
use super::{Cluster, ClusterError, ClusterParts};
use splitkv_layout::wire::NodeId;
use splitkv_nic::membership::{Configuration, Membership, MembershipError};
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::net::Transport;
use splitkv_nic::Nanos;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the scripted membership saw and answers.
#[derive(Debug, Default)]
struct Script {
    lease_until: Nanos,
    next: Option<Configuration>,
    current: Configuration,
    renewals: Vec<Nanos>,
}

/// A membership of node 0 driven by the test through shared state.
#[derive(Clone)]
struct Scripted(Arc<Mutex<Script>>);

impl Scripted {
    fn new(lease_until: Nanos) -> Scripted {
        Scripted(Arc::new(Mutex::new(Script {
            lease_until,
            current: Configuration::initial(1, 1),
            ..Script::default()
        })))
    }

    fn get(&self) -> std::sync::MutexGuard<'_, Script> {
        self.0.lock().unwrap()
    }
}

impl Membership for Scripted {
    fn node(&self) -> NodeId {
        0
    }
    fn current(&self) -> Configuration {
        self.get().current
    }
    fn lease_until(&self) -> Nanos {
        self.get().lease_until
    }
    fn renew(&mut self, now: Nanos) -> Result<(), MembershipError> {
        self.get().renewals.push(now);
        Ok(())
    }
    fn report_suspect(&mut self, _: NodeId, _: Nanos) -> Result<(), MembershipError> {
        Ok(())
    }
    fn poll(&mut self, _: Nanos) -> Option<Configuration> {
        let mut s = self.get();
        let c = s.next.take()?;
        s.current = c;
        Some(c)
    }
    fn report_caught_up(&mut self, _: u32, _: Nanos) -> Result<(), MembershipError> {
        Ok(())
    }
}

/// Longest wait for the polling thread to act.
const WAIT: Duration = Duration::from_secs(10);

/// The parts of a one-node cluster (replication 1, 100 keys, one thread)
/// over an in-memory transport, not started.
fn one_node() -> ClusterParts {
    Cluster::builder()
        .nodes(1)
        .replication(1)
        .capacity_keys(100)
        .threads(1)
        .build_parts(vec![
            Box::new(mem_network(1).pop().unwrap()) as Box<dyn Transport>
        ])
        .unwrap()
}

#[test]
fn the_agent_applies_configurations_and_fences_the_node_when_its_lease_runs_out() {
    let mut parts = one_node();
    let origin = Instant::now();
    parts.set_clock_origin(origin);
    // The lease ends 1 h after the membership's origin: nothing fences yet.
    let script = Scripted::new(3_600_000_000_000);
    script.get().next = Some(Configuration {
        epoch: 2,
        live: 1,
        ..Default::default()
    });
    let m = NodeMembership::new(Box::new(script.clone()), origin, 1_000_000);
    assert!(matches!(
        parts.set_membership(1, NodeMembership::new(Box::new(script.clone()), origin, 1)),
        Err(ClusterError::BadNode { .. })
    ));
    parts.set_membership(0, m).unwrap();
    let cluster = parts.start().unwrap();
    let t0 = Instant::now();
    while cluster.stats().nodes[0].epoch != 2 {
        assert!(t0.elapsed() < WAIT, "configuration not applied");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(cluster.check().is_ok());
    assert!(!script.get().renewals.is_empty());
    // The lease ends now: the next passes fence the node.
    let now_member = origin.elapsed().as_nanos() as Nanos;
    script.get().lease_until = now_member;
    let t0 = Instant::now();
    let err = loop {
        if let Err(e) = cluster.check() {
            break e;
        }
        assert!(t0.elapsed() < WAIT, "not fenced");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert!(
        matches!(&err, ClusterError::Fenced { node: 0, reason } if reason.contains("lease ran out")),
        "{err}"
    );
    let view = cluster.stats().nodes[0].membership.unwrap();
    assert!(matches!(
        view.stopped,
        Some(MembershipError::LeaseExpired { node: 0, .. })
    ));
    let iterations = cluster.stats().nodes[0].nic.iterations;
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(cluster.stats().nodes[0].nic.iterations, iterations);
    assert!(matches!(
        cluster.shutdown(),
        Err(ClusterError::Fenced { .. })
    ));
}

#[test]
fn the_membership_clock_is_shifted_onto_the_clusters() {
    let mut parts = one_node();
    // The membership started 2 s before the cluster's clock.
    let member_origin = Instant::now();
    let cluster_origin = member_origin + Duration::from_secs(2);
    parts.set_clock_origin(cluster_origin);
    // Its lease ends 2.5 s after its origin: 0.5 s of the cluster's clock.
    let script = Scripted::new(2_500_000_000);
    let m = NodeMembership::new(Box::new(script.clone()), member_origin, 1_000_000);
    parts.set_membership(0, m).unwrap();
    let cluster = parts.start().unwrap();
    let t0 = Instant::now();
    while script.get().renewals.is_empty() {
        assert!(t0.elapsed() < WAIT, "no renewal");
        std::thread::sleep(Duration::from_millis(1));
    }
    // The first renewal came at the cluster's time 0 or later (the
    // cluster's clock starts in 2 s): the membership saw 2 s or more.
    assert!(script.get().renewals[0] >= 2_000_000_000);
    std::thread::sleep(Duration::from_millis(20));
    let view = cluster.stats().nodes[0].membership.unwrap();
    assert_eq!(view.lease_until_ns, 500_000_000);
    drop(cluster);
}
