//! `[transport] kind = "verbs"` in `cluster.toml`
//! (splitkv_host::deploy::config::verbs), checked without rdma-core or a
//! device: the fields and their defaults, every rejection one line naming
//! its field (numbers out of range, a privileged QKey, a node on another
//! transport, no etcd membership), the transport configuration built from
//! them, and, in a build without the feature `verbs`, a verbs node refused
//! with the one line that says so. Also the peer directory the etcd driver
//! fills and the sync that turns it into the transport's registrations and
//! re-points (splitkv_host::deploy::verbs).

use splitkv_host::deploy::config::verbs::{
    VERBS_DEVICE_BYTES_MAX, VERBS_INLINE_BYTES_MAX, VERBS_QKEY_PRIVILEGED_BIT,
};
use splitkv_host::deploy::config::{ClusterConfig, ConfigError, TransportKind};
use splitkv_host::deploy::verbs::{
    PeerAction, PeerSync, PublishedPeers, VerbsCounters, VerbsPeers,
};
use splitkv_nic::net::verbs::{
    VerbsAddress, VerbsPeer, VERBS_DEPTH_MAX, VERBS_INLINE_REQUEST_DEFAULT, VERBS_MTU_DEFAULT,
    VERBS_MTU_MAX, VERBS_QKEY_DEFAULT, VERBS_RECV_DEPTH_DEFAULT, VERBS_SEND_DEPTH_DEFAULT,
    VERBS_SIGNAL_EVERY_DEFAULT,
};
use splitkv_nic::NODES_MAX;
use std::net::SocketAddr;

const ETCD: &str = "[membership]\nkind = \"etcd\"\nendpoints = [\"http://127.0.0.1:2379\"]\n";

/// A three-node verbs file: `transport` lines under `[transport]` (after
/// `kind`), `membership` appended, node `i` at 10.0.0.`i+1`:7100.
fn verbs_file(transport: &str, membership: &str) -> String {
    let mut text = format!(
        "cluster_id = 4\ntoken = \"t\"\nreplication = 3\n[transport]\nkind = \"verbs\"\n{transport}\n"
    );
    for i in 0..3 {
        text.push_str(&format!(
            "[[node]]\nid = {i}\ndata = \"10.0.0.{}:7100\"\ncontrol = \"127.0.0.1:{}\"\n",
            i + 1,
            7200 + i
        ));
    }
    text.push_str(membership);
    text
}

/// Asserts `text` is rejected with one line naming `field`; returns the error.
fn rejected_naming(text: &str, field: &str) -> ConfigError {
    let err = text
        .parse::<ClusterConfig>()
        .expect_err("the file must be rejected");
    let line = err.to_string();
    assert!(!line.contains('\n'), "not one line: {line:?}");
    assert!(line.starts_with(&format!("{field}: ")), "{line:?}");
    assert_eq!(err.field(), Some(field));
    err
}

#[test]
fn a_verbs_file_parses_with_the_named_defaults() {
    let config: ClusterConfig = verbs_file("", ETCD).parse().unwrap();
    for n in &config.nodes {
        assert_eq!(n.transport.kind, TransportKind::Verbs);
        assert_eq!(n.transport.kind.name(), "verbs");
        assert_eq!(n.transport.mtu, VERBS_MTU_DEFAULT);
        assert!(n.dpdk.is_none());
        let v = n.verbs.as_ref().expect("verbs settings");
        assert_eq!(v.device, None, "the first device");
        assert_eq!((v.port, v.gid_index), (1, 0));
        assert_eq!(v.qkey, VERBS_QKEY_DEFAULT);
        assert_eq!(v.recv_depth, VERBS_RECV_DEPTH_DEFAULT);
        assert_eq!(v.send_depth, VERBS_SEND_DEPTH_DEFAULT);
        assert_eq!(v.signal_every, VERBS_SIGNAL_EVERY_DEFAULT);
        assert_eq!(v.inline_bytes, VERBS_INLINE_REQUEST_DEFAULT);
    }
}

#[test]
fn the_shipped_verbs_example_parses() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster-3-verbs.toml");
    let config = ClusterConfig::from_file(path).expect("the example parses");
    assert_eq!(config.nodes.len(), 3);
    for n in &config.nodes {
        assert_eq!(n.transport.kind, TransportKind::Verbs);
        let v = n.verbs.as_ref().expect("verbs");
        assert_eq!((v.device.as_deref(), v.gid_index), (Some("rxe0"), 1));
    }
}

