//! The cluster under the deterministic simulator (DESIGN.md driver 1): built
//! over a fresh [`SimNetwork`] (with the network faults of the
//! [`SimConfig`]), each node's DMA engine wrapped in seeded latencies
//! ([`SimDma`], when `cfg.dma.on`), and polled by a [`Sim`] that knows which
//! node owns each component (so it can crash or slow a node) until every
//! client's budget has its outcomes and no packet is in flight. The sim
//! tests all run this one loop.

use super::{BenchCluster, BuildError, ClusterSpec};
use crate::workload::Workload;
use splitkv_layout::wire::NodeId;
use splitkv_nic::net::session::SessionEvent;
use splitkv_nic::net::Transport;
use splitkv_sim::dma::{NullDma, SimDma};
use splitkv_sim::{Sim, SimConfig, SimError, SimNetwork};

/// Components per node in [`BenchCluster::components`] (NIC runtime, host
/// worker, load generator).
const COMPONENTS_PER_NODE: usize = 3;

impl<W: Workload> BenchCluster<W> {
    /// Builds the cluster over a new simulated network of `spec.nodes`
    /// endpoints configured by `cfg`; if `cfg.dma.on`, wraps every node's
    /// DMA engine in a [`SimDma`] seeded from `cfg.seed` and the node id.
    /// Returns the cluster and the network.
    ///
    /// # Errors
    /// As [`BenchCluster::build`].
    pub fn build_on_sim(
        spec: ClusterSpec,
        workload: W,
        cfg: SimConfig,
    ) -> Result<(BenchCluster<W>, SimNetwork), BuildError> {
        let (net, ends) = SimNetwork::new(spec.nodes, cfg);
        let transports = ends
            .into_iter()
            .map(|t| Box::new(t) as Box<dyn Transport>)
            .collect();
        let mut cluster = BenchCluster::build(spec, workload, transports, |_| {})?;
        if cfg.dma.on {
            for (i, node) in cluster.parts.nodes.iter_mut().enumerate() {
                let inner = node.nic.replace_dma(Box::new(NullDma));
                let seed = cfg
                    .seed
                    .wrapping_add((i as u64 + 1).wrapping_mul(0x9E37_79B9));
                node.nic
                    .replace_dma(Box::new(SimDma::new(inner, cfg.dma, seed)));
            }
        }
        Ok((cluster, net))
    }

    /// A simulator for this cluster: `cfg`'s driver with every component
    /// mapped to its node, so `cfg.nodes`' crashes and slow node apply.
    pub fn sim(&self, cfg: SimConfig) -> Sim {
        let mut sim = Sim::new(cfg);
        let owners = (0..self.loadgens.len())
            .flat_map(|n| std::iter::repeat_n(n as NodeId, COMPONENTS_PER_NODE))
            .collect();
        sim.set_owners(owners);
        sim
    }

    /// Runs the cluster under `sim` in slices of `slice_passes` passes until it
    /// is quiescent ([`BenchCluster::is_quiescent`]) with nothing in flight on
    /// `net`.
    ///
    /// # Errors
    /// What [`Sim::run_passes`] reports (a component's fault), or
    /// [`SimError::Timeout`] once `sim` has run `passes_max` passes without
    /// getting there (a stalled run).
    pub fn run_sim_until_quiescent(
        &mut self,
        sim: &mut Sim,
        net: &SimNetwork,
        slice_passes: u64,
        passes_max: u64,
    ) -> Result<(), SimError> {
        loop {
            sim.run_passes(net, &mut self.components(), slice_passes)?;
            if self.is_quiescent() && net.in_flight() == 0 {
                return Ok(());
            }
            if sim.passes() >= passes_max {
                return Err(SimError::Timeout {
                    passes: sim.passes(),
                    now_ns: sim.now(),
                });
            }
        }
    }

    /// The session events (peers declared failed) raised so far on every
    /// node not crashed in `sim`, as (observing node, event).
    pub fn drain_session_events(&mut self, sim: &Sim) -> Vec<(NodeId, SessionEvent)> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        for (i, node) in self.parts.nodes.iter_mut().enumerate() {
            let id = i as NodeId;
            if sim.crashed().iter().any(|&(n, _)| n == id) {
                continue;
            }
            node.nic.drain_session_events(&mut buf);
            out.extend(buf.drain(..).map(|e| (id, e)));
        }
        out
    }
}
