//! The `--faults` mixes ([`FaultMix`], `sim/src/faults.rs` says what each
//! turns on) and the simulator configuration each seed runs with.
//!
//! One change to the mixes' defaults: a seeded crash happens between passes
//! [`CLI_CRASH_PASS_MIN`] and [`CLI_CRASH_PASS_MAX`] (0.1–1 ms of virtual
//! time at the default tick), so it lands inside a run of the default size
//! (a list-append or register seed of 500 transactions per node runs about
//! 1 ms before the crash; the mix's own window, from pass 20,000, would
//! often come after such a run ended and crash nothing).

use splitkv_sim::faults::FaultMix;
use splitkv_sim::SimConfig;

/// First pass at which the seeded crash of a crash mix may happen.
pub const CLI_CRASH_PASS_MIN: u64 = 500;
/// Last pass at which the seeded crash of a crash mix may happen.
pub const CLI_CRASH_PASS_MAX: u64 = 5_000;

/// Reads a fault-mix name (`none|net|crash|all|rejoin|nic-crash`).
pub fn parse(s: &str) -> Result<FaultMix, String> {
    s.parse::<FaultMix>().map_err(|e| e.to_string())
}

/// The fully specified simulator configuration of `seed` under `mix`.
pub fn sim_config(mix: FaultMix, seed: u64) -> SimConfig {
    let mut cfg = mix.config(seed);
    if cfg.nodes.crashes > 0 {
        cfg.nodes.crash_pass_min = CLI_CRASH_PASS_MIN;
        cfg.nodes.crash_pass_max = CLI_CRASH_PASS_MAX;
    }
    // The same window for NIC-runtime-only crashes.
    if cfg.nodes.nic_crashes > 0 {
        cfg.nodes.nic_crash_pass_min = CLI_CRASH_PASS_MIN;
        cfg.nodes.nic_crash_pass_max = CLI_CRASH_PASS_MAX;
    }
    cfg
}
