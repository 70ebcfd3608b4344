//! `[transport] kind = "dpdk"` in `cluster.toml`
//! (splitkv_host::deploy::config::transport), checked without DPDK: the
//! fields and their defaults, the node's EAL arguments, every rejection
//! one line naming its field (a bad or missing MAC, numbers out of range,
//! a non-IPv4 data address), and, in a build without the feature `dpdk`,
//! a DPDK node refused with the one line that says so. Also the DPDK
//! counters' `/status` shape and metrics.

use splitkv_host::deploy::config::{
    ClusterConfig, ConfigError, DpdkSettings, TransportKind, EAL_ARGS_MAX, MTU_DEFAULT,
};
use splitkv_host::deploy::{DpdkCounters, DpdkSnapshot, NodeMetrics};
use splitkv_nic::net::dpdk::{
    MacAddr, RxDrop, DPDK_DESCRIPTORS_DEFAULT, DPDK_DESCRIPTORS_MAX, DPDK_MBUFS_DEFAULT,
    DPDK_MBUFS_MAX, DPDK_MBUFS_MIN, DPDK_MTU_MAX, DPDK_NEIGHBOURS_MAX,
};
use std::net::Ipv4Addr;

/// A three-node DPDK file: `transport` lines under `[transport]` (after
/// `kind` and `device`), node `i` at 10.0.0.`i+1`:7100 with MAC
/// 02:00:00:00:00:0`i+1` unless `macs` is false.
fn dpdk_file(transport: &str, macs: bool) -> String {
    let mut text = format!(
        "cluster_id = 4\ntoken = \"t\"\nreplication = 3\n[transport]\nkind = \"dpdk\"\n\
         device = \"net_af_packet0\"\n{transport}\n"
    );
    for i in 0..3 {
        text.push_str(&format!(
            "[[node]]\nid = {i}\ndata = \"10.0.0.{}:7100\"\ncontrol = \"127.0.0.1:{}\"\n",
            i + 1,
            7200 + i
        ));
        if macs {
            text.push_str(&format!("mac = \"02:00:00:00:00:0{}\"\n", i + 1));
        }
    }
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
fn a_dpdk_file_parses_with_the_named_defaults() {
    let config: ClusterConfig = dpdk_file("", true).parse().unwrap();
    for (i, n) in config.nodes.iter().enumerate() {
        assert_eq!(n.transport.kind, TransportKind::Dpdk);
        assert_eq!(n.transport.mtu, MTU_DEFAULT);
        assert_eq!(n.mac, Some(MacAddr([2, 0, 0, 0, 0, i as u8 + 1])));
        let d = n.dpdk.as_ref().expect("DPDK settings");
        assert_eq!(d.device, "net_af_packet0");
        assert!(d.eal_args.is_empty() && d.neighbours.is_empty());
        assert_eq!(d.mbufs, DPDK_MBUFS_DEFAULT);
        assert_eq!(
            (d.rx_descriptors, d.tx_descriptors),
            (DPDK_DESCRIPTORS_DEFAULT, DPDK_DESCRIPTORS_DEFAULT)
        );
    }
}

#[test]
fn the_shipped_dpdk_example_parses() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster-3-dpdk.toml");
    let config = ClusterConfig::from_file(path).expect("the example parses");
    assert_eq!(config.nodes.len(), 3);
    for (i, n) in config.nodes.iter().enumerate() {
        assert_eq!(n.transport.kind, TransportKind::Dpdk);
        assert_eq!(n.mac, Some(MacAddr([2, 0, 0, 0, 0, i as u8 + 1])));
        let d = n.dpdk.as_ref().unwrap();
        assert_eq!(d.device, "net_af_packet0");
        assert_eq!(d.neighbours.len(), 1);
    }
}

#[test]
fn every_dpdk_field_is_read_and_a_node_overrides_them() {
    let mut text = dpdk_file(
        "eal_args = [\"--no-pci\", \"--vdev=net_af_packet0,iface=eth0\"]\nmbufs = 8191\n\
         rx_descriptors = 512\ntx_descriptors = 256\nmtu = 8000\n\
         neighbours = [{ ip = \"10.0.0.9\", mac = \"02:00:00:00:00:09\" }]",
        true,
    );
    text.push_str("transport = { mbufs = 2047, device = \"net_memif0\" }\n");
    let config: ClusterConfig = text.parse().unwrap();
    let d0 = config.nodes[0].dpdk.as_ref().unwrap();
    assert_eq!(
        d0.eal_args,
        ["--no-pci", "--vdev=net_af_packet0,iface=eth0"]
    );
    assert_eq!(
        (d0.mbufs, d0.rx_descriptors, d0.tx_descriptors),
        (8191, 512, 256)
    );
    assert_eq!(config.nodes[0].transport.mtu, 8000);
    assert_eq!(
        d0.neighbour(Ipv4Addr::new(10, 0, 0, 9)),
        Some(MacAddr([2, 0, 0, 0, 0, 9]))
    );
    assert_eq!(d0.neighbour(Ipv4Addr::new(10, 0, 0, 8)), None);
    let d2 = config.nodes[2].dpdk.as_ref().unwrap();
    assert_eq!((d2.mbufs, d2.device.as_str()), (2047, "net_memif0"));
    assert_eq!(d2.rx_descriptors, 512, "unset fields come from [transport]");
}

