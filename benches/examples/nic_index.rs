//! NIC index cache cost per operation (Xenic §4.1.3, ScaleStore §4.1), through
//! `NicIndex`'s public API only, so the same file measures any version of it.
//!
//! ```text
//! cargo run --release -p splitkv-bench --example nic_index [-- REPEATS]
//! ```
//!
//! The host table is a Robinhood layout for 600,000 keys with 8-byte values
//! (one Smallbank node of the default bench: 100,000 accounts × 2 tables ×
//! replication 3), or a DLHT. Scenarios, each `OPS` operations:
//!
//! - `hit`: `cached` of random keys of 60,000 cached ones (cache of 65,536);
//! - `skewed`: 90% of lookups in a hot set of 24,000 keys (4%), 10% uniform
//!   over all 600,000, a miss followed by `cache_clean` (cache of 65,536);
//! - `evict`: uniform lookups over 600,000 keys against a cache of 1,024, a
//!   miss followed by `cache_clean` (nearly every fill evicts);
//! - `commit`: `install_committed`, `set_pin` and, every 64 commits,
//!   `unpin_applied`, on random keys of a full cache of 65,536.
//!
//! Each figure is the best of `REPEATS` (default 5) runs, in nanoseconds of the
//! thread's CPU time per operation (the machine's cores are shared).

use splitkv_bench::measure::thread_cpu_time;
use splitkv_layout::robinhood_layout::{TableConfig, TableLayout};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
use splitkv_nic::index::{HostTableLayout, NicIndex};
use std::hint::black_box;

const OPS: u64 = 4_000_000;
const KEYS: u64 = 600_000;

/// The generator drawing keys: xoshiro256++ (`rand_xoshiro`), drawn by modulo.
struct Rng(rand_xoshiro::Xoshiro256PlusPlus);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        rand::RngCore::next_u64(&mut self.0) % n
    }
}

fn key(i: u64) -> Key {
    Key::new((i & 1) as u32, i >> 1)
}

fn meta(v: u64) -> ObjectMeta {
    ObjectMeta::new(v, ObjectFlags::empty())
}

fn fill(ix: &mut NicIndex, n: u64) {
    for i in 0..n {
        let k = key(i);
        let s = ix.read_stamp(&k);
        ix.cache_clean(k, meta(1), &i.to_le_bytes(), s);
    }
}

/// ns per op of `f` run `OPS` times on a fresh index.
fn measure(
    kind: HostTableLayout,
    cache: usize,
    setup: impl Fn(&mut NicIndex),
    mut f: impl FnMut(&mut NicIndex, &mut Rng, u64),
) -> f64 {
    let mut ix = NicIndex::new(kind, cache, 1);
    setup(&mut ix);
    let mut rng = Rng(rand::SeedableRng::seed_from_u64(0x9E37_79B9_7F4A_7C15));
    let t = thread_cpu_time();
    for i in 0..OPS {
        f(&mut ix, &mut rng, i);
    }
    let dt = thread_cpu_time() - t;
    black_box(ix.cache_stats());
    dt.as_nanos() as f64 / OPS as f64
}

fn lookup_or_fill(ix: &mut NicIndex, k: Key) {
    if let Some(c) = ix.cached(&k) {
        black_box(c.value.len());
    } else {
        let s = ix.read_stamp(&k);
        ix.cache_clean(k, meta(1), &k.id.to_le_bytes(), s);
    }
}

/// Command line (`-- [REPEATS]`).
#[derive(clap::Parser, Debug)]
struct Cli {
    /// Runs per scenario; the best is reported.
    #[arg(default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=1000))]
    repeats: u64,
}

fn main() {
    let repeats = <Cli as clap::Parser>::parse().repeats as usize;
    let layout = TableLayout::new(&TableConfig::new(KEYS as usize, 8)).expect("layout");
    for (name, kind) in [
        ("robinhood", HostTableLayout::Robinhood(layout)),
        ("dlht", HostTableLayout::Dlht),
    ] {
        let best = |f: &dyn Fn() -> f64| (0..repeats).map(|_| f()).fold(f64::MAX, f64::min);
        let hit = best(&|| {
            measure(
                kind,
                65_536,
                |ix| fill(ix, 60_000),
                |ix, r, _| {
                    let c = ix.cached(&key(r.below(60_000)));
                    black_box(c.map(|c| c.meta));
                },
            )
        });
        let skewed = best(&|| {
            measure(
                kind,
                65_536,
                |_| {},
                |ix, r, _| {
                    let i = if r.below(10) < 9 {
                        r.below(24_000)
                    } else {
                        r.below(KEYS)
                    };
                    lookup_or_fill(ix, key(i));
                },
            )
        });
        let evict = best(&|| {
            measure(
                kind,
                1_024,
                |_| {},
                |ix, r, _| lookup_or_fill(ix, key(r.below(KEYS))),
            )
        });
        let commit = best(&|| {
            let mut pos = 0u64;
            let mut version = 1u64;
            measure(
                kind,
                65_536,
                |ix| fill(ix, 65_536),
                move |ix, r, i| {
                    let k = key(r.below(KEYS));
                    version += 1;
                    ix.install_committed(k, meta(version), &version.to_le_bytes());
                    pos += 64;
                    ix.set_pin(k, version, pos);
                    if i % 64 == 63 {
                        ix.unpin_applied(pos);
                    }
                },
            )
        });
        println!(
            "{name:9}  hit {hit:6.1} ns  skewed {skewed:6.1} ns  evict {evict:6.1} ns  commit {commit:6.1} ns"
        );
    }
}
