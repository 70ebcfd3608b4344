//! A draining gateway (the node stops serving applications): requests
//! already at the NIC runtime still get their outcomes, and a request taken
//! after the drain began is answered "unavailable: draining" without
//! reaching the NIC runtime. A gateway whose node's NIC runtime restarts
//! answers "unavailable: NIC restarting" meanwhile, and serves again after.
//! Driven by hand, step by step, over a real connection and an in-process
//! cluster's NIC client port, so the order of events is the test's, not
//! the scheduler's. Every wait has a deadline.

use splitkv_client::{ConnectOptions, Connection};
use splitkv_host::clients::{AttachPolicy, ClientListener, Gateway, GatewayConfig, GatewayStats};
use splitkv_host::cluster::Cluster;
use splitkv_host::deploy::config::ClientSettings;
use splitkv_layout::app::{
    Outcome, Request, Status, UnavailableReason, APP_RING_CAPACITY_MIN_BYTES,
};
use splitkv_layout::Key;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(20);
/// Puts at the NIC runtime when the drain begins.
const BEFORE_DRAIN: u64 = 3;

fn put(req_id: u64) -> Vec<u8> {
    let mut out = Vec::new();
    Request::Put {
        req_id,
        key: Key::new(0, req_id),
        value: b"v",
    }
    .encode(&mut out)
    .unwrap();
    out
}

/// A gateway over node 0's NIC client port with one connection attached.
struct Rig {
    _dir: tempfile::TempDir,
    cluster: Cluster,
    gateway: Gateway,
    listener: ClientListener,
    conn: Connection,
}

fn rig() -> Rig {
    let dir = tempfile::Builder::new()
        .prefix("splitkv-drain-")
        .tempdir_in("/tmp")
        .unwrap();
    let settings = ClientSettings {
        socket_dir: dir.path().join("s"),
        allowed_uids: None,
        request_ring_bytes: APP_RING_CAPACITY_MIN_BYTES,
        outcome_ring_bytes: APP_RING_CAPACITY_MIN_BYTES,
        in_flight_max: 8,
        connections_max: 2,
        outcome_full_ms_max: 1000,
        start: Default::default(),
    };
    let cluster = Cluster::builder()
        .capacity_keys(1024)
        .clients_per_node(2)
        .build()
        .expect("cluster");
    let port = cluster.client(0).expect("a NIC client port of node 0");
    let stats = Arc::new(GatewayStats::default());
    let config = GatewayConfig {
        node: 0,
        outcome_full_ms_max: settings.outcome_full_ms_max,
    };
    let mut gateway = Gateway::new(config, vec![port], stats.clone()).unwrap();
    let policy = AttachPolicy::from_settings(&settings, 0, Arc::new(|_: &str| None));
    let (listener, attached) = ClientListener::start(&settings, policy).unwrap();
    let options = ConnectOptions {
        request_ring_bytes: APP_RING_CAPACITY_MIN_BYTES,
        outcome_ring_bytes: APP_RING_CAPACITY_MIN_BYTES,
        in_flight_max: 8,
        timeout: Duration::from_secs(5),
        ..ConnectOptions::default()
    };
    let conn = Connection::connect(settings.socket_path(0), &options).expect("connect");
    gateway.add(
        attached
            .recv_timeout(WAIT)
            .expect("the attached connection"),
    );
    Rig {
        _dir: dir,
        cluster,
        gateway,
        listener,
        conn,
    }
}

/// Closes the connections, stops the listener and the cluster.
fn close(mut gateway: Gateway, listener: ClientListener, cluster: Cluster) {
    gateway.close_all();
    listener.stop();
    cluster.shutdown().expect("clean shutdown");
}

#[test]
fn a_draining_gateway_answers_new_requests_unavailable_and_finishes_the_rest() {
    let Rig {
        _dir,
        cluster,
        mut gateway,
        listener,
        mut conn,
    } = rig();
    let end = Instant::now() + WAIT;
    let origin = Instant::now();
    let now = || origin.elapsed().as_nanos() as u64;

    for id in 0..BEFORE_DRAIN {
        conn.send(&put(id), Some(end)).unwrap();
    }
    while gateway.in_flight() < BEFORE_DRAIN as usize {
        assert!(Instant::now() < end, "the gateway did not take the puts");
        gateway.run_iteration(now());
    }
    gateway.begin_drain();
    conn.send(&put(BEFORE_DRAIN), Some(end)).unwrap();
    while !gateway.drained() {
        assert!(Instant::now() < end, "the gateway did not drain");
        gateway.run_iteration(now());
    }
    let mut seen = Vec::new();
    let mut entry = Vec::new();
    for _ in 0..=BEFORE_DRAIN {
        conn.recv(&mut entry, Some(end))
            .expect("an outcome per request");
        let o = Outcome::decode(&entry).unwrap();
        seen.push((o.req_id, o.status));
    }
    seen.sort_by_key(|(id, _)| *id);
    for (id, status) in &seen[..BEFORE_DRAIN as usize] {
        assert_eq!(
            *status,
            Status::Committed,
            "put {id}, taken before the drain"
        );
    }
    assert_eq!(
        seen[BEFORE_DRAIN as usize],
        (
            BEFORE_DRAIN,
            Status::Unavailable(UnavailableReason::Draining)
        ),
        "the put taken while draining"
    );
    assert_eq!(gateway.in_flight(), 0);
    close(gateway, listener, cluster);
}

#[test]
fn a_gateway_answers_nic_restarting_while_the_nic_runtime_restarts() {
    let Rig {
        _dir,
        cluster,
        mut gateway,
        listener,
        mut conn,
    } = rig();
    let restarting = Arc::new(AtomicBool::new(true));
    gateway.watch_nic_restart(restarting.clone());
    let end = Instant::now() + WAIT;
    let origin = Instant::now();
    let now = || origin.elapsed().as_nanos() as u64;
    let mut entry = Vec::new();
    let mut outcome_of = |conn: &mut Connection, gateway: &mut Gateway, id: u64| {
        conn.send(&put(id), Some(end)).unwrap();
        loop {
            assert!(Instant::now() < end, "no outcome for put {id}");
            gateway.run_iteration(now());
            if conn.try_recv(&mut entry).unwrap() {
                let o = Outcome::decode(&entry).unwrap();
                assert_eq!(o.req_id, id);
                return o.status;
            }
        }
    };
    assert_eq!(
        outcome_of(&mut conn, &mut gateway, 0),
        Status::Unavailable(UnavailableReason::NicRestarting),
        "a put while the NIC runtime restarts"
    );
    restarting.store(false, Ordering::Release);
    assert_eq!(
        outcome_of(&mut conn, &mut gateway, 1),
        Status::Committed,
        "a put once it serves again"
    );
    let counts = gateway.stats().snapshot();
    let restarting = Status::Unavailable(UnavailableReason::NicRestarting);
    assert_eq!(counts.outcomes(restarting), 1, "{counts:?}");
    close(gateway, listener, cluster);
}
