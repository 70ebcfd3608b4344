//! The host worker (Xenic §4.2 step 7) applying the host log through table
//! batches (Dandelion §6): newest version wins, stale and duplicate records are
//! skipped, batches and iterations are bounded, and progress is acknowledged;
//! a record the worker cannot apply (bad bytes, a full table) stops it without
//! a panic and is never acknowledged (a rule the fuzz targets check), while the
//! DLHT grows.

use splitkv_host::log::WorkerError;
use splitkv_host::log::{
    LOG_BYTES_PER_ITERATION_MAX, LOG_ENTRIES_PER_ITERATION_MAX, LOG_RECORDS_PER_BATCH_MAX,
};
use splitkv_host::node::LOG_RING_BYTES_DEFAULT;
use splitkv_host::table::{HostTable, TableConfig, TableKind};
use splitkv_host::HostWorker;
use splitkv_layout::host_nic::HostToNic;
use splitkv_layout::log_record::{LogKind, LogRecord, LOG_ENTRY_BYTES_MAX};
use splitkv_layout::ring::ring_pair;
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, TxId, TX_VALUES_MAX, VALUE_BYTES_MAX};
use std::collections::HashMap;

/// Appends a committed write to `out`: a LOG record of a transaction of its
/// own, then that transaction's COMMIT decision record (the worker applies
/// at the decision, the commit point's rule).
fn record(id: u64, version: u64, value: &[u8], out: &mut Vec<u8>) {
    static NEXT_TX: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let tx_id = TxId::from_bits(NEXT_TX.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    LogRecord {
        kind: LogKind::Log,
        tx_id,
        key: Key::new(1, id),
        meta: ObjectMeta::new(version, ObjectFlags::READABLE),
        value,
    }
    .encode(out);
    LogRecord::decision(LogKind::Commit, tx_id).encode(out);
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
    assert_eq!(stats.bad_entries, 0);
    assert_eq!(worker.error(), None);
    assert_eq!(stats.applied + stats.stale + stats.superseded, records);
    assert_eq!(stats.stale + stats.superseded, stale);
    assert!(stats.superseded > 0 && stats.stale > 0, "both kinds occur");
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

/// The Dnl markers (a LOCK or a REPL without a value here) are skipped:
/// they neither apply, nor drop, nor stop anything, and the log they are in
/// is acknowledged whole.
#[test]
fn dnl_lock_and_repl_markers_are_skipped() {
    let (mut log_tx, log_rx) = ring_pair(1 << 16).unwrap();
    let (ack_tx, mut ack_rx) = ring_pair(1 << 12).unwrap();
    let table = HostTable::new(TableKind::Robinhood, &TableConfig::new(64, 8)).unwrap();
    let mut worker = HostWorker::new(table, log_rx, ack_tx);
    let (a, b) = (TxId::from_bits(41), TxId::from_bits(42));
    let mut entry = Vec::new();
    LogRecord {
        kind: LogKind::Log,
        tx_id: a,
        key: Key::new(1, 7),
        meta: ObjectMeta::new(3, ObjectFlags::READABLE),
        value: b"seven",
    }
    .encode(&mut entry);
    LogRecord::decision(LogKind::Lock, a).encode(&mut entry);
    LogRecord::decision(LogKind::Repl, b).encode(&mut entry);
    log_tx.try_push(&entry).unwrap();
    entry.clear();
    // b's marker then its ABORT: nothing pending to drop; a's COMMIT applies.
    LogRecord::decision(LogKind::Abort, b).encode(&mut entry);
    LogRecord::decision(LogKind::Repl, a).encode(&mut entry);
    LogRecord::decision(LogKind::Commit, a).encode(&mut entry);
    log_tx.try_push(&entry).unwrap();
    while worker.run_iteration(0) {}
    assert_eq!(worker.error(), None);
    let stats = worker.stats();
    assert_eq!((stats.entries, stats.bad_entries), (2, 0));
    assert_eq!((stats.commits, stats.aborts, stats.applied), (1, 0, 1));
    let mut value = Vec::new();
    let meta = worker.table().get(&Key::new(1, 7), &mut value).unwrap();
    assert_eq!((meta.version(), value.as_slice()), (3, &b"seven"[..]));
    assert_eq!(acks(&mut ack_rx).last(), Some(&log_tx.produced_bytes()));
}

/// Every acknowledgement on `acks`, in order.
fn acks(ack_rx: &mut splitkv_layout::ring::RingConsumer) -> Vec<u64> {
    let mut ack = Vec::new();
    let mut out = Vec::new();
    while ack_rx.try_pop(&mut ack).unwrap() {
        let HostToNic::LogApplied(a) = HostToNic::decode(&ack).unwrap() else {
            panic!("not an ack");
        };
        out.push(a.applied_bytes);
    }
    out
}

#[test]
fn a_bad_entry_stops_the_worker_and_is_never_acknowledged() {
    let (mut log_tx, log_rx) = ring_pair(1 << 16).unwrap();
    let (ack_tx, mut ack_rx) = ring_pair(1 << 12).unwrap();
    let table = HostTable::new(TableKind::Robinhood, &TableConfig::new(100, 8)).unwrap();
    let mut worker = HostWorker::new(table, log_rx, ack_tx);
    let mut entry = Vec::new();
    record(1, 1, b"a", &mut entry);
    log_tx.try_push(&entry).unwrap();
    let good_end = log_tx.produced_bytes();
    entry.clear();
    record(2, 1, b"b", &mut entry);
    entry.extend_from_slice(&[0xee; 5]);
    log_tx.try_push(&entry).unwrap();
    entry.clear();
    record(3, 1, b"c", &mut entry);
    log_tx.try_push(&entry).unwrap();

    worker.run_iteration(0);
    assert!(matches!(
        worker.error(),
        Some(WorkerError::BadEntry { at, .. }) if *at == good_end
    ));
    assert_eq!(
        acks(&mut ack_rx),
        vec![good_end],
        "only the entry before it"
    );
    assert_eq!(worker.acked_bytes(), good_end);
    let mut v = Vec::new();
    assert!(worker.table().get(&Key::new(1, 1), &mut v).is_some());
    assert!(
        worker.table().get(&Key::new(1, 3), &mut v).is_none(),
        "stopped"
    );
    // Stopped: nothing more is applied or acknowledged.
    assert!(!worker.run_iteration(1));
    assert!(acks(&mut ack_rx).is_empty());
    assert!(worker
        .error()
        .unwrap()
        .to_string()
        .contains("does not decode"));
}

#[test]
fn a_full_robinhood_table_stops_the_worker_without_a_panic() {
    let (mut log_tx, log_rx) = ring_pair(1 << 20).unwrap();
    let (ack_tx, mut ack_rx) = ring_pair(1 << 16).unwrap();
    let table = HostTable::new(TableKind::Robinhood, &TableConfig::new(16, 8)).unwrap();
    let mut worker = HostWorker::new(table, log_rx, ack_tx);
    // One record per entry, far more keys than the table holds.
    let mut ends = Vec::new();
    let mut entry = Vec::new();
    for id in 0..2_000u64 {
        entry.clear();
        record(id, 1, &id.to_le_bytes(), &mut entry);
        log_tx.try_push(&entry).unwrap();
        ends.push(log_tx.produced_bytes());
    }
    for now in 0..100 {
        worker.run_iteration(now);
    }
    let Some(WorkerError::TableFull { key }) = worker.error().cloned() else {
        panic!("expected a full table, got {:?}", worker.error());
    };
    // The acknowledgement covers exactly the entries before the failed one,
    // and every write it covers is in the table.
    let acked = acks(&mut ack_rx).last().copied().unwrap_or(0);
    assert_eq!(acked, worker.acked_bytes());
    let covered = ends.iter().take_while(|&&e| e <= acked).count();
    assert_eq!(
        Key::new(1, covered as u64),
        key,
        "stopped at the first misfit"
    );
    let mut v = Vec::new();
    for id in 0..covered as u64 {
        let meta = worker.table().get(&Key::new(1, id), &mut v).unwrap();
        assert_eq!((meta.version(), &v[..]), (1, &id.to_le_bytes()[..]));
    }
    assert!(worker.table().get(&key, &mut v).is_none());
    assert!(!worker.run_iteration(200));
}

#[test]
fn a_dlht_grows_instead_of_filling_up() {
    let (mut log_tx, log_rx) = ring_pair(1 << 20).unwrap();
    let (ack_tx, _ack_rx) = ring_pair(1 << 16).unwrap();
    let table = HostTable::new(TableKind::Dlht, &TableConfig::new(16, 8)).unwrap();
    let mut worker = HostWorker::new(table, log_rx, ack_tx);
    let mut entry = Vec::new();
    for id in 0..2_000u64 {
        entry.clear();
        record(id, 1, &id.to_le_bytes(), &mut entry);
        log_tx.try_push(&entry).unwrap();
    }
    while worker.run_iteration(0) {}
    assert_eq!(worker.error(), None);
    assert!(worker.is_quiescent());
    assert_eq!(worker.table().len(), 2_000);
}

/// A full-size transaction, 16 values of 4 KiB in one host-log LOG entry
/// ([`LOG_ENTRY_BYTES_MAX`]) followed by its COMMIT decision entry, is applied
/// to a Robinhood table at the node limit (every value out of line in the
/// value heap); an iteration drains at most [`LOG_BYTES_PER_ITERATION_MAX`]
/// of such entries, and the last acknowledgement covers the whole log.
#[test]
fn applies_sixteen_four_kib_values_of_one_commit() {
    const ENTRIES: u64 = 10;
    let (mut log_tx, log_rx) = ring_pair(LOG_RING_BYTES_DEFAULT).unwrap();
    let (ack_tx, mut ack_rx) = ring_pair(1 << 12).unwrap();
    let table = HostTable::new(
        TableKind::Robinhood,
        &TableConfig::new(256, VALUE_BYTES_MAX),
    )
    .unwrap();
    let mut worker = HostWorker::new(table, log_rx, ack_tx);
    let value = |e: u64, i: u64| -> Vec<u8> {
        (0..VALUE_BYTES_MAX as u64)
            .map(|b| (e * 31 + i * 7 + b) as u8)
            .collect()
    };
    let mut entry = Vec::new();
    for e in 0..ENTRIES {
        entry.clear();
        for i in 0..TX_VALUES_MAX as u64 {
            // Entries 0 and 1 write the same keys: the later version wins.
            let id = if e < 2 { i } else { e * 100 + i };
            LogRecord {
                kind: LogKind::Log,
                tx_id: TxId::from_bits(e),
                key: Key::new(1, id),
                meta: ObjectMeta::new(e + 1, ObjectFlags::READABLE),
                value: &value(e, i),
            }
            .encode(&mut entry);
        }
        assert_eq!(entry.len(), LOG_ENTRY_BYTES_MAX);
        log_tx.try_push(&entry).unwrap();
        entry.clear();
        LogRecord::decision(LogKind::Commit, TxId::from_bits(e)).encode(&mut entry);
        log_tx.try_push(&entry).unwrap();
    }
    assert!(worker.run_iteration(0));
    // Full LOG entries, each but the last followed by its small decision.
    let per_iteration = LOG_BYTES_PER_ITERATION_MAX.div_ceil(LOG_ENTRY_BYTES_MAX) as u64;
    assert_eq!(worker.stats().entries, 2 * per_iteration - 1);
    while worker.run_iteration(0) {}
    assert!(worker.is_quiescent());
    assert_eq!(worker.error(), None);
    let stats = worker.stats();
    assert_eq!(stats.entries, 2 * ENTRIES);
    assert_eq!(stats.commits, ENTRIES);
    assert_eq!(stats.applied, ENTRIES * TX_VALUES_MAX as u64);
    let HostTable::Robinhood(t) = worker.table() else {
        unreachable!()
    };
    t.check_invariants().unwrap();
    assert_eq!(
        t.value_blocks_in_use(),
        (ENTRIES as usize - 1) * TX_VALUES_MAX
    );
    let mut v = Vec::new();
    for e in 1..ENTRIES {
        for i in 0..TX_VALUES_MAX as u64 {
            let id = if e < 2 { i } else { e * 100 + i };
            let meta = worker.table().get(&Key::new(1, id), &mut v).unwrap();
            assert_eq!(meta.version(), e + 1, "key {id}");
            assert!(v == value(e, i), "key {id}: value differs");
        }
    }
    assert_eq!(
        acks(&mut ack_rx).last().copied(),
        Some(log_tx.produced_bytes())
    );
}

/// Design A of `tla/DnlSkeleton.tla` at one replica's host: the values a
/// Dnl Lock or Replicate appended are pending `Log` records, invisible in
/// the table until the decision record arrives (TLA `Unlock` commit:
/// installed; `Unlock` abort: dropped; `Readable` at a backup: installed
/// from its own REPL record).
#[test]
fn dnl_pending_values_are_installed_only_at_their_decision() {
    let (mut log_tx, log_rx) = ring_pair(1 << 16).unwrap();
    let (ack_tx, _ack_rx) = ring_pair(1 << 12).unwrap();
    let table = HostTable::new(TableKind::Robinhood, &TableConfig::new(64, 8)).unwrap();
    let mut worker = HostWorker::new(table, log_rx, ack_tx);
    // t1 locked key 1 here (values with its Lock), t2 locked key 2, t3
    // replicated key 3 here (a backup).
    let (t1, t2, t3) = (
        TxId::from_bits(51),
        TxId::from_bits(52),
        TxId::from_bits(53),
    );
    let pending = |tx_id, id, value: &'static [u8], out: &mut Vec<u8>| {
        LogRecord {
            kind: LogKind::Log,
            tx_id,
            key: Key::new(1, id),
            meta: ObjectMeta::new(1, ObjectFlags::empty()),
            value,
        }
        .encode(out)
    };
    let mut entry = Vec::new();
    let mut push = |entry: &mut Vec<u8>| {
        log_tx.try_push(entry).unwrap();
        entry.clear();
    };
    pending(t1, 1, b"one", &mut entry);
    push(&mut entry);
    pending(t2, 2, b"two", &mut entry);
    push(&mut entry);
    pending(t3, 3, b"three", &mut entry);
    push(&mut entry);
    LogRecord::decision(LogKind::Lock, t1).encode(&mut entry); // a marker: nothing
    push(&mut entry);
    while worker.run_iteration(0) {}
    let mut value = Vec::new();
    for id in 1..=3 {
        assert!(
            worker.table().get(&Key::new(1, id), &mut value).is_none(),
            "pending values are not visible before their decision"
        );
    }
    LogRecord::decision(LogKind::Commit, t1).encode(&mut entry); // Unlock, commit
    LogRecord::decision(LogKind::Abort, t2).encode(&mut entry); // Unlock, abort
    push(&mut entry);
    while worker.run_iteration(0) {}
    let meta = worker.table().get(&Key::new(1, 1), &mut value).unwrap();
    assert_eq!((meta.version(), value.as_slice()), (1, &b"one"[..]));
    assert!(worker.table().get(&Key::new(1, 2), &mut value).is_none());
    assert!(
        worker.table().get(&Key::new(1, 3), &mut value).is_none(),
        "a REPL value waits for its Readable"
    );
    LogRecord::decision(LogKind::Commit, t3).encode(&mut entry); // Readable
    push(&mut entry);
    while worker.run_iteration(0) {}
    let meta = worker.table().get(&Key::new(1, 3), &mut value).unwrap();
    assert_eq!((meta.version(), value.as_slice()), (1, &b"three"[..]));
    assert_eq!(worker.error(), None);
    let stats = worker.stats();
    assert_eq!((stats.commits, stats.aborts, stats.applied), (2, 1, 2));
}
