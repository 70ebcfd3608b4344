//! The node's `/status` answer and its parts: the views of the handler's
//! runtime (transactions by outcome, recovery, events, NIC, applications,
//! sessions), each `null` before a load; and the NIC restart it injects
//! (`POST /fault/nic-restart`).

use super::NodeHandler;
use serde_json::{json, Value};
use splitkv_host::deploy::CallError;
use std::time::{SystemTime, UNIX_EPOCH};

impl NodeHandler {
    /// Crash recovery as the polling thread last published it:
    /// epochs begun and resumed, and when (ns of the node's clock, the
    /// `now` its components see; `clock_now_ns` is that clock now).
    pub(super) fn recovery(&self) -> Value {
        let Some(h) = self.stats() else {
            return Value::Null;
        };
        let snap = h.snapshot();
        let Some(n) = snap.nodes.first() else {
            return Value::Null;
        };
        let (r, a) = (&n.recovery, &n.recovery_actions);
        json!({
            "epoch": n.epoch,
            "epochs_begun": r.epochs_begun,
            "epochs_resumed": r.epochs_resumed,
            "begin_refused": r.begin_refused,
            "committed_pending": a.committed_pending,
            "dropped_pending": a.dropped_pending,
            "finished_coordinated": a.finished_coordinated,
            "promoted_shards": a.promoted_shards,
            "evidence_left_out": a.evidence_left_out,
            "last_begun_ns": a.last_begun_ns,
            "last_resumed_ns": a.last_resumed_ns,
            "first_commit_after_resume_ns": a.first_commit_after_resume_ns,
        })
    }

    /// When things last happened at this node, as Unix-epoch milliseconds
    /// of its wall clock (times of the node's clock, shifted by the wall
    /// time of its origin), for a monitor to place them on its own time
    /// line: `now` (this answer), and, once a workload is loaded (`null`
    /// for what never happened), when its runtime installed its current
    /// `epoch`, when its last recovery epoch began and resumed, its
    /// coordinator's first commit after that resume, and when it last
    /// finished being copied (re-replication, a rejoined node).
    pub(super) fn events_unix_ms(&self) -> Value {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let now_ms = (wall / 1_000_000) as u64;
        let Some(h) = self.stats() else {
            return json!({ "now": now_ms });
        };
        let (Some(origin), Some(n)) = (h.clock_origin(), h.snapshot().nodes.into_iter().next())
        else {
            return json!({ "now": now_ms });
        };
        let origin_ns = wall.saturating_sub(origin.elapsed().as_nanos());
        let at = |ns: u64| match ns {
            0 => Value::Null,
            ns => json!(((origin_ns + u128::from(ns)) / 1_000_000) as u64),
        };
        let a = &n.recovery_actions;
        let installed = n.membership.map_or(0, |m| m.epoch_installed_ns);
        json!({
            "now": now_ms,
            "epoch": n.epoch,
            "epoch_installed": at(installed),
            "recovery_begun": at(a.last_begun_ns),
            "recovery_resumed": at(a.last_resumed_ns),
            "first_commit_after_resume": at(a.first_commit_after_resume_ns),
            "copy_caught_up": at(a.copy_caught_up_ns),
        })
    }

    /// `POST /fault/nic-restart`: asks the polling thread to restart the
    /// NIC runtime (a NIC-runtime-only crash); answers
    /// at once, before the restart (`/status`'s `nic` shows it).
    pub(super) fn restart_nic(&self) -> Result<Value, CallError> {
        let h = self
            .stats()
            .ok_or_else(|| CallError::Conflict("no node runs yet: load a workload first".into()))?;
        h.restart_nic(self.node)
            .map_err(|e| CallError::Internal(e.to_string()))?;
        let before = h.snapshot().nodes.first().map_or(0, |n| n.rebuild.restarts);
        tracing::warn!(restarts_before = before, "NIC runtime restart asked for");
        Ok(json!({ "restart_requested": true, "restarts_before": before }))
    }

    /// The NIC runtime's incarnation, availability and restarts
    /// (`null` before a load).
    pub(super) fn nic(&self) -> Value {
        let Some(h) = self.stats() else {
            return Value::Null;
        };
        let snap = h.snapshot();
        let Some(n) = snap.nodes.first() else {
            return Value::Null;
        };
        let r = &n.rebuild;
        json!({
            "incarnation": n.nic_incarnation,
            "availability": if n.nic_serving { "serving" } else { "rebuilding" },
            "mode": n.nic_mode.as_str(),
            "restarts": r.restarts,
            "rebuilds_done": r.rebuilds_done,
            "outcomes_unknown": r.outcomes_unknown,
            "locks_reinstalled": r.locks_reinstalled,
            "decided_commit": r.decided_commit,
            "decided_abort": r.decided_abort,
            "left_to_recovery": r.left_to_recovery,
            "unreported_left_to_recovery": r.unreported_left_to_recovery,
        })
    }

    /// The application gateway's counters (`[clients]`; `null` before a
    /// load or without the section).
    pub(super) fn applications(&self) -> Value {
        let counts = self
            .stats()
            .and_then(|h| h.applications().into_iter().next());
        counts.map_or(Value::Null, |(_, c)| c.to_json())
    }

    /// The session layer's view: failed peers and counters (`null` before a load).
    pub(super) fn sessions(&self) -> Value {
        let Some(h) = self.stats() else {
            return Value::Null;
        };
        let snap = h.snapshot();
        let Some(n) = snap.nodes.first() else {
            return Value::Null;
        };
        let s = &n.nic.net.sessions;
        json!({
            "failed_peers": n.failed_peers,
            "sessions_failed": s.sessions_failed,
            "packets_sent": s.packets_sent,
            "packets_received": s.packets_received,
            "retransmissions": s.retransmissions,
            "duplicates_dropped": s.duplicates_dropped,
            "out_of_order_dropped": s.out_of_order_dropped,
            "drops": {
                "malformed": s.drops.malformed,
                "bad_version": s.drops.bad_version,
                "other_cluster": s.drops.other_cluster,
                "stranger": s.drops.stranger,
                "misaddressed": s.drops.misaddressed,
                "old_epoch": s.drops.old_epoch,
                "wrong_incarnation": s.drops.wrong_incarnation,
                "stale_incarnation": s.drops.stale_incarnation,
                "bad_ack": s.drops.bad_ack,
                "failed_peer": s.drops.failed_peer,
                "stale_address": n.nic.peer_addresses.stale_address_drops,
            },
            "peers_repointed": n.nic.peer_addresses.repointed,
        })
    }
}
