//! Membership on etcd (`splitkv_host::membership_etcd`, feature `etcd`)
//! against a real etcd on loopback: members register; an expired or
//! revoked lease configures its node out with a bumped epoch; racing
//! installs of one epoch have one winner; etcd unreachable at start is one
//! typed error (as are bad settings); with etcd killed, members keep their
//! configuration until their leases run out, then fail-stop; a reported
//! suspect stops serving before the others configure it out, and its own
//! reports on its accusers do not count; the key
//! layout and the stored record round-trip; a start-up longer than the
//! lease (etcd on a slow disk) keeps the lease. Leases of 1 s; each wait is
//! bounded by [`DEADLINE_MS`].

mod etcd_support;
#[path = "membership_etcd/lifecycle.rs"]
mod lifecycle;
#[path = "membership_etcd/rejoin.rs"]
mod rejoin;
#[path = "membership_etcd/slow_sync.rs"]
mod slow_sync;
#[path = "membership_etcd/verbs.rs"]
mod verbs;

use etcd_support::{free_port, Etcd};
use splitkv_host::membership_etcd::keys::{ClusterKeys, ConfigRecord, Lineage};
use splitkv_host::membership_etcd::{
    believed_lease_ns, ConfigStore, EtcdError, EtcdMember, EtcdSettings, FailStop,
};
use splitkv_layout::wire::NodeId;
use splitkv_nic::membership::{Configuration, Membership, MembershipError};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Longest wait for any one expected event (ms).
const DEADLINE_MS: u64 = 8_000;
/// How often the test drives its members (ms).
const STEP_MS: u64 = 10;
/// Lease TTL of the members (s).
const LEASE_TTL_S: u32 = 1;

fn settings(etcd: &str, cluster: &str, node: NodeId, nodes: usize) -> EtcdSettings {
    let mut s = EtcdSettings::new(vec![etcd.to_string()], cluster, node, nodes, nodes);
    s.lease_ttl_s = LEASE_TTL_S;
    s.poll_every_ms = 50;
    s.rpc_timeout_ms = 200;
    s
}

/// The members' clock: ns since the test began.
struct Clock(Instant);

impl Clock {
    fn now(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

/// Renews each member when due and polls it, as a `MembershipAgent` would,
/// until `done` holds (returns true) or [`DEADLINE_MS`] passes (false).
/// Configurations polled are kept per member.
fn drive(
    clock: &Clock,
    members: &mut [&mut EtcdMember],
    polled: &mut [Vec<Configuration>],
    mut done: impl FnMut(&[&mut EtcdMember], &[Vec<Configuration>], u64) -> bool,
) -> bool {
    let deadline = clock.now() + DEADLINE_MS * 1_000_000;
    let mut next_renew = vec![0u64; members.len()];
    while clock.now() < deadline {
        let now = clock.now();
        for (i, m) in members.iter_mut().enumerate() {
            if now >= next_renew[i] {
                next_renew[i] = now + m.renew_every_ns();
                let _ = m.renew(now);
            }
            if let Some(c) = m.poll(now) {
                polled[i].push(c);
            }
        }
        if done(members, polled, clock.now()) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(STEP_MS));
    }
    false
}

fn connect_all(etcd: &Etcd, cluster: &str, nodes: usize, clock: &Clock) -> Vec<EtcdMember> {
    (0..nodes as NodeId)
        .map(|n| EtcdMember::connect(settings(&etcd.endpoint, cluster, n, nodes), clock.now()))
        .collect::<Result<_, _>>()
        .expect("every member connects")
}

#[test]
fn members_register_and_keep_the_first_configuration_while_renewing() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let mut ms = connect_all(&etcd, "reg", 3, &clock);
    for m in &ms {
        assert_eq!(m.current(), Configuration::initial(3, 3));
        assert!(m.lease_until() > clock.now());
    }
    let mut refs: Vec<&mut EtcdMember> = ms.iter_mut().collect();
    let mut polled = vec![Vec::new(); 3];
    // Run 2.5 leases: renewals must keep every member serving.
    let until = clock.now() + 2_500_000_000;
    drive(&clock, &mut refs, &mut polled, |ms, _, now| {
        for m in ms {
            assert_eq!(m.fail_stop(now), None, "a renewing member stays in");
        }
        now >= until
    });
    assert!(
        polled.iter().all(Vec::is_empty),
        "no new configuration: {polled:?}"
    );
    for m in &ms {
        assert!(m.stats().grants >= 2, "renewals granted: {:?}", m.stats());
    }
    let mut store = ConfigStore::connect(
        std::slice::from_ref(&etcd.endpoint),
        "reg",
        3,
        3,
        Duration::from_secs(1),
    )
    .expect("store connects");
    assert_eq!(
        store.read().expect("config").0,
        Configuration::initial(3, 3)
    );
}

