//! Fills a node's [`Results`] from its paused parts: the client's counters,
//! latency and recordings, the NIC and worker counters, and every row of the
//! host table; and feeds the client's latencies to the node's `/metrics`
//! while it runs ([`LatencyFeed`]).

use super::journal::Journaled;
use super::node::loadgen_mut;
use super::protocol::*;
use crate::history::HistoryGenerator;
use crate::loadgen::LoadGen;
use crate::smallbank::SmallbankGenerator;
use crate::workload::TxGenerator;
use hdrhistogram::Histogram;
use splitkv_host::cluster::ClusterParts;
use splitkv_host::deploy::NodeMetrics;
use splitkv_nic::Nanos;
use std::sync::Arc;

/// Most passes of the drain before a node's results are taken.
pub const COLLECT_DRAIN_PASSES_MAX: u64 = 100_000;

/// Counters, latency and the generator's part of `r` from `loadgen`.
fn client_part<G: TxGenerator>(loadgen: &LoadGen<G>, r: &mut Results) {
    r.all = loadgen.stats().into();
    r.window = loadgen.window_stats().into();
    r.latency_ns = loadgen
        .latency_ns()
        .iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect();
}

/// Fills `r` from `parts` (paused, so exact); a history client is finished
/// at the parts' clock first.
pub(super) fn collect(parts: &mut ClusterParts, r: &mut Results) {
    // Let what the node still owes its peers (applies, acks) finish.
    let origin = std::time::Instant::now();
    let start = parts.now();
    parts.drain(COLLECT_DRAIN_PASSES_MAX, || {
        start + origin.elapsed().as_nanos() as Nanos
    });
    let now = parts.now();
    if let Some(l) = loadgen_mut::<Journaled<SmallbankGenerator>>(parts) {
        // Nothing is outstanding once done; `finish` makes sure.
        l.finish(now);
        client_part(l, r);
        let g = l.generator().inner();
        if let Some(c) = g.txn_client() {
            // Through the `Txn`: the Smallbank transactions' latency, not
            // their `Txn` calls'.
            r.latency_ns = c
                .latency_ns()
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect();
        }
        r.smallbank = Some(SmallbankSummary::of(g));
    } else if let Some(l) = loadgen_mut::<Journaled<HistoryGenerator>>(parts) {
        if !l.generator().inner().is_finished() {
            l.finish(now);
        }
        client_part(l, r);
        let g = l.generator().inner();
        r.history = Some(HistorySummary {
            stats: g.stats().into(),
            ops: g.ops().iter().map(|o| o.to_json()).collect(),
        });
    }
    for n in &parts.nodes {
        let (s, w) = (n.nic.stats(), n.worker.stats());
        r.counters = NodeCounters {
            packets: s.net.batch.packets,
            messages: s.net.batch.messages,
            index_hits: s.server.index_hits,
            dma_reads: s.server.dma_reads,
            lookup_rereads: s.server.lookup_rereads,
            bad_packets: s.bad_packets,
            bad_ring_entries: s.bad_ring_entries,
            host_decode_errors: s.server.host_decode_errors,
            stale_records: crate::history::stale_records_counted(n),
            bad_entries: w.bad_entries,
            retransmissions: s.net.sessions.retransmissions,
            duplicates_dropped: s.net.sessions.duplicates_dropped,
            sessions_failed: s.net.sessions.sessions_failed,
        };
        r.roles = Some(served_roles(n.nic.recovery()));
        r.rows.clear();
        n.worker.table().for_each(|k, meta, value| {
            r.rows.push(Row {
                table: k.table,
                id: k.id,
                version: meta.version(),
                value: to_hex(value),
            })
        });
    }
}

/// The replica sets `recovery`'s current view serves.
fn served_roles(recovery: &splitkv_nic::recovery::Recovery) -> ServedRoles {
    let view = recovery.view();
    let roles = view.roles();
    let shards = 0..view.placement().nodes() as u16;
    ServedRoles {
        epoch: recovery.epoch(),
        members: shards.clone().map(|s| roles.members(s).collect()).collect(),
        joining: shards.map(|s| roles.joining(s).iter().collect()).collect(),
        renewed: roles.renewed().iter().collect(),
    }
}

/// How often a node's client feeds its new latencies to the node's
/// `/metrics` histogram (100 ms of the node's clock).
pub const LATENCY_FEED_INTERVAL_NS: Nanos = 100_000_000;

/// Feeds the latencies a client records (committed transactions in the
/// measured window, ns) to the node's `transaction_latency_us` histogram
/// ([`NodeMetrics::observe_latency_us`]), at most every
/// [`LATENCY_FEED_INTERVAL_NS`]: each time, what was recorded since the
/// last feed (the difference of two hdrhistograms; no allocation after the
/// first feed).
pub(super) struct LatencyFeed {
    metrics: Arc<NodeMetrics>,
    /// Everything fed so far.
    fed: Option<Histogram<u64>>,
    /// Scratch: the latencies recorded since the last feed.
    delta: Option<Histogram<u64>>,
    next_ns: Nanos,
}

impl LatencyFeed {
    /// A feed into `metrics`, first due at once.
    pub(super) fn new(metrics: Arc<NodeMetrics>) -> LatencyFeed {
        LatencyFeed {
            metrics,
            fed: None,
            delta: None,
            next_ns: 0,
        }
    }

    /// At `now`, feeds what `recorded` (the client's latency histogram, ns)
    /// gained since the last feed, if a feed is due. Returns the latencies fed.
    pub(super) fn run(&mut self, now: Nanos, recorded: &Histogram<u64>) -> u64 {
        if now < self.next_ns {
            return 0;
        }
        self.next_ns = now.saturating_add(LATENCY_FEED_INTERVAL_NS);
        let fed = self.fed.get_or_insert_with(|| {
            let mut h = recorded.clone();
            h.reset();
            h
        });
        if recorded.len() == fed.len() {
            return 0;
        }
        let delta = self.delta.get_or_insert_with(|| fed.clone());
        delta.reset();
        if delta.add(recorded).is_err() || delta.subtract(&*fed).is_err() {
            return 0; // same bounds by construction: cannot happen
        }
        let mut n = 0;
        for v in delta.iter_recorded() {
            let us = v.value_iterated_to() / 1_000;
            for _ in 0..v.count_at_value() {
                self.metrics.observe_latency_us(us);
            }
            n += v.count_at_value();
        }
        let _ = fed.add(&*delta);
        n
    }
}
