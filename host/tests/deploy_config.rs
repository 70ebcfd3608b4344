//! `cluster.toml` parsing and checking (splitkv_host::deploy::config): the
//! shipped example parses; every rejection is one line naming its field; no
//! input panics the parser.

use std::net::SocketAddr;
use std::path::Path;

use proptest::prelude::*;
use splitkv_host::deploy::config::{
    ClusterConfig, ConfigError, LogTarget, TransportKind, CAPACITY_KEYS_DEFAULT, MTU_DEFAULT,
    MTU_MAX, MTU_MIN, RETRANSMIT_TIMEOUT_US_DEFAULT, SESSION_SILENCE_MS_DEFAULT,
    SOCKET_BUFFER_BYTES_DEFAULT,
};
use splitkv_host::table::TableKind;
use splitkv_layout::VALUE_BYTES_MAX;
use splitkv_nic::index::CACHE_OBJECTS_DEFAULT;
use splitkv_nic::{CommitProtocol, NODES_MAX};

/// `[[node]]` tables for `n` nodes on loopback, ids 0..n.
fn nodes(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "[[node]]\nid = {i}\ndata = \"127.0.0.1:{}\"\ncontrol = \"127.0.0.1:{}\"\n",
                7100 + i,
                7200 + i
            )
        })
        .collect()
}

/// A valid three-node file with `extra` top-level lines before the nodes.
fn file(extra: &str) -> String {
    format!(
        "cluster_id = 9\ntoken = \"t0k\"\nreplication = 3\n{extra}\n{}",
        nodes(3)
    )
}

/// The error of `text`, checked to be one line.
fn rejected(text: &str) -> ConfigError {
    let err = text
        .parse::<ClusterConfig>()
        .expect_err("the file must be rejected");
    let line = err.to_string();
    assert!(!line.contains('\n'), "not one line: {line:?}");
    err
}

/// Asserts `text` is rejected with a message naming `field`.
fn rejected_naming(text: &str, field: &str) -> String {
    let err = rejected(text);
    let line = err.to_string();
    assert!(
        line.starts_with(&format!("{field}: ")),
        "{line:?} does not name {field}"
    );
    assert_eq!(err.field(), Some(field));
    line
}

fn example_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster-3-udp.toml")
}

#[test]
fn shipped_example_parses() {
    let config = ClusterConfig::from_file(example_path()).expect("the example parses");
    assert_eq!(config.nodes.len(), 3);
    assert_eq!(config.replication, 3);
    assert_eq!(config.log, LogTarget::Stderr);
    for (i, node) in config.nodes.iter().enumerate() {
        assert_eq!(node.id as usize, i);
        let data: SocketAddr = format!("127.0.0.1:{}", 7100 + i).parse().unwrap();
        let control: SocketAddr = format!("127.0.0.1:{}", 7200 + i).parse().unwrap();
        assert_eq!((node.data, node.control), (data, control));
        assert_eq!(node.transport.kind, TransportKind::Udp);
        assert_eq!(node.transport.mtu, 1472);
        assert_eq!(node.transport.loss_ppm, 0);
    }
    assert!(config.protocol.batching);
    assert!(!config.token.is_empty());
}

#[test]
fn absent_sections_take_the_named_defaults() {
    let config: ClusterConfig = file("").parse().unwrap();
    assert_eq!(config.cluster_id, 9);
    assert_eq!(config.table.kind, TableKind::Robinhood);
    assert_eq!(config.table.capacity_keys, CAPACITY_KEYS_DEFAULT);
    assert_eq!(config.table.value_bytes_max, VALUE_BYTES_MAX);
    assert!(config.protocol.batching);
    assert_eq!(
        config.protocol.session_silence_ms,
        SESSION_SILENCE_MS_DEFAULT
    );
    assert_eq!(
        config.protocol.retransmit_timeout_us,
        RETRANSMIT_TIMEOUT_US_DEFAULT
    );
    let t = config.nodes[0].transport;
    assert_eq!((t.kind, t.mtu), (TransportKind::Udp, MTU_DEFAULT));
    assert_eq!(t.socket_send_buffer_bytes, SOCKET_BUFFER_BYTES_DEFAULT);
    assert_eq!(t.socket_recv_buffer_bytes, SOCKET_BUFFER_BYTES_DEFAULT);
    assert_eq!((t.loss_ppm, t.duplicate_ppm, t.reorder_ppm), (0, 0, 0));
    assert!(config.nodes[0].cores.is_empty());
    assert_eq!(config.table.cache_objects, CACHE_OBJECTS_DEFAULT);
    assert_eq!(config.protocol.commit, CommitProtocol::XenicOcc);
}