/// Members 0 and 1 polled exactly one configuration: the first one without
/// node 2 (epoch 2).
fn assert_node_2_out(polled: &[Vec<Configuration>]) {
    let want = Configuration::initial(3, 3).without(0b100);
    assert_eq!((want.epoch, want.live), (2, 0b011));
    assert_eq!(polled[..2], vec![vec![want]; 2]);
}

/// Waits until members 0 and 1 poll a configuration without node 2.
fn expect_node_2_out(clock: &Clock, a: &mut EtcdMember, b: &mut EtcdMember) -> u64 {
    let mut polled = vec![Vec::new(); 2];
    let ok = drive(clock, &mut [a, b], &mut polled, |_, p, _| {
        p.iter().all(|v| !v.is_empty())
    });
    assert!(ok, "no new configuration within {DEADLINE_MS} ms");
    assert_node_2_out(&polled);
    let won = a.stats().installs_won + b.stats().installs_won;
    assert_eq!(won, 1, "one install for epoch 2");
    clock.now()
}

#[test]
fn an_expired_lease_configures_its_node_out_with_a_bumped_epoch() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let mut ms = connect_all(&etcd, "expire", 3, &clock);
    let gone = ms.pop().expect("node 2");
    let gone_lease_until = gone.lease_until();
    let t0 = clock.now();
    drop(gone); // stops renewing: its lease runs out in etcd
    let [a, b] = &mut ms[..] else { unreachable!() };
    let t1 = expect_node_2_out(&clock, a, b);
    // Fencing: configured out only after node 2 stopped believing its lease.
    assert!(
        t1 >= gone_lease_until,
        "out at {t1} ns, believed to {gone_lease_until} ns"
    );
    eprintln!(
        "expired lease (TTL 1 s) to new configuration: {} ms",
        (t1 - t0) / 1_000_000
    );
}

#[test]
fn a_revoked_lease_configures_its_node_out_at_once() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let mut ms = connect_all(&etcd, "revoke", 3, &clock);
    let t0 = clock.now();
    ms.pop().expect("node 2").leave();
    let [a, b] = &mut ms[..] else { unreachable!() };
    let t1 = expect_node_2_out(&clock, a, b);
    eprintln!(
        "revoked lease to new configuration: {} ms",
        (t1 - t0) / 1_000_000
    );
}

#[test]
fn racing_installs_of_one_epoch_have_exactly_one_winner() {
    const ROUNDS: u32 = 10;
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    // The first member creates the configuration.
    let _m = EtcdMember::connect(settings(&etcd.endpoint, "race", 0, 3), clock.now()).expect("m0");
    let eps = vec![etcd.endpoint.clone()];
    let barrier = Arc::new(Barrier::new(2));
    let racers: Vec<_> = (0..2u32)
        .map(|i| {
            let (eps, barrier) = (eps.clone(), barrier.clone());
            std::thread::spawn(move || {
                let rpc = Duration::from_secs(1);
                let mut s = ConfigStore::connect(&eps, "race", 3, 3, rpc).expect("store");
                let mut wins = Vec::new();
                for round in 0..ROUNDS {
                    barrier.wait();
                    let (c, rev) = s.read().expect("read");
                    barrier.wait();
                    // Both propose the same next epoch with different sets.
                    let next = c.without(!(1 + 2 * (i + 1)) & 0b111);
                    if s.try_install(rev, &next).expect("install") {
                        wins.push((round, next));
                    }
                }
                wins
            })
        })
        .collect();
    let wins: Vec<_> = racers
        .into_iter()
        .flat_map(|t| t.join().expect("racer"))
        .collect();
    assert_eq!(
        wins.len(),
        ROUNDS as usize,
        "one winner per round: {wins:?}"
    );
    for round in 0..ROUNDS {
        assert_eq!(
            wins.iter().filter(|w| w.0 == round).count(),
            1,
            "round {round}"
        );
    }
    let mut s = ConfigStore::connect(&eps, "race", 3, 3, Duration::from_secs(1)).expect("store");
    let last = wins.iter().max_by_key(|w| w.0).expect("a winner").1;
    assert_eq!(s.read().expect("read").0, last);
    assert_eq!(last.epoch, 1 + ROUNDS);
}

