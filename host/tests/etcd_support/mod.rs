//! A private etcd server for one test: loopback client and peer URLs on
//! ports the OS chose, a data directory of its own (on tmpfs where there is
//! one), stopped by process id
//! when dropped (also when the test panics). Needs the `etcd` binary
//! (Debian `etcd-server`; `.ci/run` installs it).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long etcd may take to report healthy.
pub const ETCD_START_MS_MAX: u64 = 15_000;
/// Starts of one etcd on fresh ports before its test fails (see
/// `Etcd::start_with`).
const START_TRIES_MAX: u32 = 5;

/// A running etcd, killed on drop.
pub struct Etcd {
    child: Option<Child>,
    dir: PathBuf,
    /// Its client URL (`http://127.0.0.1:<port>`).
    pub endpoint: String,
    client_port: u16,
    /// Under `strace` ([`Etcd::start_with_slow_sync`]): etcd's process id,
    /// killed first (strace 6.1 leaves its tracee running when killed).
    tracee: Option<u32>,
}

/// A loopback port the OS chose and nothing listens on now.
#[allow(dead_code)] // the tests of unreachable etcd use it, the others do not
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    l.local_addr().expect("local address").port()
}

/// Two distinct loopback ports the OS chose, both held until both are
/// chosen, then released.
fn two_free_ports() -> (u16, u16) {
    let a = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let b = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let port = |l: &TcpListener| l.local_addr().expect("local address").port();
    (port(&a), port(&b))
}

impl Etcd {
    /// Starts etcd with a 50 ms heartbeat and a 500 ms election timeout (so
    /// leases of 1 s are granted as asked) and waits until it is healthy.
    pub fn start() -> Etcd {
        Etcd::start_with(|| Command::new("etcd"))
    }

    /// Starts etcd as [`Etcd::start`] does, on a disk that takes `delay` for
    /// every `fsync`/`fdatasync` (each delayed by `strace` fault injection:
    /// the slow disk of a busy CI machine, on purpose). `Err` says why it
    /// cannot here (no `strace`, or tracing is not permitted).
    #[allow(dead_code)] // the library's tests use it, the CLI's do not
    pub fn start_with_slow_sync(delay: Duration) -> Result<Etcd, String> {
        let probe = Command::new("strace")
            .args(["-f", "--seccomp-bpf", "-qq", "-o", "/dev/null"])
            .args(["-e", "trace=fsync", "true"])
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("strace: {e}"))?;
        if !probe.status.success() {
            let err = String::from_utf8_lossy(&probe.stderr);
            return Err(format!("strace cannot trace here: {}", err.trim()));
        }
        let us = delay.as_micros();
        let mut e = Etcd::start_with(|| {
            let mut c = Command::new("strace");
            c.args(["-f", "--seccomp-bpf", "-qq", "-o", "/dev/null"])
                .args(["-e", "trace=fsync,fdatasync"])
                .arg(format!("--inject=fsync:delay_exit={us}"))
                .arg(format!("--inject=fdatasync:delay_exit={us}"))
                .arg("etcd");
            c
        });
        let pid = e.child.as_ref().map_or(0, Child::id);
        let children = format!("/proc/{pid}/task/{pid}/children");
        let listed = std::fs::read_to_string(&children).unwrap_or_default();
        e.tracee = listed
            .split_whitespace()
            .next()
            .and_then(|p| p.parse().ok());
        if e.tracee.is_none() {
            return Err(format!(
                "no etcd process under strace ({children}: {listed:?})"
            ));
        }
        Ok(e)
    }

    /// Starts the command `etcd()` makes, with the arguments below
    /// appended, and waits until etcd is healthy. A port found free can be
    /// taken before etcd binds it (by another test's client connection, as
    /// its ephemeral port); etcd then exits with "address already in use"
    /// and is started again on other ports, at most [`START_TRIES_MAX`]
    /// times.
    fn start_with(etcd: impl Fn() -> Command) -> Etcd {
        for _ in 1..START_TRIES_MAX {
            match Etcd::try_start(etcd()) {
                Ok(e) => return e,
                Err(log) if log.contains("address already in use") => continue,
                Err(log) => panic!("etcd exited at start:\n{log}"),
            }
        }
        Etcd::try_start(etcd()).unwrap_or_else(|log| panic!("etcd exited at start:\n{log}"))
    }

    /// One try of [`Etcd::start_with`]; `Err` has etcd's log if it exited.
    fn try_start(mut etcd: Command) -> Result<Etcd, String> {
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = data_root().join(format!("splitkv-etcd-{}-{stamp}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the etcd temp dir");
        let (client_port, peer_port) = two_free_ports();
        let client = format!("http://127.0.0.1:{client_port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let log = std::fs::File::create(dir.join("etcd.log")).expect("create the etcd log");
        let child = etcd
            .args(["--name", "t0", "--data-dir"])
            .arg(dir.join("data"))
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &format!("t0={peer}")])
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args(["--logger", "zap", "--log-level", "warn"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start etcd (Debian package etcd-server; .ci/run installs it)");
        let mut e = Etcd {
            child: Some(child),
            dir,
            endpoint: client,
            client_port,
            tracee: None,
        };
        e.wait_healthy()?;
        Ok(e)
    }

    /// Waits until etcd is healthy; `Err` has its log if it exited.
    fn wait_healthy(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_millis(ETCD_START_MS_MAX);
        while Instant::now() < deadline {
            if healthy(self.client_port) {
                return Ok(());
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                let log = std::fs::read_to_string(self.dir.join("etcd.log")).unwrap_or_default();
                return Err(format!("({status})\n{log}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("etcd not healthy within {ETCD_START_MS_MAX} ms");
    }

    /// Kills etcd (SIGKILL by process id) and waits for it.
    pub fn kill(&mut self) {
        if let Some(pid) = self.tracee.take() {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Where a test's etcd keeps its data: tmpfs (`/dev/shm`) where there is
/// one, so that no test depends on how fast the machine's disk syncs (one
/// test slows the syncs on purpose: [`Etcd::start_with_slow_sync`]).
fn data_root() -> PathBuf {
    let shm = PathBuf::from("/dev/shm");
    if shm.is_dir() {
        shm
    } else {
        std::env::temp_dir()
    }
}

/// Whether etcd's `/health` on `port` answers healthy.
fn healthy(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut body = String::new();
    let _ = s.read_to_string(&mut body);
    body.contains("\"health\":\"true\"")
}

/// A cluster file's `[membership]` section: etcd at `endpoint`, leases of
/// 1 s (the node-process tests' TTL).
#[allow(dead_code)] // the CLI's tests use it, the library's do not
pub fn membership_toml(endpoint: &str) -> String {
    format!("[membership]\nkind = \"etcd\"\nendpoints = [\"{endpoint}\"]\nlease_ttl_s = 1\n")
}

/// A fresh etcd and the cluster file's `[membership]` section naming it:
/// the `setup` of one deployed bench run of the CLI's tests (a stored
/// configuration must not outlive its run).
#[allow(dead_code)] // the CLI's tests use it, the library's do not
pub fn fresh_membership() -> (String, Etcd) {
    let etcd = Etcd::start();
    (membership_toml(&etcd.endpoint), etcd)
}
