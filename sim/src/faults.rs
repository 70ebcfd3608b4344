//! Fault mixes: node faults ([`NodeFaults`]), DMA faults ([`DmaFaults`]) and
//! the named mixes ([`FaultMix`]: none, net, crash, all, rejoin, nic-crash, chaos) that turn one seed
//! into a fully specified [`SimConfig`].
//!
//! | mix   | network                                     | nodes                  | DMA |
//! |-------|---------------------------------------------|------------------------|-----|
//! | none  | uniform delay, FIFO links, nothing lost     | —                      | fixed latency of the cluster spec |
//! | net   | exponential delay, 0.1% loss, 0.1% duplicates, 0.1% reordered (≤ 20 µs), a partition (one in two one-way) with chance 5 ppm per pass lasting 0.2–1 ms, a clog with chance 20 ppm per pass lasting 20–200 µs, 256 packets per link | — | Xenic §3.5 latencies |
//! | crash | as none                                     | one seeded node crashes at a seeded pass in 20,000–100,000 | Xenic §3.5 latencies |
//! | all   | as net                                      | as crash, and another seeded node runs one pass in 2 | Xenic §3.5 latencies |
//! | rejoin | as none                                    | as crash, and the crashed node restarts empty after a seeded 2–30 ms and rejoins (re-replication) | Xenic §3.5 latencies |
//! | nic-crash | as none                                 | two seeded NIC-runtime-only crashes (node and pass each seeded, passes 20,000–100,000): the NIC runtime restarts, its host and data live (the NIC restart) | Xenic §3.5 latencies |
//! | chaos | as none                                     | as rejoin, plus one seeded NIC crash as nic-crash, plus the overlaps of [`crate::chaos`]: a NIC restart inside a recovery epoch, a NIC restart of a copy source or of the copying node during a copy, and (one seed in two) a second node crash during the copy, within f | Xenic §3.5 latencies |

use crate::net::{DelayDist, NetFaults};
use crate::SimConfig;
use std::fmt;
use std::str::FromStr;

/// Most seeded crashes in one run.
pub const CRASHES_MAX: u32 = 8;
/// First pass at which a mix's seeded crash may happen.
pub const CRASH_PASS_MIN_DEFAULT: u64 = 20_000;
/// Last pass at which a mix's seeded crash may happen.
pub const CRASH_PASS_MAX_DEFAULT: u64 = 100_000;
/// Shortest delay from a crash to the node's restart under the rejoin mix
/// (ns of virtual time): shorter than the default lease, so some restarts
/// come before the crashed incarnation is configured out.
pub const RESTART_NS_MIN_DEFAULT: u64 = 2_000_000;
/// Longest delay from a crash to the node's restart under the rejoin mix (ns).
pub const RESTART_NS_MAX_DEFAULT: u64 = 30_000_000;
/// NIC-runtime-only crashes of the nic-crash mix.
pub const NIC_CRASHES_DEFAULT: u32 = 2;
/// Seeded NIC-runtime-only crashes of the chaos mix (besides the ones it
/// places inside recovery epochs and copies, [`crate::chaos`]).
pub const CHAOS_NIC_CRASHES_DEFAULT: u32 = 1;
/// Shortest DMA read (Xenic §3.5), ns.
pub const DMA_READ_NS_MIN_DEFAULT: u64 = 700;
/// Longest ordinary DMA read (Xenic §3.5: up to ~1.3 µs), ns.
pub const DMA_READ_NS_MAX_DEFAULT: u64 = 1_300;
/// Shortest DMA write (log append), ns.
pub const DMA_WRITE_NS_MIN_DEFAULT: u64 = 300;
/// Longest ordinary DMA write (Xenic §3.5: ~0.6 µs), ns.
pub const DMA_WRITE_NS_MAX_DEFAULT: u64 = 600;
/// Share of DMA requests that complete slowly, ppm.
pub const DMA_SLOW_PPM_DEFAULT: u32 = 1_000;
/// Extra latency of a slow DMA completion, ns.
pub const DMA_SLOW_NS_DEFAULT: u64 = 20_000;

