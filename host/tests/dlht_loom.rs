//! Loom models of the DLHT's concurrency protocols (Dandelion §6): the slot
//! state machine of one bin (insert vs delete vs get, racing inserts, a Put vs
//! a reader, two inserts racing to add a link bucket) and the resize hand-off
//! (writers racing threads that move a bin).
//!
//! Not part of the default tests: run `scripts/loom` (it builds with
//! `RUSTFLAGS="--cfg loom"`, which swaps the table's atomics for loom's via
//! `host/src/table/sync.rs`, a re-export of `splitkv_layout::sync`). Every table here has one bin (two slots plus
//! link buckets), so all keys share a chain and a header.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use splitkv_host::table::dlht::{Dlht, DlhtConfig};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};

use splitkv_layout::sync::model;

/// Metadata whose version is the value's first byte, so a reader can tell a
/// torn (meta, value) pair.
fn meta(v: u8) -> ObjectMeta {
    ObjectMeta::new(v as u64, ObjectFlags::READABLE)
}

fn get(t: &Dlht, k: Key) -> Option<u8> {
    let mut out = Vec::new();
    t.get(&k, &mut out).map(|m| {
        assert_eq!(out.len(), 8, "value length");
        assert!(out.iter().all(|&b| b == out[0]), "torn value {out:?}");
        assert_eq!(
            m.version(),
            out[0] as u64,
            "meta and value from different writes"
        );
        out[0]
    })
}

fn val(v: u8) -> [u8; 8] {
    [v; 8]
}

const K1: Key = Key::new(0, 1);
const K2: Key = Key::new(0, 2);
const K3: Key = Key::new(1, 1);

#[test]
fn insert_vs_remove_vs_get_on_one_bin() {
    model(3, || {
        let t = Arc::new(Dlht::with_capacity(1));
        assert_eq!(t.bin_count(), 1);
        t.insert(K1, meta(1), &val(1)).unwrap();
        let a = {
            let t = t.clone();
            thread::spawn(move || t.remove(&K1))
        };
        let b = {
            let t = t.clone();
            thread::spawn(move || get(&t, K1))
        };
        assert!(t.insert(K2, meta(2), &val(2)).unwrap());
        assert!(a.join().unwrap());
        let seen = b.join().unwrap();
        assert!(seen.is_none() || seen == Some(1));
        assert_eq!(get(&t, K1), None);
        assert_eq!(get(&t, K2), Some(2));
        assert_eq!(t.len(), 1);
        // The freed slot is reusable at once.
        assert!(t.insert(K3, meta(3), &val(3)).unwrap());
        assert_eq!(t.iter().count(), 2);
    });
}

#[test]
fn racing_inserts_of_one_key_leave_one_copy() {
    model(3, || {
        let t = Arc::new(Dlht::with_capacity(1));
        let a = {
            let t = t.clone();
            thread::spawn(move || t.insert(K1, meta(1), &val(1)).unwrap())
        };
        let won_main = t.insert(K1, meta(2), &val(2)).unwrap();
        let won_a = a.join().unwrap();
        assert!(won_main ^ won_a, "exactly one insert wins");
        assert_eq!(get(&t, K1), Some(if won_a { 1 } else { 2 }));
        assert_eq!(t.len(), 1);
        assert_eq!(t.iter().count(), 1);
    });
}

#[test]
fn put_is_atomic_for_readers_and_racing_upserts() {
    model(2, || {
        let t = Arc::new(Dlht::with_capacity(1));
        t.insert(K1, meta(1), &val(1)).unwrap();
        let reader = {
            let t = t.clone();
            thread::spawn(move || get(&t, K1))
        };
        let upserter = {
            let t = t.clone();
            thread::spawn(move || t.upsert(K1, meta(3), &val(3)).unwrap())
        };
        assert!(t.put(K1, meta(2), &val(2)).unwrap());
        assert!(!upserter.join().unwrap(), "K1 was present throughout");
        let seen = reader.join().unwrap().expect("K1 was present throughout");
        assert!((1..=3).contains(&seen));
        let last = get(&t, K1).unwrap();
        assert!(last == 2 || last == 3);
        assert_eq!(t.len(), 1);
        assert_eq!(t.iter().count(), 1);
    });
}

#[test]
fn resize_handoff_writer_vs_mover() {
    model(2, || {
        let t = Arc::new(Dlht::with_capacity(1));
        t.insert(K1, meta(1), &val(1)).unwrap();
        t.insert(K2, meta(2), &val(2)).unwrap();
        // The next generation exists; no bin has moved yet.
        assert!(t.begin_resize().unwrap());
        let mover = {
            let t = t.clone();
            thread::spawn(move || t.help_resize(1))
        };
        let writer = {
            let t = t.clone();
            thread::spawn(move || {
                assert!(!t.upsert(K1, meta(5), &val(5)).unwrap());
                assert!(t.remove(&K2));
            })
        };
        let seen = get(&t, K1).expect("K1 was present throughout");
        assert!(seen == 1 || seen == 5);
        mover.join().unwrap();
        writer.join().unwrap();
        t.finish_resize();
        assert_eq!(t.bin_count(), 2);
        assert_eq!(get(&t, K1), Some(5));
        assert_eq!(get(&t, K2), None, "a deleted key came back with the move");
        assert_eq!(t.len(), 1);
        assert_eq!(t.iter().count(), 1);
    });
}

#[test]
fn resize_handoff_two_movers_and_an_insert() {
    model(2, || {
        let t = Arc::new(Dlht::with_capacity(1));
        t.insert(K1, meta(1), &val(1)).unwrap();
        assert!(t.begin_resize().unwrap());
        // Both threads move bin 0 (the mover by chunk, the writer because its
        // bin is frozen or because writes help first).
        let mover = {
            let t = t.clone();
            thread::spawn(move || t.help_resize(1))
        };
        assert!(t.insert(K2, meta(2), &val(2)).unwrap());
        mover.join().unwrap();
        t.finish_resize();
        assert_eq!(get(&t, K1), Some(1));
        assert_eq!(get(&t, K2), Some(2));
        assert_eq!(t.len(), 2);
        assert_eq!(t.iter().count(), 2, "a key was copied twice");
    });
}

#[test]
fn racing_inserts_extend_the_chain_once() {
    model(2, || {
        // One bin that may not grow (so the load bound starts no resize).
        let t = Arc::new(Dlht::with_config(DlhtConfig {
            capacity_keys: 1,
            bins_max: 1,
        }));
        // The bin's two slots are taken: both inserts below need a link bucket.
        t.insert(K1, meta(1), &val(1)).unwrap();
        t.insert(K2, meta(2), &val(2)).unwrap();
        let k4 = Key::new(2, 9);
        let a = {
            let t = t.clone();
            thread::spawn(move || t.insert(K3, meta(3), &val(3)).unwrap())
        };
        let reader = {
            let t = t.clone();
            thread::spawn(move || get(&t, K3))
        };
        assert!(t.insert(k4, meta(4), &val(4)).unwrap());
        assert!(a.join().unwrap());
        let seen = reader.join().unwrap();
        assert!(seen.is_none() || seen == Some(3));
        for (k, v) in [(K1, 1), (K2, 2), (K3, 3), (k4, 4)] {
            assert_eq!(get(&t, k), Some(v));
        }
        assert_eq!(t.len(), 4);
        assert_eq!(t.iter().count(), 4);
        assert_eq!(
            t.resizes_completed(),
            0,
            "a link bucket, not a resize, made room"
        );
    });
}
