//! Applications in their own processes: the node's side of the connection
//! set-up (L5 §III-B; DESIGN.md "Process boundaries and placements").
//!
//! - [`listener`]: [`ClientListener`], a driver that owns its threads (one
//!   accepting, [`HANDSHAKE_THREADS`] running set-ups). It listens on
//!   `ClientSettings::socket_path(node)`, runs [`attach()`] on each
//!   accepted connection and hands every attached one to its owner through
//!   a bounded channel.
//! - [`mod@attach`]: [`attach()`], the set-up of one accepted socket as a plain
//!   function (no thread of its own): peer credentials, the Hello, the
//!   memory's descriptor, the ring headers, and the answer.
//!
//! The client is untrusted: every step is bounded in time
//! ([`AttachPolicy::handshake_timeout`]) and in size (the Hello's length is
//! checked before it is read), the memory is mapped only after its seals and
//! size are checked (`splitkv_client::SharedMemory::from_fd`), and the ring
//! headers the client wrote are checked against the Hello before any ring
//! end is used. Each refusal is answered with its [`RefusedReason`] and
//! counted ([`AttachCounts`]); a client that closes or stalls mid-handshake
//! gets no answer and is counted apart.
//! - [`gateway`]: [`Gateway`], the state machine that turns the attached
//!   connections' requests into transactions on NIC client ports reserved
//!   for it and writes their outcomes back, and [`ClientService`], the
//!   driver that owns the listener and the gateway's thread.

pub mod attach;
pub mod gateway;
pub mod listener;

pub use attach::{attach, AttachFailure, AttachPolicy, AttachedConnection, ProcedureResolver};
pub use gateway::{
    ClientService, CloseReason, Gateway, GatewayConfig, GatewayCounts, GatewayError, GatewayStats,
    ServiceError,
};
pub use listener::{ClientListener, ListenerError, HANDSHAKE_THREADS};

use splitkv_layout::app::RefusedReason;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Why a client got no answer at all (it is not refused: it left first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The client closed its socket mid-handshake.
    PeerClosed,
    /// The handshake took longer than [`AttachPolicy::handshake_timeout`].
    TimedOut,
    /// A socket call failed.
    Io,
}

impl DropReason {
    /// Every reason, in the order of [`AttachCounts::dropped`].
    pub const ALL: [DropReason; 3] = [DropReason::PeerClosed, DropReason::TimedOut, DropReason::Io];

    /// A short label, for `/status` keys and `/metrics` labels.
    pub fn label(self) -> &'static str {
        match self {
            DropReason::PeerClosed => "peer_closed",
            DropReason::TimedOut => "timed_out",
            DropReason::Io => "io",
        }
    }
}

/// A short label of a refusal, for `/status` keys and `/metrics` labels.
pub fn refused_label(reason: RefusedReason) -> &'static str {
    match reason {
        RefusedReason::VersionMismatch => "version_mismatch",
        RefusedReason::UserNotAllowed => "user_not_allowed",
        RefusedReason::ConnectionsFull => "connections_full",
        RefusedReason::BadMemory => "bad_memory",
        RefusedReason::BadHello => "bad_hello",
        RefusedReason::Unavailable => "unavailable",
    }
}

/// Counters of one node's connection set-ups, shared between the listener
/// thread and its readers.
#[derive(Debug, Default)]
pub struct AttachStats {
    accepted: AtomicU64,
    refused: [AtomicU64; RefusedReason::ALL.len()],
    dropped: [AtomicU64; DropReason::ALL.len()],
}

/// A snapshot of [`AttachStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AttachCounts {
    /// Connections attached (answered with a Welcome).
    pub accepted: u64,
    /// Refusals, indexed like [`RefusedReason::ALL`].
    pub refused: [u64; RefusedReason::ALL.len()],
    /// Clients that left without an answer, indexed like [`DropReason::ALL`].
    pub dropped: [u64; DropReason::ALL.len()],
}

impl AttachCounts {
    /// Refusals for `reason`.
    pub fn refused(&self, reason: RefusedReason) -> u64 {
        self.refused[reason_index(reason)]
    }

