//! Named bounds and defaults of the DPDK transport. Plain numbers, built
//! with or without the `dpdk` feature, so a cluster file naming DPDK can be
//! checked where DPDK is not installed.

use crate::placement::NODES_MAX;
use splitkv_layout::wire::{MSG_HEADER_BYTES, PACKET_BYTES_MAX, PACKET_HEADER_BYTES};

/// Default packet size: the UDP payload of a standard 1500-byte Ethernet
/// frame (1500 − 20 B IPv4 − 8 B UDP), as on kernel UDP.
pub const DPDK_MTU_DEFAULT: usize = 1500 - 20 - 8;
/// Smallest packet size accepted: one packet header and one message header
/// with a 36-byte body (as on kernel UDP).
pub const DPDK_MTU_MIN: usize = PACKET_HEADER_BYTES + MSG_HEADER_BYTES + 36;
/// Largest packet size accepted: the UDP payload of a 9000-byte jumbo frame,
/// and no more than a splitkv packet.
pub const DPDK_MTU_MAX: usize = if PACKET_BYTES_MAX < 9000 - 28 {
    PACKET_BYTES_MAX
} else {
    9000 - 28
};
/// Most packets one `rte_eth_rx_burst` or `rte_eth_tx_burst` call moves:
/// the bursts the batching layer offers ([`TX_BURST_MAX`](crate::net::TX_BURST_MAX)).
pub const DPDK_BURST_MAX: usize = crate::net::TX_BURST_MAX;
/// Packets `tx_burst` queues (in mbufs) before `tx_flush` hands them to the
/// port; when all are queued `tx_burst` takes fewer.
pub const DPDK_TX_QUEUED_MAX: usize = 1024;
/// Share of a transport's mbufs (percent) the batching layer may hold at
/// once as lent packet buffers (reserve/commit; [`crate::net::txbuf`]): the
/// rest stay free for the receive descriptors and the send queue, so a
/// sender waiting on acknowledgements can still receive them. Past it the
/// batcher writes to heap buffers, which are copied.
pub const DPDK_LENT_MBUFS_PERCENT: u32 = 50;
/// Default mbufs in a transport's pool (2^q − 1 suits DPDK's ring pool).
pub const DPDK_MBUFS_DEFAULT: u32 = 4095;
/// Fewest mbufs in a pool: the queued sends, a receive burst and some room
/// for the receive descriptors.
pub const DPDK_MBUFS_MIN: u32 = (DPDK_TX_QUEUED_MAX + 2 * DPDK_BURST_MAX) as u32 + 1;
/// Most mbufs in a pool.
pub const DPDK_MBUFS_MAX: u32 = 1 << 20;
/// Default RX and TX descriptors (the driver may adjust them).
pub const DPDK_DESCRIPTORS_DEFAULT: u16 = 1024;
/// Most RX or TX descriptors asked for.
pub const DPDK_DESCRIPTORS_MAX: u16 = 1 << 14;
/// Most configured peers (the cluster's node bound).
pub const DPDK_PEERS_MAX: usize = NODES_MAX;
/// Most IPv4 → MAC entries beyond the peers' (machines that may replace a
/// node; [`DpdkTransport::set_neighbour`](super::DpdkTransport::set_neighbour)).
pub const DPDK_NEIGHBOURS_MAX: usize = 4 * NODES_MAX;
/// Former addresses of re-pointed peers remembered (the oldest is forgotten
/// first; frames from a forgotten one count as strangers).
pub const DPDK_FORMER_ADDRESSES_MAX: usize = NODES_MAX;
/// Slots of each ring of a [`dpdk_ring_pair`](super::dpdk_ring_pair).
pub const DPDK_RING_SLOTS: u32 = 4096;