#[test]
fn etcd_unreachable_at_start_is_one_typed_error() {
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    let t0 = Instant::now();
    let err = EtcdMember::connect(settings(&endpoint, "none", 0, 3), 0).expect_err("no etcd");
    assert!(matches!(err, EtcdError::Unreachable { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with(&format!("etcd unreachable at {endpoint}")),
        "{err}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "bounded: {:?}",
        t0.elapsed()
    );
    let store = ConfigStore::connect(&[endpoint], "none", 3, 3, Duration::from_millis(200));
    assert!(matches!(store, Err(EtcdError::Unreachable { .. })));
}

#[test]
fn bad_settings_are_typed_errors_before_any_etcd_call() {
    let mut s = settings("http://127.0.0.1:1", "a/b", 0, 3);
    assert!(matches!(
        EtcdMember::connect(s.clone(), 0),
        Err(EtcdError::ClusterName(_))
    ));
    s.cluster = "ok".into();
    s.lease_ttl_s = 0;
    let e = EtcdMember::connect(s.clone(), 0).expect_err("ttl 0");
    assert!(
        matches!(
            e,
            EtcdError::Settings {
                what: "lease_ttl_s",
                ..
            }
        ),
        "{e:?}"
    );
    s.lease_ttl_s = 1;
    s.start_timeout_ms = 0;
    let e = EtcdMember::connect(s.clone(), 0).expect_err("no start time");
    assert!(
        matches!(
            e,
            EtcdError::Settings {
                what: "start_timeout_ms",
                ..
            }
        ),
        "{e:?}"
    );
    s.start_timeout_ms = 1_000;
    s.node = 3;
    let e = EtcdMember::connect(s, 0).expect_err("node 3 of 3");
    assert!(
        matches!(e, EtcdError::Settings { what: "node", .. }),
        "{e:?}"
    );
}

#[test]
fn with_etcd_killed_members_serve_until_their_leases_run_out_then_fail_stop() {
    let mut etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let mut ms = connect_all(&etcd, "kill", 3, &clock);
    let mut refs: Vec<&mut EtcdMember> = ms.iter_mut().collect();
    let mut polled = vec![Vec::new(); 3];
    let warm = clock.now() + 300_000_000;
    drive(&clock, &mut refs, &mut polled, |_, _, now| now >= warm);
    etcd.kill();
    let t_kill = clock.now();
    let mut stopped_at = [None::<(u64, FailStop, u64)>; 3];
    let all = drive(&clock, &mut refs, &mut polled, |ms, _, now| {
        for (i, m) in ms.iter().enumerate() {
            assert_eq!(
                m.current(),
                Configuration::initial(3, 3),
                "configuration kept"
            );
            match (m.fail_stop(now), stopped_at[i]) {
                (Some(f), None) => stopped_at[i] = Some((now, f, m.lease_until())),
                (None, Some(_)) => panic!("member {i} served again after fail-stop"),
                _ => assert!(now < m.lease_until() || stopped_at[i].is_some()),
            }
        }
        stopped_at.iter().all(Option::is_some)
    });
    assert!(all, "every member fail-stops: {stopped_at:?}");
    assert!(
        polled.iter().all(Vec::is_empty),
        "no configuration without etcd"
    );
    for (i, m) in refs.iter_mut().enumerate() {
        let (at, why, lease_until) = stopped_at[i].expect("stopped");
        assert!(
            matches!(why, FailStop::LeaseExpired { .. }),
            "member {i}: {why}"
        );
        // No renewal took after the kill: the lease it served under ended
        // at most one believed lease after it, and it stopped at that end.
        let bound = t_kill + believed_lease_ns(LEASE_TTL_S.into());
        assert!(
            lease_until <= bound,
            "member {i}: lease to {lease_until}, bound {bound}"
        );
        assert!(at >= lease_until && at > t_kill, "member {i} stopped early");
        let r = m.renew(clock.now());
        assert!(
            matches!(r, Err(MembershipError::Removed { .. })),
            "member {i}: {r:?}"
        );
        assert!(m.stats().renewals_failed > 0 || m.stats().etcd_errors > 0);
    }
}

#[test]
fn a_suspect_stops_serving_before_the_others_configure_it_out() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let mut ms = connect_all(&etcd, "suspect", 3, &clock);
    ms[0].report_suspect(2, clock.now()).expect("report taken");
    assert!(matches!(
        ms[0].report_suspect(3, clock.now()),
        Err(MembershipError::UnknownNode { node: 3, nodes: 3 })
    ));
    let mut refs: Vec<&mut EtcdMember> = ms.iter_mut().collect();
    let mut polled = vec![Vec::new(); 3];
    let mut suspect_stopped = None;
    let ok = drive(&clock, &mut refs, &mut polled, |ms, p, now| {
        if suspect_stopped.is_none() && ms[2].fail_stop(now).is_some() {
            suspect_stopped = Some(now);
        }
        if !p[0].is_empty() || !p[1].is_empty() {
            // Fencing: the suspect had stopped before anyone saw it out.
            assert!(
                suspect_stopped.is_some(),
                "configured out while still serving"
            );
        }
        !p[0].is_empty() && !p[1].is_empty()
    });
    assert!(ok, "the suspect is configured out within {DEADLINE_MS} ms");
    assert_node_2_out(&polled);
    assert!(
        ms[2].stats().renewals_failed > 0,
        "the suspect's renewals were refused"
    );
}

#[test]
fn a_suspects_report_on_its_accuser_does_not_count() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let mut ms = connect_all(&etcd, "counter", 3, &clock);
    ms[0].report_suspect(2, clock.now()).expect("report taken");
    let mut polled = vec![Vec::new(); 3];
    {
        let mut refs: Vec<&mut EtcdMember> = ms.iter_mut().collect();
        let seen = drive(&clock, &mut refs, &mut polled, |ms, _, _| {
            ms[2].stats().renewals_failed > 0
        });
        assert!(
            seen,
            "node 2 learns it is a suspect within {DEADLINE_MS} ms"
        );
    }
    // Node 2, a suspect, accuses its accuser (and node 1): stored, not taken.
    ms[2].report_suspect(0, clock.now()).expect("report queued");
    ms[2].report_suspect(1, clock.now()).expect("report queued");
    let mut refs: Vec<&mut EtcdMember> = ms.iter_mut().collect();
    let ok = drive(&clock, &mut refs, &mut polled, |ms, p, now| {
        assert!(ms[0].fail_stop(now).is_none(), "the accuser was fenced");
        assert!(ms[1].fail_stop(now).is_none(), "node 1 was fenced");
        !p[0].is_empty() && !p[1].is_empty()
    });
    assert!(ok, "the suspect is configured out within {DEADLINE_MS} ms");
    assert_node_2_out(&polled);
    assert_eq!(ms[0].stats().renewals_failed, 0);
    assert_eq!(ms[1].stats().renewals_failed, 0);
}

