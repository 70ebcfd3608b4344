//! Applications connecting to a node's listener (the connection set-up of
//! the ring API across processes, L5 §III-B): clients in this process and in
//! a spawned child process connect through `splitkv_client::Connection` and
//! exchange entries with the test, which plays the node's side as an echo on
//! the attached rings; hostile clients are refused with their reasons while
//! the listener keeps serving; connections are opened and dropped in a loop.
//! Every case is bounded in time and stops by itself; sockets live in a
//! fresh directory under /tmp per test.

use crossbeam::channel::Receiver;
use rustix::fd::AsFd;
use rustix::fs::MemfdFlags;
use splitkv_client::handshake_io::{read_frame, write_frame};
use splitkv_client::{send_fd, ConnectError, ConnectOptions, Connection, SharedMemory};
use splitkv_host::clients::{
    AttachPolicy, AttachedConnection, ClientListener, DropReason, ListenerError,
};
use splitkv_host::deploy::config::ClientSettings;
use splitkv_layout::app::{
    AppMemoryLayout, HandshakeMsg, Hello, RefusedReason, APP_LAYOUT_VERSION,
    APP_RING_CAPACITY_MIN_BYTES,
};
use splitkv_layout::doorbell::init_doorbell;
use splitkv_layout::ring::init_ring;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long any one case may take before it fails.
const CASE_DEADLINE: Duration = Duration::from_secs(30);
const CAP: usize = APP_RING_CAPACITY_MIN_BYTES;
const ENV_ROLE: &str = "SPLITKV_APP_CONNECTIONS_ROLE";
const ENV_SOCKET: &str = "SPLITKV_APP_CONNECTIONS_SOCKET";
/// Entries each echo client sends.
const ECHO_ENTRIES: usize = 200;

fn own_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

fn deadline() -> Instant {
    Instant::now() + CASE_DEADLINE
}

/// A fresh directory under /tmp (removed when dropped) and settings whose
/// socket directory is a not-yet-existing child of it.
fn settings(test: &str) -> (tempfile::TempDir, ClientSettings) {
    let dir = tempfile::Builder::new()
        .prefix(&format!("splitkv-app-{test}-"))
        .tempdir_in("/tmp")
        .unwrap();
    let s = ClientSettings {
        socket_dir: dir.path().join("sockets"),
        allowed_uids: None,
        request_ring_bytes: 2 * CAP,
        outcome_ring_bytes: 2 * CAP,
        in_flight_max: 8,
        connections_max: 8,
        outcome_full_ms_max: 1000,
        start: Default::default(),
    };
    (dir, s)
}

fn start(s: &ClientSettings) -> (ClientListener, Receiver<AttachedConnection>) {
    let mut policy =
        AttachPolicy::from_settings(s, 1, Arc::new(|n: &str| (n == "echo").then_some(9)));
    policy.handshake_timeout = Duration::from_millis(500);
    ClientListener::start(s, policy).unwrap()
}

/// Waits until `cond` holds, failing the test past the case deadline.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let end = deadline();
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn payload(i: usize) -> Vec<u8> {
    let len = (i * 97) % 3000;
    (0..len).map(|j| (i * 31 + j) as u8).collect()
}

/// The node side of the test: echoes every request entry of `conn` back on
/// its outcome ring until `stop` (or the case deadline).
fn echo(mut conn: AttachedConnection, stop: Arc<AtomicBool>) -> JoinHandle<usize> {
    std::thread::spawn(move || {
        let end = deadline();
        let mut entry = Vec::new();
        let mut echoed = 0;
        while !stop.load(Ordering::Acquire) && Instant::now() < end {
            if !conn.try_recv(&mut entry).expect("request ring") {
                std::thread::yield_now();
                continue;
            }
            while !conn.try_send(&entry).expect("outcome ring") {
                assert!(Instant::now() < end, "outcome ring stayed full");
                std::thread::yield_now();
            }
            echoed += 1;
        }
        echoed
    })
}

