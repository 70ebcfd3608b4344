//! Unit tests of the link pool (`pool.rs`, `bin.rs`, `resize.rs`) in states
//! the public API cannot arrange deterministically: a resize whose move is
//! stalled by hand (a helper that claimed a chunk of bins and was preempted)
//! while writes go into the bins already moved (through the API every write
//! moves a chunk first), and a lost race to install a link bucket.

use super::bin::{ExtendError, Gen};
use super::pool::Draw;
use super::*;
use splitkv_layout::dlht_layout::{bin_index, SlotState};
use splitkv_layout::ObjectFlags;

fn meta() -> ObjectMeta {
    ObjectMeta::new(1, ObjectFlags::READABLE)
}

/// The first `count` keys of table 0 (ids from `*next` on, which this
/// advances) that `pick` accepts.
fn keys_where(next: &mut u64, count: usize, pick: impl Fn(&Key) -> bool) -> Vec<Key> {
    let mut keys = Vec::with_capacity(count);
    while keys.len() < count {
        let key = Key::new(0, *next);
        *next += 1;
        if pick(&key) {
            keys.push(key);
        }
    }
    keys
}

/// Starts a resize with `start` and moves every bin of the current generation
/// except `stalled`, whose chunk a (simulated) preempted helper holds: no
/// write helps the resize any more, and it stays under way until a thread
/// moves `stalled` by itself. Returns the bin counts (old, new).
fn stall_resize_at(t: &Dlht, stalled: usize, start: fn(&Dlht) -> bool) -> (usize, usize) {
    assert!(start(t));
    let guard = pin();
    let g = t.current(&guard);
    let n = g.bin_count();
    g.move_cursor.store(n, Ordering::Relaxed);
    for b in (0..n).filter(|&b| b != stalled) {
        t.move_bin(g, b, &guard);
    }
    let next: &Gen = g.next_gen().expect("the resize allocated its generation");
    assert!(t.resize_in_progress());
    (n, next.bin_count())
}

/// Inserts keys into moved bins while the move of `stalled` (whose keys need
/// link buckets in the new generation) is stalled: far more keys than the new
/// generation's link pool has lines, at most 12 per destination bin (so no
/// chain reaches its bound and every request for room asks the pool), then
/// checks that every key is there.
fn insert_into_moved_bins(t: &Dlht, stalled: usize, stalled_keys: &[Key], new_bins: usize) {
    let old_bins = t.bin_count();
    let mut next_id = 1 << 32;
    let per_bin = 12;
    for d in (0..new_bins).filter(|d| d % old_bins != stalled) {
        for key in keys_where(&mut next_id, per_bin, |k| bin_index(k, new_bins) == d) {
            assert_eq!(t.insert(key, meta(), &key.id.to_le_bytes()), Ok(true));
        }
    }
    t.finish_resize();
    let mut out = Vec::new();
    for key in stalled_keys {
        assert_eq!(t.get(key, &mut out), Some(meta()), "{key:?} lost");
        assert_eq!(out, key.id.to_le_bytes());
    }
    let expected = stalled_keys.len() + per_bin * (new_bins - new_bins / old_bins);
    assert_eq!(t.len(), expected);
    assert_eq!(t.iter().count(), expected);
}

/// Doubling: the keys of the stalled bin all go to one destination chain,
/// which needs link buckets, while writers fill the pool of the new
/// generation through the destinations that are already open.
#[test]
fn writes_into_moved_bins_leave_room_for_a_stalled_doubling() {
    let t = Dlht::with_capacity(256);
    let n = t.bin_count();
    assert_eq!(n, 128);
    let stalled = n - 1;
    let mut next_id = 0;
    let stalled_keys = keys_where(&mut next_id, 6, |k| bin_index(k, 2 * n) == stalled + n);
    for key in &stalled_keys {
        assert_eq!(t.insert(*key, meta(), &key.id.to_le_bytes()), Ok(true));
    }
    let (_, new_bins) = stall_resize_at(&t, stalled, |t| t.begin_resize() == Ok(true));
    assert_eq!(new_bins, 2 * n);
    insert_into_moved_bins(&t, stalled, &stalled_keys, new_bins);
}

