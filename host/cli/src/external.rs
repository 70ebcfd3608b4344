//! `splitkv bench … --clients external`: each node's workload client runs
//! as its own process (`splitkv-app-client`, linking only `splitkv-client`
//! and `splitkv-workloads`) attached to the node's application socket
//! (L5 §III) instead of inside the node. The bench starts them, waits for
//! them (each within a deadline), and reads back what each saw
//! ([`ClientResults`]); the checks then run over the database and those
//! results as they do over the in-node clients'.

use crate::Failure;
use splitkv_host::deploy::ClientSettings;
use splitkv_workloads::results::{ClientResults, CLIENT_RESULTS_VERSION};
use splitkv_workloads::spec::ClientSpec;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The client program's file name, next to the `splitkv` binary.
pub const CLIENT_PROGRAM: &str = "splitkv-app-client";

/// How long a client may take to connect to its node's socket (ms): the
/// socket appears once the cluster's threads start.
pub const CONNECT_WAIT_MS: u64 = 20_000;

/// Where the bench's clients run: one application per node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ClientsMode {
    /// Each node's client runs inside the node process (a NIC client port).
    #[default]
    InNode,
    /// Each node's client runs as a `splitkv-app-client` process attached
    /// to the node's application socket.
    External,
}

/// The `splitkv-app-client` program next to the running `splitkv`.
///
/// # Errors
/// [`Failure::BadInput`] if it is not there.
pub fn client_program() -> Result<PathBuf, Failure> {
    let exe = std::env::current_exe()
        .map_err(|e| Failure::Internal(format!("cannot find the running binary: {e}")))?;
    let path = exe
        .parent()
        .map(|d| d.join(CLIENT_PROGRAM))
        .unwrap_or_else(|| PathBuf::from(CLIENT_PROGRAM));
    if path.is_file() {
        Ok(path)
    } else {
        Err(Failure::BadInput(format!(
            "--clients external needs {} (build it with cargo build --release -p {CLIENT_PROGRAM})",
            path.display()
        )))
    }
}

/// A fresh directory for the nodes' sockets and the clients' results,
/// removed when dropped.
#[derive(Debug)]
pub struct RunDir(PathBuf);

impl RunDir {
    /// Creates it under the system's temporary directory.
    ///
    /// # Errors
    /// [`Failure::Internal`] if it cannot be created.
    pub fn new() -> Result<RunDir, Failure> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "splitkv-external-{}-{nanos:08x}",
            std::process::id()
        ));
        std::fs::create_dir(&dir)
            .map_err(|e| Failure::Internal(format!("cannot create {}: {e}", dir.display())))?;
        Ok(RunDir(dir))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The application settings of nodes serving there: the in-node
    /// client's in-flight depth granted.
    pub fn settings(&self, inflight: usize) -> ClientSettings {
        let mut s = ClientSettings::new(self.0.clone());
        s.in_flight_max = s.in_flight_max.max(inflight);
        s
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The running client processes, one per node.
#[derive(Debug)]
pub struct Clients {
    children: Vec<(u16, Child, PathBuf)>,
}

impl Clients {
    /// Starts `program` once per `(node, spec)`, attached to
    /// `settings`' socket of that node, writing into `dir`.
    ///
    /// # Errors
    /// [`Failure::Internal`] if a process cannot start (those already
    /// started are killed).
    pub fn start(
        program: &Path,
        settings: &ClientSettings,
        dir: &Path,
        specs: &[(u16, ClientSpec)],
        drain: Duration,
    ) -> Result<Clients, Failure> {
        let mut clients = Clients {
            children: Vec::with_capacity(specs.len()),
        };
        for (node, spec) in specs {
            let out = dir.join(format!("client-{}.json", spec.client));
            let spec_json = serde_json::to_string(spec)
                .map_err(|e| Failure::Internal(format!("client spec: {e}")))?;
            let child = Command::new(program)
                .arg("--socket")
                .arg(settings.socket_path(*node))
                .args(["--node", &node.to_string(), "--spec", &spec_json])
                .arg("--out")
                .arg(&out)
                .args(["--connect-wait-ms", &CONNECT_WAIT_MS.to_string()])
                .args(["--drain-ms", &drain.as_millis().to_string()])
                .stdin(Stdio::null())
                .spawn();
            match child {
                Ok(c) => clients.children.push((*node, c, out)),
                Err(e) => {
                    clients.kill();
                    return Err(Failure::Internal(format!(
                        "cannot start {}: {e}",
                        program.display()
                    )));
                }
            }
        }
        Ok(clients)
    }

    /// Whether every client has exited.
    pub fn all_exited(&mut self) -> bool {
        self.children
            .iter_mut()
            .all(|(_, c, _)| !matches!(c.try_wait(), Ok(None)))
    }

    /// Kills every client still running (by its own process id) and reaps it.
    fn kill(&mut self) {
        for (_, c, _) in &mut self.children {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }

    /// Waits for every client until `deadline` (then kills the rest) and
    /// reads their results, by client. The client of node `lost` (killed
    /// on purpose) may have ended its run because the node closed its
    /// connection.
    ///
    /// # Errors
    /// [`Failure::Check`] naming a client that did not end by the deadline,
    /// failed, wrote no results or results of another version, or stopped
    /// early (its connection failed, or transactions were still in flight
    /// after its drain).
    pub fn finish(
        mut self,
        deadline: Instant,
        lost: Option<u16>,
    ) -> Result<Vec<ClientResults>, Failure> {
        while !self.all_exited() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let late = !self.all_exited();
        self.kill();
        if late {
            return Err(Failure::Check(
                "an external client did not end by its deadline (killed)".into(),
            ));
        }
        let mut results = Vec::with_capacity(self.children.len());
        for (node, c, out) in &mut self.children {
            let status = c.wait().map_err(|e| Failure::Internal(e.to_string()))?;
            if !status.success() {
                return Err(Failure::Check(format!(
                    "node {node}'s external client failed ({status})"
                )));
            }
            let text = std::fs::read_to_string(&*out).map_err(|e| {
                Failure::Check(format!(
                    "node {node}'s external client wrote no results: {e}"
                ))
            })?;
            let r: ClientResults = serde_json::from_str(&text).map_err(|e| {
                Failure::Check(format!("node {node}'s external client results: {e}"))
            })?;
            if r.version != CLIENT_RESULTS_VERSION {
                return Err(Failure::Check(format!(
                    "node {node}'s external client wrote results of version {} (this bench reads {CLIENT_RESULTS_VERSION})",
                    r.version
                )));
            }
            let lost_node = r.node_closed && lost == Some(*node);
            if let Some(e) = r.error.as_ref().filter(|_| !lost_node) {
                return Err(Failure::Check(format!(
                    "node {node}'s external client stopped early: {e}"
                )));
            }
            results.push(r);
        }
        Ok(results)
    }
}

impl Drop for Clients {
    fn drop(&mut self) {
        self.kill();
    }
}

/// CPU time (user + system) of this process and of its reaped children
/// (`getrusage` `RUSAGE_SELF` and `RUSAGE_CHILDREN`).
pub fn cpu_times() -> (Duration, Duration) {
    let of = |who| {
        // SAFETY: an all-zero rusage is valid, and getrusage only writes it.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `u` is a valid, writable rusage.
        if unsafe { libc::getrusage(who, &mut u) } != 0 {
            return Duration::ZERO;
        }
        let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1_000);
        tv(u.ru_utime) + tv(u.ru_stime)
    };
    (of(libc::RUSAGE_SELF), of(libc::RUSAGE_CHILDREN))
}
