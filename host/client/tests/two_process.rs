//! The ring API across two real processes: this test binary runs itself
//! again as the peer (the `child_entry` test, which does nothing unless
//! started with a role), hands it a sealed memfd over a socketpair with
//! `SCM_RIGHTS`, and checks what comes back.
// Shared memory is not modelled under loom (see `Region::from_memory`).
#![cfg(not(loom))]

mod support;

use proptest::prelude::*;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{MemfdFlags, SealFlags};
use splitkv_client::{recv_fd, send_fd, MemoryError, SharedMemory, WaitPolicy};
use splitkv_layout::ring::ring_payload_bytes_max;
use splitkv_layout::sync::Ordering;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};
use support::*;

/// How long any one two-process case may take before it fails.
const CASE_DEADLINE: Duration = Duration::from_secs(30);
const CHILD_ARGS: &[&str] = &["--exact", "child_entry", "--nocapture", "--test-threads=1"];
const ENV_EXPECTED_BYTES: &str = "SPLITKV_CLIENT_TEST_EXPECTED_BYTES";
const ENV_SOCKET_PATH: &str = "SPLITKV_CLIENT_TEST_SOCKET_PATH";

/// Runs the child's role when this binary was started as a child; a no-op test
/// otherwise.
#[test]
fn child_entry() {
    let Some((role, socket)) = child_socket() else {
        return;
    };
    let result = match role.as_str() {
        "echo" => child_echo(&socket),
        "attach-report" => child_attach_report(socket),
        "connect" => child_connect(),
        other => Err(format!("unknown role {other}")),
    };
    if let Err(why) = result {
        eprintln!("child {role}: {why}");
        std::process::exit(3);
    }
    std::process::exit(0);
}

fn env_usize(name: &str) -> Result<usize, String> {
    std::env::var(name)
        .map_err(|_| format!("{name} unset"))?
        .parse()
        .map_err(|_| format!("{name} not a number"))
}

/// Echo: take the memfd, then send back every message until an empty one.
fn child_echo(socket: &UnixStream) -> Result<(), String> {
    let capacity = env_usize(ENV_CAPACITY)?;
    let fd = recv_fd(socket).map_err(|e| e.to_string())?;
    let memory =
        SharedMemory::from_fd(fd, connection_bytes(capacity)).map_err(|e| e.to_string())?;
    let mut end = Endpoint::attach(
        memory.region(),
        capacity,
        Side::Child,
        WaitPolicy::default(),
    );
    let deadline = Instant::now() + CASE_DEADLINE;
    let mut msg = Vec::new();
    loop {
        end.recv(&mut msg, deadline)?;
        if msg.is_empty() {
            return Ok(());
        }
        end.send(&msg, deadline)?;
    }
}

/// Attach-report: for every descriptor received, try to accept it as shared
/// memory of the expected size and report one line: `ok` (after storing a
/// marker in its first word) or the error's variant.
fn child_attach_report(socket: UnixStream) -> Result<(), String> {
    let expected = env_usize(ENV_EXPECTED_BYTES)?;
    let mut out = socket.try_clone().map_err(|e| e.to_string())?;
    loop {
        let fd = match recv_fd(&socket) {
            Ok(fd) => fd,
            Err(splitkv_client::FdPassError::PeerClosed) => return Ok(()),
            Err(e) => return Err(e.to_string()),
        };
        let line = match SharedMemory::from_fd(fd, expected) {
            Ok(memory) => {
                memory.region().store(0, 0x5eed, Ordering::Release);
                "ok".to_string()
            }
            Err(MemoryError::NotMemfd { .. }) => "NotMemfd".into(),
            Err(MemoryError::MissingSeals { missing, .. }) => format!("MissingSeals {missing:?}"),
            Err(MemoryError::WrongSize { actual_bytes, .. }) => format!("WrongSize {actual_bytes}"),
            Err(MemoryError::Sys { call, errno }) => format!("Sys {call} {errno:?}"),
            Err(e) => format!("other {e}"),
        };
        writeln!(out, "{line}").map_err(|e| e.to_string())?;
    }
}

/// Connect: connect to the listening socket at the given path, send one
/// byte, wait for the parent to close.
fn child_connect() -> Result<(), String> {
    let path = std::env::var(ENV_SOCKET_PATH).map_err(|_| "socket path unset")?;
    let mut stream = UnixStream::connect(path).map_err(|e| e.to_string())?;
    stream.write_all(b"c").map_err(|e| e.to_string())?;
    let mut rest = Vec::new();
    std::io::Read::read_to_end(&mut stream, &mut rest).map_err(|e| e.to_string())?;
    Ok(())
}

