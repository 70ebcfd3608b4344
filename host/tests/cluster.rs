//! The embedding API (`Cluster::builder()`): settings checked with typed
//! errors, clients per application thread, bulk load onto every replica,
//! stats, clean shutdown into readable tables, and a panicking polling thread
//! stopping the whole cluster with its message.

mod support;

use splitkv_host::cluster::{ClusterError, LoadError, LOADED_VERSION};
use splitkv_host::table::{HostTableError, TableKind};
use splitkv_host::{ClientError, Cluster, NodeError};
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::Key;
use splitkv_layout::VALUE_BYTES_MAX;
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::net::Transport;
use splitkv_nic::{CommitProtocol, PlacementError};
use std::time::{Duration, Instant};
use support::{as_u64, counter, registry, BOOM, BOOM_MESSAGE, GET, INCR};

fn err(b: splitkv_host::ClusterBuilder) -> ClusterError {
    b.build().expect_err("invalid settings")
}

#[test]
fn invalid_settings_are_typed_errors() {
    let b = || Cluster::builder().procedures(registry());
    assert_eq!(
        err(b().nodes(0)),
        ClusterError::Placement(PlacementError::Nodes(0))
    );
    assert_eq!(
        err(b().nodes(3).replication(4)),
        ClusterError::Placement(PlacementError::Replication {
            replication: 4,
            nodes: 3
        })
    );
    assert!(matches!(
        err(b().threads(0)),
        ClusterError::Setting {
            setting: "threads",
            value: 0,
            ..
        }
    ));
    assert!(matches!(
        err(b().capacity_keys(0)),
        ClusterError::Setting {
            setting: "capacity_keys",
            ..
        }
    ));
    assert!(matches!(
        err(b().value_bytes_max(0)),
        ClusterError::Setting {
            setting: "value_bytes_max",
            ..
        }
    ));
    assert_eq!(
        err(b().value_bytes_max(VALUE_BYTES_MAX + 1)),
        ClusterError::Node(NodeError::ValueTooLarge(VALUE_BYTES_MAX + 1))
    );
    assert_eq!(
        err(b().clients_per_node(0)),
        ClusterError::Node(NodeError::Clients(0))
    );
    assert_eq!(
        err(b().table(TableKind::Dlht).value_bytes_max(64)),
        ClusterError::Node(NodeError::Table(HostTableError::DlhtValueSize(64)))
    );
    let two: Vec<Box<dyn Transport>> = mem_network(2)
        .into_iter()
        .map(|t| Box::new(t) as Box<dyn Transport>)
        .collect();
    assert_eq!(
        b().nodes(3).build_parts(two).unwrap_err(),
        ClusterError::Transports { given: 2, nodes: 3 }
    );
}

#[test]
fn clients_are_handed_out_per_node_up_to_the_setting() {
    let cluster = Cluster::builder()
        .nodes(2)
        .replication(2)
        .clients_per_node(2)
        .procedures(registry())
        .build()
        .unwrap();
    let _a = cluster.client(0).unwrap();
    let _b = cluster.client(0).unwrap();
    assert_eq!(
        cluster.client(0).unwrap_err(),
        ClusterError::NoFreeClient {
            node: 0,
            clients: 2
        }
    );
    assert_eq!(
        cluster.client(2).unwrap_err(),
        ClusterError::BadNode { node: 2, nodes: 2 }
    );
    assert!(cluster.client(1).is_ok());
    cluster.shutdown().unwrap();
}

