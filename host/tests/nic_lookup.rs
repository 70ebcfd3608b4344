//! The NIC's host-table lookup (Xenic §4.1.3) against the real Robinhood table:
//! after host insertions move objects past the NIC's known displacement d_i,
//! every key is still found — by the d_i + k read, the adjacent read up to D_m,
//! or the overflow chain — and the hints catch up.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_host::table::robinhood::RobinhoodTable;
use splitkv_layout::robinhood_layout::{TableConfig, TableLayout};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, Region};
use splitkv_nic::dma::read_vector;
use splitkv_nic::index::hints::SegmentHints;
use splitkv_nic::index::robinhood_lookup::RobinhoodLookup;
use splitkv_nic::index::Next;

/// Looks `key` up; returns (found, DMA reads).
fn lookup(table: &RobinhoodTable, hints: &mut SegmentHints, key: Key) -> (Option<Vec<u8>>, u32) {
    lookup_in(table.layout(), table.region(), hints, key)
}

/// Looks `key` up in the table `layout` describes, stored in `region` (which
/// another thread may be changing).
fn lookup_in(
    layout: &TableLayout,
    region: &Region,
    hints: &mut SegmentHints,
    key: Key,
) -> (Option<Vec<u8>>, u32) {
    let (v, reads, _) = lookup_counting_bytes(layout, region, hints, key);
    (v, reads)
}

/// As [`lookup_in`], also returning the bytes of its last DMA read.
fn lookup_counting_bytes(
    layout: &TableLayout,
    region: &Region,
    hints: &mut SegmentHints,
    key: Key,
) -> (Option<Vec<u8>>, u32, usize) {
    let (mut l, mut step) = RobinhoodLookup::start(layout, hints, key);
    let mut buf = Vec::new();
    loop {
        match step {
            Next::Read(v, n) => {
                read_vector(region, &v[..n], &mut buf).unwrap();
                step = l.advance(layout, hints, &buf);
            }
            Next::Found { value, .. } => return (Some(value.to_vec()), l.reads, buf.len()),
            Next::Absent => return (None, l.reads, buf.len()),
            Next::Failed(e) => panic!("{key:?}: {e}"),
        }
    }
}

fn snapshot(table: &RobinhoodTable) -> Vec<u8> {
    let mut b = vec![0u8; table.layout().region_bytes()];
    table.region().read_bytes(0, &mut b).unwrap();
    b
}

#[test]
fn stale_hints_still_find_every_key() {
    let mut cfg = TableConfig::new(20_000, 8);
    cfg.d_max = 8;
    cfg.overflow_fraction_pct = 40;
    let mut table = RobinhoodTable::new(&cfg).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    let meta = ObjectMeta::new(1, ObjectFlags::empty());
    let target = table.layout().home_slots() * 9 / 10;
    let mut keys = Vec::new();
    // Half full: the NIC learns its hints from a scan now...
    while keys.len() < target / 2 {
        let k = Key::new(1, rng.gen());
        if table.upsert(k, meta, &k.id.to_le_bytes()).unwrap() {
            keys.push(k);
        }
    }
    let mut hints = SegmentHints::new(table.layout());
    hints.warm_up(table.layout(), &snapshot(&table)).unwrap();
    let d_before: usize = (0..hints.segments()).map(|s| hints.d_known(s)).sum();
    // ...then the host fills to 90% without telling the NIC.
    while keys.len() < target {
        let k = Key::new(1, rng.gen());
        if table.upsert(k, meta, &k.id.to_le_bytes()).unwrap() {
            keys.push(k);
        }
    }
    assert!(table.overflow_len() > 0, "D_m = 8 at 90% uses overflow");
    let mut reads_hist = [0u32; 8];
    for k in &keys {
        let (v, reads) = lookup(&table, &mut hints, *k);
        assert_eq!(v.as_deref(), Some(&k.id.to_le_bytes()[..]), "{k:?} lost");
        reads_hist[(reads as usize).min(7)] += 1;
    }
    assert!(reads_hist[1] > 0, "most keys need one read: {reads_hist:?}");
    assert!(
        reads_hist[2..].iter().sum::<u32>() > 0,
        "stale hints forced adjacent or overflow reads: {reads_hist:?}"
    );
    let d_after: usize = (0..hints.segments()).map(|s| hints.d_known(s)).sum();
    assert!(d_after > d_before, "hints learned the new displacements");
    // Once learned, a second pass needs fewer reads.
    let second: u32 = keys.iter().map(|k| lookup(&table, &mut hints, *k).1).sum();
    let first: u32 = reads_hist
        .iter()
        .enumerate()
        .map(|(r, n)| r as u32 * n)
        .sum();
    assert!(
        second < first,
        "{second} reads after learning vs {first} before"
    );
    // Absent keys are reported absent.
    for _ in 0..1000 {
        let k = Key::new(2, rng.gen());
        assert_eq!(lookup(&table, &mut hints, k).0, None);
    }
}

