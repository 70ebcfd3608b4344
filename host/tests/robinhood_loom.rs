//! Loom models of the host Robinhood table (Xenic §4.1.2) racing a simulated
//! DMA read of the same region (Xenic §4.1.3): the reader copies a key's probe
//! range word by word in increasing address order with
//! [`read_acquire`] and decodes it with [`find_in_slots`], as the NIC runtime
//! does. The host writes only with the slot seqlock and the DMA-consistent
//! swap order described in `host/src/table/robinhood/`.
//!
//! * [`insert_swap_never_hides_the_displaced_key`]: an insert that displaces
//!   an existing key one slot forward; a reader of that key finds it intact or
//!   reports `Torn`, never absent and never with a torn value.
//! * [`three_slot_swap_chain_never_hides_the_middle_key`] and
//!   [`three_slot_swap_chain_never_hides_the_last_key`]: the same for an insert
//!   that carries two keys one slot on each (one model per carried key: a
//!   model with both readers takes ~90 s at preemption bound 2).
//! * [`update_is_atomic_for_a_dma_reader`]: a value update racing a reader;
//!   the reader sees the old or the new object whole, or `Torn`.
//! * [`delete_shift_never_hides_a_key_from_a_checked_reader`]: a delete whose
//!   backward shift moves a key one slot down, racing the NIC's own
//!   [`RobinhoodLookup`] state machine, which checks the segment's move sequence: it
//!   finds the key or starts over, never reports it absent. Its non-vacuity
//!   partner [`delete_shift_can_hide_a_key_from_an_unchecked_reader`] shows a
//!   reader without that check does miss the key in some execution.
//! * [`reused_value_block_is_never_taken_for_the_slots_value`]: two updates of
//!   an out-of-line value (the second reuses the block the first freed) racing
//!   a reader that copies the slot and then the block it names, as the NIC
//!   lookup does; the reader returns a whole value of the version its slot
//!   named, or sees `Torn`/`Stale` (the NIC would start over).
//!
//! Not part of the default tests: run `scripts/loom` (it builds with
//! `RUSTFLAGS="--cfg loom"`, which swaps `Region`'s words and the table's
//! fences for loom's via `splitkv_layout::sync`). The table is tiny (8 home
//! slots, `d_max` 1, 8-byte values, no overflow pool), so a slot is 6 words and
//! a probe range 12.
#![cfg(loom)]

use loom::thread;
use splitkv_host::table::{RobinhoodTable, TableConfig, TableLayout};
use splitkv_layout::robinhood_layout::{
    decode_slot, decode_value_block, find_in_slots, read_acquire, BlockRead, SlotRead, SlotValue,
};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, Region};
use splitkv_nic::index::hints::SegmentHints;
use splitkv_nic::index::robinhood_lookup::RobinhoodLookup;
use splitkv_nic::index::Next;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use splitkv_layout::sync::model;

/// 7 keys → 8 home slots; one segment; no overflow buckets.
fn config() -> TableConfig {
    TableConfig {
        capacity_keys: 7,
        d_max: 1,
        value_bytes_max: 8,
        segment_slots: 8,
        overflow_fraction_pct: 0,
        bucket_slots: 1,
        value_blocks: None,
    }
}

/// The first key (table 0, increasing id) whose home slot is `home`.
fn key_with_home(layout: &TableLayout, home: usize, skip: &[Key]) -> Key {
    (0..)
        .map(|id| Key::new(0, id))
        .find(|k| layout.home_slot(k) == home && !skip.contains(k))
        .expect("some id hashes to every home slot")
}

/// Keys `(c, a, b)`: `c` and `b` have home 2, `a` home 3. With `c` at slot 2
/// and `a` at slot 3, inserting `b` takes slot 3 (displacement 1 beats `a`'s
/// 0) and carries `a` to slot 4: a swap chain of two slots.
fn keys(layout: &TableLayout) -> (Key, Key, Key) {
    let c = key_with_home(layout, 2, &[]);
    let a = key_with_home(layout, 3, &[]);
    let b = key_with_home(layout, 2, &[c]);
    (c, a, b)
}

/// A key with home 4: placed at slot 4 next to [`keys`]' `a`, it is carried on
/// to slot 5 by `a` when `b` is inserted (a swap chain of three slots).
fn key_home_4(layout: &TableLayout) -> Key {
    key_with_home(layout, 4, &[])
}

