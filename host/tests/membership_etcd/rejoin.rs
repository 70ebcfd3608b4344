//! Rejoin over etcd: a killed member's restarted process joins
//! as copying once its predecessor is out, and a caught-up report makes it
//! a replica; a stale report changes nothing; incarnations only grow. A
//! restarted process on another machine publishes its new address, and
//! the configuration that admits it carries that address to every member.

use super::{drive, settings, Clock, DEADLINE_MS};
use crate::etcd_support::Etcd;
use splitkv_host::membership_etcd::{ConfigStore, EtcdMember, NodeAddresses};
use splitkv_layout::wire::NodeId;
use splitkv_nic::membership::{Configuration, Membership};
use std::time::{Duration, Instant};

/// Survivors poll slowly, the restarted process fast, so the restarted
/// process takes `members/2` as soon as etcd deletes its predecessor's key,
/// before any survivor sees the key missing: the survivors must then tell
/// the predecessor out by the incarnation alone.
const SURVIVOR_POLL_MS: u64 = 600;
/// The restarted process's poll interval (ms).
const JOINER_POLL_MS: u64 = 20;

/// Where node `node`'s process on machine `host` (127.0.0.`host`) is.
fn at(node: NodeId, host: u8) -> NodeAddresses {
    NodeAddresses {
        data: ([127, 0, 0, host], 7100 + node).into(),
        control: ([127, 0, 0, host], 7200 + node).into(),
        verbs: None,
    }
}

/// Node `node` of three, publishing `addresses`.
fn connect(
    etcd: &Etcd,
    node: NodeId,
    addresses: NodeAddresses,
    poll_ms: u64,
    clock: &Clock,
) -> EtcdMember {
    let mut s = settings(&etcd.endpoint, "rejoin", node, 3);
    s.poll_every_ms = poll_ms;
    s.addresses = Some(addresses);
    EtcdMember::connect(s, clock.now()).expect("member connects")
}

/// Nodes 0, 1 and 2 of three on machine 1, each polling every `poll_ms`.
fn three_on_machine_1(etcd: &Etcd, poll_ms: u64, clock: &Clock) -> [EtcdMember; 3] {
    [0, 1, 2].map(|n| connect(etcd, n, at(n, 1), poll_ms, clock))
}

/// Renews `m` if `now` reached `*due`, as its agent would, and sets the
/// next due time.
fn renew_when_due(m: &mut EtcdMember, due: &mut u64, now: u64) {
    if now >= *due {
        *due = now + m.renew_every_ns();
        let _ = m.renew(now);
    }
}

/// Drives `ms` for `ms_for` milliseconds (assertions in `check`).
fn run_for(clock: &Clock, ms: &mut [&mut EtcdMember], ms_for: u64) {
    let until = clock.now() + ms_for * 1_000_000;
    let mut polled = vec![Vec::new(); ms.len()];
    drive(clock, ms, &mut polled, |_, _, now| now >= until);
}