#[test]
fn lookups_follow_deletes_and_reinserts() {
    let mut cfg = TableConfig::new(4_000, 8);
    cfg.d_max = 4;
    cfg.overflow_fraction_pct = 50;
    let mut table = RobinhoodTable::new(&cfg).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
    let meta = ObjectMeta::new(1, ObjectFlags::empty());
    let mut live = std::collections::HashSet::new();
    let mut hints = SegmentHints::new(table.layout());
    let target = table.layout().home_slots() * 85 / 100;
    for round in 0..20_000u32 {
        if live.len() < target && rng.gen_bool(0.6) {
            let k = Key::new(0, rng.gen_range(0..20_000));
            table.upsert(k, meta, &[1; 8]).unwrap();
            live.insert(k);
        } else if let Some(&k) = live.iter().next() {
            assert!(table.remove(&k));
            live.remove(&k);
        }
        if round % 500 == 0 {
            for k in &live {
                assert!(
                    lookup(&table, &mut hints, *k).0.is_some(),
                    "{k:?} lost at round {round}"
                );
            }
        }
    }
}

/// A host thread churns inserts and deletes (backward shifts, overflow swaps,
/// bucket reuse) around a set of keys it never touches, while this thread
/// looks those keys up the NIC's way: every lookup must find its key, with its
/// value. This is a stress test, so it is probabilistic: with the
/// move-sequence check of `RobinhoodLookup` disabled (`absent_if_unmoved` always
/// answering absent) it failed in 1 of 4 runs and in 1 of 3 shorter ones. The
/// loom model in `robinhood_loom.rs` checks the same race exhaustively.
#[test]
fn concurrent_deletes_never_hide_a_present_key() {
    let mut cfg = TableConfig::new(2_000, 8);
    cfg.d_max = 4;
    cfg.segment_slots = 4;
    cfg.overflow_fraction_pct = 50;
    cfg.bucket_slots = 2;
    let mut table = RobinhoodTable::new(&cfg).unwrap();
    let layout = *table.layout();
    let region = table.region().clone();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let stable: Vec<Key> = (0..layout.home_slots() as u64 / 3)
        .map(|i| Key::new(1, i))
        .collect();
    for k in &stable {
        table
            .upsert(
                *k,
                ObjectMeta::new(1, ObjectFlags::empty()),
                &k.id.to_le_bytes(),
            )
            .unwrap();
    }
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(12);
            let meta = ObjectMeta::new(1, ObjectFlags::empty());
            let churn_keys = layout.home_slots() as u64 / 2;
            let (mut live, mut moved) = (std::collections::HashSet::new(), 0u64);
            for _ in 0..2_000_000 {
                let k = Key::new(2, rng.gen_range(0..churn_keys));
                if live.contains(&k) {
                    assert!(table.remove(&k));
                    live.remove(&k);
                } else if table.upsert(k, meta, &[7; 8]).is_ok() {
                    live.insert(k);
                }
            }
            let s = table.stats();
            moved += s.moved_by_shifts + s.overflow_swaps;
            table.check_invariants().unwrap();
            done.store(true, std::sync::atomic::Ordering::Release);
            moved
        })
    };
    let mut hints = SegmentHints::new(&layout);
    let mut lookups = 0u64;
    while !done.load(std::sync::atomic::Ordering::Acquire) {
        let k = stable[rng.gen_range(0..stable.len())];
        let (v, _) = lookup_in(&layout, &region, &mut hints, k);
        assert_eq!(v.as_deref(), Some(&k.id.to_le_bytes()[..]), "{k:?} hidden");
        lookups += 1;
    }
    let moved = writer.join().unwrap();
    assert!(moved > 10_000, "the writer moved objects: {moved}");
    assert!(lookups > 10_000, "the reader raced it: {lookups} lookups");
}

