//! The counters a Smallbank run leaves, summed over nodes, whichever way it
//! ran: read from the in-process cluster ([`RunFigures::of_cluster`]) or
//! from the deployed nodes' `/results` ([`RunFigures::of_results`]), which
//! carry the same counters (`splitkv_bench::remote::protocol`).

use hdrhistogram::Histogram;
use splitkv_bench::loadgen::LoadStats;
use splitkv_bench::remote::protocol::NodeCounters;
use splitkv_bench::remote::Results;
use splitkv_bench::SmallbankCluster;

/// What [`super::Report::smallbank`] is built from.
#[derive(Debug, Clone)]
pub struct RunFigures {
    /// Outcomes within the measured interval, summed over nodes.
    pub window: LoadStats,
    /// Every outcome (warm-up and drain included), summed over nodes.
    pub all: LoadStats,
    /// Latency of the window's commits (ns, first submission to commit),
    /// every node's in one histogram.
    pub latency_ns: Histogram<u64>,
    /// NIC counters over the whole run.
    pub nic: NicTotals,
}

impl RunFigures {
    /// The figures of an in-process cluster (drained).
    pub fn of_cluster(cluster: &SmallbankCluster) -> RunFigures {
        let mut nic = NicTotals::default();
        for n in &cluster.parts.nodes {
            let s = n.nic.stats();
            nic.packets += s.net.batch.packets;
            nic.messages += s.net.batch.messages;
            nic.index_hits += s.server.index_hits;
            nic.dma_reads += s.server.dma_reads;
            nic.lookup_rereads += s.server.lookup_rereads;
        }
        RunFigures {
            window: cluster.window_stats(),
            all: cluster.load_stats(),
            latency_ns: cluster.latency_ns(),
            nic,
        }
    }

    /// The figures of a deployed run, from every node's results.
    pub fn of_results(results: &[Results]) -> RunFigures {
        let sum = |f: fn(&Results) -> LoadStats| {
            let mut s = LoadStats::default();
            results.iter().for_each(|r| s.add(&f(r)));
            s
        };
        let mut latency_ns = Histogram::new(3).expect("valid histogram");
        for (v, n) in results.iter().flat_map(|r| r.latency_ns.iter()) {
            let _ = latency_ns.record_n(*v, *n);
        }
        RunFigures {
            window: sum(|r| LoadStats::from(&r.window)),
            all: sum(|r| LoadStats::from(&r.all)),
            latency_ns,
            nic: NicTotals::of_results(results),
        }
    }
}

/// NIC counters summed over nodes, for the whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NicTotals {
    /// Packets sent (Dandelion §5.1).
    pub packets: u64,
    /// Messages in them.
    pub messages: u64,
    /// Lookups the NIC index answered (Xenic §4.1.3).
    pub index_hits: u64,
    /// DMA reads the NIC's server submitted.
    pub dma_reads: u64,
    /// Lookups that read the host table again.
    pub lookup_rereads: u64,
}

impl NicTotals {
    /// The counters of every node's results.
    pub fn of_results(results: &[Results]) -> NicTotals {
        let c = |f: fn(&NodeCounters) -> u64| results.iter().map(|r| f(&r.counters)).sum();
        NicTotals {
            packets: c(|c| c.packets),
            messages: c(|c| c.messages),
            index_hits: c(|c| c.index_hits),
            dma_reads: c(|c| c.dma_reads),
            lookup_rereads: c(|c| c.lookup_rereads),
        }
    }

    /// Lookups: every one that missed the NIC cache started with one DMA
    /// read, and a reread is a second one of the same lookup.
    pub fn lookups(&self) -> u64 {
        (self.index_hits + self.dma_reads).saturating_sub(self.lookup_rereads)
    }
}

/// The session layer's counters summed over a deployed run's nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionTotals {
    /// Packets sent again after a retransmission timeout.
    pub retransmissions: u64,
    /// Received packets dropped as duplicates.
    pub duplicates_dropped: u64,
    /// Sessions declared failed after the configured silence.
    pub sessions_failed: u64,
}

impl SessionTotals {
    /// The counters of every node's results.
    pub fn of_results(results: &[Results]) -> SessionTotals {
        let c = |f: fn(&NodeCounters) -> u64| results.iter().map(|r| f(&r.counters)).sum();
        SessionTotals {
            retransmissions: c(|c| c.retransmissions),
            duplicates_dropped: c(|c| c.duplicates_dropped),
            sessions_failed: c(|c| c.sessions_failed),
        }
    }

    /// The report's `sessions` line (no newline).
    pub fn line(&self) -> String {
        format!(
            "  sessions       {} retransmissions, {} duplicates dropped, {} sessions failed",
            self.retransmissions, self.duplicates_dropped, self.sessions_failed
        )
    }
}
