//! Host-table microbenchmarks (criterion). Run with `cargo bench -p splitkv-bench
//! --bench tables`; benches/README.md has the commands and the current
//! figures, benches/notes/2026-11-21-host-tables.md the results on the project
//! machine and the issue targets.
//!
//! * `robinhood_get/{one_at_a_time,batched}/B`: random Gets of present 8-byte
//!   keys (8-byte values) on a Robinhood table much larger than the last-level
//!   cache, issued one at a time or as batches of `B` through
//!   [`RobinhoodTable::get_batch`], which prefetches every key's home slot first
//!   (Dandelion §6, Figure 7). Throughput is Gets per second of the thread's
//!   CPU time (the machine's cores are shared; see [`thread_cpu_time`]).
//! * `dlht_get/{one_at_a_time,batched}/B`: the same keys, values and lookup
//!   sequence on a `Dlht::with_capacity(keys)`, read one `Dlht::get` at a time
//!   or as batches of `B` `Request::Get`s through `Dlht::batch`, which
//!   prefetches every request's bin first (Dandelion §6, Figure 7).
//! * `mix_<workload>_<threads>t/<map>`: conc-map-bench style operation mixes
//!   (read-heavy 98/1/1/0, exchange 10/40/40/10, rapid-grow 5/80/5/10 percent
//!   get/insert/remove/update) on 8-byte keys and values, with 1 and 2 threads,
//!   against hashbrown (behind a `parking_lot::RwLock` with 2 threads), dashmap,
//!   `scc::HashMap` and papaya. The Robinhood table has a single writer
//!   (`&mut self`), so it runs single-threaded only. The DLHT runs twice:
//!   `dlht` issues one operation at a time, `dlht_batched` issues each thread's
//!   sequence in `Dlht::batch` calls of `SPLITKV_BENCH_MIX_BATCH` consecutive
//!   operations (see [`DlhtBatched`]). `dlht_pinned` is a diagnostic: one
//!   operation at a time under one epoch pin per thread (see [`DlhtPinned`]).
//!   Single-threaded runs report thread CPU time, two-thread runs wall time.
//!
//! Sizes come from the environment so that a default run finishes in minutes:
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `SPLITKV_BENCH_KEYS` | keys loaded for `robinhood_get` (table sized to hold them at ≤ 90% of its home slots) and `dlht_get` (`Dlht::with_capacity(keys)`) | 30 198 988 = 0.9 · 2^25 (a 1.8 GiB Robinhood table; 2^24 DLHT bins, 1.3 GiB) |
//! | `SPLITKV_BENCH_PREFETCH_SLOTS` | fixes the probe slots each batched Get prefetches (`RobinhoodTable::set_prefetch_slots`) | unset: follow the occupancy (6 slots at 90%) |
//! | `SPLITKV_BENCH_HUGEPAGES` | `1`: back allocations of ≥ 64 MiB (the tables) with 2 MiB transparent huge pages (`madvise(MADV_HUGEPAGE)`, Linux), as Dandelion's evaluation does (§7) | `0` (4 KiB pages) |
//! | `SPLITKV_BENCH_MIX_BATCH` | operations per `Dlht::batch` call of `dlht_batched` in the mixes (1 to 64) | 24 |
//! | `SPLITKV_BENCH_MIX_LOG2` | log2 of the mix maps' capacity; 2^log2 operations per run, prefill 75% (read-heavy, exchange) or 0% (rapid-grow) | 20 |

use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use parking_lot::RwLock;
use splitkv_host::table::dlht::{Dlht, Request};
use splitkv_host::table::{RobinhoodTable, TableConfig};
use splitkv_layout::{FixedState, Key, ObjectFlags, ObjectMeta};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Barrier;
use std::time::{Duration, Instant};

// ---- huge pages ------------------------------------------------------------------

/// Allocations of at least this many bytes are 2 MiB aligned and, with
/// `SPLITKV_BENCH_HUGEPAGES=1`, advised to use transparent huge pages.
const HUGE_ALLOC_MIN_BYTES: usize = 64 << 20;
/// Size and alignment of an x86-64 huge page.
const HUGE_PAGE_BYTES: usize = 2 << 20;
/// Set from `SPLITKV_BENCH_HUGEPAGES` at start-up.
static HUGE_PAGES: AtomicBool = AtomicBool::new(false);

/// The system allocator, except that large blocks are aligned to 2 MiB and
/// (when [`HUGE_PAGES`] is set) `madvise`d for transparent huge pages before
/// anything touches them. The size alone decides the alignment, so `dealloc`
/// always sees the layout `alloc` used.
struct HugePageAlloc;

impl HugePageAlloc {
    fn adjust(layout: Layout) -> Layout {
        if layout.size() >= HUGE_ALLOC_MIN_BYTES {
            Layout::from_size_align(layout.size(), layout.align().max(HUGE_PAGE_BYTES))
                .expect("a 2 MiB alignment is valid")
        } else {
            layout
        }
    }

    fn advise(ptr: *mut u8, layout: Layout) {
        #[cfg(target_os = "linux")]
        if !ptr.is_null() && layout.size() >= HUGE_ALLOC_MIN_BYTES && HUGE_PAGES.load(Relaxed) {
            // SAFETY: `ptr .. ptr + size` is the block just allocated; madvise
            // only changes how the kernel backs it (an error is harmless).
            unsafe { libc::madvise(ptr.cast(), layout.size(), libc::MADV_HUGEPAGE) };
        }
    }
}

