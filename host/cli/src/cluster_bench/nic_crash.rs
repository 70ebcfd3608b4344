//! `--nic-crash NODE@SECS`: what the bench driver keeps of the fault and
//! the line it reports (see the module docs of `cluster_bench`).

use super::Deployed;
use crate::cli::KillAt;
use crate::Failure;
use serde_json::Value;
use std::time::Duration;

/// A `--nic-crash` fault: asked for, posted, observed in `/status`.
pub(super) struct NicCrash {
    /// The node and when.
    pub at: KillAt,
    /// When it was posted, after the run's start.
    pub posted: Option<Duration>,
    /// Committed transactions (every node) just after it, and at the end.
    pub committed: (Option<u64>, u64),
    /// The node's own client's committed transactions just after it, and
    /// at the end.
    pub own: (Option<u64>, u64),
    /// When its `/status` first showed it serving again (the bench polls
    /// every 50 ms: an upper bound).
    pub serving_at: Option<Duration>,
    /// The node's `/status` `nic` as last seen.
    pub status: Value,
}

impl NicCrash {
    /// Notes the node's `/status` (`s`), seen `t` into the run.
    pub fn note_status(&mut self, s: &Value, t: Duration) {
        self.status = s["nic"].clone();
        if self.serving_at.is_none() && self.serving_again() {
            self.serving_at = Some(t);
        }
        let c = s["transactions"]["committed"].as_u64().unwrap_or(0);
        if self.posted.is_some() {
            self.own.0.get_or_insert(c);
        }
        self.own.1 = c;
    }

    /// Whether the node's NIC runtime restarted and serves again.
    pub fn serving_again(&self) -> bool {
        self.posted.is_some()
            && self.status["restarts"].as_u64().unwrap_or(0) >= 1
            && self.status["availability"] == "serving"
    }

    /// The report's line.
    pub fn line(&self) -> Option<String> {
        let at = self.posted?;
        let (after, end) = self.committed;
        let (own_after, own_end) = self.own;
        let n = &self.status;
        Some(format!(
            "nic-crash: node {}'s NIC runtime restarted at {:.2} s into the run (incarnation {}, restarts {}, serving again: {}{}, client transactions answered unknown: {}, locks reinstalled: {}); the cluster committed {} transactions after it, node {}'s own client {}",
            self.at.node,
            at.as_secs_f64(),
            n["incarnation"],
            n["restarts"],
            if self.serving_again() { "yes" } else { "no" },
            self.serving_at.map_or(String::new(), |s| format!(
                " (seen {:.0} ms after the restart)",
                s.saturating_sub(at).as_secs_f64() * 1e3
            )),
            n["outcomes_unknown"],
            n["locks_reinstalled"],
            end.saturating_sub(after.unwrap_or(end)),
            self.at.node,
            own_end.saturating_sub(own_after.unwrap_or(own_end)),
        ))
    }
}

impl Deployed {
    /// Crashes the `--nic-crash` node's NIC runtime if it is due.
    pub(super) fn nic_crash_if_due(&mut self, elapsed: Duration) -> Result<(), Failure> {
        let Some(node) = self
            .nic_crash
            .as_ref()
            .filter(|c| c.posted.is_none() && elapsed >= c.at.after)
            .map(|c| c.at.node)
        else {
            return Ok(());
        };
        let _: Value = self.call(node, "POST", "/fault/nic-restart", Some(&Value::Null))?;
        if let Some(c) = self.nic_crash.as_mut() {
            c.posted = Some(elapsed);
        }
        if let Some(t) = self.timeline.as_mut() {
            t.event(elapsed, &format!("node {node} NIC runtime restarted"));
        }
        tracing::info!(node, ?elapsed, "NIC runtime crash posted");
        Ok(())
    }

    /// Notes the `--nic-crash` node's `/status` (seen `t` into the run) and
    /// the committed count;
    /// whether it is settled (restarted and serving again, or none asked).
    pub(super) fn note_nic_crash(
        &mut self,
        t: Duration,
        node: u16,
        status: &Value,
        committed: Option<u64>,
    ) -> bool {
        let Some(c) = self.nic_crash.as_mut() else {
            return true;
        };
        if let Some(total) = committed {
            if c.posted.is_some() {
                c.committed.0.get_or_insert(total);
            }
            c.committed.1 = total;
        }
        if node == c.at.node {
            c.note_status(status, t);
        }
        c.serving_again()
    }
}
