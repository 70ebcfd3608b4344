//! The membership of a simulated run: the simulated lease manager, and per
//! node its handle and the agent that connects it to the node's NIC runtime,
//! polled with that runtime as one component (so a crashed node's agent
//! stops with it); and one slice of the run with them in the loop.

use super::chaos_trigger::ChaosState;
use super::{ChaosRecord, COMPONENTS_PER_NODE};
use crate::membership::{LeaseConfig, LeaseConfigError, SimMember, SimMembership};
use crate::{Sim, SimError, SimNetwork};
use splitkv_bench::{BenchCluster, Workload};
use splitkv_layout::wire::NodeId;
use splitkv_nic::membership::{MembershipAgent, RENEW_EVERY_NS_DEFAULT};
use splitkv_nic::{Component, Nanos, NicRuntime};
use std::sync::Mutex;

/// The membership of one simulated run (membership by leases): the
/// simulated lease manager and, per node, its handle and the agent that
/// connects it to the node's NIC runtime.
#[derive(Debug)]
pub struct SimNodesMembership {
    /// The manager (shared state behind every handle).
    pub manager: SimMembership,
    pub(super) members: Vec<SimMember>,
    pub(super) agents: Vec<MembershipAgent>,
    pub(super) renew_ns: Nanos,
    /// Per node, the incarnation its process last started as (1 at start).
    pub(super) incarnations: Vec<u32>,
    /// The chaos mix's faults under way, once the run began (shared by the
    /// NIC wrappers of one slice).
    pub(super) chaos: Option<Mutex<ChaosState>>,
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

/// One slice of `passes` passes with the membership in the loop: the
/// components of [`BenchCluster::components`] with each NIC runtime
/// wrapped with its node's agent, then the manager (owned by no node).
/// Under the chaos mix the slice ends early when a chaos fault needs
/// the driver ([`ChaosState::wants_driver`]).
pub(super) fn run_slice_with<W: Workload>(
    cluster: &mut BenchCluster<W>,
    sim: &mut Sim,
    net: &SimNetwork,
    m: &mut SimNodesMembership,
    passes: u64,
) -> Result<(), SimError> {
    let mut wrapped: Vec<NicWithAgent<'_>> = Vec::with_capacity(cluster.loadgens.len());
    let mut rest: Vec<&mut dyn Component> = Vec::with_capacity(2 * cluster.loadgens.len());
    let nodes = cluster
        .parts
        .nodes
        .iter_mut()
        .zip(cluster.loadgens.iter_mut());
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

/// The chaos state, shared by one thread's components (a `Mutex` only
/// because components are `Send`; never contended).
fn lock(c: &Mutex<ChaosState>) -> std::sync::MutexGuard<'_, ChaosState> {
    c.lock().unwrap_or_else(|p| p.into_inner())
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
        // The agent also reports the end of this node's copy (re-replication).
        let agent = self.agent.run_iteration(now, self.nic, self.member);
        ran | agent
    }

    fn fault(&self) -> Option<String> {
        self.nic.fault().map(str::to_owned)
    }
}
