//! Multi-threaded stress of the DLHT (`splitkv_host::table::dlht`, Dandelion
//! §6): workers on private and shared keys with resizes under way, hot bins
//! with same-size rehashes, and readers that must never miss a key during a
//! resize. (Single-thread properties, bounds and the DMA format:
//! `tests/dlht.rs`.)

mod dlht_support;

use dlht_support::{contents, meta_for, sum, Model};
use rand::{Rng as _, RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_host::table::dlht::{Dlht, DlhtConfig};
use splitkv_layout::Key;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn stress_value(rng: &mut Xoshiro256PlusPlus, tag: u64) -> Vec<u8> {
    let len = [0usize, 1, 5, 8, 8, 8, 9, 17, 64][rng.gen_range(0..9) as usize];
    let mut v: Vec<u8> = tag
        .to_le_bytes()
        .iter()
        .copied()
        .cycle()
        .take(len)
        .collect();
    if let Some(b) = v.first_mut() {
        *b ^= rng.next_u64() as u8;
    }
    v
}

/// What a worker did last to a shared key: `Some(value)` after an upsert,
/// `None` after a remove.
type LastOps = HashMap<u64, Option<Vec<u8>>>;

/// `ops` random operations: on `own_keys` keys only this worker touches
/// (results checked exactly) and, one op in four, on `shared_keys` keys every
/// worker touches (values checked for tearing; last writes recorded).
fn worker(t: &Dlht, id: u64, ops: usize, own_keys: u64, shared_keys: u64) -> (Model, LastOps) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(id * 1_000_003 + 17);
    let mut model = Model::new();
    let mut last = LastOps::new();
    let mut out = Vec::new();
    for n in 0..ops as u64 {
        if rng.gen_range(0..4) == 0 {
            // Shared keys: any outcome is possible; check integrity and record.
            let k = rng.gen_range(0..shared_keys);
            let key = Key::new(2, k);
            match rng.gen_range(0..4) {
                0 | 1 => {
                    let v = stress_value(&mut rng, id << 32 | n);
                    t.upsert(key, meta_for(&v), &v).unwrap();
                    last.insert(k, Some(v));
                }
                2 => {
                    t.remove(&key);
                    last.insert(k, None);
                }
                _ => {
                    if let Some(m) = t.get(&key, &mut out) {
                        assert_eq!(m.version(), sum(&out), "torn read of {key:?}");
                    }
                }
            }
            continue;
        }
        // Own keys: results are exactly determined by this thread's history.
        let key = Key::new(1, id << 40 | rng.gen_range(0..own_keys));
        let v = stress_value(&mut rng, n);
        match rng.gen_range(0..6) {
            0 | 1 => {
                let absent = !model.contains_key(&key);
                assert_eq!(t.insert(key, meta_for(&v), &v).unwrap(), absent);
                if absent {
                    model.insert(key, (meta_for(&v), v));
                }
            }
            2 => {
                let present = model.contains_key(&key);
                assert_eq!(t.put(key, meta_for(&v), &v).unwrap(), present);
                if present {
                    model.insert(key, (meta_for(&v), v));
                }
            }
            3 => assert_eq!(t.remove(&key), model.remove(&key).is_some()),
            _ => {
                let got = t.get(&key, &mut out);
                assert_eq!(got, model.get(&key).map(|e| e.0), "get {key:?}");
                if got.is_some() {
                    assert_eq!(out, model[&key].1);
                }
            }
        }
    }
    (model, last)
}

fn check_final(t: &Dlht, results: Vec<(Model, LastOps)>, shared_keys: u64) {
    let all = contents(t);
    let mut expected_own = Model::new();
    for (m, _) in &results {
        expected_own.extend(m.iter().map(|(k, e)| (*k, e.clone())));
    }
    let own: Model = all
        .iter()
        .filter(|(k, _)| k.table == 1)
        .map(|(k, e)| (*k, e.clone()))
        .collect();
    assert_eq!(own, expected_own);
    let mut shared_present = 0;
    for k in 0..shared_keys {
        let key = Key::new(2, k);
        let got = all.get(&key).map(|(m, v)| {
            assert_eq!(m.version(), sum(v));
            v.clone()
        });
        shared_present += got.is_some() as usize;
        let candidates: Vec<&Option<Vec<u8>>> =
            results.iter().filter_map(|(_, l)| l.get(&k)).collect();
        if candidates.is_empty() {
            assert_eq!(got, None);
        } else {
            assert!(
                candidates.contains(&&got),
                "shared key {k}: final {got:?} is no thread's last write"
            );
        }
    }
    assert_eq!(all.len(), expected_own.len() + shared_present);
    assert_eq!(t.len(), all.len());
}

