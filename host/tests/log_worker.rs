//! The host worker (Xenic §4.2 step 7) applying the host log through table
//! batches (Dandelion §6): newest version wins, stale and duplicate records are
//! skipped, a bad record ends only its entry, batches and iterations are bounded,
//! and progress is acknowledged.

use splitkv_host::log::{LOG_ENTRIES_PER_ITERATION_MAX, LOG_RECORDS_PER_BATCH_MAX};
use splitkv_host::table::{HostTable, TableConfig, TableKind};
use splitkv_host::HostWorker;
use splitkv_layout::host_nic::HostToNic;
use splitkv_layout::log_record::{LogKind, LogRecord};
use splitkv_layout::ring::ring_pair;
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
use std::collections::HashMap;

fn record(id: u64, version: u64, value: &[u8], out: &mut Vec<u8>) {
    LogRecord {
        kind: LogKind::Log,
        tx_id: version,
        key: Key::new(1, id),
        meta: ObjectMeta::new(version, ObjectFlags::READABLE),
        value,
    }
    .encode(out);
}

#[test]
fn applies_newest_versions_in_bounded_batches() {
    applies_newest_versions(TableKind::Robinhood);
}

#[test]
fn dlht_worker_applies_newest_versions() {
    applies_newest_versions(TableKind::Dlht);
}

fn applies_newest_versions(kind: TableKind) {
    let (mut log_tx, log_rx) = ring_pair(1 << 20).unwrap();
    let (ack_tx, mut ack_rx) = ring_pair(1 << 12).unwrap();
    let table = HostTable::new(kind, &TableConfig::new(1000, 8)).unwrap();
    let mut worker = HostWorker::new(table, log_rx, ack_tx);

    // Entries of 1..=5 records over 50 keys, versions out of order and repeated,
    // so that batches of LOG_RECORDS_PER_BATCH_MAX span entry boundaries.
    let mut newest: HashMap<u64, (u64, [u8; 8])> = HashMap::new();
    let (mut records, mut stale, mut entries) = (0u64, 0u64, 0u64);
    let mut rng = 0x9E37_79B9_u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut entry = Vec::new();
    for e in 0..(2 * LOG_ENTRIES_PER_ITERATION_MAX + 7) {
        entry.clear();
        for _ in 0..=(e % 5) {
            let id = next() % 50;
            let version = next() % 40;
            let value = (version * 1000 + id).to_le_bytes();
            record(id, version, &value, &mut entry);
            records += 1;
            match newest.get(&id) {
                Some(&(v, _)) if v >= version => stale += 1,
                _ => {
                    newest.insert(id, (version, value));
                }
            }
        }
        if e == 10 {
            // A valid record followed by garbage: the record counts, the rest
            // of the entry is dropped.
            entry.extend_from_slice(&[0xee; 5]);
        }
        log_tx.try_push(&entry).unwrap();
        entries += 1;
    }
    assert!(records > 2 * LOG_RECORDS_PER_BATCH_MAX as u64);

    assert!(worker.run_iteration(0));
    assert_eq!(worker.stats().entries, LOG_ENTRIES_PER_ITERATION_MAX as u64);
    while worker.run_iteration(0) {}
    assert!(worker.is_quiescent());

    let stats = worker.stats();
    assert_eq!(stats.entries, entries);
    assert_eq!(stats.bad_entries, 1);
    assert_eq!(stats.applied + stats.stale, records);
    assert_eq!(stats.stale, stale);
    let table = worker.table();
    if let HostTable::Robinhood(t) = table {
        t.check_invariants().unwrap();
    }
    assert_eq!(table.len(), newest.len());
    let mut value = Vec::new();
    for (&id, &(version, bytes)) in &newest {
        let meta = table.get(&Key::new(1, id), &mut value).unwrap();
        assert_eq!(meta.version(), version, "key {id}");
        assert_eq!(value, bytes, "key {id}");
    }

    // The last acknowledgement covers the whole log.
    let mut ack = Vec::new();
    let mut last = None;
    while ack_rx.try_pop(&mut ack).unwrap() {
        match HostToNic::decode(&ack).unwrap() {
            HostToNic::LogApplied(a) => last = Some(a.applied_bytes),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(last, Some(log_tx.produced_bytes()));
    assert_eq!(stats.acks, 3);
}
