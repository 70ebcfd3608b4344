//! Hostile applications, each in its own process, against three running
//! `splitkv node` processes that serve applications from an empty store
//! (`[clients] start = "empty"`, L5 §III-B): memory of the wrong size, an
//! unsealed memfd, a memfd truncated after the handshake, garbage and
//! oversized request entries, a request ring whose tail points far past
//! its data, a client that never reads its outcomes, a client SIGKILLed
//! with transactions in flight, and 100 connections opened and dropped.
//! Each hostile client is this test binary started again with a role in
//! its environment. After each, the node is alive, answers `/status`,
//! counts the close reason under `applications.closed`, and a well-behaved
//! client in this process commits on the keys the hostile one used (no
//! lock stays held). Refusals are checked on the answer the hostile client
//! reads. Every wait is bounded; the nodes are SIGTERMed and exit 0.

mod support_deploy;

use splitkv_client::handshake_io::{read_frame, write_frame};
use splitkv_client::{
    send_fd, CallError, Client, ConnectError, ConnectOptions, Connection, Doorbell, KvClient,
    SharedMemory,
};
use splitkv_layout::app::{
    AppMemoryLayout, HandshakeMsg, Hello, RefusedReason, Request, APP_RING_CAPACITY_MIN_BYTES,
};
use splitkv_layout::doorbell::init_doorbell;
use splitkv_layout::ring::init_ring;
use splitkv_layout::Key;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support_deploy::*;

/// Bound of every wait (node start, a count to move, a child to finish).
const WAIT: Duration = Duration::from_secs(15);
const EXIT: Duration = Duration::from_secs(20);
const CAP: usize = APP_RING_CAPACITY_MIN_BYTES;
/// Value size of the stalled client's key: 32 of its outcomes fill an
/// outcome ring of [`CAP`] bytes.
const BIG_VALUE_BYTES: usize = 4000;
/// `outcome_full_ms_max` of the nodes.
const OUTCOME_FULL_MS_MAX: u64 = 200;
const ENV_ROLE: &str = "SPLITKV_HOSTILE_ROLE";
const ENV_SOCKET: &str = "SPLITKV_HOSTILE_SOCKET";
/// The key the stalled client reads (holding [`BIG_VALUE_BYTES`]).
const BIG: Key = Key::new(7, 1);
/// The key the killed client writes.
const CONTESTED: Key = Key::new(7, 2);
/// The key the churning connections write.
const CHURNED: Key = Key::new(7, 3);
/// Puts the killed client leaves in flight.
const KILLED_PUTS: u64 = 8;
/// Connections the churning client opens and drops.
const CHURN: u64 = 100;

fn encode(req: &Request<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    req.encode(&mut out).expect("encode a request");
    out
}

fn options(in_flight_max: u32) -> ConnectOptions {
    ConnectOptions {
        in_flight_max,
        request_ring_bytes: CAP,
        outcome_ring_bytes: CAP,
        timeout: Duration::from_secs(5),
        ..ConnectOptions::default()
    }
}

/// A Hello for rings of [`CAP`] bytes and its layout.
fn hello() -> (AppMemoryLayout, Vec<u8>) {
    let l = AppMemoryLayout::new(CAP as u64, CAP as u64).expect("a layout");
    let mut out = Vec::new();
    Hello::encode(&l, 4, &[], &mut out).expect("a Hello");
    (l, out)
}

/// Memory of `l`'s size with both rings and doorbells initialised.
fn initialised(l: &AppMemoryLayout) -> Result<SharedMemory, String> {
    let m = SharedMemory::create(l.memory_bytes).map_err(|e| e.to_string())?;
    let r = m.region();
    init_ring(r, l.request_ring_offset, l.request_ring_capacity_bytes)
        .map_err(|e| e.to_string())?;
    init_ring(r, l.outcome_ring_offset, l.outcome_ring_capacity_bytes)
        .map_err(|e| e.to_string())?;
    init_doorbell(r, l.request_doorbell_offset).map_err(|e| e.to_string())?;
    init_doorbell(r, l.outcome_doorbell_offset).map_err(|e| e.to_string())?;
    Ok(m)
}