fn socketpair() -> (UnixStream, OwnedFd) {
    let (parent, child) = UnixStream::pair().expect("socketpair");
    (parent, OwnedFd::from(child))
}

/// Deterministic payload bytes for message `index` of a case seeded `seed`.
fn payload(seed: u64, index: usize, len: usize) -> Vec<u8> {
    let mut x = seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Sends `sizes` messages to an echo child (pipelined: the parent drains
/// echoes only when its ring is full) and checks that every echo equals the
/// message it answers, in order, against a FIFO model.
fn echo_case(capacity: usize, sizes: &[usize], seed: u64) -> Result<(), String> {
    let memory = SharedMemory::create(connection_bytes(capacity)).map_err(|e| e.to_string())?;
    init_connection(memory.region(), capacity);
    let (socket, child_end) = socketpair();
    let mut child = spawn_child(
        "echo",
        &child_end,
        CHILD_ARGS,
        &[(ENV_CAPACITY, capacity.to_string())],
    );
    drop(child_end);
    send_fd(&socket, memory.fd()).map_err(|e| e.to_string())?;
    let mut end = Endpoint::attach(
        memory.region(),
        capacity,
        Side::Parent,
        WaitPolicy::default(),
    );
    let deadline = Instant::now() + CASE_DEADLINE;
    let mut model: VecDeque<Vec<u8>> = VecDeque::new();
    let mut echo = Vec::new();
    let mut check_one = |end: &mut Endpoint, model: &mut VecDeque<Vec<u8>>| -> Result<(), String> {
        end.recv(&mut echo, deadline)?;
        let want = model.pop_front().ok_or("an echo nobody sent")?;
        if echo != want {
            return Err(format!(
                "echo of {} B differs from the {} B sent",
                echo.len(),
                want.len()
            ));
        }
        Ok(())
    };
    let stop = Vec::new();
    for (i, &len) in sizes.iter().enumerate() {
        let msg = payload(seed, i, len);
        while !end.try_send(&msg)? {
            if model.is_empty() {
                // Only padding left: the child skips it once woken.
                end.send(&msg, deadline)?;
                break;
            }
            check_one(&mut end, &mut model)?;
        }
        model.push_back(msg);
    }
    while !end.try_send(&stop)? {
        check_one(&mut end, &mut model)?;
    }
    while !model.is_empty() {
        check_one(&mut end, &mut model)?;
    }
    let result = wait_child(&mut child, deadline);
    if child_has_extra(&mut end)? {
        return Err("the child sent more than it was sent".into());
    }
    result
}

fn child_has_extra(end: &mut Endpoint) -> Result<bool, String> {
    let mut out = Vec::new();
    end.try_recv(&mut out)
}

fn size_strategy(payload_max: usize) -> impl Strategy<Value = usize> {
    prop_oneof![
        1..=64usize,
        1..=payload_max,
        (payload_max - 24)..=payload_max,
    ]
}

fn case_strategy() -> impl Strategy<Value = (usize, Vec<usize>, u64)> {
    prop_oneof![Just(256usize), Just(1024), Just(4096)].prop_flat_map(|capacity| {
        let max = ring_payload_bytes_max(capacity);
        (
            Just(capacity),
            prop::collection::vec(size_strategy(max), 1..120),
            any::<u64>(),
        )
    })
}

proptest! {
    // Each case spawns a process: few cases, many messages each.
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random message sizes (tiny, any, and within 24 B of the largest the
    /// ring takes) on small rings, so entries wrap and pad often.
    #[test]
    fn echo_child_returns_every_message_in_order((capacity, sizes, seed) in case_strategy()) {
        if let Err(why) = echo_case(capacity, &sizes, seed) {
            prop_assert!(false, "capacity {} sizes {:?}: {}", capacity, sizes, why);
        }
    }
}

/// The same with a fixed set covering every wrap position on the smallest
/// ring: many entries of the largest size, then of each size in turn.
#[test]
fn echo_wraps_at_every_position() {
    let capacity = 256;
    let max = ring_payload_bytes_max(capacity);
    let mut sizes: Vec<usize> = (1..=max).collect();
    sizes.extend(std::iter::repeat_n(max, 20));
    echo_case(capacity, &sizes, 7).unwrap();
}

fn memfd(len: u64, flags: MemfdFlags, seals: SealFlags) -> OwnedFd {
    let fd = rustix::fs::memfd_create("hostile", flags).unwrap();
    rustix::fs::ftruncate(&fd, len).unwrap();
    if !seals.is_empty() {
        rustix::fs::fcntl_add_seals(&fd, seals).unwrap();
    }
    fd
}

/// Hostile memory handed to another process: each is refused with its typed
/// error before anything is mapped; the good one is mapped and shared.
#[test]
fn child_refuses_hostile_memory() {
    const BYTES: usize = 4096;
    let all = SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL;
    let sealing = MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING;
    let (pipe_r, _pipe_w) = rustix::pipe::pipe().unwrap();
    let good = SharedMemory::create(BYTES).unwrap();
    let read_only = rustix::fs::open(
        format!(
            "/proc/self/fd/{}",
            rustix::fd::AsRawFd::as_raw_fd(&good.fd())
        ),
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let missing = |seals: SealFlags| format!("MissingSeals {seals:?}");
    let cases: Vec<(OwnedFd, String)> = vec![
        (pipe_r, "NotMemfd".into()),
        (
            memfd(BYTES as u64, sealing, SealFlags::empty()),
            missing(all),
        ),
        (
            memfd(BYTES as u64, sealing, SealFlags::SHRINK),
            missing(SealFlags::GROW | SealFlags::SEAL),
        ),
        (
            memfd(BYTES as u64, sealing, SealFlags::SHRINK | SealFlags::GROW),
            missing(SealFlags::SEAL),
        ),
        // Without MFD_ALLOW_SEALING a memfd carries F_SEAL_SEAL only.
        (
            memfd(BYTES as u64, MemfdFlags::CLOEXEC, SealFlags::empty()),
            missing(SealFlags::SHRINK | SealFlags::GROW),
        ),
        (
            memfd(2 * BYTES as u64, sealing, all),
            "WrongSize 8192".into(),
        ),
        (
            memfd(BYTES as u64 - 64, sealing, all),
            "WrongSize 4032".into(),
        ),
        (
            read_only,
            format!("Sys mmap {:?}", rustix::io::Errno::ACCESS),
        ),
    ];
    let (socket, child_end) = socketpair();
    let mut child = spawn_child(
        "attach-report",
        &child_end,
        CHILD_ARGS,
        &[(ENV_EXPECTED_BYTES, BYTES.to_string())],
    );
    drop(child_end);
    let mut lines = BufReader::new(socket.try_clone().unwrap()).lines();
    for (fd, want) in &cases {
        send_fd(&socket, fd.as_fd()).unwrap();
        let got = lines.next().expect("a report line").unwrap();
        assert_eq!(&got, want, "the child's verdict on a hostile descriptor");
    }
    assert_eq!(good.region().load(0, Ordering::Acquire), 0);
    send_fd(&socket, good.fd()).unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "ok");
    assert_eq!(
        good.region().load(0, Ordering::Acquire),
        0x5eed,
        "the child's store is visible here"
    );
    drop(lines);
    drop(socket);
    wait_child(&mut child, Instant::now() + CASE_DEADLINE).unwrap();
}

/// The node side of set-up learns who connected: `SO_PEERCRED` on an
/// accepted connection names the connecting process, not the listener.
#[test]
fn peer_credentials_name_the_connecting_process() {
    let dir = std::env::temp_dir().join(format!("splitkv-client-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("peercred.sock");
    let _ = std::fs::remove_file(&path);
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let (_control, child_end) = socketpair();
    let mut child = spawn_child(
        "connect",
        &child_end,
        CHILD_ARGS,
        &[(ENV_SOCKET_PATH, path.display().to_string())],
    );
    drop(child_end);
    let (mut stream, _) = listener.accept().unwrap();
    let mut byte = [0u8; 1];
    std::io::Read::read_exact(&mut stream, &mut byte).unwrap();
    let cred = splitkv_client::peer_credentials(&stream).unwrap();
    assert_eq!(cred.pid, child.0.id() as i32);
    assert_ne!(cred.pid, std::process::id() as i32);
    assert_eq!(cred.uid, rustix::process::getuid().as_raw());
    drop(stream);
    wait_child(&mut child, Instant::now() + CASE_DEADLINE).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