// SAFETY: every block comes from `System` with the layout `adjust` gives, and is
// returned to it with the same layout.
unsafe impl GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let layout = Self::adjust(layout);
        let ptr = unsafe { System.alloc(layout) };
        Self::advise(ptr, layout);
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let layout = Self::adjust(layout);
        let ptr = unsafe { System.alloc_zeroed(layout) };
        Self::advise(ptr, layout);
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, Self::adjust(layout)) }
    }
}

#[global_allocator]
static ALLOC: HugePageAlloc = HugePageAlloc;

/// Reads `SPLITKV_BENCH_HUGEPAGES` once, before any table is built.
fn init_huge_pages() {
    HUGE_PAGES.store(env_usize("SPLITKV_BENCH_HUGEPAGES", 0) != 0, Relaxed);
}

// ---- CPU time ----------------------------------------------------------------------

use splitkv_bench::measure::{mix64, thread_cpu_time};

// ---- sizes ----------------------------------------------------------------------

/// Default key count of the Get benchmark: 90% of 2^25 home slots, a table of
/// 2^25 · 48 B slots plus a 10% overflow pool ≈ 1.8 GiB, seven times the
/// 260 MiB L3 of the project machine.
const GET_KEYS_DEFAULT: usize = 30_198_988;
/// Batch sizes of the Get benchmark (Dandelion Figure 7 goes up to 32).
const GET_BATCH_SIZES: [usize; 6] = [1, 4, 8, 16, 24, 32];
/// Keys in the pre-drawn lookup sequence of the Get benchmark (cycled): 64 MiB
/// of keys whose probes touch far more lines than the L3 holds, so a key's
/// lines are gone by the time the sequence comes back to it.
const GET_LOOKUPS: usize = 1 << 22;
/// Gets per variant per round of the interleaved comparison.
const ROUND_GETS: usize = 1 << 15;
/// Rounds of the interleaved comparison per batch size.
const ROUNDS: usize = 24;
/// Largest batch: sizes the stack buffers of the Get benchmark.
const GET_BATCH_MAX: usize = 32;
/// Default log2 capacity of the mix benchmarks.
const MIX_LOG2_DEFAULT: u32 = 20;

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(s) => s
            .replace('_', "")
            .parse()
            .unwrap_or_else(|e| panic!("{name}={s:?}: {e}")),
        Err(_) => default,
    }
}

/// The generator drawing operations: xoshiro256++ (`rand_xoshiro`), drawn
/// by modulo (a bias of at most n / 2^64, and no rejection loop in the mixes).
struct OpRng(rand_xoshiro::Xoshiro256PlusPlus);

impl OpRng {
    fn new(seed: u64) -> OpRng {
        OpRng(rand::SeedableRng::seed_from_u64(seed))
    }

