//! The threaded drivers: application components polled beside the nodes and
//! handed back, a corrupt client seen in the cluster's stats, and the scoped
//! driver stopping every thread when one panics.

mod support;

use splitkv_host::cluster::try_run_threads;
use splitkv_host::{Client, Cluster, ClusterError};
use splitkv_layout::host_nic::TxStatus;
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::net::Transport;
use splitkv_nic::{ClientClosed, Component, Nanos};
use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{registry, INCR, NOOP};

/// Submits `budget` increments of counter `id`, one at a time, from a polling thread.
struct Incrementer {
    client: Client,
    id: u64,
    budget: u64,
    committed: u64,
    done: Arc<AtomicU64>,
}

impl Component for Incrementer {
    fn run_iteration(&mut self, _now: Nanos) -> bool {
        let mut work = false;
        let mut ok = 0;
        self.client
            .poll(8, |o| ok += (o.status == TxStatus::Committed) as u64)
            .unwrap();
        self.committed += ok;
        if self.client.outstanding() == 0 && self.committed < self.budget {
            self.client
                .submit(self.committed, INCR, &self.id.to_le_bytes())
                .unwrap();
            work = true;
        }
        self.done.store(self.committed, Ordering::Relaxed);
        work
    }
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn application_components_run_on_the_polling_threads_and_come_back() {
    let transports: Vec<Box<dyn Transport>> = mem_network(2)
        .into_iter()
        .map(|t| Box::new(t) as Box<dyn Transport>)
        .collect();
    let mut parts = Cluster::builder()
        .nodes(2)
        .replication(2)
        .clients_per_node(2)
        .threads(2)
        .procedures(registry())
        .build_parts(transports)
        .unwrap();
    let done: Vec<Arc<AtomicU64>> = (0..3).map(|_| Arc::default()).collect();
    for (i, d) in done.iter().enumerate() {
        let client = parts.client((i % 2) as u16).unwrap();
        parts.add_app(Incrementer {
            client,
            id: i as u64,
            budget: 50,
            committed: 0,
            done: d.clone(),
        });
    }
    let cluster = parts.start().unwrap();
    wait_for("the increments", || {
        done.iter().all(|d| d.load(Ordering::Relaxed) == 50)
    });
    let parts = cluster.shutdown().unwrap();
    assert_eq!(parts.apps.len(), 3);
    for (i, app) in parts.apps.into_iter().enumerate() {
        let any: Box<dyn Any> = app;
        let inc = any.downcast::<Incrementer>().expect("an Incrementer");
        assert_eq!(
            (inc.id, inc.committed),
            (i as u64, 50),
            "handed back in order"
        );
    }
}

#[test]
fn a_corrupt_client_is_closed_with_its_reason_in_the_stats() {
    let cluster = Cluster::builder()
        .nodes(2)
        .replication(1)
        .clients_per_node(2)
        .procedures(registry())
        .build()
        .unwrap();
    let mut bad = cluster.client(1).unwrap();
    let mut good = cluster.client(1).unwrap();
    bad.submit_raw(&[0x01, 0xff]).unwrap();
    wait_for("the closed client in the stats", || {
        cluster.stats().clients_closed() == 1
    });
    let s = cluster.stats();
    assert!(matches!(
        s.nodes[1].closed_clients.as_slice(),
        [(0, ClientClosed::BadEntry(_))]
    ));
    assert!(s.nodes[0].closed_clients.is_empty());
    assert!(good.call(INCR, &5u64.to_le_bytes()).unwrap().is_committed());
    let parts = cluster.shutdown().unwrap();
    assert_eq!(parts.stats().clients_closed(), 1, "exact after shutdown");
}

/// Panics on its 1000th iteration.
struct Bomb(u32);

impl Component for Bomb {
    fn run_iteration(&mut self, _: Nanos) -> bool {
        self.0 += 1;
        assert!(self.0 < 1000, "bomb went off");
        true
    }
}

/// Never stops by itself.
struct Spinner;

impl Component for Spinner {
    fn run_iteration(&mut self, _: Nanos) -> bool {
        false
    }
}

#[test]
fn the_scoped_driver_stops_every_thread_when_one_panics() {
    let stop = AtomicBool::new(false);
    let (mut bomb, mut a, mut b) = (Bomb(0), Spinner, Spinner);
    let groups: Vec<Vec<&mut dyn Component>> = vec![vec![&mut a], vec![&mut bomb], vec![&mut b]];
    let started = Instant::now();
    let err = try_run_threads(groups, Instant::now(), &stop).unwrap_err();
    assert_eq!(
        err,
        ClusterError::Panicked {
            thread: "splitkv-poll-1".into(),
            message: "bomb went off".into()
        }
    );
    assert!(stop.load(Ordering::Relaxed));
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn shutdown_returns_promptly_when_an_application_stopped_polling() {
    const REQUESTS: u64 = 400;
    let cluster = Cluster::builder()
        .nodes(1)
        .replication(1)
        .procedures(registry())
        .configure(|c| c.app_ring_bytes = 1 << 12)
        .build()
        .unwrap();
    let mut client = cluster.client(0).unwrap();
    let mut sent = 0;
    wait_for("the requests to be taken", || {
        while sent < REQUESTS && client.submit(sent, NOOP, b"").is_ok() {
            sent += 1;
        }
        sent == REQUESTS
    });
    wait_for("outcomes to wait on the NIC", || {
        cluster.stats().nodes[0].nic.clients.outcomes_queued > 0
    });
    let started = Instant::now();
    let mut parts = cluster.shutdown().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "gave up draining"
    );
    assert!(!parts.is_quiescent(), "outcomes still wait for the client");
    // Nothing was dropped: once the client polls, every outcome arrives.
    let mut got = Vec::new();
    for _ in 0..1000 {
        client.poll(usize::MAX, |o| got.push(o.req_id)).unwrap();
        let now = parts.now();
        if parts.drain(100, || now) && got.len() as u64 == REQUESTS {
            break;
        }
    }
    client.poll(usize::MAX, |o| got.push(o.req_id)).unwrap();
    assert_eq!(got, (0..REQUESTS).collect::<Vec<_>>());
    assert!(parts.is_quiescent());
}
