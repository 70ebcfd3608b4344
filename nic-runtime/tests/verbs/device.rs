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
