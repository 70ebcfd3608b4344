//! # splitkv-nic
//!
//! The protocol engine of splitkv, run as a dedicated polling "NIC-side" runtime
//! (Xenic §3): on pinned host cores, on a SmartNIC SoC, or inside the simulator.
//!
//! Modules, as the tree of `src/` is:
//! - [`runtime`] (`runtime.rs`, `runtime/{clients,dispatch,peers}.rs`) —
//!   [`NicRuntime`], one node's engine, a non-blocking state machine driven
//!   by `run_iteration(now)`, serving several application clients
//!   ([`runtime::clients`]); its definition maps its `impl` files;
//! - [`protocol`] (`protocol/{coordinator,server}`) — coordinator and server
//!   roles of Xenic's OCC (Xenic §4.2);
//! - [`recovery`] (`recovery.rs`, `recovery/{epoch,restart,rereplication,wiring}`)
//!   — the fault wing: recovery epochs (Xenic §4.2.1, Dandelion §4.4), the
//!   NIC restart and its rebuild, re-replication, admission, and the
//!   runtime's wiring for them ([`NicMode`]); its module docs are the
//!   design page;
//! - [`slots`] — the transaction-id slot space shared by the protocol and
//!   re-replication;
//! - [`index`] (`index/`) — the NIC index: locks, pinned committed objects
//!   (Xenic §4.1.3);
//! - [`dma`] (`dma/`) — the DMA engine interface and its local
//!   implementation (Xenic §4.3.1);
//! - [`net`] (`net/`) — Dnl batching (Dandelion §5.1) over a narrow
//!   transport interface (in memory, faulty, UDP);
//! - [`placement`] (`placement.rs`, `placement/`) — key → shard → primary
//!   and backups;
//! - [`membership`] (`membership.rs`, `membership/`) — leases,
//!   configurations and epochs (the `Membership` trait), the agent, and the
//!   narrow [`membership::MembershipPort`] it reaches the runtime through;
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
