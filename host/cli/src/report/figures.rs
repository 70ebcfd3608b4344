//! The counters a Smallbank run leaves, summed over nodes, whichever way it
//! ran: read from the in-process cluster ([`RunFigures::of_cluster`]) or
//! from the deployed nodes' `/results` ([`RunFigures::of_results`]), which
//! carry the same counters (`splitkv_bench::remote::protocol`).

use hdrhistogram::Histogram;
use splitkv_bench::loadgen::LoadStats;
use splitkv_bench::remote::protocol::{NodeCounters, TxnSummary};
use splitkv_bench::remote::Results;
use splitkv_bench::SmallbankCluster;
use splitkv_workloads::results::ClientResults;

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
    /// With `--api txn`: the Smallbank transactions' figures, summed over
    /// nodes (`window` and `all` above count their `Txn` calls; the latency
    /// is the transactions').
    pub txn: Option<TxnSummary>,
}

/// Sums the `Txn` clients' summaries (`None` if there is none: shipped).
fn sum_txn(summaries: impl Iterator<Item = TxnSummary>) -> Option<TxnSummary> {
    summaries.reduce(|mut a, b| {
        a.all.add(&b.all);
        a.window.add(&b.window);
        a
    })
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
        let clients = || {
            cluster
                .loadgens
                .iter()
                .filter_map(|l| l.generator().txn_client())
        };
        let mut latency_ns = cluster.latency_ns();
        if clients().next().is_some() {
            latency_ns.reset();
            for c in clients() {
                latency_ns
                    .add(c.latency_ns())
                    .expect("same histogram bounds");
            }
        }
        let txn = sum_txn(clients().map(|c| TxnSummary {
            all: c.figures(),
            window: c.window_figures(),
        }));
        RunFigures {
            window: cluster.window_stats(),
            all: cluster.load_stats(),
            latency_ns,
            nic,
            txn,
        }
    }

    /// The figures of an in-process cluster whose clients ran as external
    /// processes (`--clients external`): their counters and latency, the
    /// cluster's NIC counters.
    pub fn of_external(cluster: &SmallbankCluster, clients: &[ClientResults]) -> RunFigures {
        let sum = |f: fn(&ClientResults) -> LoadStats| {
            let mut s = LoadStats::default();
            clients.iter().for_each(|r| s.add(&f(r)));
            s
        };
        let mut latency_ns = cluster.latency_ns();
        latency_ns.reset();
        for (v, n) in clients.iter().flat_map(|r| r.latency_ns.iter()) {
            let _ = latency_ns.record_n(*v, *n);
        }
        RunFigures {
            window: sum(|r| LoadStats::from(&r.window)),
            all: sum(|r| LoadStats::from(&r.all)),
            latency_ns,
            nic: RunFigures::of_cluster(cluster).nic,
            txn: sum_txn(clients.iter().filter_map(|r| r.smallbank.as_ref()?.txn)),
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
            txn: sum_txn(results.iter().filter_map(|r| r.smallbank.as_ref()?.txn)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Bench;
    use crate::report::{Report, SmallbankReport};
    use splitkv_bench::remote::protocol::{LoadCounters, PROTOCOL_VERSION};
    use splitkv_bench::replicas::ReplicaReport;
    use splitkv_bench::smallbank::MoneyReport;
    use splitkv_bench::{CheckError, ClusterSpec, Smallbank};
    use splitkv_nic::net::mem::mem_network;
    use splitkv_nic::net::Transport;

    /// Three nodes, 200 transactions each, drained on this thread; the
    /// window leaves out the first 200 µs.
    fn drained_cluster() -> SmallbankCluster {
        let mut spec = ClusterSpec::new();
        spec.inflight_per_node = 8;
        spec.budget_per_node = Some(200);
        let transports = mem_network(spec.nodes)
            .into_iter()
            .map(|t| Box::new(t) as Box<dyn Transport>)
            .collect();
        let workload = Smallbank::new(300, None).expect("valid workload");
        let mut c = SmallbankCluster::build(spec, workload, transports, |_| {}).expect("build");
        c.set_window(200_000, u64::MAX);
        c.drain(0, 1_000, 10_000_000).expect("quiesces");
        c
    }

    /// What each node of `c` would answer to `GET /results` (the counters
    /// the deployed driver reads).
    fn results_of(c: &SmallbankCluster) -> Vec<Results> {
        let nodes = c.loadgens.iter().zip(&c.parts.nodes).enumerate();
        nodes
            .map(|(i, (l, n))| {
                let s = n.nic.stats();
                Results {
                    version: PROTOCOL_VERSION,
                    node: i as u16,
                    done: true,
                    all: LoadCounters::from(l.stats()),
                    window: LoadCounters::from(l.window_stats()),
                    latency_ns: l
                        .latency_ns()
                        .iter_recorded()
                        .map(|v| (v.value_iterated_to(), v.count_at_value()))
                        .collect(),
                    counters: NodeCounters {
                        packets: s.net.batch.packets,
                        messages: s.net.batch.messages,
                        index_hits: s.server.index_hits,
                        dma_reads: s.server.dma_reads,
                        lookup_rereads: s.server.lookup_rereads,
                        ..NodeCounters::default()
                    },
                    clock: Default::default(),
                    smallbank: None,
                    history: None,
                    rows: Vec::new(),
                    roles: None,
                }
            })
            .collect()
    }

    #[test]
    fn a_cluster_and_its_nodes_results_fill_the_same_figures_and_report() {
        let c = drained_cluster();
        let (local, remote) = (
            RunFigures::of_cluster(&c),
            RunFigures::of_results(&results_of(&c)),
        );
        assert!(local.window.committed > 0, "{:?}", local.window);
        assert!(
            local.window.committed < local.all.committed,
            "{:?}",
            local.all
        );
        assert!(
            local.nic.packets > 0 && local.nic.index_hits > 0,
            "{:?}",
            local.nic
        );
        assert_eq!(local.window, remote.window);
        assert_eq!(local.all, remote.all);
        assert_eq!(local.nic, remote.nic);
        for q in [0.5, 0.99, 0.999] {
            assert_eq!(
                local.latency_ns.value_at_quantile(q),
                remote.latency_ns.value_at_quantile(q),
                "quantile {q}"
            );
        }
        let argv = ["splitkv", "bench", "smallbank", "--duration", "1s"];
        let Bench::Smallbank(args) = crate::report::bench_args(&argv) else {
            panic!("not smallbank");
        };
        let money: Result<MoneyReport, CheckError> = c.check();
        let replicas: Result<ReplicaReport, CheckError> = c.check_replicas();
        let report = |figures: &RunFigures| {
            Report::smallbank(SmallbankReport {
                args: &args,
                nodes: 3,
                replication: 3,
                accounts: c.workload.accounts,
                figures,
                money: &money,
                replicas: &replicas,
            })
        };
        assert_eq!(report(&local), report(&remote));
    }
}