/// An unsealed memfd of `bytes`.
fn unsealed_memfd(bytes: usize) -> Result<OwnedFd, String> {
    // SAFETY: a NUL-terminated name; the returned descriptor is ours.
    let fd = unsafe { libc::memfd_create(c"hostile".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    truncate(&fd, bytes).map_err(|e| format!("ftruncate: {e}"))?;
    Ok(fd)
}

fn truncate(fd: &impl AsFd, bytes: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid descriptor borrowed for the call.
    let rc = unsafe { libc::ftruncate(fd.as_fd().as_raw_fd(), bytes as libc::off_t) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn deadline() -> Instant {
    Instant::now() + WAIT
}

/// Sends a Hello and `fd`, then runs `after` (with the socket) and reads
/// the node's answer.
fn handshake(
    path: &Path,
    fd: std::os::fd::BorrowedFd<'_>,
    after: impl FnOnce() -> Result<(), String>,
) -> Result<(UnixStream, Vec<u8>), String> {
    let (_, good) = hello();
    let mut s = UnixStream::connect(path).map_err(|e| e.to_string())?;
    write_frame(&mut s, &good, deadline()).map_err(|e| e.to_string())?;
    // The node may have answered and closed already.
    let _ = send_fd(&s, fd);
    after()?;
    let mut answer = Vec::new();
    read_frame(&mut s, &mut answer, deadline()).map_err(|e| e.to_string())?;
    Ok((s, answer))
}

fn expect_refused(answer: &[u8], want: RefusedReason) -> Result<(), String> {
    match HandshakeMsg::decode(answer) {
        Ok(HandshakeMsg::Refused(r)) if r.reason == want => Ok(()),
        other => Err(format!("expected Refused({want:?}), got {other:?}")),
    }
}

/// Memory smaller and larger than the Hello's layout: refused.
fn wrong_size(path: &Path) -> Result<(), String> {
    let (l, _) = hello();
    for bytes in [l.memory_bytes / 2, l.memory_bytes * 2] {
        let m = SharedMemory::create(bytes).map_err(|e| e.to_string())?;
        let (_, answer) = handshake(path, m.fd(), || Ok(()))?;
        expect_refused(&answer, RefusedReason::BadMemory)?;
    }
    Ok(())
}

/// A memfd of the right size but without seals: refused.
fn unsealed(path: &Path) -> Result<(), String> {
    let (l, _) = hello();
    let fd = unsealed_memfd(l.memory_bytes)?;
    let (_, answer) = handshake(path, fd.as_fd(), || Ok(()))?;
    expect_refused(&answer, RefusedReason::BadMemory)
}

/// Sealed memory cannot be truncated; an unsealed memfd truncated right
/// after it is passed is refused (the seal check comes before the mapping,
/// so the node never touches pages that are gone).
fn truncated(path: &Path) -> Result<(), String> {
    let (l, _) = hello();
    let sealed = initialised(&l)?;
    if truncate(&sealed.fd(), l.memory_bytes / 2).is_ok() {
        return Err("a sealed memfd was truncated".into());
    }
    let fd = unsealed_memfd(l.memory_bytes)?;
    let (_, answer) = handshake(path, fd.as_fd(), || {
        truncate(&fd, 0).map_err(|e| format!("truncate after passing: {e}"))
    })?;
    expect_refused(&answer, RefusedReason::BadMemory)
}

/// Waits (bounded) until the node closes `c`.
fn until_closed(c: &Connection) -> Result<(), String> {
    let end = deadline();
    while !c.peer_closed() {
        if Instant::now() > end {
            return Err("the node did not close the connection".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// A garbage entry on one connection and a put whose length field is past
/// every bound on another: each closed by the node.
fn garbage(path: &Path) -> Result<(), String> {
    let mut c = Connection::connect(path, &options(8)).map_err(|e| e.to_string())?;
    c.send(&[0xff, 1, 2, 3], Some(deadline()))
        .map_err(|e| e.to_string())?;
    until_closed(&c)?;
    let mut c = Connection::connect(path, &options(8)).map_err(|e| e.to_string())?;
    let mut entry = encode(&Request::Put {
        req_id: 1,
        key: Key::new(7, 4),
        value: b"v",
    });
    let len_at = 1 + 8 + splitkv_layout::KEY_BYTES;
    entry[len_at..len_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    c.send(&entry, Some(deadline()))
        .map_err(|e| e.to_string())?;
    until_closed(&c)
}

/// Byte offset of a ring's `tail` word from the ring's offset (the ring
/// header's second cache line, `splitkv_layout::ring`).
const RING_TAIL_AT: usize = 64;

/// Attaches with well-formed memory, then writes the request ring's tail
/// far past anything the ring holds and rings the doorbell.
fn ring_tail(path: &Path) -> Result<(), String> {
    let (l, _) = hello();
    let m = initialised(&l)?;
    let (s, answer) = handshake(path, m.fd(), || Ok(()))?;
    if !matches!(HandshakeMsg::decode(&answer), Ok(HandshakeMsg::Welcome(_))) {
        return Err(format!("expected a Welcome: {answer:?}"));
    }
    let at = l.request_ring_offset + RING_TAIL_AT;
    m.region().check(at, 8).map_err(|e| e.to_string())?;
    m.region()
        .store(at, u64::MAX / 2, std::sync::atomic::Ordering::Release);
    if let Ok(bell) = Doorbell::attach(m.region().clone(), l.request_doorbell_offset) {
        bell.ring();
    }
    // The node closes its end of the socket when it drops the connection.
    s.set_read_timeout(Some(WAIT)).map_err(|e| e.to_string())?;
    let mut byte = [0u8; 1];
    match std::io::Read::read(&mut &s, &mut byte) {
        Ok(0) => Ok(()),
        other => Err(format!("expected the node to close: {other:?}")),
    }
}

/// Reads [`BIG`] 48 times and never reads an outcome: 32 fill the outcome
/// ring, the node disconnects it after `outcome_full_ms_max`.
fn stall(path: &Path) -> Result<(), String> {
    let mut c = Connection::connect(path, &options(64)).map_err(|e| e.to_string())?;
    for i in 0..48u64 {
        let get = Request::Get {
            req_id: i,
            key: BIG,
        };
        c.send(&encode(&get), Some(deadline()))
            .map_err(|e| e.to_string())?;
    }
    until_closed(&c)
}

/// Leaves [`KILLED_PUTS`] puts on [`CONTESTED`] in flight, then waits to
/// be killed (bounded).
fn puts(path: &Path) -> Result<(), String> {
    let mut c =
        Connection::connect(path, &options(KILLED_PUTS as u32)).map_err(|e| e.to_string())?;
    for i in 0..KILLED_PUTS {
        let put = Request::Put {
            req_id: i,
            key: CONTESTED,
            value: b"from the killed",
        };
        c.send(&encode(&put), Some(deadline()))
            .map_err(|e| e.to_string())?;
    }
    std::thread::sleep(WAIT * 2);
    Err("not killed".into())
}

/// [`CHURN`] connections opened and dropped; every tenth sends a put on
/// [`CHURNED`] first (its outcome never read).
fn churn(path: &Path) -> Result<(), String> {
    let end = deadline();
    for i in 0..CHURN {
        // The node frees a dropped connection's place when it sees the
        // close: a connect may find every place taken for a moment.
        let mut c = loop {
            match Connection::connect(path, &options(8)) {
                Ok(c) => break c,
                Err(ConnectError::Refused(RefusedReason::ConnectionsFull))
                    if Instant::now() < end =>
                {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(e) => return Err(format!("connection {i}: {e}")),
            }
        };
        if i % 10 == 0 {
            let put = Request::Put {
                req_id: i,
                key: CHURNED,
                value: b"churn",
            };
            c.send(&encode(&put), Some(deadline()))
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Not a test of its own: the body of a hostile child process (returns at
/// once in a normal run).
#[test]
fn child_entry() {
    let Ok(role) = std::env::var(ENV_ROLE) else {
        return;
    };
    let path = PathBuf::from(std::env::var(ENV_SOCKET).expect("socket path"));
    let result = match role.as_str() {
        "wrong_size" => wrong_size(&path),
        "unsealed" => unsealed(&path),
        "truncated" => truncated(&path),
        "garbage" => garbage(&path),
        "ring_tail" => ring_tail(&path),
        "stall" => stall(&path),
        "puts" => puts(&path),
        "churn" => churn(&path),
        other => Err(format!("unknown role {other}")),
    };
    if let Err(why) = result {
        eprintln!("hostile child {role}: {why}");
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
    let child = Command::new(std::env::current_exe().expect("this binary"))
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(ENV_ROLE, role)
        .env(ENV_SOCKET, path)
        .stdout(Stdio::null())
        .spawn()
        .expect("start a hostile child");
    ChildGuard(child)
}

/// Runs hostile `role` to its end; it must succeed (its own checks held).
fn run_child(role: &str, path: &Path) {
    let mut child = spawn_child(role, path);
    let status = wait_exit(&mut child.0, WAIT * 2);
    assert!(status.success(), "hostile child {role}: {status}");
}

/// Retries `f` while it fails retryably, bounded.
fn retrying<T>(mut f: impl FnMut() -> Result<T, CallError>) -> T {
    let end = deadline();
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if e.is_retryable() && Instant::now() < end => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// The running nodes, their socket directory and a well-behaved client.
struct Nodes {
    file: ClusterFile,
    nodes: Vec<NodeProc>,
    socket: PathBuf,
    good: Client,
    _sockets: tempfile::TempDir,
}

impl Nodes {
    fn applications(&self) -> serde_json::Value {
        wait_status(self.file.controls[0], WAIT)["applications"].clone()
    }

    fn closed(&self, reason: &str) -> u64 {
        self.applications()["closed"][reason]
            .as_u64()
            .expect("a close count")
    }

    /// Waits until `applications.closed.<reason>` reaches `n`.
    fn wait_closed(&self, reason: &str, n: u64) {
        let end = deadline();
        while self.closed(reason) < n {
            assert!(
                Instant::now() < end,
                "closed.{reason} never reached {n}: {}",
                self.applications()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every node alive and answering; the good client commits a put on
    /// each of `keys` and reads it back.
    fn still_serving(&mut self, case: &str, keys: &[Key]) {
        for (id, node) in self.nodes.iter_mut().enumerate() {
            assert!(
                node.try_wait().expect("try_wait").is_none(),
                "node {id} died after {case}"
            );
            wait_status(self.file.controls[id], WAIT);
        }
        for &key in keys {
            let value = format!("after {case}");
            retrying(|| self.good.put(key, value.as_bytes()));
            assert_eq!(retrying(|| self.good.get(key)).value, value.as_bytes());
        }
    }
}

fn start_nodes() -> Nodes {
    let sockets = tempfile::Builder::new()
        .prefix("splitkv-hostile-")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let dir = sockets.path().join("s");
    let file = cluster_file(
        3,
        3,
        &format!(
            "\n[clients]\nsocket_dir = \"{}\"\nstart = \"empty\"\nrequest_ring_bytes = {CAP}\noutcome_ring_bytes = {CAP}\nin_flight_max = 64\noutcome_full_ms_max = {OUTCOME_FULL_MS_MAX}\n",
            dir.display()
        ),
    );
    // Values as large as the stalled client's key needs.
    let text = std::fs::read_to_string(&file.path).expect("read the cluster file");
    let text = text.replace(
        "value_bytes_max = 256",
        &format!("value_bytes_max = {BIG_VALUE_BYTES}"),
    );
    std::fs::write(&file.path, text).expect("write the cluster file");
    let nodes: Vec<NodeProc> = (0..3).map(|id| spawn_node(&file, id)).collect();
    let socket = dir.join("node-0.sock");
    let end = deadline();
    for id in 0..3 {
        while !dir.join(format!("node-{id}.sock")).exists() {
            assert!(Instant::now() < end, "node {id}'s socket never appeared");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let good = Client::connect(&socket, &options(8)).expect("the good client connects");
    Nodes {
        file,
        nodes,
        socket,
        good,
        _sockets: sockets,
    }
}

#[test]
fn hostile_client_processes_leave_the_nodes_serving() {
    let mut n = start_nodes();
    let big = vec![9u8; BIG_VALUE_BYTES];
    retrying(|| n.good.put(BIG, &big));
    n.still_serving("start", &[CONTESTED]);
    let socket = n.socket.clone();

    for role in ["wrong_size", "unsealed", "truncated"] {
        run_child(role, &socket);
        n.still_serving(role, &[]);
    }
    // Memory of the wrong size (twice), unsealed, and unsealed then
    // truncated: each refused as bad memory, counted by the node.
    let set_ups = n.applications()["set_ups"].clone();
    assert_eq!(set_ups["refused"]["bad_memory"], 4, "{set_ups}");

    run_child("garbage", &socket);
    n.wait_closed("malformed", 2);
    n.still_serving("garbage", &[Key::new(7, 4)]);

    run_child("ring_tail", &socket);
    n.wait_closed("malformed", 3);
    n.still_serving("ring_tail", &[]);

    run_child("stall", &socket);
    n.wait_closed("outcome_ring_stalled", 1);
    n.still_serving("stall", &[]);
    assert_eq!(
        retrying(|| n.good.get(BIG)).value.len(),
        BIG_VALUE_BYTES,
        "the stalled client's key"
    );

    let peer_closed = n.closed("peer_closed");
    let requests = n.applications()["requests"].as_u64().expect("requests");
    let mut killed = spawn_child("puts", &socket);
    let end = deadline();
    while n.applications()["requests"].as_u64().expect("requests") < requests + KILLED_PUTS {
        assert!(
            Instant::now() < end,
            "the killed client's puts never arrived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(&killed.0, libc::SIGKILL);
    let _ = wait_exit(&mut killed.0, WAIT);
    n.wait_closed("peer_closed", peer_closed + 1);
    n.still_serving("kill", &[CONTESTED]);

    let attached = n.applications()["attached"].as_u64().expect("attached");
    run_child("churn", &socket);
    n.wait_closed("peer_closed", peer_closed + 1 + CHURN);
    assert_eq!(
        n.applications()["attached"].as_u64(),
        Some(attached + CHURN),
        "every churned connection attached"
    );
    n.still_serving("churn", &[CHURNED, CONTESTED, BIG]);
    let apps = n.applications();
    assert_eq!(apps["open"], 1, "only the good client is left: {apps}");
    let closed = &apps["closed"];
    assert_eq!(closed["malformed"], 3, "{apps}");
    assert_eq!(closed["outcome_ring_stalled"], 1, "{apps}");
    assert_eq!(closed["in_flight_exceeded"], 0, "{apps}");
    assert_eq!(closed["peer_closed"], peer_closed + 1 + CHURN, "{apps}");

    let Nodes {
        mut nodes, good, ..
    } = n;
    drop(good);
    for node in &mut nodes {
        signal(node, libc::SIGTERM);
        let status = wait_exit(node, EXIT);
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(node.stderr.as_mut().expect("stderr"), &mut err);
        assert!(status.success(), "{status}: {err}");
    }
}
