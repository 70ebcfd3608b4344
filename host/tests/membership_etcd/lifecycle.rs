//! The cluster lifecycle against one etcd that outlives every process
//! (`membership_etcd`, "Lifecycle"): a whole cluster stopped and started
//! again forms the next generation (whether its leases were revoked, as a
//! drained node's are, or still held, as a killed one's); a restarted node
//! of a live cluster joins it; a running process of an ended generation
//! and a joiner nobody alive can admit fail-stop; another cluster's
//! configuration, or one of another shape, is refused at start; a running
//! cluster whose prefix is cleared by force (and reused) stops.

use super::{drive, settings, Clock, DEADLINE_MS};
use crate::etcd_support::Etcd;
use splitkv_host::membership_etcd::admin::EtcdAdmin;
use splitkv_host::membership_etcd::keys::Lineage;
use splitkv_host::membership_etcd::{Displacement, EtcdError, EtcdMember, EtcdSettings, FailStop};
use splitkv_layout::wire::NodeId;
use splitkv_nic::membership::{Configuration, Membership};
use std::time::{Duration, Instant};

/// The test cluster's id.
const CLUSTER_ID: u32 = 7;

fn lifecycle_settings(etcd: &Etcd, cluster: &str, node: NodeId, nodes: usize) -> EtcdSettings {
    let mut s = settings(&etcd.endpoint, cluster, node, nodes);
    s.cluster_id = CLUSTER_ID;
    s
}

/// Every node of `nodes` started at once (each connect on a thread of its
/// own, as separate processes start).
fn start_all(etcd: &Etcd, cluster: &str, nodes: usize, clock: &Clock) -> Vec<EtcdMember> {
    std::thread::scope(|scope| {
        let started: Vec<_> = (0..nodes as NodeId)
            .map(|n| {
                let s = lifecycle_settings(etcd, cluster, n, nodes);
                let now = clock.now();
                scope.spawn(move || EtcdMember::connect(s, now))
            })
            .collect();
        started
            .into_iter()
            .map(|t| t.join().expect("no panic").expect("every node starts"))
            .collect()
    })
}

/// Every member admitted (not joining) in `generation`, in one
/// configuration with every node live and nothing copying.
fn assert_admitted_in(ms: &[EtcdMember], generation: u32) -> Configuration {
    let c = ms[0].current();
    for m in ms {
        assert!(!m.joining(), "node {} admitted", m.node());
        assert_eq!(m.lineage().generation, generation);
        assert_eq!(m.lineage().cluster_id, Some(CLUSTER_ID));
        assert_eq!(m.current(), c, "one configuration");
    }
    let all = (1u32 << ms.len()) - 1;
    assert_eq!((c.live, c.copying), (all, 0), "{c:?}");
    c
}

/// Drained (leases revoked) and started again: the next generation at
/// once, one epoch higher, incarnations higher; then again.
#[test]
fn a_whole_cluster_stopped_and_started_again_forms_the_next_generation() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let first = start_all(&etcd, "life", 3, &clock);
    let c1 = assert_admitted_in(&first, 1);
    assert_eq!(c1.epoch, 1);
    let incs: Vec<u32> = first.iter().map(EtcdMember::incarnation).collect();
    for m in first {
        m.leave();
    }
    let second = start_all(&etcd, "life", 3, &clock);
    let c2 = assert_admitted_in(&second, 2);
    assert_eq!(c2.epoch, 2, "epochs keep rising");
    for (m, old) in second.iter().zip(&incs) {
        assert!(m.incarnation() > *old, "incarnations keep rising");
    }
    for m in second {
        m.leave();
    }
    let third = start_all(&etcd, "life", 3, &clock);
    assert_eq!(assert_admitted_in(&third, 3).epoch, 3);
}

/// Killed (leases left to run out, as after SIGKILL) and started again at
/// once: the new processes wait for the old keys to go, then form the
/// next generation; none is left joining.
#[test]
fn a_whole_cluster_killed_and_started_again_within_the_ttl_waits_then_forms_the_next_generation() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let first = start_all(&etcd, "killed", 3, &clock);
    assert_admitted_in(&first, 1);
    drop(first); // no revoke
    let began = Instant::now();
    let second = start_all(&etcd, "killed", 3, &clock);
    assert_admitted_in(&second, 2);
    assert!(
        began.elapsed().as_millis() < u128::from(DEADLINE_MS),
        "formed within {DEADLINE_MS} ms"
    );
}

