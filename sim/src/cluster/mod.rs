//! The bench cluster under the deterministic simulator (DESIGN.md driver
//! 1): a [`BenchCluster`] built over a fresh [`SimNetwork`] (with the
//! network faults of the [`SimConfig`]; [`build_on_sim`]), each node's DMA
//! engine wrapped in seeded latencies ([`SimDma`], when `cfg.dma.on`), and
//! polled by a [`Sim`] that knows which node owns each component (so it can
//! crash or slow a node) until every client's budget has its outcomes and
//! no packet is in flight ([`SimCluster`], the simulator's methods on a
//! bench cluster). The sim tests and `splitkv sim` all run this one loop.
//!
//! Under crashes (crash recovery) the loop also drives the membership
//! ([`SimNodesMembership`], `nodes_membership.rs`): a simulated lease
//! manager and one [`MembershipAgent`] per node, run next to that node's
//! NIC runtime (so a crashed node stops renewing and is configured out once
//! its lease runs out). A run then ends when every *surviving* node's
//! client has its outcomes and the survivors are quiescent; the crashed
//! nodes' in-flight transactions stay indeterminate, and the checks read
//! the survivors only ([`BenchCluster::failed`]).
//!
//! Under a restart fault (the rejoin mix; `restarts.rs`) a
//! crashed node comes back after a seeded delay ([`Sim::take_restarts`]):
//! between two slices it gets fresh components — an empty host table and
//! worker and a NIC runtime of a new incarnation, built as the deployed
//! node is (`ClusterBuilder::build_local_parts`) — and a fresh membership
//! handle and agent that ask the manager to let it back in. Its old client
//! (whose in-flight transactions stay indeterminate) submits no more. The
//! primary of each of its shards copies the shard to it (snapshots are read
//! from the host tables between slices, in short slices while a copy runs),
//! it reports itself caught up, and the run ends only once every node is a
//! replica again: the replication degree is restored.
//!
//! Under NIC-runtime-only crashes (the nic-crash mix) the loop
//! restarts the due nodes' NIC runtimes between slices
//! ([`NicRuntime::restart_nic`] with the next incarnation); their hosts,
//! data and clients live on, and a run ends only once every restarted node
//! serves again (its rebuild is part of [`BenchCluster::is_quiescent`]).
//!
//! Under the chaos mix all of these come together, and overlap
//! on purpose: the membership's loop fires the seed's
//! [`ChaosPlan`](crate::chaos::ChaosPlan) (the schedule, [`crate::chaos`])
//! when the state each part waits for is first seen (the trigger,
//! `chaos_trigger.rs`): a NIC restart inside a recovery epoch, one of a
//! copy source or of the copying node during a copy, and a second node
//! crash during a copy, within f. A restarted process takes an incarnation
//! above every earlier one of its node, NIC restarts included.
//!
//! `describe.rs` prints what explains a run that failed or stalled
//! ([`SimCluster::describe_state`]).

mod chaos_trigger;
mod describe;
mod nodes_membership;
mod restarts;

pub use chaos_trigger::{ChaosNicRestart, ChaosRecord};
pub use nodes_membership::SimNodesMembership;

use crate::dma::{NullDma, SimDma};
use crate::{Sim, SimConfig, SimError, SimNetwork};
use splitkv_bench::{BenchCluster, BuildError, ClusterSpec, Workload};
use splitkv_layout::wire::{NodeId, NodeMask};
use splitkv_nic::net::session::SessionEvent;
use splitkv_nic::net::Transport;
use splitkv_nic::NicStats;
#[cfg(doc)]
use splitkv_nic::{membership::MembershipAgent, NicRuntime};

/// Components per node in [`BenchCluster::components`] (NIC runtime, host
/// worker, load generator).
const COMPONENTS_PER_NODE: usize = 3;
/// Passes per slice while a re-replication copy runs (snapshots are read
/// between slices: at most 10 µs of virtual time late at the default tick).
const COPY_SLICE_PASSES: u64 = 50;

