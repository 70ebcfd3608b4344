//! The host log and the workers that apply it (Xenic §4.2 step 7; Rowan's
//! receiver-placed log, Rowan §4).
//!
//! The NIC runtime appends records to one sequential log per node in host
//! memory, by DMA (the commit point at every replica's LOG acknowledgement): a
//! LOG record per write on every replica of the key (primary and backups), then
//! one decision record per transaction, COMMIT or ABORT. A [`HostWorker`]
//! drains the log in order and **applies at the decision**: a LOG record is
//! held pending (copied into a per-transaction buffer, at most
//! [`PENDING_TXS_MAX`] transactions) until its transaction's COMMIT record,
//! when its records are applied to the table if newer than what the table holds
//! (so duplicates and replays are harmless); an ABORT record drops them.
//! Pending records without a decision are what crash recovery reads
//! ([`HostWorker::pending_tx_ids`]). The worker tells the NIC runtime how far
//! it got with a `LogApplied` acknowledgement ("every decision before this log
//! position is applied"), which lets the NIC unpin the objects a primary
//! installed at COMMIT (pinned at the end of its COMMIT record). Under the
//! mutation switch `log_backups_only` LOG records are applied at once and
//! decisions ignored (the protocol before the commit point moved to every
//! replica's LOG acknowledgement).
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
//! it (a rule the fuzz targets check: never acknowledged while unapplied,
//! never a panic). The node's driver reads [`HostWorker::error`] and stops the
//! node with that message.

use crate::table::dlht::DlhtError;
use crate::table::robinhood::RobinhoodError;
use crate::table::{HostTable, HostTableError, Request, Upserted};
use splitkv_layout::host_nic::{HostToNic, LogApplied};
use splitkv_layout::log_record::{LogKind, LogRecord, LogRecords, LOG_ENTRY_BYTES_MAX};
use splitkv_layout::ring::{RingConsumer, RingError, RingProducer};
use splitkv_layout::DecodeError;
use splitkv_layout::{Key, TxId};
use splitkv_nic::placement::NODES_MAX;
use splitkv_nic::protocol::coordinator::TX_INFLIGHT_MAX;
use splitkv_nic::{Component, Nanos};
use std::collections::HashMap;

/// Most transactions with pending (undecided) LOG records one worker holds:
/// one per coordinator slot in the cluster, the most that can be undecided at
/// once. Past it the worker stops ([`WorkerError::TooManyPending`]).
pub const PENDING_TXS_MAX: usize = NODES_MAX * TX_INFLIGHT_MAX;

/// Pending transactions the worker has room for from the start (the map
/// grows, up to [`PENDING_TXS_MAX`], only under many undecided ones).
const PENDING_TXS_RESERVED: usize = 4096;

/// Most emptied pending-record buffers kept for reuse, so a LOG record does
/// not allocate once the worker is warm.
const SPARE_BUFFERS_MAX: usize = 4096;

/// Mutation switch (the commit point before every replica's LOG
/// acknowledgement): apply LOG records at once, ignore decisions.
const APPLY_AT_ONCE: bool = cfg!(splitkv_mutation = "log_backups_only");

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
    /// COMMIT decision records that released pending records.
    pub commits: u64,
    /// ABORT decision records that dropped pending records.
    pub aborts: u64,
    /// Records skipped because the table already held that very version (a
    /// duplicate or replay).
    pub stale: u64,
    /// Records skipped because the table held a newer version: the COMMIT
    /// decisions of different coordinators reach a replica in either order
    /// (replicas apply at the decision), so this is no fault.
    pub superseded: u64,
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
    /// More than [`PENDING_TXS_MAX`] transactions have undecided LOG records
    /// (decisions lost: crash recovery's business).
    #[error("more than {PENDING_TXS_MAX} transactions with undecided log records")]
    TooManyPending,
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
    /// Pending LOG records (re-encoded, concatenated) per undecided transaction.
    pending: HashMap<TxId, Vec<u8>>,
    /// This iteration's committed transactions' records, in decision order,
    /// with the index of the entry holding each decision.
    ready: Vec<(usize, Vec<u8>)>,
    /// Emptied buffers for reuse (at most [`SPARE_BUFFERS_MAX`]).
    spare: Vec<Vec<u8>>,
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
            pending: HashMap::with_capacity(PENDING_TXS_RESERVED),
            ready: Vec::with_capacity(LOG_ENTRIES_PER_ITERATION_MAX),
            spare: Vec::new(),
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

    /// Ids of the transactions whose LOG records wait for a decision.
    pub fn pending_tx_ids(&self) -> impl Iterator<Item = TxId> + '_ {
        self.pending.keys().copied()
    }

    /// The pending LOG records of `tx_id`, if any (for recovery and checks).
    pub fn pending_records(&self, tx_id: TxId) -> Option<LogRecords<'_>> {
        self.pending.get(&tx_id).map(|b| LogRecords::new(b))
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
        let sorted = self.sort_records();
        let failed = apply_ready(&mut self.table, &mut self.stats, &self.ready).and(sorted);
        for (_, mut b) in self.ready.drain(..) {
            if self.spare.len() < SPARE_BUFFERS_MAX {
                b.clear();
                self.spare.push(b);
            }
        }
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

