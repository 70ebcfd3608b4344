//! Profiling aid for the DLHT's CPU path: Gets (batched or one at a time) and
//! a read-heavy-like mix on a table small enough to stay in L2, so a profile
//! (`perf record -e cpu-clock`) shows instructions rather than memory stalls.
//!
//! ```sh
//! cargo run --release -p splitkv-bench --example dlht_cpu -- [keys] [rounds]
//! ```
use splitkv_bench::measure::{mix64, thread_cpu_time};
use splitkv_host::table::dlht::{Dlht, Request};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
use std::hint::black_box;

/// Command line (`-- [KEYS] [ROUNDS]`).
#[derive(clap::Parser, Debug)]
struct Cli {
    /// Keys in the table.
    #[arg(default_value_t = 12_288)]
    keys: u64,
    /// Rounds over the 65,536 lookups.
    #[arg(default_value_t = 200)]
    rounds: usize,
}

fn main() {
    let Cli { keys, rounds } = clap::Parser::parse();
    let t = Dlht::with_capacity(keys as usize * 4 / 3);
    let meta = ObjectMeta::new(1, ObjectFlags::READABLE);
    for i in 0..keys {
        t.insert(Key::new(0, mix64(i)), meta, &i.to_le_bytes())
            .expect("insert");
    }
    let lookups: Vec<Key> = (0..65_536u64)
        .map(|i| Key::new(0, mix64(mix64(i) % keys)))
        .collect();
    let mut reqs: Vec<Request> = (0..24).map(|_| Request::get(Key::new(0, 0))).collect();
    for r in reqs.iter_mut() {
        if let Request::Get { value, .. } = r {
            value.reserve(8);
        }
    }
    let mut value = Vec::with_capacity(8);
    let mut hb: hashbrown::HashMap<u64, u64, splitkv_layout::FixedState> =
        hashbrown::HashMap::with_capacity_and_hasher(
            keys as usize * 4 / 3,
            splitkv_layout::FixedState,
        );
    for i in 0..keys {
        hb.insert(mix64(i), i);
    }
    for variant in [
        "batched",
        "one_at_a_time",
        "hashbrown",
        "batched",
        "one_at_a_time",
        "hashbrown",
    ] {
        let start = thread_cpu_time();
        let mut hits = 0usize;
        for _ in 0..rounds {
            if variant == "batched" {
                for chunk in lookups.chunks(24) {
                    let reqs = &mut reqs[..chunk.len()];
                    for (r, k) in reqs.iter_mut().zip(chunk) {
                        if let Request::Get { key, .. } = r {
                            *key = *k;
                        }
                    }
                    t.batch(reqs);
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
            } else if variant == "one_at_a_time" {
                for k in &lookups {
                    hits += t.get(k, &mut value).is_some() as usize;
                }
            } else {
                for k in &lookups {
                    hits += hb.get(&k.id).is_some() as usize;
                }
            }
        }
        let gets = rounds * lookups.len();
        assert_eq!(hits, gets);
        let ns = (thread_cpu_time() - start).as_nanos() as f64 / gets as f64;
        println!(
            "{variant}: {ns:.1} ns per Get ({keys} keys, {} bins)",
            t.bin_count()
        );
        black_box(hits);
    }
}