#[test]
fn the_node_eal_arguments_are_its_defaults_then_the_file_s() {
    let mut d = DpdkSettings {
        device: "net_ring0".into(),
        eal_args: vec!["--vdev=net_ring0".into()],
        mbufs: DPDK_MBUFS_DEFAULT,
        rx_descriptors: 1,
        tx_descriptors: 1,
        neighbours: Vec::new(),
    };
    assert_eq!(
        d.eal_args_for(&[2, 3]),
        [
            "--no-telemetry",
            "--in-memory",
            "--lcores=0@(2,3)",
            "--vdev=net_ring0"
        ]
    );
    assert_eq!(d.eal_args_for(&[1])[2], "--lcores=0@1");
    assert_eq!(d.eal_args_for(&[])[2], "-l0");
    // Without hugepages: --no-shconf, since DPDK 22.11 refuses --in-memory there.
    d.eal_args = vec!["--no-huge".into(), "-l".into(), "4".into()];
    assert_eq!(
        d.eal_args_for(&[0]),
        ["--no-telemetry", "--no-shconf", "--no-huge", "-l", "4"]
    );
    // What the file says is not said twice.
    d.eal_args = vec![
        "--telemetry".into(),
        "--file-prefix=n0".into(),
        "--lcores=1".into(),
    ];
    assert_eq!(d.eal_args_for(&[0]), d.eal_args);
}

#[test]
fn macs_are_checked_and_required_with_dpdk() {
    let text = dpdk_file("", true).replace("02:00:00:00:00:02", "02:00:00:00:00");
    let err = rejected_naming(&text, "node[1].mac");
    assert!(matches!(err, ConfigError::BadMac { .. }), "{err:?}");
    let text = dpdk_file("", true).replace("02:00:00:00:00:03", "02:00:00:00:00:zz");
    rejected_naming(&text, "node[2].mac");
    let err = rejected_naming(&dpdk_file("", false), "node[0].mac");
    assert!(matches!(err, ConfigError::MissingMac { .. }), "{err:?}");
    let text = dpdk_file("", true).replace("02:00:00:00:00:03", "02:00:00:00:00:01");
    let line = rejected_naming(&text, "node[2].mac").to_string();
    assert!(line.contains("already node[0].mac"), "{line}");
    // One DPDK node is enough for every node to need a MAC.
    let mut mixed = dpdk_file("", false).replace("kind = \"dpdk\"", "kind = \"udp\"");
    mixed.push_str("transport = { kind = \"dpdk\" }\nmac = \"02:00:00:00:00:03\"\n");
    let err = rejected_naming(&mixed, "node[0].mac");
    assert!(matches!(err, ConfigError::MissingMac { .. }), "{err:?}");
    // A UDP cluster needs none, and may carry them.
    let udp = dpdk_file("", true).replace("kind = \"dpdk\"", "kind = \"udp\"");
    let config: ClusterConfig = udp.parse().unwrap();
    assert!(config
        .nodes
        .iter()
        .all(|n| n.dpdk.is_none() && n.mac.is_some()));
}