/// Values over 256 B: the lookup reads the key's slot, then follows its
/// reference into the value heap with exactly one more read, through the main
/// array and overflow chains alike; inline values still take one read.
#[test]
fn lookups_follow_out_of_line_references() {
    follow_out_of_line_references(1024);
}

/// The same at the node limit: values up to 4 KiB, each read with a copy of
/// its block's head up to the end of the value and the tail word (at most 40
/// bytes more than the value), never the whole 4 KiB block.
#[test]
fn lookups_follow_four_kib_out_of_line_references() {
    follow_out_of_line_references(splitkv_layout::VALUE_BYTES_MAX);
}

fn follow_out_of_line_references(value_bytes_max: usize) {
    let mut cfg = TableConfig::new(2_000, value_bytes_max);
    cfg.d_max = 2;
    cfg.overflow_fraction_pct = 50;
    let mut table = RobinhoodTable::new(&cfg).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(12);
    let value_of = |k: Key| -> Vec<u8> {
        let len = (k.id % (value_bytes_max as u64 + 1)) as usize;
        (0..len)
            .map(|i| (k.id as u8).wrapping_add(i as u8))
            .collect()
    };
    let mut keys = Vec::new();
    while keys.len() < 1_800 {
        let k = Key::new(1, rng.gen());
        if table
            .upsert(k, ObjectMeta::new(2, ObjectFlags::empty()), &value_of(k))
            .unwrap()
        {
            keys.push(k);
        }
    }
    assert!(table.overflow_len() > 0 && table.value_blocks_in_use() > 0);
    let mut hints = SegmentHints::new(table.layout());
    hints.warm_up(table.layout(), &snapshot(&table)).unwrap();
    let (mut long, mut overflow_long) = (0, 0);
    for k in &keys {
        let (v, reads, last_read_bytes) =
            lookup_counting_bytes(table.layout(), table.region(), &mut hints, *k);
        let want = value_of(*k);
        assert_eq!(v.as_deref(), Some(&want[..]), "{k:?}");
        if want.len() > 256 {
            assert!(
                last_read_bytes <= want.len() + 48,
                "{k:?}: a {} B value cost a {last_read_bytes} B block read",
                want.len()
            );
        }
        // The warmed hints hold every displacement: a main-array key takes one
        // read (two with its block); overflow keys need the chain first.
        let extra = u32::from(want.len() > 256);
        if reads == 1 + extra {
            long += extra;
        } else {
            assert!(reads > 1 + extra, "{k:?}: {reads} reads");
            overflow_long += extra;
        }
    }
    assert!(
        long > 0 && overflow_long > 0,
        "{long} main, {overflow_long} overflow"
    );
}