/// Metadata whose version is the value's byte, so a reader can tell a torn
/// (meta, value) pair.
fn meta(v: u8) -> ObjectMeta {
    ObjectMeta::new(v as u64, ObjectFlags::READABLE)
}

fn val(v: u8) -> [u8; 8] {
    [v; 8]
}

/// What a simulated DMA lookup of `key` saw.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// The object, with the byte its value and version agree on.
    Object(u8),
    /// Some slot of the probe range was torn: the NIC would retry.
    Torn,
    /// Not in the probe range.
    Absent,
}

/// One DMA read of `key`'s probe range (`home ..= home + d_max`), decoded.
/// Asserts that a found object is whole: 8 equal value bytes matching the
/// version in its metadata.
fn dma_lookup(layout: &TableLayout, region: &Region, key: &Key) -> Seen {
    let (offset, len) = layout.probe_range(key);
    let mut buf = vec![0u8; len];
    read_acquire(region, offset, &mut buf).unwrap();
    match find_in_slots(layout, &buf, key).expect("a copied probe range always decodes") {
        None => Seen::Absent,
        Some(SlotRead::Torn) => Seen::Torn,
        Some(SlotRead::Object {
            key: k,
            meta,
            value,
        }) => {
            assert_eq!(k, *key);
            let value = value.inline().expect("8-byte values are inline");
            assert_eq!(value.len(), 8, "value length");
            assert!(value.iter().all(|&b| b == value[0]), "torn value {value:?}");
            assert_eq!(
                meta.version(),
                value[0] as u64,
                "meta and value from different writes"
            );
            Seen::Object(value[0])
        }
        Some(SlotRead::Empty) => unreachable!("find_in_slots never returns Empty"),
    }
}

#[test]
fn insert_swap_never_hides_the_displaced_key() {
    model(3, || {
        let mut t = RobinhoodTable::new(&config()).unwrap();
        let layout = *t.layout();
        let (c, a, b) = keys(&layout);
        assert!(t.upsert(c, meta(1), &val(1)).unwrap());
        assert!(t.upsert(a, meta(2), &val(2)).unwrap());
        let reader = {
            let region = t.region().clone();
            thread::spawn(move || dma_lookup(&layout, &region, &a))
        };
        assert!(t.upsert(b, meta(3), &val(3)).unwrap());
        let seen = reader.join().unwrap();
        assert!(
            seen == Seen::Object(2) || seen == Seen::Torn,
            "a reader of a key present throughout saw {seen:?}"
        );
        // The insert really displaced `a` (so the swap order was exercised).
        assert_eq!(t.stats().moved_by_inserts, 1);
        assert_eq!(dma_lookup(&layout, t.region(), &a), Seen::Object(2));
        assert_eq!(dma_lookup(&layout, t.region(), &b), Seen::Object(3));
    });
}

/// Inserts `b` into slots 2 (`c`), 3 (`a`), 4 (`d`): `a` is carried from slot
/// 3 to 4 and `d` from 4 to 5, while a reader looks up the carried key
/// `reader_key` (`a`'s probe range is slots 3..=4, `d`'s 4..=5).
fn three_slot_swap_chain(reader_key: fn(a: Key, d: Key) -> Key) {
    model(3, move || {
        let mut t = RobinhoodTable::new(&config()).unwrap();
        let layout = *t.layout();
        let (c, a, b) = keys(&layout);
        let d = key_home_4(&layout);
        for (k, v) in [(c, 1), (a, 2), (d, 4)] {
            assert!(t.upsert(k, meta(v), &val(v)).unwrap());
        }
        let k = reader_key(a, d);
        let v = if k == a { 2 } else { 4 };
        let reader = {
            let region = t.region().clone();
            thread::spawn(move || dma_lookup(&layout, &region, &k))
        };
        assert!(t.upsert(b, meta(3), &val(3)).unwrap());
        let seen = reader.join().unwrap();
        assert!(
            seen == Seen::Object(v) || seen == Seen::Torn,
            "a reader of a key present throughout saw {seen:?}"
        );
        assert_eq!(t.stats().moved_by_inserts, 2);
        for (k, v) in [(c, 1), (a, 2), (b, 3), (d, 4)] {
            assert_eq!(dma_lookup(&layout, t.region(), &k), Seen::Object(v));
        }
    });
}

