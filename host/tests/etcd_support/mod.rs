//! A private etcd server for one test: loopback client and peer URLs on
//! ports the OS chose, a data directory of its own, stopped by process id
//! when dropped (also when the test panics). Needs the `etcd` binary
//! (Debian `etcd-server`; `.ci/run` installs it).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long etcd may take to report healthy.
pub const ETCD_START_MS_MAX: u64 = 15_000;

/// A running etcd, killed on drop.
pub struct Etcd {
    child: Option<Child>,
    dir: PathBuf,
    /// Its client URL (`http://127.0.0.1:<port>`).
    pub endpoint: String,
    client_port: u16,
}

/// A loopback port the OS chose and nothing listens on now.
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    l.local_addr().expect("local address").port()
}

impl Etcd {
    /// Starts etcd with a 50 ms heartbeat and a 500 ms election timeout (so
    /// leases of 1 s are granted as asked) and waits until it is healthy.
    pub fn start() -> Etcd {
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("splitkv-etcd-{}-{stamp}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the etcd temp dir");
        let (client_port, peer_port) = (free_port(), free_port());
        let client = format!("http://127.0.0.1:{client_port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let log = std::fs::File::create(dir.join("etcd.log")).expect("create the etcd log");
        let child = Command::new("etcd")
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
        };
        e.wait_healthy();
        e
    }

    fn wait_healthy(&mut self) {
        let deadline = Instant::now() + Duration::from_millis(ETCD_START_MS_MAX);
        while Instant::now() < deadline {
            if healthy(self.client_port) {
                return;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                let log = std::fs::read_to_string(self.dir.join("etcd.log")).unwrap_or_default();
                panic!("etcd exited at start ({status}):\n{log}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("etcd not healthy within {ETCD_START_MS_MAX} ms");
    }

    /// Kills etcd (SIGKILL by process id) and waits for it.
    pub fn kill(&mut self) {
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
