//! The host worker (`splitkv_host::HostWorker`, Xenic §4.2 step 7) on
//! arbitrary host-log entries: what a NIC runtime, a bug, or corrupted host
//! memory could leave in the log.
//!
//! Input: `flags: u8` (bit 0: DLHT host table instead of Robinhood), then up
//! to [`ENTRIES_MAX`] log entries, each a chunk (`len: u16`, bytes). Entries
//! are pushed into the host-log ring (the worker runs whenever it is full),
//! then the worker runs until it stops making progress.
//!
//! Checks (the host worker's rule: "never acknowledged while unapplied"):
//! - nothing panics;
//! - every entry the worker acknowledged (its `LogApplied` position is at or
//!   past the entry's end) decodes completely;
//! - replicas apply at the decision (the commit point): walking the acknowledged
//!   entries in log order, a LOG record joins its transaction's pending set,
//!   an ABORT record drops the set, and at a COMMIT record every pending
//!   record of that transaction is reflected in the table (the table's
//!   version of the key is at least the record's);
//! - an entry left unacknowledged is reported: `bad_entries` is non-zero, or
//!   the worker stopped with an error (`HostWorker::error`, where it exists).
#![no_main]

use libfuzzer_sys::fuzz_target;
use splitkv_host::table::{HostTable, TableKind};
use splitkv_host::HostWorker;
use splitkv_host_fuzz::fixture::{robinhood_config, KEYS_LOADED};
use splitkv_host_fuzz::input::Input;
use splitkv_layout::host_nic::HostToNic;
use splitkv_layout::log_record::{LogKind, LogRecord, LogRecords};
use splitkv_layout::ring::{ring_pair, RingConsumer, RingError};
use splitkv_layout::robinhood_layout::TableConfig;
use splitkv_layout::{Key, TxId};
use std::collections::HashMap;

/// Most entries pushed per input.
const ENTRIES_MAX: usize = 64;
/// Host-log ring bytes.
const LOG_RING_BYTES: usize = 64 << 10;
/// Ack ring bytes.
const ACK_RING_BYTES: usize = 4 << 10;
/// Iterations run after the last push; the worker drains 64 entries each.
const DRAIN_ITERATIONS: usize = 4;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let Some(flags) = input.u8() else { return };
    let (kind, config) = if flags & 1 != 0 {
        (TableKind::Dlht, TableConfig::new(KEYS_LOADED as usize, 8))
    } else {
        (TableKind::Robinhood, robinhood_config())
    };
    let table = HostTable::new(kind, &config).expect("fixture config");
    let (mut log, log_rx) = ring_pair(LOG_RING_BYTES).expect("ring");
    let (ack_tx, mut acks) = ring_pair(ACK_RING_BYTES).expect("ring");
    let mut worker = HostWorker::new(table, log_rx, ack_tx);
    let mut acked = 0u64;
    let mut now = 0;
    // (entry bytes, log position just past it)
    let mut entries: Vec<(&[u8], u64)> = Vec::new();
    while entries.len() < ENTRIES_MAX {
        let Some(entry) = input.chunk() else { break };
        let end = loop {
            match log.try_push(entry) {
                Ok(end) => break Some(end),
                Err(RingError::Full) => {
                    now += 1;
                    if !worker.run_iteration(now) {
                        break None; // the worker stopped consuming
                    }
                    acked = drain_acks(&mut acks, acked);
                }
                Err(_) => break None, // larger than a ring entry: never logged
            }
        };
        if let Some(end) = end {
            entries.push((entry, end));
        }
    }
    for _ in 0..DRAIN_ITERATIONS {
        now += 1;
        worker.run_iteration(now);
        acked = drain_acks(&mut acks, acked);
    }
    let mut value = Vec::new();
    let mut all_acked = true;
    // The records each undecided transaction has logged so far: (key, version).
    let mut pending: HashMap<TxId, Vec<(Key, u64)>> = HashMap::new();
    for &(entry, end) in &entries {
        if end > acked {
            all_acked = false;
            continue;
        }
        for rec in LogRecords::new(entry) {
            let rec: LogRecord<'_> = rec
                .unwrap_or_else(|e| panic!("acknowledged a log entry that does not decode ({e})"));
            match rec.kind {
                LogKind::Log => pending
                    .entry(rec.tx_id)
                    .or_default()
                    .push((rec.key, rec.meta.version())),
                LogKind::Abort => {
                    pending.remove(&rec.tx_id);
                }
                // Dnl markers: nothing to apply or drop.
                LogKind::Lock | LogKind::Repl => {}
                LogKind::Commit => {
                    for (key, version) in pending.remove(&rec.tx_id).unwrap_or_default() {
                        let have = worker.table().get(&key, &mut value);
                        assert!(
                            have.is_some_and(|m| m.version() >= version),
                            "acknowledged the commit of {:#x} but {key:?} v{version} is unapplied (table has {have:?})",
                            rec.tx_id
                        );
                    }
                }
            }
        }
    }
    if !all_acked {
        assert!(
            worker.stats().bad_entries > 0 || worker.error().is_some(),
            "log entries left unacknowledged without being reported"
        );
    }
});

/// `HostWorker::error()` — why the worker stopped — on a host crate that has
/// it; `None` on one that has not (its worker panics instead). An inherent
/// method takes precedence over a trait method of the same name, so the call
/// resolves to the real one once it exists, and this target builds on both
/// (the trait is then unused, hence the `allow`).
#[allow(dead_code)]
trait StopReason {
    fn error(&self) -> Option<&'static str> {
        None
    }
}

impl StopReason for HostWorker {}

/// Pops every acknowledgement; returns the latest acknowledged position.
fn drain_acks(acks: &mut RingConsumer, mut acked: u64) -> u64 {
    let mut buf = Vec::new();
    while let Ok(true) = acks.try_pop(&mut buf) {
        match HostToNic::decode(&buf) {
            Ok(HostToNic::LogApplied(a)) => {
                assert!(a.applied_bytes >= acked, "acknowledgements went backwards");
                acked = a.applied_bytes;
            }
            other => panic!("the host worker sent {other:?} on the ack ring"),
        }
    }
    acked
}
