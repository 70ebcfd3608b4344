//! Unit tests of the NIC object cache: capacity and pins, LRU order,
//! unpinning by log position, overflow-page chains, tag matching.

use super::*;
use splitkv_layout::robinhood_layout::TableLayout;

fn k(i: u64) -> Key {
    Key::new(0, i)
}

/// Few entries, so that objects share entries and overflow pages are used.
fn cache(capacity: usize, epoch_accesses: u64, seed: u64) -> ObjectCache {
    ObjectCache::new(
        Segmentation::HashRange { bits: 2 },
        capacity,
        epoch_accesses,
        seed,
    )
}

#[test]
fn capacity_bound_holds_and_pinned_entries_survive() {
    let mut c = cache(100, 10, 7);
    for i in 0..10 {
        c.install_committed(k(i), ObjectMeta(1), b"p");
    }
    for i in 10..1000 {
        c.insert_clean(k(i), ObjectMeta(1), b"c");
        assert!(c.len() <= 100);
    }
    c.check_invariants().unwrap();
    for i in 0..10 {
        assert!(
            c.peek(&k(i)).is_some_and(|e| e.is_pinned()),
            "pinned {i} evicted"
        );
    }
    assert!(c.stats().evictions >= 900);
    assert_eq!(c.pinned(), 10);
    assert!(
        c.page_pool().in_use > 0,
        "4 entries of 100 objects overflow"
    );
}

#[test]
fn recently_used_entries_outlive_cold_ones() {
    let mut c = cache(200, 50, 3);
    for i in 0..200 {
        c.insert_clean(k(i), ObjectMeta(1), b"x");
    }
    // Keep keys 0..20 hot across many epochs while streaming cold keys through.
    for round in 0..200u64 {
        for i in 0..20 {
            c.get(&k(i));
        }
        c.insert_clean(k(1_000 + round), ObjectMeta(1), b"x");
    }
    let hot_left = (0..20).filter(|&i| c.peek(&k(i)).is_some()).count();
    let cold_left = (20..200).filter(|&i| c.peek(&k(i)).is_some()).count();
    assert!(hot_left >= 18, "hot entries kept: {hot_left}/20");
    assert!(
        cold_left < 180,
        "some cold entries went: {cold_left}/180 left"
    );
}

#[test]
fn unpin_follows_log_positions_and_newer_writes() {
    let mut c = cache(10, 10, 1);
    c.install_committed(k(1), ObjectMeta(2), b"v2");
    assert_eq!(
        c.unpin_applied(u64::MAX - 1),
        0,
        "a pending append stays pinned"
    );
    c.set_pin(k(1), 2, 100);
    c.install_committed(k(1), ObjectMeta(3), b"v3");
    assert_eq!(c.unpin_applied(100), 0, "the newer write keeps it pinned");
    c.set_pin(k(1), 3, 200);
    assert_eq!(c.unpin_applied(200), 1);
    let e = c.peek(&k(1)).unwrap();
    assert!(!e.is_pinned());
    assert_eq!(e.value, b"v3", "unpinned entries stay cached");
    c.insert_clean(k(1), ObjectMeta(2), b"old");
    assert_eq!(
        c.peek(&k(1)).unwrap().value,
        b"v3",
        "an older clean read never replaces a newer entry"
    );
}

#[test]
fn a_key_pinned_at_two_positions_is_unpinned_once() {
    let mut c = cache(10, 10, 1);
    c.install_committed(k(1), ObjectMeta(1), b"v1");
    c.set_pin(k(1), 1, 5);
    c.install_committed(k(1), ObjectMeta(2), b"v2");
    c.set_pin(k(1), 2, 6);
    c.install_committed(k(2), ObjectMeta(1), b"w");
    assert_eq!(c.pinned(), 2);
    assert_eq!(c.unpin_applied(6), 1);
    assert_eq!(c.pinned(), 1, "k(2) is still pinned");
    c.check_invariants().unwrap();
}

#[test]
fn all_pinned_cache_refuses_clean_inserts_but_takes_commits() {
    let mut c = cache(4, 10, 1);
    for i in 0..4 {
        c.install_committed(k(i), ObjectMeta(1), b"p");
    }
    c.insert_clean(k(9), ObjectMeta(1), b"c");
    assert!(c.peek(&k(9)).is_none());
    assert_eq!(c.stats().eviction_stalls, 1);
    c.install_committed(k(10), ObjectMeta(1), b"p");
    assert!(c.peek(&k(10)).is_some(), "commits are never refused");
    assert_eq!(c.len(), 5);
    c.check_invariants().unwrap();
    // Unpinning one goes back down to the capacity at once.
    c.set_pin(k(0), 1, 8);
    assert_eq!(c.unpin_applied(8), 1);
    assert_eq!(c.len(), 4);
    assert!(c.peek(&k(0)).is_none(), "the only unpinned object went");
    c.check_invariants().unwrap();
}

