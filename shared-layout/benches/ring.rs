//! Microbenchmarks of the region accessors and the ring on top of them:
//! ring produce/consume of 64-byte entries (one at a time and in bursts) and
//! 64-byte region copies and word accesses. Run with
//! `cargo bench -p splitkv-layout --bench ring`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use splitkv_layout::ring::ring_pair;
use splitkv_layout::sync::Ordering;
use splitkv_layout::Region;
use std::hint::black_box;

/// Entries pushed before they are popped in the burst case.
const BURST_ENTRIES: usize = 32;

fn ring_64b(c: &mut Criterion) {
    let mut g = c.benchmark_group("ring_64b");
    let payload = [0xa5u8; 64];
    let (mut p, mut q) = ring_pair(1 << 16).expect("valid capacity");
    let mut out = Vec::with_capacity(64);
    g.throughput(Throughput::Elements(1));
    g.bench_function("push_pop", |b| {
        b.iter(|| {
            p.try_push(black_box(&payload)).expect("room");
            assert!(q.try_pop(&mut out).expect("not corrupt"));
            black_box(&out);
        })
    });
    g.throughput(Throughput::Elements(BURST_ENTRIES as u64));
    g.bench_function("burst_32", |b| {
        b.iter(|| {
            for _ in 0..BURST_ENTRIES {
                p.try_push(black_box(&payload)).expect("room");
            }
            for _ in 0..BURST_ENTRIES {
                assert!(q.try_pop(&mut out).expect("not corrupt"));
            }
            black_box(&out);
        })
    });
    g.finish();
}

fn region_64b(c: &mut Criterion) {
    let mut g = c.benchmark_group("region_64b");
    let region = Region::new(1 << 16);
    let src = [0x5au8; 64];
    let mut dst = [0u8; 64];
    g.throughput(Throughput::Elements(1));
    g.bench_function("write_read_bytes", |b| {
        let mut at = 0usize;
        b.iter(|| {
            region.write_bytes(black_box(at), &src).expect("in range");
            region
                .read_bytes(black_box(at), &mut dst)
                .expect("in range");
            at = (at + 64) & ((1 << 16) - 1);
            black_box(&dst);
        })
    });
    g.bench_function("load_store_words", |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for i in 0..8 {
                let at = black_box(i * 8);
                region.store(at, i as u64, Ordering::Relaxed);
                sum = sum.wrapping_add(region.load(at, Ordering::Relaxed));
            }
            region.prefetch(black_box(4096));
            sum
        })
    });
    g.finish();
}

criterion_group!(benches, ring_64b, region_64b);
criterion_main!(benches);