/// A client's side of the echo: sends [`ECHO_ENTRIES`] entries, one at a
/// time, and checks each echo.
fn echo_client(path: &Path) -> Result<(), String> {
    let options = ConnectOptions {
        procedures: vec!["echo".into(), "missing".into()],
        ..ConnectOptions::default()
    };
    let mut c = Connection::connect(path, &options).map_err(|e| e.to_string())?;
    if c.procedure_ids() != [Some(9), None] || c.node_id() != 1 {
        return Err(format!(
            "unexpected Welcome: {:?} node {}",
            c.procedure_ids(),
            c.node_id()
        ));
    }
    let end = deadline();
    let mut got = Vec::new();
    for i in 0..ECHO_ENTRIES {
        let msg = payload(i);
        c.send(&msg, Some(end)).map_err(|e| e.to_string())?;
        c.recv(&mut got, Some(end)).map_err(|e| e.to_string())?;
        if got != msg {
            return Err(format!("echo {i} differs"));
        }
    }
    Ok(())
}

/// Runs a child's role when this binary was started as a child; a no-op test
/// otherwise.
#[test]
fn child_entry() {
    let Ok(role) = std::env::var(ENV_ROLE) else {
        return;
    };
    let path = PathBuf::from(std::env::var(ENV_SOCKET).expect("socket path"));
    let result = match role.as_str() {
        "echo" => echo_client(&path),
        other => Err(format!("unknown role {other}")),
    };
    if let Err(why) = result {
        eprintln!("child {role}: {why}");
        std::process::exit(3);
    }
    std::process::exit(0);
}

/// A child process, killed and reaped when dropped.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

fn spawn_child(role: &str, path: &Path) -> ChildGuard {
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(ENV_ROLE, role)
        .env(ENV_SOCKET, path)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    ChildGuard(child)
}

fn wait_child(child: &mut ChildGuard) -> std::process::ExitStatus {
    let end = deadline();
    loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < end, "child did not finish");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn clients_in_this_process_and_a_child_process_exchange_entries() {
    let (_dir, s) = settings("echo");
    let (listener, attached) = start(&s);
    let mode = std::fs::metadata(&s.socket_dir)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o777,
        0o700,
        "a directory for the node's own user only"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let path = listener.path().to_path_buf();
    let mut child = spawn_child("echo", &path);
    let local = std::thread::spawn(move || echo_client(&path));
    let mut echoes = Vec::new();
    for _ in 0..2 {
        let conn = attached
            .recv_timeout(CASE_DEADLINE)
            .expect("an attached client");
        assert_eq!(conn.peer().uid, own_uid());
        assert_eq!(
            conn.limits().in_flight_max,
            8,
            "the ask of 32 is cut to the node's 8"
        );
        echoes.push(echo(conn, stop.clone()));
    }
    assert!(wait_child(&mut child).success(), "the child client failed");
    local.join().unwrap().unwrap();
    stop.store(true, Ordering::Release);
    let echoed: Vec<usize> = echoes.into_iter().map(|e| e.join().unwrap()).collect();
    assert_eq!(echoed, vec![ECHO_ENTRIES; 2]);
    assert_eq!(listener.stats().accepted, 2);
    let socket = listener.path().to_path_buf();
    listener.stop();
    assert!(!socket.exists(), "the socket file is removed at stop");
}

/// A hostile client's Hello for rings of `cap` bytes.
fn hello(cap: usize) -> (AppMemoryLayout, Vec<u8>) {
    let l = AppMemoryLayout::new(cap as u64, cap as u64).unwrap();
    let mut out = Vec::new();
    Hello::encode(&l, 4, &[], &mut out).unwrap();
    (l, out)
}

fn initialised(l: &AppMemoryLayout) -> SharedMemory {
    let m = SharedMemory::create(l.memory_bytes).unwrap();
    let r = m.region();
    init_ring(r, l.request_ring_offset, l.request_ring_capacity_bytes).unwrap();
    init_ring(r, l.outcome_ring_offset, l.outcome_ring_capacity_bytes).unwrap();
    init_doorbell(r, l.request_doorbell_offset).unwrap();
    init_doorbell(r, l.outcome_doorbell_offset).unwrap();
    m
}

