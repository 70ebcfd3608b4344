//! The host log and the workers that apply it (Xenic §4.2 step 7; Rowan's
//! receiver-placed log, Rowan §4).
//!
//! The NIC runtime appends LOG (backup) and COMMIT (primary) records to one
//! sequential log per node in host memory, by DMA. A [`HostWorker`] drains
//! it in order, applies each record to the table if it is newer than what the
//! table holds (so duplicates and replays are harmless), and tells the NIC runtime
//! how far it got with a `LogApplied` acknowledgement, which lets the NIC unpin
//! the objects those records carried.
//!
//! Records are applied in table batches (Dandelion §6): a worker drains up to
//! [`LOG_ENTRIES_PER_ITERATION_MAX`] entries, then hands their records to
//! [`RobinhoodTable::batch`] [`LOG_RECORDS_PER_BATCH_MAX`] at a time, which
//! prefetches every record's home slot before applying any, in log order.

use crate::table::dlht::Dlht;
use crate::table::robinhood::{RobinhoodTable, TableError};
use crate::table::HostTable;
use crate::table::{Request, Upserted};
use splitkv_layout::host_nic::{HostToNic, LogApplied};
use splitkv_layout::log_record::{LogRecord, LogRecords};
use splitkv_layout::ring::{RingConsumer, RingError, RingProducer};
use splitkv_layout::Key;
use splitkv_nic::{Component, Nanos};

/// Most log entries applied per iteration before acknowledging.
pub const LOG_ENTRIES_PER_ITERATION_MAX: usize = 64;

/// Most log records applied by one table batch: the prefetch window, and the
/// length of the request array the worker keeps on its stack. Dandelion
/// Figure 7 shows the gain of prefetching levelling off past about 24 requests.
pub const LOG_RECORDS_PER_BATCH_MAX: usize = 32;