#[test]
fn three_slot_swap_chain_never_hides_the_middle_key() {
    three_slot_swap_chain(|a, _| a);
}

#[test]
fn three_slot_swap_chain_never_hides_the_last_key() {
    three_slot_swap_chain(|_, d| d);
}

#[test]
fn update_is_atomic_for_a_dma_reader() {
    model(3, || {
        let mut t = RobinhoodTable::new(&config()).unwrap();
        let layout = *t.layout();
        let (_, a, _) = keys(&layout);
        assert!(t.upsert(a, meta(1), &val(1)).unwrap());
        let reader = {
            let region = t.region().clone();
            thread::spawn(move || dma_lookup(&layout, &region, &a))
        };
        assert!(!t.upsert(a, meta(2), &val(2)).unwrap());
        let seen = reader.join().unwrap();
        assert!(
            matches!(seen, Seen::Object(1 | 2) | Seen::Torn),
            "a reader of a key present throughout saw {seen:?}"
        );
        assert_eq!(dma_lookup(&layout, t.region(), &a), Seen::Object(2));
    });
}

/// What one attempt of the NIC's [`RobinhoodLookup`] of `key` saw: it stops when the
/// lookup asks for a third DMA vector, which only a restart (moved objects) or
/// a torn-slot retry needs; the undisturbed paths take at most two (probe with
/// move sequence, then segment header).
fn nic_lookup_once(layout: &TableLayout, region: &Region, key: Key) -> Seen {
    let mut hints = SegmentHints::new(layout);
    let (mut l, mut step) = RobinhoodLookup::start(layout, &hints, key);
    let mut buf = Vec::new();
    loop {
        match step {
            Next::Read(v, n) => {
                if l.reads > 2 {
                    return Seen::Torn;
                }
                buf.clear();
                for r in &v[..n] {
                    let at = buf.len();
                    buf.resize(at + r.len, 0);
                    read_acquire(region, r.offset, &mut buf[at..]).unwrap();
                }
                step = l.advance(layout, &mut hints, &buf);
            }
            Next::Found { meta, value } => {
                assert_eq!(value.len(), 8, "value length");
                assert!(value.iter().all(|&b| b == value[0]), "torn value {value:?}");
                assert_eq!(meta.version(), value[0] as u64);
                return Seen::Object(value[0]);
            }
            Next::Absent => return Seen::Absent,
            Next::Failed(e) => panic!("lookup failed: {e}"),
        }
    }
}

/// `c` at slot 2 (home 2) and `a` at slot 3 (home 2, displaced): deleting
/// `c` shifts `a` back to slot 2 and clears slot 3, while `reader` looks `a`
/// up.
fn delete_shift(reader: fn(&TableLayout, &Region, Key) -> Seen) -> Seen {
    let mut t = RobinhoodTable::new(&config()).unwrap();
    let layout = *t.layout();
    let c = key_with_home(&layout, 2, &[]);
    let a = key_with_home(&layout, 2, &[c]);
    assert!(t.upsert(c, meta(1), &val(1)).unwrap());
    assert!(t.upsert(a, meta(2), &val(2)).unwrap());
    let handle = {
        let region = t.region().clone();
        thread::spawn(move || reader(&layout, &region, a))
    };
    assert!(t.remove(&c));
    let seen = handle.join().unwrap();
    // The delete really shifted `a` back (so the window was exercised).
    assert_eq!(t.stats().moved_by_shifts, 1);
    assert_eq!(nic_lookup_once(&layout, t.region(), a), Seen::Object(2));
    t.check_invariants().unwrap();
    seen
}

#[test]
fn delete_shift_never_hides_a_key_from_a_checked_reader() {
    model(3, || {
        let seen = delete_shift(nic_lookup_once);
        assert!(
            seen == Seen::Object(2) || seen == Seen::Torn,
            "a NIC lookup of a key present throughout saw {seen:?}"
        );
    });
}

#[test]
fn delete_shift_can_hide_a_key_from_an_unchecked_reader() {
    static MISSED: AtomicBool = AtomicBool::new(false);
    model(3, || {
        let seen = delete_shift(|layout, region, key| dma_lookup(layout, region, &key));
        if seen == Seen::Absent {
            MISSED.store(true, Relaxed);
        }
    });
    assert!(
        MISSED.load(Relaxed),
        "no execution hid the shifted key from a reader without the move check: \
         the checked model above would prove nothing"
    );
}

