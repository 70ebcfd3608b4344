//! The client's side of the set-up against a scripted node on a thread: each
//! typed error of [`Connection::connect`] is produced by the answer (or
//! silence) that causes it.

use super::*;
use crate::recv_fd;
use splitkv_layout::app::{AppLimits, Refused, Welcome, APP_LAYOUT_VERSION};
use std::io::Write;
use std::os::unix::net::UnixListener;

/// A socket path in a fresh directory under /tmp, removed when the guard
/// is dropped.
fn socket_path(test: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix(&format!("splitkv-conn-{test}-"))
        .tempdir_in("/tmp")
        .unwrap();
    let path = dir.path().join("node-0.sock");
    (dir, path)
}

/// Serves one connection: reads the Hello and the descriptor, then writes
/// `answer` (or nothing, holding the socket `hold` long).
fn scripted_node(path: &Path, answer: Vec<u8>, hold: Duration) -> std::thread::JoinHandle<()> {
    let listener = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut hello = Vec::new();
        read_frame(&mut s, &mut hello, Instant::now() + Duration::from_secs(5)).unwrap();
        let _fd = recv_fd(&s).unwrap();
        s.write_all(&answer).unwrap();
        std::thread::sleep(hold);
    })
}

fn options() -> ConnectOptions {
    ConnectOptions {
        timeout: Duration::from_millis(500),
        procedures: vec!["transfer".into(), "nope".into()],
        ..ConnectOptions::default()
    }
}

fn limits(in_flight_max: u32) -> AppLimits {
    AppLimits {
        in_flight_max,
        value_bytes_max: 4096,
        args_bytes_max: 1024,
        result_bytes_max: 1024,
    }
}

#[test]
fn a_welcome_connects_with_its_limits_and_ids() {
    let (_dir, path) = socket_path("welcome");
    let mut answer = Vec::new();
    Welcome::encode(3, &limits(8), &[Some(7), None], &mut answer).unwrap();
    let node = scripted_node(&path, answer, Duration::ZERO);
    let c = Connection::connect(&path, &options()).unwrap();
    assert_eq!(c.node_id(), 3);
    assert_eq!(c.limits().in_flight_max, 8);
    assert_eq!(c.procedure_ids(), &[Some(7), None]);
    node.join().unwrap();
}

#[test]
fn each_bad_answer_is_its_own_error() {
    let mut refused = Vec::new();
    HandshakeMsg::Refused(Refused {
        reason: RefusedReason::ConnectionsFull,
    })
    .encode(&mut refused);
    let mut other_version = refused.clone();
    other_version[4..8].copy_from_slice(&(APP_LAYOUT_VERSION + 1).to_le_bytes());
    let mut too_many_ids = Vec::new();
    Welcome::encode(3, &limits(8), &[Some(7)], &mut too_many_ids).unwrap();
    let mut over_grant = Vec::new();
    Welcome::encode(3, &limits(64), &[None, None], &mut over_grant).unwrap();
    type Case = (&'static str, Vec<u8>, fn(&ConnectError) -> bool);
    let cases: Vec<Case> = vec![
        ("refused", refused, |e| {
            matches!(e, ConnectError::Refused(RefusedReason::ConnectionsFull))
        }),
        (
            "version",
            other_version,
            |e| matches!(e, ConnectError::VersionMismatch { theirs, .. } if *theirs == APP_LAYOUT_VERSION + 1),
        ),
        ("garbage", vec![0xEE; 16], |e| {
            matches!(e, ConnectError::Handshake(FrameError::Malformed(_)))
        }),
        ("ids", too_many_ids, |e| {
            matches!(e, ConnectError::Malformed(_))
        }),
        ("grant", over_grant, |e| {
            matches!(e, ConnectError::Malformed(_))
        }),
    ];
    for (name, answer, expected) in cases {
        let (_dir, path) = socket_path(name);
        let node = scripted_node(&path, answer, Duration::ZERO);
        let err = Connection::connect(&path, &options()).unwrap_err();
        assert!(expected(&err), "{name}: {err:?}");
        node.join().unwrap();
    }
}

#[test]
fn silence_times_out_and_no_listener_fails_to_connect() {
    let (_dir, path) = socket_path("silent");
    let node = scripted_node(&path, Vec::new(), Duration::from_millis(1500));
    let start = Instant::now();
    let err = Connection::connect(&path, &options()).unwrap_err();
    assert!(
        matches!(err, ConnectError::Handshake(FrameError::TimedOut)),
        "{err:?}"
    );
    assert!(start.elapsed() < Duration::from_millis(1400));
    node.join().unwrap();
    let (_gone, missing) = socket_path("missing");
    assert!(matches!(
        Connection::connect(&missing, &options()),
        Err(ConnectError::Connect { .. })
    ));
}

#[test]
fn bad_options_are_refused_before_connecting() {
    let (_dir, path) = socket_path("options");
    let mut o = options();
    o.request_ring_bytes = 3000;
    assert!(matches!(
        Connection::connect(&path, &o),
        Err(ConnectError::Options(_))
    ));
    let mut o = options();
    o.in_flight_max = 0;
    assert!(matches!(
        Connection::connect(&path, &o),
        Err(ConnectError::Options(_))
    ));
}