    fn next(&mut self) -> u64 {
        rand::RngCore::next_u64(&mut self.0)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

// ---- (a) batched vs one-at-a-time Gets ---------------------------------------

/// A table the Get benchmark drives: loaded once with `keys` 8-byte keys and
/// values, then read one Get at a time or in batches through its batch API.
trait GetTable: Sized {
    /// Criterion group name, e.g. `robinhood_get`.
    const GROUP: &'static str;
    /// Per-benchmark buffers of the batched variant (allocated once).
    type Scratch;
    /// A table holding `Key::new(0, key(i))` → `i` (little endian) for every
    /// `i < keys`; prints one line describing it.
    fn load(keys: usize, key: impl Fn(u64) -> Key) -> Self;
    /// Buffers for batches of up to [`GET_BATCH_MAX`] Gets.
    fn scratch() -> Self::Scratch;
    /// Looks `keys` up one Get at a time; returns the hits.
    fn gets_one_at_a_time(&self, keys: &[Key], value: &mut Vec<u8>) -> usize;
    /// Looks `keys` up in batches of `batch`; returns the hits.
    fn gets_batched(&self, keys: &[Key], batch: usize, scratch: &mut Self::Scratch) -> usize;
}

impl GetTable for RobinhoodTable {
    const GROUP: &'static str = "robinhood_get";
    type Scratch = (
        [Vec<u8>; GET_BATCH_MAX],
        [Option<ObjectMeta>; GET_BATCH_MAX],
    );

    fn load(keys: usize, key: impl Fn(u64) -> Key) -> Self {
        let started = Instant::now();
        let mut table = RobinhoodTable::new(&TableConfig::new(keys, 8)).expect("table layout");
        let meta = ObjectMeta::new(1, ObjectFlags::READABLE);
        for i in 0..keys as u64 {
            table
                .upsert(key(i), meta, &i.to_le_bytes())
                .expect("the table is sized for the keys");
        }
        if let Ok(slots) = std::env::var("SPLITKV_BENCH_PREFETCH_SLOTS") {
            let slots = slots.parse().expect("SPLITKV_BENCH_PREFETCH_SLOTS");
            table.set_prefetch_slots(Some(slots));
        }
        let layout = table.layout();
        eprintln!(
            "robinhood_get: {keys} keys in {} home slots ({:.1}% full, {} in overflow), \
             region {:.2} GiB, huge pages {}, prefetch {} slots, loaded in {:.1?}",
            layout.home_slots(),
            100.0 * keys as f64 / layout.home_slots() as f64,
            table.overflow_len(),
            layout.region_bytes() as f64 / (1u64 << 30) as f64,
            HUGE_PAGES.load(Relaxed),
            table.prefetch_slots(),
            started.elapsed(),
        );
        table
    }

    fn scratch() -> Self::Scratch {
        (
            std::array::from_fn(|_| Vec::with_capacity(8)),
            [None; GET_BATCH_MAX],
        )
    }

    /// One [`RobinhoodTable::get`] per key.
    fn gets_one_at_a_time(&self, keys: &[Key], value: &mut Vec<u8>) -> usize {
        keys.iter()
            .filter(|key| self.get(key, value).is_some())
            .count()
    }

    /// [`RobinhoodTable::get_batch`] calls of `batch` keys.
    fn gets_batched(
        &self,
        keys: &[Key],
        batch: usize,
        (values, metas): &mut Self::Scratch,
    ) -> usize {
        let mut hits = 0;
        for chunk in keys.chunks(batch) {
            let n = chunk.len();
            self.get_batch(chunk, &mut values[..n], &mut metas[..n]);
            hits += metas[..n].iter().filter(|m| m.is_some()).count();
        }
        hits
    }
}

impl GetTable for Dlht {
    const GROUP: &'static str = "dlht_get";
    /// [`GET_BATCH_MAX`] `Request::Get`s whose keys are overwritten per batch
    /// (their value buffers keep their capacity, so batches do not allocate).
    type Scratch = Vec<Request>;

    fn load(keys: usize, key: impl Fn(u64) -> Key) -> Self {
        let started = Instant::now();
        let table = Dlht::with_capacity(keys);
        let meta = ObjectMeta::new(1, ObjectFlags::READABLE);
        for i in 0..keys as u64 {
            let inserted = table
                .insert(key(i), meta, &i.to_le_bytes())
                .expect("the table grows as needed");
            assert!(inserted, "keys are distinct");
        }
        eprintln!(
            "dlht_get: {keys} keys in {} bins ({:.2} keys per bin), {} resizes, \
             memory_bytes {:.2} GiB, huge pages {}, loaded in {:.1?}",
            table.bin_count(),
            keys as f64 / table.bin_count() as f64,
            table.resizes_completed(),
            table.memory_bytes() as f64 / (1u64 << 30) as f64,
            HUGE_PAGES.load(Relaxed),
            started.elapsed(),
        );
        table
    }

    fn scratch() -> Self::Scratch {
        (0..GET_BATCH_MAX)
            .map(|_| Request::Get {
                key: Key::new(0, 0),
                value: Vec::with_capacity(8),
                result: None,
            })
            .collect()
    }

    /// One [`Dlht::get`] per key.
    fn gets_one_at_a_time(&self, keys: &[Key], value: &mut Vec<u8>) -> usize {
        keys.iter()
            .filter(|key| self.get(key, value).is_some())
            .count()
    }

    /// [`Dlht::batch`] calls of `batch` Get requests.
    fn gets_batched(&self, keys: &[Key], batch: usize, reqs: &mut Self::Scratch) -> usize {
        let mut hits = 0;
        for chunk in keys.chunks(batch) {
            let reqs = &mut reqs[..chunk.len()];
            for (r, k) in reqs.iter_mut().zip(chunk) {
                let Request::Get { key, .. } = r else {
                    unreachable!("the scratch holds Gets only")
                };
                *key = *k;
            }
            self.batch(reqs);
            hits += reqs
                .iter()
                .filter(|r| {
                    matches!(
                        r,
                        Request::Get {
                            result: Some(_),
                            ..
                        }
                    )
                })
                .count();
        }
        hits
    }
}

/// The state of one table's Get benchmark, built on first use so that a
/// filtered run (`cargo bench ... -- mix_`) does not load the table.
struct GetBench<T: GetTable> {
    table: T,
    lookups: Vec<Key>,
    at: usize,
    value: Vec<u8>,
    scratch: T::Scratch,
    /// `(batch, one-at-a-time CPU time, batched CPU time)` of the interleaved runs.
    interleaved: Vec<(usize, Duration, Duration)>,
}

impl<T: GetTable> GetBench<T> {
    /// Loads `SPLITKV_BENCH_KEYS` keys and draws the lookup sequence.
    fn load() -> GetBench<T> {
        let keys = env_usize("SPLITKV_BENCH_KEYS", GET_KEYS_DEFAULT);
        let key = |i: u64| Key::new(0, mix64(i));
        let table = T::load(keys, key);
        let mut rng = OpRng::new(0x5EED_1234_ABCD_0001);
        GetBench {
            table,
            lookups: (0..GET_LOOKUPS)
                .map(|_| key(rng.below(keys) as u64))
                .collect(),
            at: 0,
            value: Vec::with_capacity(8),
            scratch: T::scratch(),
            interleaved: Vec::new(),
        }
    }

    /// The next `len` keys of the lookup sequence (cycled).
    fn next_window(&mut self, len: usize) -> std::ops::Range<usize> {
        self.at = (self.at + len) % (GET_LOOKUPS - ROUND_GETS);
        self.at..self.at + len
    }

    /// Times `iters` rounds of `batch` Gets, one at a time.
    fn time_one_at_a_time(&mut self, batch: usize, iters: u64) -> Duration {
        let start = thread_cpu_time();
        for _ in 0..iters {
            let window = self.next_window(batch);
            black_box(
                self.table
                    .gets_one_at_a_time(&self.lookups[window], &mut self.value),
            );
        }
        thread_cpu_time() - start
    }

    /// Times `iters` batches of `batch` Gets.
    fn time_batched(&mut self, batch: usize, iters: u64) -> Duration {
        let start = thread_cpu_time();
        for _ in 0..iters {
            let window = self.next_window(batch);
            black_box(
                self.table
                    .gets_batched(&self.lookups[window], batch, &mut self.scratch),
            );
        }
        thread_cpu_time() - start
    }

    /// The two variants in alternating rounds of [`ROUND_GETS`] Gets, so that
    /// both see the same interference from other jobs on the machine.
    fn interleave(&mut self, batch: usize) {
        if self.interleaved.iter().any(|&(b, ..)| b == batch) {
            return;
        }
        let (mut one, mut batched) = (Duration::ZERO, Duration::ZERO);
        let rounds = (ROUND_GETS / batch) as u64;
        for _ in 0..ROUNDS {
            one += self.time_one_at_a_time(batch, rounds);
            batched += self.time_batched(batch, rounds);
        }
        self.interleaved.push((batch, one, batched));
    }
}

/// Batched vs one-at-a-time Gets on the Robinhood table.
fn robinhood_get(c: &mut Criterion) {
    get_bench::<RobinhoodTable>(c);
}

/// Batched (`Dlht::batch`) vs one-at-a-time Gets on the DLHT (Dandelion §6,
/// Figure 7).
fn dlht_get(c: &mut Criterion) {
    get_bench::<Dlht>(c);
}

fn get_bench<T: GetTable>(c: &mut Criterion) {
    init_huge_pages();
    let mut bench: Option<GetBench<T>> = None;
    let mut group = c.benchmark_group(T::GROUP);
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for batch in GET_BATCH_SIZES {
        group.throughput(Throughput::Elements(batch as u64));
        group.bench_function(BenchmarkId::new("one_at_a_time", batch), |b| {
            let state = bench.get_or_insert_with(GetBench::load);
            b.iter_custom(|iters| state.time_one_at_a_time(batch, iters))
        });
        group.bench_function(BenchmarkId::new("batched", batch), |b| {
            let state = bench.get_or_insert_with(GetBench::load);
            state.interleave(batch);
            b.iter_custom(|iters| state.time_batched(batch, iters))
        });
    }
    group.finish();
    let Some(state) = bench else { return };
    let gets = (ROUNDS * ROUND_GETS) as f64;
    eprintln!(
        "{} interleaved ({ROUNDS} rounds of ~{ROUND_GETS} Gets per variant, thread CPU time):",
        T::GROUP
    );
    eprintln!("| batch | one at a time (M Gets/s) | batched (M Gets/s) | speed-up |");
    eprintln!("|---:|---:|---:|---:|");
    for &(batch, one, batched) in &state.interleaved {
        let done = (ROUND_GETS / batch * batch) as f64 / ROUND_GETS as f64 * gets;
        eprintln!(
            "| {batch} | {:.2} | {:.2} | {:.2}x |",
            done / one.as_secs_f64() / 1e6,
            done / batched.as_secs_f64() / 1e6,
            one.as_secs_f64() / batched.as_secs_f64(),
        );
    }
}

// ---- (b) operation mixes -------------------------------------------------------

/// A map driven by the mix benchmarks through `&self`, safe to share between
/// threads: 8-byte keys and values. Implement it for a new map and add one
/// `mix_case::<NewMap>` line to [`mixes`].
pub trait ConcurrentMap: Send + Sync + Sized {
    /// Name in the benchmark id.
    const NAME: &'static str;
    /// An empty map with room for `keys` keys.
    fn with_capacity(keys: usize) -> Self;
    /// The value of `key`, if present.
    fn get(&self, key: u64) -> Option<u64>;
    /// Inserts a new key; returns `false` (and changes nothing) if present.
    fn insert(&self, key: u64, value: u64) -> bool;
    /// Removes `key`; returns whether it was present.
    fn remove(&self, key: u64) -> bool;
    /// Replaces the value of a present key; returns whether it was present.
    fn update(&self, key: u64, value: u64) -> bool;
    /// Runs one thread's operation sequence; returns the operations that hit
    /// (found, inserted, removed or updated a key). By default one operation
    /// at a time; a map with a batch API may override it.
    fn run(&self, ops: &[Op]) -> usize {
        run_shared(self, ops)
    }
}

/// A map driven by one thread through `&mut self` (the Robinhood table has a
/// single writer). Every [`ConcurrentMap`] is one too.
pub trait SingleThreadMap: Sized {
    /// Name in the benchmark id.
    const NAME: &'static str;
    /// An empty map with room for `keys` keys.
    fn with_capacity(keys: usize) -> Self;
    /// The value of `key`, if present.
    fn get(&mut self, key: u64) -> Option<u64>;
    /// Inserts a new key; returns `false` (and changes nothing) if present.
    fn insert(&mut self, key: u64, value: u64) -> bool;
    /// Removes `key`; returns whether it was present.
    fn remove(&mut self, key: u64) -> bool;
    /// Replaces the value of a present key; returns whether it was present.
    fn update(&mut self, key: u64, value: u64) -> bool;
    /// Runs an operation sequence (see [`ConcurrentMap::run`]).
    fn run(&mut self, ops: &[Op]) -> usize {
        run_single(self, ops)
    }
}

impl<M: ConcurrentMap> SingleThreadMap for M {
    const NAME: &'static str = <M as ConcurrentMap>::NAME;
    fn with_capacity(keys: usize) -> Self {
        <M as ConcurrentMap>::with_capacity(keys)
    }
    fn get(&mut self, key: u64) -> Option<u64> {
        ConcurrentMap::get(self, key)
    }
    fn insert(&mut self, key: u64, value: u64) -> bool {
        ConcurrentMap::insert(self, key, value)
    }
    fn remove(&mut self, key: u64) -> bool {
        ConcurrentMap::remove(self, key)
    }
    fn update(&mut self, key: u64, value: u64) -> bool {
        ConcurrentMap::update(self, key, value)
    }
    fn run(&mut self, ops: &[Op]) -> usize {
        ConcurrentMap::run(self, ops)
    }
}

/// The Robinhood host table with its Get buffer. Sized so that `keys` fill
/// about 90% of the home slots (`TableConfig::capacity_keys = 0.9 · keys`):
/// the same number of home positions a peer gets for `with_capacity(keys)`.
struct Robinhood {
    table: RobinhoodTable,
    value: Vec<u8>,
}

const META: ObjectMeta = ObjectMeta(1);

impl SingleThreadMap for Robinhood {
    const NAME: &'static str = "robinhood";
    fn with_capacity(keys: usize) -> Self {
        let config = TableConfig::new(keys / 10 * 9, 8);
        Robinhood {
            table: RobinhoodTable::new(&config).expect("table layout"),
            value: Vec::with_capacity(8),
        }
    }
    fn get(&mut self, key: u64) -> Option<u64> {
        self.table.get(&Key::new(0, key), &mut self.value)?;
        Some(u64::from_le_bytes(self.value[..8].try_into().unwrap()))
    }
    fn insert(&mut self, key: u64, value: u64) -> bool {
        let key = Key::new(0, key);
        if self.table.get(&key, &mut self.value).is_some() {
            return false;
        }
        self.table
            .upsert(key, META, &value.to_le_bytes())
            .expect("the table is sized for the mix")
    }
    fn remove(&mut self, key: u64) -> bool {
        self.table.remove(&Key::new(0, key))
    }
    fn update(&mut self, key: u64, value: u64) -> bool {
        let key = Key::new(0, key);
        if self.table.get(&key, &mut self.value).is_none() {
            return false;
        }
        self.table
            .upsert(key, META, &value.to_le_bytes())
            .expect("an update needs no room");
        true
    }
}

/// hashbrown, single-threaded (no lock).
struct Hashbrown(hashbrown::HashMap<u64, u64, FixedState>);

impl SingleThreadMap for Hashbrown {
    const NAME: &'static str = "hashbrown";
    fn with_capacity(keys: usize) -> Self {
        Hashbrown(hashbrown::HashMap::with_capacity_and_hasher(
            keys, FixedState,
        ))
    }
    fn get(&mut self, key: u64) -> Option<u64> {
        self.0.get(&key).copied()
    }
    fn insert(&mut self, key: u64, value: u64) -> bool {
        match self.0.entry(key) {
            hashbrown::hash_map::Entry::Occupied(_) => false,
            hashbrown::hash_map::Entry::Vacant(v) => {
                v.insert(value);
                true
            }
        }
    }
    fn remove(&mut self, key: u64) -> bool {
        self.0.remove(&key).is_some()
    }
    fn update(&mut self, key: u64, value: u64) -> bool {
        self.0.get_mut(&key).map(|v| *v = value).is_some()
    }
}

/// hashbrown behind one `parking_lot::RwLock` (shared for Gets).
struct LockedHashbrown(RwLock<hashbrown::HashMap<u64, u64, FixedState>>);

impl ConcurrentMap for LockedHashbrown {
    const NAME: &'static str = "rwlock_hashbrown";
    fn with_capacity(keys: usize) -> Self {
        LockedHashbrown(RwLock::new(hashbrown::HashMap::with_capacity_and_hasher(
            keys, FixedState,
        )))
    }
    fn get(&self, key: u64) -> Option<u64> {
        self.0.read().get(&key).copied()
    }
    fn insert(&self, key: u64, value: u64) -> bool {
        match self.0.write().entry(key) {
            hashbrown::hash_map::Entry::Occupied(_) => false,
            hashbrown::hash_map::Entry::Vacant(v) => {
                v.insert(value);
                true
            }
        }
    }
    fn remove(&self, key: u64) -> bool {
        self.0.write().remove(&key).is_some()
    }
    fn update(&self, key: u64, value: u64) -> bool {
        self.0.write().get_mut(&key).map(|v| *v = value).is_some()
    }
}

struct Dash(dashmap::DashMap<u64, u64, FixedState>);

impl ConcurrentMap for Dash {
    const NAME: &'static str = "dashmap";
    fn with_capacity(keys: usize) -> Self {
        Dash(dashmap::DashMap::with_capacity_and_hasher(keys, FixedState))
    }
    fn get(&self, key: u64) -> Option<u64> {
        self.0.get(&key).map(|v| *v)
    }
    fn insert(&self, key: u64, value: u64) -> bool {
        match self.0.entry(key) {
            dashmap::mapref::entry::Entry::Occupied(_) => false,
            dashmap::mapref::entry::Entry::Vacant(v) => {
                v.insert(value);
                true
            }
        }
    }
    fn remove(&self, key: u64) -> bool {
        self.0.remove(&key).is_some()
    }
    fn update(&self, key: u64, value: u64) -> bool {
        self.0.get_mut(&key).map(|mut v| *v = value).is_some()
    }
}

struct Scc(scc::HashMap<u64, u64, FixedState>);

impl ConcurrentMap for Scc {
    const NAME: &'static str = "scc";
    fn with_capacity(keys: usize) -> Self {
        Scc(scc::HashMap::with_capacity_and_hasher(keys, FixedState))
    }
    fn get(&self, key: u64) -> Option<u64> {
        self.0.read_sync(&key, |_, v| *v)
    }
    fn insert(&self, key: u64, value: u64) -> bool {
        self.0.insert_sync(key, value).is_ok()
    }
    fn remove(&self, key: u64) -> bool {
        self.0.remove_sync(&key).is_some()
    }
    fn update(&self, key: u64, value: u64) -> bool {
        self.0.update_sync(&key, |_, v| *v = value).is_some()
    }
}

/// papaya, pinned per operation (its documented default use).
struct Papaya(papaya::HashMap<u64, u64, FixedState>);

impl ConcurrentMap for Papaya {
    const NAME: &'static str = "papaya";
    fn with_capacity(keys: usize) -> Self {
        Papaya(papaya::HashMap::with_capacity_and_hasher(keys, FixedState))
    }
    fn get(&self, key: u64) -> Option<u64> {
        self.0.pin().get(&key).copied()
    }
    fn insert(&self, key: u64, value: u64) -> bool {
        self.0.pin().try_insert(key, value).is_ok()
    }
    fn remove(&self, key: u64) -> bool {
        self.0.pin().remove(&key).is_some()
    }
    fn update(&self, key: u64, value: u64) -> bool {
        self.0.pin().update(key, |_| value).is_some()
    }
}

// ---- DLHT (Dandelion §6) ---------------------------------------------------------

/// The DLHT, one operation at a time. Its `get` fills a value buffer, so the
/// adapter keeps one per thread ([`DLHT_VALUE`]).
struct DlhtMap(Dlht);

thread_local! {
    /// The Get buffer of [`DlhtMap`] (one per thread; never reallocated).
    static DLHT_VALUE: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(Vec::with_capacity(8));
}

impl ConcurrentMap for DlhtMap {
    const NAME: &'static str = "dlht";
    fn with_capacity(keys: usize) -> Self {
        DlhtMap(Dlht::with_capacity(keys))
    }
    fn get(&self, key: u64) -> Option<u64> {
        DLHT_VALUE.with_borrow_mut(|v| {
            self.0.get(&Key::new(0, key), v)?;
            Some(u64::from_le_bytes(v[..8].try_into().unwrap()))
        })
    }
    fn insert(&self, key: u64, value: u64) -> bool {
        self.0
            .insert(Key::new(0, key), META, &value.to_le_bytes())
            .expect("dlht insert")
    }
    fn remove(&self, key: u64) -> bool {
        self.0.remove(&Key::new(0, key))
    }
    fn update(&self, key: u64, value: u64) -> bool {
        // `put` replaces a present key only, and says whether it was present.
        self.0
            .put(Key::new(0, key), META, &value.to_le_bytes())
            .expect("dlht put")
    }
}

/// Diagnostic: the DLHT one operation at a time, as [`DlhtMap`], but each
/// thread holds one crossbeam-epoch pin around its whole operation sequence,
/// so the pin every DLHT operation takes is only a counter increment instead
/// of a `lock cmpxchg` (a full barrier on x86). The difference from `dlht` is
/// what pinning costs. Holding a pin delays memory reclamation; the mixes
/// store 8-byte values inline and do not resize, so nothing waits for it.
struct DlhtPinned(DlhtMap);

impl ConcurrentMap for DlhtPinned {
    const NAME: &'static str = "dlht_pinned";
    fn with_capacity(keys: usize) -> Self {
        DlhtPinned(<DlhtMap as ConcurrentMap>::with_capacity(keys))
    }
    fn get(&self, key: u64) -> Option<u64> {
        ConcurrentMap::get(&self.0, key)
    }
    fn insert(&self, key: u64, value: u64) -> bool {
        ConcurrentMap::insert(&self.0, key, value)
    }
    fn remove(&self, key: u64) -> bool {
        ConcurrentMap::remove(&self.0, key)
    }
    fn update(&self, key: u64, value: u64) -> bool {
        ConcurrentMap::update(&self.0, key, value)
    }
    fn run(&self, ops: &[Op]) -> usize {
        let _pinned = crossbeam::epoch::pin();
        run_shared(self, ops)
    }
}

/// Default number of consecutive operations a [`DlhtBatched`] thread issues as
/// one [`Dlht::batch`] (`SPLITKV_BENCH_MIX_BATCH` overrides it).
const MIX_BATCH_DEFAULT: usize = 24;
/// Bound on `SPLITKV_BENCH_MIX_BATCH`.
const MIX_BATCH_MAX: usize = 64;

/// The DLHT driven through its batch API: each thread cuts its operation
/// sequence into consecutive groups of `SPLITKV_BENCH_MIX_BATCH` (default
/// [`MIX_BATCH_DEFAULT`]) operations, whatever their kinds, and issues each
/// group as one [`Dlht::batch`] (Get → `Request::Get`, insert →
/// `Request::Insert`, remove → `Request::Delete`, update → `Request::Put`).
/// `Dlht::batch` prefetches every request's bin and then runs them in order,
/// so each thread sees the same results as one operation at a time.
struct DlhtBatched {
    table: Dlht,
    batch: usize,
}

impl ConcurrentMap for DlhtBatched {
    const NAME: &'static str = "dlht_batched";
    fn with_capacity(keys: usize) -> Self {
        let batch = env_usize("SPLITKV_BENCH_MIX_BATCH", MIX_BATCH_DEFAULT);
        assert!(
            (1..=MIX_BATCH_MAX).contains(&batch),
            "SPLITKV_BENCH_MIX_BATCH={batch}: 1 to {MIX_BATCH_MAX}"
        );
        DlhtBatched {
            table: Dlht::with_capacity(keys),
            batch,
        }
    }
    // Prefill and anything outside `run` go one at a time.
    fn get(&self, key: u64) -> Option<u64> {
        let mut v = Vec::with_capacity(8);
        self.table.get(&Key::new(0, key), &mut v)?;
        Some(u64::from_le_bytes(v[..8].try_into().unwrap()))
    }
    fn insert(&self, key: u64, value: u64) -> bool {
        self.table
            .insert(Key::new(0, key), META, &value.to_le_bytes())
            .expect("dlht insert")
    }
    fn remove(&self, key: u64) -> bool {
        self.table.remove(&Key::new(0, key))
    }
    fn update(&self, key: u64, value: u64) -> bool {
        self.table
            .put(Key::new(0, key), META, &value.to_le_bytes())
            .expect("dlht put")
    }
    fn run(&self, ops: &[Op]) -> usize {
        // One request and one 8-byte buffer per batch position, allocated once
        // per run; `set_request` moves buffers between request kinds, so the
        // batches themselves do not allocate.
        let mut reqs: Vec<Request> = (0..self.batch)
            .map(|_| Request::delete(Key::new(0, 0)))
            .collect();
        let mut bufs: Vec<Vec<u8>> = (0..self.batch).map(|_| Vec::with_capacity(8)).collect();
        let mut hits = 0;
        for chunk in ops.chunks(self.batch) {
            let reqs = &mut reqs[..chunk.len()];
            for ((r, buf), &op) in reqs.iter_mut().zip(&mut bufs).zip(chunk) {
                set_request(r, buf, op);
            }
            self.table.batch(reqs);
            hits += reqs
                .iter()
                .filter(|r| match r {
                    Request::Get { result, .. } => result.is_some(),
                    Request::Insert { result, .. }
                    | Request::Put { result, .. }
                    | Request::Upsert { result, .. } => *result.as_ref().expect("dlht write"),
                    Request::Delete { result, .. } => *result,
                })
                .count();
        }
        hits
    }
}

/// Turns `r` into the request for `op`. `spare` holds the 8-byte buffer of
/// this batch position whenever `r` is a `Delete` (which has none). A request
/// of the same kind is only given its new key and value (the common case:
/// read-heavy batches are mostly Gets), so the adapter does not rebuild every
/// request of every batch.
#[inline]
fn set_request(r: &mut Request, spare: &mut Vec<u8>, op: Op) {
    let set = |buf: &mut Vec<u8>, v: u64| {
        buf.clear();
        buf.extend_from_slice(&v.to_le_bytes());
    };
    match (&mut *r, op) {
        (Request::Get { key, .. }, Op::Get(k)) | (Request::Delete { key, .. }, Op::Remove(k)) => {
            *key = Key::new(0, k);
            return;
        }
        (Request::Insert { key, value, .. }, Op::Insert(k)) => {
            *key = Key::new(0, k);
            set(value, k);
            return;
        }
        (Request::Put { key, value, .. }, Op::Update(k)) => {
            *key = Key::new(0, k);
            set(value, k ^ 1);
            return;
        }
        _ => {}
    }
    let mut buf = match r {
        Request::Get { value, .. }
        | Request::Insert { value, .. }
        | Request::Put { value, .. }
        | Request::Upsert { value, .. } => std::mem::take(value),
        Request::Delete { .. } => std::mem::take(spare),
    };
    let key = |k: u64| Key::new(0, k);
    let value = |buf: &mut Vec<u8>, v: u64| {
        buf.clear();
        buf.extend_from_slice(&v.to_le_bytes());
    };
    *r = match op {
        Op::Get(k) => Request::Get {
            key: key(k),
            value: buf,
            result: None,
        },
        Op::Insert(k) => {
            value(&mut buf, k);
            Request::Insert {
                key: key(k),
                meta: META,
                value: buf,
                result: Ok(false),
            }
        }
        Op::Update(k) => {
            value(&mut buf, k ^ 1);
            Request::Put {
                key: key(k),
                meta: META,
                value: buf,
                result: Ok(false),
            }
        }
        Op::Remove(k) => {
            *spare = buf;
            Request::Delete {
                key: key(k),
                result: false,
            }
        }
    };
}

/// One operation of a pre-drawn mix, on the key it names.
#[derive(Clone, Copy)]
pub enum Op {
    /// Look the key up.
    Get(u64),
    /// Insert the key (value = key).
    Insert(u64),
    /// Remove the key.
    Remove(u64),
    /// Replace the key's value (new value = key ^ 1).
    Update(u64),
}

/// A conc-map-bench workload: percentages of get/insert/remove/update and the
/// prefill fraction of the capacity.
#[derive(Clone, Copy)]
struct Workload {
    name: &'static str,
    mix_pct: [u32; 4],
    prefill_pct: usize,
}

const WORKLOADS: [Workload; 3] = [
    Workload {
        name: "read_heavy",
        mix_pct: [98, 1, 1, 0],
        prefill_pct: 75,
    },
    Workload {
        name: "exchange",
        mix_pct: [10, 40, 40, 10],
        prefill_pct: 75,
    },
    Workload {
        name: "rapid_grow",
        mix_pct: [5, 80, 5, 10],
        prefill_pct: 0,
    },
];

/// The keys one thread inserts before timing and the operations it then runs.
/// Thread `t` owns the keys `mix64(t << 40 | n)`; Gets, removes and updates pick
/// a key that is present at that point of the thread's sequence (so nearly all
/// of them hit), inserts a fresh one.
struct ThreadPlan {
    prefill: Vec<u64>,
    ops: Vec<Op>,
}

fn plan(workload: &Workload, thread: usize, prefill: usize, ops: usize) -> ThreadPlan {
    let mut rng = OpRng::new(mix64(thread as u64 + 1));
    let mut next_key = 0u64;
    let mut fresh = || {
        next_key += 1;
        mix64(((thread as u64) << 40) | next_key)
    };
    let mut present: Vec<u64> = (0..prefill).map(|_| fresh()).collect();
    let prefill_keys = present.clone();
    let [get, insert, remove, _update] = workload.mix_pct;
    let ops = (0..ops)
        .map(|_| {
            let roll = (rng.next() % 100) as u32;
            if (get..get + insert).contains(&roll) || present.is_empty() {
                let key = fresh();
                present.push(key);
                return Op::Insert(key);
            }
            let at = rng.below(present.len());
            if roll < get {
                Op::Get(present[at])
            } else if roll < get + insert + remove {
                Op::Remove(present.swap_remove(at))
            } else {
                Op::Update(present[at])
            }
        })
        .collect();
    ThreadPlan {
        prefill: prefill_keys,
        ops,
    }
}

fn run_single<M: SingleThreadMap>(map: &mut M, ops: &[Op]) -> usize {
    let mut hits = 0;
    for &op in ops {
        hits += match op {
            Op::Get(k) => map.get(k).is_some(),
            Op::Insert(k) => map.insert(k, k),
            Op::Remove(k) => map.remove(k),
            Op::Update(k) => map.update(k, k ^ 1),
        } as usize;
    }
    hits
}

fn run_shared<M: ConcurrentMap>(map: &M, ops: &[Op]) -> usize {
    let mut hits = 0;
    for &op in ops {
        hits += match op {
            Op::Get(k) => map.get(k).is_some(),
            Op::Insert(k) => map.insert(k, k),
            Op::Remove(k) => map.remove(k),
            Op::Update(k) => map.update(k, k ^ 1),
        } as usize;
    }
    hits
}

/// Benchmarks one map on one thread: each iteration builds and prefills a
/// fresh map (not timed), then measures the thread CPU time of the whole
/// operation sequence.
fn mix_case_single<M: SingleThreadMap>(
    c: &mut Criterion,
    group: &str,
    capacity: usize,
    plan: &ThreadPlan,
) {
    let mut g = c.benchmark_group(group);
    configure_mix_group(&mut g, plan.ops.len());
    g.bench_function(M::NAME, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut map = M::with_capacity(capacity);
                for &k in &plan.prefill {
                    map.insert(k, k);
                }
                let start = thread_cpu_time();
                black_box(map.run(&plan.ops));
                total += thread_cpu_time() - start;
            }
            total
        })
    });
    g.finish();
}

