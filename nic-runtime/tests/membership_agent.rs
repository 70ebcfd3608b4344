//! The membership agent (`nic-runtime/src/membership.rs`) between a runtime
//! and its `Membership`: it renews the lease on schedule, reports a peer
//! whose session fell silent as a suspect, and applies the configuration
//! that follows (epoch raised, the peer failed for the coordinator); a node
//! configured out learns that it must stop, and so does a node whose lease
//! ran out (fencing, Xenic §4.2.1): at once, not at its next renewal. A
//! configuration that admits a peer at a new data address re-points the
//! transport before it is applied, and packets from the old address are
//! then dropped and counted (a replacement machine).

mod support;

use splitkv_layout::wire::{BodyWriter, MsgKind, NodeId};
use splitkv_layout::{Key, ObjectMeta, TxId};
use splitkv_nic::membership::{Configuration, Membership, MembershipAgent, MembershipError};
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::net::session::SessionConfig;
use splitkv_nic::net::stack::StackConfig;
use splitkv_nic::net::{Transport, TxPacket};
use splitkv_nic::{Nanos, Placement};
use std::net::SocketAddr;
use support::{lone_runtime, peer_packet};

/// A membership that records requests and hands out scripted configurations.
#[derive(Default)]
struct Scripted {
    renewals: Vec<Nanos>,
    suspects: Vec<(NodeId, Nanos)>,
    next: Option<Configuration>,
    current: Configuration,
    /// What `lease_until` answers (0: never granted).
    lease_until: Nanos,
    /// What `data_address` answers, per node.
    addresses: [Option<SocketAddr>; 2],
}

impl Membership for Scripted {
    fn node(&self) -> NodeId {
        0
    }
    fn current(&self) -> Configuration {
        self.current
    }
    fn lease_until(&self) -> Nanos {
        self.lease_until
    }
    fn renew(&mut self, now: Nanos) -> Result<(), MembershipError> {
        self.renewals.push(now);
        Ok(())
    }
    fn report_suspect(&mut self, suspect: NodeId, now: Nanos) -> Result<(), MembershipError> {
        self.suspects.push((suspect, now));
        Ok(())
    }
    fn poll(&mut self, _: Nanos) -> Option<Configuration> {
        let c = self.next.take()?;
        self.current = c;
        Some(c)
    }
    fn report_caught_up(&mut self, _: u32, _: Nanos) -> Result<(), MembershipError> {
        Ok(())
    }
    fn data_address(&self, node: NodeId) -> Option<SocketAddr> {
        self.addresses.get(node as usize).copied().flatten()
    }
}

#[test]
fn a_silent_peer_is_reported_and_the_next_configuration_applied() {
    const SILENCE_NS: Nanos = 1_000_000;
    const RENEW_NS: Nanos = 300_000;
    let mut net = mem_network(2);
    let mut peer = net.pop().unwrap();
    let transport = net.pop().unwrap();
    let cfg = StackConfig {
        session: SessionConfig {
            silence_ns: SILENCE_NS,
            ..SessionConfig::default()
        },
        ..StackConfig::default()
    };
    let mut lone = lone_runtime(Placement::new(2, 2).unwrap(), transport, 64, cfg);
    let nic = &mut lone.nic;
    let mut m = Scripted {
        current: Configuration::initial(2, 2),
        lease_until: Nanos::MAX,
        ..Scripted::default()
    };
    let mut agent = MembershipAgent::new(RENEW_NS);
    // Node 1 sends one LOG; node 0 answers and waits for an ack that never comes.
    let mut w = BodyWriter::new();
    w.begin_items(MsgKind::Log, TxId::from_bits(7));
    w.push_item(&Key::new(0, 1), ObjectMeta(1), b"x");
    let pkt = peer_packet(0, &w);
    peer.tx_burst(
        0,
        &[TxPacket {
            dst: 0,
            bytes: &pkt,
        }],
    );
    let mut now = 0;
    while now <= 2 * SILENCE_NS {
        nic.run_iteration(now);
        agent.run_iteration(now, nic, &mut m);
        now += 10_000;
    }
    assert_eq!(m.suspects.len(), 1, "reported once: {:?}", m.suspects);
    let (suspect, at) = m.suspects[0];
    assert_eq!(suspect, 1);
    assert!((SILENCE_NS..SILENCE_NS + 20_000).contains(&at), "{at}");
    // Renewed on schedule: every RENEW_NS from 0.
    assert_eq!(m.renewals.len() as u64, 2 * SILENCE_NS / RENEW_NS + 1);
    assert!(m.renewals.windows(2).all(|p| p[1] - p[0] == RENEW_NS));
    // The manager's next configuration leaves node 1 out.
    m.next = Some(m.current.without(1 << 1));
    nic.run_iteration(now);
    agent.run_iteration(now, nic, &mut m);
    assert_eq!(nic.epoch(), 2);
    assert_eq!(nic.failed_peers(), 1 << 1);
    assert_eq!(agent.stats().configurations, 1);
    assert!(agent.removed().is_none());
    // A configuration without this node: it must stop.
    m.next = Some(m.current.without(1 << 0));
    agent.run_iteration(now + 1, nic, &mut m);
    assert_eq!(
        agent.removed(),
        Some(&MembershipError::Removed { node: 0, epoch: 3 })
    );
    let renewals = m.renewals.len();
    agent.run_iteration(now + 10 * RENEW_NS, nic, &mut m);
    assert_eq!(m.renewals.len(), renewals, "a removed node renews no more");
}

