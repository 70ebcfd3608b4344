//! The `--faults` mixes and the simulator configuration each seed runs with.

use splitkv_sim::SimConfig;

/// The fault mixes the simulator runs today.
pub const MIXES: &[&str] = &["none"];

/// Checks a fault-mix name.
pub fn parse(s: &str) -> Result<&'static str, String> {
    MIXES.iter().copied().find(|m| *m == s).ok_or_else(|| {
        format!(
            "unknown fault mix '{s}' (the simulator runs: {})",
            MIXES.join(", ")
        )
    })
}

/// The simulator configuration of `seed` under fault mix `faults` (checked by
/// [`parse`] first).
pub fn sim_config(_faults: &str, seed: u64) -> SimConfig {
    SimConfig {
        seed,
        ..SimConfig::default()
    }
}
