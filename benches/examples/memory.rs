//! Memory per stored pair: bytes of heap that the Robinhood host table, the
//! DLHT and the peer maps (hashbrown, dashmap, scc, papaya) hold per stored 8-byte key and
//! 8-byte value, at the Robinhood table's design point of 90% occupancy
//! (`0.9 · 2^k` keys in `2^k` home slots), and at 85% (`0.85 · 2^k` keys),
//! where the power-of-two peers with a 7/8 load limit are nearly full too.
//!
//! ```text
//! cargo run --release -p splitkv-bench --example memory [-- LOG2 ...]
//! ```
//!
//! For each `LOG2` (default: 22) and fill (90%, 85%) the program inserts
//! `n = fill · 2^LOG2` pairs into each map and prints a Markdown table of the live heap bytes the map
//! added, divided by `n`. Live bytes are counted by a global allocator wrapping
//! [`System`]: bytes requested and not yet freed (allocator headers and page
//! rounding are not included). Peers are measured twice: pre-sized with
//! `with_capacity(n)`, and grown from empty by their own resize policy.
//!
//! The DLHT has no occupancy target of its own (it holds up to 5/2 keys per
//! bin before doubling); it is measured at the same `n` as the peers, sized
//! with `Dlht::with_capacity(n)` and grown from `with_capacity(1)`. Its note
//! gives `Dlht::memory_bytes()` per pair (which leaves out link-bucket lines
//! never handed out) and the growth of the process's resident set while it
//! was built (`/proc/self/statm`; untouched pool pages are never resident).

use splitkv_host::table::dlht::Dlht;
use splitkv_host::table::{RobinhoodTable, TableConfig};
use splitkv_layout::{FixedState, Key, ObjectFlags, ObjectMeta};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Live heap bytes: requested by `alloc`, not yet returned by `dealloc`.
static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);

/// [`System`], counting live bytes in [`LIVE_BYTES`].
struct Counting;

// SAFETY: forwards every call to `System` unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE_BYTES.fetch_add(layout.size(), Relaxed);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            LIVE_BYTES.fetch_add(layout.size(), Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            LIVE_BYTES.fetch_add(new_size, Relaxed);
            LIVE_BYTES.fetch_sub(layout.size(), Relaxed);
        }
        new
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Distinct, well-spread keys (a bijection).
fn key(i: u64) -> u64 {
    splitkv_bench::measure::mix64(i)
}

/// Live bytes that `build` leaves allocated, per pair, and a note on the map.
fn measure<M>(
    n: usize,
    build: impl FnOnce(usize) -> M,
    note: impl FnOnce(&M) -> String,
) -> (f64, String) {
    let before = LIVE_BYTES.load(Relaxed);
    let map = build(n);
    let bytes = LIVE_BYTES.load(Relaxed) - before;
    let note = note(&map);
    drop(map);
    (bytes as f64 / n as f64, note)
}

fn robinhood(n: usize) -> RobinhoodTable {
    let mut table = RobinhoodTable::new(&TableConfig::new(n, 8)).expect("table layout");
    let meta = ObjectMeta::new(1, ObjectFlags::READABLE);
    for i in 0..n as u64 {
        table
            .upsert(Key::new(0, key(i)), meta, &i.to_le_bytes())
            .expect("sized for n keys");
    }
    table
}

fn dlht(n: usize, presize: bool) -> Dlht {
    let table = Dlht::with_capacity(if presize { n } else { 1 });
    let meta = ObjectMeta::new(1, ObjectFlags::READABLE);
    for i in 0..n as u64 {
        let inserted = table
            .insert(Key::new(0, key(i)), meta, &i.to_le_bytes())
            .expect("the table grows as needed");
        assert!(inserted, "distinct keys");
    }
    table
}

/// `pin().flush()` calls after building a DLHT: enough for the epoch to
/// advance twice past the retirements, so the collector may free them.
const EPOCH_FLUSHES: usize = 4;

/// Resident set size of this process in bytes (Linux `/proc/self/statm`;
/// 0 elsewhere).
fn resident_bytes() -> usize {
    let Ok(statm) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(0) as usize
}

fn hashbrown_map(n: usize, presize: bool) -> hashbrown::HashMap<u64, u64, FixedState> {
    let mut map =
        hashbrown::HashMap::with_capacity_and_hasher(if presize { n } else { 0 }, FixedState);
    for i in 0..n as u64 {
        map.insert(key(i), i);
    }
    map
}

