//! Shared by the fault-mix tests (`chaos.rs`, `crash_harness.rs`,
//! `rejoin.rs`, `nic_crash.rs`): the cluster shape of a fault-mix run.
#![allow(dead_code)]

use splitkv_bench::ClusterSpec;

/// Silence after which a session declares its peer failed (virtual ns).
pub const SILENCE_NS: u64 = 30_000_000;

/// The cluster shape of a fault-mix run: 3 nodes (replication 3), one client
/// each with 4 transactions outstanding and `budget` to run, DMA of 500 ns,
/// and sessions that declare a silent peer failed after `silence_ns` (none
/// if `None`).
pub fn fault_spec(seed: u64, budget: u64, silence_ns: Option<u64>) -> ClusterSpec {
    let mut spec = ClusterSpec::new();
    spec.inflight_per_node = 4;
    spec.seed = seed;
    spec.budget_per_node = Some(budget);
    spec.session_silence_ns = silence_ns;
    spec.dma_latency_ns = 500;
    spec
}
