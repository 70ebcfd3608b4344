//! Two-process echo (L5 Table I's shape): synchronous round trips per second
//! of a 64-byte and a 100-byte message between this process and a child
//! process, over the shared-memory rings with adaptive waiting, over a Unix
//! domain socket, and over loopback TCP, side by side and alternating; then
//! the CPU an idle waiting side burns and the latency of waking it.
//!
//! `cargo bench -p splitkv-client --bench echo`; `SPLITKV_ECHO_SECS` (default
//! 2) sets the seconds per case, `SPLITKV_ECHO_ROUNDS` (default 2) the
//! alternating rounds, `SPLITKV_ECHO_IDLE_SECS` (default 2) the idle interval;
//! `SPLITKV_ECHO_SPINS`, `SPLITKV_ECHO_YIELDS` and `SPLITKV_ECHO_SLEEP_MS`
//! override the waiting policy of both processes (children inherit them);
//! `SPLITKV_ECHO_PIN=1` pins this process to CPU 0 and each child to CPU 1
//! (dedicated cores, as L5 measured), so the scheduler cannot place both
//! ends on one core.

#[path = "../tests/support/mod.rs"]
mod support;

use rustix::fd::OwnedFd;
use splitkv_client::{recv_fd, send_fd, SharedMemory, WaitPolicy};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};
use support::*;

/// Ring capacity of the shared-memory connection, in bytes.
const CAPACITY_BYTES: usize = 1 << 16;
/// Message sizes measured, in bytes.
const SIZES: [usize; 2] = [64, 100];
/// Wake-ups measured after the child slept.
const WAKE_SAMPLES: usize = 20;
/// How long the parent lets the child sleep before each wake-up sample.
const WAKE_GAP: Duration = Duration::from_millis(120);
/// A child gives up after this long without a message.
const CHILD_DEADLINE: Duration = Duration::from_secs(120);
/// One-byte message asking the shared-memory child for its CPU time so far.
const CPU_PROBE: [u8; 1] = [0xcc];
const ENV_SIZE: &str = "SPLITKV_ECHO_SIZE";
const ENV_PORT: &str = "SPLITKV_ECHO_PORT";

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The waiting policy of both sides: the default, or the one the environment sets.
fn policy() -> WaitPolicy {
    let d = WaitPolicy::default();
    WaitPolicy::new(
        env_or("SPLITKV_ECHO_SPINS", d.spins().into()) as u32,
        env_or("SPLITKV_ECHO_YIELDS", d.yields().into()) as u32,
        env_or("SPLITKV_ECHO_SLEEP_MS", d.sleep_ms().into()) as u32,
    )
    .expect("waiting policy in range")
}

/// User + system CPU time of this process, in ns.
fn process_cpu_ns() -> u64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid out-pointer for one `rusage`.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage");
    // SAFETY: initialised by the successful call above.
    let usage = unsafe { usage.assume_init() };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    ns(usage.ru_utime) + ns(usage.ru_stime)
}

/// Pins the calling process to `cpu` if `SPLITKV_ECHO_PIN=1`.
fn pin(cpu: usize) {
    if env_or("SPLITKV_ECHO_PIN", 0) == 1 {
        let mut set = rustix::thread::CpuSet::new();
        set.set(cpu);
        rustix::thread::sched_setaffinity(None, &set).expect("sched_setaffinity");
    }
}