/// Node faults, drawn by the driver ([`crate::Sim`]) from the seed once it
/// knows the nodes ([`crate::Sim::set_owners`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeFaults {
    /// Seeded crashes, each of a distinct node (at most [`CRASHES_MAX`] and
    /// fewer than the nodes).
    pub crashes: u32,
    /// Earliest pass of a seeded crash.
    pub crash_pass_min: u64,
    /// Latest pass of a seeded crash.
    pub crash_pass_max: u64,
    /// If at least 2: one seeded node (not a crashed one) runs its
    /// components only every `slow_every`-th pass.
    pub slow_every: u32,
    /// A crashed node restarts (empty, a new incarnation, then rejoins) after a
    /// seeded delay in `restart_ns_min..=restart_ns_max` ns of virtual time;
    /// 0 for `restart_ns_max`: crashed nodes never restart.
    pub restart_ns_min: u64,
    /// See `restart_ns_min`.
    pub restart_ns_max: u64,
    /// Seeded NIC-runtime-only crashes (each followed by the NIC restart), at
    /// most [`CRASHES_MAX`]: each picks a node and a pass in
    /// `nic_crash_pass_min..=nic_crash_pass_max`; the node's NIC runtime
    /// restarts while its host lives ([`crate::Sim::take_nic_crashes`]).
    pub nic_crashes: u32,
    /// Earliest pass of a seeded NIC crash.
    pub nic_crash_pass_min: u64,
    /// Latest pass of a seeded NIC crash.
    pub nic_crash_pass_max: u64,
    /// The chaos mix's overlapping faults ([`crate::chaos`]): the driver
    /// draws a [`crate::chaos::ChaosPlan`] ([`crate::Sim::chaos_plan`]) for
    /// the cluster driver to fire.
    pub chaos: bool,
}

impl NodeFaults {
    /// No node faults.
    pub const NONE: NodeFaults = NodeFaults {
        crashes: 0,
        crash_pass_min: 0,
        crash_pass_max: 0,
        slow_every: 0,
        restart_ns_min: 0,
        restart_ns_max: 0,
        nic_crashes: 0,
        nic_crash_pass_min: 0,
        nic_crash_pass_max: 0,
        chaos: false,
    };
}

/// DMA faults, applied by [`crate::dma::SimDma`]: each request is submitted
/// to the real engine only after a seeded latency in virtual time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DmaFaults {
    /// Whether the cluster wraps its DMA engines.
    pub on: bool,
    /// Read latency range, ns.
    pub read_ns_min: u64,
    /// Read latency range, ns.
    pub read_ns_max: u64,
    /// Write (log append) latency range, ns.
    pub write_ns_min: u64,
    /// Write latency range, ns.
    pub write_ns_max: u64,
    /// Share of slow completions, ppm.
    pub slow_ppm: u32,
    /// Extra latency of a slow completion, ns.
    pub slow_ns: u64,
}

impl DmaFaults {
    /// Xenic §3.5's latencies: reads 0.7–1.3 µs, writes 0.3–0.6 µs, 0.1%
    /// slow by 20 µs.
    pub const fn xenic() -> DmaFaults {
        DmaFaults {
            on: true,
            read_ns_min: DMA_READ_NS_MIN_DEFAULT,
            read_ns_max: DMA_READ_NS_MAX_DEFAULT,
            write_ns_min: DMA_WRITE_NS_MIN_DEFAULT,
            write_ns_max: DMA_WRITE_NS_MAX_DEFAULT,
            slow_ppm: DMA_SLOW_PPM_DEFAULT,
            slow_ns: DMA_SLOW_NS_DEFAULT,
        }
    }
}