/// Connects, writes `bytes`, passes `fd` if any, and returns the reason of
/// the Refused the node answers.
fn refused_for(path: &Path, bytes: &[u8], fd: Option<rustix::fd::BorrowedFd<'_>>) -> RefusedReason {
    let mut s = UnixStream::connect(path).unwrap();
    write_frame(&mut s, bytes, deadline()).unwrap();
    if let Some(fd) = fd {
        // The node may have answered and closed already.
        let _ = send_fd(&s, fd);
    }
    let mut answer = Vec::new();
    read_frame(&mut s, &mut answer, deadline()).unwrap();
    match HandshakeMsg::decode(&answer) {
        Ok(HandshakeMsg::Refused(r)) => r.reason,
        other => panic!("expected a Refused, got {other:?}"),
    }
}

#[test]
fn hostile_clients_are_refused_and_the_listener_keeps_serving() {
    let (_dir, s) = settings("hostile");
    let (listener, attached) = start(&s);
    let path = listener.path().to_path_buf();
    let (l, good) = hello(CAP);
    let mut other_version = good.clone();
    other_version[4..8].copy_from_slice(&(APP_LAYOUT_VERSION + 1).to_le_bytes());
    assert_eq!(
        refused_for(&path, &other_version, None),
        RefusedReason::VersionMismatch
    );
    let wrong_size = SharedMemory::create(l.memory_bytes * 2).unwrap();
    assert_eq!(
        refused_for(&path, &good, Some(wrong_size.fd())),
        RefusedReason::BadMemory
    );
    let unsealed = rustix::fs::memfd_create("hostile", MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&unsealed, l.memory_bytes as u64).unwrap();
    assert_eq!(
        refused_for(&path, &good, Some(unsealed.as_fd())),
        RefusedReason::BadMemory
    );
    let mut tag_only = good.clone();
    tag_only.push(splitkv_client::fd_pass::FD_PASS_TAG);
    assert_eq!(
        refused_for(&path, &tag_only, None),
        RefusedReason::BadMemory
    );
    assert_eq!(
        refused_for(&path, &[0x42; 64], None),
        RefusedReason::BadHello
    );
    let mut oversized = good.clone();
    oversized[8..12].copy_from_slice(&(1u32 << 20).to_le_bytes());
    assert_eq!(
        refused_for(&path, &oversized, None),
        RefusedReason::BadHello
    );
    let (_, too_big_rings) = hello(4 * CAP);
    assert_eq!(
        refused_for(&path, &too_big_rings, None),
        RefusedReason::BadHello
    );
    // Closed mid-handshake, and a Hello with no descriptor after it and the
    // socket held open: no answer, counted apart.
    let mut s_half = UnixStream::connect(&path).unwrap();
    s_half.write_all(&good[..7]).unwrap();
    drop(s_half);
    let mut held = UnixStream::connect(&path).unwrap();
    held.write_all(&good).unwrap();
    wait_for("the dropped clients to be counted", || {
        let c = listener.stats();
        c.dropped(DropReason::PeerClosed) == 1 && c.dropped(DropReason::TimedOut) == 1
    });
    drop(held);
    // The listener still serves a well-behaved client.
    let m = initialised(&l);
    let mut s_ok = UnixStream::connect(&path).unwrap();
    write_frame(&mut s_ok, &good, deadline()).unwrap();
    send_fd(&s_ok, m.fd()).unwrap();
    let mut answer = Vec::new();
    read_frame(&mut s_ok, &mut answer, deadline()).unwrap();
    assert!(matches!(
        HandshakeMsg::decode(&answer),
        Ok(HandshakeMsg::Welcome(_))
    ));
    let _conn = attached.recv_timeout(CASE_DEADLINE).expect("attached");
    // The node counts each set-up after answering it.
    wait_for("every set-up to be counted", || {
        let c = listener.stats();
        c.accepted == 1
            && c.refused(RefusedReason::VersionMismatch) == 1
            && c.refused(RefusedReason::BadMemory) == 3
            && c.refused(RefusedReason::BadHello) == 3
    });
    assert_eq!(listener.connections_open(), 1);
}

