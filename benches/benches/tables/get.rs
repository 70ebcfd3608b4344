//! (a) Batched vs one-at-a-time Gets: the benchmark driver.

use super::{alloc::*, ops::*, sizes::*};
use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use splitkv_bench::measure::{mix64, thread_cpu_time};
use splitkv_host::table::dlht::Dlht;
use splitkv_host::table::RobinhoodTable;
use splitkv_layout::Key;
use std::hint::black_box;
use std::time::Duration;

// ---- (a) batched vs one-at-a-time Gets ---------------------------------------

/// A table the Get benchmark drives: loaded once with `keys` 8-byte keys and
/// values, then read one Get at a time or in batches through its batch API.
pub(crate) trait GetTable: Sized {
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

/// The state of one table's Get benchmark, built on first use so that a
/// filtered run (`cargo bench ... -- mix_`) does not load the table.
pub(crate) struct GetBench<T: GetTable> {
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
pub(crate) fn robinhood_get(c: &mut Criterion) {
    get_bench::<RobinhoodTable>(c);
}

/// Batched (`Dlht::batch`) vs one-at-a-time Gets on the DLHT (Dandelion §6,
/// Figure 7).
pub(crate) fn dlht_get(c: &mut Criterion) {
    get_bench::<Dlht>(c);
}

pub(crate) fn get_bench<T: GetTable>(c: &mut Criterion) {
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