fn dashmap_map(n: usize, presize: bool) -> dashmap::DashMap<u64, u64, FixedState> {
    let map = dashmap::DashMap::with_capacity_and_hasher(if presize { n } else { 0 }, FixedState);
    for i in 0..n as u64 {
        map.insert(key(i), i);
    }
    map
}

fn scc_map(n: usize, presize: bool) -> scc::HashMap<u64, u64, FixedState> {
    let map = scc::HashMap::with_capacity_and_hasher(if presize { n } else { 0 }, FixedState);
    for i in 0..n as u64 {
        map.insert_sync(key(i), i).expect("distinct keys");
    }
    map
}

fn papaya_map(n: usize, presize: bool) -> papaya::HashMap<u64, u64, FixedState> {
    let map = papaya::HashMap::with_capacity_and_hasher(if presize { n } else { 0 }, FixedState);
    {
        let pinned = map.pin();
        for i in 0..n as u64 {
            pinned.insert(key(i), i);
        }
    }
    map
}

/// Command line (`-- [LOG2 ...]`).
#[derive(clap::Parser, Debug)]
struct Cli {
    /// Table sizes to measure, as log2 of the home slots.
    #[arg(default_values_t = [22u32], value_parser = clap::value_parser!(u32).range(4..=32))]
    log2: Vec<u32>,
}

fn main() {
    let log2s = <Cli as clap::Parser>::parse().log2;
    println!("| map | sizing | pairs | bytes/pair | note |");
    println!("|---|---|---:|---:|---|");
    for (log2, fill_pct) in log2s.iter().flat_map(|&l| [(l, 90), (l, 85)]) {
        let n = (1usize << log2) / 100 * fill_pct;
        let row = |name: &str, sizing: &str, (per_pair, note): (f64, String)| {
            println!(
                "| {name} | {sizing} | {n} ({fill_pct}% of 2^{log2}) | {per_pair:.1} | {note} |"
            );
        };
        row(
            "robinhood",
            "capacity n",
            measure(n, robinhood, |t| {
                format!(
                    "{:.1}% of {} home slots, {} B slots, region {} B",
                    100.0 * t.len() as f64 / t.layout().home_slots() as f64,
                    t.layout().home_slots(),
                    t.layout().slot_bytes(),
                    t.layout().region_bytes()
                )
            }),
        );
        for presize in [true, false] {
            let sizing = if presize { "with_capacity(n)" } else { "grown" };
            let rss_before = resident_bytes();
            let live_before = LIVE_BYTES.load(Relaxed);
            row(
                "dlht",
                sizing,
                measure(
                    n,
                    |n| dlht(n, presize),
                    |t| {
                        let rss = resident_bytes().saturating_sub(rss_before);
                        // Replaced generations wait in this thread's epoch
                        // bag until it fills; flush it and count again.
                        for _ in 0..EPOCH_FLUSHES {
                            crossbeam::epoch::pin().flush();
                        }
                        let flushed = LIVE_BYTES.load(Relaxed).saturating_sub(live_before);
                        format!(
                            "{} bins ({:.2} keys/bin), {} resizes; memory_bytes {:.1} B/pair; \
                             resident +{:.1} B/pair; after epoch flush {:.1} B/pair",
                            t.bin_count(),
                            n as f64 / t.bin_count() as f64,
                            t.resizes_completed(),
                            t.memory_bytes() as f64 / n as f64,
                            rss as f64 / n as f64,
                            flushed as f64 / n as f64,
                        )
                    },
                ),
            );
            row(
                "hashbrown",
                sizing,
                measure(
                    n,
                    |n| hashbrown_map(n, presize),
                    |m| format!("capacity {}", m.capacity()),
                ),
            );
            row(
                "dashmap",
                sizing,
                measure(
                    n,
                    |n| dashmap_map(n, presize),
                    |m| format!("capacity {}", m.capacity()),
                ),
            );
            row(
                "scc",
                sizing,
                measure(
                    n,
                    |n| scc_map(n, presize),
                    |m| format!("capacity {}", m.capacity()),
                ),
            );
            row(
                "papaya",
                sizing,
                measure(
                    n,
                    |n| papaya_map(n, presize),
                    |m| format!("len {}", m.len()),
                ),
            );
        }
    }
}