#[test]
fn numbers_out_of_range_are_refused_by_name() {
    let cases = [
        (format!("mbufs = {}", DPDK_MBUFS_MIN - 1), "transport.mbufs"),
        (
            format!("mbufs = {}", u64::from(DPDK_MBUFS_MAX) + 1),
            "transport.mbufs",
        ),
        ("rx_descriptors = 0".to_string(), "transport.rx_descriptors"),
        (
            format!("tx_descriptors = {}", u32::from(DPDK_DESCRIPTORS_MAX) + 1),
            "transport.tx_descriptors",
        ),
        (format!("mtu = {}", DPDK_MTU_MAX + 1), "transport.mtu"),
        (
            format!(
                "eal_args = [{}]",
                vec!["\"-v\""; EAL_ARGS_MAX + 1].join(", ")
            ),
            "transport.eal_args",
        ),
        ("eal_args = [\"\"]".to_string(), "transport.eal_args[0]"),
        (
            format!(
                "neighbours = [{}]",
                (0..=DPDK_NEIGHBOURS_MAX)
                    .map(|i| format!(
                        "{{ ip = \"10.1.{}.{}\", mac = \"02:00:00:00:01:01\" }}",
                        i / 250,
                        i % 250
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "transport.neighbours",
        ),
        (
            "neighbours = [{ ip = \"::1\", mac = \"02:00:00:00:00:09\" }]".to_string(),
            "transport.neighbours[0].ip",
        ),
        (
            "neighbours = [{ ip = \"10.0.0.9\", mac = \"nope\" }]".to_string(),
            "transport.neighbours[0].mac",
        ),
    ];
    for (line, field) in cases {
        rejected_naming(&dpdk_file(&line, true), field);
    }
}

#[test]
fn a_dpdk_node_needs_a_device_and_ipv4_data_addresses() {
    let no_device = dpdk_file("", true).replace("device = \"net_af_packet0\"\n", "");
    let line = rejected_naming(&no_device, "transport.device").to_string();
    assert!(line.contains("required"), "{line}");
    let v6 = dpdk_file("", true).replace("10.0.0.2:7100", "[::1]:7100");
    rejected_naming(&v6, "node[1].data");
    let unknown = dpdk_file("", true).replace("kind = \"dpdk\"", "kind = \"rdma\"");
    rejected_naming(&unknown, "transport.kind");
}

#[cfg(not(feature = "dpdk"))]
#[test]
fn without_the_dpdk_feature_a_dpdk_node_is_refused_in_one_line() {
    use splitkv_host::deploy::{node_transport, NodeSetupError};
    let config: ClusterConfig = dpdk_file("", true).parse().unwrap();
    let err = node_transport(&config, 1, 7).err().expect("refused");
    assert!(
        matches!(err, NodeSetupError::DpdkNotBuilt { node: 1 }),
        "{err:?}"
    );
    let line = err.to_string();
    assert!(
        line.starts_with("node[1].transport.kind: \"dpdk\" needs a build with DPDK"),
        "{line}"
    );
    assert!(!line.contains('\n'));
}

#[test]
fn dpdk_counters_appear_in_status_and_metrics() {
    let counters = DpdkCounters::new();
    let mut snap = DpdkSnapshot::default();
    snap.transport.packets_sent = 5;
    snap.transport.rx_dropped.0[RxDrop::Stranger as usize] = 3;
    snap.transport.rx_dropped.0[RxDrop::Truncated as usize] = 1;
    snap.port.rx_missed = 2;
    counters.clone().publish(snap);
    let json = counters.to_json();
    assert_eq!(json["tx"]["packets"], 5);
    assert_eq!(json["rx"]["dropped"]["stranger"], 3);
    assert_eq!(json["rx"]["dropped_total"], 4);
    assert_eq!(json["port"]["rx_missed"], 2);
    assert_eq!(
        json["rx"]["dropped"].as_object().unwrap().len(),
        RxDrop::COUNT
    );

    let plain = NodeMetrics::new(4, 1);
    plain.update_dpdk(&snap);
    let mut out = String::new();
    plain.encode(&mut out).unwrap();
    assert!(!out.contains("dpdk"), "a UDP node has no DPDK metrics");

    let metrics = NodeMetrics::new(4, 1).with_dpdk();
    metrics.update_dpdk(&snap);
    metrics.update_dpdk(&snap); // cumulative: the same snapshot adds nothing
    let mut out = String::new();
    metrics.encode(&mut out).unwrap();
    assert!(
        out.contains("splitkv_dpdk_packets_sent_total{cluster=\"4\",node=\"1\"} 5"),
        "{out}"
    );
    assert!(
        out.contains(
            "splitkv_dpdk_rx_dropped_total{cluster=\"4\",node=\"1\",reason=\"stranger\"} 3"
        ),
        "{out}"
    );
    assert!(
        out.contains("splitkv_dpdk_port_rx_missed_total{cluster=\"4\",node=\"1\"} 2"),
        "{out}"
    );

    // The send path's counters: packets sent in place, copied, and
    // buffer reservations refused, each advancing by what its source grew.
    let mut later = snap;
    later.transport.tx_in_place = 40;
    later.transport.tx_copied = 2;
    later.transport.lend_refused = 1;
    metrics.update_dpdk(&later);
    later.transport.tx_in_place = 45;
    metrics.update_dpdk(&later);
    let mut out = String::new();
    metrics.encode(&mut out).unwrap();
    for (name, value) in [
        ("dpdk_tx_in_place", 45),
        ("dpdk_tx_copied", 2),
        ("dpdk_lend_refused", 1),
    ] {
        let line = format!("splitkv_{name}_total{{cluster=\"4\",node=\"1\"}} {value}\n");
        assert!(out.contains(&line), "{line} in {out}");
    }
    assert!(
        out.contains("# TYPE splitkv_dpdk_tx_in_place counter"),
        "{out}"
    );
}