#[test]
fn commit_protocol_is_read_and_reaches_the_node_config() {
    let config: ClusterConfig = file("[protocol]\ncommit = \"xenic-occ\"").parse().unwrap();
    assert_eq!(config.protocol.commit, CommitProtocol::XenicOcc);
    assert_eq!(
        config.node_config(0).unwrap().commit,
        CommitProtocol::XenicOcc
    );
}

#[test]
fn unknown_or_undeployable_commit_protocols_are_rejected() {
    let line = rejected_naming(&file("[protocol]\ncommit = \"paxos\""), "protocol.commit");
    assert!(line.contains("unknown commit protocol \"paxos\""), "{line}");
    // Every Dnl row runs, but node processes must survive every crash.
    for name in ["dnl4", "dnl2", "dnl1"] {
        let line = rejected_naming(
            &file(&format!("[protocol]\ncommit = \"{name}\"")),
            "protocol.commit",
        );
        assert!(
            line.contains(&format!("{name} does not recover yet")),
            "{line}"
        );
    }
    // A value of the wrong type is a syntax error with its position.
    let err = rejected(&file("[protocol]\ncommit = 4"));
    assert!(matches!(err, ConfigError::Syntax { .. }), "{err}");
}

#[test]
fn node_config_carries_the_file_table_and_placement() {
    let config: ClusterConfig =
        file("[table]\nkind = \"dlht\"\ncapacity_keys = 5000\ncache_objects = 77")
            .parse()
            .unwrap();
    let node = config.node_config(2).unwrap();
    assert_eq!(node.node, 2);
    assert_eq!(
        (node.placement.nodes(), node.placement.replication()),
        (3, 3)
    );
    assert_eq!(node.table_kind, TableKind::Dlht);
    assert_eq!(node.table.capacity_keys, 5000);
    assert_eq!(node.cache_objects, 77);
    let err = config.node_config(3).unwrap_err();
    assert_eq!(err.field(), Some("node"));
}

#[test]
fn a_node_transport_overrides_the_cluster_default_field_by_field() {
    let text = "cluster_id = 1\ntoken = \"t\"\nreplication = 2\nlog = \"/tmp/n.log\"\n\
         [table]\nkind = \"dlht\"\n[transport]\nkind = \"mem\"\nloss_ppm = 10000\n\
         [[node]]\nid = 1\ndata = \"127.0.0.1:7101\"\ncontrol = \"127.0.0.1:7201\"\n\
         cores = [2, 3]\ntransport = { mtu = 9000, kind = \"udp\" }\n\
         [[node]]\nid = 0\ndata = \"127.0.0.1:7100\"\ncontrol = \"127.0.0.1:7200\"\n";
    let config: ClusterConfig = text.parse().unwrap();
    assert_eq!(config.table.kind, TableKind::Dlht);
    assert_eq!(config.log, LogTarget::File("/tmp/n.log".into()));
    // Nodes come back in id order whatever the file's order.
    assert_eq!(config.nodes[0].id, 0);
    assert_eq!(config.nodes[0].transport.kind, TransportKind::Mem);
    assert_eq!(config.nodes[0].transport.mtu, MTU_DEFAULT);
    let one = config.node(1).unwrap();
    assert_eq!(
        (one.transport.kind, one.transport.mtu),
        (TransportKind::Udp, 9000)
    );
    assert_eq!(
        one.transport.loss_ppm, 10000,
        "unset fields come from [transport]"
    );
    assert_eq!(one.cores, vec![2, 3]);
}

#[test]
fn duplicate_node_id_is_rejected() {
    let text = file("").replace("id = 2", "id = 1");
    let line = rejected_naming(&text, "node[2].id");
    assert!(line.contains("duplicate"), "{line}");
}

#[test]
fn ids_not_zero_to_n_minus_one_are_rejected() {
    let text = file("").replace("id = 2", "id = 5");
    rejected_naming(&text, "node[2].id");
    let text = file("").replace("id = 2", &format!("id = {NODES_MAX}"));
    rejected_naming(&text, "node[2].id");
}

#[test]
fn duplicate_data_address_is_rejected() {
    let text = file("").replace("127.0.0.1:7102", "127.0.0.1:7100");
    let line = rejected_naming(&text, "node[2].data");
    assert!(line.contains("node[0].data"), "{line}");
}