#[test]
fn stress_threads_with_resizes() {
    // Starts tiny, so the table doubles many times while the workers run; a
    // fourth thread keeps starting resizes and moving bins slowly.
    let t = Arc::new(Dlht::with_capacity(2));
    let stop = Arc::new(AtomicBool::new(false));
    let resizer = {
        let (t, stop) = (t.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut started = 0;
            while !stop.load(Ordering::Relaxed) {
                if t.bin_count() < 1 << 14 && t.begin_resize() == Ok(true) {
                    started += 1;
                }
                for _ in 0..8 {
                    t.help_resize(1);
                    std::thread::yield_now();
                }
            }
            started
        })
    };
    let workers: Vec<_> = (0..3u64)
        .map(|id| {
            let t = t.clone();
            std::thread::spawn(move || worker(&t, id, 100_000, 3000, 48))
        })
        .collect();
    let results: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    let started = resizer.join().unwrap();
    assert!(started > 0);
    check_final(&t, results, 48);
    t.finish_resize();
    assert!(!t.resize_in_progress());
    assert_eq!(t.len(), contents(&t).len());
}

#[test]
fn stress_hot_bins_with_same_size_rehashes() {
    // Four bins that may not grow and at most ten live keys: every thread
    // works on the same few headers, while a fourth thread rehashes the table
    // at the same size over and over, so bins are frozen and moved under
    // contention (and deletes and Puts also use up the small link pool, which
    // starts rehashes by itself).
    let t = Arc::new(Dlht::with_config(DlhtConfig {
        capacity_keys: 8,
        bins_max: 4,
    }));
    let stop = Arc::new(AtomicBool::new(false));
    let helper = {
        let (t, stop) = (t.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                t.begin_rehash().unwrap();
                t.help_resize(1);
            }
        })
    };
    let workers: Vec<_> = (0..3u64)
        .map(|id| {
            let t = t.clone();
            std::thread::spawn(move || worker(&t, id, 100_000, 2, 4))
        })
        .collect();
    let results: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    helper.join().unwrap();
    t.finish_resize();
    assert_eq!(t.bin_count(), 4);
    assert!(t.resizes_completed() > 0);
    check_final(&t, results, 4);
}

#[test]
fn readers_never_miss_a_key_during_resize() {
    let t = Arc::new(Dlht::with_capacity(16));
    let n = 5000u64;
    for i in 0..n {
        let v = (i * 3).to_le_bytes()[..(i % 9) as usize].to_vec();
        t.insert(Key::new(0, i), meta_for(&v), &v).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (t, stop) = (t.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut out = Vec::new();
                let mut rounds = 0;
                while !stop.load(Ordering::Relaxed) || rounds == 0 {
                    for i in (r..n).step_by(2) {
                        let m = t
                            .get(&Key::new(0, i), &mut out)
                            .expect("key lost during resize");
                        assert_eq!(m.version(), sum(&out));
                        assert_eq!(out.len(), (i % 9) as usize);
                    }
                    rounds += 1;
                }
                rounds
            })
        })
        .collect();
    // Meanwhile: grow three times, moving bins a chunk at a time, with writes to
    // other keys in between.
    for round in 0..3u64 {
        t.begin_resize().unwrap();
        while t.help_resize(1) > 0 {
            let v = round.to_le_bytes();
            t.upsert(Key::new(1, round), meta_for(&v), &v).unwrap();
            std::thread::yield_now();
        }
        t.finish_resize();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert_eq!(t.len() as u64, n + 3);
}
