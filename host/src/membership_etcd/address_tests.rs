//! Unit tests of the address record (no etcd): the stored form, each bad
//! shape a typed error, encode∘decode the identity and no input a panic
//! (proptest), and which published address a configuration takes.

use super::*;
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn record(incarnation: u32, data: &str, control: &str) -> AddressRecord {
    AddressRecord {
        incarnation,
        addresses: NodeAddresses {
            data: data.parse().expect("data"),
            control: control.parse().expect("control"),
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

#[test]
fn bad_records_are_typed_errors() {
    let d = |s: &str| AddressRecord::decode(s.as_bytes());
    let ok = r#""data":"127.0.0.1:1","control":"127.0.0.1:2""#;
    assert_eq!(
        d(&format!(
            r#"{{"version":2,"incarnation":1,{ok},"later":true}}"#
        )),
        Err(AddressRecordError::Version {
            found: 2,
            supported: 1
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
        let r = AddressRecord { incarnation, addresses: NodeAddresses { data, control } };
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
        let s = Stored { version, incarnation, data, control };
        let bytes = serde_json::to_vec(&s).expect("serializes");
        if let Ok(r) = AddressRecord::decode(&bytes) {
            prop_assert_eq!(AddressRecord::decode(&r.encode()), Ok(r));
        }
    }
}