#[test]
fn a_user_not_allowed_is_refused() {
    let (_dir, mut s) = settings("uid");
    s.allowed_uids = Some(vec![own_uid().wrapping_add(1)]);
    let (listener, _attached) = start(&s);
    let mode = std::fs::metadata(&s.socket_dir)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o711, "other users may reach the socket");
    let err = Connection::connect(listener.path(), &ConnectOptions::default()).unwrap_err();
    assert!(
        matches!(err, ConnectError::Refused(RefusedReason::UserNotAllowed)),
        "{err:?}"
    );
    wait_for("the refusal to be counted", || {
        listener.stats().refused(RefusedReason::UserNotAllowed) == 1
    });
}

#[test]
fn connections_past_the_bound_are_refused_until_one_closes() {
    let (_dir, mut s) = settings("full");
    s.connections_max = 2;
    let (listener, attached) = start(&s);
    let options = ConnectOptions::default();
    let a = Connection::connect(listener.path(), &options).unwrap();
    let _b = Connection::connect(listener.path(), &options).unwrap();
    let node_a = attached.recv_timeout(CASE_DEADLINE).unwrap();
    let _node_b = attached.recv_timeout(CASE_DEADLINE).unwrap();
    let err = Connection::connect(listener.path(), &options).unwrap_err();
    assert!(
        matches!(err, ConnectError::Refused(RefusedReason::ConnectionsFull)),
        "{err:?}"
    );
    drop((a, node_a));
    wait_for("the place to be freed", || listener.connections_open() == 1);
    let _c = Connection::connect(listener.path(), &options).unwrap();
    // The node counts a set-up after answering it.
    wait_for("the third set-up to be counted", || {
        listener.stats().accepted == 3
    });
    assert_eq!(listener.stats().refused(RefusedReason::ConnectionsFull), 1);
}

#[test]
fn a_hundred_connections_opened_and_dropped() {
    let (_dir, s) = settings("churn");
    let (listener, attached) = start(&s);
    let options = ConnectOptions::default();
    let mut got = Vec::new();
    for i in 0..100 {
        let mut c = Connection::connect(listener.path(), &options).unwrap();
        let mut node = attached.recv_timeout(CASE_DEADLINE).unwrap();
        if i % 10 == 0 {
            c.send(&[i as u8; 16], Some(deadline())).unwrap();
            wait_for("the request", || node.try_recv(&mut got).unwrap());
            assert_eq!(got, [i as u8; 16]);
        }
        drop((c, node));
    }
    wait_for("every place to be freed", || {
        listener.connections_open() == 0
    });
    assert_eq!(listener.stats().accepted, 100);
}

#[test]
fn stale_sockets_are_replaced_and_live_ones_kept() {
    let (_dir, s) = settings("stale");
    std::fs::create_dir_all(&s.socket_dir).unwrap();
    let path = s.socket_path(1);
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists(), "a stale socket file");
    let (listener, _attached) = start(&s);
    let mut policy = AttachPolicy::from_settings(&s, 1, Arc::new(|_: &str| None));
    policy.handshake_timeout = Duration::from_millis(500);
    let again = ClientListener::start(&s, policy.clone());
    assert!(
        matches!(again, Err(ListenerError::AlreadyServing { .. })),
        "{again:?}"
    );
    drop(listener);
    assert!(!path.exists());
    std::fs::write(&path, b"not a socket").unwrap();
    let over_file = ClientListener::start(&s, policy);
    assert!(
        matches!(over_file, Err(ListenerError::NotASocket { .. })),
        "{over_file:?}"
    );
    assert!(path.exists(), "a file that is not a socket is left alone");
}

