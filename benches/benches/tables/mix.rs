//! (b) Operation mixes: the map traits, runners and the `mixes` benchmark.

use super::{alloc::*, dlht::*, ops::*, peers::*, robinhood::*, sizes::*};
use criterion::{Criterion, SamplingMode, Throughput};
use splitkv_bench::measure::thread_cpu_time;
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

// ---- (b) operation mixes -------------------------------------------------------

/// A map driven by the mix benchmarks through `&self`, safe to share between
/// threads: 8-byte keys and values. Implement it for a new map and add one
/// `mix_case::<NewMap>` line to [`mixes`].
pub(crate) trait ConcurrentMap: Send + Sync + Sized {
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
pub(crate) trait SingleThreadMap: Sized {
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

pub(crate) fn run_single<M: SingleThreadMap>(map: &mut M, ops: &[Op]) -> usize {
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

pub(crate) fn run_shared<M: ConcurrentMap>(map: &M, ops: &[Op]) -> usize {
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
pub(crate) fn mix_case_single<M: SingleThreadMap>(
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
pub(crate) fn mix_case<M: ConcurrentMap>(
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

pub(crate) fn configure_mix_group(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    ops: usize,
) {
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .throughput(Throughput::Elements(ops as u64));
}

pub(crate) fn mixes(c: &mut Criterion) {
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
