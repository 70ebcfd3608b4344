//! Peer descriptions from config-like text (good and bad, typed errors),
//! and the peer table's source lookup across a re-pointing.

use splitkv_nic::net::verbs::addr::{
    Gid, PeerParseError, PeerTable, Route, Source, SourceLookup, VerbsPeer, VERBS_QPN_MAX,
};
use std::net::{IpAddr, Ipv6Addr};

fn parse(s: &str) -> Result<VerbsPeer, PeerParseError> {
    s.parse()
}

#[test]
fn roce_peer_by_ipv6_gid() {
    let p = parse("addr=10.0.0.2:7100,gid=fe80::1,qpn=0x1a2,qkey=0x11111111").unwrap();
    assert_eq!(p.addr, "10.0.0.2:7100".parse().unwrap());
    let fe80: Ipv6Addr = "fe80::1".parse().unwrap();
    assert_eq!(p.route, Route::Gid(Gid(fe80.octets())));
    assert_eq!((p.qpn, p.qkey), (0x1a2, 0x1111_1111));
}

#[test]
fn ipv4_gid_is_ipv4_mapped_in_any_order_with_spaces() {
    let p = parse(" qkey = 7 , qpn=418, gid=10.0.0.2 , addr=10.0.0.2:7100 ").unwrap();
    let mapped: Ipv6Addr = "::ffff:10.0.0.2".parse().unwrap();
    assert_eq!(p.route, Route::Gid(Gid(mapped.octets())));
    assert_eq!(p.route, Route::Gid(Gid::from_ip(IpAddr::V6(mapped))));
    assert_eq!((p.qpn, p.qkey), (418, 7));
}

#[test]
fn infiniband_peer_by_lid() {
    let p = parse("addr=[::1]:9,lid=0x3,qpn=5,qkey=1").unwrap();
    assert_eq!(p.route, Route::Lid(3));
    assert_eq!(p.qpn, 5);
}

#[test]
fn bad_descriptions_have_typed_errors() {
    use PeerParseError::*;
    let cases: &[(&str, PeerParseError)] = &[
        (
            "addr",
            NotKeyValue {
                part: "addr".into(),
            },
        ),
        ("port=3", UnknownKey { key: "port".into() }),
        ("qpn=1,qpn=2", Duplicate { key: "qpn" }),
        (
            "addr=nowhere",
            BadValue {
                key: "addr",
                value: "nowhere".into(),
            },
        ),
        (
            "gid=fe80::zz",
            BadValue {
                key: "gid",
                value: "fe80::zz".into(),
            },
        ),
        (
            "lid=65536",
            BadValue {
                key: "lid",
                value: "65536".into(),
            },
        ),
        (
            "qpn=0xgg",
            BadValue {
                key: "qpn",
                value: "0xgg".into(),
            },
        ),
        (
            "qkey=4294967296",
            BadValue {
                key: "qkey",
                value: "4294967296".into(),
            },
        ),
        (
            "qkey=-1",
            BadValue {
                key: "qkey",
                value: "-1".into(),
            },
        ),
        ("addr=1.2.3.4:5,qpn=1,qkey=1", Missing { key: "gid or lid" }),
        ("addr=1.2.3.4:5,gid=::1,lid=2,qpn=1,qkey=1", TwoRoutes),
        ("addr=1.2.3.4:5,lid=0,qpn=1,qkey=1", ZeroLid),
        ("addr=1.2.3.4:5,lid=1,qkey=1", Missing { key: "qpn" }),
        ("addr=1.2.3.4:5,lid=1,qpn=0,qkey=1", QpnRange { qpn: 0 }),
        (
            "addr=1.2.3.4:5,lid=1,qpn=0x1000000,qkey=1",
            QpnRange {
                qpn: VERBS_QPN_MAX + 1,
            },
        ),
        ("addr=1.2.3.4:5,lid=1,qpn=1", Missing { key: "qkey" }),
        ("lid=1,qpn=1,qkey=1", Missing { key: "addr" }),
        ("", Missing { key: "gid or lid" }),
    ];
    for (text, want) in cases {
        assert_eq!(&parse(text).unwrap_err(), want, "for {text:?}");
        // Every error names its cause in one line.
        assert!(!want.to_string().contains('\n'));
    }
}

#[test]
fn lookup_tells_peers_from_former_endpoints_and_strangers() {
    let a = parse("addr=10.0.0.1:1,gid=10.0.0.1,qpn=10,qkey=1").unwrap();
    let b = parse("addr=10.0.0.2:1,gid=10.0.0.2,qpn=20,qkey=1").unwrap();
    let b2 = parse("addr=10.0.0.3:1,gid=10.0.0.3,qpn=30,qkey=1").unwrap();
    let mut t = PeerTable::new(vec![Some(a), Some(b), None]);
    let src = |p: &VerbsPeer| Source {
        qpn: p.qpn,
        route: p.route,
    };
    assert_eq!(t.lookup(src(&a)), SourceLookup::Peer(0));
    assert_eq!(t.lookup(src(&b)), SourceLookup::Peer(1));
    // Same GID, other queue pair: a stranger.
    assert_eq!(
        t.lookup(Source {
            qpn: 11,
            route: a.route
        }),
        SourceLookup::Stranger
    );
    assert_eq!(t.node_at(b.addr), Some(1));
    assert_eq!(t.repoint(1, b2), Some(true));
    assert_eq!(t.repoint(1, b2), Some(false));
    assert_eq!(t.repoint(7, b2), None);
    assert_eq!(t.lookup(src(&b2)), SourceLookup::Peer(1));
    assert_eq!(t.lookup(src(&b)), SourceLookup::Former);
    assert_eq!(t.node_at(b.addr), None);
    assert_eq!(t.get(2), None);
}

#[test]
fn text_form_round_trips() {
    for text in [
        "addr=10.0.0.2:7100,gid=::ffff:10.0.0.2,qpn=0x1a2,qkey=0x11111111",
        "addr=[fe80::1]:9,lid=3,qpn=0xffffff,qkey=0x0",
    ] {
        let p = parse(text).unwrap();
        assert_eq!(p.to_string(), text);
        assert_eq!(parse(&p.to_string()), Ok(p));
    }
}

#[test]
fn an_endpoint_is_a_peer_without_its_data_address() {
    use splitkv_nic::net::verbs::VerbsAddress;
    let p = parse("addr=10.0.0.2:7100,gid=::ffff:10.0.0.2,qpn=0x1a2,qkey=0x11111111").unwrap();
    let e = p.address();
    assert_eq!(
        e.to_string(),
        "gid=::ffff:10.0.0.2,qpn=0x1a2,qkey=0x11111111"
    );
    assert_eq!(e.to_string().parse::<VerbsAddress>(), Ok(e));
    assert_eq!(e.at(p.addr), p);
    let ib: VerbsAddress = "lid=3,qpn=418,qkey=7".parse().unwrap();
    assert_eq!((ib.route, ib.qpn, ib.qkey), (Route::Lid(3), 418, 7));
    assert_eq!(
        "addr=10.0.0.2:7100,lid=3,qpn=418,qkey=7".parse::<VerbsAddress>(),
        Err(PeerParseError::AddrInEndpoint)
    );
    assert_eq!(
        "lid=3,qkey=7".parse::<VerbsAddress>(),
        Err(PeerParseError::Missing { key: "qpn" })
    );
}