/// Builds the cluster of `spec` running `workload` over a new simulated
/// network of `spec.nodes` endpoints configured by `cfg`; if `cfg.dma.on`,
/// wraps every node's DMA engine in a [`SimDma`] seeded from `cfg.seed` and
/// the node id. Returns the cluster and the network.
///
/// # Errors
/// As [`BenchCluster::build`].
pub fn build_on_sim<W: Workload>(
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

/// The simulator's methods on a bench cluster (one built by
/// [`build_on_sim`]): `use splitkv_sim::cluster::SimCluster` to call them
/// on a [`BenchCluster`]. An extension trait because the bench cluster's
/// crate does not depend on the simulator.
pub trait SimCluster {
    /// A simulator for this cluster: `cfg`'s driver with every component
    /// mapped to its node, so `cfg.nodes`' crashes and slow node apply.
    fn sim(&self, cfg: SimConfig) -> Sim;

    /// Runs the cluster under `sim` in slices of `slice_passes` passes until it
    /// is quiescent ([`BenchCluster::is_quiescent`]) with nothing in flight on
    /// `net`. Without membership: crashed nodes are excluded from the end
    /// condition but nobody reconfigures (see
    /// [`SimCluster::run_sim_with_membership`]).
    ///
    /// # Errors
    /// What [`Sim::run_passes`] reports (a component's fault), or
    /// [`SimError::Timeout`] once `sim` has run `passes_max` passes without
    /// getting there (a stalled run).
    fn run_sim_until_quiescent(
        &mut self,
        sim: &mut Sim,
        net: &SimNetwork,
        slice_passes: u64,
        passes_max: u64,
    ) -> Result<(), SimError>;

    /// [`SimCluster::run_sim_until_quiescent`] with `membership` driven in
    /// the loop: its manager runs every pass, and each node's agent runs
    /// right after that node's NIC runtime (renewing its lease, reporting
    /// failed sessions as suspects, applying new configurations). The run
    /// ends when every surviving node's client has its outcomes, the
    /// survivors are quiescent and nothing is in flight;
    /// [`BenchCluster::failed`] is then the set of crashed nodes and of
    /// nodes the membership configured out.
    ///
    /// # Errors
    /// As [`SimCluster::run_sim_until_quiescent`].
    fn run_sim_with_membership(
        &mut self,
        sim: &mut Sim,
        net: &SimNetwork,
        membership: &mut SimNodesMembership,
        slice_passes: u64,
        passes_max: u64,
    ) -> Result<(), SimError>;

    /// The session events (peers declared failed) raised so far on every
    /// node not crashed in `sim`, as (observing node, event).
    fn drain_session_events(&mut self, sim: &Sim) -> Vec<(NodeId, SessionEvent)>;

    /// A multi-line description of the run's state at `sim`'s time (see
    /// `describe.rs`), with the membership `m` when the run had one.
    fn describe_state(&mut self, sim: &Sim, m: Option<&SimNodesMembership>) -> String;
}

impl<W: Workload> SimCluster for BenchCluster<W> {
    fn sim(&self, cfg: SimConfig) -> Sim {
        let mut sim = Sim::new(cfg);
        let owners = (0..self.loadgens.len())
            .flat_map(|n| std::iter::repeat_n(n as NodeId, COMPONENTS_PER_NODE))
            .collect();
        sim.set_owners(owners);
        sim
    }

    fn run_sim_until_quiescent(
        &mut self,
        sim: &mut Sim,
        net: &SimNetwork,
        slice_passes: u64,
        passes_max: u64,
    ) -> Result<(), SimError> {
        run_sim(self, sim, net, None, slice_passes, passes_max)
    }

    fn run_sim_with_membership(
        &mut self,
        sim: &mut Sim,
        net: &SimNetwork,
        membership: &mut SimNodesMembership,
        slice_passes: u64,
        passes_max: u64,
    ) -> Result<(), SimError> {
        run_sim(self, sim, net, Some(membership), slice_passes, passes_max)
    }

    fn drain_session_events(&mut self, sim: &Sim) -> Vec<(NodeId, SessionEvent)> {
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

    fn describe_state(&mut self, sim: &Sim, m: Option<&SimNodesMembership>) -> String {
        describe::describe_state(self, sim, m)
    }
}

/// The loop of [`SimCluster::run_sim_until_quiescent`] (no `membership`) and
/// [`SimCluster::run_sim_with_membership`].
fn run_sim<W: Workload>(
    cluster: &mut BenchCluster<W>,
    sim: &mut Sim,
    net: &SimNetwork,
    mut membership: Option<&mut SimNodesMembership>,
    slice_passes: u64,
    passes_max: u64,
) -> Result<(), SimError> {
    let mut last = Vec::new();
    loop {
        let copying = restarts::serve_copy_reads(cluster);
        let passes = if copying {
            COPY_SLICE_PASSES
        } else {
            slice_passes
        };
        match membership.as_deref_mut() {
            None => sim.run_passes(net, &mut cluster.components(), passes)?,
            Some(m) => {
                nodes_membership::run_slice_with(cluster, sim, net, m, passes)?;
                chaos_trigger::fire_chaos(cluster, sim, net, m)?;
                restarts::exit_fenced(sim, net, m);
                restarts::restart_due(cluster, sim, net, m)?;
            }
        }
        restarts::restart_nics(cluster, sim)?;
        let crashed = crashed_mask(sim);
        // A restarted node's old client never learns its in-flight
        // outcomes: it is left out of the end of the run like a crashed
        // node's (but its data is checked: see below).
        let retired = restarted_mask(sim);
        cluster.failed = NodeMask(crashed.0 | retired.0);
        // With a membership, a run goes on until every crashed node is
        // configured out (and so recovered from, `is_settled`): a run
        // that ended first would leave a crashed coordinator's
        // transactions undecided at the survivors.
        let mut configured_out = true;
        if let Some(m) = membership.as_deref() {
            // A node the membership configured out (a slow node found
            // silent, say) is no replica any more: it is failed too.
            let all = (1u32 << cluster.parts.nodes.len()) - 1;
            let live = m.manager.current().live;
            cluster.failed = NodeMask(cluster.failed.0 | (all & !live) as u16);
            configured_out = u32::from(crashed.0) & live == 0;
        }
        let done = cluster.is_quiescent() || is_settled(cluster, &mut last);
        let restored = match membership.as_deref() {
            Some(m) => restarts::is_restored(cluster, sim, m),
            None => true,
        };
        if net.in_flight() == 0 && configured_out && done && restored {
            cluster.failed = NodeMask(cluster.failed.0 & !retired.0);
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

/// After a crash: whether every surviving client has its outcomes,
/// every surviving host worker is idle, no survivor is in the middle of
/// a recovery epoch, and no surviving NIC runtime's counters (other than
/// its iterations) moved since the previous slice (`last`, updated
/// here). With a membership the run also waits until every crashed node
/// is configured out (`run_sim`), so the recovery epoch has decided the
/// crashed coordinator's transactions; without one (a crash run with no
/// membership), its locks and pending LOG records may remain, which
/// nothing will touch again once the survivors' clients are done.
fn is_settled<W: Workload>(cluster: &mut BenchCluster<W>, last: &mut Vec<NicStats>) -> bool {
    if cluster.failed.is_empty() {
        return false;
    }
    let failed = cluster.failed;
    let live = |n: usize| !failed.contains(n as NodeId);
    let now: Vec<NicStats> = cluster
        .parts
        .nodes
        .iter()
        .enumerate()
        .filter(|(n, _)| live(*n))
        .map(|(_, p)| NicStats {
            iterations: 0,
            ..p.nic.stats()
        })
        .collect();
    let moved = *last != now;
    *last = now;
    let clients = cluster.loadgens.iter().enumerate();
    let done = clients.filter(|(n, _)| live(*n)).all(|(_, l)| l.is_done());
    let hosts = cluster.parts.nodes.iter_mut().enumerate();
    let idle = hosts
        .filter(|(n, _)| live(*n))
        .all(|(_, p)| p.worker.is_quiescent() && !p.nic.recovering());
    done && idle && !moved
}

/// The nodes `sim` restarted, as a mask.
fn restarted_mask(sim: &Sim) -> NodeMask {
    sim.restarted()
        .iter()
        .fold(NodeMask::EMPTY, |m, &(n, _, _)| m.with(n))
}

/// The crashed nodes of `sim`, as a mask.
fn crashed_mask(sim: &Sim) -> NodeMask {
    sim.crashed()
        .iter()
        .fold(NodeMask::EMPTY, |m, &(n, _)| m.with(n))
}