#[test]
fn one_segment_chains_overflow_pages_and_returns_them() {
    let mut c = ObjectCache::new(Segmentation::HashRange { bits: 0 }, 1000, 10, 5);
    for i in 0..40 {
        c.insert_clean(k(i), ObjectMeta(1), &i.to_le_bytes());
    }
    // 40 positions: 4 inline + 5 overflow pages of 8 (the last one half full).
    assert_eq!(c.entry(0).len(), 40);
    assert_eq!(c.page_pool().in_use, 5);
    for i in 0..40 {
        assert_eq!(c.peek(&k(i)).unwrap().value, i.to_le_bytes());
    }
    for i in (0..40).step_by(2) {
        let h = c.find(&k(i)).unwrap();
        c.remove(h);
        c.check_invariants().unwrap();
    }
    assert_eq!(c.page_pool().in_use, 2, "20 positions: 4 inline + 2 pages");
    for i in (1..40).step_by(2) {
        assert_eq!(c.peek(&k(i)).unwrap().value, i.to_le_bytes());
        assert!(c.peek(&k(i - 1)).is_none());
    }
    for i in (1..40).step_by(2) {
        let h = c.find(&k(i)).unwrap();
        c.remove(h);
    }
    assert_eq!(c.page_pool().in_use, 0);
    assert_eq!(c.page_pool().free, c.page_pool().pages);
    c.check_invariants().unwrap();
}

#[test]
fn tag_match_finds_exactly_the_live_positions() {
    let mut p = PoolPage::EMPTY;
    p.tags = [7, 0, 7, 0x87, 7, 1, 7, 7];
    assert_eq!(p.matches(7, 8).count_ones(), 5);
    assert_eq!(p.matches(7, 3).count_ones(), 2);
    assert_eq!(p.matches(0, 8).count_ones(), 1);
    assert_eq!(p.matches(0x87, 8), 0x80 << 24);
    assert_eq!(p.matches(1, 5), 0);
}

#[test]
fn robinhood_segmentation_is_the_host_segment() {
    use splitkv_layout::robinhood_layout::TableConfig;
    let layout = TableLayout::new(&TableConfig::new(10_000, 8)).unwrap();
    let s = Segmentation::robinhood(&layout);
    assert_eq!(s.entries(), layout.segments());
    for i in 0..1000 {
        let key = Key::new(1, i);
        assert_eq!(s.locate(&key).0, layout.segment_of(layout.home_slot(&key)));
    }
}

#[test]
fn installs_never_move_a_version_backwards() {
    let mut c = cache(16, 1000, 1);
    assert!(c.install_committed(k(1), ObjectMeta(3), b"v3"));
    assert!(
        !c.install_committed(k(1), ObjectMeta(2), b"v2"),
        "older refused"
    );
    assert_eq!(c.peek(&k(1)).unwrap().value, b"v3");
    assert_eq!(c.stats().stale_installs, 1);
    assert!(
        c.install_committed(k(1), ObjectMeta(3), b"v3"),
        "same version again"
    );
    // A clean read never replaces a newer cached version either.
    c.set_pin(k(1), 3, 10);
    c.unpin_applied(10);
    c.insert_clean(k(1), ObjectMeta(1), b"v1");
    assert_eq!(c.peek(&k(1)).unwrap().meta.version(), 3);
    c.check_invariants().unwrap();
}

/// Value memory follows the values held, never the node's 4 KiB value limit:
/// an empty cache of 65536 objects holds no value bytes, small values take
/// small buffers, and slots that held 4 KiB values give the memory back when
/// they are reused for small ones (at most `VALUE_BUFFER_KEPT_BYTES_MAX` each).
#[test]
fn value_memory_follows_the_values_not_the_limit() {
    const OBJECTS: usize = 1 << 16;
    let mut c = cache(OBJECTS, 1000, 5);
    let slab = c.memory_bytes();
    assert!(
        slab < OBJECTS * 96,
        "{slab} B before any value: no per-object value buffer"
    );
    let big = vec![7u8; splitkv_layout::VALUE_BYTES_MAX];
    for i in 0..1000 {
        c.insert_clean(k(i), ObjectMeta(8), &big);
    }
    let with_big = c.memory_bytes() - slab;
    assert!(with_big >= 1000 * big.len());
    // Newer, small versions of the same keys shrink the buffers.
    for i in 0..1000 {
        c.insert_clean(k(i), ObjectMeta(16), &i.to_le_bytes());
        assert_eq!(c.peek(&k(i)).unwrap().value, i.to_le_bytes());
    }
    let after = c.memory_bytes() - slab;
    assert!(
        after <= 1000 * VALUE_BUFFER_KEPT_BYTES_MAX,
        "{after} B of value buffers for 1000 8-byte values"
    );
    // A buffer at or under the kept size is reused as it is (no allocation).
    c.install_committed(k(1), ObjectMeta(24), &[1u8; 100]);
    let cap = c.peek(&k(1)).unwrap().value.capacity();
    c.install_committed(k(1), ObjectMeta(32), &[2u8; 3]);
    assert_eq!(c.peek(&k(1)).unwrap().value.capacity(), cap);
    c.check_invariants().unwrap();
}