fn main() {
    if let Some((role, socket)) = child_socket() {
        pin(1);
        let result = match role.as_str() {
            "shm" => child_shm(&socket),
            "uds" => child_stream(socket),
            "tcp" => {
                let port = env_or(ENV_PORT, 0) as u16;
                TcpStream::connect(("127.0.0.1", port))
                    .map_err(|e| e.to_string())
                    .and_then(|s| {
                        s.set_nodelay(true).map_err(|e| e.to_string())?;
                        child_stream(s)
                    })
            }
            other => Err(format!("unknown role {other}")),
        };
        if let Err(why) = result {
            eprintln!("echo child {role}: {why}");
            std::process::exit(3);
        }
        return;
    }
    pin(0);
    let secs = env_or("SPLITKV_ECHO_SECS", 2);
    let rounds = env_or("SPLITKV_ECHO_ROUNDS", 2);
    let idle_secs = env_or("SPLITKV_ECHO_IDLE_SECS", 2);
    let case = Duration::from_secs(secs);
    let p = policy();
    println!(
        "two-process echo, {secs} s per case, {rounds} alternating rounds; waiting policy {} spins, {} yields, {} ms sleeps; pinned {}; load average {}",
        p.spins(),
        p.yields(),
        p.sleep_ms(),
        env_or("SPLITKV_ECHO_PIN", 0) == 1,
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
    );
    println!("| size | round | shm rings rt/s | Unix socket rt/s | loopback TCP rt/s | shm/UDS | shm/TCP |");
    println!("|---|---|---|---|---|---|---|");
    for size in SIZES {
        let mut sums = [0.0f64; 3];
        for round in 1..=rounds {
            let shm = shm_round_trips(size, case);
            let uds = uds_round_trips(size, case);
            let tcp = tcp_round_trips(size, case);
            for (s, v) in sums.iter_mut().zip([shm, uds, tcp]) {
                *s += v;
            }
            println!(
                "| {size} B | {round} | {shm:.0} | {uds:.0} | {tcp:.0} | {:.2}× | {:.2}× |",
                shm / uds,
                shm / tcp
            );
        }
        let [shm, uds, tcp] = sums.map(|s| s / rounds as f64);
        println!(
            "| {size} B | mean | {shm:.0} | {uds:.0} | {tcp:.0} | **{:.2}×** | **{:.2}×** |",
            shm / uds,
            shm / tcp
        );
    }
    idle_and_wake(Duration::from_secs(idle_secs), case);
}

/// Shared-memory connection to a fresh echo child.
struct ShmPeer {
    end: Endpoint,
    child: ChildGuard,
    _memory: SharedMemory,
}

fn shm_peer() -> ShmPeer {
    let memory = SharedMemory::create(connection_bytes(CAPACITY_BYTES)).expect("memfd");
    init_connection(memory.region(), CAPACITY_BYTES);
    let (socket, child_end) = UnixStream::pair().expect("socketpair");
    let child_end = OwnedFd::from(child_end);
    let child = spawn_child(
        "shm",
        &child_end,
        &[],
        &[(ENV_CAPACITY, CAPACITY_BYTES.to_string())],
    );
    drop(child_end);
    send_fd(&socket, memory.fd()).expect("send memfd");
    let end = Endpoint::attach(memory.region(), CAPACITY_BYTES, Side::Parent, policy());
    ShmPeer {
        end,
        child,
        _memory: memory,
    }
}

impl ShmPeer {
    fn round_trip(&mut self, msg: &[u8], echo: &mut Vec<u8>) {
        let deadline = Instant::now() + CHILD_DEADLINE;
        self.end.send(msg, deadline).expect("send");
        self.end.recv(echo, deadline).expect("echo");
    }

    fn finish(mut self) {
        let deadline = Instant::now() + CHILD_DEADLINE;
        self.end.send(&[], deadline).expect("stop");
        wait_child(&mut self.child, deadline).expect("child exit");
    }
}

/// Round trips per second of `size`-byte messages for `case`, measured by
/// calling `round_trip` until the time is up.
fn measure(case: Duration, mut round_trip: impl FnMut()) -> f64 {
    for _ in 0..1000 {
        round_trip();
    }
    let start = Instant::now();
    let mut n = 0u64;
    loop {
        for _ in 0..256 {
            round_trip();
        }
        n += 256;
        let elapsed = start.elapsed();
        if elapsed >= case {
            return n as f64 / elapsed.as_secs_f64();
        }
    }
}

fn shm_round_trips(size: usize, case: Duration) -> f64 {
    let mut peer = shm_peer();
    let msg = vec![0x42u8; size];
    let mut echo = Vec::with_capacity(size);
    let rate = measure(case, || {
        peer.round_trip(&msg, &mut echo);
        debug_assert_eq!(echo.len(), size);
    });
    assert_eq!(echo, msg, "echo differs");
    peer.finish();
    rate
}

fn stream_round_trips(mut stream: impl Read + Write, size: usize, case: Duration) -> f64 {
    let msg = vec![0x42u8; size];
    let mut echo = vec![0u8; size];
    let rate = measure(case, || {
        stream.write_all(&msg).expect("write");
        stream.read_exact(&mut echo).expect("read");
    });
    assert_eq!(echo, msg, "echo differs");
    rate
}

