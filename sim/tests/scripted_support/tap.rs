//! A tap on one node's host log: every entry the NIC runtime appends is
//! decoded and remembered (the spec's `rec[n]`), then passed on unchanged to
//! the host worker's ring. Both rings have the same size and receive the same
//! entries in the same order, so the worker's `LogApplied` positions are
//! positions of the NIC runtime's ring too.

use splitkv_layout::log_record::{LogKind, LogRecords};
use splitkv_layout::ring::{RingConsumer, RingProducer};
use splitkv_layout::{Key, TxId};

/// One host-log entry, grouped as the spec writes records: the LOG records
/// of one entry as one record with their keys and values, or one decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapRecord {
    /// LOG (pending write), COMMIT or ABORT (decisions, no keys).
    pub kind: LogKind,
    /// Transaction id.
    pub tx_id: TxId,
    /// Keys written, with their new values and versions (LOG only).
    pub writes: Vec<(Key, Vec<u8>, u64)>,
}

/// The tap of one node.
pub struct LogTap {
    from_nic: RingConsumer,
    to_worker: RingProducer,
    entry: Vec<u8>,
    /// Every record so far, in log order.
    pub records: Vec<TapRecord>,
}

impl LogTap {
    /// A tap reading the NIC runtime's log ring and writing the worker's.
    pub fn new(from_nic: RingConsumer, to_worker: RingProducer) -> LogTap {
        LogTap {
            from_nic,
            to_worker,
            entry: Vec::new(),
            records: Vec::new(),
        }
    }

    /// Moves every available entry from the NIC runtime to the worker.
    ///
    /// # Panics
    /// On a ring error or an entry that does not decode (the tests' rings
    /// are far larger than their few entries).
    pub fn pump(&mut self) {
        while self.from_nic.try_pop(&mut self.entry).expect("log ring") {
            let mut log: Option<TapRecord> = None;
            for r in LogRecords::new(&self.entry) {
                let r = r.expect("a log record decodes");
                if r.kind == LogKind::Log {
                    log.get_or_insert_with(|| TapRecord {
                        kind: LogKind::Log,
                        tx_id: r.tx_id,
                        writes: Vec::new(),
                    })
                    .writes
                    .push((r.key, r.value.to_vec(), r.meta.version()));
                } else {
                    self.records.extend(log.take());
                    self.records.push(TapRecord {
                        kind: r.kind,
                        tx_id: r.tx_id,
                        writes: Vec::new(),
                    });
                }
            }
            self.records.extend(log.take());
            self.to_worker.try_push(&self.entry).expect("worker ring");
        }
    }

    /// Whether this log holds a LOG record of `tx_id` writing `key`.
    pub fn has_log(&self, tx_id: TxId, key: &Key) -> bool {
        self.records.iter().any(|r| {
            r.kind == LogKind::Log && r.tx_id == tx_id && r.writes.iter().any(|w| w.0 == *key)
        })
    }

    /// Whether this log holds a decision record `kind` of `tx_id`.
    pub fn has_decision(&self, tx_id: TxId, kind: LogKind) -> bool {
        self.records
            .iter()
            .any(|r| r.kind == kind && r.tx_id == tx_id)
    }
}