/// Bytes reserved at start-up for the entries of one iteration: room for
/// [`LOG_ENTRIES_PER_ITERATION_MAX`] entries of 1 KiB (a transaction's writes for
/// one shard). Larger entries grow the buffer once; it is never shrunk.
const ITERATION_BYTES_RESERVED: usize = LOG_ENTRIES_PER_ITERATION_MAX * 1024;

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
    table: HostTable,
    log: RingConsumer,
    acks: RingProducer,
    entry: Vec<u8>,
    /// The entries drained this iteration, concatenated.
    entries: Vec<u8>,
    /// End offset in `entries` of each entry drained this iteration.
    entry_ends: Vec<usize>,
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
    pub fn new(table: HostTable, log: RingConsumer, acks: RingProducer) -> HostWorker {
        HostWorker {
            table,
            log,
            acks,
            entry: Vec::with_capacity(4096),
            entries: Vec::with_capacity(ITERATION_BYTES_RESERVED),
            entry_ends: Vec::with_capacity(LOG_ENTRIES_PER_ITERATION_MAX),
            ack_buf: Vec::with_capacity(32),
            acked: 0,
            stats: WorkerStats::default(),
        }
    }

    /// The table (for loading before a run and for checks after).
    pub fn table(&self) -> &HostTable {
        &self.table
    }

    /// The table, mutably (only while the NIC runtime is not running).
    pub fn table_mut(&mut self) -> &mut HostTable {
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
    /// The entries' records go through table batches of up to
    /// [`LOG_RECORDS_PER_BATCH_MAX`] (see the module docs); each record is applied
    /// only if it is newer than the table's version of its key, in log order.
    ///
    /// # Panics
    /// If the table (or the Robinhood value heap) is full: the table is sized
    /// for the key space at start-up, so a full table is a configuration error
    /// that must stop the node.
    pub fn run_iteration(&mut self, _now: Nanos) -> bool {
        let mut work = false;
        self.entries.clear();
        self.entry_ends.clear();
        for _ in 0..LOG_ENTRIES_PER_ITERATION_MAX {
            match self.log.try_pop(&mut self.entry) {
                Ok(true) => {}
                Ok(false) => break,
                Err(RingError::Corrupt(why)) => panic!("host log corrupt: {why}"),
                Err(e) => panic!("host log: {e}"),
            }
            work = true;
            self.stats.entries += 1;
            self.entries.extend_from_slice(&self.entry);
            self.entry_ends.push(self.entries.len());
        }
        match &mut self.table {
            HostTable::Robinhood(t) => {
                apply_entries(t, &mut self.stats, &self.entries, &self.entry_ends)
            }
            HostTable::Dlht(t) => {
                apply_entries_dlht(t, &mut self.stats, &self.entries, &self.entry_ends)
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

/// Calls `f` for every record of the concatenated entries `entries` (entry `i`
/// ends at `entry_ends[i]`), in log order. A record that does not decode ends
/// its entry (counted in `bad_entries`); the records before it are applied.
fn for_each_record<'a>(
    stats: &mut WorkerStats,
    entries: &'a [u8],
    entry_ends: &[usize],
    mut f: impl FnMut(&mut WorkerStats, LogRecord<'a>),
) {
    let mut start = 0;
    for &end in entry_ends {
        for rec in LogRecords::new(&entries[start..end]) {
            let Ok(rec) = rec else {
                stats.bad_entries += 1;
                break;
            };
            f(stats, rec);
        }
        start = end;
    }
}

/// Applies the records of `entries` to a Robinhood table in table batches of up
/// to [`LOG_RECORDS_PER_BATCH_MAX`] (see [`for_each_record`]).
fn apply_entries(
    table: &mut RobinhoodTable,
    stats: &mut WorkerStats,
    entries: &[u8],
    entry_ends: &[usize],
) {
    let mut reqs: [Request<'_>; LOG_RECORDS_PER_BATCH_MAX] =
        [const { Request::remove(Key::new(0, 0)) }; LOG_RECORDS_PER_BATCH_MAX];
    let mut n = 0;
    for_each_record(stats, entries, entry_ends, |stats, rec| {
        reqs[n] = Request::upsert_if_newer(rec.key, rec.meta, rec.value);
        n += 1;
        if n == LOG_RECORDS_PER_BATCH_MAX {
            apply_batch(table, stats, &mut reqs[..n]);
            n = 0;
        }
    });
    apply_batch(table, stats, &mut reqs[..n]);
}

/// Runs one table batch of `upsert_if_newer` requests and counts the outcomes.
fn apply_batch(table: &mut RobinhoodTable, stats: &mut WorkerStats, reqs: &mut [Request<'_>]) {
    if reqs.is_empty() {
        return;
    }
    table.batch(reqs);
    for req in reqs.iter() {
        let Request::Upsert { result, .. } = req else {
            unreachable!("the worker only batches upserts");
        };
        match result {
            Some(Ok(Upserted::Stale(_))) => stats.stale += 1,
            Some(Ok(_)) => stats.applied += 1,
            Some(Err(TableError::Full)) => {
                panic!("host table full: size it for the key space (--accounts-per-node)")
            }
            Some(Err(e @ TableError::ValueHeapFull { .. })) => {
                panic!("{e}: size TableConfig::value_blocks for the long values stored")
            }
            Some(Err(e)) => panic!("log record does not fit the table: {e}"),
            None => unreachable!("a batch executes every request"),
        }
    }
}

/// The DLHT's version of [`apply_entries`]: one [`Dlht::upsert_if_newer`] per
/// record (a single lookup that checks the version and writes atomically).
fn apply_entries_dlht(table: &Dlht, stats: &mut WorkerStats, entries: &[u8], entry_ends: &[usize]) {
    for_each_record(stats, entries, entry_ends, |stats, rec| {
        match table.upsert_if_newer(rec.key, rec.meta, rec.value) {
            Ok(Upserted::Stale(_)) => stats.stale += 1,
            Ok(_) => stats.applied += 1,
            Err(e) => panic!("log record does not fit the DLHT: {e}"),
        }
    });
}

impl Component for HostWorker {
    fn run_iteration(&mut self, now: Nanos) -> bool {
        HostWorker::run_iteration(self, now)
    }
}
