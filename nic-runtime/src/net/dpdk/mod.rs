//! The DPDK transport: one ethdev port with one RX/TX queue pair per
//! endpoint, packets carried in Ethernet + IPv4 + UDP frames ([`frame`]) so
//! that ordinary switches forward them, moved in bursts of up to
//! [`DPDK_BURST_MAX`] by the poll-mode driver with no system call (the
//! kernel-bypass transport of the Dnl stack, Dandelion §5; eRPC's DPDK
//! transport is the model). Lossy, like kernel UDP: the session layer above
//! makes it reliable. Built with splitkv-nic's feature `dpdk` against the
//! system DPDK 22.11 (crate `dpdk-sys`).
//!
//! **Set-up.** [`Eal::init`] starts DPDK's EAL once per process from the
//! arguments given (see [`eal`]); [`DpdkTransport::new`] then finds the
//! configured port, creates a mempool of [`DpdkConfig::mbufs`] mbufs sized
//! for the MTU, sets up queue 0 each way and starts the port. No hardware
//! is needed for tests: `--no-pci --no-huge --in-memory` with virtual
//! devices (`--vdev=net_memif0,...`, `--vdev=net_af_packet0,iface=...`) or
//! two ports joined back to back by rings ([`dpdk_ring_pair`], net_ring).
//!
//! **Buffers.** The transport lends its mbufs to the batching layer
//! ([`Transport::tx_lender`](crate::net::Transport::tx_lender); at most [`DPDK_LENT_MBUFS_PERCENT`] of the
//! pool at once): each lent buffer is an mbuf's data behind room for the
//! frame headers, so the batcher writes the packet in place — the one copy
//! of payload bytes on the send path. [`Transport::tx_commit`](crate::net::Transport::tx_commit) writes the
//! frame headers in front, adds a reference for the port
//! (`rte_mbuf_refcnt_update`) and queues the mbuf; the session keeps its
//! own reference until the packet is acknowledged, so a retransmission
//! commits the same mbuf again (see [`crate::net::txbuf`] for who may write
//! when). A packet in any other memory, or in an mbuf still held by the
//! port or a receiver, is copied into a fresh mbuf, as
//! [`Transport::tx_burst`](crate::net::Transport::tx_burst) always does ([`DpdkStats::tx_in_place`] and
//! [`DpdkStats::tx_copied`] count the two). At most [`DPDK_TX_QUEUED_MAX`]
//! are queued; [`Transport::tx_flush`](crate::net::Transport::tx_flush) hands the queue to the port in
//! bursts.
//! [`Transport::rx_burst`](crate::net::Transport::rx_burst) lends each received frame's packet straight from
//! its mbuf (no copy) and frees the burst's mbufs in one call. Nothing is
//! allocated per packet. A transport's mempool is never freed (its mbufs can
//! outlive the port: net_ring hands the sender's mbuf to the receiver), so
//! a process builds few transports.
//!
//! **What the network does, this transport does too.** A packet for a node
//! with no address or longer than the MTU is taken and dropped; received
//! frames that are malformed, truncated, chained (multi-segment), for
//! another host or port, longer than the MTU, from strangers or from a
//! re-pointed peer's former address are dropped and counted by reason
//! ([`RxDrop`], [`DpdkStats::rx_dropped`]), never a panic. An empty pool or
//! a full queue is congestion: `tx_burst` takes fewer packets, and a flush
//! the port does not take whole keeps the rest for the next.
//!
//! **Addresses.** Each peer is a MAC and an IPv4 address and UDP port
//! ([`DpdkPeer`]); [`Transport::set_peer_address`](crate::net::Transport::set_peer_address) re-points a node at a new
//! IPv4 address and port and takes the MAC for it from the neighbour table
//! ([`DpdkTransport::set_neighbour`], or another peer at that IPv4 address);
//! with none known, frames go to the broadcast MAC (counted) and the
//! receivers filter on IPv4 address and port. There is no ARP.
//!
//! **Without the feature.** The frame codec ([`frame`], with [`MacAddr`]),
//! the bounds (`DPDK_*`) and the counters ([`DpdkStats`]) are plain Rust and
//! always built, so a cluster file naming DPDK can be checked, and a node's
//! DPDK counters reported, where DPDK is not installed; [`Eal`],
//! [`DpdkTransport`] and the rest need the feature `dpdk`.
//!
//! **Threads.** EAL's own threads aside (its interrupt thread), nothing here
//! spawns threads; the transport is polled by the thread that holds it.

pub mod frame;
mod limits;
mod stats;

#[cfg(all(feature = "dpdk", target_os = "linux"))]
mod config;
#[cfg(all(feature = "dpdk", target_os = "linux"))]
pub mod eal;
#[cfg(all(feature = "dpdk", target_os = "linux"))]
mod sys;
#[cfg(all(feature = "dpdk", target_os = "linux"))]
mod transport;

pub use frame::{MacAddr, MacAddrError, RxDrop, FRAME_HEADER_BYTES};
pub use limits::{
    DPDK_BURST_MAX, DPDK_DESCRIPTORS_DEFAULT, DPDK_DESCRIPTORS_MAX, DPDK_FORMER_ADDRESSES_MAX,
    DPDK_LENT_MBUFS_PERCENT, DPDK_MBUFS_DEFAULT, DPDK_MBUFS_MAX, DPDK_MBUFS_MIN, DPDK_MTU_DEFAULT,
    DPDK_MTU_MAX, DPDK_MTU_MIN, DPDK_NEIGHBOURS_MAX, DPDK_PEERS_MAX, DPDK_RING_SLOTS,
    DPDK_TX_QUEUED_MAX,
};
pub use stats::{DpdkPortStats, DpdkStats, RxDropCounts};

#[cfg(all(feature = "dpdk", target_os = "linux"))]
pub use config::{DpdkConfig, DpdkError, DpdkPeer};
#[cfg(all(feature = "dpdk", target_os = "linux"))]
pub use eal::{Eal, EalCause, EalError};
#[cfg(all(feature = "dpdk", target_os = "linux"))]
pub use transport::{dpdk_ring_pair, DpdkTransport};