/// Member 2 dies (its `EtcdMember` dropped without revoking: the lease
/// lingers until its TTL, as after SIGKILL); a new process of node 2
/// connects while its predecessor is still in, is deferred (never admitted
/// while the predecessor's incarnation is configured, nor before the
/// predecessor's believed lease ended: fencing), then is admitted as
/// copying with its new incarnation; a caught-up report with a stale epoch
/// changes nothing and one with the current epoch makes it a replica.
///
/// It also shows that a restarted member does not keep its dead predecessor
/// in: the survivors poll slowly ([`SURVIVOR_POLL_MS`]) and the new
/// process fast, so it re-creates `members/2` before they see it missing.
/// Checked to fail with the incarnation comparison disabled (`h != c`
/// replaced by `h != c && false` in `gone` of
/// `host/src/membership_etcd/driver.rs`): the predecessor then stays in,
/// the join is deferred some 300 times, and this test fails at "node 2
/// admitted within 8000 ms".
#[test]
fn a_restarted_member_rejoins_as_copying_and_catches_up() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let [mut m0, mut m1, old] = three_on_machine_1(&etcd, SURVIVOR_POLL_MS, &clock);
    assert!(!old.joining(), "a first start is admitted at once");
    assert_eq!(old.current(), Configuration::initial(3, 3));
    let old_inc = old.incarnation();
    run_for(&clock, &mut [&mut m0, &mut m1], 100);
    let old_lease_until = old.lease_until();
    drop(old); // stops renewing without revoking

    // On another machine (a replacement machine).
    let mut m2 = connect(&etcd, 2, at(2, 2), JOINER_POLL_MS, &clock);
    assert!(m2.incarnation() > old_inc, "incarnations grow");
    assert!(m2.joining(), "the predecessor is still in");
    assert_eq!(m2.current(), Configuration::default());
    assert_eq!(
        m2.fail_stop(clock.now()),
        None,
        "a joining node holds a lease"
    );

    let mut polled = vec![Vec::new(); 3];
    let mut out_at = None;
    let ok = drive(
        &clock,
        &mut [&mut m0, &mut m1, &mut m2],
        &mut polled,
        |ms, _, now| {
            // A survivor that installs the exclusion holds it at least until
            // its next poll; the other may skip it (polling slowly, it can
            // go from the first configuration straight to the admission).
            if ms[..2].iter().any(|m| !m.current().contains(2)) && out_at.is_none() {
                out_at = Some(now);
            }
            // The newest configuration any member holds (a survivor polls
            // slowly and may lag the joiner by two epochs: the one that
            // left the predecessor out and the one that admits it).
            let c = ms
                .iter()
                .map(|m| m.current())
                .max_by_key(|c| c.epoch)
                .unwrap();
            if c.contains(2) && c.incarnation[2] != ms[2].incarnation() {
                assert!(
                    ms[2].joining(),
                    "admitted while the predecessor is in: {c:?}"
                );
            }
            assert!(ms[2].fail_stop(now).is_none(), "the joiner keeps its lease");
            !ms[2].joining() && ms[0].current().contains(2) && ms[1].current().contains(2)
        },
    );
    assert!(
        ok,
        "node 2 admitted within {DEADLINE_MS} ms: {:?}",
        m2.stats()
    );
    let out_at = out_at.expect("a configuration without the predecessor");
    assert!(
        out_at >= old_lease_until,
        "predecessor out at {out_at} ns, believed its lease to {old_lease_until} ns"
    );
    let c = m2.current();
    let mut want = Configuration::initial(3, 3).without(1 << 2);
    want = want.rejoining(2, m2.incarnation()).expect("2 is out");
    assert_eq!(c, want, "epoch 3: node 2 back, copying, new incarnation");
    assert_eq!(m0.current(), want);
    assert_eq!(
        polled[2],
        vec![want],
        "the joiner polled only its admission"
    );
    // Every member reaches node 2 at its new machine, and the newcomer
    // reaches the others where they published.
    for m in [&m0, &m1] {
        assert_eq!(m.data_address(2), Some(at(2, 2).data));
    }
    assert_eq!(m2.data_address(0), Some(at(0, 1).data));
    assert_eq!(m2.data_address(1), Some(at(1, 1).data));
    let (s0, s1, s2) = (m0.stats(), m1.stats(), m2.stats());
    assert_eq!(s0.installs_won + s1.installs_won, 1, "one exclusion");
    assert_eq!(s2.joins, 1);
    assert!(s2.joins_deferred > 0, "the join was put off: {s2:?}");

    // A stale report (the epoch of the configuration that left 2 out).
    m2.report_caught_up(want.epoch - 1, clock.now())
        .expect("queued");
    run_for(&clock, &mut [&mut m0, &mut m1, &mut m2], 300);
    assert_eq!(m2.stats().caught_up_stale, 1);
    assert_eq!(m2.current(), want, "a stale report changes nothing");

    m2.report_caught_up(want.epoch, clock.now())
        .expect("queued");
    let ok = drive(
        &clock,
        &mut [&mut m0, &mut m1, &mut m2],
        &mut polled,
        |ms, _, _| ms.iter().all(|m| m.current().epoch == want.epoch + 1),
    );
    assert!(ok, "caught up within {DEADLINE_MS} ms: {:?}", m2.stats());
    let full = want.caught_up(2).expect("2 copying");
    assert_eq!(m0.current(), full);
    assert_eq!(
        (full.copying, full.shards[0].since[2], full.incarnation[2]),
        (0, 4, m2.incarnation())
    );
    assert_eq!(m2.stats().caught_up_taken, 1);
    assert_eq!(m2.fail_stop(clock.now()), None);
    let eps = [etcd.endpoint.clone()];
    let mut store =
        ConfigStore::connect(&eps, "rejoin", 3, 3, Duration::from_secs(1)).expect("store");
    assert_eq!(store.read().expect("read").0, full, "stored in etcd");
}

