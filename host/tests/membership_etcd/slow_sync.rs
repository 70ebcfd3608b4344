//! Membership on an etcd whose disk syncs slowly (each `fsync` and
//! `fdatasync` delayed by `strace` fault injection,
//! [`Etcd::start_with_slow_sync`]): the condition under which CI once
//! fenced a healthy node the moment it started. A member's start-up is
//! several etcd writes (lease grant, configuration, incarnation,
//! registration), each waiting for a sync; together they outlast a 1 s
//! lease. The driver renews while it starts, so the member connects holding
//! its lease. (Whether it keeps it afterwards is etcd's matter: on such a
//! disk etcd drains the start-up's backlog of syncs for seconds, and a
//! keep-alive waits behind it.)

use super::{settings, Clock, LEASE_TTL_S};
use crate::etcd_support::Etcd;
use splitkv_host::membership_etcd::{believed_lease_ns, EtcdMember};
use splitkv_nic::membership::Membership;
use std::time::{Duration, Instant};

/// Delay of each sync: four start-up writes take longer than the lease.
const SYNC_DELAY: Duration = Duration::from_millis(200);

#[test]
fn a_start_up_longer_than_the_lease_keeps_the_lease() {
    let etcd = match Etcd::start_with_slow_sync(SYNC_DELAY) {
        Ok(e) => e,
        // Not silently: a machine without strace or ptrace cannot run it.
        Err(why) => panic!("a slow-disk etcd cannot run here: {why}"),
    };
    let clock = Clock(Instant::now());
    let mut s = settings(&etcd.endpoint, "slow", 0, 3);
    // Each start-up call may wait for its syncs (10 calls of 2 s at most).
    s.start_timeout_ms = 20_000;
    let t0 = clock.now();
    let m = EtcdMember::connect(s, t0).expect("connects");
    let took = clock.now() - t0;
    let believed = believed_lease_ns(u64::from(LEASE_TTL_S));
    assert!(
        took > believed,
        "start-up took {took} ns, within the believed lease of {believed} ns: \
         the disk was not slow enough to test anything"
    );
    let now = clock.now();
    assert_eq!(m.fail_stop(now), None, "fenced at start: {:?}", m.stats());
    assert!(m.lease_until() > now, "{:?}", m.stats());
    assert!(
        m.stats().grants >= 1,
        "renewed while starting: {:?}",
        m.stats()
    );
}