impl HostWorker {
    /// Walks the records of this iteration's entries in log order: a LOG
    /// record joins its transaction's pending buffer, a COMMIT record moves
    /// that buffer to `ready`, an ABORT record drops it (module docs). Stops
    /// at the first record that does not decode, or at a pending transaction
    /// past [`PENDING_TXS_MAX`], naming its entry.
    fn sort_records(&mut self) -> Result<(), ApplyFailure> {
        let mut start = 0;
        for (i, &end) in self.entry_ends.iter().enumerate() {
            for rec in LogRecords::new(&self.entries[start..end]) {
                let rec = rec.map_err(|error| {
                    self.stats.bad_entries += 1;
                    // `at` is filled in by the caller, which knows log positions.
                    (i, WorkerError::BadEntry { at: 0, error })
                })?;
                match rec.kind {
                    LogKind::Log if APPLY_AT_ONCE => {
                        let mut b = self.spare.pop().unwrap_or_default();
                        rec.encode(&mut b);
                        self.ready.push((i, b));
                    }
                    LogKind::Log => {
                        let n = self.pending.len();
                        let spare = &mut self.spare;
                        let b = match self.pending.entry(rec.tx_id) {
                            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                            std::collections::hash_map::Entry::Vacant(_)
                                if n >= PENDING_TXS_MAX =>
                            {
                                return Err((i, WorkerError::TooManyPending));
                            }
                            std::collections::hash_map::Entry::Vacant(e) => {
                                e.insert(spare.pop().unwrap_or_default())
                            }
                        };
                        rec.encode(b);
                    }
                    // Dnl markers (a lock or a replication without a value
                    // here): nothing to apply, in any mode.
                    LogKind::Lock | LogKind::Repl => {}
                    _ if APPLY_AT_ONCE => {}
                    LogKind::Commit => {
                        if let Some(b) = self.pending.remove(&rec.tx_id) {
                            self.stats.commits += 1;
                            self.ready.push((i, b));
                        }
                    }
                    LogKind::Abort => {
                        if let Some(mut b) = self.pending.remove(&rec.tx_id) {
                            self.stats.aborts += 1;
                            if self.spare.len() < SPARE_BUFFERS_MAX {
                                b.clear();
                                self.spare.push(b);
                            }
                        }
                    }
                }
            }
            start = end;
        }
        Ok(())
    }
}

/// Applies the records of the committed transactions in `ready` (each with
/// the index of the entry holding its decision), in order, in table batches
/// of up to [`LOG_RECORDS_PER_BATCH_MAX`]: the same code for either table
/// kind, through [`HostTable::batch`].
fn apply_ready(
    table: &mut HostTable,
    stats: &mut WorkerStats,
    ready: &[(usize, Vec<u8>)],
) -> Result<(), ApplyFailure> {
    let mut reqs: [Request<'_, HostTableError>; LOG_RECORDS_PER_BATCH_MAX] =
        [const { Request::remove(Key::new(0, 0)) }; LOG_RECORDS_PER_BATCH_MAX];
    let mut req_entries = [0usize; LOG_RECORDS_PER_BATCH_MAX];
    let mut n = 0;
    for (entry, bytes) in ready {
        for rec in LogRecords::new(bytes) {
            let rec: LogRecord<'_> = rec.map_err(|error| {
                stats.bad_entries += 1;
                (*entry, WorkerError::BadEntry { at: 0, error })
            })?;
            reqs[n] = Request::upsert_if_newer(rec.key, rec.meta, rec.value);
            req_entries[n] = *entry;
            n += 1;
            if n == LOG_RECORDS_PER_BATCH_MAX {
                apply_batch(table, stats, &mut reqs[..n], &req_entries[..n])?;
                n = 0;
            }
        }
    }
    apply_batch(table, stats, &mut reqs[..n], &req_entries[..n])
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
        let Request::Upsert {
            key, meta, result, ..
        } = req
        else {
            unreachable!("the worker only batches upserts");
        };
        match result {
            Some(Ok(Upserted::Stale(held))) if held.version() > meta.version() => {
                stats.superseded += 1
            }
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
