//! Batched Robinhood access (Dandelion §6): `RobinhoodTable::batch` and
//! `get_batch` must give the results and the final table of the same operations
//! issued one at a time, including errors, stale conditional writes and batches
//! that touch one key several times.

use proptest::prelude::*;
use splitkv_host::table::{Request, RobinhoodError, RobinhoodTable, TableConfig, Upserted};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
use std::collections::HashMap;

const KEY_POOL: u64 = 60;

fn key(id: u64) -> Key {
    Key::new((id % 2) as u32, id)
}

#[derive(Debug, Clone)]
enum Op {
    Get {
        id: u64,
    },
    Upsert {
        id: u64,
        len: usize,
        fill: u8,
        version: u64,
        only_if_newer: bool,
    },
    Remove {
        id: u64,
    },
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..KEY_POOL).prop_map(|id| Op::Get { id }),
        4 => (0..KEY_POOL, 0usize..20, any::<u8>(), 0u64..6, any::<bool>()).prop_map(
            |(id, len, fill, version, only_if_newer)| Op::Upsert { id, len, fill, version, only_if_newer }
        ),
        2 => (0..KEY_POOL).prop_map(|id| Op::Remove { id }),
    ]
}

fn config_strategy() -> impl Strategy<Value = TableConfig> {
    (
        1usize..=4,
        prop::sample::select(vec![8usize, 16]),
        prop::sample::select(vec![1usize, 4, 16]),
        prop::sample::select(vec![0usize, 10, 100]),
        prop::sample::select(vec![1usize, 8]),
    )
        .prop_map(
            |(d_max, value_bytes_max, segment_slots, pct, bucket_slots)| TableConfig {
                // 57 keys fill 64 home slots to 89%; the pool of 60 can overfill it.
                capacity_keys: 57,
                d_max,
                value_bytes_max,
                segment_slots,
                overflow_fraction_pct: pct,
                bucket_slots,
                value_blocks: None,
            },
        )
}

/// What one request returned, comparable across the two execution paths.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RequestOutcome {
    Got(Option<ObjectMeta>, Vec<u8>),
    Upserted(Result<Upserted, RobinhoodError>),
    Removed(bool),
}

/// Runs `op` alone, through the single-request API. A conditional upsert is
/// written the way the host log worker applied records before batching: a Get,
/// a version comparison, then an upsert.
fn one_at_a_time(table: &mut RobinhoodTable, op: &Op, value_in: &[u8]) -> RequestOutcome {
    match *op {
        Op::Get { id } => {
            let mut value = Vec::new();
            let meta = table.get(&key(id), &mut value);
            RequestOutcome::Got(meta, value)
        }
        Op::Upsert {
            id,
            version,
            only_if_newer,
            ..
        } => {
            let meta = ObjectMeta::new(version, ObjectFlags::READABLE);
            if only_if_newer {
                let mut scratch = Vec::new();
                if let Some(stored) = table.get(&key(id), &mut scratch) {
                    if stored.version() >= version {
                        return RequestOutcome::Upserted(Ok(Upserted::Stale(stored)));
                    }
                }
            }
            let result = table.upsert(key(id), meta, value_in).map(|inserted| {
                if inserted {
                    Upserted::Inserted
                } else {
                    Upserted::Updated
                }
            });
            RequestOutcome::Upserted(result)
        }
        Op::Remove { id } => RequestOutcome::Removed(table.remove(&key(id))),
    }
}

fn contents(table: &RobinhoodTable) -> HashMap<Key, (ObjectMeta, Vec<u8>)> {
    let mut all = HashMap::new();
    table.for_each(|k, meta, v| {
        assert!(all.insert(k, (meta, v.to_vec())).is_none());
    });
    all
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn batch_equals_one_at_a_time(
        config in config_strategy(),
        batches in prop::collection::vec(prop::collection::vec(op_strategy(), 0..40), 1..25),
    ) {
        let mut batched = RobinhoodTable::new(&config).unwrap();
        let mut single = RobinhoodTable::new(&config).unwrap();
        let keys: Vec<Key> = (0..KEY_POOL + 3).map(key).collect();
        let mut get_values: Vec<Vec<u8>> = (0..40).map(|_| Vec::with_capacity(config.value_bytes_max)).collect();
        let mut pool_values = vec![Vec::new(); keys.len()];
        let mut pool_metas = vec![None; keys.len()];
        for ops in &batches {
            // Values by length, filled per op so equal ops write equal bytes.
            let upsert_values: Vec<Vec<u8>> = ops.iter().map(|op| match *op {
                Op::Upsert { len, fill, .. } => vec![fill; len],
                _ => Vec::new(),
            }).collect();
            let expected: Vec<RequestOutcome> = ops.iter().zip(&upsert_values)
                .map(|(op, v)| one_at_a_time(&mut single, op, v))
                .collect();

            let mut reqs: Vec<Request<'_>> = Vec::with_capacity(ops.len());
            let mut get_bufs = get_values.iter_mut();
            for (op, v) in ops.iter().zip(&upsert_values) {
                reqs.push(match *op {
                    Op::Get { id } => Request::get(key(id), get_bufs.next().unwrap()),
                    Op::Upsert { id, version, only_if_newer, .. } => {
                        let meta = ObjectMeta::new(version, ObjectFlags::READABLE);
                        if only_if_newer {
                            Request::upsert_if_newer(key(id), meta, v)
                        } else {
                            Request::upsert(key(id), meta, v)
                        }
                    }
                    Op::Remove { id } => Request::remove(key(id)),
                });
            }
            batched.batch(&mut reqs);
            let got: Vec<RequestOutcome> = reqs.into_iter().map(|req| match req {
                Request::Get { value, result, .. } => RequestOutcome::Got(result, value.clone()),
                Request::Upsert { result, .. } => RequestOutcome::Upserted(result.expect("executed")),
                Request::Remove { result, .. } => RequestOutcome::Removed(result),
            }).collect();
            prop_assert_eq!(&got, &expected);

            batched.check_invariants().unwrap();
            prop_assert_eq!(batched.len(), single.len());
            prop_assert_eq!(batched.stats(), single.stats());
            prop_assert_eq!(contents(&batched), contents(&single));

            batched.get_batch(&keys, &mut pool_values, &mut pool_metas);
            let mut value = Vec::new();
            for (i, k) in keys.iter().enumerate() {
                prop_assert_eq!(pool_metas[i], single.get(k, &mut value), "{:?}", k);
                prop_assert_eq!(&pool_values[i], &value, "{:?}", k);
            }
        }
    }
}

