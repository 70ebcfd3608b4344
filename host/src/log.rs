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
//! [`HostTable::batch`] [`LOG_RECORDS_PER_BATCH_MAX`] at a time, which
//! prefetches every record's home slots (Robinhood) or bin (DLHT) before
//! applying any, in log order. The worker does not branch on the table kind.
//!
//! The NIC runtime acknowledged every record to its coordinator when it was
//! appended, so a record the worker cannot apply cannot be refused any more.
//! Room for new keys is reserved before the commit point, at the primary's
//! EXECUTE, against a per-shard quota that fits every replica's table
//! (`splitkv_nic::protocol::server::Room`), so a full table is not expected
//! here; what remains (a table physically full below its guaranteed capacity
//! because keys collide, a quota set larger than the table, a record that does
//! not decode, a corrupt log ring) makes the worker **stop** with a
//! [`WorkerError`] saying why, and it never acknowledges the entry that holds
//! it (issue 9 §4: never acknowledged while unapplied, never a panic). The
//! node's driver reads [`HostWorker::error`] and stops the node with that
//! message.

use crate::table::dlht::DlhtError;
use crate::table::robinhood::RobinhoodError;
use crate::table::{HostTable, HostTableError, Request, Upserted};
use splitkv_layout::host_nic::{HostToNic, LogApplied};
use splitkv_layout::log_record::{LogRecord, LogRecords, LOG_ENTRY_BYTES_MAX};
use splitkv_layout::ring::{RingConsumer, RingError, RingProducer};
use splitkv_layout::DecodeError;
use splitkv_layout::Key;
use splitkv_nic::{Component, Nanos};

/// Most log entries applied per iteration before acknowledging.
pub const LOG_ENTRIES_PER_ITERATION_MAX: usize = 64;

/// Most log records applied by one table batch: the prefetch window, and the
/// length of the request array the worker keeps on its stack. Dandelion
/// Figure 7 shows the gain of prefetching levelling off past about 24 requests.
pub const LOG_RECORDS_PER_BATCH_MAX: usize = 32;

/// Log bytes after which an iteration stops draining entries (it applies and
/// acknowledges what it has): with entries of 16 values of 4 KiB
/// ([`LOG_ENTRY_BYTES_MAX`], 66 KiB) an iteration takes four, with small
/// ones [`LOG_ENTRIES_PER_ITERATION_MAX`]. Bounds the work of one iteration
/// and the worker's buffer (this plus one entry).
pub const LOG_BYTES_PER_ITERATION_MAX: usize = 256 * 1024;

/// Bytes reserved at start-up for the entries of one iteration: room for
/// [`LOG_ENTRIES_PER_ITERATION_MAX`] entries of 1 KiB (a transaction's writes for
/// one shard). Larger entries grow the buffer, at most to
/// [`LOG_BYTES_PER_ITERATION_MAX`] + [`LOG_ENTRY_BYTES_MAX`]; it is never shrunk.
const ITERATION_BYTES_RESERVED: usize = LOG_ENTRIES_PER_ITERATION_MAX * 1024;

/// Bytes reserved at start-up for the entry being popped: one full-size entry.
const ENTRY_BYTES_RESERVED: usize = LOG_ENTRY_BYTES_MAX;

/// Counters of one host worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Log entries (one per LOG or COMMIT message) consumed.
    pub entries: u64,
    /// Records applied to the table.
    pub applied: u64,
    /// Records skipped because the table already held that version or newer.
    pub stale: u64,
    /// Entries that did not decode (the NIC runtime wrote them, so this
    /// indicates memory corruption); the worker stops at the first.
    pub bad_entries: u64,
    /// Acknowledgements sent.
    pub acks: u64,
}