/// A named set of faults (`none|net|crash|all|rejoin|nic-crash|chaos`, see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FaultMix {
    /// No faults.
    #[default]
    None,
    /// Network faults and DMA latencies.
    Net,
    /// One node crash and DMA latencies.
    Crash,
    /// Network faults, a crash, a slow node and DMA latencies.
    All,
    /// A crash, the crashed node's restart and rejoin (re-replication),
    /// and DMA latencies.
    Rejoin,
    /// NIC-runtime-only crashes and DMA latencies.
    NicCrash,
    /// Rejoin and nic-crash together, with NIC restarts placed inside
    /// recovery epochs and copies and a second crash during a copy
    /// ([`crate::chaos`]), and DMA latencies.
    Chaos,
}

impl FaultMix {
    /// Every mix, in order.
    pub const ALL: [FaultMix; 7] = [
        FaultMix::None,
        FaultMix::Net,
        FaultMix::Crash,
        FaultMix::All,
        FaultMix::Rejoin,
        FaultMix::NicCrash,
        FaultMix::Chaos,
    ];

    /// The mix's name as [`FromStr`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            FaultMix::None => "none",
            FaultMix::Net => "net",
            FaultMix::Crash => "crash",
            FaultMix::All => "all",
            FaultMix::Rejoin => "rejoin",
            FaultMix::NicCrash => "nic-crash",
            FaultMix::Chaos => "chaos",
        }
    }

    /// The network faults of the net mix.
    pub const fn net_faults() -> NetFaults {
        NetFaults {
            delay: DelayDist::Exponential,
            loss_ppm: 1_000,
            duplicate_ppm: 1_000,
            reorder_ppm: 1_000,
            reorder_delay_ns: 20_000,
            partition_ppm: 5,
            partition_one_way_ppm: 500_000,
            partition_ns_min: 200_000,
            partition_ns_max: 1_000_000,
            clog_ppm: 20,
            clog_ns_min: 20_000,
            clog_ns_max: 200_000,
            link_capacity: 256,
        }
    }

    /// The crash of the crash mix: one node at a pass in
    /// [`CRASH_PASS_MIN_DEFAULT`]..=[`CRASH_PASS_MAX_DEFAULT`].
    pub const fn crash_faults() -> NodeFaults {
        NodeFaults {
            crashes: 1,
            crash_pass_min: CRASH_PASS_MIN_DEFAULT,
            crash_pass_max: CRASH_PASS_MAX_DEFAULT,
            slow_every: 0,
            ..NodeFaults::NONE
        }
    }

    /// The NIC crashes of the nic-crash mix: [`NIC_CRASHES_DEFAULT`] at
    /// passes in [`CRASH_PASS_MIN_DEFAULT`]..=[`CRASH_PASS_MAX_DEFAULT`].
    pub const fn nic_crash_faults() -> NodeFaults {
        NodeFaults {
            nic_crashes: NIC_CRASHES_DEFAULT,
            nic_crash_pass_min: CRASH_PASS_MIN_DEFAULT,
            nic_crash_pass_max: CRASH_PASS_MAX_DEFAULT,
            ..NodeFaults::NONE
        }
    }

    /// The fully specified configuration of this mix for `seed` (everything
    /// else as [`SimConfig::default`]).
    pub fn config(self, seed: u64) -> SimConfig {
        let base = SimConfig {
            seed,
            ..SimConfig::default()
        };
        match self {
            FaultMix::None => base,
            FaultMix::Net => SimConfig {
                net: FaultMix::net_faults(),
                dma: DmaFaults::xenic(),
                ..base
            },
            FaultMix::Crash => SimConfig {
                nodes: FaultMix::crash_faults(),
                dma: DmaFaults::xenic(),
                ..base
            },
            FaultMix::All => SimConfig {
                net: FaultMix::net_faults(),
                nodes: NodeFaults {
                    slow_every: 2,
                    ..FaultMix::crash_faults()
                },
                dma: DmaFaults::xenic(),
                ..base
            },
            FaultMix::Rejoin => SimConfig {
                nodes: NodeFaults {
                    restart_ns_min: RESTART_NS_MIN_DEFAULT,
                    restart_ns_max: RESTART_NS_MAX_DEFAULT,
                    ..FaultMix::crash_faults()
                },
                dma: DmaFaults::xenic(),
                ..base
            },
            FaultMix::NicCrash => SimConfig {
                nodes: FaultMix::nic_crash_faults(),
                dma: DmaFaults::xenic(),
                ..base
            },
            FaultMix::Chaos => SimConfig {
                nodes: NodeFaults {
                    restart_ns_min: RESTART_NS_MIN_DEFAULT,
                    restart_ns_max: RESTART_NS_MAX_DEFAULT,
                    nic_crashes: CHAOS_NIC_CRASHES_DEFAULT,
                    nic_crash_pass_min: CRASH_PASS_MIN_DEFAULT,
                    nic_crash_pass_max: CRASH_PASS_MAX_DEFAULT,
                    chaos: true,
                    ..FaultMix::crash_faults()
                },
                dma: DmaFaults::xenic(),
                ..base
            },
        }
    }
}