/// What a simulated DMA lookup of an out-of-line value saw.
#[derive(Debug, PartialEq, Eq)]
enum SeenLong {
    /// A whole value of this version.
    Value(u8),
    /// The slot or the block was torn, or the block was reused: start over.
    Retry,
}

/// Out-of-line value of version `v`: `257 + v` bytes, all `v`.
fn long_val(v: u8) -> Vec<u8> {
    vec![v; 257 + v as usize]
}

/// Copies the words `words` (increasing word indexes) of the `len`-byte record
/// at `offset` into a zeroed image, in increasing address order with Acquire
/// loads. A DMA read of a subset of a record's words in address order is still
/// covered by the seqlock argument of `splitkv_layout::robinhood_layout` (head first, tail
/// last); reading only the words the check needs keeps the model small.
fn read_words(region: &Region, offset: usize, len: usize, words: &[usize]) -> Vec<u8> {
    let mut image = vec![0u8; len];
    for &w in words {
        read_acquire(region, offset + 8 * w, &mut image[8 * w..8 * w + 8]).unwrap();
    }
    image
}

/// Reads `key`'s home slot, then the block it references, like
/// `splitkv_nic::index::robinhood_lookup` (which reads `d_i + k` whole slots and the
/// whole block). Of the slot it copies the sequence, info, key, meta and
/// reference words; of the block the sequence and header words and the first
/// and last value word, and checks that both value words are the version's.
fn dma_lookup_long(layout: &TableLayout, region: &Region, key: &Key) -> SeenLong {
    let slot_words = layout.slot_bytes() / 8;
    let slot = read_words(
        region,
        layout.slot_offset(layout.home_slot(key)),
        layout.slot_bytes(),
        &[0, 1, 2, 3, 4, 5, slot_words - 1],
    );
    let (meta, block, len) = match decode_slot(layout, &slot).expect("a slot decodes") {
        SlotRead::Torn => return SeenLong::Retry,
        SlotRead::Object {
            key: k,
            meta,
            value: SlotValue::OutOfLine { block, len },
        } if k == *key => (meta, block, len),
        other => panic!("{key:?} always holds a long value, read {other:?}"),
    };
    let block_words = layout.value_block_bytes() / 8;
    let last_value_word = 4 + len.div_ceil(8) - 1;
    let bytes = read_words(
        region,
        layout.value_block_offset(block.block),
        layout.value_block_bytes(),
        &[0, 1, 2, 3, 4, last_value_word, block_words - 1],
    );
    match decode_value_block(layout, &bytes, key, meta, len, block).expect("a block decodes") {
        BlockRead::Value(value) => {
            let v = meta.version() as u8;
            assert_eq!(
                value.len(),
                long_val(v).len(),
                "length is not version {v}'s"
            );
            assert_eq!(value[..8], [v; 8], "first value word is not version {v}'s");
            assert!(
                value[8 * (last_value_word - 4)..].iter().all(|&b| b == v),
                "last value word is not version {v}'s"
            );
            SeenLong::Value(v)
        }
        BlockRead::Torn | BlockRead::Stale => SeenLong::Retry,
    }
}

#[test]
fn reused_value_block_is_never_taken_for_the_slots_value() {
    model(2, || {
        // Values up to 264 B: 256 inline, 264 in a block; two blocks, so the
        // second update reuses the block the first one freed.
        let cfg = TableConfig {
            value_bytes_max: 264,
            value_blocks: Some(2),
            ..config()
        };
        let mut t = RobinhoodTable::new(&cfg).unwrap();
        let layout = *t.layout();
        let (_, a, _) = keys(&layout);
        assert!(t.upsert(a, meta(1), &long_val(1)).unwrap());
        let reader = {
            let region = t.region().clone();
            thread::spawn(move || dma_lookup_long(&layout, &region, &a))
        };
        assert!(!t.upsert(a, meta(2), &long_val(2)).unwrap());
        assert!(!t.upsert(a, meta(3), &long_val(3)).unwrap());
        let seen = reader.join().unwrap();
        assert!(
            matches!(seen, SeenLong::Value(1..=3) | SeenLong::Retry),
            "reader saw {seen:?}"
        );
        assert_eq!(dma_lookup_long(&layout, t.region(), &a), SeenLong::Value(3));
    });
}
