//! The kernel-bypass transports' own counters among a node's metrics:
//! DPDK's (`dpdk_*`, [`NodeMetrics::with_dpdk`](super::NodeMetrics::with_dpdk))
//! and RDMA verbs' (`verbs_*`,
//! [`NodeMetrics::with_verbs`](super::NodeMetrics::with_verbs)), each
//! registered only on a node of that transport, each fed from the snapshot
//! its transport's wrapper publishes ([`DpdkSnapshot`], [`VerbsSnapshot`]).
//! The names are in the table of the parent module.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use splitkv_nic::net::dpdk::RxDrop as DpdkRxDrop;
use splitkv_nic::net::verbs::recv::RX_DROP_REASONS as VERBS_RX_DROP_REASONS;
use splitkv_nic::net::verbs::RxDrop as VerbsRxDrop;

use super::{advance, register_counter, ReasonLabels};
use crate::deploy::dpdk::DpdkSnapshot;
use crate::deploy::verbs::VerbsSnapshot;

/// Counters of a DPDK node besides its receive drops.
const DPDK_COUNTERS: usize = 12;
/// Counters of a verbs node besides its receive drops.
const VERBS_COUNTERS: usize = 13;

/// The last cumulative values a transport's counters were advanced to.
#[derive(Debug, Default)]
pub(super) struct TransportSeen {
    dpdk: [u64; DPDK_COUNTERS],
    dpdk_rx_dropped: [u64; DpdkRxDrop::COUNT],
    verbs: [u64; VERBS_COUNTERS],
    verbs_rx_dropped: [u64; VERBS_RX_DROP_REASONS],
}

/// A DPDK node's counters.
#[derive(Debug)]
pub(super) struct DpdkMetrics {
    counters: [Counter; DPDK_COUNTERS],
    rx_dropped: [Counter; DpdkRxDrop::COUNT],
}

/// Names and help of the DPDK counters, in the order of [`dpdk_values`].
const DPDK_METRICS: [(&str, &str); DPDK_COUNTERS] = [
    (
        "dpdk_packets_sent",
        "Packets the DPDK port took for sending",
    ),
    (
        "dpdk_packets_received",
        "Packets the DPDK transport received and passed on",
    ),
    (
        "dpdk_tx_port_full",
        "DPDK flushes stopped by a full TX queue",
    ),
    (
        "dpdk_mempool_empty",
        "DPDK sends held back by an empty mempool",
    ),
    (
        "dpdk_unknown_destination",
        "Packets offered for a node with no DPDK address (dropped)",
    ),
    (
        "dpdk_oversized",
        "Packets offered longer than the MTU (dropped)",
    ),
    (
        "dpdk_broadcast_frames",
        "Frames sent to the broadcast MAC (destination MAC unknown)",
    ),
    (
        "dpdk_port_rx_missed",
        "Frames the DPDK port dropped: RX queue full",
    ),
    (
        "dpdk_port_rx_no_mbuf",
        "Frames the DPDK port dropped: no mbuf free",
    ),
    (
        "dpdk_tx_in_place",
        "Packets sent from the mbuf the batching layer filled in place (no copy)",
    ),
    (
        "dpdk_tx_copied",
        "Packets copied into an mbuf to be sent",
    ),
    (
        "dpdk_lend_refused",
        "Requests for an mbuf to fill in place that the DPDK transport refused (the packet was built in other memory)",
    ),
];

fn dpdk_values(s: &DpdkSnapshot) -> [u64; DPDK_COUNTERS] {
    let t = &s.transport;
    [
        t.packets_sent,
        t.packets_received,
        t.tx_port_full,
        t.mempool_empty,
        t.unknown_destination,
        t.oversized,
        t.broadcast_frames,
        s.port.rx_missed,
        s.port.rx_no_mbuf,
        t.tx_in_place,
        t.tx_copied,
        t.lend_refused,
    ]
}