fn uds_round_trips(size: usize, case: Duration) -> f64 {
    let (socket, child_end) = UnixStream::pair().expect("socketpair");
    let child_end = OwnedFd::from(child_end);
    let mut child = spawn_child("uds", &child_end, &[], &[(ENV_SIZE, size.to_string())]);
    drop(child_end);
    let rate = stream_round_trips(&socket, size, case);
    drop(socket);
    wait_child(&mut child, Instant::now() + CHILD_DEADLINE).expect("child exit");
    rate
}

fn tcp_round_trips(size: usize, case: Duration) -> f64 {
    let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    // The control socket only carries the child's inherited descriptor here.
    let (_control, child_end) = UnixStream::pair().expect("socketpair");
    let child_end = OwnedFd::from(child_end);
    let mut child = spawn_child(
        "tcp",
        &child_end,
        &[],
        &[(ENV_SIZE, size.to_string()), (ENV_PORT, port.to_string())],
    );
    drop(child_end);
    let (stream, _) = listener.accept().expect("accept");
    stream.set_nodelay(true).expect("nodelay");
    let rate = stream_round_trips(&stream, size, case);
    drop(stream);
    wait_child(&mut child, Instant::now() + CHILD_DEADLINE).expect("child exit");
    rate
}

/// The child's CPU while it waits with nothing to do, and the round trip of a
/// message that has to wake it, beside a hot round trip.
fn idle_and_wake(idle: Duration, case: Duration) {
    let mut peer = shm_peer();
    let mut echo = Vec::new();
    let msg = [0x42u8; 64];
    let hot = measure(case.min(Duration::from_secs(1)), || {
        peer.round_trip(&msg, &mut echo)
    });
    peer.round_trip(&CPU_PROBE, &mut echo);
    let cpu_before = u64::from_le_bytes(echo[..8].try_into().expect("8 bytes"));
    std::thread::sleep(idle);
    peer.round_trip(&CPU_PROBE, &mut echo);
    let cpu_after = u64::from_le_bytes(echo[..8].try_into().expect("8 bytes"));
    let idle_share = (cpu_after - cpu_before) as f64 / idle.as_nanos() as f64;
    let mut cold_ns: Vec<u64> = (0..WAKE_SAMPLES)
        .map(|_| {
            std::thread::sleep(WAKE_GAP);
            let start = Instant::now();
            peer.round_trip(&msg, &mut echo);
            start.elapsed().as_nanos() as u64
        })
        .collect();
    cold_ns.sort_unstable();
    let wakes = peer.end.wakes;
    peer.finish();
    println!();
    println!(
        "idle waiting side (policy: {} spins, {} yields, {} ms sleeps): {:.4}% of a core over {} s ({} ns CPU)",
        policy().spins(),
        policy().yields(),
        policy().sleep_ms(),
        idle_share * 100.0,
        idle.as_secs(),
        cpu_after - cpu_before
    );
    println!(
        "round trip of 64 B waking a sleeping child ({WAKE_SAMPLES} samples, {} ms apart): median {:.1} µs, max {:.1} µs; hot round trip {:.2} µs; futex wake-ups issued by the parent {wakes}",
        WAKE_GAP.as_millis(),
        cold_ns[WAKE_SAMPLES / 2] as f64 / 1e3,
        cold_ns[WAKE_SAMPLES - 1] as f64 / 1e3,
        1e6 / hot
    );
}

/// Child: echo over the rings; answers [`CPU_PROBE`] with its CPU time.
fn child_shm(socket: &UnixStream) -> Result<(), String> {
    let fd = recv_fd(socket).map_err(|e| e.to_string())?;
    let memory =
        SharedMemory::from_fd(fd, connection_bytes(CAPACITY_BYTES)).map_err(|e| e.to_string())?;
    let mut end = Endpoint::attach(memory.region(), CAPACITY_BYTES, Side::Child, policy());
    let mut msg = Vec::new();
    loop {
        let deadline = Instant::now() + CHILD_DEADLINE;
        end.recv(&mut msg, deadline)?;
        if msg.is_empty() {
            return Ok(());
        }
        if msg == CPU_PROBE {
            end.send(&process_cpu_ns().to_le_bytes(), deadline)?;
        } else {
            end.send(&msg, deadline)?;
        }
    }
}

/// Child: echo fixed-size messages over a byte stream until end of stream.
fn child_stream(mut stream: impl Read + Write) -> Result<(), String> {
    let size = env_or(ENV_SIZE, 64) as usize;
    let mut buf = vec![0u8; size];
    loop {
        match stream.read_exact(&mut buf) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e.to_string()),
        }
        stream.write_all(&buf).map_err(|e| e.to_string())?;
    }
}
