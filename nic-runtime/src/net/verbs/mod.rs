//! The RDMA verbs transport: one unreliable-datagram (UD) queue pair per
//! endpoint, under the same sessions, fragmentation and batching as the
//! other transports ([`Transport`]). FaSST (OSDI'16) and eRPC (NSDI'19)
//! showed UD sends scale to many peers with one queue pair; Dandelion
//! §8.3 sends small packets inline. Lossy, like UDP: the session layer
//! makes it reliable. The device layer ([`sys`]) and the transport are
//! built with splitkv-nic's feature `verbs` on Linux; everything else here
//! (peer descriptions, bounds, accounting) is plain Rust, always built, so
//! a cluster file naming verbs is checked by any build.
//!
//! **Untested on hardware.** No RDMA device (nor Soft-RoCE, which needs
//! the `rdma_rxe` kernel module) exists where this was written and where
//! CI runs: the device layer ([`sys`]: open, queue pair, memory region,
//! address handles, post and poll) is built but has never run against a
//! device. What runs in CI is everything split from it: buffer accounting
//! ([`pool`]), work-request building and the signalling cadence ([`wr`]),
//! peer descriptions and source lookup ([`addr`]), receive checks
//! ([`recv`]), the transport itself on an in-memory device behind the
//! same seam ([`device::VerbsDevice`]), and opening a device where none
//! exists (a typed [`VerbsError::NoDevice`]). `tests/verbs/device.rs`
//! also holds a two-endpoint exchange on a real device, skipped where
//! none exists; the README gives the commands to run it on a ConnectX /
//! BlueField NIC or Soft-RoCE.
//!
//! **Build.** The `ibverbs` crate's safe API has reliable-connection queue
//! pairs only (no address handles, no UD send fields), so this module
//! calls its raw bindings, `ibverbs-sys`, directly. Their build script
//! configures the vendored rdma-core with cmake (needs libnl-3 and
//! libnl-route-3) and runs bindgen (libclang): about 100 s on a shared
//! 2-core machine, under the 5 minutes that would have justified binding
//! Debian's `libibverbs-dev` ourselves. The binary links the system
//! libibverbs (Debian's rdma-core), whose providers (mlx5, rxe) are
//! loaded at run time.
//!
//! **Buffers.** One memory region, registered once, cut into
//! [`VerbsConfig::slots`] slots of [`VerbsConfig::slot_bytes`] (the 40-byte
//! GRH and one MTU), lent by a [`pool::SlotPool`] to posted receives and
//! to posted sends; a slot is never lent twice or lost (property-tested).
//! Receives are kept topped up to [`VerbsConfig::recv_depth`] after every
//! `rx_burst`. [`Transport::tx_burst`] posts its packets as one chain:
//! a packet at or below the device's inline limit goes in the descriptor
//! (no slot), others are copied into a slot (one copy, as on UDP and
//! DPDK); one send in [`VerbsConfig::signal_every`] is signalled, and its
//! completion retires it and every earlier send ([`wr::SendCadence`]).
//! `tx_flush` polls send completions (posting already rang the doorbell).
//!
//! **What the network does, this transport does too.** A packet longer
//! than the MTU or for a node with no endpoint is taken and dropped
//! (counted); a full send queue or an exhausted pool is congestion
//! (`tx_burst` takes fewer; with `recv_depth + send_depth` slots and
//! each use bounded by its depth, the pool runs short only if that
//! accounting is broken). Received datagrams with an error status,
//! shorter than the GRH, truncated, past the MTU, without this cluster's
//! QKey in their immediate data, from strangers or from a re-pointed
//! peer's former endpoint are dropped and counted by reason
//! ([`RxDrop`], [`VerbsStats::rx_dropped`]), never a panic.
//!
//! **Addresses.** Each peer is a [`VerbsPeer`] (data address, GID or LID,
//! QPN, QKey), parsed from text. A queue pair's number is chosen by the
//! device when it is created, so peers learn each other's QPN after
//! start-up ([`VerbsTransport::local_endpoint`], whose [`VerbsAddress`] a
//! node publishes; [`VerbsTransport::add_endpoint`] on the others):
//! `splitkv node` publishes it in its etcd address record, and peers
//! register what they read (splitkv-host's `deploy::verbs`).
//! [`Transport::set_peer_address`] re-points a node at the endpoint
//! registered for the new data address, or at a new endpoint registered
//! for its current one (a restarted process's new queue pair).
//!
//! **Threads.** None: the transport is polled by the thread that holds it.

#[cfg(doc)]
use super::Transport;

pub mod addr;
pub mod device;
pub mod pool;
pub mod recv;
#[cfg(all(feature = "verbs", target_os = "linux"))]
pub mod sys;
pub mod wr;

mod config;
#[cfg(all(feature = "verbs", target_os = "linux"))]
mod transport;

pub use addr::{Gid, PeerParseError, PeerTable, Route, VerbsAddress, VerbsPeer, VERBS_QPN_MAX};
pub use config::{
    VerbsConfig, VerbsError, VerbsStats, VERBS_BURST_MAX, VERBS_DEPTH_MAX,
    VERBS_INLINE_REQUEST_DEFAULT, VERBS_MTU_DEFAULT, VERBS_MTU_MAX, VERBS_MTU_MIN,
    VERBS_QKEY_DEFAULT, VERBS_RECV_DEPTH_DEFAULT, VERBS_SEND_DEPTH_DEFAULT,
    VERBS_SIGNAL_EVERY_DEFAULT,
};
pub use recv::{RxDrop, RxDropCounts};
#[cfg(all(feature = "verbs", target_os = "linux"))]
pub use transport::{VerbsTransport, VERBS_ENDPOINTS_MAX};
pub use wr::VERBS_GRH_BYTES;
