//! The gateway's counters: [`GatewayStats`], shared between the gateway
//! thread (which counts) and its readers (`/status`, `/metrics`), and their
//! snapshot [`GatewayCounts`].

use crate::clients::{AttachCounts, AttachStats};
use splitkv_layout::app::Status;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Why the gateway closed an application connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CloseReason {
    /// The client closed its socket (it exited or was killed).
    PeerClosed,
    /// The client left its outcome ring full longer than
    /// `outcome_full_ms_max`.
    OutcomeRingStalled,
    /// A request entry did not decode (garbage, oversized, contradictory),
    /// the client's ring indices were impossible, or it wrote on its socket
    /// after the set-up.
    Malformed,
    /// The client had more requests in flight than it was granted.
    InFlightExceeded,
    /// The node stopped serving (drain or exit).
    Stopped,
}

impl CloseReason {
    /// Every reason, in the order of [`GatewayCounts::closed`].
    pub const ALL: [CloseReason; 5] = [
        CloseReason::PeerClosed,
        CloseReason::OutcomeRingStalled,
        CloseReason::Malformed,
        CloseReason::InFlightExceeded,
        CloseReason::Stopped,
    ];

    /// A short label, for `/status` keys and `/metrics` labels.
    pub fn label(self) -> &'static str {
        match self {
            CloseReason::PeerClosed => "peer_closed",
            CloseReason::OutcomeRingStalled => "outcome_ring_stalled",
            CloseReason::Malformed => "malformed",
            CloseReason::InFlightExceeded => "in_flight_exceeded",
            CloseReason::Stopped => "stopped",
        }
    }

    fn index(self) -> usize {
        CloseReason::ALL
            .iter()
            .position(|r| *r == self)
            .unwrap_or(0)
    }
}

/// A short label of an application status, for `/status` keys and
/// `/metrics` labels.
pub fn status_label(status: Status) -> &'static str {
    use splitkv_layout::app::{AbortReason as A, UnavailableReason as U};
    match status {
        Status::Committed => "committed",
        Status::Aborted(A::LockConflict) => "aborted_lock_conflict",
        Status::Aborted(A::ValidationFailed) => "aborted_validation_failed",
        Status::Aborted(A::UserAbort) => "aborted_user_abort",
        Status::Aborted(A::CompareFailed) => "aborted_compare_failed",
        Status::Aborted(A::TableFull) => "aborted_table_full",
        Status::Aborted(A::HostFailure) => "aborted_host_failure",
        Status::KeyNotFound => "key_not_found",
        Status::TooLarge => "too_large",
        Status::UnknownProcedure => "unknown_procedure",
        Status::Rejected => "rejected",
        Status::Unavailable(U::Recovering) => "unavailable_recovering",
        Status::Unavailable(U::NicRestarting) => "unavailable_nic_restarting",
        Status::Unavailable(U::Draining) => "unavailable_draining",
        Status::OutcomeUnknown => "outcome_unknown",
    }
}

fn status_index(status: Status) -> usize {
    Status::ALL.iter().position(|s| *s == status).unwrap_or(0)
}

/// Counters of one node's gateway (relaxed atomics: each is exact, a
/// snapshot is not one instant).
#[derive(Debug, Default)]
pub struct GatewayStats {
    attached: AtomicU64,
    open: AtomicU64,
    closed: [AtomicU64; CloseReason::ALL.len()],
    requests: AtomicU64,
    outcomes: [AtomicU64; Status::ALL.len()],
    outcomes_discarded: AtomicU64,
    /// The listener's set-up counters, once it runs.
    set_ups: OnceLock<Arc<AttachStats>>,
}

/// A snapshot of [`GatewayStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GatewayCounts {
    /// Connections the gateway took over from the listener.
    pub attached: u64,
    /// Connections open now.
    pub open: u64,
    /// Connections closed, indexed like [`CloseReason::ALL`].
    pub closed: [u64; CloseReason::ALL.len()],
    /// Requests taken from request rings (well-formed ones).
    pub requests: u64,
    /// Outcomes written to outcome rings, indexed like [`Status::ALL`].
    pub outcomes: [u64; Status::ALL.len()],
    /// Outcomes of requests whose connection had closed: the transaction
    /// finished at the NIC runtime, nobody was told.
    pub outcomes_discarded: u64,
    /// The listener's connection set-ups: accepted, refused and dropped by
    /// reason (all zero before the listener runs).
    pub set_ups: AttachCounts,
}

impl GatewayCounts {
    /// Connections closed for `reason`.
    pub fn closed(&self, reason: CloseReason) -> u64 {
        self.closed[reason.index()]
    }

    /// Outcomes written with `status`.
    pub fn outcomes(&self, status: Status) -> u64 {
        self.outcomes[status_index(status)]
    }

    /// The counts as `/status` shows them: `attached`, `open`, `closed`
    /// (by [`CloseReason::label`]), `requests`, `outcomes` (by
    /// [`status_label`]), `outcomes_discarded` and `set_ups`
    /// ([`AttachCounts::to_json`]).
    pub fn to_json(&self) -> serde_json::Value {
        let closed: serde_json::Map<String, serde_json::Value> = (CloseReason::ALL.iter())
            .map(|r| (r.label().to_string(), self.closed(*r).into()))
            .collect();
        let outcomes: serde_json::Map<String, serde_json::Value> = (Status::ALL.iter())
            .map(|s| (status_label(*s).to_string(), self.outcomes(*s).into()))
            .collect();
        serde_json::json!({
            "attached": self.attached,
            "open": self.open,
            "closed": closed,
            "requests": self.requests,
            "outcomes": outcomes,
            "outcomes_discarded": self.outcomes_discarded,
            "set_ups": self.set_ups.to_json(),
        })
    }
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl GatewayStats {
    pub(super) fn attached(&self) {
        bump(&self.attached);
        bump(&self.open);
    }

    pub(super) fn closed(&self, reason: CloseReason) {
        bump(&self.closed[reason.index()]);
        self.open.fetch_sub(1, Ordering::Relaxed);
    }

    pub(super) fn request(&self) {
        bump(&self.requests);
    }

    pub(super) fn outcome(&self, status: Status) {
        bump(&self.outcomes[status_index(status)]);
    }

    pub(super) fn discarded(&self) {
        bump(&self.outcomes_discarded);
    }

    /// The counters now.
    pub fn snapshot(&self) -> GatewayCounts {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        GatewayCounts {
            attached: load(&self.attached),
            open: load(&self.open),
            closed: std::array::from_fn(|i| load(&self.closed[i])),
            requests: load(&self.requests),
            outcomes: std::array::from_fn(|i| load(&self.outcomes[i])),
            outcomes_discarded: load(&self.outcomes_discarded),
            set_ups: self.set_ups.get().map(|a| a.snapshot()).unwrap_or_default(),
        }
    }

    /// Reads the set-up counters `set_ups` (the listener's) into every
    /// later snapshot; a second call changes nothing.
    pub(crate) fn watch_set_ups(&self, set_ups: Arc<AttachStats>) {
        let _ = self.set_ups.set(set_ups);
    }
}
