//! A node's Prometheus metrics, registered with the official client
//! (`prometheus-client`) and served as text at the control endpoint's
//! `/metrics`.
//!
//! Every metric carries the labels `cluster` and `node`, and is prefixed
//! `splitkv_`. Counters (exposed with the `_total` suffix):
//!
//! | metric | labels | fed by |
//! |---|---|---|
//! | `transactions` | `outcome`: `committed` or an abort reason of [`TxStatus`] | [`NodeMetrics::update_from`] (client-port outcomes) |
//! | `packets_sent`, `messages_sent`, `packet_bytes_sent` | | `update_from` (batching, Dandelion §5.1) |
//! | `bad_packets` | | `update_from` |
//! | `cache_hits`, `cache_misses`, `cache_evictions` | | `update_from` (NIC object cache) |
//! | `iterations` | | `update_from` |
//! | `packets_received`, `retransmissions`, `duplicates_dropped`, `sessions_failed` | | [`NodeMetrics::update_sessions`] (the session layer) |
//! | `dpdk_packets_sent`, `dpdk_packets_received`, `dpdk_tx_port_full`, `dpdk_mempool_empty`, `dpdk_unknown_destination`, `dpdk_oversized`, `dpdk_broadcast_frames`, `dpdk_port_rx_missed`, `dpdk_port_rx_no_mbuf`, `dpdk_tx_in_place`, `dpdk_tx_copied`, `dpdk_lend_refused` | | [`NodeMetrics::update_dpdk`] (a DPDK node only: [`NodeMetrics::with_dpdk`]) |
//! | `dpdk_rx_dropped` | `reason`: a DPDK [`RxDrop`] name | `update_dpdk` |
//! | `verbs_packets_sent`, `verbs_tx_inline`, `verbs_tx_signaled`, `verbs_packets_received`, `verbs_tx_too_long`, `verbs_tx_unknown_peer`, `verbs_tx_queue_full`, `verbs_tx_pool_exhausted`, `verbs_tx_completion_errors`, `verbs_post_errors`, `verbs_rx_topup_short`, `verbs_peers_repointed`, `verbs_endpoints_refused` | | [`NodeMetrics::update_verbs`] (a verbs node only: [`NodeMetrics::with_verbs`]) |
//! | `verbs_rx_dropped` | `reason`: a verbs [`VerbsRxDrop`] name | `update_verbs` |
//! | `application_connections_attached`, `application_requests`, `application_outcomes_discarded` | | [`NodeMetrics::update_applications`] (the application gateway) |
//! | `application_connections_closed` | `reason`: a `CloseReason` label (`peer_closed`, `outcome_ring_stalled`, `malformed`, `in_flight_exceeded`, `stopped`) | `update_applications` |
//! | `application_outcomes` | `status`: an application `Status` label (`committed`, `aborted_lock_conflict`, `key_not_found`, …) | `update_applications` |
//! | `application_connections_refused` | `reason`: a refusal label (`version_mismatch`, `user_not_allowed`, `connections_full`, `bad_memory`, `bad_hello`, `unavailable`) | `update_applications` (the listener's set-ups) |
//!
//! the gauge `application_connections_open` (`update_applications`),
//! and the histogram `transaction_latency_us` (µs, buckets
//! [`LATENCY_BUCKET_FIRST_US`] × 2ⁱ for i < [`LATENCY_BUCKETS`]), fed by
//! [`NodeMetrics::observe_latency_us`] (in `splitkv node`: by the workload
//! client the node runs, its committed transactions in the measured window,
//! every 100 ms).
//!
//! The runtime's statistics are cumulative numbers read from a snapshot; the
//! counters advance by the difference from the previous snapshot, so a
//! counter never goes backwards (a source that restarts from zero is counted
//! from zero again). The transports' counters are in `metrics/transport.rs`.

use std::borrow::Cow;
use std::fmt;
use std::sync::Mutex;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::wire::NodeId;
use splitkv_nic::NicStats;

use super::dpdk::DpdkSnapshot;
use super::verbs::VerbsSnapshot;
use transport::{DpdkMetrics, TransportSeen, VerbsMetrics};

#[cfg(doc)]
use splitkv_nic::net::{dpdk::RxDrop, verbs::RxDrop as VerbsRxDrop};

