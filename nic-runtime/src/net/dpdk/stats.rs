//! Counters of the DPDK transport. Plain numbers, built with or without the
//! `dpdk` feature, so a node can report them without naming DPDK types.

use super::frame::RxDrop;

/// Received frames dropped, by [`RxDrop`] reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxDropCounts(pub [u64; RxDrop::COUNT]);

impl RxDropCounts {
    /// Frames dropped for `reason`.
    pub fn get(&self, reason: RxDrop) -> u64 {
        self.0[reason as usize]
    }

    /// Frames dropped for any reason.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    #[cfg_attr(not(all(feature = "dpdk", target_os = "linux")), allow(dead_code))]
    pub(super) fn count(&mut self, reason: RxDrop) {
        self.0[reason as usize] += 1;
    }
}

/// Counters of one DPDK endpoint, since it was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DpdkStats {
    /// Packets the port took for sending.
    pub packets_sent: u64,
    /// Packets queued by reference, in an mbuf this transport lent and the
    /// batching layer filled in place (no copy here).
    pub tx_in_place: u64,
    /// Packets copied into a fresh mbuf (the bytes were in other memory, or
    /// in a lent mbuf the port or a receiver still held).
    pub tx_copied: u64,
    /// Buffer reservations refused (the lent share of the pool reached, or
    /// the pool empty): the batcher wrote those packets to the heap.
    pub lend_refused: u64,
    /// splitkv bytes in them (frame headers excluded).
    pub bytes_sent: u64,
    /// Packets lent to the caller.
    pub packets_received: u64,
    /// splitkv bytes in them.
    pub bytes_received: u64,
    /// `rte_eth_tx_burst` calls.
    pub tx_bursts: u64,
    /// `rte_eth_rx_burst` calls.
    pub rx_bursts: u64,
    /// Flushes stopped because the port's TX queue was full (the packets
    /// stayed queued for the next flush).
    pub tx_port_full: u64,
    /// `tx_burst` calls that took fewer packets because the pool had no mbuf.
    pub mempool_empty: u64,
    /// Packets offered for a node with no configured address (dropped).
    pub unknown_destination: u64,
    /// Packets offered that were longer than the MTU (dropped).
    pub oversized: u64,
    /// Frames sent to the broadcast MAC because the destination's MAC is
    /// unknown (a peer re-pointed at an IPv4 address with no neighbour entry).
    pub broadcast_frames: u64,
    /// Peers re-pointed at another address.
    pub peers_repointed: u64,
    /// Received frames dropped, by reason.
    pub rx_dropped: RxDropCounts,
}

/// The port driver's own counters (`rte_eth_stats`): what the device or
/// driver did below the transport, including frames it dropped before the
/// transport saw them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DpdkPortStats {
    /// Frames received.
    pub rx_packets: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Frames dropped on receive because the RX queue was full (the
    /// transport was not polled fast enough).
    pub rx_missed: u64,
    /// Erroneous frames received (bad FCS, ...), dropped by the device.
    pub rx_errors: u64,
    /// Receive buffers the driver could not allocate (the mempool was
    /// empty): frames dropped.
    pub rx_no_mbuf: u64,
    /// Frames the device failed to send.
    pub tx_errors: u64,
}
