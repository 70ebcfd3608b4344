//! RDMA verbs endpoints over etcd (`splitkv_host::deploy::verbs`): each
//! member publishes its queue pair's endpoint in its address record, and
//! every member's driver writes the endpoints of the configured
//! incarnations into its [`VerbsPeers`] directory; a restarted process of a
//! node (a new queue pair at the same machine) replaces its predecessor's
//! endpoint once a configuration admits it.

use super::{drive, settings, Clock, DEADLINE_MS};
use crate::etcd_support::Etcd;
use splitkv_host::deploy::VerbsPeers;
use splitkv_host::membership_etcd::{EtcdMember, NodeAddresses};
use splitkv_layout::wire::NodeId;
use splitkv_nic::membership::Membership;
use splitkv_nic::net::verbs::{VerbsAddress, VerbsPeer};
use std::time::Instant;

/// The endpoint node `node`'s queue pair number `qpn` publishes.
fn endpoint(node: NodeId, qpn: u32) -> VerbsAddress {
    format!("gid=::ffff:10.0.0.{},qpn={qpn},qkey=0x11111111", node + 1)
        .parse()
        .expect("endpoint")
}

fn addresses(node: NodeId, qpn: u32) -> NodeAddresses {
    NodeAddresses {
        data: ([127, 0, 0, 1], 7100 + node).into(),
        control: ([127, 0, 0, 1], 7200 + node).into(),
        verbs: Some(endpoint(node, qpn)),
    }
}

/// Node `node` of three with queue pair `qpn`, filling `dir`.
fn connect(etcd: &Etcd, node: NodeId, qpn: u32, dir: &VerbsPeers, clock: &Clock) -> EtcdMember {
    let mut s = settings(&etcd.endpoint, "verbs", node, 3);
    s.poll_every_ms = 20;
    s.addresses = Some(addresses(node, qpn));
    s.verbs_peers = Some(dir.clone());
    EtcdMember::connect(s, clock.now()).expect("member connects")
}

/// The peer node `node` with queue pair `qpn` is to the others.
fn peer(node: NodeId, qpn: u32) -> Option<VerbsPeer> {
    let a = addresses(node, qpn);
    Some(endpoint(node, qpn).at(a.data))
}

#[test]
fn members_learn_each_others_queue_pairs_and_a_restart_replaces_one() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let dirs = [VerbsPeers::new(), VerbsPeers::new(), VerbsPeers::new()];
    let [mut m0, mut m1, old] =
        [0, 1, 2].map(|n| connect(&etcd, n, 0x100 + u32::from(n), &dirs[n as usize], &clock));
    let mut m2 = old;
    let first = [peer(0, 0x100), peer(1, 0x101), peer(2, 0x102)];
    let mut polled = vec![Vec::new(); 3];
    let ok = drive(
        &clock,
        &mut [&mut m0, &mut m1, &mut m2],
        &mut polled,
        |_, _, _| dirs.iter().all(|d| d.snapshot().1[..3] == first),
    );
    assert!(
        ok,
        "every directory has every endpoint within {DEADLINE_MS} ms: {:?}",
        dirs.map(|d| d.snapshot())
    );

    // Node 2 dies (no revoke: its lease lingers) and starts again with a
    // new queue pair: the survivors drop its old endpoint with its
    // incarnation, and take the new one once a configuration admits it.
    drop(m2);
    let restarted = VerbsPeers::new();
    let mut m2 = connect(&etcd, 2, 0x202, &restarted, &clock);
    let mut polled = vec![Vec::new(); 3];
    let ok = drive(
        &clock,
        &mut [&mut m0, &mut m1, &mut m2],
        &mut polled,
        |ms, _, _| {
            !ms[2].joining()
                && ms[0].current().contains(2)
                && dirs[..2]
                    .iter()
                    .all(|d| d.snapshot().1[2] == peer(2, 0x202))
        },
    );
    assert!(
        ok,
        "the new queue pair reaches the survivors within {DEADLINE_MS} ms: {:?}",
        dirs.map(|d| d.snapshot())
    );
    assert_eq!(
        restarted.snapshot().1[..2],
        first[..2],
        "and the restarted process learns theirs"
    );
}