mod transport;

/// Upper bound of the latency histogram's first bucket (µs).
pub const LATENCY_BUCKET_FIRST_US: f64 = 1.0;
/// Buckets of the latency histogram (each twice the last: 1 µs … ~0.5 s),
/// besides `+Inf`.
pub const LATENCY_BUCKETS: u16 = 20;

/// The label of a transaction outcome: `committed` or the abort reason in
/// snake case (`lock_conflict`, `validation_failed`, …).
pub fn outcome_label(status: TxStatus) -> &'static str {
    match status {
        TxStatus::Committed => "committed",
        TxStatus::LockConflict => "lock_conflict",
        TxStatus::UserAborted => "user_aborted",
        TxStatus::Rejected => "rejected",
        TxStatus::ValidationFailed => "validation_failed",
        TxStatus::TableFull => "table_full",
        TxStatus::TooLarge => "too_large",
        TxStatus::Unavailable => "unavailable",
        TxStatus::HostFailure => "host_failure",
        TxStatus::Unknown => "unknown",
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[cfg(not(loom))]
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: &'static str,
}

/// The session layer's cumulative counters (eRPC-style reliable sessions
/// below the batching layer), passed as plain numbers so the session layer
/// need not know this module.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionCounters {
    /// Packets taken from the transport.
    pub packets_received: u64,
    /// Packets sent again after a retransmission timeout.
    pub retransmissions: u64,
    /// Received packets dropped as duplicates.
    pub duplicates_dropped: u64,
    /// Sessions declared failed after the configured silence.
    pub sessions_failed: u64,
}

/// The last cumulative values seen, to advance counters by differences.
#[derive(Debug, Default)]
struct Seen {
    outcomes: [u64; TxStatus::ALL.len()],
    nic: [u64; NIC_COUNTERS],
    sessions: [u64; SESSION_COUNTERS],
    transports: TransportSeen,
    #[cfg(not(loom))]
    applications: [u64; APP_COUNTERS],
}

const NIC_COUNTERS: usize = 8;
const SESSION_COUNTERS: usize = 4;

/// One node's metrics and the registry that exposes them. `Sync`: the
/// polling side updates it while the control thread encodes it.
#[derive(Debug)]
pub struct NodeMetrics {
    registry: Registry,
    outcomes: [Counter; TxStatus::ALL.len()],
    nic: [Counter; NIC_COUNTERS],
    sessions: [Counter; SESSION_COUNTERS],
    latency_us: Histogram,
    dpdk: Option<DpdkMetrics>,
    verbs: Option<VerbsMetrics>,
    #[cfg(not(loom))]
    applications: ApplicationMetrics,
    seen: Mutex<Seen>,
}

/// Counters of the application gateway: attached, requests, discarded,
/// then closed by reason, then outcomes by status.
#[cfg(not(loom))]
const APP_COUNTERS: usize = 3
    + crate::clients::CloseReason::ALL.len()
    + splitkv_layout::app::Status::ALL.len()
    + splitkv_layout::app::RefusedReason::ALL.len();

/// The application gateway's metrics (`[clients]`).
#[cfg(not(loom))]
#[derive(Debug)]
struct ApplicationMetrics {
    /// In the order of [`application_values`].
    counters: Vec<Counter>,
    open: prometheus_client::metrics::gauge::Gauge,
}

#[cfg(not(loom))]
impl ApplicationMetrics {
    fn register(registry: &mut Registry) -> ApplicationMetrics {
        use crate::clients::{gateway::status_label, refused_label, CloseReason};
        use splitkv_layout::app::{RefusedReason, Status};
        let mut counters = vec![
            register_counter(
                registry,
                "application_connections_attached",
                "Application connections the gateway took over",
            ),
            register_counter(
                registry,
                "application_requests",
                "Requests taken from application request rings",
            ),
            register_counter(
                registry,
                "application_outcomes_discarded",
                "Outcomes of requests whose connection had closed",
            ),
        ];
        let closed = Family::<ReasonLabels, Counter>::default();
        counters.extend(
            CloseReason::ALL
                .map(|r| closed.get_or_create_owned(&ReasonLabels { reason: r.label() })),
        );
        registry.register(
            "application_connections_closed",
            "Application connections closed, by reason",
            closed,
        );
        let outcomes = Family::<StatusLabels, Counter>::default();
        counters.extend(Status::ALL.map(|s| {
            outcomes.get_or_create_owned(&StatusLabels {
                status: status_label(s),
            })
        }));
        registry.register(
            "application_outcomes",
            "Outcomes written to application outcome rings, by status",
            outcomes,
        );
        let refused = Family::<ReasonLabels, Counter>::default();
        counters.extend(RefusedReason::ALL.map(|r| {
            refused.get_or_create_owned(&ReasonLabels {
                reason: refused_label(r),
            })
        }));
        registry.register(
            "application_connections_refused",
            "Application connection set-ups the node refused, by reason",
            refused,
        );
        let open = prometheus_client::metrics::gauge::Gauge::default();
        registry.register(
            "application_connections_open",
            "Application connections open now",
            open.clone(),
        );
        ApplicationMetrics { counters, open }
    }
}