#[test]
fn keys_live_under_the_cluster_prefix_and_foreign_keys_are_ignored() {
    let k = ClusterKeys::new("c1");
    assert_eq!(k.config(), "/c1/config");
    assert_eq!(k.member(2), "/c1/members/2");
    assert_eq!(k.suspect(1, 0), "/c1/suspects/1/0");
    assert!(k.suspect(1, 0).starts_with(&k.suspects_of(1)));
    assert!(!ClusterKeys::valid_name("a/b"));
    assert!(!ClusterKeys::valid_name(""));
    let keys: [&[u8]; 4] = [
        b"/c/members/0",
        b"/c/members/2",
        b"/c/members/x",
        b"/c/members/99",
    ];
    assert_eq!(
        ClusterKeys::node_mask("/c/members/", keys.into_iter()),
        0b101
    );
}

#[test]
fn config_records_round_trip_and_bad_records_are_rejected() {
    let c = Configuration::initial(3, 3).without(0b010);
    let c = Configuration { epoch: 3, ..c };
    assert_eq!(
        ConfigRecord::decode(
            &ConfigRecord::encode(&c, Lineage::first(0), splitkv_nic::CommitProtocol::XenicOcc),
            3,
            3
        ),
        Ok(c)
    );
    assert!(ConfigRecord::decode(b"{\"epoch\":0,\"live\":1}", 3, 3).is_err());
    assert!(ConfigRecord::decode(b"{\"epoch\":2,\"live\":8}", 3, 3).is_err());
    assert!(ConfigRecord::decode(b"{\"epoch\":2,\"live\":1,\"x\":1}", 3, 3).is_err());
    assert!(ConfigRecord::decode(b"nonsense", 3, 3).is_err());
}

