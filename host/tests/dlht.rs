//! Tests of the DLHT (`splitkv_host::table::dlht`, Dandelion §6): a property
//! test against a `HashMap` model (with resizes in every state a single thread
//! can observe), batch-versus-single equivalence, bounds and typed errors, the
//! DMA byte format. (Multi-threaded stress with resizes under way:
//! `tests/dlht_stress.rs`.)

use std::sync::Arc;

mod dlht_support;

use dlht_support::{contents, meta_for, Model};
use proptest::prelude::*;
use rand::{Rng as _, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_host::table::dlht::{
    Dlht, DlhtConfig, DlhtError, Request, DLHT_VALUE_BYTES_MAX, DLHT_VALUE_INLINE_BYTES_MAX,
    TABLE_ID_MAX,
};
use splitkv_host::table::Upserted;
use splitkv_layout::dlht_layout::{
    bin_index, decode_bin, decode_link, decode_out_of_line, SlotValue, LINE_BYTES,
};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};

// ---------------------------------------------------------------------------
// Model-based property test.

#[derive(Debug, Clone)]
enum Op {
    Insert(Key, Vec<u8>),
    Put(Key, Vec<u8>),
    Upsert(Key, Vec<u8>),
    Remove(Key),
    Get(Key),
    /// `upsert_if_newer` with this version.
    UpsertIfNewer(Key, Vec<u8>, u64),
    /// Start doubling, then move `chunks` chunks of bins (0 = leave it all to
    /// the writers).
    Resize(usize),
    FinishResize,
}

fn key() -> impl Strategy<Value = Key> {
    (0u32..3, 0u64..150).prop_map(|(t, id)| Key::new(t, id))
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => prop::collection::vec(any::<u8>(), 0..=DLHT_VALUE_INLINE_BYTES_MAX),
        3 => prop::collection::vec(any::<u8>(), DLHT_VALUE_INLINE_BYTES_MAX + 1..=48),
        1 => prop::collection::vec(any::<u8>(), 200..=600),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (key(), value()).prop_map(|(k, v)| Op::Insert(k, v)),
        4 => (key(), value()).prop_map(|(k, v)| Op::Put(k, v)),
        4 => (key(), value()).prop_map(|(k, v)| Op::Upsert(k, v)),
        5 => key().prop_map(Op::Remove),
        5 => key().prop_map(Op::Get),
        3 => (key(), value(), 0u64..6).prop_map(|(k, v, ver)| Op::UpsertIfNewer(k, v, ver)),
        1 => (0usize..3).prop_map(Op::Resize),
        1 => Just(Op::FinishResize),
    ]
}

