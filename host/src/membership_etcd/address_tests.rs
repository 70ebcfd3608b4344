//! Unit tests of the address record (no etcd): the stored form, each bad
//! shape a typed error, encode∘decode the identity and no input a panic
//! (proptest), and which published address a configuration takes.

use super::*;
use proptest::prelude::*;
use splitkv_nic::net::verbs::VerbsAddress;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn record(incarnation: u32, data: &str, control: &str) -> AddressRecord {
    AddressRecord {
        incarnation,
        addresses: NodeAddresses {
            data: data.parse().expect("data"),
            control: control.parse().expect("control"),
            verbs: None,
        },
    }
}

#[test]
fn the_stored_form_is_versioned_json_and_round_trips() {
    let r = record(7, "127.0.0.2:7102", "127.0.0.2:7202");
    let text = String::from_utf8(r.encode()).expect("JSON text");
    assert_eq!(
        text,
        r#"{"version":1,"incarnation":7,"data":"127.0.0.2:7102","control":"127.0.0.2:7202"}"#
    );
    assert_eq!(AddressRecord::decode(text.as_bytes()), Ok(r));
    let v6 = record(9, "[::1]:7100", "[fe80::1%2]:7200");
    assert_eq!(AddressRecord::decode(&v6.encode()), Ok(v6));
}

fn roce(qpn: u32) -> VerbsAddress {
    "gid=::ffff:10.0.0.2,qpn=1,qkey=0x11111111"
        .parse::<VerbsAddress>()
        .map(|a| VerbsAddress { qpn, ..a })
        .expect("endpoint")
}