/// A lone node 0 of two over the mem transport, for the fencing tests.
fn lone() -> support::LoneRuntime {
    let mut net = mem_network(2);
    let _peer = net.pop().unwrap();
    let transport = net.pop().unwrap();
    lone_runtime(
        Placement::new(2, 2).unwrap(),
        transport,
        64,
        StackConfig::default(),
    )
}

const LEASE_NS: Nanos = 1_000_000;
/// The agent's renewal interval in the fencing tests: longer than the
/// lease, so only the lease check (not a refused renewal) can stop the node.
const RENEW_LONG_NS: Nanos = 10 * LEASE_NS;

#[test]
fn the_node_stops_when_its_lease_runs_out_not_at_its_next_renewal() {
    let mut lone = lone();
    let nic = &mut lone.nic;
    let mut m = Scripted {
        current: Configuration::initial(2, 2),
        lease_until: LEASE_NS,
        ..Scripted::default()
    };
    let mut agent = MembershipAgent::new(RENEW_LONG_NS);
    agent.run_iteration(0, nic, &mut m);
    assert_eq!(m.renewals, vec![0]);
    assert_eq!(agent.lease_until(), LEASE_NS);
    assert!(agent.serving(LEASE_NS - 1));
    // Between two runs of the agent, the cheap check already says stop.
    assert!(!agent.serving(LEASE_NS), "serving past the lease's end");
    agent.run_iteration(LEASE_NS - 1, nic, &mut m);
    assert!(agent.removed().is_none());
    assert!(agent.run_iteration(LEASE_NS, nic, &mut m));
    assert_eq!(
        agent.removed(),
        Some(&MembershipError::LeaseExpired {
            node: 0,
            lease_until: LEASE_NS
        })
    );
    assert_eq!(agent.stats().lease_expired, 1);
    // Stopped for good: a later grant does not bring it back, nothing is
    // renewed or applied.
    m.lease_until = 100 * LEASE_NS;
    m.next = Some(m.current.without(1 << 1));
    let epoch = nic.epoch();
    assert!(!agent.run_iteration(RENEW_LONG_NS, nic, &mut m));
    assert!(!agent.serving(RENEW_LONG_NS));
    assert_eq!(m.renewals, vec![0]);
    assert_eq!(nic.epoch(), epoch, "a fenced node applies no configuration");
    assert_eq!(nic.failed_peers(), 0);
}

#[test]
fn a_grant_before_the_end_keeps_the_node_serving() {
    let mut lone = lone();
    let nic = &mut lone.nic;
    let mut m = Scripted {
        current: Configuration::initial(2, 2),
        lease_until: LEASE_NS,
        ..Scripted::default()
    };
    let mut agent = MembershipAgent::new(RENEW_LONG_NS);
    agent.run_iteration(0, nic, &mut m);
    m.lease_until = 2 * LEASE_NS;
    agent.run_iteration(LEASE_NS - 1, nic, &mut m);
    assert!(agent.serving(LEASE_NS));
    agent.run_iteration(LEASE_NS, nic, &mut m);
    assert!(agent.removed().is_none());
    assert!(!agent.serving(2 * LEASE_NS));
}

