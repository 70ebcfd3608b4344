//! The host log and the workers that apply it (Xenic §4.2 step 7; Rowan's
//! receiver-placed log, Rowan §4).
//!
//! The NIC runtime appends LOG (backup) and COMMIT (primary) records to one
//! sequential log per node in host memory, by DMA. A [`HostWorker`] drains
//! it in order, applies each record to the table if it is newer than what the
//! table holds (so duplicates and replays are harmless), and tells the NIC runtime
//! how far it got with a `LogApplied` acknowledgement, which lets the NIC unpin
//! the objects those records carried.

use crate::table::robinhood::{RobinhoodTable, TableError};
use splitkv_layout::host_nic::{HostToNic, LogApplied};
use splitkv_layout::log_record::LogRecords;
use splitkv_layout::ring::{RingConsumer, RingError, RingProducer};
use splitkv_nic::{Component, Nanos};

/// Most log entries applied per iteration before acknowledging.
pub const LOG_ENTRIES_PER_ITERATION_MAX: usize = 64;

/// Counters of one host worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Log entries (one per LOG or COMMIT message) consumed.
    pub entries: u64,
    /// Records applied to the table.
    pub applied: u64,
    /// Records skipped because the table already held that version or newer.
    pub stale: u64,
    /// Entries that did not decode (dropped; the NIC runtime wrote them, so this
    /// indicates memory corruption).
    pub bad_entries: u64,
    /// Acknowledgements sent.
    pub acks: u64,
}

/// A host worker: owns the table (its only writer) and applies the host log.
pub struct HostWorker {
    table: RobinhoodTable,
    log: RingConsumer,
    acks: RingProducer,
    entry: Vec<u8>,
    value: Vec<u8>,
    ack_buf: Vec<u8>,
    acked: u64,
    stats: WorkerStats,
}

impl std::fmt::Debug for HostWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostWorker")
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl HostWorker {
    /// A worker applying `log` to `table` and acknowledging on `acks`.
    pub fn new(table: RobinhoodTable, log: RingConsumer, acks: RingProducer) -> HostWorker {
        HostWorker {
            table,
            log,
            acks,
            entry: Vec::with_capacity(4096),
            value: Vec::with_capacity(256),
            ack_buf: Vec::with_capacity(32),
            acked: 0,
            stats: WorkerStats::default(),
        }
    }

    /// The table (for loading before a run and for checks after).
    pub fn table(&self) -> &RobinhoodTable {
        &self.table
    }

    /// The table, mutably (only while the NIC runtime is not running).
    pub fn table_mut(&mut self) -> &mut RobinhoodTable {
        &mut self.table
    }

    /// Counters so far.
    pub fn stats(&self) -> WorkerStats {
        self.stats
    }

    /// Whether the log is drained and acknowledged.
    pub fn is_quiescent(&mut self) -> bool {
        self.log.is_empty() && self.acked == self.log.consumed_bytes()
    }

    /// Applies up to [`LOG_ENTRIES_PER_ITERATION_MAX`] log entries, then acknowledges.
    ///
    /// # Panics
    /// If the table is full: the table is sized for the key space at start-up,
    /// so a full table is a configuration error that must stop the node.
    pub fn run_iteration(&mut self, _now: Nanos) -> bool {
        let mut work = false;
        for _ in 0..LOG_ENTRIES_PER_ITERATION_MAX {
            match self.log.try_pop(&mut self.entry) {
                Ok(true) => {}
                Ok(false) => break,
                Err(RingError::Corrupt(why)) => panic!("host log corrupt: {why}"),
                Err(e) => panic!("host log: {e}"),
            }
            work = true;
            self.stats.entries += 1;
            for rec in LogRecords::new(&self.entry) {
                let rec = match rec {
                    Ok(r) => r,
                    Err(_) => {
                        self.stats.bad_entries += 1;
                        break;
                    }
                };
                let current = self.table.get(&rec.key, &mut self.value);
                if current.is_some_and(|m| m.version() >= rec.meta.version()) {
                    self.stats.stale += 1;
                    continue;
                }
                match self.table.upsert(rec.key, rec.meta, rec.value) {
                    Ok(_) => self.stats.applied += 1,
                    Err(TableError::Full) => {
                        panic!("host table full: size it for the key space (--accounts-per-node)")
                    }
                    Err(e) => panic!("log record does not fit the table: {e}"),
                }
            }
        }
        let consumed = self.log.consumed_bytes();
        if consumed != self.acked {
            self.ack_buf.clear();
            HostToNic::LogApplied(LogApplied {
                applied_bytes: consumed,
            })
            .encode(&mut self.ack_buf);
            match self.acks.try_push(&self.ack_buf) {
                Ok(_) => {
                    self.acked = consumed;
                    self.stats.acks += 1;
                    work = true;
                }
                Err(RingError::Full) => {}
                Err(e) => panic!("ack ring: {e}"),
            }
        }
        work
    }
}

impl Component for HostWorker {
    fn run_iteration(&mut self, now: Nanos) -> bool {
        HostWorker::run_iteration(self, now)
    }
}
