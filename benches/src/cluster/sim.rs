//! The cluster under the deterministic simulator (DESIGN.md driver 1): built
//! over a fresh [`SimNetwork`] (with the network faults of the
//! [`SimConfig`]), each node's DMA engine wrapped in seeded latencies
//! ([`SimDma`], when `cfg.dma.on`), and polled by a [`Sim`] that knows which
//! node owns each component (so it can crash or slow a node) until every
//! client's budget has its outcomes and no packet is in flight. The sim
//! tests all run this one loop.
//!
//! Under crashes (issue 11) the loop also drives the membership
//! ([`SimNodesMembership`]): a simulated lease manager and one
//! [`MembershipAgent`] per node, run next to that node's NIC runtime (so a
//! crashed node stops renewing and is configured out once its lease runs
//! out). A run then ends when every *surviving* node's client has its
//! outcomes and the survivors are quiescent; the crashed nodes' in-flight
//! transactions stay indeterminate, and the checks read the survivors only
//! ([`BenchCluster::failed`]).
//!
//! Under a restart fault (issue 12, the rejoin mix) a crashed node comes
//! back after a seeded delay ([`Sim::take_restarts`]): between two slices it
//! gets fresh components — an empty host table and worker and a NIC runtime
//! of a new incarnation, built as the deployed node is
//! (`ClusterBuilder::build_local_parts`) — and a fresh membership handle and
//! agent that ask the manager to let it back in. Its old client (whose
//! in-flight transactions stay indeterminate) submits no more. The primary
//! of each of its shards copies the shard to it (snapshots are read from
//! the host tables between slices, in short slices while a copy runs), it
//! reports itself caught up, and the run ends only once every node is a
//! replica again: the replication degree is restored.
//!
//! Under NIC-runtime-only crashes (issue 12, the nic-crash mix) the loop
//! restarts the due nodes' NIC runtimes in place between slices
//! ([`NicRuntime::restart_nic`] with the next incarnation); their hosts,
//! data and clients live on, and a run ends only once every restarted node
//! serves again (its rebuild is part of [`BenchCluster::is_quiescent`]).
//!
//! Under the chaos mix (issue 12; `splitkv_sim::chaos`) all of these come
//! together, and overlap on purpose: the membership's loop fires the
//! seed's [`ChaosPlan`](splitkv_sim::chaos::ChaosPlan) (`chaos.rs`): a NIC
//! restart inside a recovery epoch, one of a copy source or of the copying
//! node during a copy, and a second node crash during a copy, within f. A
//! restarted process takes an incarnation above every earlier one of its
//! node, NIC restarts included.

mod chaos;
mod describe;

use chaos::ChaosState;
pub use chaos::{ChaosNicRestart, ChaosRecord};
use std::sync::Mutex;

use super::{BenchCluster, BuildError, ClusterSpec};
use crate::workload::Workload;
use splitkv_layout::wire::{NodeId, NodeMask};
use splitkv_nic::membership::{MembershipAgent, RENEW_EVERY_NS_DEFAULT};
use splitkv_nic::net::session::SessionEvent;
use splitkv_nic::net::Transport;
use splitkv_nic::{Component, Nanos, NicRuntime, NicStats};
use splitkv_sim::dma::{NullDma, SimDma};
use splitkv_sim::membership::{LeaseConfig, LeaseConfigError, SimMember, SimMembership};
use splitkv_sim::{Sim, SimConfig, SimError, SimNetwork};

