//! Robinhood values over 256 B, stored out of line in the value heap (Xenic
//! §4.1.2): a model-based property test across inline/out-of-line switches,
//! deletes, overflow and an exhausted heap, and a concurrent NIC-style reader
//! that follows slot references while the host rewrites and reuses blocks.

use proptest::prelude::*;
use splitkv_host::table::{RobinhoodError, RobinhoodTable, TableConfig};
use splitkv_layout::robinhood_layout::ROBINHOOD_VALUE_INLINE_BYTES_MAX;
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, VALUE_BYTES_MAX};
use splitkv_nic::dma::read_vector;
use splitkv_nic::index::hints::SegmentHints;
use splitkv_nic::index::Next;
use splitkv_nic::index::{robinhood_lookup::RobinhoodLookup, LookupError};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

mod robinhood_support;
use robinhood_support::{assert_for_each_agrees, assert_gets_agree, key, Model};

fn long_in(model: &Model) -> usize {
    model
        .values()
        .filter(|(_, v)| v.len() > ROBINHOOD_VALUE_INLINE_BYTES_MAX)
        .count()
}

/// Compares the table with the model through `get`, `get_batch` and
/// `for_each`, and checks the structural invariants (block references included).
fn assert_agrees(table: &RobinhoodTable, model: &Model, absent: &[Key]) {
    table.check_invariants().unwrap();
    assert_eq!(table.len(), model.len());
    assert_eq!(table.value_blocks_in_use(), long_in(model));
    assert_gets_agree(table, model);
    let mut value = Vec::new();
    for k in absent.iter().filter(|k| !model.contains_key(k)) {
        assert_eq!(table.get(k, &mut value), None, "{k:?}");
    }
    let keys: Vec<Key> = model.keys().copied().collect();
    let mut values = vec![Vec::new(); keys.len()];
    let mut metas = vec![None; keys.len()];
    table.get_batch(&keys, &mut values, &mut metas);
    for ((k, v), m) in keys.iter().zip(&values).zip(&metas) {
        assert_eq!((m.map(|m| m.0), v), (Some(model[k].0), &model[k].1));
    }
    assert_for_each_agrees(table, model);
}

#[derive(Debug, Clone)]
enum Op {
    Upsert { id: u64, len: usize, fill: u8 },
    Remove { id: u64 },
}

const KEY_POOL: u64 = 60;

/// Lengths cluster around the inline limit and the table maxima (1 KiB and
/// the node limit of 4 KiB), so updates switch between the two forms and hit
/// `ValueTooLarge`.
fn len_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![
        0usize..16,
        250usize..264,
        264usize..1000,
        1016usize..1030,
        4088usize..4100,
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..KEY_POOL, len_strategy(), any::<u8>()).prop_map(|(id, len, fill)| Op::Upsert { id, len, fill }),
        1 => (0..KEY_POOL).prop_map(|id| Op::Remove { id }),
    ]
}

fn config_strategy() -> impl Strategy<Value = TableConfig> {
    (
        1usize..=4,
        prop::sample::select(vec![300usize, 1024, VALUE_BYTES_MAX]),
        prop::sample::select(vec![1usize, 4, 16]),
        prop::sample::select(vec![0usize, 10, 50]),
        prop::sample::select(vec![1usize, 2, 8]),
        prop::sample::select(vec![None, Some(0usize), Some(3), Some(20)]),
    )
        .prop_map(
            |(d_max, value_bytes_max, segment_slots, pct, bucket_slots, value_blocks)| {
                TableConfig {
                    capacity_keys: 57,
                    d_max,
                    value_bytes_max,
                    segment_slots,
                    overflow_fraction_pct: pct,
                    bucket_slots,
                    value_blocks,
                }
            },
        )
}

