//! `--nic-crash NODE@SECS`: what the bench driver keeps of the fault and
//! the line it reports (see the module docs of `cluster_bench`).

use crate::cli::KillAt;
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
    /// The node's `/status` `nic` as last seen.
    pub status: Value,
}

impl NicCrash {
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
        let n = &self.status;
        Some(format!(
            "nic-crash: node {}'s NIC runtime restarted at {:.2} s into the run (incarnation {}, restarts {}, serving again: {}, client transactions answered unknown: {}, locks reinstalled: {}); the cluster committed {} transactions after it",
            self.at.node,
            at.as_secs_f64(),
            n["incarnation"],
            n["restarts"],
            if self.serving_again() { "yes" } else { "no" },
            n["outcomes_unknown"],
            n["locks_reinstalled"],
            end.saturating_sub(after.unwrap_or(end)),
        ))
    }
}