#[test]
fn duplicate_control_address_is_rejected() {
    let text = file("").replace("127.0.0.1:7201", "127.0.0.1:7200");
    rejected_naming(&text, "node[1].control");
}

#[test]
fn replication_over_nodes_or_zero_is_rejected() {
    rejected_naming(
        &file("").replace("replication = 3", "replication = 4"),
        "replication",
    );
    rejected_naming(
        &file("").replace("replication = 3", "replication = 0"),
        "replication",
    );
}

#[test]
fn more_than_nodes_max_is_rejected() {
    let text = format!(
        "cluster_id = 1\ntoken = \"t\"\nreplication = 3\n{}",
        nodes(NODES_MAX + 1)
    );
    rejected_naming(&text, "node");
    let none = "cluster_id = 1\ntoken = \"t\"\nreplication = 1\n";
    rejected_naming(none, "node");
}

#[test]
fn unknown_transport_kind_is_rejected() {
    let line = rejected_naming(&file("[transport]\nkind = \"tcp\""), "transport.kind");
    assert!(line.contains("tcp"), "{line}");
    let text = file("").replace(
        "id = 1\n",
        "id = 1\ntransport = { kind = \"carrier-pigeon\" }\n",
    );
    rejected_naming(&text, "node[1].transport.kind");
}

#[test]
fn mtu_out_of_range_is_rejected() {
    rejected_naming(
        &file(&format!("[transport]\nmtu = {}", MTU_MIN - 1)),
        "transport.mtu",
    );
    rejected_naming(
        &file(&format!("[transport]\nmtu = {}", MTU_MAX + 1)),
        "transport.mtu",
    );
    let text = file("").replace("id = 0\n", "id = 0\ntransport = { mtu = 100 }\n");
    rejected_naming(&text, "node[0].transport.mtu");
}

#[test]
fn socket_buffers_and_fault_rates_out_of_range_are_rejected() {
    let text = file("[transport]\nsocket_recv_buffer_bytes = 1");
    rejected_naming(&text, "transport.socket_recv_buffer_bytes");
    rejected_naming(
        &file("[transport]\nloss_ppm = 1000001"),
        "transport.loss_ppm",
    );
}

#[test]
fn value_size_over_the_node_limit_is_rejected() {
    let text = file(&format!(
        "[table]\nvalue_bytes_max = {}",
        VALUE_BYTES_MAX + 1
    ));
    rejected_naming(&text, "table.value_bytes_max");
    rejected_naming(&file("[table]\ncapacity_keys = 0"), "table.capacity_keys");
    rejected_naming(&file("[table]\nkind = \"btree\""), "table.kind");
    rejected_naming(&file("[table]\ncache_objects = 0"), "table.cache_objects");
}

#[test]
fn empty_or_unprintable_token_is_rejected() {
    rejected_naming(
        &file("").replace("token = \"t0k\"", "token = \"\""),
        "token",
    );
    rejected_naming(
        &file("").replace("token = \"t0k\"", "token = \"a b\""),
        "token",
    );
}

#[test]
fn public_control_address_needs_control_public() {
    let public = file("").replace("127.0.0.1:7200", "0.0.0.0:7200");
    let line = rejected_naming(&public, "node[0].control");
    assert!(line.contains("control_public"), "{line}");
    let allowed = public.replace("id = 0\n", "id = 0\ncontrol_public = true\n");
    let config: ClusterConfig = allowed.parse().unwrap();
    assert!(config.nodes[0].control_public);
}