/// Components per node in [`BenchCluster::components`] (NIC runtime, host
/// worker, load generator).
const COMPONENTS_PER_NODE: usize = 3;
/// Passes per slice while a re-replication copy runs (snapshots are read
/// between slices: at most 10 µs of virtual time late at the default tick).
const COPY_SLICE_PASSES: u64 = 50;

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
    /// `net`. Without membership: crashed nodes are excluded from the end
    /// condition but nobody reconfigures (see
    /// [`BenchCluster::run_sim_with_membership`]).
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
        self.run_sim(sim, net, None, slice_passes, passes_max)
    }

    /// [`BenchCluster::run_sim_until_quiescent`] with `membership` driven in
    /// the loop: its manager runs every pass, and each node's agent runs
    /// right after that node's NIC runtime (renewing its lease, reporting
    /// failed sessions as suspects, applying new configurations). The run
    /// ends when every surviving node's client has its outcomes, the
    /// survivors are quiescent and nothing is in flight; [`Self::failed`] is
    /// then the set of crashed nodes and of nodes the membership configured
    /// out.
    ///
    /// # Errors
    /// As [`BenchCluster::run_sim_until_quiescent`].
    pub fn run_sim_with_membership(
        &mut self,
        sim: &mut Sim,
        net: &SimNetwork,
        membership: &mut SimNodesMembership,
        slice_passes: u64,
        passes_max: u64,
    ) -> Result<(), SimError> {
        self.run_sim(sim, net, Some(membership), slice_passes, passes_max)
    }

    fn run_sim(
        &mut self,
        sim: &mut Sim,
        net: &SimNetwork,
        mut membership: Option<&mut SimNodesMembership>,
        slice_passes: u64,
        passes_max: u64,
    ) -> Result<(), SimError> {
        let mut last = Vec::new();
        loop {
            let copying = self.serve_copy_reads();
            let passes = if copying {
                COPY_SLICE_PASSES
            } else {
                slice_passes
            };
            match membership.as_deref_mut() {
                None => sim.run_passes(net, &mut self.components(), passes)?,
                Some(m) => {
                    self.run_slice_with(sim, net, m, passes)?;
                    self.fire_chaos(sim, net, m)?;
                    exit_fenced(sim, net, m);
                    self.restart_due(sim, net, m)?;
                }
            }
            self.restart_nics(sim)?;
            let crashed = crashed_mask(sim);
            // A restarted node's old client never learns its in-flight
            // outcomes: it is left out of the end of the run like a crashed
            // node's (but its data is checked: see below).
            let retired = restarted_mask(sim);
            self.failed = NodeMask(crashed.0 | retired.0);
            // With a membership, a run goes on until every crashed node is
            // configured out (and so recovered from, `is_settled`): a run
            // that ended first would leave a crashed coordinator's
            // transactions undecided at the survivors.
            let mut configured_out = true;
            if let Some(m) = membership.as_deref() {
                // A node the membership configured out (a slow node found
                // silent, say) is no replica any more: it is failed too.
                let all = (1u32 << self.parts.nodes.len()) - 1;
                let live = m.manager.current().live;
                self.failed = NodeMask(self.failed.0 | (all & !live) as u16);
                configured_out = u32::from(crashed.0) & live == 0;
            }
            let done = self.is_quiescent() || self.is_settled(&mut last);
            let restored = match membership.as_deref() {
                Some(m) => self.is_restored(sim, m),
                None => true,
            };
            if net.in_flight() == 0 && configured_out && done && restored {
                self.failed = NodeMask(self.failed.0 & !retired.0);
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

    /// Restarts in place the NIC runtimes whose NIC-only crash is due
    /// ([`Sim::take_nic_crashes`]), each as its next incarnation.
    ///
    /// # Errors
    /// [`SimError::ComponentStopped`] (the node's NIC runtime component) if
    /// a restart is refused.
    fn restart_nics(&mut self, sim: &mut Sim) -> Result<(), SimError> {
        for node in sim.take_nic_crashes() {
            let nic = &mut self.parts.nodes[node as usize].nic;
            let next = nic.incarnation().saturating_add(1);
            if let Err(e) = nic.restart_nic(sim.now(), next) {
                return Err(SimError::ComponentStopped {
                    index: node as usize * COMPONENTS_PER_NODE,
                    now_ns: sim.now(),
                    reason: format!("NIC runtime restart refused: {e}"),
                });
            }
        }
        Ok(())
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
    fn is_settled(&mut self, last: &mut Vec<NicStats>) -> bool {
        if self.failed.is_empty() {
            return false;
        }
        let failed = self.failed;
        let live = |n: usize| !failed.contains(n as NodeId);
        let now: Vec<NicStats> = self
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
        let clients = self.loadgens.iter().enumerate();
        let done = clients.filter(|(n, _)| live(*n)).all(|(_, l)| l.is_done());
        let hosts = self.parts.nodes.iter_mut().enumerate();
        let idle = hosts
            .filter(|(n, _)| live(*n))
            .all(|(_, p)| p.worker.is_quiescent() && !p.nic.recovering());
        done && idle && !moved
    }

    /// After a slice under the chaos mix: a refused NIC restart is the
    /// run's fault; a second crash that came due is done now.
    fn fire_chaos(
        &mut self,
        sim: &mut Sim,
        net: &SimNetwork,
        m: &mut SimNodesMembership,
    ) -> Result<(), SimError> {
        let Some(chaos) = m.chaos.as_mut() else {
            return Ok(());
        };
        let chaos = chaos.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some((node, now_ns, reason)) = chaos.error.take() {
            return Err(SimError::ComponentStopped {
                index: node as usize * COMPONENTS_PER_NODE,
                now_ns,
                reason: format!("NIC runtime restart refused: {reason}"),
            });
        }
        let config = m.manager.current();
        let crashed = u32::from(crashed_mask(sim).0);
        let (nodes, replication) = (self.parts.nodes.len(), self.spec.replication);
        if let Some(victim) = chaos.second_crash(sim.now(), nodes, replication, &config, crashed) {
            sim.crash_now(net, victim);
        }
        Ok(())
    }

    /// One slice of `passes` passes with the membership in the loop: the
    /// components of [`BenchCluster::components`] with each NIC runtime
    /// wrapped with its node's agent, then the manager (owned by no node).
    /// Under the chaos mix the slice ends early when a chaos fault needs
    /// the driver ([`ChaosState::wants_driver`]).
    fn run_slice_with(
        &mut self,
        sim: &mut Sim,
        net: &SimNetwork,
        m: &mut SimNodesMembership,
        passes: u64,
    ) -> Result<(), SimError> {
        let mut wrapped: Vec<NicWithAgent<'_>> = Vec::with_capacity(self.loadgens.len());
        let mut rest: Vec<&mut dyn Component> = Vec::with_capacity(2 * self.loadgens.len());
        let nodes = self.parts.nodes.iter_mut().zip(self.loadgens.iter_mut());
        let agents = m.agents.iter_mut().zip(m.members.iter_mut());
        if m.chaos.is_none() {
            m.chaos = sim.chaos_plan().map(|p| Mutex::new(ChaosState::new(p)));
        }
        let chaos = m.chaos.as_ref();
        for (id, ((node, l), (agent, member))) in nodes.zip(agents).enumerate() {
            wrapped.push(NicWithAgent {
                node: id as NodeId,
                nic: &mut node.nic,
                agent,
                member,
                chaos,
            });
            rest.push(&mut node.worker);
            rest.push(l);
        }
        let mut all: Vec<&mut dyn Component> = Vec::with_capacity(3 * wrapped.len() + 1);
        let mut rest = rest.into_iter();
        for w in wrapped.iter_mut() {
            all.push(w);
            all.extend(rest.by_ref().take(COMPONENTS_PER_NODE - 1));
        }
        all.push(&mut m.manager);
        let mut left = passes;
        let done = |_| {
            let stop = left == 0 || chaos.is_some_and(|c| lock(c).wants_driver());
            left = left.saturating_sub(1);
            stop
        };
        sim.run_until(net, &mut all, done, passes + 1).map(|_| ())
    }

    /// Whether re-replication is over (issue 12): no restart is still
    /// planned, no node is being copied in the manager's configuration (a
    /// restarted node, or a survivor chosen as a shard's new backup: the
    /// replication degree is restored), and if a node restarted, every
    /// node is in the configuration and each restarted node is idle.
    fn is_restored(&mut self, sim: &Sim, m: &SimNodesMembership) -> bool {
        if !sim.planned_restarts().is_empty() {
            return false;
        }
        let c = m.manager.current();
        if (0..self.parts.nodes.len() as NodeId).any(|n| c.is_copying(n)) {
            return false;
        }
        if sim.restarted().is_empty() {
            return true;
        }
        let all = (1u32 << self.parts.nodes.len()) - 1;
        let crashed = u32::from(crashed_mask(sim).0);
        let back = restarted_mask(sim);
        // Every restarted node's last incarnation was admitted (a join put
        // off while its old incarnation was still in is not yet).
        let admitted = back.iter().all(|n| {
            crashed & (1 << n) != 0 || c.incarnation[n as usize] == m.incarnations[n as usize]
        });
        admitted
            && c.live | crashed == all
            && c.copying == 0
            && self.parts.nodes.iter_mut().enumerate().all(|(n, p)| {
                !back.contains(n as NodeId)
                    || (p.worker.is_quiescent() && !p.nic.recovering() && !p.nic.copying())
            })
    }

    /// Takes every snapshot a copy waits for, from its node's host table
    /// (issue 12; see [`NicRuntime::serve_copy_reads`]); returns whether a
    /// copy is under way anywhere.
    fn serve_copy_reads(&mut self) -> bool {
        let mut under_way = false;
        for node in self.parts.nodes.iter_mut() {
            if node.nic.needs_copy_reads() {
                let table = node.worker.table();
                // A shard too large to copy is counted by the runtime; the
                // run then never restores its degree and times out.
                let _ = node
                    .nic
                    .serve_copy_reads(&mut |f: &mut dyn FnMut(_, _, &[u8])| table.for_each(f));
            }
            under_way |= node.nic.copying() || node.nic.sourcing_copies();
        }
        under_way
    }

    /// Restarts the nodes whose restart is due (issue 12): fresh components
    /// of a new incarnation over a fresh endpoint, a fresh membership
    /// handle and agent, and the old client stopped.
    fn restart_due(
        &mut self,
        sim: &mut Sim,
        net: &SimNetwork,
        m: &mut SimNodesMembership,
    ) -> Result<(), SimError> {
        let cfg = sim.config();
        for (node, transport) in sim.take_restarts(net) {
            let n = node as usize;
            // Above every earlier incarnation of the node, its NIC
            // restarts' included (peers drop an older one's packets).
            let incarnation = self.parts.nodes[n]
                .nic
                .incarnation()
                .max(m.incarnations[n])
                .saturating_add(1);
            m.incarnations[n] = incarnation;
            let spec = &self.spec;
            let (d_max, prefetch, cache) = (spec.d_max, spec.dma_prefetch, spec.cache_objects);
            let silence = spec.session_silence_ns;
            let fail = |reason: String| SimError::ComponentStopped {
                index: n * COMPONENTS_PER_NODE,
                now_ns: sim.now(),
                reason,
            };
            let mut parts = super::builder(spec, &self.workload)
                .configure(move |c| {
                    c.table.d_max = d_max;
                    c.dma_prefetch = prefetch;
                    c.cache_objects = cache;
                    if let Some(ns) = silence {
                        c.net.session.silence_ns = ns;
                    }
                    c.net.incarnation = incarnation;
                })
                .build_local_parts(node, Box::new(transport))
                .map_err(|e| fail(format!("restarted node {node} not built: {e}")))?;
            let mut fresh = parts.nodes.pop().expect("one node built");
            // The new process serves nothing until a configuration admits
            // it (chaos list-append seed 107).
            fresh.nic.await_admission();
            if cfg.dma.on {
                let inner = fresh.nic.replace_dma(Box::new(NullDma));
                let seed = (cfg.seed ^ u64::from(incarnation))
                    .wrapping_add((n as u64 + 1).wrapping_mul(0x9E37_79B9));
                fresh
                    .nic
                    .replace_dma(Box::new(SimDma::new(inner, cfg.dma, seed)));
            }
            self.parts.nodes[n] = fresh;
            self.loadgens[n].stop();
            m.members[n] = m
                .manager
                .restart(node, sim.now(), incarnation)
                .map_err(|e| fail(format!("restarted node {node} cannot rejoin: {e}")))?;
            m.agents[n] = MembershipAgent::new(m.renew_ns);
        }
        Ok(())
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

/// Under a restart fault, a node its membership fenced (lease run out, or
/// configured out) exits as the deployed node process does (`splitkv node`
/// fail-stops), and comes back after the mix's seeded restart delay as a new
/// incarnation that rejoins empty — what a supervisor (systemd's
/// `Restart=on-failure`) does for a deployed node. Without a restart fault a
/// fenced node stays out, as before. Before this, a live node fenced by a
/// false suspicion stayed out for good, and chaos seeds beyond the CI range
/// stalled (sim/README "Stalls beyond the CI seeds").
fn exit_fenced(sim: &mut Sim, net: &SimNetwork, m: &SimNodesMembership) {
    if sim.config().nodes.restart_ns_max == 0 {
        return;
    }
    let crashed = crashed_mask(sim);
    for (n, agent) in m.agents.iter().enumerate() {
        let node = n as NodeId;
        if agent.removed().is_some() && !crashed.contains(node) {
            sim.crash_now(net, node);
        }
    }
}

/// The chaos state, shared by one thread's components (a `Mutex` only
/// because components are `Send`; never contended).
fn lock(c: &Mutex<ChaosState>) -> std::sync::MutexGuard<'_, ChaosState> {
    c.lock().unwrap_or_else(|p| p.into_inner())
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

/// The membership of one simulated run (issue 11 "Membership by leases"): the
/// simulated lease manager and, per node, its handle and the agent that
/// connects it to the node's NIC runtime.
#[derive(Debug)]
pub struct SimNodesMembership {
    /// The manager (shared state behind every handle).
    pub manager: SimMembership,
    members: Vec<SimMember>,
    agents: Vec<MembershipAgent>,
    renew_ns: Nanos,
    /// Per node, the incarnation its process last started as (1 at start).
    incarnations: Vec<u32>,
    /// The chaos mix's faults under way, once the run began (shared by the
    /// NIC wrappers of one slice).
    chaos: Option<Mutex<ChaosState>>,
}

impl SimNodesMembership {
    /// A manager over `nodes` nodes with leases of `lease` (its delays
    /// seeded from `lease.seed`), and one agent per node renewing every
    /// [`RENEW_EVERY_NS_DEFAULT`] ns (a quarter of the default lease).
    ///
    /// # Errors
    /// [`LeaseConfigError`] for a lease configuration that cannot work.
    pub fn new(lease: LeaseConfig) -> Result<SimNodesMembership, LeaseConfigError> {
        let manager = SimMembership::new(lease)?;
        let members = (0..lease.nodes as NodeId)
            .map(|n| {
                manager
                    .member(n)
                    .expect("node within the manager's cluster")
            })
            .collect();
        let renew = RENEW_EVERY_NS_DEFAULT.min(lease.lease_ns / 4).max(1);
        let agents = (0..lease.nodes)
            .map(|_| MembershipAgent::new(renew))
            .collect();
        Ok(SimNodesMembership {
            manager,
            members,
            agents,
            renew_ns: renew,
            incarnations: vec![1; lease.nodes],
            chaos: None,
        })
    }

    /// What the chaos mix did so far (`None` under other mixes, or before
    /// the run began).
    pub fn chaos(&self) -> Option<ChaosRecord> {
        self.chaos.as_ref().map(|c| lock(c).record.clone())
    }

    /// The agent of `node` (its counters), if the node exists.
    pub fn agent(&self, node: NodeId) -> Option<&MembershipAgent> {
        self.agents.get(node as usize)
    }
}

/// A node's NIC runtime with its membership agent, polled as one component
/// (so the agent stops when the node crashes).
struct NicWithAgent<'a> {
    node: NodeId,
    nic: &'a mut NicRuntime,
    agent: &'a mut MembershipAgent,
    member: &'a mut SimMember,
    chaos: Option<&'a Mutex<ChaosState>>,
}

impl Component for NicWithAgent<'_> {
    fn run_iteration(&mut self, now: Nanos) -> bool {
        // Fencing (Xenic §4.2.1): a node whose lease ran out, or that was
        // configured out, is polled no more (the agent records why).
        if !self.agent.serving(now) {
            self.agent.run_iteration(now, self.nic, self.member);
            if !self.agent.serving(now) {
                return false;
            }
        }
        if let Some(c) = self.chaos {
            lock(c).before_nic(now, self.node, self.nic);
        }
        let ran = self.nic.run_iteration(now);
        // The agent also reports the end of this node's copy (issue 12).
        let agent = self.agent.run_iteration(now, self.nic, self.member);
        ran | agent
    }

    fn fault(&self) -> Option<String> {
        self.nic.fault().map(str::to_owned)
    }
}