#[test]
fn no_fencing_before_the_first_grant_and_a_lost_lease_stops_the_node() {
    let mut lone = lone();
    let nic = &mut lone.nic;
    let mut m = Scripted {
        current: Configuration::initial(2, 2),
        ..Scripted::default()
    };
    let mut agent = MembershipAgent::new(RENEW_LONG_NS);
    // No lease yet (0): nothing to fence on.
    agent.run_iteration(5 * LEASE_NS, nic, &mut m);
    assert!(agent.serving(5 * LEASE_NS));
    assert!(agent.removed().is_none());
    // Granted, then reported gone (0 again): the node stops.
    m.lease_until = 10 * LEASE_NS;
    agent.run_iteration(6 * LEASE_NS, nic, &mut m);
    assert!(agent.serving(6 * LEASE_NS));
    m.lease_until = 0;
    agent.run_iteration(6 * LEASE_NS + 1, nic, &mut m);
    assert!(matches!(
        agent.removed(),
        Some(MembershipError::LeaseExpired { node: 0, .. })
    ));
}

/// Node 1 of two, restarted as incarnation 5 on another machine: the
/// configuration that admits it comes with its new address, the agent
/// re-points node 0's transport before applying it (once: the next
/// configuration names the same address), and a packet from node 1's old
/// address (its old incarnation) is then dropped and counted by the
/// transport, before any session sees it.
#[cfg(target_os = "linux")]
#[test]
fn a_peer_admitted_at_a_new_address_is_re_pointed_and_its_old_address_dropped() {
    use splitkv_nic::net::udp::{udp_loopback_network, UdpConfig, UdpTransport, UDP_MTU_DEFAULT};
    let mut ends = udp_loopback_network(2, UDP_MTU_DEFAULT).unwrap();
    let mut old = ends.pop().unwrap();
    let a = ends.pop().unwrap();
    let new = UdpTransport::bind(UdpConfig::loopback()).unwrap();
    let placement = Placement::new(2, 2).unwrap();
    let procedures = splitkv_nic::ProcedureRegistry::new();
    let cfg = StackConfig::default();
    let mut lone = support::node_runtime(0, placement, a, 64, cfg, procedures);
    let nic = &mut lone.nic;
    let admitted = Configuration::initial(2, 2)
        .without(1 << 1)
        .rejoining(1, 5)
        .expect("1 is out");
    let mut m = Scripted {
        current: Configuration::initial(2, 2),
        lease_until: Nanos::MAX,
        next: Some(admitted),
        addresses: [None, Some(new.local_addr())],
        ..Scripted::default()
    };
    let mut agent = MembershipAgent::new(RENEW_LONG_NS);
    agent.run_iteration(0, nic, &mut m);
    assert_eq!(nic.epoch(), admitted.epoch);
    assert_eq!(agent.stats().peers_repointed, 1);
    assert_eq!(nic.stats().peer_addresses.repointed, 1);
    m.next = admitted.caught_up(1);
    agent.run_iteration(1, nic, &mut m);
    assert_eq!(agent.stats().configurations, 2);
    assert_eq!(agent.stats().peers_repointed, 1, "same address: no move");
    let mut w = BodyWriter::new();
    w.begin_items(MsgKind::Log, TxId::from_bits(7));
    w.push_item(&Key::new(0, 1), ObjectMeta(1), b"x");
    let pkt = peer_packet(0, &w);
    assert_eq!(
        old.tx_burst(
            0,
            &[TxPacket {
                dst: 0,
                bytes: &pkt
            }]
        ),
        1
    );
    old.tx_flush(0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut now = 2;
    while nic.stats().peer_addresses.stale_address_drops == 0
        && std::time::Instant::now() < deadline
    {
        nic.run_iteration(now);
        now += 1_000;
    }
    let s = nic.stats();
    assert_eq!(s.peer_addresses.stale_address_drops, 1);
    assert_eq!(s.net.sessions.packets_received, 0, "no session saw it");
}

/// A transport without addresses (in-process) refuses a published address:
/// counted, and the configuration is applied all the same.
#[test]
fn a_transport_without_addresses_refuses_and_the_configuration_still_applies() {
    let mut lone = lone();
    let nic = &mut lone.nic;
    let next = Configuration::initial(2, 2).without(1 << 1);
    let mut m = Scripted {
        current: Configuration::initial(2, 2),
        lease_until: Nanos::MAX,
        next: Some(next.rejoining(1, 5).expect("1 is out")),
        addresses: [None, Some("127.0.0.2:7000".parse().unwrap())],
        ..Scripted::default()
    };
    let mut agent = MembershipAgent::new(RENEW_LONG_NS);
    agent.run_iteration(0, nic, &mut m);
    assert_eq!(agent.stats().peer_addresses_refused, 1);
    assert_eq!(agent.stats().peers_repointed, 0);
    assert_eq!(nic.epoch(), next.epoch + 1);
}