impl DpdkMetrics {
    /// Registers the `dpdk_*` counters and `dpdk_rx_dropped{reason}`.
    pub(super) fn register(registry: &mut Registry) -> DpdkMetrics {
        let counters = DPDK_METRICS.map(|(name, help)| register_counter(registry, name, help));
        let family = Family::<ReasonLabels, Counter>::default();
        let rx_dropped =
            DpdkRxDrop::ALL.map(|r| family.get_or_create_owned(&ReasonLabels { reason: r.name() }));
        registry.register(
            "dpdk_rx_dropped",
            "Frames the DPDK transport dropped on receive, by reason",
            family,
        );
        DpdkMetrics {
            counters,
            rx_dropped,
        }
    }

    /// Advances the counters to `snapshot`'s values.
    pub(super) fn update(&self, seen: &mut TransportSeen, snapshot: &DpdkSnapshot) {
        advance(&self.counters, &mut seen.dpdk, &dpdk_values(snapshot));
        advance(
            &self.rx_dropped,
            &mut seen.dpdk_rx_dropped,
            &snapshot.transport.rx_dropped.0,
        );
    }
}

/// A verbs node's counters.
#[derive(Debug)]
pub(super) struct VerbsMetrics {
    counters: [Counter; VERBS_COUNTERS],
    rx_dropped: [Counter; VERBS_RX_DROP_REASONS],
}

/// Names and help of the verbs counters, in the order of [`verbs_values`].
const VERBS_METRICS: [(&str, &str); VERBS_COUNTERS] = [
    (
        "verbs_packets_sent",
        "Packets posted to the verbs send queue",
    ),
    (
        "verbs_tx_inline",
        "Packets posted with their bytes inline in the work request",
    ),
    (
        "verbs_tx_signaled",
        "Packets posted asking for a completion",
    ),
    (
        "verbs_packets_received",
        "Datagrams the verbs transport received and passed on",
    ),
    (
        "verbs_tx_too_long",
        "Packets offered longer than the MTU (dropped)",
    ),
    (
        "verbs_tx_unknown_peer",
        "Packets offered for a node with no verbs endpoint (dropped)",
    ),
    (
        "verbs_tx_queue_full",
        "Verbs send bursts cut short by a full send queue",
    ),
    (
        "verbs_tx_pool_exhausted",
        "Verbs send bursts cut short by an exhausted slot pool",
    ),
    (
        "verbs_tx_completion_errors",
        "Verbs send completions with an error status",
    ),
    (
        "verbs_post_errors",
        "Verbs posts the device refused (sends or receives)",
    ),
    (
        "verbs_rx_topup_short",
        "Times the verbs receive queue could not be topped up to its depth",
    ),
    (
        "verbs_peers_repointed",
        "Times a node was re-pointed at another verbs endpoint",
    ),
    (
        "verbs_endpoints_refused",
        "Endpoints from the membership's directory the verbs transport refused to register or re-point to",
    ),
];

fn verbs_values(s: &VerbsSnapshot) -> [u64; VERBS_COUNTERS] {
    let t = &s.transport;
    [
        t.tx_packets,
        t.tx_inline,
        t.tx_signaled,
        t.rx_packets,
        t.tx_too_long,
        t.tx_unknown_peer,
        t.tx_queue_full,
        t.tx_pool_exhausted,
        t.tx_completion_errors,
        t.post_errors,
        t.rx_topup_short,
        s.peers_repointed,
        s.endpoints_refused,
    ]
}

impl VerbsMetrics {
    /// Registers the `verbs_*` counters and `verbs_rx_dropped{reason}`.
    pub(super) fn register(registry: &mut Registry) -> VerbsMetrics {
        let counters = VERBS_METRICS.map(|(name, help)| register_counter(registry, name, help));
        let family = Family::<ReasonLabels, Counter>::default();
        let rx_dropped = VerbsRxDrop::ALL
            .map(|r| family.get_or_create_owned(&ReasonLabels { reason: r.name() }));
        registry.register(
            "verbs_rx_dropped",
            "Datagrams the verbs transport dropped on receive, by reason",
            family,
        );
        VerbsMetrics {
            counters,
            rx_dropped,
        }
    }

    /// Advances the counters to `snapshot`'s values.
    pub(super) fn update(&self, seen: &mut TransportSeen, snapshot: &VerbsSnapshot) {
        advance(&self.counters, &mut seen.verbs, &verbs_values(snapshot));
        advance(
            &self.rx_dropped,
            &mut seen.verbs_rx_dropped,
            &snapshot.transport.rx_dropped.0,
        );
    }
}
