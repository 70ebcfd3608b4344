//! The `--faults` mixes ([`FaultMix`], `sim/src/faults.rs` says what each
//! turns on) and the simulator configuration each seed runs with.

use splitkv_sim::faults::FaultMix;
use splitkv_sim::SimConfig;

/// Reads a fault-mix name (`none|net|crash|all`).
pub fn parse(s: &str) -> Result<FaultMix, String> {
    s.parse::<FaultMix>().map_err(|e| e.to_string())
}

/// The fully specified simulator configuration of `seed` under `mix`.
pub fn sim_config(mix: FaultMix, seed: u64) -> SimConfig {
    mix.config(seed)
}