#[test]
fn every_verbs_field_is_read_and_a_node_may_override_it() {
    let text = verbs_file(
        "device = \"mlx5_0\"\nport = 2\ngid_index = 3\nqkey = 0x2222\nmtu = 4096\n\
         recv_depth = 1024\nsend_depth = 128\nsignal_every = 16\ninline_bytes = 0",
        ETCD,
    )
    .replace(
        "id = 2\n",
        "id = 2\ntransport = { device = \"rxe0\", gid_index = 1 }\n",
    );
    let config: ClusterConfig = text.parse().unwrap();
    let v = config.nodes[0].verbs.as_ref().expect("verbs");
    assert_eq!(v.device.as_deref(), Some("mlx5_0"));
    assert_eq!((v.port, v.gid_index, v.qkey), (2, 3, 0x2222));
    assert_eq!(
        (v.recv_depth, v.send_depth, v.signal_every),
        (1024, 128, 16)
    );
    assert_eq!(v.inline_bytes, 0);
    assert_eq!(config.nodes[0].transport.mtu, VERBS_MTU_MAX);
    let over = config.nodes[2].verbs.as_ref().expect("verbs");
    assert_eq!(over.device.as_deref(), Some("rxe0"));
    assert_eq!(
        (over.port, over.gid_index),
        (2, 1),
        "the rest from [transport]"
    );

    // The transport's configuration: the same fields, no peer known yet.
    let cfg = v.verbs_config(config.nodes[0].transport.mtu, config.nodes.len());
    assert_eq!(cfg.device.as_deref(), Some("mlx5_0"));
    assert_eq!((cfg.port, cfg.gid_index, cfg.qkey), (2, 3, 0x2222));
    assert_eq!(cfg.mtu, VERBS_MTU_MAX);
    assert_eq!((cfg.recv_depth, cfg.send_depth), (1024, 128));
    assert_eq!((cfg.signal_every, cfg.inline_request), (16, 0));
    assert_eq!(cfg.peers, vec![None; 3]);
    assert_eq!(cfg.check(), Ok(()));
}

#[test]
fn a_small_send_depth_lowers_the_default_signalling_period() {
    let config: ClusterConfig = verbs_file("send_depth = 8", ETCD).parse().unwrap();
    let v = config.nodes[0].verbs.as_ref().expect("verbs");
    assert_eq!(v.signal_every, 8);
}

#[test]
fn bad_verbs_values_are_one_line_naming_the_field() {
    let long = "d".repeat(VERBS_DEVICE_BYTES_MAX + 1);
    for (line, field) in [
        ("device = \"\"".to_string(), "transport.device"),
        (format!("device = \"{long}\""), "transport.device"),
        ("port = 0".into(), "transport.port"),
        ("port = 256".into(), "transport.port"),
        ("gid_index = 256".into(), "transport.gid_index"),
        ("qkey = 0x100000000".into(), "transport.qkey"),
        ("mtu = 511".into(), "transport.mtu"),
        (format!("mtu = {}", VERBS_MTU_MAX + 1), "transport.mtu"),
        ("recv_depth = 0".into(), "transport.recv_depth"),
        (
            format!("recv_depth = {}", VERBS_DEPTH_MAX + 1),
            "transport.recv_depth",
        ),
        ("send_depth = 0".into(), "transport.send_depth"),
        ("signal_every = 0".into(), "transport.signal_every"),
        (
            "send_depth = 8\nsignal_every = 9".into(),
            "transport.signal_every",
        ),
        (
            format!("inline_bytes = {}", VERBS_INLINE_BYTES_MAX + 1),
            "transport.inline_bytes",
        ),
    ] {
        rejected_naming(&verbs_file(&line, ETCD), field);
    }
    let err = rejected_naming(
        &verbs_file(
            &format!("qkey = {:#x}", VERBS_QKEY_PRIVILEGED_BIT | 1),
            ETCD,
        ),
        "transport.qkey",
    );
    assert!(err.to_string().contains("privileged"), "{err}");
    let err = rejected_naming(
        &verbs_file("", ETCD).replace("kind = \"verbs\"", "kind = \"rdma\""),
        "transport.kind",
    );
    assert!(err.to_string().contains("\"verbs\""), "{err}");
}

#[test]
fn every_node_must_be_on_verbs_and_the_membership_on_etcd() {
    let mixed =
        verbs_file("", ETCD).replace("id = 1\n", "id = 1\ntransport = { kind = \"udp\" }\n");
    let err = rejected_naming(&mixed, "node[1].transport.kind");
    assert!(err.to_string().contains("every node"), "{err}");
    let err = rejected_naming(&verbs_file("", ""), "membership.kind");
    assert!(err.to_string().contains("etcd"), "{err}");
    let static_kind = verbs_file("", "[membership]\nkind = \"static\"\n");
    rejected_naming(&static_kind, "membership.kind");
}

