//! `--spawn`: the cluster file's node processes started on this machine
//! (this binary's `splitkv node`), and stopped by process id when the
//! [`Spawned`] guard is dropped — on every path, errors included: SIGTERM
//! first (the node drains), SIGKILL after [`STOP_WAIT`]. Each node's
//! standard error (its log, unless the file names a log file) goes to
//! `splitkv-node-<bench pid>-<id>.log` in the temporary directory, so the
//! bench's own output stays its own; a node that exits early is reported
//! with its log's last line. The logs are removed after a clean run (every
//! node exited 0 at [`Spawned::close`]); otherwise every node's log is
//! kept, the survivors' too, and their place is named.

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Longest a spawned node may take to exit after SIGTERM before SIGKILL.
pub const STOP_WAIT: Duration = Duration::from_secs(15);
/// How often a stopping node is checked.
const STOP_POLL: Duration = Duration::from_millis(10);

/// The node processes started by the bench, stopped on drop.
#[derive(Debug, Default)]
pub struct Spawned {
    children: Vec<(u16, Child)>,
    logs: Vec<(u16, PathBuf)>,
    /// How the nodes were started (`--config`, `--threads`, `--seed`), to
    /// start one again ([`Spawned::restart`]).
    config: PathBuf,
    threads: usize,
    seed: u64,
}

impl Spawned {
    /// Starts `splitkv node --config config --id N --threads threads --seed
    /// seed` for every id in `ids`.
    ///
    /// # Errors
    /// The first node that cannot be started (the others are stopped).
    pub fn start(config: &Path, ids: &[u16], threads: usize, seed: u64) -> Result<Spawned, String> {
        let mut spawned = Spawned {
            config: config.to_path_buf(),
            threads,
            seed,
            children: Vec::new(),
            logs: Vec::new(),
        };
        for &id in ids {
            spawned.spawn(id, "", &[])?;
        }
        Ok(spawned)
    }

    /// Starts node `id` again after it was killed (`--restart`, rejoin):
    /// a new process of the same node, logging to
    /// `splitkv-node-<bench pid>-<id>-restarted.log`.
    ///
    /// # Errors
    /// `id` still runs, or the process cannot be started.
    pub fn restart(&mut self, id: u16) -> Result<(), String> {
        if self.children.iter().any(|(i, _)| *i == id) {
            return Err(format!("node {id} still runs: it cannot be restarted"));
        }
        self.spawn(id, "-restarted", &[])
    }

    /// Starts node `id` again on a "new machine" after it was killed
    /// (`--replace`, a replacement machine): a new process of the same node at
    /// data address `data` and control address `control` instead of the file's
    /// (`splitkv node --data-address --control-address`), logging to
    /// `splitkv-node-<bench pid>-<id>-replaced.log`.
    ///
    /// # Errors
    /// `id` still runs, or the process cannot be started.
    pub fn replace(
        &mut self,
        id: u16,
        data: SocketAddr,
        control: SocketAddr,
    ) -> Result<(), String> {
        if self.children.iter().any(|(i, _)| *i == id) {
            return Err(format!("node {id} still runs: it cannot be replaced"));
        }
        let moved = [
            "--data-address".to_string(),
            data.to_string(),
            "--control-address".to_string(),
            control.to_string(),
        ];
        self.spawn(id, "-replaced", &moved)
    }

    /// Starts node `id` (one more of the file's nodes, after [`Spawned::start`]).
    ///
    /// # Errors
    /// The process cannot be started.
    pub fn start_node(&mut self, id: u16) -> Result<(), String> {
        self.spawn(id, "", &[])
    }

