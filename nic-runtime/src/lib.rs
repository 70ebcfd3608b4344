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
//!   transport interface (in memory, faulty, UDP, DPDK with the feature
//!   `dpdk`);
//! - [`placement`] (`placement.rs`, `placement/`) — key → shard → primary
//!   and backups;
//! - [`membership`] (`membership.rs`, `membership/`) — leases,
//!   configurations and epochs (the `Membership` trait), the agent, and the
//!   narrow [`membership::MembershipPort`] it reaches the runtime through;
//! - [`procedure`] — shipped procedures (Xenic §4.2.2).
//!
//! The engine never links host code: host memory is bytes in layouts from
//! `splitkv-layout`, reached only through a [`dma::DmaEngine`].
//!
//! ## Implementation status
//!
//! What works today and what does not yet (moved here from the top-level
//! README; measured figures are in `benches/README.md` and `sim/README.md`).
//!
//! - **Xenic OCC** (execute + lock, validate, LOG to every replica, COMMIT to
//!   every replica, abort; no-wait): works in the simulator, on the local
//!   cluster and across node processes. The commit point is every replica's
//!   LOG acknowledgement; replicas apply a LOG record only at its
//!   transaction's COMMIT decision record, so an undecided LOG record is
//!   recovery's evidence; a primary unlocks only once its COMMIT record is
//!   appended; a per-slot generation fence refuses late or duplicated
//!   EXECUTEs and LOGs (`protocol/server/txs.rs`). A transaction refused at
//!   LOG, or whose LOG phase is overdue, aborts in two rounds as
//!   `tla/XenicOCCMsgs.tla` (`AbortMode = "tworound"`) specifies: every LOG
//!   holder records the abort and acknowledges (`AbortLog`), only then are
//!   the locks released and the client told (`protocol/server/abort.rs`).
//! - **Shipped procedures** on the coordinator's runtime: works (Smallbank's
//!   six, list-append, register).
//! - **A full host table**: an insert of an absent key reserves room at its
//!   shard's primary before the commit point (a per-shard quota of what
//!   every replica's table guarantees, `protocol/server/room.rs`); past the
//!   quota the transaction aborts with `TableFull` and the node runs on.
//!   Deletes do not exist in the protocol yet, so room is never given back.
//! - **NIC index** (Xenic §4.1.3): one index entry per host segment, 4 inline
//!   cache positions plus chained overflow pages from a preallocated pool;
//!   locks in a map beside the entries; a capacity-bounded object cache with
//!   ScaleStore epoch LRU and sampling eviction; committed-but-unapplied
//!   objects pinned until the host acknowledges; per-segment d_i and overflow
//!   hints; lookups read d_i+k slots, then up to D_m, then overflow (Xenic
//!   Table 2 reproduced in `benches/notes/xenic-table2.md`).
//! - **DMA engine**: local (memcpy) with optional latency; vectors ≤ 15. RDMA
//!   verbs: not yet.
//! - **Dnl batching**: works, per destination, ≤ MTU and ≤ 100 messages,
//!   sealed at iteration end; a switch turns it off (one message per packet)
//!   for measurement; messages larger than a packet are fragmented and
//!   reassembled below the protocol (up to `MESSAGE_BYTES_MAX`, 66 KiB).
//! - **Reliable sessions**: one per node pair, go-back-N with a window,
//!   cumulative acks (piggybacked, or alone after a delay), retransmission
//!   after an adaptive timeout (RFC 6298 with Karn's rule; the configured
//!   value is its floor), duplicate suppression, a peer declared failed after
//!   a configured silence (reported to the membership as a suspect). The
//!   packet header carries the format version (`PACKET_FORMAT_VERSION`,
//!   raised with any change to a message's layout), cluster id,
//!   incarnations and epoch; strangers, other clusters, old epochs and
//!   garbage are dropped and counted (an old-epoch packet still takes its
//!   sequence number, so no gap is left). Sessions always name the
//!   incarnation of the peer they address; a process answers a packet meant
//!   for its predecessor with a notice.
//! - **Transports**: in-process (`mem`, bounded), simulated, kernel UDP
//!   (`sendmmsg`/`recvmmsg`) and a fault-injecting wrapper (loss,
//!   duplication, reordering, delay). DPDK (`net::dpdk`, feature `dpdk`,
//!   system DPDK 22.11 through `dpdk-sys`): the transport works, tested
//!   without hardware on net_ring ports in one process, net_memif between
//!   two processes and net_af_packet between three processes in network
//!   namespaces (`tests/dpdk.rs`); `tx_burst` copies into mbufs (no
//!   reserve/commit yet), one queue pair per port. `splitkv node` selects
//!   it with `[transport] kind = "dpdk"` (splitkv-host's `deploy::dpdk`;
//!   three node processes on net_af_packet pass Smallbank and list-append,
//!   with loss too). Its frame codec, bounds and counters build without the
//!   feature, so a cluster file naming DPDK is checked anywhere.
//!   RDMA verbs (`net::verbs`, feature `verbs`, rdma-core through
//!   `ibverbs-sys`): a UD queue pair transport, built and tested in CI
//!   without a device (pool accounting, work requests, peer descriptions,
//!   receive checks, the no-device error; `tests/verbs/`), never run on
//!   hardware. `splitkv node` selects it with `[transport] kind = "verbs"`
//!   (splitkv-host's `deploy::verbs`: each node's queue pair travels in its
//!   etcd address record); its peer descriptions and bounds build without
//!   the feature, so a cluster file naming verbs is checked anywhere.
//! - **Crash recovery** ([`recovery`]): a silent peer is suspected, which
//!   ends transactions before LOG as `Unavailable`; a configuration that
//!   excludes it raises the epoch (older-epoch packets are dropped) and
//!   starts a recovery epoch in every survivor: evidence to the leader, a
//!   decision per transaction in flight, decisions recorded in every host
//!   log and their locks released, the first surviving replica of each lost
//!   primary's shard promoted, service resumed. Re-replication (a snapshot
//!   plus the records that arrive during it) brings a rejoining node back to
//!   a full replica; with more nodes than replicas the survivors take the
//!   lost replicas' place at once (`Configuration::without`). A NIC runtime
//!   alone restarts and rebuilds its locks from its peers. A restarted
//!   process serves nothing until a configuration admits its incarnation
//!   (`NicRuntime::await_admission`). A NIC-restarted node's fresh
//!   coordinator, and a restarted process's, number their transactions
//!   above the newest generation their peers' fences saw, so none is
//!   refused as late and no transaction id is used twice. A membership
//!   takes no suspect report from a suspect and none that would strand a
//!   shard (`Configuration::takes_suspicion`), and a report names the
//!   suspect's incarnation.
//! - **Dnl-4/2/1/RO and local backup reads**: specified and model-checked in
//!   TLA+ (`tla/`); one coordinator skeleton and the servers' Dnl steps run
//!   every row (`protocol/coordinator/dnl.rs`), without crash recovery yet;
//!   reads at a local backup are not built.
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
pub use protocol::{CommitProtocol, CommitProtocolError};
pub use runtime::{
    node_seed, ClientClosed, ClientPortStats, ClientPorts, HostPorts, NicBuildError, NicMode,
    NicParts, NicRuntime, NicStats,
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