#[cfg(not(feature = "verbs"))]
#[test]
fn without_the_verbs_feature_a_verbs_node_is_refused_in_one_line() {
    use splitkv_host::deploy::{node_transport, NodeSetupError};
    let config: ClusterConfig = verbs_file("", ETCD).parse().unwrap();
    let err = node_transport(&config, 1, 7).err().expect("refused");
    assert!(
        matches!(err, NodeSetupError::VerbsNotBuilt { node: 1 }),
        "{err:?}"
    );
    let line = err.to_string();
    assert!(
        line.starts_with("node[1].transport.kind: \"verbs\" needs a build with RDMA verbs"),
        "{line}"
    );
    assert!(!line.contains('\n'));
}

fn addr(text: &str) -> SocketAddr {
    text.parse().expect("address")
}

fn endpoint(qpn: u32) -> VerbsAddress {
    format!("gid=::ffff:10.0.0.1,qpn={qpn},qkey=0x11111111")
        .parse()
        .expect("endpoint")
}

fn published(entries: &[(usize, &str, u32)]) -> PublishedPeers {
    let mut p: PublishedPeers = [None; NODES_MAX];
    for &(n, a, qpn) in entries {
        p[n] = Some(endpoint(qpn).at(addr(a)));
    }
    p
}

#[test]
fn the_directory_moves_its_version_only_on_a_change_and_clones_share_it() {
    let dir = VerbsPeers::new();
    assert_eq!(dir.version(), 0);
    let shared = dir.clone();
    assert_eq!(dir, shared);
    assert_ne!(dir, VerbsPeers::new(), "another directory");
    let p = published(&[(1, "10.0.0.2:7100", 5)]);
    assert!(shared.publish(&p));
    assert!(!shared.publish(&p), "the same endpoints are no change");
    assert_eq!(dir.snapshot(), (1, p));
}

#[test]
fn a_sync_registers_every_published_peer_and_repoints_those_at_their_address() {
    let addrs = vec![
        addr("10.0.0.1:7100"),
        addr("10.0.0.2:7100"),
        addr("10.0.0.3:7100"),
    ];
    let mut sync = PeerSync::new(0, addrs);
    let dir = VerbsPeers::new();
    let mut out = Vec::new();
    sync.refresh(&dir, &mut out);
    assert!(out.is_empty(), "nothing published yet");

    // Node 0 (this one), node 1 at its file address, node 2 replaced by a
    // machine at another address.
    let p = published(&[
        (0, "10.0.0.1:7100", 7),
        (1, "10.0.0.2:7100", 8),
        (2, "10.0.0.9:7100", 9),
    ]);
    dir.publish(&p);
    sync.refresh(&dir, &mut out);
    let peer = |n: usize| p[n].expect("published");
    assert_eq!(
        out,
        vec![
            PeerAction::Register(peer(1)),
            PeerAction::Register(peer(2)),
            PeerAction::Repoint(1, addr("10.0.0.2:7100")),
        ],
        "not itself; node 2 waits for the membership to move it"
    );
    out.clear();
    sync.refresh(&dir, &mut out);
    assert!(out.is_empty(), "an unchanged directory is no work");

    // The membership moves node 2; node 1 restarts with a new queue pair
    // at the same machine: re-pointed at once.
    sync.repointed(2, addr("10.0.0.9:7100"));
    assert_eq!(sync.address(2), Some(addr("10.0.0.9:7100")));
    let q = published(&[(1, "10.0.0.2:7100", 80), (2, "10.0.0.9:7100", 9)]);
    dir.publish(&q);
    sync.refresh(&dir, &mut out);
    let restarted: VerbsPeer = q[1].expect("published");
    assert_eq!(restarted.qpn, 80);
    assert_eq!(
        out,
        vec![
            PeerAction::Register(restarted),
            PeerAction::Register(q[2].expect("published")),
            PeerAction::Repoint(1, addr("10.0.0.2:7100")),
            PeerAction::Repoint(2, addr("10.0.0.9:7100")),
        ]
    );
}

#[test]
fn status_shows_the_local_endpoint_and_the_published_peers() {
    use splitkv_host::deploy::VerbsLink;
    let link = VerbsLink {
        local: endpoint(7),
        peers: VerbsPeers::new(),
        counters: VerbsCounters::new(),
    };
    link.peers.publish(&published(&[(2, "10.0.0.3:7100", 9)]));
    let json = link.to_json();
    assert_eq!(json["local"], "gid=::ffff:10.0.0.1,qpn=0x7,qkey=0x11111111");
    assert_eq!(json["peers_version"], 1);
    assert_eq!(
        json["peers"]["2"],
        "addr=10.0.0.3:7100,gid=::ffff:10.0.0.1,qpn=0x9,qkey=0x11111111"
    );
    assert_eq!(json["peers"].as_object().map(|o| o.len()), Some(1));
}