/// A replacement machine: node 2 moved to other addresses keeps
/// every other node and field; a move the file's checks would refuse is one
/// line naming the node's field, and the file is unchanged by a refusal.
#[test]
fn a_node_moves_to_other_addresses_under_the_files_checks() {
    let config: ClusterConfig = file("").parse().unwrap();
    let data: SocketAddr = "127.0.0.2:7302".parse().unwrap();
    let control: SocketAddr = "127.0.0.2:7402".parse().unwrap();
    let moved = config
        .clone()
        .with_node_moved(2, Some(data), Some(control))
        .expect("a free loopback pair");
    assert_eq!(
        (moved.nodes[2].data, moved.nodes[2].control),
        (data, control)
    );
    assert_eq!(moved.nodes[..2], config.nodes[..2]);
    let only_data = config.clone().with_node_moved(2, Some(data), None).unwrap();
    assert_eq!(only_data.nodes[2].control, config.nodes[2].control);
    let a = |s: &str| Some(s.parse::<SocketAddr>().unwrap());
    let refused = [
        (
            a("127.0.0.1:7100"),
            None,
            "node[2].data",
            "already node[0].data",
        ),
        (a("0.0.0.0:7302"), None, "node[2].data", "peers can send to"),
        (a("127.0.0.2:0"), None, "node[2].data", "port 0"),
        (
            None,
            a("10.0.0.1:7402"),
            "node[2].control",
            "control_public",
        ),
        (
            None,
            a("127.0.0.1:7201"),
            "node[2].control",
            "already node[1].control",
        ),
    ];
    for (data, control, field, why) in refused {
        let e = config
            .clone()
            .with_node_moved(2, data, control)
            .unwrap_err();
        let line = e.to_string();
        assert_eq!(e.field(), Some(field), "{line}");
        assert!(line.contains(why) && !line.contains('\n'), "{line}");
    }
    let e = config
        .with_node_moved(3, a("127.0.0.2:1"), None)
        .unwrap_err();
    assert_eq!(e.field(), Some("node"));
}

#[test]
fn malformed_addresses_are_rejected() {
    rejected_naming(
        &file("").replace("127.0.0.1:7101", "localhost"),
        "node[1].data",
    );
    rejected_naming(
        &file("").replace("127.0.0.1:7101", "127.0.0.1:0"),
        "node[1].data",
    );
}

#[test]
fn protocol_timeouts_out_of_range_are_rejected() {
    let text = file("[protocol]\nsession_silence_ms = 10\nretransmit_timeout_us = 10000");
    rejected_naming(&text, "protocol.retransmit_timeout_us");
    rejected_naming(
        &file("[protocol]\nsession_silence_ms = 1"),
        "protocol.session_silence_ms",
    );
}

#[test]
fn duplicate_cores_and_empty_log_are_rejected() {
    let text = file("").replace("id = 0\n", "id = 0\ncores = [1, 1]\n");
    rejected_naming(&text, "node[0].cores");
    rejected_naming(&file("log = \"\""), "log");
}

#[test]
fn unknown_field_names_it_with_line_and_column() {
    let err = rejected(&file("bogus_field = 1"));
    let ConfigError::Syntax { line, column, .. } = &err else {
        panic!("expected a syntax error, got {err}");
    };
    assert_eq!((*line, *column), (4, 1));
    assert!(err.to_string().contains("bogus_field"), "{err}");
    let err = rejected(&file("[protocol]\nbatching = true\nbatchng = false"));
    assert!(err.to_string().starts_with("line 6, column 1: "), "{err}");
    assert!(err.to_string().contains("batchng"), "{err}");
}

#[test]
fn toml_syntax_error_keeps_line_and_column() {
    let err = rejected("cluster_id = 1\ntoken = \"t\nreplication = 3\n");
    let ConfigError::Syntax { line, .. } = err else {
        panic!("expected a syntax error, got {err}");
    };
    assert_eq!(line, 2);
    let err = rejected("cluster_id = 1\nreplication = 3\n");
    assert!(
        err.to_string().contains("token"),
        "a missing field is named: {err}"
    );
    let err = rejected(&file("").replace("cluster_id = 9", "cluster_id = -1"));
    assert!(
        err.to_string()
            .starts_with("line 1, column 14: cluster_id: "),
        "{err}"
    );
}

#[test]
fn unreadable_file_is_a_read_error() {
    let err = ClusterConfig::from_file("/nonexistent/splitkv/cluster.toml").unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }), "{err}");
    assert!(!err.to_string().contains('\n'));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC*") {
        if let Err(e) = text.parse::<ClusterConfig>() {
            prop_assert!(!e.to_string().contains('\n'));
        }
    }

    #[test]
    fn mutated_example_never_panics(cut in 0usize..2000, len in 0usize..40, insert in "[\\PC\\n]{0,20}") {
        let text = std::fs::read_to_string(example_path()).unwrap();
        let mut cut = cut.min(text.len());
        while !text.is_char_boundary(cut) { cut -= 1; }
        let mut end = (cut + len).min(text.len());
        while !text.is_char_boundary(end) { end -= 1; }
        let mutated = format!("{}{}{}", &text[..cut], insert, &text[end..]);
        if let Err(e) = mutated.parse::<ClusterConfig>() {
            prop_assert!(!e.to_string().contains('\n'));
        }
    }
}