    fn spawn(&mut self, id: u16, suffix: &str, extra: &[String]) -> Result<(), String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
        let log = std::env::temp_dir().join(format!(
            "splitkv-node-{}-{id}{suffix}.log",
            std::process::id()
        ));
        let stderr =
            File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        self.logs.push((id, log));
        let child = Command::new(&exe)
            .arg("node")
            .arg("--config")
            .arg(&self.config)
            .args(["--id", &id.to_string()])
            .args(["--threads", &self.threads.to_string()])
            .args(["--seed", &self.seed.to_string()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start node {id}: {e}"))?;
        self.children.push((id, child));
        Ok(())
    }

    /// A spawned node that has exited: its id, and its status with the
    /// last line of its log.
    pub fn exited(&mut self) -> Option<(u16, String)> {
        let (id, status) = self.children.iter_mut().find_map(|(id, c)| {
            let status = c.try_wait().ok().flatten()?;
            Some((*id, describe_exit(status)))
        })?;
        let last = self
            .logs
            .iter()
            .rev()
            .find(|(i, _)| *i == id)
            .and_then(|(_, p)| std::fs::read_to_string(p).ok())
            .and_then(|t| {
                t.lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .map(str::to_string)
            });
        Some((
            id,
            match last {
                Some(line) => format!("{status}: {line}"),
                None => status,
            },
        ))
    }

    /// Kills node `id` with SIGKILL (`--kill`) and reaps it; it no longer
    /// counts as exited early. Returns its exit status.
    ///
    /// # Errors
    /// `id` is not a running spawned node.
    pub fn kill(&mut self, id: u16) -> Result<String, String> {
        let at = self
            .children
            .iter()
            .position(|(i, _)| *i == id)
            .ok_or_else(|| format!("node {id} is not a running spawned node"))?;
        let (_, mut child) = self.children.remove(at);
        // `Child::kill` sends SIGKILL to this child's pid (not yet reaped).
        let _ = child.kill();
        let status = child
            .wait()
            .map_err(|e| format!("node {id}: waiting after SIGKILL: {e}"))?;
        Ok(status.to_string())
    }

    /// Stops every node at the end of a run that went well: SIGTERM, then
    /// SIGKILL after [`STOP_WAIT`]; waits for each. Returns the nodes that
    /// did not exit 0; the logs are removed if there are none.
    pub fn close(&mut self) -> Vec<(u16, String)> {
        let bad = self.stop();
        if bad.is_empty() {
            for (_, log) in self.logs.drain(..) {
                let _ = std::fs::remove_file(log);
            }
        } else {
            self.keep_logs();
        }
        bad
    }

    /// Names where the logs are (each is left in place).
    fn keep_logs(&mut self) {
        if let Some((_, first)) = self.logs.first() {
            let dir = first.parent().unwrap_or(Path::new("."));
            let pattern = format!("splitkv-node-{}-*.log", std::process::id());
            eprintln!("node logs kept: {}", dir.join(pattern).display());
        }
        self.logs.clear();
    }

    /// Stops every node: SIGTERM, then SIGKILL after [`STOP_WAIT`]; waits
    /// for each. Returns the nodes that did not exit 0.
    fn stop(&mut self) -> Vec<(u16, String)> {
        for (_, c) in &self.children {
            // SAFETY: `kill` takes any pid; the child is ours and not yet
            // reaped (it is waited for below), so the pid names it.
            unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
        }
        let deadline = Instant::now() + STOP_WAIT;
        let mut bad = Vec::new();
        for (id, mut c) in self.children.drain(..) {
            let status = loop {
                match c.try_wait() {
                    Ok(Some(s)) => break Some(s),
                    Ok(None) if Instant::now() < deadline => std::thread::sleep(STOP_POLL),
                    _ => {
                        let _ = c.kill();
                        break c.wait().ok();
                    }
                }
            };
            match status {
                Some(s) if s.success() => {}
                Some(s) => bad.push((id, s.to_string())),
                None => bad.push((id, "unknown status".into())),
            }
        }
        bad
    }
}

/// A node process's exit status, saying so when it fail-stopped by design
/// (exit [`crate::EXIT_FAIL_STOP`]: its membership fenced it).
fn describe_exit(status: std::process::ExitStatus) -> String {
    if status.code() == Some(i32::from(crate::EXIT_FAIL_STOP)) {
        format!("{status}, a fail-stop: its membership fenced it")
    } else {
        status.to_string()
    }
}

/// Not closed: the bench failed, so every node's log is kept.
impl Drop for Spawned {
    fn drop(&mut self) {
        self.stop();
        self.keep_logs();
    }
}