/// A block freed and reused between the slot read and the block read is
/// detected, and the lookup starts over and returns the current value.
#[test]
fn a_reused_block_restarts_the_lookup() {
    let cfg = TableConfig {
        value_blocks: Some(2),
        ..TableConfig::new(100, 1024)
    };
    let mut table = RobinhoodTable::new(&cfg).unwrap();
    let layout = *table.layout();
    let k = Key::new(0, 5);
    let meta = |v| ObjectMeta::new(v, ObjectFlags::empty());
    table.upsert(k, meta(1), &[1u8; 600]).unwrap();
    let mut hints = SegmentHints::new(&layout);
    let (mut l, step) = RobinhoodLookup::start(&layout, &hints, k);
    let region = table.region().clone();
    // One DMA vector: its elements in order, into one buffer.
    let read = |step: Next<'_>| -> Vec<u8> {
        let Next::Read(v, n) = step else {
            panic!("expected a read, got {step:?}")
        };
        let mut buf = Vec::new();
        read_vector(&region, &v[..n], &mut buf).unwrap();
        buf
    };
    let slots = read(step);
    let step = l.advance(&layout, &mut hints, &slots);
    let Next::Read(v, 2) = step else {
        panic!("a long value needs its block: {step:?}")
    };
    // Only the block's head up to the end of the 600-byte value, then its
    // tail word: not the whole 1 KiB block.
    assert_eq!(v[0].offset, layout.value_block_offset(0));
    assert_eq!(v[0].len, 32 + 600);
    assert_eq!(
        v[1].offset,
        layout.value_block_offset(0) + layout.value_block_seq_tail_offset()
    );
    assert_eq!(v[1].len, 8);
    // The host replaces the value twice: block 1, then block 0 again (FIFO).
    table.upsert(k, meta(2), &[2u8; 700]).unwrap();
    table.upsert(k, meta(3), &[3u8; 800]).unwrap();
    let block = read(step);
    let step = l.advance(&layout, &mut hints, &block);
    // Stale block: back to the slot, then the block it names now.
    let slots = read(step);
    let step = l.advance(&layout, &mut hints, &slots);
    let block = read(step);
    match l.advance(&layout, &mut hints, &block) {
        Next::Found { meta: m, value } => {
            assert_eq!(m, meta(3));
            assert_eq!(value, &[3u8; 800][..]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(l.reads, 4);
}

mod dlht {
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;
    use splitkv_host::table::dlht::dma::DlhtDma;
    use splitkv_host::table::dlht::Dlht;
    use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
    use splitkv_nic::dma::{HostMemory, HostMemoryError};
    use splitkv_nic::index::dlht_lookup::DlhtLookup;
    use splitkv_nic::index::Next;
    use std::sync::Arc;

    /// Runs a NIC lookup through the DLHT's DMA space; (value, vectors read, stale restarts).
    fn lookup(mem: &DlhtDma, bins: &mut usize, key: Key) -> (Option<Vec<u8>>, u32, u32) {
        let (mut l, mut step) = DlhtLookup::start(key, *bins);
        let mut buf = Vec::new();
        let mut stale = 0;
        loop {
            match step {
                Next::Read(v, n) => {
                    buf.clear();
                    let mut refused = false;
                    for r in &v[..n] {
                        let at = buf.len();
                        buf.resize(at + r.len, 0);
                        match mem.read(r.offset, &mut buf[at..]) {
                            Ok(()) => {}
                            Err(HostMemoryError::Stale) => refused = true,
                            Err(e) => panic!("{e}"),
                        }
                    }
                    step = if refused {
                        stale += 1;
                        l.restart()
                    } else {
                        l.advance(&buf)
                    };
                }
                Next::Found { value, .. } => {
                    *bins = l.bin_count();
                    return (Some(value.to_vec()), l.reads, stale);
                }
                Next::Absent => {
                    *bins = l.bin_count();
                    return (None, l.reads, stale);
                }
                Next::Failed(e) => panic!("{key:?}: {e}"),
            }
        }
    }

    #[test]
    fn nic_finds_every_key_through_chains_and_resizes() {
        let t = Arc::new(Dlht::with_capacity(64));
        let mem = DlhtDma::new(t.clone());
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let meta = ObjectMeta::new(3, ObjectFlags::empty());
        let mut keys = Vec::new();
        let mut bins = 0;
        let mut stale_total = 0;
        let mut multi_read = 0;
        for round in 0..40 {
            for _ in 0..100 {
                let k = Key::new(rng.gen_range(0..4), rng.gen());
                t.upsert(k, meta, &k.id.to_le_bytes()).unwrap();
                keys.push(k);
            }
            // The table grows underneath; the NIC keeps its old bin count.
            for k in &keys {
                let (v, reads, stale) = lookup(&mem, &mut bins, *k);
                assert_eq!(
                    v.as_deref(),
                    Some(&k.id.to_le_bytes()[..]),
                    "round {round}: {k:?}"
                );
                stale_total += stale;
                multi_read += (reads > 2) as u32;
            }
        }
        assert!(
            t.resizes_completed() > 0,
            "the table resized during the test"
        );
        assert!(
            stale_total > 0,
            "a stale bin count was refused and the lookup restarted"
        );
        assert!(multi_read > 0, "some lookups followed link buckets");
        assert_eq!(lookup(&mem, &mut bins, Key::new(9, 1)).0, None);
    }
}

/// Garbage host memory can hold a cyclic overflow chain (found by the
/// `robinhood_lookup` fuzz target): the lookup must fail after as many links
/// as the table has buckets, not read forever.
#[test]
fn a_cyclic_overflow_chain_fails_the_lookup_instead_of_looping() {
    use splitkv_layout::robinhood_layout::{BucketHeader, SegmentHeader, HEADER_BYTES};
    use splitkv_nic::index::robinhood_lookup::LookupError;
    let mut cfg = TableConfig::new(2_000, 8);
    cfg.d_max = 2;
    cfg.overflow_fraction_pct = 40;
    let mut table = RobinhoodTable::new(&cfg).unwrap();
    let meta = ObjectMeta::new(1, ObjectFlags::empty());
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let layout = *table.layout();
    let header = |table: &RobinhoodTable, seg: usize| {
        let mut b = [0u8; HEADER_BYTES];
        let off = layout.segment_header_offset(seg);
        table.region().read_bytes(off, &mut b).unwrap();
        SegmentHeader::decode(&layout, &b).unwrap()
    };
    // Fill until some segment has an overflow chain.
    let (seg, head) = loop {
        let k = Key::new(1, rng.gen());
        table.upsert(k, meta, &k.id.to_le_bytes()).unwrap();
        let seg = layout.segment_of(layout.home_slot(&k));
        if let Some(head) = header(&table, seg).overflow_head {
            break (seg, head);
        }
    };
    // A copy of the table whose chain head links back to itself.
    let region = Region::new(layout.region_bytes());
    region.write_bytes(0, &snapshot(&table)).unwrap();
    let mut b = [0u8; HEADER_BYTES];
    region
        .read_bytes(layout.bucket_header_offset(head), &mut b)
        .unwrap();
    let mut bucket = BucketHeader::decode(&layout, &b).unwrap();
    bucket.next = Some(head);
    region
        .write_bytes(layout.bucket_header_offset(head), &bucket.encode())
        .unwrap();
    // An absent key homed in that segment walks the chain to its end.
    let absent = loop {
        let k = Key::new(2, rng.gen());
        if layout.segment_of(layout.home_slot(&k)) == seg {
            break k;
        }
    };
    let mut hints = SegmentHints::new(&layout);
    let (mut l, mut step) = RobinhoodLookup::start(&layout, &hints, absent);
    let mut buf = Vec::new();
    let error = loop {
        match step {
            Next::Read(v, n) => {
                read_vector(&region, &v[..n], &mut buf).unwrap();
                step = l.advance(&layout, &mut hints, &buf);
            }
            Next::Failed(e) => break e,
            other => panic!("expected the walk to fail, got {other:?}"),
        }
        assert!(
            (l.reads as usize) < 4 * layout.buckets() + 16,
            "still reading after {} reads",
            l.reads
        );
    };
    assert_eq!(
        error,
        LookupError::ChainTooLong {
            buckets: layout.buckets()
        }
    );
}
