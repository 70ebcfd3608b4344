//! Counters of the coordinator role ([`CoordinatorStats`]).

use super::{DeadlineStats, COMMIT_ROUND_TRIPS_MAX};

/// Counters of the coordinator role.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoordinatorStats {
    /// Transactions started.
    pub started: u64,
    /// Committed.
    pub committed: u64,
    /// Aborted in Execute (lock conflict).
    pub execute_aborts: u64,
    /// Aborted in Validate.
    pub validate_aborts: u64,
    /// Aborted by the procedure.
    pub user_aborts: u64,
    /// Rejected (bad procedure, arguments or writes) or refused as too large.
    pub rejected: u64,
    /// Aborted because a replica refused LOG (its reason is the outcome's).
    pub log_refusals: u64,
    /// LOGs sent again to replicas whose NIC runtime restarted and lost
    /// them (answered `Unavailable`).
    pub log_resends: u64,
    /// Transactions aborted after their LOG was sent (a LOG refused or
    /// overdue, or a written shard without a live LOG holder): two rounds,
    /// the abort reported only once every LOG holder acknowledged it.
    pub aborts_after_log: u64,
    /// ABORT-after-LOG messages sent again at the phase deadline to
    /// replicas that had not acknowledged (a lost message or ack).
    pub abort_log_resends: u64,
    /// ABORT-after-LOG acknowledgements taken (one per replica and
    /// transaction; duplicates count as stale responses).
    pub abort_log_acks: u64,
    /// COMMITs a replica refused after the commit point (the outcome carries
    /// the refusal's reason; the refusing node stops).
    pub commit_refusals: u64,
    /// Aborts caused by a DMA or host-decode failure at a server.
    pub host_failures: u64,
    /// EXECUTE responses whose metadata broke a rule (planted LOCKED or
    /// DELETED bits): the transaction aborts as rejected.
    pub malformed_responses: u64,
    /// Responses for transactions no longer in that phase (dropped).
    pub stale_responses: u64,
    /// Phases ended by a deadline or a failed peer (the `deadline` module; [`DeadlineStats`]).
    pub deadlines: DeadlineStats,
    /// Transactions ended by a crash-recovery decision
    /// ([`Coordinator::finish_recovered`]).
    pub recovered: u64,
    /// Dnl Unlocks sent again to a node that refused one `Busy` (its Lock
    /// still in progress after a deadline's abort;
    /// `coordinator/dnl_steps.rs`).
    pub unlock_resends: u64,
    /// Dnl Lock requests sent (one per node a Locking step visits;
    /// `coordinator/dnl_steps.rs`).
    pub lock_requests: u64,
    /// Of those, sent for a read-only transaction: Dnl-RO never locks, so
    /// this stays 0.
    pub read_only_lock_requests: u64,
    /// Read-only Dnl transactions committed (Dnl-RO; among `committed`).
    pub read_only_committed: u64,
    /// Dnl commits by the commit-phase round trips they took before their
    /// report (index: round trips, at most [`COMMIT_ROUND_TRIPS_MAX`]):
    /// Dnl-1 reports after one (the Lock acks), Dnl-2 after two, Dnl-4
    /// after up to four, Dnl-RO after one (validation; none when it read
    /// nothing). Dandelion §4.2.3.
    pub commits_by_round_trips: [u64; COMMIT_ROUND_TRIPS_MAX + 1],
    /// Responses dropped because they arrived during a recovery epoch
    /// (the transactions in flight wait for recovery's decisions).
    pub frozen_responses: u64,
}