#[cfg(not(loom))]
fn application_values(c: &crate::clients::GatewayCounts) -> [u64; APP_COUNTERS] {
    let mut v = [0; APP_COUNTERS];
    let all = [c.attached, c.requests, c.outcomes_discarded]
        .into_iter()
        .chain(c.closed)
        .chain(c.outcomes)
        .chain(c.set_ups.refused);
    for (slot, value) in v.iter_mut().zip(all) {
        *slot = value;
    }
    v
}

/// Names and help of the NIC counters, in the order of [`nic_values`].
const NIC_METRICS: [(&str, &str); NIC_COUNTERS] = [
    (
        "packets_sent",
        "Packets sealed for other nodes (Dandelion §5.1)",
    ),
    ("messages_sent", "Messages in the packets sent"),
    ("packet_bytes_sent", "Bytes of the packets sent"),
    (
        "bad_packets",
        "Packets or messages dropped as malformed or over a limit",
    ),
    (
        "cache_hits",
        "NIC object-cache lookups answered by the cache",
    ),
    ("cache_misses", "NIC object-cache lookups that missed"),
    (
        "cache_evictions",
        "Objects evicted from the NIC object cache",
    ),
    ("iterations", "NIC runtime iterations run"),
];

/// Names and help of the session counters, in the order of [`session_values`].
const SESSION_METRICS: [(&str, &str); SESSION_COUNTERS] = [
    ("packets_received", "Packets taken from the transport"),
    (
        "retransmissions",
        "Packets sent again after a retransmission timeout",
    ),
    (
        "duplicates_dropped",
        "Received packets dropped as duplicates",
    ),
    (
        "sessions_failed",
        "Peer sessions declared failed after the configured silence",
    ),
];

fn nic_values(stats: &NicStats) -> [u64; NIC_COUNTERS] {
    [
        stats.net.batch.packets,
        stats.net.batch.messages,
        stats.net.batch.bytes,
        stats.bad_packets,
        stats.cache.hits,
        stats.cache.misses,
        stats.cache.evictions,
        stats.iterations,
    ]
}

fn session_values(s: &SessionCounters) -> [u64; SESSION_COUNTERS] {
    [
        s.packets_received,
        s.retransmissions,
        s.duplicates_dropped,
        s.sessions_failed,
    ]
}

/// Advances each counter by how much its source grew since `seen`.
fn advance(counters: &[Counter], seen: &mut [u64], now: &[u64]) {
    for ((counter, last), &value) in counters.iter().zip(seen.iter_mut()).zip(now) {
        let delta = if value >= *last { value - *last } else { value };
        if delta > 0 {
            counter.inc_by(delta);
        }
        *last = value;
    }
}