#[test]
fn stalled_clients_hold_up_neither_others_nor_the_listener() {
    use splitkv_host::clients::listener::HANDSHAKE_THREADS;
    let (_dir, s) = settings("stall");
    let mut policy = AttachPolicy::from_settings(&s, 1, Arc::new(|_: &str| None));
    policy.handshake_timeout = Duration::from_secs(5);
    let (listener, attached) = ClientListener::start(&s, policy).unwrap();
    let (_, good) = hello(CAP);
    let stall = || {
        let mut c = UnixStream::connect(listener.path()).unwrap();
        // A client refused as busy may find the socket closed before its
        // Hello is written (EPIPE); the refusal is still there to read.
        let _ = c.write_all(&good);
        c
    };
    // One stalled client: another connects well within the stall's bound.
    let first = stall();
    let start = Instant::now();
    let _ok = Connection::connect(listener.path(), &ConnectOptions::default()).unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "the good client waited for the stalled one"
    );
    let _node = attached.recv_timeout(CASE_DEADLINE).unwrap();
    // Stall every set-up thread and queue place: the next is told at once.
    let mut stalled = vec![first];
    let mut busy_at = None;
    for i in 1..=2 * HANDSHAKE_THREADS + 1 {
        let mut c = stall();
        let mut answer = Vec::new();
        let quick = Instant::now() + Duration::from_millis(200);
        if read_frame(&mut c, &mut answer, quick).is_ok() {
            assert!(matches!(
                HandshakeMsg::decode(&answer),
                Ok(HandshakeMsg::Refused(r)) if r.reason == RefusedReason::Unavailable
            ));
            busy_at = Some(i);
            break;
        }
        stalled.push(c);
    }
    let busy_at = busy_at.expect("a client past every set-up thread and queue place is refused");
    assert!(
        busy_at > HANDSHAKE_THREADS,
        "refused at {busy_at} while threads were free"
    );
    drop(stalled);
    wait_for("the stalled clients to be counted", || {
        listener.stats().dropped(DropReason::PeerClosed) == busy_at as u64
    });
    let _again = Connection::connect(listener.path(), &ConnectOptions::default()).unwrap();
    wait_for("the set-ups to be counted", || {
        listener.stats().accepted == 2
    });
    assert_eq!(listener.stats().refused(RefusedReason::Unavailable), 1);
}

#[test]
fn a_full_request_ring_and_an_empty_outcome_ring_wait_within_their_deadlines() {
    let (_dir, s) = settings("full-ring");
    let (listener, attached) = start(&s);
    let options = ConnectOptions {
        request_ring_bytes: CAP,
        ..ConnectOptions::default()
    };
    let mut c = Connection::connect(listener.path(), &options).unwrap();
    let mut node = attached.recv_timeout(CASE_DEADLINE).unwrap();
    let entry = vec![7u8; 4000];
    let soon = || Some(Instant::now() + Duration::from_millis(100));
    let mut sent = 0;
    let err = loop {
        match c.send(&entry, soon()) {
            Ok(()) => sent += 1,
            Err(e) => break e,
        }
        assert!(
            sent <= CAP / entry.len(),
            "more entries than the ring holds"
        );
    };
    assert!(
        matches!(err, splitkv_client::ConnectionError::TimedOut),
        "{err:?}"
    );
    assert!(
        sent >= CAP / (entry.len() + 8) - 1,
        "only {sent} entries fit"
    );
    let mut got = Vec::new();
    assert!(node.try_recv(&mut got).unwrap());
    c.send(&entry, soon())
        .expect("room after the node read one");
    let mut out = Vec::new();
    let start = Instant::now();
    let err = c.recv(&mut out, soon()).unwrap_err();
    assert!(
        matches!(err, splitkv_client::ConnectionError::TimedOut),
        "{err:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(node.try_send(b"late").unwrap());
    c.recv(&mut out, soon()).unwrap();
    assert_eq!(out, b"late");
}