fn apply(t: &Dlht, model: &mut Model, op: &Op) {
    match op {
        Op::Insert(k, v) => {
            let got = t.insert(*k, meta_for(v), v).unwrap();
            let absent = !model.contains_key(k);
            assert_eq!(got, absent, "insert {k:?}");
            if absent {
                model.insert(*k, (meta_for(v), v.clone()));
            }
        }
        Op::Put(k, v) => {
            let got = t.put(*k, meta_for(v), v).unwrap();
            let present = model.contains_key(k);
            assert_eq!(got, present, "put {k:?}");
            if present {
                model.insert(*k, (meta_for(v), v.clone()));
            }
        }
        Op::Upsert(k, v) => {
            let got = t.upsert(*k, meta_for(v), v).unwrap();
            assert_eq!(got, !model.contains_key(k), "upsert {k:?}");
            model.insert(*k, (meta_for(v), v.clone()));
        }
        Op::Remove(k) => assert_eq!(t.remove(k), model.remove(k).is_some(), "remove {k:?}"),
        Op::UpsertIfNewer(k, v, ver) => {
            let meta = ObjectMeta::new(*ver, ObjectFlags::READABLE);
            let got = t.upsert_if_newer(*k, meta, v).unwrap();
            let want = match model.get(k) {
                Some((m, _)) if m.version() >= *ver => Upserted::Stale(*m),
                Some(_) => Upserted::Updated,
                None => Upserted::Inserted,
            };
            assert_eq!(got, want, "upsert_if_newer {k:?} v{ver}");
            if !matches!(want, Upserted::Stale(_)) {
                model.insert(*k, (meta, v.clone()));
            }
        }
        Op::Get(k) => {
            let mut out = vec![0xAA; 3];
            let got = t.get(k, &mut out);
            match model.get(k) {
                Some((m, v)) => {
                    assert_eq!(got, Some(*m), "get {k:?}");
                    assert_eq!(&out, v, "get {k:?} value");
                }
                None => {
                    assert_eq!(got, None, "get {k:?}");
                    assert!(out.is_empty());
                }
            }
        }
        Op::Resize(chunks) => {
            if t.begin_resize().is_ok() {
                t.help_resize(*chunks);
            }
        }
        Op::FinishResize => t.finish_resize(),
    }
    assert_eq!(t.len(), model.len());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn agrees_with_hashmap(cap in 0usize..24, ops in prop::collection::vec(op(), 1..400)) {
        let t = Dlht::with_capacity(cap);
        let mut model = Model::new();
        for op in &ops {
            apply(&t, &mut model, op);
        }
        prop_assert_eq!(contents(&t), model.clone());
        t.finish_resize();
        prop_assert_eq!(contents(&t), model);
    }

    #[test]
    fn batch_agrees_with_single_ops(
        pre in prop::collection::vec(op(), 0..100),
        batch in prop::collection::vec(op(), 1..40),
    ) {
        let a = Dlht::with_capacity(4);
        let b = Dlht::with_capacity(4);
        let mut model = Model::new();
        for op in &pre {
            apply(&a, &mut model.clone(), op);
            apply(&b, &mut model, op);
        }
        let mut reqs: Vec<Request> = batch
            .iter()
            .filter_map(|op| match op {
                Op::Insert(k, v) => Some(Request::insert(*k, meta_for(v), v.clone())),
                Op::Put(k, v) => Some(Request::put(*k, meta_for(v), v.clone())),
                Op::Upsert(k, v) => Some(Request::upsert(*k, meta_for(v), v.clone())),
                Op::Remove(k) => Some(Request::delete(*k)),
                Op::Get(k) => Some(Request::get(*k)),
                _ => None,
            })
            .collect();
        a.batch(&mut reqs);
        for r in &reqs {
            match r {
                Request::Get { key, value, result } => {
                    let mut out = Vec::new();
                    prop_assert_eq!(*result, b.get(key, &mut out));
                    prop_assert_eq!(value, &out);
                }
                Request::Insert { key, meta, value, result } => {
                    prop_assert_eq!(*result, b.insert(*key, *meta, value));
                }
                Request::Put { key, meta, value, result } => {
                    prop_assert_eq!(*result, b.put(*key, *meta, value));
                }
                Request::Upsert { key, meta, value, result } => {
                    prop_assert_eq!(*result, b.upsert(*key, *meta, value));
                }
                Request::Delete { key, result } => prop_assert_eq!(*result, b.remove(key)),
            }
        }
        prop_assert_eq!(contents(&a), contents(&b));
        prop_assert_eq!(a.len(), b.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The host tables' shared batch type through the DLHT (the host log
    /// worker's path): results and final contents equal single operations.
    #[test]
    fn apply_batch_agrees_with_single_ops(
        pre in prop::collection::vec(op(), 0..100),
        batch in prop::collection::vec(op(), 1..70),
    ) {
        use splitkv_host::table::Request as TableRequest;
        let a = Dlht::with_capacity(4);
        let b = Dlht::with_capacity(4);
        let mut model = Model::new();
        for op in &pre {
            apply(&a, &mut model.clone(), op);
            apply(&b, &mut model, op);
        }
        let gets = batch.iter().filter(|op| matches!(op, Op::Get(_))).count();
        let mut bufs = vec![Vec::new(); gets];
        let mut bufs = bufs.iter_mut();
        let mut reqs: Vec<TableRequest<'_, DlhtError>> = batch
            .iter()
            .filter_map(|op| match op {
                Op::Upsert(k, v) => Some(TableRequest::upsert(*k, meta_for(v), v)),
                Op::UpsertIfNewer(k, v, ver) => Some(TableRequest::upsert_if_newer(
                    *k,
                    ObjectMeta::new(*ver, ObjectFlags::READABLE),
                    v,
                )),
                Op::Remove(k) => Some(TableRequest::remove(*k)),
                Op::Get(k) => Some(TableRequest::get(*k, bufs.next().unwrap())),
                _ => None,
            })
            .collect();
        a.apply_batch(&mut reqs);
        for r in &reqs {
            match r {
                TableRequest::Get { key, value, result } => {
                    let mut out = Vec::new();
                    prop_assert_eq!(*result, b.get(key, &mut out));
                    prop_assert_eq!(&**value, &out);
                }
                TableRequest::Upsert { key, meta, value, only_if_newer, result } => {
                    let single = if *only_if_newer {
                        b.upsert_if_newer(*key, *meta, value)
                    } else {
                        b.upsert(*key, *meta, value).map(|inserted| match inserted {
                            true => Upserted::Inserted,
                            false => Upserted::Updated,
                        })
                    };
                    prop_assert_eq!(*result, Some(single));
                }
                TableRequest::Remove { key, result } => prop_assert_eq!(*result, b.remove(key)),
            }
        }
        prop_assert_eq!(contents(&a), contents(&b));
        prop_assert_eq!(a.len(), b.len());
    }
}

// ---------------------------------------------------------------------------
// Bounds, errors, layout.

#[test]
fn upsert_if_newer_applies_only_newer_versions() {
    let t = Dlht::with_capacity(8);
    let k = Key::new(1, 7);
    let m = |v| ObjectMeta::new(v, ObjectFlags::READABLE);
    let mut out = Vec::new();
    assert_eq!(t.upsert_if_newer(k, m(5), b"five"), Ok(Upserted::Inserted));
    assert_eq!(
        t.upsert_if_newer(k, m(5), b"again"),
        Ok(Upserted::Stale(m(5)))
    );
    assert_eq!(
        t.upsert_if_newer(k, m(4), b"old"),
        Ok(Upserted::Stale(m(5)))
    );
    // A stale write is not an error even with a value the table refuses.
    let huge = vec![0u8; DLHT_VALUE_BYTES_MAX + 1];
    assert_eq!(t.upsert_if_newer(k, m(3), &huge), Ok(Upserted::Stale(m(5))));
    assert_eq!(t.get(&k, &mut out), Some(m(5)));
    assert_eq!(out, b"five");
    assert!(matches!(
        t.upsert_if_newer(k, m(9), &huge),
        Err(DlhtError::ValueTooLarge { .. })
    ));
    let long = vec![3u8; 40];
    assert_eq!(t.upsert_if_newer(k, m(6), &long), Ok(Upserted::Updated));
    assert_eq!(t.get(&k, &mut out), Some(m(6)));
    assert_eq!(out, long);
    assert_eq!(t.upsert_if_newer(k, m(7), b"7"), Ok(Upserted::Updated));
    assert_eq!(t.get(&k, &mut out), Some(m(7)));
    assert_eq!(out, b"7");
    assert_eq!(t.len(), 1);
}

/// Threads apply the same records in different orders: whatever the order
/// and the races, every key ends at its highest version, with that version's
/// value (a "get, then upsert" pair would let an older record win a race).
#[test]
fn upsert_if_newer_races_keep_the_newest_version() {
    const KEYS: u64 = 64;
    const VERSIONS: u64 = 40;
    let t = Arc::new(Dlht::with_capacity(16));
    let threads: Vec<_> = (0..3u64)
        .map(|id| {
            let t = t.clone();
            std::thread::spawn(move || {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x9E37_79B9 ^ (id + 1));
                let mut recs: Vec<(u64, u64)> = (0..KEYS)
                    .flat_map(|k| (1..=VERSIONS).map(move |v| (k, v)))
                    .collect();
                for i in (1..recs.len()).rev() {
                    let j = rng.gen_range(0..=i);
                    recs.swap(i, j);
                }
                for (k, v) in recs {
                    let meta = ObjectMeta::new(v, ObjectFlags::READABLE);
                    let value = (k * 1000 + v).to_le_bytes();
                    t.upsert_if_newer(Key::new(0, k), meta, &value).unwrap();
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    let mut out = Vec::new();
    for k in 0..KEYS {
        let m = t.get(&Key::new(0, k), &mut out).expect("present");
        assert_eq!(m.version(), VERSIONS, "key {k}");
        assert_eq!(out, (k * 1000 + VERSIONS).to_le_bytes(), "key {k}");
    }
    assert_eq!(t.len(), KEYS as usize);
}

#[test]
fn table_is_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Dlht>();
    send_sync::<Request>();
}

#[test]
fn typed_errors_at_the_bounds() {
    let t = Dlht::with_capacity(8);
    let m = ObjectMeta::new(1, ObjectFlags::empty());
    let big = vec![7u8; DLHT_VALUE_BYTES_MAX + 1];
    assert_eq!(
        t.insert(Key::new(0, 1), m, &big),
        Err(DlhtError::ValueTooLarge {
            len: DLHT_VALUE_BYTES_MAX + 1,
            max: DLHT_VALUE_BYTES_MAX
        })
    );
    let max = vec![7u8; DLHT_VALUE_BYTES_MAX];
    assert_eq!(t.insert(Key::new(0, 1), m, &max), Ok(true));
    let mut out = Vec::new();
    assert_eq!(t.get(&Key::new(0, 1), &mut out), Some(m));
    assert_eq!(out, max);

    let far = Key::new(TABLE_ID_MAX + 1, 5);
    let err = Err(DlhtError::KeyOutOfRange {
        table: TABLE_ID_MAX + 1,
        max: TABLE_ID_MAX,
    });
    assert_eq!(t.insert(far, m, b"x"), err);
    assert_eq!(t.upsert(far, m, b"x"), err);
    assert_eq!(t.put(far, m, b"x"), err);
    assert_eq!(t.get(&far, &mut out), None);
    assert!(!t.remove(&far));
    assert_eq!(t.insert(Key::new(TABLE_ID_MAX, u64::MAX), m, b""), Ok(true));
    assert_eq!(t.get(&Key::new(TABLE_ID_MAX, u64::MAX), &mut out), Some(m));
    assert!(out.is_empty());
    assert_eq!(t.len(), 2);
}

#[test]
fn full_when_chain_or_pool_is_exhausted_and_growth_is_barred() {
    // One bin that may not grow: its chain (bin + link buckets from a pool of
    // 1 + 2 slack lines) holds 8 keys.
    let t = Dlht::with_config(DlhtConfig {
        capacity_keys: 2,
        bins_max: 1,
    });
    let m = ObjectMeta::default();
    let mut stored = 0u64;
    let err = loop {
        match t.insert(Key::new(0, stored), m, b"v") {
            Ok(true) => stored += 1,
            Ok(false) => unreachable!(),
            Err(e) => break e,
        }
        assert!(stored < 100);
    };
    assert_eq!(err, DlhtError::Full { bins_max: 1 });
    assert_eq!(stored, 8);
    assert_eq!(t.len(), 8);
    assert_eq!(t.begin_resize(), Err(DlhtError::Full { bins_max: 1 }));
    // A full chain has no free slot for the copy-on-write of a Put either.
    assert_eq!(
        t.put(Key::new(0, 0), m, b"w"),
        Err(DlhtError::Full { bins_max: 1 })
    );
    // A delete frees a slot at once: a Put can use it (and frees the old copy).
    assert!(t.remove(&Key::new(0, 3)));
    assert_eq!(t.put(Key::new(0, 0), m, b"w"), Ok(true));
    assert_eq!(t.put(Key::new(0, 0), m, b"x"), Ok(true));
    assert_eq!(t.insert(Key::new(0, 3), m, b"v"), Ok(true));
    assert_eq!(
        t.insert(Key::new(0, 100), m, b"v"),
        Err(DlhtError::Full { bins_max: 1 })
    );
    let all = contents(&t);
    assert_eq!(all.len(), 8);
    assert_eq!(all[&Key::new(0, 0)].1, b"x");
}

#[test]
fn deletes_free_slots_for_reuse_without_growth() {
    let t = Dlht::with_config(DlhtConfig {
        capacity_keys: 64,
        bins_max: 32,
    });
    let m = ObjectMeta::default();
    for round in 0..200u64 {
        for i in 0..40 {
            assert_eq!(
                t.insert(Key::new(1, round * 1000 + i), m, b"12345678"),
                Ok(true)
            );
        }
        for i in 0..40 {
            assert!(t.remove(&Key::new(1, round * 1000 + i)));
        }
    }
    assert!(t.is_empty());
    assert_eq!(t.bin_count(), 32);
    assert!(
        t.resizes_completed() > 0,
        "link buckets were never reclaimed"
    );
}

#[test]
fn grows_under_load_and_keeps_everything() {
    let t = Dlht::with_capacity(1);
    let mut model = Model::new();
    for i in 0..20_000u64 {
        let v: Vec<u8> = i
            .to_le_bytes()
            .iter()
            .copied()
            .cycle()
            .take((i % 12) as usize)
            .collect();
        t.insert(Key::new((i % 5) as u32, i), meta_for(&v), &v)
            .unwrap();
        model.insert(Key::new((i % 5) as u32, i), (meta_for(&v), v));
    }
    assert!(t.bin_count() >= 8192, "bins {}", t.bin_count());
    assert!(!t.resize_in_progress());
    assert_eq!(contents(&t), model);
    // Bytes per pair stays within a small multiple of the 28-byte payload.
    let inline_only = Dlht::with_capacity(100_000);
    for i in 0..100_000u64 {
        inline_only
            .insert(Key::new(0, i), ObjectMeta::default(), &i.to_le_bytes())
            .unwrap();
    }
    let per_pair = inline_only.memory_bytes() as f64 / 100_000.0;
    assert!(per_pair < 64.0, "{per_pair} B per pair");
}

#[test]
fn dma_copies_decode_to_what_get_returns() {
    let t = Dlht::with_capacity(64);
    let mut model = Model::new();
    for i in 0..150u64 {
        let len = [0usize, 3, 8, 9, 40][i as usize % 5];
        let v: Vec<u8> = (0..len).map(|j| (i as u8).wrapping_add(j as u8)).collect();
        let k = Key::new((i % 3) as u32, i * 7919);
        t.insert(k, meta_for(&v), &v).unwrap();
        model.insert(k, (meta_for(&v), v));
    }
    let view = t.dma_view();
    assert_eq!(view.bin_count, t.bin_count());
    let mut seen = 0;
    for b in 0..view.bin_count {
        let mut bytes = [0u8; LINE_BYTES];
        assert!(t.copy_bin(b, &mut bytes));
        let bin = decode_bin(&bytes).unwrap();
        let mut lines = vec![bin];
        let mut next = bin.next_link;
        while next != 0 {
            assert!(t.copy_link(next as usize, &mut bytes));
            let l = decode_link(&bytes, &bin.header, b as u64, lines.len()).unwrap();
            next = l.next_link;
            lines.push(l);
        }
        for slot in lines.iter().flat_map(|l| l.slots.iter().flatten()) {
            assert_eq!(bin_index(&slot.key, view.bin_count), b);
            let (m, v) = &model[&slot.key];
            assert_eq!(slot.meta, *m);
            match slot.value {
                SlotValue::Inline { .. } => assert_eq!(slot.value.inline_bytes().unwrap(), v),
                SlotValue::OutOfLine { addr } => {
                    // SAFETY (test): the table is quiescent and owns the record;
                    // it holds 8 + len bytes.
                    let rec = unsafe { std::slice::from_raw_parts(addr as *const u8, 8 + v.len()) };
                    assert_eq!(decode_out_of_line(rec).unwrap(), &v[..]);
                }
            }
            seen += 1;
        }
    }
    assert_eq!(seen, model.len());
    let mut bytes = [0u8; LINE_BYTES];
    assert!(!t.copy_bin(view.bin_count, &mut bytes));
    assert!(!t.copy_link(0, &mut bytes));
}

#[test]
fn decoders_never_panic_on_random_lines() {
    let mut x = 0x1234_5678_9abc_def0u64;
    let mut bytes = [0u8; LINE_BYTES];
    for _ in 0..20_000 {
        for chunk in bytes.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Bias toward plausible headers: few high bits.
            chunk.copy_from_slice(&(x & (x >> 3)).to_le_bytes());
        }
        if let Ok(bin) = decode_bin(&bytes) {
            let _ = decode_link(&bytes, &bin.header, 0, 1);
        }
        let _ = decode_bin(&bytes[..63]);
        let _ = decode_out_of_line(&bytes);
    }
}

/// Values of exactly 4 KiB (the node limit, out of line in the DLHT): insert,
/// update (long to long, long to inline and back), read back through `get`,
/// batches and iteration, delete; every record is reclaimed.
#[test]
fn four_kib_values_insert_update_read_and_delete() {
    use splitkv_layout::VALUE_BYTES_MAX;
    let t = Dlht::with_capacity(64);
    let m = |v| ObjectMeta::new(v, ObjectFlags::READABLE);
    let value = |id: u64, v: u64| -> Vec<u8> {
        (0..VALUE_BYTES_MAX as u64)
            .map(|i| (id * 13 + v * 5 + i) as u8)
            .collect()
    };
    for id in 0..200u64 {
        assert_eq!(t.insert(Key::new(0, id), m(1), &value(id, 1)), Ok(true));
    }
    let mut out = Vec::new();
    for id in 0..200u64 {
        let want = match id % 3 {
            0 => value(id, 2),
            1 => b"8 bytes!".to_vec(),
            _ => value(id, 2)[..300].to_vec(),
        };
        assert_eq!(t.put(Key::new(0, id), m(2), &want), Ok(true));
        assert_eq!(t.get(&Key::new(0, id), &mut out), Some(m(2)));
        assert!(out == want, "key {id}");
        // Back to a full-size value.
        assert_eq!(
            t.upsert_if_newer(Key::new(0, id), m(3), &value(id, 3)),
            Ok(Upserted::Updated)
        );
    }
    let keys: Vec<Key> = (0..200u64).map(|id| Key::new(0, id)).collect();
    let mut reqs: Vec<Request> = keys.iter().map(|k| Request::get(*k)).collect();
    t.batch(&mut reqs);
    for (id, r) in reqs.iter().enumerate() {
        let Request::Get {
            result, value: v, ..
        } = r
        else {
            unreachable!()
        };
        assert_eq!(*result, Some(m(3)));
        assert!(*v == value(id as u64, 3), "batch get {id}");
    }
    let mut seen = 0;
    t.for_each(|k, meta, v| {
        assert_eq!(meta, m(3));
        assert!(v == value(k.id, 3));
        seen += 1;
    });
    assert_eq!(seen, 200);
    for k in &keys {
        assert!(t.remove(k));
        assert_eq!(t.get(k, &mut out), None);
    }
    assert!(t.is_empty());
}