#[test]
fn a_verbs_endpoint_is_version_2_and_round_trips() {
    let mut r = record(7, "10.0.0.2:7100", "127.0.0.1:7200");
    r.addresses.verbs = Some(roce(0x1a2));
    let text = String::from_utf8(r.encode()).expect("JSON text");
    assert_eq!(
        text,
        r#"{"version":2,"incarnation":7,"data":"10.0.0.2:7100","control":"127.0.0.1:7200","verbs":"gid=::ffff:10.0.0.2,qpn=0x1a2,qkey=0x11111111"}"#
    );
    assert_eq!(AddressRecord::decode(text.as_bytes()), Ok(r));
    let ib = "lid=3,qpn=418,qkey=7".parse::<VerbsAddress>().expect("lid");
    r.addresses.verbs = Some(ib);
    assert_eq!(AddressRecord::decode(&r.encode()), Ok(r));
    // Without an endpoint the record is version 1, as before.
    r.addresses.verbs = None;
    assert!(String::from_utf8(r.encode())
        .expect("JSON text")
        .starts_with(r#"{"version":1,"#));
}

#[test]
fn a_verbs_field_must_match_the_version_and_parse() {
    let d = |s: &str| AddressRecord::decode(s.as_bytes());
    let ok = r#""incarnation":1,"data":"127.0.0.1:1","control":"127.0.0.1:2""#;
    assert_eq!(
        d(&format!(r#"{{"version":2,{ok}}}"#)),
        Err(AddressRecordError::VerbsField { version: 2 })
    );
    let verbs = r#""verbs":"gid=::1,qpn=5,qkey=1""#;
    assert_eq!(
        d(&format!(r#"{{"version":1,{ok},{verbs}}}"#)),
        Err(AddressRecordError::VerbsField { version: 1 })
    );
    assert_eq!(
        d(&format!(
            r#"{{"version":2,{ok},"verbs":"gid=::1,qpn=0,qkey=1"}}"#
        )),
        Err(AddressRecordError::Verbs(
            splitkv_nic::net::verbs::PeerParseError::QpnRange { qpn: 0 }
        ))
    );
    assert_eq!(
        d(&format!(
            r#"{{"version":2,{ok},"verbs":"addr=1.2.3.4:5,gid=::1,qpn=5,qkey=1"}}"#
        )),
        Err(AddressRecordError::Verbs(
            splitkv_nic::net::verbs::PeerParseError::AddrInEndpoint
        ))
    );
    assert!(matches!(
        d(&format!(
            r#"{{"version":2,{ok},"verbs":"gid=::1,lid=2,qpn=5,qkey=1"}}"#
        )),
        Err(AddressRecordError::Verbs(_))
    ));
}

#[test]
fn verbs_peers_are_the_published_endpoints_at_their_data_addresses() {
    let mut addresses = [None; NODES_MAX];
    let at = |data: &str, verbs| NodeAddresses {
        data: data.parse().expect("data"),
        control: "127.0.0.1:7200".parse().expect("control"),
        verbs,
    };
    addresses[0] = Some(at("10.0.0.1:7100", Some(roce(10))));
    addresses[1] = Some(at("10.0.0.2:7100", None));
    addresses[3] = Some(at("10.0.0.9:7100", Some(roce(30))));
    let peers = verbs_peers(&addresses);
    assert_eq!(
        peers[0],
        Some(roce(10).at("10.0.0.1:7100".parse().expect("addr")))
    );
    assert_eq!(peers[1], None, "a node that published no endpoint");
    assert_eq!(peers[2], None, "a node that published nothing");
    assert_eq!(peers[3].map(|p| (p.addr.port(), p.qpn)), Some((7100, 30)));
}

#[test]
fn bad_records_are_typed_errors() {
    let d = |s: &str| AddressRecord::decode(s.as_bytes());
    let ok = r#""data":"127.0.0.1:1","control":"127.0.0.1:2""#;
    assert_eq!(
        d(&format!(
            r#"{{"version":3,"incarnation":1,{ok},"later":true}}"#
        )),
        Err(AddressRecordError::Version {
            found: 3,
            supported: ADDRESS_RECORD_VERSION,
            supported_verbs: ADDRESS_RECORD_VERSION_VERBS,
        }),
        "another version is refused as such, whatever else it holds"
    );
    assert_eq!(
        d(&format!(r#"{{"version":1,"incarnation":0,{ok}}}"#)),
        Err(AddressRecordError::IncarnationZero)
    );
    assert_eq!(
        d(r#"{"version":1,"incarnation":1,"data":"host:1","control":"127.0.0.1:2"}"#),
        Err(AddressRecordError::NotAnAddress {
            field: "data",
            text: "host:1".into()
        })
    );
    assert_eq!(
        d(r#"{"version":1,"incarnation":1,"data":"127.0.0.1:1","control":"0.0.0.0:2"}"#),
        Err(AddressRecordError::Unreachable {
            field: "control",
            addr: "0.0.0.0:2".parse().unwrap()
        })
    );
    assert_eq!(
        d(r#"{"version":1,"incarnation":1,"data":"127.0.0.1:0","control":"127.0.0.1:2"}"#),
        Err(AddressRecordError::Unreachable {
            field: "data",
            addr: "127.0.0.1:0".parse().unwrap()
        })
    );
    for shape in [
        format!(r#"{{"version":1,"incarnation":1,{ok},"x":1}}"#),
        r#"{"version":1,"incarnation":1,"data":"127.0.0.1:1"}"#.to_string(),
        format!(r#"{{"incarnation":1,{ok}}}"#),
        r#"{"version":-1}"#.to_string(),
        "7".to_string(),
        String::new(),
    ] {
        assert!(
            matches!(d(&shape), Err(AddressRecordError::Shape(_))),
            "{shape}"
        );
    }
    let long = vec![b' '; ADDRESS_RECORD_BYTES_MAX + 1];
    assert_eq!(
        AddressRecord::decode(&long),
        Err(AddressRecordError::TooLong {
            bytes: ADDRESS_RECORD_BYTES_MAX + 1,
            max: ADDRESS_RECORD_BYTES_MAX
        })
    );
}

#[test]
fn records_are_read_per_node_and_bad_ones_are_flagged() {
    let good = record(3, "127.0.0.2:7102", "127.0.0.2:7202").encode();
    let kvs: [(&[u8], &[u8]); 4] = [
        (b"/c/addresses/2", &good),
        (b"/c/addresses/1", b"{bad"),
        (b"/c/addresses/99", &good),
        (b"/c/other/0", &good),
    ];
    let (records, bad) = address_records("/c/addresses/", kvs.into_iter());
    assert_eq!(records[2].map(|r| r.incarnation), Some(3));
    assert_eq!(records[..2], [None, None]);
    assert_eq!(bad, 1 << 1);
}

#[test]
fn a_configuration_takes_only_the_address_its_incarnation_published() {
    let mut records = [None; NODES_MAX];
    let mut first = [None; NODES_MAX];
    records[0] = Some(record(4, "127.0.0.1:7100", "127.0.0.1:7200"));
    first[0] = Some(4);
    records[2] = Some(record(9, "127.0.0.2:7102", "127.0.0.2:7202"));
    first[2] = Some(5);
    let c = Configuration::initial(3, 3);
    let got = published_data_addresses(&c, &records, &first);
    // Node 2's record is a later process's than the configured first one.
    assert_eq!(got[0], records[0].map(|r| r.addresses.data));
    assert_eq!(got[1..3], [None, None]);
    let rejoined = c.without(1 << 2).rejoining(2, 9).expect("2 is out");
    let got = published_data_addresses(&rejoined, &records, &first);
    assert_eq!(got[2], Some("127.0.0.2:7102".parse().unwrap()));
    let out = rejoined.without(1 << 2);
    assert_eq!(published_data_addresses(&out, &records, &first)[2], None);
}

fn socket_addr() -> impl Strategy<Value = SocketAddr> {
    let v4 = (1u32.., 1u16..)
        .prop_map(|(ip, port)| SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port));
    let v6 = (1u128.., 1u16..)
        .prop_map(|(ip, port)| SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), port));
    prop_oneof![v4, v6]
}

proptest! {
    #[test]
    fn encode_then_decode_is_the_identity(
        incarnation in 1u32.., data in socket_addr(), control in socket_addr()
    ) {
        let r = AddressRecord { incarnation, addresses: NodeAddresses { data, control, verbs: None } };
        let bytes = r.encode();
        prop_assert!(bytes.len() <= ADDRESS_RECORD_BYTES_MAX);
        prop_assert_eq!(AddressRecord::decode(&bytes), Ok(r));
    }

    #[test]
    fn a_record_with_the_longest_endpoint_fits(
        incarnation in 1u32.., data in socket_addr(), control in socket_addr(),
        gid in any::<u128>(), qpn in 1u32..=splitkv_nic::net::verbs::VERBS_QPN_MAX, qkey in any::<u32>()
    ) {
        let verbs = VerbsAddress {
            route: splitkv_nic::net::verbs::Route::Gid(splitkv_nic::net::verbs::Gid(gid.to_be_bytes())),
            qpn,
            qkey,
        };
        let r = AddressRecord { incarnation, addresses: NodeAddresses { data, control, verbs: Some(verbs) } };
        let bytes = r.encode();
        prop_assert!(bytes.len() <= ADDRESS_RECORD_BYTES_MAX);
        prop_assert_eq!(AddressRecord::decode(&bytes), Ok(r));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = AddressRecord::decode(&bytes);
    }

    #[test]
    fn arbitrary_stored_records_never_panic_and_what_decodes_re_encodes(
        version in prop_oneof![Just(1u32), any::<u32>()],
        incarnation in any::<u32>(),
        data in "[0-9a-f:.\\[\\]%]{0,40}",
        control in "[0-9a-f:.\\[\\]%]{0,40}",
    ) {
        let s = Stored { version, incarnation, data, control, verbs: None };
        let bytes = serde_json::to_vec(&s).expect("serializes");
        if let Ok(r) = AddressRecord::decode(&bytes) {
            prop_assert_eq!(AddressRecord::decode(&r.encode()), Ok(r));
        }
    }
}
