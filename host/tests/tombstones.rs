//! A delete's tombstone (DELETED, the next version, no value) through every
//! place a host keeps an object: the host worker applies it from the host
//! log like any write (newest version wins; recovery and re-replication
//! append their records the same way), both host tables keep it, hand it to
//! a table walk (a re-replication snapshot) and to the NIC's DMA lookup with
//! its version, and an insert over it takes the version after it.

use splitkv_host::table::dlht::dma::DlhtDma;
use splitkv_host::table::{HostTable, TableConfig, TableKind};
use splitkv_host::HostWorker;
use splitkv_layout::log_record::{LogKind, LogRecord};
use splitkv_layout::ring::ring_pair;
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, TxId};
use splitkv_nic::dma::{read_vector, HostMemory};
use splitkv_nic::index::dlht_lookup::DlhtLookup;
use splitkv_nic::index::hints::SegmentHints;
use splitkv_nic::index::robinhood_lookup::RobinhoodLookup;
use splitkv_nic::index::Next;

const KEY: Key = Key::new(1, 7);
const OTHER: Key = Key::new(1, 8);

fn value(version: u64) -> ObjectMeta {
    ObjectMeta::new(version, ObjectFlags::empty())
}

fn tombstone(version: u64) -> ObjectMeta {
    ObjectMeta::new(version, ObjectFlags::DELETED)
}

/// One committed write in the host log: its LOG record, then its COMMIT.
fn committed(tx: u64, key: Key, meta: ObjectMeta, value: &[u8], out: &mut Vec<u8>) {
    let tx_id = TxId::from_bits(tx);
    LogRecord {
        kind: LogKind::Log,
        tx_id,
        key,
        meta,
        value,
    }
    .encode(out);
    LogRecord::decision(LogKind::Commit, tx_id).encode(out);
}

/// What the NIC's DMA lookup finds for `key`: (metadata, value).
fn nic_lookup(table: &HostTable, key: Key) -> Option<(ObjectMeta, Vec<u8>)> {
    let mut buf = Vec::new();
    match table {
        HostTable::Robinhood(t) => {
            let layout = t.layout();
            let mut hints = SegmentHints::new(layout);
            let (mut l, mut step) = RobinhoodLookup::start(layout, &hints, key);
            loop {
                match step {
                    Next::Read(v, n) => {
                        read_vector(t.region(), &v[..n], &mut buf).unwrap();
                        step = l.advance(layout, &mut hints, &buf);
                    }
                    Next::Found { meta, value } => return Some((meta, value.to_vec())),
                    Next::Absent => return None,
                    Next::Failed(e) => panic!("{key:?}: {e}"),
                }
            }
        }
        HostTable::Dlht(t) => {
            let mem = DlhtDma::new(t.clone());
            let (mut l, mut step) = DlhtLookup::start(key, 0);
            loop {
                match step {
                    Next::Read(v, n) => {
                        buf.clear();
                        for r in &v[..n] {
                            let at = buf.len();
                            buf.resize(at + r.len, 0);
                            mem.read(r.offset, &mut buf[at..]).unwrap();
                        }
                        step = l.advance(&buf);
                    }
                    Next::Found { meta, value } => return Some((meta, value.to_vec())),
                    Next::Absent => return None,
                    Next::Failed(e) => panic!("{key:?}: {e}"),
                }
            }
        }
    }
}

fn a_tombstone_is_kept_and_read_everywhere(kind: TableKind, long: usize) {
    let (mut log_tx, log_rx) = ring_pair(1 << 16).unwrap();
    let (ack_tx, _ack_rx) = ring_pair(1 << 12).unwrap();
    let table = HostTable::new(kind, &TableConfig::new(64, long)).unwrap();
    let mut worker = HostWorker::new(table, log_rx, ack_tx);
    let first = vec![9u8; long];
    let mut entry = Vec::new();
    committed(1, KEY, value(1), &first, &mut entry);
    committed(2, OTHER, value(1), b"o", &mut entry);
    committed(3, KEY, tombstone(2), b"", &mut entry);
    // A late copy of the deleted version (a re-replication snapshot or a
    // recovery's replay) loses against the tombstone.
    committed(4, KEY, value(1), &first, &mut entry);
    log_tx.try_push(&entry).unwrap();
    while worker.run_iteration(0) {}
    assert_eq!(worker.error(), None);
    let stats = worker.stats();
    assert_eq!((stats.applied, stats.stale + stats.superseded), (3, 1));

    let table = worker.table();
    let mut got = Vec::new();
    assert_eq!(table.get(&KEY, &mut got), Some(tombstone(2)));
    assert!(got.is_empty(), "a tombstone has no value");
    assert_eq!(table.len(), 2, "the tombstone keeps its slot");
    let mut walked = Vec::new();
    table.for_each(|k, m, v| walked.push((k, m, v.to_vec())));
    walked.sort_by_key(|(k, ..)| k.id);
    assert_eq!(
        walked,
        vec![
            (KEY, tombstone(2), Vec::new()),
            (OTHER, value(1), b"o".to_vec())
        ],
        "a snapshot walk carries the tombstone"
    );
    assert_eq!(nic_lookup(table, KEY), Some((tombstone(2), Vec::new())));
    if let HostTable::Robinhood(t) = table {
        t.check_invariants().unwrap();
        let out_of_line = t.layout().is_out_of_line(long);
        assert_eq!(out_of_line, long > 8, "the long case is out of line");
        assert_eq!(t.value_blocks_in_use(), 0, "the long value's block is free");
    }

    // An insert over the tombstone, at the version after it.
    entry.clear();
    committed(5, KEY, value(3), b"back", &mut entry);
    log_tx.try_push(&entry).unwrap();
    while worker.run_iteration(0) {}
    let table = worker.table();
    assert_eq!(table.get(&KEY, &mut got), Some(value(3)));
    assert_eq!(got, b"back");
    assert_eq!(nic_lookup(table, KEY), Some((value(3), b"back".to_vec())));
}

#[test]
fn robinhood_keeps_a_tombstone_over_an_out_of_line_value() {
    a_tombstone_is_kept_and_read_everywhere(TableKind::Robinhood, 600);
}

#[test]
fn robinhood_keeps_a_tombstone_over_an_inline_value() {
    a_tombstone_is_kept_and_read_everywhere(TableKind::Robinhood, 8);
}

#[test]
fn dlht_keeps_a_tombstone() {
    a_tombstone_is_kept_and_read_everywhere(TableKind::Dlht, 8);
}
