//! `--restart NODE@SECS` (a restarted node rejoins): the `--kill`ed node's process
//! is started again; it rejoins empty as a new incarnation (the bench loads
//! it with `LoadRequest::rejoin`, and starts a client with a budget of 0 so
//! its rows can be collected), is admitted as copying, gets its shards
//! copied and becomes a replica again. The run ends only once the
//! replication degree is restored: every node live and none copying in the
//! configuration, and the restarted node a replica on the configuration's
//! epoch (its `/status`); [`RESTORE_TIMEOUT`] after the restart at the
//! latest, or the run fails with a clear error. `--replace NODE@SECS` is
//! the same at fresh addresses, as a new machine ([`super::replace`]).

use super::{bad, Deployed, POLL_PERIOD, READY_TIMEOUT};
use crate::cli::KillAt;
use crate::Failure;
use serde_json::Value;
use splitkv_bench::remote::protocol::{LoadAnswer, StartAnswer, StartRequest};
use std::time::{Duration, Instant};

/// Longest the replication degree may take to be restored after the
/// restarted node's process started.
pub const RESTORE_TIMEOUT: Duration = Duration::from_secs(60);

/// A `--restart` (or `--replace`) and what came of it (times after the
/// run's start).
pub(super) struct Restart {
    /// The node and when.
    pub at: KillAt,
    /// `--replace`: the new process starts at fresh addresses.
    pub replace: bool,
    /// Where the replacement listens, once started (`--replace`).
    pub moved: Option<super::replace::Moved>,
    /// When its new process was started and loaded.
    pub started: Option<Duration>,
    /// When its `/status` first showed it admitted (no longer joining).
    pub admitted_at: Option<Duration>,
    /// When the replication degree was first seen restored.
    pub restored_at: Option<Duration>,
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
            admitted_at: None,
            restored_at: None,
            status: Value::Null,
        }
    }

    /// Whether its last `/status` shows the degree restored: every node of
    /// `all` live, none copying or joining a shard, every shard at the
    /// degree, the node a replica, its runtime on the configuration's epoch
    /// and no copy under way there.
    fn restored(&self, all: u64) -> bool {
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

impl Deployed {
    /// Starts the `--restart` (`--replace`) node again if it is due
    /// (`elapsed` into the run, after the kill): new process (at fresh
    /// addresses), `/load` with `rejoin`, a client with nothing to do.
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
        self.start_again(node)?;
        let t = Instant::now();
        while let Err(e) = self.call_raw(node, "GET", "/status", None) {
            if t.elapsed() >= READY_TIMEOUT {
                return Err(self.dead(node, e));
            }
            if let Some(f) = self.exited() {
                return Err(f.unwrap_or_else(|| self.dead(node, e)));
            }
            std::thread::sleep(POLL_PERIOD);
        }
        let mut load = self
            .load_body
            .clone()
            .ok_or_else(|| bad("nothing loaded"))?;
        load["rejoin"] = Value::Bool(true);
        let _: LoadAnswer = self.call(node, "POST", "/load", Some(&load))?;
        let idle = StartRequest {
            budget: Some(0),
            journal: None,
            ..start.clone()
        };
        let body = serde_json::to_value(&idle).map_err(|e| Failure::Internal(e.to_string()))?;
        let _: StartAnswer = self.call(node, "POST", "/workload/start", Some(&body))?;
        if let Some(r) = self.restart.as_mut() {
            r.started = Some(elapsed);
        }
        let what = match self.restart.as_ref().is_some_and(|r| r.replace) {
            true => "replaced",
            false => "restarted",
        };
        if let Some(tl) = self.timeline.as_mut() {
            tl.event(elapsed, &format!("node {node} {what}"));
        }
        tracing::info!(node, ?elapsed, what, "started again");
        Ok(())
    }

    /// Whether `node` is the `--restart` node and runs again.
    pub(super) fn is_restarted(&self, node: u16) -> bool {
        self.restart
            .as_ref()
            .is_some_and(|r| r.at.node == node && r.started.is_some())
    }

    /// Notes the restarted node's `/status` (`s`), seen `t` into the run.
    pub(super) fn note_restart(&mut self, t: Duration, s: &Value) {
        let all = (1u64 << self.nodes()) - 1;
        let Some(r) = self.restart.as_mut() else {
            return;
        };
        r.status = s["membership"].clone();
        let mut events = Vec::new();
        if r.admitted_at.is_none() && r.status["role"].is_string() && r.status["role"] != "joining"
        {
            r.admitted_at = Some(t);
            events.push(format!("node {} admitted", r.at.node));
        }
        if r.restored_at.is_none() && r.restored(all) {
            r.restored_at = Some(t);
            events.push("replication restored".to_string());
        }
        if let Some(tl) = self.timeline.as_mut() {
            events.iter().for_each(|e| tl.event(t, e));
        }
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
        if r.restored_at.is_some() {
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
        self.restart
            .as_ref()
            .is_some_and(|r| r.restored_at.is_some())
    }

    /// The report's line about the restart, if one was asked for.
    pub(super) fn restart_line(&self) -> Option<String> {
        let r = self.restart.as_ref()?;
        let ms = |d: Option<Duration>| {
            d.map_or("never".to_string(), |d| format!("{:.2} s", d.as_secs_f64()))
        };
        let since_kill = |d: Option<Duration>| match (d, self.killed) {
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
            "{verb}: node {} started again{moved} at {}, admitted at {}, replication restored at {}{}; service resumed after the kill at {}{}; its role {} in epoch {}, copy Done messages received {}",
            r.at.node,
            ms(r.started),
            ms(r.admitted_at),
            ms(r.restored_at),
            since_kill(r.restored_at),
            ms(self.resumed_after_kill),
            since_kill(self.resumed_after_kill),
            r.status["role"],
            r.status["epoch"],
            r.status["copy"]["done_received"],
        ))
    }
}