#[test]
fn load_puts_rows_on_every_replica_and_only_there() {
    let b = Cluster::builder()
        .nodes(3)
        .replication(2)
        .capacity_keys(1000)
        .value_bytes_max(16)
        .procedures(registry());
    let transports = mem_network(3)
        .into_iter()
        .map(|t| Box::new(t) as Box<dyn Transport>)
        .collect();
    let mut parts = b.build_parts(transports).unwrap();
    let rows = (0..1000u64).map(|i| (counter(i), i.to_le_bytes()));
    let mut calls = Vec::new();
    let done = parts.load(rows, |p| calls.push(p.rows)).unwrap();
    assert_eq!((done.rows, done.copies), (1000, 2000));
    assert_eq!(calls.last(), Some(&1000), "progress reports the end");
    let mut v = Vec::new();
    for i in 0..1000u64 {
        let k = counter(i);
        for n in 0..3u16 {
            let meta = parts.table(n).unwrap().get(&k, &mut v);
            assert_eq!(
                meta.is_some(),
                parts.placement.is_replica(n, &k),
                "{k:?} on node {n}"
            );
            if let Some(m) = meta {
                assert_eq!(
                    (m.version(), v.as_slice()),
                    (LOADED_VERSION, &i.to_le_bytes()[..])
                );
            }
        }
    }
    let held: usize = (0..3).map(|n| parts.table(n).unwrap().len()).sum();
    assert_eq!(held, 2000);
    // Typed errors: too large, already present, table full.
    assert_eq!(
        parts
            .load([(counter(5000), [0u8; 17])], |_| {})
            .unwrap_err(),
        LoadError::ValueTooLarge {
            key: counter(5000),
            len: 17,
            max: 16
        }
    );
    assert!(matches!(
        parts.load([(counter(7), [0u8; 8])], |_| {}).unwrap_err(),
        LoadError::KeyExists { key, .. } if key == counter(7)
    ));
    let mut tiny = Cluster::builder()
        .nodes(1)
        .replication(1)
        .configure(|c| c.table.capacity_keys = 16)
        .build_parts(vec![Box::new(mem_network(1).pop().unwrap())])
        .unwrap();
    let many = (0..10_000u64).map(|i| (Key::new(2, i), [1u8; 8]));
    assert!(matches!(
        tiny.load(many, |_| {}).unwrap_err(),
        LoadError::TableFull { node: 0, .. }
    ));
}

#[test]
fn threads_share_a_running_cluster_and_shutdown_returns_its_tables() {
    threads_share_a_running_cluster(CommitProtocol::XenicOcc);
}

/// The same on Dnl-4 (`protocol/coordinator/dnl.rs`): every replica's host
/// table, backups included (installed at Readable), ends with every commit.
#[test]
fn a_dnl4_cluster_commits_on_every_replica() {
    threads_share_a_running_cluster(CommitProtocol::Dnl4);
}

/// The same on Dnl-2 (backups install at Readable, sent with Unlock).
#[test]
fn a_dnl2_cluster_commits_on_every_replica() {
    threads_share_a_running_cluster(CommitProtocol::Dnl2);
}

/// The same on Dnl-1 (every replica is a lock holder and installs at
/// Unlock).
#[test]
fn a_dnl1_cluster_commits_on_every_replica() {
    threads_share_a_running_cluster(CommitProtocol::Dnl1);
}

fn threads_share_a_running_cluster(protocol: CommitProtocol) {
    const THREADS: u64 = 6;
    const CALLS: u64 = 150;
    let mut cluster = Cluster::builder()
        .commit_protocol(protocol)
        .nodes(3)
        .replication(3)
        .clients_per_node(2)
        .capacity_keys(64)
        .value_bytes_max(8)
        .procedures(registry())
        .seed(7)
        .build()
        .unwrap();
    cluster
        .load(
            (0..THREADS).map(|t| (counter(t), 0u64.to_le_bytes())),
            |_| {},
        )
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let mut client = cluster.client((t % 3) as u16).unwrap();
            s.spawn(move || {
                let mut expect = 1;
                while expect <= CALLS {
                    let o = client.call(INCR, &t.to_le_bytes()).unwrap();
                    if o.status.is_conflict() {
                        continue;
                    }
                    assert_eq!(o.status, TxStatus::Committed);
                    assert_eq!(as_u64(&o.result), expect, "thread {t} sees its own counter");
                    expect += 1;
                }
                let o = client.call(GET, &t.to_le_bytes()).unwrap();
                assert_eq!(as_u64(&o.result), CALLS);
            });
        }
    });
    cluster.check().unwrap();
    let parts = cluster.shutdown().unwrap();
    let stats = parts.stats();
    assert_eq!(stats.committed(), THREADS * (CALLS + 1));
    assert!(stats.packets() > 0 && stats.messages_per_packet() >= 1.0);
    assert_eq!(stats.worker().bad_entries, 0);
    let mut v = Vec::new();
    for t in 0..THREADS {
        for n in 0..3u16 {
            let meta = parts
                .table(n)
                .unwrap()
                .get(&counter(t), &mut v)
                .expect("on every replica");
            assert_eq!(as_u64(&v), CALLS, "node {n} counter {t}");
            assert_eq!(meta.version(), LOADED_VERSION + CALLS);
        }
    }
}