/// Why a host worker stopped: a record it cannot apply. The NIC runtime
/// already acknowledged the record to its coordinator, so the node must stop
/// (the message says what to change) rather than lose or skip it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkerError {
    /// The host table (Robinhood: its slots and overflow pool, or its value
    /// heap; DLHT: at its bin bound) has no room for a committed key despite
    /// the shard's quota: keys that collide in one part of the table, or a
    /// quota larger than the table (module docs).
    #[error(
        "host table full at key {key:?} despite the shard's quota (colliding keys, or a quota \
         larger than the table): give the nodes larger tables"
    )]
    TableFull {
        /// The key that did not fit.
        key: Key,
    },
    /// A record does not fit the table for another reason (a value over the
    /// table's limit).
    #[error("log record for key {key:?} does not fit the host table: {why}")]
    DoesNotFit {
        /// The key of the record.
        key: Key,
        /// The table's error.
        why: String,
    },
    /// A log entry did not decode (memory corruption: the NIC runtime wrote it).
    #[error("host log entry at byte {at} does not decode: {error}")]
    BadEntry {
        /// Log position (consumed bytes) before the entry.
        at: u64,
        /// The decoder's error.
        error: DecodeError,
    },
    /// The log or acknowledgement ring refused an operation.
    #[error("host {ring} ring: {why}")]
    Ring {
        /// Which ring ("log" or "ack").
        ring: &'static str,
        /// The ring's error.
        why: String,
    },
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
    /// Log position (consumed bytes) after each entry drained this iteration.
    entry_log_ends: Vec<u64>,
    ack_buf: Vec<u8>,
    acked: u64,
    stats: WorkerStats,
    error: Option<WorkerError>,
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
            entry: Vec::with_capacity(ENTRY_BYTES_RESERVED),
            entries: Vec::with_capacity(ITERATION_BYTES_RESERVED),
            entry_ends: Vec::with_capacity(LOG_ENTRIES_PER_ITERATION_MAX),
            entry_log_ends: Vec::with_capacity(LOG_ENTRIES_PER_ITERATION_MAX),
            ack_buf: Vec::with_capacity(32),
            acked: 0,
            stats: WorkerStats::default(),
            error: None,
        }
    }

    /// Why the worker stopped, if it did (see the module docs). A stopped
    /// worker applies and acknowledges nothing more.
    pub fn error(&self) -> Option<&WorkerError> {
        self.error.as_ref()
    }

    /// Log bytes acknowledged to the NIC runtime (all applied).
    pub fn acked_bytes(&self) -> u64 {
        self.acked
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

    /// Applies up to [`LOG_ENTRIES_PER_ITERATION_MAX`] log entries (fewer once
    /// they reach [`LOG_BYTES_PER_ITERATION_MAX`] bytes), then acknowledges.
    /// The entries' records go through table batches of up to
    /// [`LOG_RECORDS_PER_BATCH_MAX`] (see the module docs); each record is applied
    /// only if it is newer than the table's version of its key, in log order.
    /// A record that cannot be applied stops the worker ([`HostWorker::error`]);
    /// the acknowledgement then covers only the entries before its entry.
    /// Returns whether it did any work (never, once stopped).
    pub fn run_iteration(&mut self, _now: Nanos) -> bool {
        if self.error.is_some() {
            return false;
        }
        let before = self.log.consumed_bytes();
        let work = self.drain();
        let failed = apply_entries(
            &mut self.table,
            &mut self.stats,
            &self.entries,
            &self.entry_ends,
        );
        let applied = match failed {
            Ok(()) => self.log.consumed_bytes(),
            Err((entry, e)) => {
                let at = entry
                    .checked_sub(1)
                    .map_or(before, |i| self.entry_log_ends[i]);
                let e = match e {
                    WorkerError::BadEntry { error, .. } => WorkerError::BadEntry { at, error },
                    other => other,
                };
                self.error = Some(e);
                at
            }
        };
        self.acknowledge(applied) || work
    }

    /// Pops up to [`LOG_ENTRIES_PER_ITERATION_MAX`] entries into `entries`,
    /// stopping early once they hold [`LOG_BYTES_PER_ITERATION_MAX`] bytes.
    fn drain(&mut self) -> bool {
        self.entries.clear();
        self.entry_ends.clear();
        self.entry_log_ends.clear();
        for _ in 0..LOG_ENTRIES_PER_ITERATION_MAX {
            match self.log.try_pop(&mut self.entry) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    // Entries popped before stay to be applied and acknowledged.
                    self.error = Some(WorkerError::Ring {
                        ring: "log",
                        why: e.to_string(),
                    });
                    break;
                }
            }
            self.stats.entries += 1;
            self.entries.extend_from_slice(&self.entry);
            self.entry_ends.push(self.entries.len());
            self.entry_log_ends.push(self.log.consumed_bytes());
            if self.entries.len() >= LOG_BYTES_PER_ITERATION_MAX {
                break;
            }
        }
        !self.entry_ends.is_empty()
    }

    /// Acknowledges the log up to `applied` bytes if that is news.
    fn acknowledge(&mut self, applied: u64) -> bool {
        if applied == self.acked {
            return false;
        }
        self.ack_buf.clear();
        HostToNic::LogApplied(LogApplied {
            applied_bytes: applied,
        })
        .encode(&mut self.ack_buf);
        match self.acks.try_push(&self.ack_buf) {
            Ok(_) => {
                self.acked = applied;
                self.stats.acks += 1;
                true
            }
            Err(RingError::Full) => false,
            Err(e) => {
                self.error.get_or_insert(WorkerError::Ring {
                    ring: "ack",
                    why: e.to_string(),
                });
                false
            }
        }
    }
}

