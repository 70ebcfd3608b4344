//! Benchmark sizes and their environment overrides.

// ---- sizes ----------------------------------------------------------------------

/// Default key count of the Get benchmark: 90% of 2^25 home slots, a table of
/// 2^25 · 48 B slots plus a 10% overflow pool ≈ 1.8 GiB, seven times the
/// 260 MiB L3 of the project machine.
pub(crate) const GET_KEYS_DEFAULT: usize = 30_198_988;
/// Batch sizes of the Get benchmark (Dandelion Figure 7 goes up to 32).
pub(crate) const GET_BATCH_SIZES: [usize; 6] = [1, 4, 8, 16, 24, 32];
/// Keys in the pre-drawn lookup sequence of the Get benchmark (cycled): 64 MiB
/// of keys whose probes touch far more lines than the L3 holds, so a key's
/// lines are gone by the time the sequence comes back to it.
pub(crate) const GET_LOOKUPS: usize = 1 << 22;
/// Gets per variant per round of the interleaved comparison.
pub(crate) const ROUND_GETS: usize = 1 << 15;
/// Rounds of the interleaved comparison per batch size.
pub(crate) const ROUNDS: usize = 24;
/// Largest batch: sizes the stack buffers of the Get benchmark.
pub(crate) const GET_BATCH_MAX: usize = 32;
/// Default log2 capacity of the mix benchmarks.
pub(crate) const MIX_LOG2_DEFAULT: u32 = 20;

pub(crate) fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(s) => s
            .replace('_', "")
            .parse()
            .unwrap_or_else(|e| panic!("{name}={s:?}: {e}")),
        Err(_) => default,
    }
}