#[test]
fn stats_of_a_running_cluster_catch_up() {
    let cluster = Cluster::builder()
        .nodes(2)
        .replication(2)
        .procedures(registry())
        .build()
        .unwrap();
    let mut c = cluster.client(1).unwrap();
    for i in 0..20u64 {
        assert!(c.call(INCR, &i.to_le_bytes()).unwrap().is_committed());
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while cluster.stats().committed() < 20 {
        assert!(Instant::now() < deadline, "stats never published");
        std::thread::sleep(Duration::from_millis(1));
    }
    let s = cluster.stats();
    assert_eq!(s.committed(), 20);
    assert_eq!(s.aborted(), 0);
    assert_eq!(
        s.nodes[1].nic.clients.requests, 20,
        "all from node 1's client"
    );
}

#[test]
fn load_between_runs_is_visible_to_transactions() {
    let mut cluster = Cluster::builder()
        .nodes(3)
        .replication(2)
        .procedures(registry())
        .build()
        .unwrap();
    let mut c = cluster.client(0).unwrap();
    assert_eq!(c.call(GET, &9u64.to_le_bytes()).unwrap().result, b"");
    cluster
        .load([(counter(9), 41u64.to_le_bytes())], |_| {})
        .unwrap();
    let o = c.call(INCR, &9u64.to_le_bytes()).unwrap();
    assert_eq!((o.status, as_u64(&o.result)), (TxStatus::Committed, 42));
    assert!(matches!(
        cluster.load([(counter(9), [0u8; 8])], |_| {}).unwrap_err(),
        ClusterError::Load(LoadError::KeyExists { .. })
    ));
    assert_eq!(
        as_u64(&c.call(GET, &9u64.to_le_bytes()).unwrap().result),
        42,
        "still running"
    );
    cluster.shutdown().unwrap();
}

#[test]
fn a_panicking_procedure_stops_the_whole_cluster_with_its_message() {
    let cluster = Cluster::builder()
        .nodes(3)
        .replication(3)
        .threads(3)
        .procedures(registry())
        .build()
        .unwrap();
    let mut victim = cluster.client(0).unwrap();
    let mut bystander = cluster.client(1).unwrap();
    let started = Instant::now();
    let waiting = std::thread::spawn(move || {
        // Spins on a node whose thread keeps running until the panic stops it.
        loop {
            match bystander.call(INCR, &1u64.to_le_bytes()) {
                Ok(_) => continue,
                Err(e) => return e,
            }
        }
    });
    std::thread::sleep(Duration::from_millis(20));
    let e = victim.call(BOOM, b"").unwrap_err();
    assert!(
        matches!(&e, ClientError::Panicked { message, .. } if message == BOOM_MESSAGE),
        "{e:?}"
    );
    assert!(matches!(
        waiting.join().unwrap(),
        ClientError::Panicked { .. }
    ));
    let report = cluster.check().unwrap_err();
    assert!(report.is_panic());
    match cluster.shutdown().unwrap_err() {
        ClusterError::Panicked { thread, message } => {
            assert!(thread.starts_with("splitkv-poll-"), "{thread}");
            assert_eq!(message, BOOM_MESSAGE);
        }
        other => panic!("expected Panicked, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "stopped promptly"
    );
}

#[test]
fn build_parts_can_be_driven_on_one_thread_with_virtual_time() {
    // What the simulator does: poll every component itself, `now` its own.
    let b = Cluster::builder()
        .nodes(3)
        .replication(3)
        .clients_per_node(2)
        .procedures(registry())
        .seed(3);
    let transports = mem_network(3)
        .into_iter()
        .map(|t| Box::new(t) as Box<dyn Transport>)
        .collect();
    let mut parts = b.build_parts(transports).unwrap();
    parts
        .load([(counter(1), 10u64.to_le_bytes())], |_| {})
        .unwrap();
    let mut clients = [parts.client(0).unwrap(), parts.client(2).unwrap()];
    for (i, c) in clients.iter_mut().enumerate() {
        c.submit(i as u64, INCR, &1u64.to_le_bytes()).unwrap();
    }
    let mut now = 0;
    let mut results = Vec::new();
    while results.len() < 2 {
        for comp in parts.components() {
            comp.run_iteration(now);
        }
        now += 100;
        assert!(now < 100_000_000, "no outcomes");
        for c in clients.iter_mut() {
            c.poll(8, |o| results.push((o.req_id, o.status))).unwrap();
        }
    }
    assert!(parts.drain(10_000, || now));
    let committed = results
        .iter()
        .filter(|r| r.1 == TxStatus::Committed)
        .count() as u64;
    let mut v = Vec::new();
    assert_eq!(
        parts.get(&counter(1), &mut v),
        Some(LOADED_VERSION + committed)
    );
    assert_eq!(as_u64(&v), 10 + committed);
    assert_eq!(parts.stats().committed(), committed);
    // The same parts then run on threads.
    let cluster = parts.start().unwrap();
    let mut c = cluster.client(0).unwrap();
    let o = c.call(GET, &1u64.to_le_bytes()).unwrap();
    assert_eq!(as_u64(&o.result), 10 + committed);
    cluster.shutdown().unwrap();
}