/// A restarted node of a live cluster is answered by the survivors and
/// joins their generation; the survivors stay in it.
#[test]
fn a_restarted_node_of_a_live_cluster_joins_its_generation() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let mut ms = start_all(&etcd, "live", 3, &clock);
    drop(ms.pop()); // node 2 killed
    let s = lifecycle_settings(&etcd, "live", 2, 3);
    let mut restarted = EtcdMember::connect(s, clock.now()).expect("node 2 restarts");
    assert!(restarted.joining());
    assert_eq!(restarted.lineage().generation, 1);
    let [mut m0, mut m1] = <[EtcdMember; 2]>::try_from(ms).expect("two survivors");
    let mut polled = vec![Vec::new(); 3];
    let ok = drive(
        &clock,
        &mut [&mut m0, &mut m1, &mut restarted],
        &mut polled,
        |ms, _, _| !ms[2].joining(),
    );
    assert!(ok, "admitted: {:?}", restarted.stats());
    for m in [&m0, &m1, &restarted] {
        assert_eq!(m.fail_stop(clock.now()), None);
        assert_eq!(m.lineage().generation, 1);
    }
}

/// A process whose generation ended behind its back (its lease ran out
/// while it was not renewed, and the cluster started again) stops with
/// the reason; a joiner whose last live member died stops too, and started
/// again forms the next generation.
#[test]
fn a_process_of_an_ended_generation_and_a_stranded_joiner_fail_stop() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let mut old = start_all(&etcd, "ended", 1, &clock).remove(0);
    // Not renewed: etcd lets its lease run out; a new process starts.
    let new = start_all(&etcd, "ended", 1, &clock).remove(0);
    assert_eq!(new.lineage().generation, 2);
    let mut polled = vec![Vec::new()];
    // Its own believed lease ran out before etcd's did (fencing), so that
    // is the reason it gives; the generation check is a second fence.
    let ok = drive(&clock, &mut [&mut old], &mut polled, |ms, _, _| {
        ms[0].fail_stop(clock.now()).is_some()
    });
    assert!(ok, "the old process stopped");
    assert!(
        polled[0].is_empty(),
        "it took no configuration of generation 2"
    );
    drop((old, new));

    let mut ms = start_all(&etcd, "stranded", 2, &clock);
    drop(ms.pop()); // node 1 killed
    let s = lifecycle_settings(&etcd, "stranded", 1, 2);
    let mut joiner = EtcdMember::connect(s.clone(), clock.now()).expect("node 1 restarts");
    assert!(joiner.joining());
    drop(ms); // node 0, the last live member, killed
    let mut polled = vec![Vec::new()];
    let ok = drive(&clock, &mut [&mut joiner], &mut polled, |ms, _, _| {
        ms[0]
            .fail_stop(clock.now())
            .is_some_and(|f| matches!(f, FailStop::Stranded { .. }))
    });
    assert!(ok, "stranded: {:?}", joiner.fail_stop(clock.now()));
    drop(joiner);
    let both = start_all(&etcd, "stranded", 2, &clock);
    assert_admitted_in(&both, 2);
}

/// Another cluster's configuration under the prefix, or one of another
/// shape, is refused at start with both named; the stored one is kept.
#[test]
fn another_clusters_or_shapes_configuration_is_refused_at_start() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let ms = start_all(&etcd, "mine", 3, &clock);
    let mut other = lifecycle_settings(&etcd, "mine", 0, 3);
    other.cluster_id = 8;
    match EtcdMember::connect(other, clock.now()) {
        Err(EtcdError::Foreign {
            stored: 7,
            ours: 8,
            key,
        }) => assert_eq!(key, "/mine/config"),
        r => panic!("refused as another cluster's: {r:?}"),
    }
    let mut four = lifecycle_settings(&etcd, "mine", 0, 4);
    four.replication = 3;
    match EtcdMember::connect(four, clock.now()) {
        Err(
            e @ EtcdError::OtherShape {
                stored: (3, 3),
                ours: (4, 3),
                ..
            },
        ) => {
            assert!(e.to_string().contains("3 nodes with replication 3"), "{e}")
        }
        r => panic!("refused as another shape: {r:?}"),
    }
    assert_eq!(ms[0].lineage(), Lineage::first(CLUSTER_ID));
    for m in &ms {
        assert_eq!(m.fail_stop(clock.now()), None);
    }
}

/// Two clusters side by side on one etcd, under their own prefixes: a
/// node of one dies and is configured out; the other's configuration does
/// not move, and each prefix names its own cluster.
#[test]
fn two_clusters_on_one_etcd_do_not_see_each_other() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let mut a = start_all(&etcd, "side-a", 3, &clock);
    let b = start_all(&etcd, "side-b", 3, &clock);
    drop(a.pop()); // node 2 of cluster a killed
    let [mut a0, mut a1] = <[EtcdMember; 2]>::try_from(a).expect("two survivors");
    let [mut b0, mut b1, mut b2] = <[EtcdMember; 3]>::try_from(b).expect("three");
    let mut polled = vec![Vec::new(); 5];
    let ok = drive(
        &clock,
        &mut [&mut a0, &mut a1, &mut b0, &mut b1, &mut b2],
        &mut polled,
        |ms, _, _| !ms[0].current().contains(2) && !ms[1].current().contains(2),
    );
    assert!(ok, "cluster a configured its dead node out");
    for m in [&b0, &b1, &b2] {
        assert_eq!(m.current().epoch, 1, "cluster b did not move");
        assert_eq!(m.fail_stop(clock.now()), None);
    }
    assert!(polled[2..].iter().all(Vec::is_empty), "{polled:?}");
}

