//! `--restart NODE@SECS` (a restarted node rejoins): the `--kill`ed node's process
//! is started again; it rejoins empty as a new incarnation (it loads itself
//! with `LoadRequest::rejoin`, asking its peers for their workload; the
//! bench waits for that and starts a client with a budget of 0 so
//! its rows can be collected: on a thread, [`bring_up`], while the
//! run's loop goes on sampling), is admitted as copying, gets its shards
//! copied and becomes a replica again. The run ends only once the
//! replication degree is restored: every node live and none copying in the
//! configuration, and the restarted node a replica on the configuration's
//! epoch (its `/status`); [`RESTORE_TIMEOUT`] after the restart at the
//! latest, or the run fails with a clear error. `--replace NODE@SECS` is
//! the same at fresh addresses, as a new machine ([`super::replace`]).

use super::{bad, Deployed, POLL_PERIOD, READY_TIMEOUT};
use crate::cli::KillAt;
use crate::http;
use crate::Failure;
use serde_json::Value;
use splitkv_bench::remote::protocol::{StartAnswer, StartRequest};
use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest the replication degree may take to be restored after the
/// restarted node's process started.
pub const RESTORE_TIMEOUT: Duration = Duration::from_secs(60);

/// A `--restart` (or `--replace`) and what came of it (times after the
/// run's start: the bench's clock for what the bench did, the nodes'
/// clocks for what happened at them).
pub(super) struct Restart {
    /// The node and when.
    pub at: KillAt,
    /// `--replace`: the new process starts at fresh addresses.
    pub replace: bool,
    /// Where the replacement listens, once started (`--replace`).
    pub moved: Option<super::replace::Moved>,
    /// When its new process was started (the bench's clock).
    pub started: Option<Duration>,
    /// Its control endpoint awaited, `/load` and its client started, on a
    /// thread of its own (so the sampling loop goes on); `Err` says why not.
    bringing_up: Option<JoinHandle<Result<(), String>>>,
    /// When that was done (the bench's clock): its `/status` is polled
    /// from then on.
    pub loaded_at: Option<Duration>,
    /// When its runtime installed the first configuration that admits it
    /// (no longer joining; its clock).
    pub admitted_at: Option<Duration>,
    /// The epoch whose configuration restored the replication degree
    /// (first seen at the node), and when the bench saw it.
    pub restored: Option<(u64, Duration)>,
    /// When it last finished being copied (its clock).
    pub caught_up_at: Option<Duration>,
    /// Its `/status` `membership` as last seen.
    pub status: Value,
}

impl Restart {
    pub fn new(at: KillAt, replace: bool) -> Restart {
        Restart {
            at,
            replace,
            moved: None,
            started: None,
            bringing_up: None,
            loaded_at: None,
            admitted_at: None,
            restored: None,
            caught_up_at: None,
            status: Value::Null,
        }
    }

    /// Whether its last `/status` shows the degree restored: every node of
    /// `all` live, none copying or joining a shard, every shard at the
    /// degree, the node a replica, its runtime on the configuration's epoch
    /// and no copy under way there.
    fn degree_back(&self, all: u64) -> bool {
        let m = &self.status;
        m["role"] == "replica"
            && m["live"].as_u64() == Some(all)
            && m["copying"].as_u64() == Some(0)
            && m["copy"]["copying"] == false
            && m["runtime_epoch"].is_u64()
            && degree_restored(m)
    }
}

/// Whether a node's `/status` `membership` (`m`) shows every shard at the
/// replication degree with no backup still joining, in the configuration
/// its runtime serves (re-replication is over).
pub(super) fn degree_restored(m: &Value) -> bool {
    m["short_shards"].as_u64() == Some(0)
        && m["joining"].as_u64() == Some(0)
        && m["runtime_epoch"] == m["epoch"]
}