/// Benchmarks one shared map with one thread per plan: each iteration builds
/// and prefills a fresh map (not timed), starts the threads together and
/// measures wall time until the last one finishes (CPU time would hide lock
/// waits).
fn mix_case<M: ConcurrentMap>(
    c: &mut Criterion,
    group: &str,
    capacity: usize,
    plans: &[ThreadPlan],
) {
    if plans.len() == 1 {
        return mix_case_single::<M>(c, group, capacity, &plans[0]);
    }
    let mut g = c.benchmark_group(group);
    configure_mix_group(&mut g, plans.iter().map(|p| p.ops.len()).sum());
    g.bench_function(<M as ConcurrentMap>::NAME, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let map = <M as ConcurrentMap>::with_capacity(capacity);
                for plan in plans {
                    for &k in &plan.prefill {
                        ConcurrentMap::insert(&map, k, k);
                    }
                }
                let start = Barrier::new(plans.len() + 1);
                total += std::thread::scope(|s| {
                    let workers: Vec<_> = plans
                        .iter()
                        .map(|plan| {
                            let (map, start) = (&map, &start);
                            s.spawn(move || {
                                start.wait();
                                black_box(ConcurrentMap::run(map, &plan.ops))
                            })
                        })
                        .collect();
                    start.wait();
                    let began = Instant::now();
                    for w in workers {
                        w.join().expect("mix thread");
                    }
                    began.elapsed()
                });
            }
            total
        })
    });
    g.finish();
}