impl NodeMetrics {
    /// Registers every metric of node `node` of cluster `cluster_id`; all
    /// counters start at zero and appear in the exposition from the start.
    pub fn new(cluster_id: u32, node: NodeId) -> NodeMetrics {
        let labels = [
            (Cow::Borrowed("cluster"), Cow::Owned(cluster_id.to_string())),
            (Cow::Borrowed("node"), Cow::Owned(node.to_string())),
        ];
        let mut registry = Registry::with_prefix_and_labels("splitkv", labels.into_iter());
        let family = Family::<OutcomeLabels, Counter>::default();
        let outcomes = TxStatus::ALL.map(|status| {
            family.get_or_create_owned(&OutcomeLabels {
                outcome: outcome_label(status),
            })
        });
        registry.register(
            "transactions",
            "Transactions finished, by outcome (committed or the abort reason)",
            family,
        );
        let nic = NIC_METRICS.map(|(name, help)| register_counter(&mut registry, name, help));
        let sessions =
            SESSION_METRICS.map(|(name, help)| register_counter(&mut registry, name, help));
        let latency_us = Histogram::new(exponential_buckets(
            LATENCY_BUCKET_FIRST_US,
            2.0,
            LATENCY_BUCKETS,
        ));
        registry.register(
            "transaction_latency_us",
            "Latency from a transaction's submission to its outcome, in microseconds",
            latency_us.clone(),
        );
        #[cfg(not(loom))]
        let applications = ApplicationMetrics::register(&mut registry);
        NodeMetrics {
            registry,
            outcomes,
            nic,
            sessions,
            latency_us,
            dpdk: None,
            verbs: None,
            #[cfg(not(loom))]
            applications,
            seen: Mutex::new(Seen::default()),
        }
    }

    /// The same metrics with a DPDK node's counters registered too (see the
    /// module table), fed by [`NodeMetrics::update_dpdk`].
    pub fn with_dpdk(mut self) -> NodeMetrics {
        self.dpdk = Some(DpdkMetrics::register(&mut self.registry));
        self
    }

    /// Copies a DPDK transport's cumulative counters (nothing unless
    /// [`NodeMetrics::with_dpdk`] registered them).
    pub fn update_dpdk(&self, snapshot: &DpdkSnapshot) {
        let Some(d) = &self.dpdk else {
            return;
        };
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        d.update(&mut seen.transports, snapshot);
    }

    /// The same metrics with a verbs node's counters registered too (see
    /// the module table), fed by [`NodeMetrics::update_verbs`].
    pub fn with_verbs(mut self) -> NodeMetrics {
        self.verbs = Some(VerbsMetrics::register(&mut self.registry));
        self
    }

    /// Copies a verbs transport's cumulative counters (nothing unless
    /// [`NodeMetrics::with_verbs`] registered them).
    pub fn update_verbs(&self, snapshot: &VerbsSnapshot) {
        let Some(v) = &self.verbs else {
            return;
        };
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        v.update(&mut seen.transports, snapshot);
    }

    /// Copies the NIC runtime's cumulative counters: outcomes by status,
    /// packets, messages and bytes sent, bad packets, cache hits, misses and
    /// evictions, iterations.
    pub fn update_from(&self, stats: &NicStats) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let seen = &mut *seen;
        advance(&self.outcomes, &mut seen.outcomes, &stats.clients.outcomes);
        advance(&self.nic, &mut seen.nic, &nic_values(stats));
    }

    /// Copies the session layer's cumulative counters.
    pub fn update_sessions(&self, counters: &SessionCounters) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        advance(
            &self.sessions,
            &mut seen.sessions,
            &session_values(counters),
        );
    }

    /// Copies the application gateway's cumulative counters (summed over
    /// the gateways of the process) and its open connections.
    #[cfg(not(loom))]
    pub fn update_applications(&self, counts: &crate::clients::GatewayCounts) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let a = &self.applications;
        advance(
            &a.counters,
            &mut seen.applications,
            &application_values(counts),
        );
        a.open.set(counts.open.min(i64::MAX as u64) as i64);
    }

    /// Records one transaction's latency (µs, submission to outcome).
    pub fn observe_latency_us(&self, latency_us: u64) {
        self.latency_us.observe(latency_us as f64);
    }

    /// Transactions counted with `status` so far.
    pub fn transactions(&self, status: TxStatus) -> u64 {
        self.outcomes[status as usize].get()
    }

    /// Appends the OpenMetrics text exposition of every metric to `out`
    /// (ends with `# EOF`).
    ///
    /// # Errors
    /// Only if writing to `out` fails (never for a `String`).
    pub fn encode(&self, out: &mut String) -> fmt::Result {
        encode(out, &self.registry)
    }
}

fn register_counter(registry: &mut Registry, name: &str, help: &str) -> Counter {
    let counter = Counter::default();
    registry.register(name, help, counter.clone());
    counter
}