/// Brings a started node process up: waits (at most [`READY_TIMEOUT`])
/// until its control endpoint at `addr` answers and it has loaded itself
/// (a joining node asks its peers for their workload: `splitkv node`'s
/// module docs), then starts its client with `start`. Runs on a thread of
/// its own.
///
/// # Errors
/// One line: the endpoint never answered, the node never loaded, or a
/// call failed.
fn bring_up(addr: SocketAddr, token: &str, start: &Value) -> Result<(), String> {
    let t = Instant::now();
    loop {
        let last = match http::call(addr, "GET", "/status", token, None) {
            Ok(s) if s["state"] == "loaded" => break,
            Ok(s) if s["failure"].is_string() => return Err(format!("failed: {}", s["failure"])),
            Ok(s) => format!("state {}", s["state"]),
            Err(e) => e.to_string(),
        };
        if t.elapsed() >= READY_TIMEOUT {
            return Err(format!("not loaded within {READY_TIMEOUT:?}: {last}"));
        }
        std::thread::sleep(POLL_PERIOD);
    }
    let answer = (http::call(addr, "POST", "/workload/start", token, Some(start)))
        .map_err(|e| e.to_string())?;
    serde_json::from_value::<StartAnswer>(answer).map_err(|e| format!("/workload/start: {e}"))?;
    Ok(())
}

impl Deployed {
    /// Starts the `--restart` (`--replace`) node again if it is due
    /// (`elapsed` into the run, after the kill): a new process (at fresh
    /// addresses), which loads itself with `rejoin`; then, on a thread
    /// ([`bring_up`]), a client with nothing to do. Returns at once: the loop polls the
    /// thread ([`Deployed::restart_progress`]).
    pub(super) fn restart_if_due(
        &mut self,
        elapsed: Duration,
        start: &StartRequest,
    ) -> Result<(), Failure> {
        let Some(node) = self
            .restart
            .as_ref()
            .filter(|r| r.started.is_none() && elapsed >= r.at.after && self.killed.is_some())
            .map(|r| r.at.node)
        else {
            return Ok(());
        };
        if !self.is_killed(node) {
            return Err(bad(format!(
                "--restart {node}: only the --kill node restarts"
            )));
        }
        let idle = StartRequest {
            budget: Some(0),
            journal: None,
            ..start.clone()
        };
        let body = serde_json::to_value(&idle).map_err(|e| Failure::Internal(e.to_string()))?;
        self.start_again(node)?;
        let (addr, token) = (self.control_of(node), self.config.token.clone());
        let thread = std::thread::Builder::new()
            .name(format!("bring-up-{node}"))
            .spawn(move || bring_up(addr, &token, &body))
            .map_err(|e| Failure::Internal(format!("cannot start a thread: {e}")))?;
        let what = match self.restart.as_ref().is_some_and(|r| r.replace) {
            true => "replaced",
            false => "restarted",
        };
        if let Some(r) = self.restart.as_mut() {
            r.started = Some(elapsed);
            r.bringing_up = Some(thread);
        }
        if let Some(tl) = self.timeline.as_mut() {
            tl.event(elapsed, &format!("node {node} {what}"));
        }
        tracing::info!(node, ?elapsed, what, "started again");
        Ok(())
    }

    /// Polls the restarted node's bring-up (`elapsed` into the run): once
    /// its thread is done, the node is polled like the others.
    ///
    /// # Errors
    /// The bring-up failed, or a spawned node exited meanwhile.
    pub(super) fn restart_progress(&mut self, elapsed: Duration) -> Result<(), Failure> {
        let Some(r) = self.restart.as_ref() else {
            return Ok(());
        };
        let node = r.at.node;
        match &r.bringing_up {
            None => return Ok(()),
            Some(t) if !t.is_finished() => {
                return match self.exited() {
                    Some(f) => Err(f.unwrap_or_else(|| bad(format!("node {node} exited")))),
                    None => Ok(()),
                };
            }
            Some(_) => {}
        }
        let Some(thread) = self.restart.as_mut().and_then(|r| r.bringing_up.take()) else {
            return Ok(());
        };
        let done = thread
            .join()
            .unwrap_or_else(|_| Err("its bring-up thread panicked".into()));
        if let Err(e) = done {
            return Err(match self.exited() {
                Some(Some(f)) => f,
                _ => bad(format!("node {node} started again: {e}")),
            });
        }
        if let Some(r) = self.restart.as_mut() {
            r.loaded_at = Some(elapsed);
        }
        Ok(())
    }

    /// Whether `node` is the `--restart` node and runs again (loaded,
    /// its client started).
    pub(super) fn is_restarted(&self, node: u16) -> bool {
        self.restart
            .as_ref()
            .is_some_and(|r| r.at.node == node && r.loaded_at.is_some())
    }