/// A same-size rehash: the new pool is exactly as large as the old one, and
/// the copies may need all of it.
#[test]
fn writes_into_moved_bins_leave_room_for_a_stalled_rehash() {
    let t = Dlht::with_capacity(64);
    let n = t.bin_count();
    assert_eq!(n, 32);
    let stalled = n - 1;
    let mut next_id = 0;
    let stalled_keys = keys_where(&mut next_id, 6, |k| bin_index(k, n) == stalled);
    for key in &stalled_keys {
        assert_eq!(t.insert(*key, meta(), &key.id.to_le_bytes()), Ok(true));
    }
    let (_, new_bins) = stall_resize_at(&t, stalled, |t| t.begin_rehash() == Ok(true));
    assert_eq!(new_bins, n);
    insert_into_moved_bins(&t, stalled, &stalled_keys, new_bins);
}

/// A header in which chain slots `0..valid` are valid and the rest empty.
fn header_with_valid(valid: usize) -> u64 {
    (0..valid).fold(0, |h, s| header::with_slot(h, s, SlotState::Valid))
}

/// Writers into a generation being filled take at most the lines not
/// reserved for the copies; copies (and, once the generation is current,
/// writers) take every line; lines given back are handed out again.
#[test]
fn the_pool_keeps_the_copies_share_from_writers() {
    let source = Gen::new(64, None);
    let reserved = source.links.len() - 1;
    let g = Gen::new(64, Some(&source));
    let lines = g.links.len() - 1;
    assert_eq!(
        lines, reserved,
        "a same-size rehash reserves the whole pool"
    );
    assert_eq!(
        g.pool.take(&g.links, Draw::Filling),
        Err(ExtendError::Filling)
    );
    let g = Gen::new(128, Some(&source));
    let lines = g.links.len() - 1;
    let mut taken: Vec<usize> = (0..lines - reserved)
        .map(|_| g.pool.take(&g.links, Draw::Filling).unwrap())
        .collect();
    assert_eq!(
        g.pool.take(&g.links, Draw::Filling),
        Err(ExtendError::Filling)
    );
    // A writer that gives a line back may take one again.
    let back = taken.pop().unwrap();
    g.pool.give_back(&g.links, back, Draw::Filling);
    assert_eq!(g.pool.take(&g.links, Draw::Filling), Ok(back));
    taken.push(back);
    // The copies still find all of their share.
    taken.extend((0..reserved).map(|_| g.pool.take(&g.links, Draw::Copy).unwrap()));
    assert_eq!(
        g.pool.take(&g.links, Draw::Copy),
        Err(ExtendError::PoolExhausted)
    );
    for &idx in taken.iter().rev().take(3) {
        g.pool.give_back(&g.links, idx, Draw::Copy);
    }
    let again: Vec<usize> = (0..3)
        .map(|_| g.pool.take(&g.links, Draw::Current).unwrap())
        .collect();
    assert_eq!(again, taken[taken.len() - 3..], "the free list is a stack");
    taken.sort_unstable();
    taken.dedup();
    assert_eq!(taken.len(), lines, "no line was handed out twice");
    assert_eq!(g.links_used(), lines);
}

/// A thread that loses the race to install a link bucket (another thread
/// extends the chain between its taking a line and installing it) gives its
/// line back: the chain gets one line, and every other line of the pool can
/// still be taken.
#[test]
fn a_lost_install_race_gives_its_line_back() {
    let g = Gen::new(1, None);
    let full = header_with_valid(SLOTS_PER_LINE);
    let winner = || assert_eq!(g.extend_chain(0, full, Draw::Current), Ok(()));
    assert_eq!(
        g.extend_chain_racing(0, full, Draw::Current, winner),
        Ok(())
    );
    let mut cur = bin::Cursor::new(&g, 0);
    assert!(cur.line(1).is_some() && cur.line(2).is_none());
    assert_eq!(g.links_used(), 2, "both threads took a line");
    let mut left = 0;
    while g.pool.take(&g.links, Draw::Current).is_ok() {
        left += 1;
    }
    assert_eq!(left, g.links.len() - 2, "the loser's line leaked");
}