/// Errors inside a batch are reported per request and do not stop the rest.
#[test]
fn errors_are_per_request() {
    let config = TableConfig {
        capacity_keys: 7,
        d_max: 1,
        value_bytes_max: 8,
        segment_slots: 4,
        overflow_fraction_pct: 0,
        bucket_slots: 1,
        value_blocks: None,
    };
    let mut table = RobinhoodTable::new(&config).unwrap();
    let meta = ObjectMeta::new(1, ObjectFlags::READABLE);
    let long = [0u8; 9];
    let short = [7u8; 8];
    // Far more keys than the 8 home slots + 1 tail slot: some inserts are Full.
    let mut reqs: Vec<Request<'_>> = vec![Request::upsert(key(0), meta, &long)];
    reqs.extend((0..30).map(|id| Request::upsert(key(id), meta, &short)));
    table.batch(&mut reqs);
    assert!(
        matches!(
            reqs[0],
            Request::Upsert {
                result: Some(Err(RobinhoodError::ValueTooLarge { len: 9, max: 8 })),
                ..
            }
        ),
        "{:?}",
        reqs[0]
    );
    let inserted = reqs[1..]
        .iter()
        .filter(|r| {
            matches!(
                r,
                Request::Upsert {
                    result: Some(Ok(Upserted::Inserted)),
                    ..
                }
            )
        })
        .count();
    let full = reqs[1..]
        .iter()
        .filter(|r| {
            matches!(
                r,
                Request::Upsert {
                    result: Some(Err(RobinhoodError::Full)),
                    ..
                }
            )
        })
        .count();
    assert_eq!(inserted + full, 30);
    assert!(full > 0 && inserted > 0, "{inserted} inserted, {full} full");
    assert_eq!(table.len(), inserted);
    table.check_invariants().unwrap();
}

/// A batch with a Get after a Remove and an Upsert of the same key sees each
/// step, as one-at-a-time execution would.
#[test]
fn later_requests_see_earlier_ones() {
    let mut table = RobinhoodTable::new(&TableConfig::new(100, 8)).unwrap();
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    let v1 = ObjectMeta::new(1, ObjectFlags::READABLE);
    let v2 = ObjectMeta::new(2, ObjectFlags::READABLE);
    let mut reqs = [
        Request::get(key(5), &mut a),
        Request::upsert(key(5), v2, b"two"),
        Request::upsert_if_newer(key(5), v1, b"one"),
        Request::get(key(5), &mut b),
        Request::remove(key(5)),
        Request::remove(key(5)),
        Request::get(key(5), &mut c),
    ];
    table.batch(&mut reqs);
    let results: Vec<String> = reqs
        .iter()
        .map(|r| match r {
            Request::Get { result, value, .. } => {
                format!("get {:?} {value:?}", result.map(|m| m.version()))
            }
            Request::Upsert { result, .. } => format!("upsert {result:?}"),
            Request::Remove { result, .. } => format!("remove {result}"),
        })
        .collect();
    assert_eq!(
        results,
        [
            "get None []".to_string(),
            "upsert Some(Ok(Inserted))".to_string(),
            format!("upsert Some(Ok(Stale({v2:?})))"),
            "get Some(2) [116, 119, 111]".to_string(),
            "remove true".to_string(),
            "remove false".to_string(),
            "get None []".to_string(),
        ]
    );
    assert!(table.is_empty());
}

/// The prefetch window follows the occupancy unless fixed.
#[test]
fn prefetch_slots_follow_occupancy() {
    let config = TableConfig::new(921, 8); // 1024 home slots
    let mut table = RobinhoodTable::new(&config).unwrap();
    assert_eq!(table.layout().home_slots(), 1024);
    assert_eq!(table.prefetch_slots(), 1);
    let meta = ObjectMeta::new(1, ObjectFlags::READABLE);
    let mut filled = 0;
    for (pct, slots) in [(50, 2), (75, 3), (90, 6)] {
        while table.len() < 1024 * pct / 100 {
            table.upsert(key(filled), meta, b"v").unwrap();
            filled += 1;
        }
        // Objects in overflow buckets do not lengthen main-array probes.
        let main = table.len() - table.overflow_len();
        let expected = (1 + 1024usize.div_ceil(1024 - main)).div_ceil(2);
        assert!(
            expected == slots || expected == slots - 1,
            "{pct}%: {expected}"
        );
        assert_eq!(table.prefetch_slots(), expected, "{pct}%");
    }
    table.set_prefetch_slots(Some(100));
    assert_eq!(table.prefetch_slots(), config.d_max + 1);
    table.set_prefetch_slots(Some(0));
    assert_eq!(table.prefetch_slots(), 1);
    table.set_prefetch_slots(None);
    assert!(table.prefetch_slots() >= 5);
    // Prefetching any key, present or not, is harmless.
    for id in 0..2000 {
        table.prefetch(&key(id));
    }
    table.check_invariants().unwrap();
}