fn configure_mix_group(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    ops: usize,
) {
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .throughput(Throughput::Elements(ops as u64));
}

fn mixes(c: &mut Criterion) {
    init_huge_pages();
    let log2 = env_usize("SPLITKV_BENCH_MIX_LOG2", MIX_LOG2_DEFAULT as usize);
    let capacity = 1usize << log2;
    for workload in &WORKLOADS {
        for threads in [1usize, 2] {
            let prefill = capacity * workload.prefill_pct / 100 / threads;
            let plans: Vec<ThreadPlan> = (0..threads)
                .map(|t| plan(workload, t, prefill, capacity / threads))
                .collect();
            let group = format!("mix_{}_{threads}t", workload.name);
            if threads == 1 {
                mix_case_single::<Robinhood>(c, &group, capacity, &plans[0]);
                mix_case_single::<Hashbrown>(c, &group, capacity, &plans[0]);
            } else {
                mix_case::<LockedHashbrown>(c, &group, capacity, &plans);
            }
            mix_case::<Dash>(c, &group, capacity, &plans);
            mix_case::<Scc>(c, &group, capacity, &plans);
            mix_case::<Papaya>(c, &group, capacity, &plans);
            mix_case::<DlhtMap>(c, &group, capacity, &plans);
            mix_case::<DlhtBatched>(c, &group, capacity, &plans);
            mix_case::<DlhtPinned>(c, &group, capacity, &plans);
        }
    }
}

criterion_group!(benches, robinhood_get, dlht_get, mixes);
criterion_main!(benches);