/// Clearing a running cluster's prefix by force deletes its keys, not its
/// leases: renewals alone would keep its processes serving, so each stops
/// on finding its configuration gone (or, once the prefix is reused,
/// another cluster's), and counts the configuration it refused.
#[test]
fn a_running_cluster_whose_prefix_is_cleared_by_force_stops() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let rpc = Duration::from_secs(2);
    for reuse in [false, true] {
        let [mut a, mut b] = <[EtcdMember; 2]>::try_from(start_all(&etcd, "cleared", 2, &clock))
            .expect("two members");
        let mut admin = EtcdAdmin::connect(std::slice::from_ref(&etcd.endpoint), "cleared", rpc)
            .expect("admin connects");
        assert!(admin.clear(true).expect("forced clear") > 0, "keys deleted");
        // Reused at once by another cluster (its first process registers).
        let other = reuse.then(|| {
            let mut s = lifecycle_settings(&etcd, "cleared", 0, 2);
            s.cluster_id = CLUSTER_ID + 1;
            EtcdMember::connect(s, clock.now()).expect("another cluster starts")
        });
        let mut polled = vec![Vec::new(); 2];
        let ok = drive(&clock, &mut [&mut a, &mut b], &mut polled, |ms, _, _| {
            ms.iter().all(|m| m.fail_stop(clock.now()).is_some())
        });
        assert!(ok, "both stopped (reuse {reuse})");
        for m in [&a, &b] {
            match m.fail_stop(clock.now()) {
                Some(FailStop::Displaced(Displacement::Gone)) => {}
                Some(FailStop::Displaced(Displacement::Foreign { stored })) if reuse => {
                    assert_eq!(stored, CLUSTER_ID + 1)
                }
                f => panic!(
                    "node {} stopped as displaced (reuse {reuse}): {f:?}",
                    m.node()
                ),
            }
            assert!(m.stats().configs_refused >= 1, "counted: {:?}", m.stats());
        }
        assert!(polled.iter().all(Vec::is_empty), "{polled:?}");
        drop((a, b, other));
        admin.clear(true).expect("cleared for the next round");
    }
}

/// A whole cluster stopped in the middle of a change: killed right after a
/// recovery epoch's configuration left a dead node out, or drained while
/// a restarted node was being copied. Started again, it forms the next
/// generation with every node a member and nothing copying: no state of
/// the interrupted change carries over.
#[test]
fn a_cluster_stopped_during_a_recovery_or_a_copy_forms_the_next_generation() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    // Killed during a recovery epoch.
    let mut ms = start_all(&etcd, "midrecovery", 3, &clock);
    drop(ms.pop()); // node 2 killed
    let [mut m0, mut m1] = <[EtcdMember; 2]>::try_from(ms).expect("two survivors");
    let mut polled = vec![Vec::new(); 2];
    let ok = drive(&clock, &mut [&mut m0, &mut m1], &mut polled, |ms, _, _| {
        ms.iter().all(|m| !m.current().contains(2))
    });
    assert!(ok, "node 2 configured out: {:?}", m0.current());
    let epoch = m0.current().epoch;
    drop((m0, m1)); // the rest killed, leases held
    let again = start_all(&etcd, "midrecovery", 3, &clock);
    let c = assert_admitted_in(&again, 2);
    assert!(
        c.epoch > epoch,
        "epochs keep rising: {} after {epoch}",
        c.epoch
    );
    drop(again);

    // Drained during a copy.
    let mut ms = start_all(&etcd, "midcopy", 3, &clock);
    drop(ms.pop()); // node 2 killed
    let s = lifecycle_settings(&etcd, "midcopy", 2, 3);
    let mut restarted = EtcdMember::connect(s, clock.now()).expect("node 2 restarts");
    let [mut m0, mut m1] = <[EtcdMember; 2]>::try_from(ms).expect("two survivors");
    let mut polled = vec![Vec::new(); 3];
    let ok = drive(
        &clock,
        &mut [&mut m0, &mut m1, &mut restarted],
        &mut polled,
        |ms, _, _| !ms[2].joining(),
    );
    assert!(ok, "admitted: {:?}", restarted.stats());
    let copying = restarted.current();
    assert_ne!(copying.copying & (1 << 2), 0, "copying: {copying:?}");
    for m in [m0, m1, restarted] {
        m.leave();
    }
    let again = start_all(&etcd, "midcopy", 3, &clock);
    let c = assert_admitted_in(&again, 2);
    assert!(
        c.epoch > copying.epoch,
        "{} after {}",
        c.epoch,
        copying.epoch
    );
}