#[test]
fn a_member_can_move_to_a_polling_thread() {
    fn send<T: Send>() {}
    send::<EtcdMember>();
}

#[test]
fn registering_clears_reports_on_an_earlier_incarnation() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let connect = |n| EtcdMember::connect(settings(&etcd.endpoint, "fresh", n, 3), clock.now());
    let (mut m0, mut m1) = (connect(0).expect("m0"), connect(1).expect("m1"));
    m0.report_suspect(2, clock.now()).expect("report taken");
    let mut polled = vec![Vec::new(); 3];
    let settle = clock.now() + 300_000_000;
    drive(&clock, &mut [&mut m0, &mut m1], &mut polled, |_, _, now| {
        now >= settle
    });
    let mut m2 = connect(2).expect("m2");
    let until = clock.now() + 2_500_000_000;
    drive(
        &clock,
        &mut [&mut m0, &mut m1, &mut m2],
        &mut polled,
        |ms, _, now| {
            assert_eq!(
                ms[2].fail_stop(now),
                None,
                "the new incarnation keeps its lease"
            );
            now >= until
        },
    );
    assert_eq!(m2.stats().renewals_failed, 0);
    assert!(polled.iter().all(Vec::is_empty), "{polled:?}");
}

/// A node the stored configuration leaves out (and whose predecessor is
/// long gone) connects joining and is admitted as copying with its new
/// incarnation.
#[test]
fn a_node_left_out_of_the_stored_configuration_joins_as_copying() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let connect = |n| EtcdMember::connect(settings(&etcd.endpoint, "out", n, 3), clock.now());
    let mut m0 = connect(0).expect("m0 creates the configuration");
    let eps = [etcd.endpoint.clone()];
    let mut store = ConfigStore::connect(&eps, "out", 3, 3, Duration::from_secs(1)).expect("store");
    let (c, rev) = store.read().expect("read");
    assert!(store.try_install(rev, &c.without(1 << 2)).expect("install"));
    let mut m2 = connect(2).expect("node 2 connects, joining");
    assert!(m2.joining());
    assert_eq!(m2.current(), Configuration::default());
    assert_eq!(m2.fail_stop(clock.now()), None);
    let mut polled = vec![Vec::new(); 2];
    let ok = drive(&clock, &mut [&mut m0, &mut m2], &mut polled, |ms, _, _| {
        !ms[1].joining()
    });
    assert!(
        ok,
        "node 2 admitted within {DEADLINE_MS} ms: {:?}",
        m2.stats()
    );
    let c = m2.current();
    assert_eq!((c.epoch, c.live, c.copying), (3, 0b111, 0b100));
    assert_eq!(c.incarnation[2], m2.incarnation());
    assert_eq!(
        polled[1],
        vec![c],
        "the joining node polled only the admitting configuration"
    );
    assert_eq!(m2.stats().joins, 1);
}