/// Where applying stopped: the index of the entry (among this iteration's)
/// holding the record that could not be applied, and why.
type ApplyFailure = (usize, WorkerError);

/// Calls `f` for every record of the concatenated entries `entries` (entry `i`
/// ends at `entry_ends[i]`), in log order, with its entry's index. Stops at
/// the first record that does not decode or that `f` cannot apply.
fn for_each_record<'a>(
    stats: &mut WorkerStats,
    entries: &'a [u8],
    entry_ends: &[usize],
    mut f: impl FnMut(&mut WorkerStats, usize, LogRecord<'a>) -> Result<(), ApplyFailure>,
) -> Result<(), ApplyFailure> {
    let mut start = 0;
    for (i, &end) in entry_ends.iter().enumerate() {
        for rec in LogRecords::new(&entries[start..end]) {
            match rec {
                Ok(rec) => f(stats, i, rec)?,
                Err(error) => {
                    stats.bad_entries += 1;
                    // `at` is filled in by the caller, which knows log positions.
                    return Err((i, WorkerError::BadEntry { at: 0, error }));
                }
            }
        }
        start = end;
    }
    Ok(())
}

/// Applies the records of `entries` to the table in table batches of up to
/// [`LOG_RECORDS_PER_BATCH_MAX`] (see [`for_each_record`]): the same code for
/// either table kind, through [`HostTable::batch`].
fn apply_entries(
    table: &mut HostTable,
    stats: &mut WorkerStats,
    entries: &[u8],
    entry_ends: &[usize],
) -> Result<(), ApplyFailure> {
    let mut reqs: [Request<'_, HostTableError>; LOG_RECORDS_PER_BATCH_MAX] =
        [const { Request::remove(Key::new(0, 0)) }; LOG_RECORDS_PER_BATCH_MAX];
    let mut req_entries = [0usize; LOG_RECORDS_PER_BATCH_MAX];
    let mut n = 0;
    let decoded = for_each_record(stats, entries, entry_ends, |stats, entry, rec| {
        reqs[n] = Request::upsert_if_newer(rec.key, rec.meta, rec.value);
        req_entries[n] = entry;
        n += 1;
        if n == LOG_RECORDS_PER_BATCH_MAX {
            apply_batch(table, stats, &mut reqs[..n], &req_entries[..n])?;
            n = 0;
        }
        Ok(())
    });
    // Records decoded before a bad one are applied first.
    apply_batch(table, stats, &mut reqs[..n], &req_entries[..n])?;
    decoded
}

/// Runs one table batch of `upsert_if_newer` requests (request `i` from entry
/// `req_entries[i]`) and counts the outcomes; the first request the table
/// refused names where applying stopped.
fn apply_batch(
    table: &mut HostTable,
    stats: &mut WorkerStats,
    reqs: &mut [Request<'_, HostTableError>],
    req_entries: &[usize],
) -> Result<(), ApplyFailure> {
    if reqs.is_empty() {
        return Ok(());
    }
    table.batch(reqs);
    let mut failed = None;
    for (req, &entry) in reqs.iter().zip(req_entries) {
        let Request::Upsert { key, result, .. } = req else {
            unreachable!("the worker only batches upserts");
        };
        match result {
            Some(Ok(Upserted::Stale(_))) => stats.stale += 1,
            Some(Ok(_)) => stats.applied += 1,
            Some(Err(e)) => {
                failed.get_or_insert((entry, refused(*key, e)));
            }
            None => unreachable!("a batch executes every request"),
        }
    }
    failed.map_or(Ok(()), Err)
}

/// The [`WorkerError`] for a record of `key` the table refused with `e`.
fn refused(key: Key, e: &HostTableError) -> WorkerError {
    match e {
        HostTableError::Robinhood(RobinhoodError::Full | RobinhoodError::ValueHeapFull { .. })
        | HostTableError::Dlht(DlhtError::Full { .. }) => WorkerError::TableFull { key },
        e => WorkerError::DoesNotFit {
            key,
            why: e.to_string(),
        },
    }
}

impl Component for HostWorker {
    fn run_iteration(&mut self, now: Nanos) -> bool {
        HostWorker::run_iteration(self, now)
    }

    fn fault(&self) -> Option<String> {
        self.error().map(|e| format!("host worker stopped: {e}"))
    }
}