#[test]
fn verbs_counters_appear_in_status_and_metrics() {
    use splitkv_host::deploy::{NodeMetrics, VerbsLink, VerbsSnapshot};
    use splitkv_nic::net::verbs::RxDrop;
    let link = VerbsLink {
        local: endpoint(7),
        peers: VerbsPeers::new(),
        counters: VerbsCounters::new(),
    };
    let mut snap = VerbsSnapshot::default();
    snap.transport.tx_packets = 5;
    snap.transport.tx_inline = 4;
    snap.transport.tx_unknown_peer = 2;
    snap.transport.rx_packets = 7;
    snap.transport.rx_dropped.count(RxDrop::Stranger);
    snap.transport.rx_dropped.count(RxDrop::Stranger);
    snap.transport.rx_dropped.count(RxDrop::WrongQkey);
    snap.peers_repointed = 1;
    snap.endpoints_refused = 3;
    link.counters.clone().publish(snap);
    let json = link.to_json();
    let t = &json["transport"];
    assert_eq!(t["tx"]["packets"], 5);
    assert_eq!(t["tx"]["inline"], 4);
    assert_eq!(t["tx"]["unknown_peer"], 2);
    assert_eq!(t["rx"]["packets"], 7);
    assert_eq!(t["rx"]["dropped"]["stranger"], 2);
    assert_eq!(t["rx"]["dropped"]["wrong_qkey"], 1);
    assert_eq!(t["rx"]["dropped_total"], 3);
    assert_eq!(
        t["rx"]["dropped"].as_object().map(|o| o.len()),
        Some(RxDrop::ALL.len())
    );
    assert_eq!(t["peers_repointed"], 1);
    assert_eq!(t["endpoints_refused"], 3);

    let plain = NodeMetrics::new(4, 1);
    plain.update_verbs(&snap);
    let mut out = String::new();
    plain.encode(&mut out).unwrap();
    assert!(!out.contains("verbs"), "a UDP node has no verbs metrics");
    let dpdk = NodeMetrics::new(4, 1).with_dpdk();
    let mut out = String::new();
    dpdk.encode(&mut out).unwrap();
    assert!(!out.contains("verbs"), "a DPDK node has no verbs metrics");

    let metrics = NodeMetrics::new(4, 1).with_verbs();
    metrics.update_verbs(&snap);
    metrics.update_verbs(&snap); // cumulative: the same snapshot adds nothing
    let mut later = snap;
    later.transport.tx_packets = 9;
    later.endpoints_refused = 4;
    metrics.update_verbs(&later);
    let mut out = String::new();
    metrics.encode(&mut out).unwrap();
    assert!(!out.contains("dpdk"), "a verbs node has no DPDK metrics");
    for (name, value) in [
        ("verbs_packets_sent", 9),
        ("verbs_tx_inline", 4),
        ("verbs_tx_signaled", 0),
        ("verbs_packets_received", 7),
        ("verbs_tx_unknown_peer", 2),
        ("verbs_tx_too_long", 0),
        ("verbs_tx_queue_full", 0),
        ("verbs_tx_pool_exhausted", 0),
        ("verbs_tx_completion_errors", 0),
        ("verbs_post_errors", 0),
        ("verbs_rx_topup_short", 0),
        ("verbs_peers_repointed", 1),
        ("verbs_endpoints_refused", 4),
    ] {
        let line = format!("splitkv_{name}_total{{cluster=\"4\",node=\"1\"}} {value}\n");
        assert!(out.contains(&line), "{line} in {out}");
        assert!(
            out.contains(&format!("# TYPE splitkv_{name} counter")),
            "{name} in {out}"
        );
    }
    for (reason, value) in [("stranger", 2), ("wrong_qkey", 1), ("former_peer", 0)] {
        let line = format!(
            "splitkv_verbs_rx_dropped_total{{cluster=\"4\",node=\"1\",reason=\"{reason}\"}} {value}\n"
        );
        assert!(out.contains(&line), "{line} in {out}");
    }
}

#[test]
fn a_sync_ignores_entries_past_the_cluster() {
    let mut sync = PeerSync::new(0, vec![addr("10.0.0.1:7100"), addr("10.0.0.2:7100")]);
    let dir = VerbsPeers::new();
    dir.publish(&published(&[(5, "10.0.0.6:7100", 3)]));
    let mut out = Vec::new();
    sync.refresh(&dir, &mut out);
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(sync.address(5), None);
}
