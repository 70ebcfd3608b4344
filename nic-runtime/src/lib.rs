//! # splitkv-nic
//!
//! The protocol engine of splitkv, run as a dedicated polling "NIC-side" runtime
//! (Xenic §3): on pinned host cores, on a SmartNIC SoC, or inside the simulator.
//!
//! - [`runtime::NicRuntime`] — one node's engine, a non-blocking state machine
//!   driven by `run_iteration(now)`, serving several application clients
//!   ([`runtime::clients`]);
//! - [`protocol`] — coordinator and server roles of Xenic's OCC (Xenic §4.2);
//! - [`index`] — the NIC index: locks, pinned committed objects (Xenic §4.1.3);
//! - [`dma`] — the DMA engine interface and its local implementation (Xenic §4.3.1);
//! - [`net`] — Dnl batching (Dandelion §5.1) over a narrow transport interface;
//! - [`placement`] — key → shard → primary and backups;
//! - [`membership`] — leases, configurations and epochs (the `Membership` trait);
//! - [`procedure`] — shipped procedures (Xenic §4.2.2).
//!
//! The engine never links host code: host memory is bytes in layouts from
//! `splitkv-layout`, reached only through a [`dma::DmaEngine`].
#![warn(missing_docs)]

pub mod dma;
pub mod index;
pub mod membership;
pub mod net;
pub mod placement;
pub mod procedure;
pub mod protocol;
pub mod recovery;
pub mod runtime;
pub mod slots;

/// Time in nanoseconds: virtual in the simulator, monotonic elsewhere. Components
/// never read a clock; drivers pass `now` in.
pub type Nanos = u64;

pub use placement::{Placement, PlacementError, PlacementView, NODES_MAX};
pub use procedure::{
    ProcError, Procedure, ProcedureRegistry, ReadView, TxPlan, UserAbort, WriteSet,
};
pub use runtime::{
    node_seed, ClientClosed, ClientPortStats, ClientPorts, HostPorts, NicMode, NicParts,
    NicRuntime, NicStats,
};

/// A polled component: a non-blocking state machine a driver places on a thread.
pub trait Component: Send {
    /// Does whatever is ready at `now`; returns whether it did any work (drivers
    /// may back off when a whole thread's components report none).
    fn run_iteration(&mut self, now: Nanos) -> bool;

    /// Why this component stopped for good, if it did: a fault it cannot
    /// continue past, such as a host table that cannot take a write that
    /// already committed, or a host log that refused an append. A stopped
    /// component does nothing more; drivers stop its node (the local cluster
    /// stops as a whole) and report the reason. `None` while it runs.
    fn fault(&self) -> Option<String> {
        None
    }
}

impl Component for NicRuntime {
    fn run_iteration(&mut self, now: Nanos) -> bool {
        NicRuntime::run_iteration(self, now)
    }

    fn fault(&self) -> Option<String> {
        NicRuntime::fault(self).map(str::to_owned)
    }
}