fn apply(table: &mut RobinhoodTable, model: &mut Model, config: &TableConfig, op: &Op, v: u64) {
    match *op {
        Op::Upsert { id, len, fill } => {
            let k = key(id);
            let exists = model.contains_key(&k);
            if !exists && model.len() >= config.capacity_keys {
                return;
            }
            let value: Vec<u8> = (0..len).map(|i| fill.wrapping_add(i as u8)).collect();
            let meta = ObjectMeta::new(v, ObjectFlags::READABLE);
            let result = table.upsert(k, meta, &value);
            if len > config.value_bytes_max {
                let max = config.value_bytes_max;
                assert_eq!(result, Err(RobinhoodError::ValueTooLarge { len, max }));
                return;
            }
            let blocks = table.layout().value_blocks();
            // A long value needs a fresh block even to replace a long one: the
            // old block is freed only after the slot points to the new one.
            let heap_full = len > ROBINHOOD_VALUE_INLINE_BYTES_MAX && long_in(model) == blocks;
            match result {
                Ok(inserted) => {
                    assert!(!heap_full, "a long value was stored in a full heap");
                    assert_eq!(inserted, !exists);
                    model.insert(k, (meta.0, value));
                }
                Err(RobinhoodError::ValueHeapFull { blocks: b }) => {
                    assert!(heap_full, "heap reported full with blocks free");
                    assert_eq!(b, blocks);
                }
                Err(RobinhoodError::Full) => {
                    assert!(!heap_full && !exists, "update of a present key failed")
                }
                Err(e) => panic!("{e}"),
            }
        }
        Op::Remove { id } => {
            let k = key(id);
            assert_eq!(table.remove(&k), model.remove(&k).is_some());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn long_values_agree_with_hashmap_model(config in config_strategy(), ops in prop::collection::vec(op_strategy(), 1..300)) {
        let mut table = RobinhoodTable::new(&config).unwrap();
        let mut model = Model::new();
        let absent: Vec<Key> = (0..KEY_POOL + 4).map(key).collect();
        for (i, op) in ops.iter().enumerate() {
            apply(&mut table, &mut model, &config, op, i as u64 + 1);
            assert_agrees(&table, &model, &absent);
        }
        for k in model.keys().copied().collect::<Vec<_>>() {
            prop_assert!(table.remove(&k));
            model.remove(&k);
        }
        assert_agrees(&table, &model, &absent);
        prop_assert_eq!(table.value_blocks_in_use(), 0);
        prop_assert_eq!(table.buckets_in_use(), 0);
    }
}

#[test]
fn moves_copy_the_reference_not_the_block() {
    // A tiny table with D_m = 1: inserts swap, deletes shift and pull objects
    // out of overflow buckets, all while every value is out of line.
    let config = TableConfig {
        d_max: 1,
        overflow_fraction_pct: 100,
        bucket_slots: 2,
        ..TableConfig::new(28, 600)
    };
    let mut table = RobinhoodTable::new(&config).unwrap();
    let mut model = Model::new();
    for id in 0..28u64 {
        let value = vec![id as u8; 300 + id as usize];
        table.upsert(key(id), ObjectMeta(id), &value).unwrap();
        model.insert(key(id), (id, value));
    }
    let written = table.stats().blocks_written;
    assert_eq!(written, 28, "one block write per stored value");
    for id in (0..28u64).step_by(3) {
        assert!(table.remove(&key(id)));
        model.remove(&key(id));
    }
    let s = table.stats();
    assert!(s.moved_by_inserts + s.moved_by_shifts + s.overflow_swaps > 0);
    assert_eq!(s.blocks_written, written, "moves never rewrite a block");
    assert_agrees(&table, &model, &[]);
}

#[test]
fn heap_full_leaves_the_table_unchanged_and_frees_on_shrink() {
    let config = TableConfig {
        value_blocks: Some(2),
        ..TableConfig::new(16, 1024)
    };
    let mut table = RobinhoodTable::new(&config).unwrap();
    let long = [7u8; 1000];
    table.upsert(key(1), ObjectMeta(1), &long).unwrap();
    table.upsert(key(2), ObjectMeta(1), &long).unwrap();
    let full = Err(RobinhoodError::ValueHeapFull { blocks: 2 });
    assert_eq!(table.upsert(key(3), ObjectMeta(1), &long), full);
    // Replacing a long value with a long value also needs a free block.
    assert_eq!(table.upsert(key(1), ObjectMeta(2), &long[..500]), full);
    let mut v = Vec::new();
    assert_eq!(table.get(&key(1), &mut v), Some(ObjectMeta(1)));
    assert_eq!(v, long);
    assert_eq!(table.get(&key(3), &mut v), None);
    assert_eq!(table.len(), 2);
    // Shrinking a value to inline frees its block.
    table.upsert(key(1), ObjectMeta(3), b"short").unwrap();
    assert_eq!(table.value_blocks_in_use(), 1);
    table.upsert(key(3), ObjectMeta(1), &long).unwrap();
    table.check_invariants().unwrap();
    assert_eq!(
        table.upsert(key(4), ObjectMeta(1), &[0u8; 1025]),
        Err(RobinhoodError::ValueTooLarge {
            len: 1025,
            max: 1024
        })
    );
}

/// The value a writer stores at `version`: its length depends on the version
/// (alternating inline and out of line), and every 8-byte word names the
/// version, so any mix of two writes shows.
fn versioned_value(version: u64) -> Vec<u8> {
    let len = if version.is_multiple_of(3) {
        40
    } else {
        300 + (version as usize * 37) % 700
    };
    let mut v: Vec<u8> = (0..len.div_ceil(8))
        .flat_map(|i| (version ^ (i as u64) << 48).to_le_bytes())
        .collect();
    v.truncate(len);
    v
}

/// One writer keeps updating a few keys (inline ↔ out of line) in a heap with
/// only two spare blocks, so freed blocks are reused within a few updates,
/// while a reader runs the NIC lookup state machine over word-by-word Acquire
/// copies of the region. Every value the reader returns must be exactly the
/// value of the version its metadata names, and versions of a key never go
/// backwards (the table only moves forward: a slot is read before the block).
#[test]
fn concurrent_nic_reader_never_returns_a_torn_or_wrong_version_value() {
    const KEYS: u64 = 6;
    const UPDATES_MIN: u64 = 50_000;
    const LOOKUPS_MIN: u64 = 20_000;
    let config = TableConfig {
        value_blocks: Some(KEYS as usize + 2),
        ..TableConfig::new(64, 1000)
    };
    let mut table = RobinhoodTable::new(&config).unwrap();
    let layout = *table.layout();
    let mut version = 0u64;
    for id in 0..KEYS {
        version += 1;
        table
            .upsert(key(id), ObjectMeta(version), &versioned_value(version))
            .unwrap();
    }
    let done = Arc::new(AtomicBool::new(false));
    let lookups = Arc::new(AtomicU64::new(0));
    let reader = {
        let (region, done, lookups) = (table.region().clone(), done.clone(), lookups.clone());
        std::thread::spawn(move || {
            let mut hints = SegmentHints::new(&layout);
            let mut buf = Vec::new();
            let mut last = [0u64; KEYS as usize];
            let (mut restarts, mut failed, mut long) = (0u64, 0u64, 0u64);
            let mut n = 0u64;
            while !done.load(Ordering::Acquire) {
                let id = n % KEYS;
                n += 1;
                let (mut l, mut step) = RobinhoodLookup::start(&layout, &hints, key(id));
                let (meta, value) = loop {
                    match step {
                        Next::Read(v, n) => {
                            read_vector(&region, &v[..n], &mut buf).unwrap();
                            step = l.advance(&layout, &mut hints, &buf);
                        }
                        Next::Found { meta, value } => break Some((meta, value.to_vec())),
                        Next::Absent => panic!("{:?} is always present", key(id)),
                        Next::Failed(LookupError::Torn) => break None,
                        Next::Failed(e) => panic!("{e}"),
                    }
                }
                .map_or((None, Vec::new()), |(m, v)| (Some(m), v));
                let Some(meta) = meta else {
                    failed += 1;
                    continue;
                };
                let ver = meta.version();
                assert!(
                    value == versioned_value(ver),
                    "{:?} at version {ver}: {} B starting {:?} is not that version's value",
                    key(id),
                    value.len(),
                    &value[..value.len().min(16)]
                );
                assert!(ver >= last[id as usize], "version went backwards");
                last[id as usize] = ver;
                long += (value.len() > ROBINHOOD_VALUE_INLINE_BYTES_MAX) as u64;
                // Main read, block read: more means a block was reused under us.
                restarts += (l.reads > 2) as u64;
                lookups.store(n, Ordering::Relaxed);
            }
            (n, restarts, failed, long)
        })
    };
    let mut updates = 0u64;
    while (updates < UPDATES_MIN || lookups.load(Ordering::Relaxed) < LOOKUPS_MIN)
        && !reader.is_finished()
        && updates < 50 * UPDATES_MIN
    {
        version += 1;
        let id = version % KEYS;
        table
            .upsert(key(id), ObjectMeta(version), &versioned_value(version))
            .unwrap();
        updates += 1;
    }
    done.store(true, Ordering::Release);
    let (n, restarts, failed, long) = reader.join().expect("reader saw a bad value");
    table.check_invariants().unwrap();
    eprintln!(
        "{updates} updates, {n} lookups ({long} long values, {restarts} restarted, {failed} gave up)"
    );
    assert!(long > 0, "the reader followed out-of-line references");
}

/// The batch API (Dandelion §6) with long values: a batch of upserts (inline,
/// out of line, and one that overflows the heap), gets and removes has the
/// results and the final table of the same operations issued one at a time.
#[test]
fn batches_with_long_values_match_one_at_a_time() {
    use splitkv_host::table::{Request, Upserted};
    let config = TableConfig {
        value_blocks: Some(3),
        ..TableConfig::new(32, 1024)
    };
    let values: Vec<Vec<u8>> = (0..8u8)
        .map(|i| vec![i; [8, 300, 1024, 256, 257][i as usize % 5]])
        .collect();
    let mut one = RobinhoodTable::new(&config).unwrap();
    let mut singles = Vec::new();
    for (i, v) in values.iter().enumerate() {
        singles.push(one.upsert(key(i as u64 % 5), ObjectMeta(i as u64), v));
    }
    assert!(one.remove(&key(1)));
    let mut batched = RobinhoodTable::new(&config).unwrap();
    let (mut g0, mut g2) = (Vec::new(), Vec::new());
    let mut reqs: Vec<Request<'_>> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Request::upsert(key(i as u64 % 5), ObjectMeta(i as u64), v))
        .collect();
    reqs.push(Request::remove(key(1)));
    reqs.push(Request::get(key(0), &mut g0));
    reqs.push(Request::get(key(2), &mut g2));
    batched.batch(&mut reqs);
    for (i, single) in singles.iter().enumerate() {
        let Request::Upsert { result, .. } = &reqs[i] else {
            unreachable!()
        };
        let as_bool = result.clone().unwrap().map(|u| u == Upserted::Inserted);
        assert_eq!(&as_bool, single, "request {i}");
    }
    assert!(
        singles
            .iter()
            .any(|r| matches!(r, Err(RobinhoodError::ValueHeapFull { blocks: 3 }))),
        "the heap filled up: {singles:?}"
    );
    assert!(matches!(reqs[8], Request::Remove { result: true, .. }));
    drop(reqs);
    let mut v = Vec::new();
    for id in 0..5 {
        let meta = one.get(&key(id), &mut v);
        assert_eq!(batched.get(&key(id), &mut g0), meta);
        assert_eq!(g0, v);
    }
    // Blocks went to requests 1, 2 and 4; the long updates 6 and 7 found the
    // heap full and left their keys as they were.
    assert_eq!(singles[7], Err(RobinhoodError::ValueHeapFull { blocks: 3 }));
    assert_eq!(one.get(&key(2), &mut v), Some(ObjectMeta(2)));
    assert_eq!(v, values[2]);
    one.check_invariants().unwrap();
    batched.check_invariants().unwrap();
}

/// Values of exactly 4 KiB (the node limit) in a table whose D_m = 1 and
/// small buckets push many keys into overflow chains: insert, update (long to
/// long, long to inline, inline to long), read back, delete; every block is
/// freed again, and 4097 bytes is a typed error that changes nothing.
#[test]
fn four_kib_values_insert_update_read_and_delete_through_overflow() {
    let config = TableConfig {
        d_max: 1,
        bucket_slots: 2,
        overflow_fraction_pct: 50,
        ..TableConfig::new(64, VALUE_BYTES_MAX)
    };
    let mut table = RobinhoodTable::new(&config).unwrap();
    let value = |id: u64, v: u64| -> Vec<u8> {
        (0..VALUE_BYTES_MAX as u64)
            .map(|i| (id * 13 + v * 5 + i) as u8)
            .collect()
    };
    let mut model = Model::new();
    for id in 0..56 {
        let meta = ObjectMeta::new(1, ObjectFlags::READABLE);
        assert_eq!(table.upsert(key(id), meta, &value(id, 1)), Ok(true));
        model.insert(key(id), (meta.0, value(id, 1)));
    }
    assert!(table.overflow_len() > 0, "D_m = 1 sends keys to overflow");
    assert_agrees(&table, &model, &[]);
    for id in 0..56 {
        let meta = ObjectMeta::new(2, ObjectFlags::READABLE);
        let new = match id % 3 {
            0 => value(id, 2),
            1 => b"inline now".to_vec(),
            _ => value(id, 2)[..300].to_vec(),
        };
        assert_eq!(table.upsert(key(id), meta, &new), Ok(false));
        model.insert(key(id), (meta.0, new));
    }
    assert_agrees(&table, &model, &[]);
    assert_eq!(
        table.upsert(key(0), ObjectMeta(9 << 3), &[1u8; VALUE_BYTES_MAX + 1]),
        Err(RobinhoodError::ValueTooLarge {
            len: VALUE_BYTES_MAX + 1,
            max: VALUE_BYTES_MAX
        })
    );
    assert_agrees(&table, &model, &[]);
    for id in (0..56).step_by(2) {
        assert!(table.remove(&key(id)));
        model.remove(&key(id));
    }
    assert_agrees(&table, &model, &[key(0), key(2)]);
    for id in (1..56).step_by(2) {
        assert!(table.remove(&key(id)));
    }
    assert_eq!(table.len(), 0);
    assert_eq!(table.value_blocks_in_use(), 0);
    assert_eq!(table.buckets_in_use(), 0);
}