impl fmt::Display for FaultMix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A fault-mix name that is not one of `none|net|crash|all|rejoin|nic-crash|chaos`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown fault mix {given:?} (expected none, net, crash, all, rejoin, nic-crash or chaos)")]
pub struct FaultMixError {
    /// What was given.
    pub given: String,
}

impl FromStr for FaultMix {
    type Err = FaultMixError;

    fn from_str(s: &str) -> Result<FaultMix, FaultMixError> {
        FaultMix::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| FaultMixError {
                given: s.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_bad_names_are_typed_errors() {
        for m in FaultMix::ALL {
            assert_eq!(m.name().parse::<FaultMix>(), Ok(m));
            assert_eq!(m.to_string(), m.name());
        }
        assert_eq!(" NET ".parse::<FaultMix>(), Ok(FaultMix::Net));
        let e = "lossy".parse::<FaultMix>().unwrap_err();
        assert_eq!(e.given, "lossy");
        assert!(e
            .to_string()
            .contains("none, net, crash, all, rejoin, nic-crash or chaos"));
    }

    #[test]
    fn each_mix_turns_on_what_it_says() {
        let none = FaultMix::None.config(3);
        assert_eq!(
            none,
            SimConfig {
                seed: 3,
                ..SimConfig::default()
            }
        );
        let net = FaultMix::Net.config(3);
        assert!(net.net.any() && net.dma.on && net.nodes.crashes == 0);
        let crash = FaultMix::Crash.config(3);
        assert!(!crash.net.any() && crash.nodes.crashes == 1);
        let all = FaultMix::All.config(3);
        assert!(all.net.any() && all.nodes.crashes == 1 && all.nodes.slow_every >= 2);
        assert_eq!(FaultMix::All.config(4).seed, 4);
        let rejoin = FaultMix::Rejoin.config(3);
        assert!(rejoin.nodes.crashes == 1 && rejoin.nodes.restart_ns_max > 0);
        assert!(crash.nodes.restart_ns_max == 0 && all.nodes.restart_ns_max == 0);
        let nic = FaultMix::NicCrash.config(3);
        assert!(!nic.net.any() && nic.dma.on && nic.nodes.crashes == 0);
        assert_eq!(nic.nodes.nic_crashes, NIC_CRASHES_DEFAULT);
        assert!(!nic.nodes.chaos && !rejoin.nodes.chaos);
        let chaos = FaultMix::Chaos.config(3);
        assert!(chaos.nodes.chaos && chaos.nodes.crashes == 1 && !chaos.net.any());
        assert!(chaos.nodes.restart_ns_max > 0 && chaos.nodes.nic_crashes > 0);
    }
}
