//! Host-table microbenchmarks (criterion). Run with `cargo bench -p splitkv-bench
//! --bench tables`; benches/README.md has the commands and the current
//! figures, benches/notes/2026-11-21-host-tables.md the results on the project
//! machine and the data store's targets.
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

#[path = "tables/alloc.rs"]
mod alloc;
#[path = "tables/dlht.rs"]
mod dlht;
#[path = "tables/get.rs"]
mod get;
#[path = "tables/mix.rs"]
mod mix;
#[path = "tables/ops.rs"]
mod ops;
#[path = "tables/peers.rs"]
mod peers;
#[path = "tables/robinhood.rs"]
mod robinhood;
#[path = "tables/sizes.rs"]
mod sizes;

use criterion::{criterion_group, criterion_main};
use get::{dlht_get, robinhood_get};
use mix::mixes;

criterion_group!(benches, robinhood_get, dlht_get, mixes);
criterion_main!(benches);