    /// Notes the restarted node's `/status` (`s`), seen `t` into the run:
    /// its admission (dated by its runtime's install of the admitting
    /// configuration, its clock) and the restored degree (the epoch that
    /// restored it, dated at the end by the nodes' earliest install).
    pub(super) fn note_restart(&mut self, t: Duration, s: &Value) {
        let all = (1u64 << self.nodes()) - 1;
        let events = super::clock::NodeEvents::of(s);
        let at = |ms: Option<u64>| ms.and_then(|ms| self.run_clock.run_time(ms));
        let (installed, caught_up) = (at(events.epoch_installed), at(events.copy_caught_up));
        let Some(r) = self.restart.as_mut() else {
            return;
        };
        r.status = s["membership"].clone();
        r.caught_up_at = caught_up.or(r.caught_up_at);
        let admitted = r.status["role"].is_string() && r.status["role"] != "joining";
        let mut label = None;
        if let (None, true, Some(installed)) = (r.admitted_at, admitted, installed) {
            r.admitted_at = Some(installed);
            label = Some((installed, format!("node {} admitted", r.at.node)));
        }
        if r.restored.is_none() && r.degree_back(all) {
            r.restored = Some((events.epoch, t));
        }
        if let (Some(tl), Some((at, label))) = (self.timeline.as_mut(), label) {
            tl.event(at, &label);
        }
    }

    /// When the restarted node's degree was restored, by the nodes'
    /// clocks (the earliest install of the epoch that restored it).
    pub(super) fn restored_at(&self) -> Option<Duration> {
        let (epoch, _) = self.restart.as_ref()?.restored?;
        let ms = self.node_clock.installed(epoch)?;
        self.run_clock.run_time(ms)
    }

    /// Whether the `--restart` is over (none asked, or the degree is
    /// restored).
    ///
    /// # Errors
    /// Not restored within [`RESTORE_TIMEOUT`] of the restart.
    pub(super) fn restart_settled(&self, t: Duration) -> Result<bool, Failure> {
        let Some(r) = &self.restart else {
            return Ok(true);
        };
        if r.restored.is_some() {
            return Ok(true);
        }
        match r.started {
            Some(s) if t.saturating_sub(s) > RESTORE_TIMEOUT => Err(bad(format!(
                "--restart: node {}'s replication degree was not restored within {RESTORE_TIMEOUT:?} of its restart (its membership status: {})",
                r.at.node, r.status
            ))),
            _ => Ok(false),
        }
    }

    /// Whether the restarted node is a full replica again (its rows are
    /// then checked like every other node's).
    pub(super) fn restored(&self) -> bool {
        self.restart.as_ref().is_some_and(|r| r.restored.is_some())
    }

    /// The report's line about the restart, if one was asked for: when
    /// the bench started the new process (its clock), and when the node
    /// was admitted, finished its copy and the degree was restored (the
    /// nodes' clocks).
    pub(super) fn restart_line(&self) -> Option<String> {
        let r = self.restart.as_ref()?;
        let s = |d: Option<Duration>, none: &str| {
            d.map_or(none.to_string(), |d| format!("{:.2} s", d.as_secs_f64()))
        };
        let restored = self.restored_at();
        let since_kill = match (restored, self.killed) {
            (Some(d), Some((_, k))) => format!(
                " ({:.0} ms after the kill)",
                d.saturating_sub(k).as_secs_f64() * 1e3
            ),
            _ => String::new(),
        };
        let (verb, moved) = match r.moved {
            Some(m) => (
                "replace",
                format!(" on a new machine (data {}, control {})", m.data, m.control),
            ),
            None => ("restart", String::new()),
        };
        Some(format!(
            "{verb}: node {} started again{moved} at {} (the bench's clock), admitted at {}, copy complete at {}, replication restored at {}{since_kill} (the nodes' clocks); its role {} in epoch {}, copy Done messages received {}",
            r.at.node,
            s(r.started, "never"),
            s(r.admitted_at, "never"),
            s(r.caught_up_at, "unknown"),
            s(restored.or(r.restored.map(|x| x.1)), "never"),
            r.status["role"],
            r.status["epoch"],
            r.status["copy"]["done_received"],
        ))
    }
}
