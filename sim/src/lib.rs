//! # splitkv-sim
//!
//! The deterministic driver (DESIGN.md driver 1): one thread, virtual time, and
//! one seed that reproduces a whole run, faults included. Components are the
//! same state machines the other drivers run; only the transport
//! ([`SimTransport`]), the DMA latencies ([`dma::SimDma`]) and the clock are
//! the simulator's.
//!
//! - [`net`]: the simulated network ([`SimNetwork`]): a seeded one-way delay
//!   distribution, loss, duplication, reordering, partitions (symmetric and
//!   one-way, healing by themselves), clogged links and per-link capacity
//!   (`tx_burst` takes only what fits: never a silent drop), every drop
//!   counted by reason ([`NetStats`]); scripted holds, chosen deliveries,
//!   partitions and clogs for replaying an interleaving.
//! - [`dma`]: [`dma::SimDma`], seeded DMA read and write latencies with
//!   occasional slow completions (Xenic §3.5), wrapping any DMA engine.
//! - [`faults`]: node and DMA fault settings and the named mixes
//!   ([`FaultMix`]: none, net, crash, all, rejoin, nic-crash, chaos) turning a seed into a full
//!   [`SimConfig`].
//! - [`chaos`]: the chaos mix's schedule of overlapping faults (NIC restarts
//!   inside recovery epochs and copies, a second crash during a copy, within
//!   f), drawn from the seed ([`chaos::ChaosPlan`]).
//! - [`Sim`] ([`driver`]): advances virtual time by `tick_ns` per pass and
//!   runs every live component once per pass in an order shuffled by the
//!   seed; crashes nodes (seeded or scripted) and slows one down.
//! - [`trace`]: the bounded, printable ring of the last events and the hash
//!   of all of them ([`SimNetwork::trace_hash`]), equal for two runs of one
//!   seed.
//! - [`membership`]: the simulated lease manager ([`membership::SimMembership`])
//!   and its per-node handles.
//! - [`cluster`]: the bench cluster (`splitkv_bench::BenchCluster`) under
//!   the simulator and its faults: built over a [`SimNetwork`]
//!   ([`cluster::build_on_sim`]) and run in slices
//!   ([`cluster::SimCluster`]) with the membership in the loop, crashed
//!   nodes rejoining, NIC runtimes restarting, and the chaos plan fired when
//!   the state it waits for is seen. The sim tests and `splitkv sim` run it.
//!
//! The checkers of a run are the crate `splitkv-check` (`sim/checker/`),
//! which depends on nothing of the store; they are re-exported here under
//! their old paths:
//!
//! - [`history`]: client histories in Jepsen's shape (JSON lines), the input
//!   of the strict-serializability checker.
//! - [`checker`]: the strict-serializability checker of those histories
//!   (Elle-style list-append and register inference, Adya's anomalies,
//!   real-time edges).
//! - [`lost_commits`]: lost- and phantom-commit accounting against the
//!   database's final state.
//!
//! ## Implementation status
//!
//! What the simulator covers today (moved here from the top-level README;
//! figures and bugs found are in `sim/README.md`).
//!
//! - **Crash recovery**: a crashed node is suspected, the simulated lease
//!   manager configures it out, and the survivors run a recovery epoch and
//!   resume (the `crash` and `all` mixes).
//! - **Restarts and re-replication**: a crashed node restarts empty and
//!   rejoins, and re-replication brings it back to a full replica (the
//!   `rejoin` mix); with more nodes than replicas the survivors take the
//!   lost replicas' place at once (4 and 5 nodes in the seed runs); a NIC
//!   runtime alone restarts and rebuilds its locks from its peers
//!   (`nic-crash`).
//! - **Overlapping faults** (`chaos`): NIC restarts inside recovery epochs
//!   and during copies, and a second crash during a copy within f. A node
//!   fenced by its membership exits and, under a restart mix, rejoins as a
//!   new incarnation, as a supervised node process would.
//! - **Seed runs**: `scripts/sim-seeds` runs every workload under none, net,
//!   crash, all, rejoin, nic-crash and chaos (40 seeds each, 500 under
//!   chaos, and crash and rejoin with 4 nodes and replication 3). The chaos
//!   mix passed seeds 1..=1000 of Smallbank, list-append and register (last
//!   run 2026-11-29 at `4327046`, with the same committed counts as at
//!   `cd8c3dc`).
//! - **TLA+ and the code**: a TLC trace of the commit-point counterexample's
//!   scenario replays through the real code (`tests/tlc_trace_replay.rs`).
#![warn(missing_docs)]

pub mod chaos;
pub mod cluster;
pub mod membership;

pub mod dma;
pub mod driver;
pub mod faults;
pub mod net;
pub mod trace;

// The checkers are a crate of their own (`splitkv-check`); these paths stay
// for callers outside the workspace.
pub use splitkv_check::{checker, history, lost_commits};

pub use driver::Sim;
pub use faults::{
    DmaFaults, FaultMix, FaultMixError, NodeFaults, CRASHES_MAX, CRASH_PASS_MAX_DEFAULT,
    CRASH_PASS_MIN_DEFAULT,
};
pub use net::{DelayDist, DropReason, NetFaults, NetStats, SimNetwork, SimTransport};
pub use trace::{Event, EventKind, EventTrace, TRACE_EVENTS_DEFAULT};

use splitkv_nic::Nanos;

/// Most packets in flight in the whole simulated network; beyond it
/// `tx_burst` refuses packets (counted in [`NetStats::refused_network_full`]).
pub const SIM_PACKETS_IN_FLIGHT_MAX: usize = 1 << 20;

/// Simulation parameters: time, delays, and every fault, all drawn from `seed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimConfig {
    /// Seed of every random choice of the simulator.
    pub seed: u64,
    /// Virtual time per pass over all components.
    pub tick_ns: Nanos,
    /// Minimum one-way packet latency.
    pub latency_ns: Nanos,
    /// Scale of the extra latency per packet ([`NetFaults::delay`]: uniform
    /// in `0..=jitter_ns`, or exponential with this mean).
    pub jitter_ns: Nanos,
    /// Network faults (default none).
    pub net: NetFaults,
    /// Node faults (default none).
    pub nodes: NodeFaults,
    /// DMA latencies (default off: the cluster's own fixed latency).
    pub dma: DmaFaults,
    /// Events kept in the printable trace ring.
    pub trace_events: usize,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            tick_ns: 200,
            latency_ns: 2_000,
            jitter_ns: 1_000,
            net: NetFaults::none(),
            nodes: NodeFaults::default(),
            dma: DmaFaults::default(),
            trace_events: TRACE_EVENTS_DEFAULT,
        }
    }
}

/// Why a simulation stopped without reaching its goal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// The stop condition did not hold within the pass budget.
    #[error("no progress to the goal after {passes} passes (virtual time {now_ns} ns)")]
    Timeout {
        /// Passes run.
        passes: u64,
        /// Virtual time reached.
        now_ns: Nanos,
    },
    /// A component stopped on a fault it cannot continue past
    /// ([`splitkv_nic::Component::fault`]); the run stops at the pass where
    /// it happened.
    #[error("component {index} stopped at virtual time {now_ns} ns: {reason}")]
    ComponentStopped {
        /// Its index in the slice of components the driver was given.
        index: usize,
        /// Virtual time of the pass.
        now_ns: Nanos,
        /// What it reported.
        reason: String,
    },
}
