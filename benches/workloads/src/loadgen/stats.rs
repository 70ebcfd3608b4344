//! A load generator's outcome counters ([`LoadStats`]).

use crate::tx::PROCEDURES_MAX;

/// Outcome counters of one load generator (or summed over several).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadStats {
    /// Transactions drawn from the generator.
    pub drawn: u64,
    /// Attempts submitted (first attempts plus retries).
    pub attempts: u64,
    /// Retries submitted.
    pub retries: u64,
    /// Transactions committed.
    pub committed: u64,
    /// Attempts aborted by a conflict (lock conflict or failed validation).
    pub conflicts: u64,
    /// Transactions still conflicting after `max_tries` attempts.
    pub gave_up: u64,
    /// Transactions the procedure aborted (e.g. Smallbank's insufficient funds).
    pub user_aborted: u64,
    /// Transactions ending any other way (rejected, table full, too large,
    /// unavailable).
    pub failed: u64,
    /// Transactions whose outcome is unknown ([`TxStatus::Unknown`]: they may
    /// have committed); never resubmitted.
    pub unknown: u64,
    /// Committed transactions by procedure id; the built-in `Txn`'s in the
    /// last slot ([`crate::api::procedure_slot`]).
    pub committed_by_procedure: [u64; PROCEDURES_MAX],
}

impl LoadStats {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &LoadStats) {
        self.drawn += o.drawn;
        self.attempts += o.attempts;
        self.retries += o.retries;
        self.committed += o.committed;
        self.conflicts += o.conflicts;
        self.gave_up += o.gave_up;
        self.user_aborted += o.user_aborted;
        self.failed += o.failed;
        self.unknown += o.unknown;
        for (a, b) in self
            .committed_by_procedure
            .iter_mut()
            .zip(o.committed_by_procedure)
        {
            *a += b;
        }
    }

    /// Transactions that reached their last outcome.
    pub fn finished(&self) -> u64 {
        self.committed + self.gave_up + self.user_aborted + self.failed
    }

    /// Completed transactions: committed plus user-aborted (pgbench's and
    /// Smallbank's count: a rollback the procedure chose is a completed
    /// transaction).
    pub fn completed(&self) -> u64 {
        self.committed + self.user_aborted
    }

    /// Share of attempts that ended in a conflict (0 with no attempts).
    pub fn conflict_rate(&self) -> f64 {
        ratio(self.conflicts, self.attempts)
    }

    /// Retries per committed transaction (0 with no commits).
    pub fn retries_per_commit(&self) -> f64 {
        ratio(self.retries, self.committed)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}