/// A node's incarnations only grow: a process given a smaller one (its
/// clock stepped back) gets one above its predecessor's.
#[test]
fn incarnations_grow_even_when_the_given_one_steps_back() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let mut s = settings(&etcd.endpoint, "incs", 0, 1);
    s.incarnation = 1_000;
    let first = EtcdMember::connect(s.clone(), clock.now()).expect("first");
    assert_eq!(first.incarnation(), 1_000);
    first.leave();
    s.incarnation = 10; // the clock stepped back
    let second = EtcdMember::connect(s.clone(), clock.now()).expect("second");
    assert_eq!(second.incarnation(), 1_001);
    second.leave();
    s.incarnation = u64::MAX; // clamped to u32
    let third = EtcdMember::connect(s, clock.now()).expect("third");
    assert_eq!(third.incarnation(), u32::MAX);
}

/// A restarted process asks to be admitted only once its member was polled
/// (its runtime runs, so it answers the recovery its admission begins):
/// renewed but never polled, it stays joining after its predecessor is out;
/// its first poll gets it admitted. And a report on the dead predecessor,
/// written after the new process cleared the reports, does not count
/// against it. Checked to fail without the `serving` wait in the driver's
/// join step ("admitted before it was polled"), and with both defences
/// against the late report removed (the member's "suspect outside my
/// configuration" check and `keys::current_suspicions`' incarnation
/// comparison): the new process's renewals are then refused.
#[test]
fn a_restarted_member_is_admitted_only_once_polled() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let [mut m0, mut m1, old] = three_on_machine_1(&etcd, JOINER_POLL_MS, &clock);
    drop(old); // stops renewing without revoking
    let mut m2 = connect(&etcd, 2, at(2, 2), JOINER_POLL_MS, &clock);
    // The survivors leave the predecessor out; the new process only renews.
    let mut polled = vec![Vec::new(); 2];
    let mut renew_at = 0;
    let out = drive(
        &clock,
        &mut [&mut m0, &mut m1],
        &mut polled,
        |ms, _, now| {
            renew_when_due(&mut m2, &mut renew_at, now);
            !ms[0].current().contains(2) && !ms[1].current().contains(2)
        },
    );
    assert!(out, "predecessor out within {DEADLINE_MS} ms");
    // Long enough for several joiner polls of the driver.
    let until = clock.now() + 20 * JOINER_POLL_MS * 1_000_000;
    drive(
        &clock,
        &mut [&mut m0, &mut m1],
        &mut polled,
        |ms, _, now| {
            renew_when_due(&mut m2, &mut renew_at, now);
            assert!(
                !ms[0].current().contains(2),
                "admitted before it was polled"
            );
            now >= until
        },
    );
    assert!(m2.joining());
    // A survivor's late report on the predecessor, as a restarted NIC
    // runtime's session to the dead node can raise: node 2 is out of its
    // configuration, so nothing is reported.
    m0.report_suspect(2, clock.now()).expect("taken");
    let mut polled = vec![Vec::new(); 3];
    let ok = drive(
        &clock,
        &mut [&mut m0, &mut m1, &mut m2],
        &mut polled,
        |ms, _, _| !ms[2].joining() && ms[0].current().contains(2),
    );
    assert!(ok, "admitted once polled: {:?}", m2.stats());
    // It keeps its lease: no report counts against it.
    run_for(&clock, &mut [&mut m0, &mut m1, &mut m2], 1_500);
    assert_eq!(m2.fail_stop(clock.now()), None, "{:?}", m2.stats());
    assert_eq!(m2.stats().renewals_failed, 0, "{:?}", m2.stats());
}