    /// The counts as `/status` shows them: `accepted`, `refused` (by
    /// [`refused_label`]) and `dropped` (by [`DropReason::label`]).
    pub fn to_json(&self) -> serde_json::Value {
        let refused: serde_json::Map<String, serde_json::Value> = (RefusedReason::ALL.iter())
            .map(|r| (refused_label(*r).to_string(), self.refused(*r).into()))
            .collect();
        let dropped: serde_json::Map<String, serde_json::Value> = (DropReason::ALL.iter())
            .map(|r| (r.label().to_string(), self.dropped(*r).into()))
            .collect();
        serde_json::json!({ "accepted": self.accepted, "refused": refused, "dropped": dropped })
    }

    /// Clients that left without an answer for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped[DropReason::ALL
            .iter()
            .position(|r| *r == reason)
            .unwrap_or(0)]
    }
}

fn reason_index(reason: RefusedReason) -> usize {
    RefusedReason::ALL
        .iter()
        .position(|r| *r == reason)
        .unwrap_or(0)
}

impl AttachStats {
    /// Counts one set-up's result.
    pub fn count<T>(&self, result: &Result<T, AttachFailure>) {
        let counter = match result {
            Ok(_) => &self.accepted,
            Err(AttachFailure::Refused { reason, .. }) => &self.refused[reason_index(*reason)],
            Err(AttachFailure::Dropped { reason, .. }) => {
                let i = DropReason::ALL
                    .iter()
                    .position(|r| r == reason)
                    .unwrap_or(0);
                &self.dropped[i]
            }
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> AttachCounts {
        AttachCounts {
            accepted: self.accepted.load(Ordering::Relaxed),
            refused: std::array::from_fn(|i| self.refused[i].load(Ordering::Relaxed)),
            dropped: std::array::from_fn(|i| self.dropped[i].load(Ordering::Relaxed)),
        }
    }
}

/// The node's count of open application connections, bounded by
/// `connections_max`. Every [`AttachedConnection`] holds one [`Slot`]; the
/// count falls when it is dropped.
#[derive(Debug, Clone)]
pub struct ConnectionSlots {
    open: Arc<AtomicUsize>,
    max: usize,
}

/// One reserved place among a node's connections; released when dropped.
#[derive(Debug)]
pub struct Slot {
    open: Arc<AtomicUsize>,
}

impl ConnectionSlots {
    /// Room for `max` connections at once.
    pub fn new(max: usize) -> ConnectionSlots {
        ConnectionSlots {
            open: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// Reserves a place; `None` if `max` are open.
    pub fn try_reserve(&self) -> Option<Slot> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot {
                open: self.open.clone(),
            })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_stop_at_their_bound_and_come_back_when_dropped() {
        let slots = ConnectionSlots::new(2);
        let a = slots.try_reserve().expect("first");
        let b = slots.try_reserve().expect("second");
        assert!(slots.try_reserve().is_none());
        assert_eq!(slots.open(), 2);
        drop(a);
        let c = slots.try_reserve().expect("freed");
        drop((b, c));
        assert_eq!(slots.open(), 0);
    }

    #[test]
    fn stats_count_each_reason_apart() {
        let stats = AttachStats::default();
        for reason in RefusedReason::ALL {
            let r: Result<(), _> = Err(AttachFailure::Refused {
                reason,
                detail: String::new(),
            });
            stats.count(&r);
        }
        stats.count(&Ok::<(), AttachFailure>(()));
        stats.count(&Err::<(), _>(AttachFailure::Dropped {
            reason: DropReason::TimedOut,
            detail: String::new(),
        }));
        let c = stats.snapshot();
        assert_eq!(c.accepted, 1);
        for reason in RefusedReason::ALL {
            assert_eq!(c.refused(reason), 1, "{reason:?}");
        }
        assert_eq!(c.dropped(DropReason::TimedOut), 1);
        assert_eq!(c.dropped(DropReason::PeerClosed), 0);
    }
}
