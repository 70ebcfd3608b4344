//! The operation generator and the conc-map-bench workload mixes.

use splitkv_bench::measure::mix64;

/// The generator drawing operations: xoshiro256++ (`rand_xoshiro`), drawn
/// by modulo (a bias of at most n / 2^64, and no rejection loop in the mixes).
pub(crate) struct OpRng(rand_xoshiro::Xoshiro256PlusPlus);

impl OpRng {
    pub(crate) fn new(seed: u64) -> OpRng {
        OpRng(rand::SeedableRng::seed_from_u64(seed))
    }

    pub(crate) fn next(&mut self) -> u64 {
        rand::RngCore::next_u64(&mut self.0)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// One operation of a pre-drawn mix, on the key it names.
#[derive(Clone, Copy)]
pub(crate) enum Op {
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
pub(crate) struct Workload {
    pub(crate) name: &'static str,
    pub(crate) mix_pct: [u32; 4],
    pub(crate) prefill_pct: usize,
}

pub(crate) const WORKLOADS: [Workload; 3] = [
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
pub(crate) struct ThreadPlan {
    pub(crate) prefill: Vec<u64>,
    pub(crate) ops: Vec<Op>,
}

pub(crate) fn plan(workload: &Workload, thread: usize, prefill: usize, ops: usize) -> ThreadPlan {
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
