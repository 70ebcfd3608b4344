//! Opening a device where none exists (CI, this machine): a typed error,
//! never a panic; and a bad configuration is refused before any device
//! call.

use splitkv_nic::net::verbs::sys::device_names;
use splitkv_nic::net::verbs::{VerbsConfig, VerbsError, VerbsTransport, VERBS_MTU_MAX};

#[test]
fn a_device_that_does_not_exist_is_no_device() {
    let cfg = VerbsConfig {
        device: Some("splitkv-no-such-device".into()),
        ..VerbsConfig::default()
    };
    match VerbsTransport::new(cfg) {
        Err(VerbsError::NoDevice {
            wanted,
            available,
            names,
            ..
        }) => {
            assert_eq!(wanted.as_deref(), Some("splitkv-no-such-device"));
            assert_eq!(available, names.len());
        }
        Err(e) => panic!("expected NoDevice, got {e}"),
        Ok(_) => panic!("opened a device that does not exist"),
    }
}

#[test]
fn no_device_at_all_is_no_device() {
    let names = device_names();
    eprintln!("RDMA devices here: {names:?}");
    if matches!(&names, Ok(n) if !n.is_empty()) {
        eprintln!("skipping: this machine has an RDMA device");
        return;
    }
    match VerbsTransport::new(VerbsConfig::default()) {
        Err(e @ VerbsError::NoDevice { .. }) => {
            let line = e.to_string();
            assert!(line.starts_with("no RDMA device"), "{line}");
            assert!(!line.contains('\n'));
        }
        Err(e) => panic!("expected NoDevice, got {e}"),
        Ok(_) => panic!("opened a device where none was listed"),
    }
}

#[test]
fn bad_configuration_is_refused_first() {
    let cases = [
        (
            VerbsConfig {
                mtu: VERBS_MTU_MAX + 1,
                ..VerbsConfig::default()
            },
            "mtu",
        ),
        (
            VerbsConfig {
                recv_depth: 0,
                ..VerbsConfig::default()
            },
            "recv_depth",
        ),
        (
            VerbsConfig {
                send_depth: 100_000,
                ..VerbsConfig::default()
            },
            "send_depth",
        ),
        (
            VerbsConfig {
                port: 0,
                ..VerbsConfig::default()
            },
            "port",
        ),
    ];
    for (cfg, field) in cases {
        match VerbsTransport::new(cfg) {
            Err(VerbsError::BadConfig { field: f, .. }) => assert_eq!(f, field),
            Err(e) => panic!("expected BadConfig for {field}, got {e}"),
            Ok(_) => panic!("accepted a bad {field}"),
        }
    }
}

/// Longest wait for datagrams on a device.
const WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Two endpoints on one device (a ConnectX or BlueField port, or
/// Soft-RoCE's `rxe0`) send packets both ways, one inline-sized and one
/// MTU-sized each, through sessions-free `tx_burst` / `rx_burst`. Skipped
/// with a line where no device exists (CI); `SPLITKV_VERBS_DEVICE` and
/// `SPLITKV_VERBS_GID_INDEX` pick the device and GID table entry. Never
/// run on hardware where this was written.
#[test]
fn two_endpoints_on_one_device_exchange_packets() {
    use splitkv_nic::net::Transport;
    if !matches!(device_names(), Ok(n) if !n.is_empty()) {
        eprintln!("skipping: no RDMA device (Soft-RoCE: rdma link add rxe0 type rxe netdev IF)");
        return;
    }
    let cfg = VerbsConfig {
        device: std::env::var("SPLITKV_VERBS_DEVICE").ok(),
        gid_index: std::env::var("SPLITKV_VERBS_GID_INDEX")
            .map_or(0, |v| v.parse().expect("a GID index")),
        peers: vec![None, None],
        ..VerbsConfig::default()
    };
    let mut a = VerbsTransport::new(cfg.clone()).expect("open endpoint 0");
    let mut b = VerbsTransport::new(cfg).expect("open endpoint 1");
    let ea = a.local_endpoint("127.0.0.1:1".parse().unwrap());
    let eb = b.local_endpoint("127.0.0.1:2".parse().unwrap());
    eprintln!(
        "endpoint 0: {ea}\nendpoint 1: {eb}\ninline granted: {} B",
        a.inline_granted()
    );
    for (t, me, other, other_node) in [(&mut a, ea, eb, 1), (&mut b, eb, ea, 0)] {
        assert!(t.add_endpoint(other) && t.add_endpoint(me));
        assert_eq!(t.set_peer_address(other_node, other.addr), Ok(true));
    }
    let small = vec![1u8; 16];
    let big = vec![2u8; a.mtu()];
    exchange(&mut a, &mut b, 1, &small, &big);
    exchange(&mut b, &mut a, 0, &small, &big);
}

/// `from` sends `small` then `big` to node `dst` (`to`); `to` must lend
/// both, in order, within [`WAIT`].
fn exchange(
    from: &mut VerbsTransport,
    to: &mut VerbsTransport,
    dst: u16,
    small: &[u8],
    big: &[u8],
) {
    use splitkv_nic::net::{Transport, TxPacket};
    let burst = [TxPacket { dst, bytes: small }, TxPacket { dst, bytes: big }];
    assert_eq!(from.tx_burst(0, &burst), 2);
    from.tx_flush(0);
    let mut got: Vec<Vec<u8>> = Vec::new();
    let deadline = std::time::Instant::now() + WAIT;
    while got.len() < 2 && std::time::Instant::now() < deadline {
        to.rx_burst(0, 32, &mut |p| got.push(p.to_vec()));
        from.tx_flush(0);
    }
    assert_eq!(
        got,
        vec![small.to_vec(), big.to_vec()],
        "receiver stats: {:?}",
        to.stats()
    );
    assert_eq!(
        from.stats().tx_inline,
        u64::from(small.len() <= from.inline_granted())
    );
}