/// Four nodes, replication 3 (re-replication onto survivors): node 3 leaves;
/// the survivors that become new backups of its shards are copied and report
/// caught up, and the configuration takes them as replicas (before the fix, a
/// survivor that never restarted, configured as incarnation 0, had every report
/// counted stale and stayed joining).
#[test]
fn survivors_chosen_as_new_backups_are_taken_as_replicas_when_caught_up() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let connect = |n| {
        let mut s = settings(&etcd.endpoint, "backups", n, 4);
        s.replication = 3;
        EtcdMember::connect(s, clock.now())
    };
    let mut ms: Vec<EtcdMember> = (0..4).map(|n| connect(n).expect("connect")).collect();
    drop(ms.pop()); // node 3's lease runs out
    let mut polled = vec![Vec::new(); 3];
    let mut refs: Vec<&mut EtcdMember> = ms.iter_mut().collect();
    let ok = drive(&clock, &mut refs, &mut polled, |_, p, _| {
        p.iter().all(|v| v.iter().any(|c| c.live == 0b0111))
    });
    assert!(ok, "node 3 configured out within {DEADLINE_MS} ms");
    let out = ms[0].current();
    assert_eq!(out.short_shards(), 3, "every shard node 3 held is short");
    let joining = out.joining_any();
    assert_ne!(joining, 0, "survivors join the short shards");
    // Each joining survivor reports the end of its copy in the epoch it
    // sees; a report that lost the race to another's is stale, and the
    // node reports again in the new epoch, as its runtime does after
    // copying again.
    let restored = |c: Configuration| c.joining_any() == 0 && c.short_shards() == 0;
    for _ in 0..joining.count_ones() + 2 {
        let before = ms[0].current();
        if restored(before) {
            break;
        }
        for (n, m) in ms.iter_mut().enumerate() {
            let c = m.current();
            if c.joining_any() & (1 << n) != 0 {
                m.report_caught_up(c.epoch, clock.now()).expect("report");
            }
        }
        let mut refs: Vec<&mut EtcdMember> = ms.iter_mut().collect();
        drive(&clock, &mut refs, &mut polled, |ms, _, _| {
            ms.iter().all(|m| m.current().epoch > before.epoch)
        });
    }
    let stats: Vec<_> = ms.iter().map(|m| m.stats()).collect();
    let c = ms[0].current();
    assert!(restored(c), "the degree is not restored: {c:?} {stats:?}");
    let taken: u64 = stats.iter().map(|s| s.caught_up_taken).sum();
    assert_eq!(taken, u64::from(joining.count_ones()), "{stats:?}");
}

/// A member renewed only at a backup thread's cadence (half an interval
/// late, as `splitkv node`'s main thread renews while the polling thread
/// is paused or late, and checked every 20 ms as it does) keeps its lease
/// without taking its notices in between: the lease's end counts every
/// grant as soon as the driver has it. Checked to fail with the member's
/// `lease_end` reading only the notices it took (`granted_until` ignored):
/// the lease's end then lags one renewal behind, and the member fences
/// itself after 2 grants while it and etcd are healthy (a deployed node
/// did, "lease ran out … without a renewal", with no failed renewal in its
/// counters).
#[test]
fn a_member_renewed_at_the_backup_cadence_keeps_its_lease() {
    let etcd = Etcd::start();
    let clock = Clock(Instant::now());
    let mut m = EtcdMember::connect(settings(&etcd.endpoint, "backup", 0, 1), clock.now())
        .expect("connects");
    let every = m.renew_every_ns();
    let mut next = 0;
    let until = clock.now() + 4_000_000_000;
    while clock.now() < until {
        let now = clock.now();
        if now >= next + every / 2 {
            next = now + every;
            let _ = m.renew(now);
        }
        assert_eq!(m.fail_stop(clock.now()), None, "{:?}", m.stats());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(m.stats().grants >= 4, "{:?}", m.stats());
}
