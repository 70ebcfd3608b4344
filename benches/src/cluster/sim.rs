//! The cluster under the deterministic simulator (DESIGN.md driver 1): built
//! over a fresh [`SimNetwork`] and polled by a [`Sim`] until every client's
//! budget has its outcomes and no packet is in flight. The sim tests all run
//! this one loop.

use super::{BenchCluster, BuildError, ClusterSpec};
use crate::workload::Workload;
use splitkv_nic::net::Transport;
use splitkv_sim::{Sim, SimConfig, SimError, SimNetwork};

impl<W: Workload> BenchCluster<W> {
    /// Builds the cluster over a new simulated network of `spec.nodes`
    /// endpoints configured by `cfg`; returns the cluster and the network.
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
        Ok((
            BenchCluster::build(spec, workload, transports, |_| {})?,
            net,
        ))
    }

    /// Runs the cluster under `sim` in slices of `slice_passes` passes until it
    /// is quiescent ([`BenchCluster::is_quiescent`]) with nothing in flight on
    /// `net`.
    ///
    /// # Errors
    /// What [`Sim::run_passes`] reports (network overflow, a component's
    /// fault), or [`SimError::Timeout`] once `sim` has run `passes_max` passes
    /// without getting there (a stalled run).
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
}
