//! A node's membership on the polling thread that runs its NIC runtime
//! (etcd membership; DESIGN.md "Faults"): the
//! [`MembershipAgent`] runs next to the runtime, as the simulator runs it
//! (`splitkv_bench::cluster::sim`), so a deployed node renews its lease,
//! reports the peers its sessions declared failed, applies each new
//! configuration (epoch, recovery, promotion: Xenic §4.2.1, Dandelion §4.4)
//! and is fenced by its lease from the same loop.
//!
//! - **Cadence.** The agent runs every [`AGENT_EVERY_NS_DEFAULT`] of the
//!   loop's clock, not every pass (a membership call may take a lock); the
//!   lease check ([`MembershipAgent::serving`]) is a comparison made every
//!   pass, before the runtime is polled.
//! - **Fencing.** Once the agent says the node may not serve (its lease ran
//!   out, or a configuration left it out) the runtime is polled no more: it
//!   neither answers nor sends from that pass on, and the cluster's threads
//!   stop with [`ClusterError::Fenced`](super::ClusterError::Fenced). The
//!   lease the node believes in ends a guard before the manager's
//!   (`splitkv_host::membership_etcd::LEASE_GUARD_NS`, far above a pass),
//!   so it stops before anyone may promote its backups.
//! - **Clocks.** A membership counts time from an origin of its own (a node
//!   process takes its lease before any workload, hence before the
//!   cluster's clock starts). [`NodeMembership`] keeps that origin and
//!   shifts every `now` it passes, and every lease end it reads, between
//!   the two clocks, so the agent compares times of one clock.

use splitkv_layout::wire::NodeId;
use splitkv_nic::membership::{
    AgentStats, Configuration, Membership, MembershipAgent, MembershipError,
};
use splitkv_nic::{Nanos, NicRuntime};
use std::time::Instant;

/// How often (ns of the polling loop's clock) the agent of a node runs
/// beside its NIC runtime: renewals, suspects and configurations are
/// taken at most this late (small against leases of seconds, or of the
/// simulator's 10 ms).
pub const AGENT_EVERY_NS_DEFAULT: Nanos = 100_000;

/// A node's [`Membership`] and the [`MembershipAgent`] that connects it to
/// the node's NIC runtime, handed to the cluster
/// ([`ClusterParts::set_membership`](super::ClusterParts::set_membership))
/// and moved with the runtime onto its polling thread.
pub struct NodeMembership {
    member: Box<dyn Membership + Send>,
    /// The instant the membership's `now` counts from.
    member_origin: Instant,
    /// Member's time minus the cluster's (ns), set when the threads start.
    shift_ns: i128,
    agent: MembershipAgent,
    agent_every_ns: Nanos,
    next_agent_ns: Nanos,
    /// When the agent last installed a new epoch in the runtime (ns of the
    /// cluster's clock; 0: never).
    epoch_installed_ns: Nanos,
}

impl std::fmt::Debug for NodeMembership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeMembership")
            .field("node", &self.member.node())
            .field("agent", &self.agent)
            .finish_non_exhaustive()
    }
}

/// What a node's membership looked like when its polling thread last
/// published ([`NodeStats::membership`](super::NodeStats::membership)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MembershipView {
    /// The newest configuration the membership knows of.
    pub current: Configuration,
    /// The end of the lease (ns of the cluster's clock; 0: none).
    pub lease_until_ns: Nanos,
    /// The agent's counters.
    pub agent: AgentStats,
    /// Why the node stopped serving, once it did (fencing).
    pub stopped: Option<MembershipError>,
    /// When the agent last installed a configuration of a new epoch in the
    /// node's runtime (ns of the cluster's clock; 0: never since the
    /// threads started), the epoch being the runtime's
    /// ([`NodeStats::epoch`](super::NodeStats::epoch)).
    pub epoch_installed_ns: Nanos,
}

impl NodeMembership {
    /// `member`, whose `now` counts nanoseconds from `member_origin`, with
    /// an agent renewing every `renew_every_ns` and run every
    /// [`AGENT_EVERY_NS_DEFAULT`].
    pub fn new(
        member: Box<dyn Membership + Send>,
        member_origin: Instant,
        renew_every_ns: Nanos,
    ) -> NodeMembership {
        NodeMembership {
            member,
            member_origin,
            shift_ns: 0,
            agent: MembershipAgent::new(renew_every_ns),
            agent_every_ns: AGENT_EVERY_NS_DEFAULT,
            next_agent_ns: 0,
            epoch_installed_ns: 0,
        }
    }

    /// The node.
    pub fn node(&self) -> NodeId {
        self.member.node()
    }

    /// The agent (its counters, and why the node stopped).
    pub fn agent(&self) -> &MembershipAgent {
        &self.agent
    }

    /// The view published with the node's counters.
    pub fn view(&self) -> MembershipView {
        MembershipView {
            current: self.member.current(),
            lease_until_ns: self.agent.lease_until(),
            agent: self.agent.stats(),
            stopped: self.agent.removed().copied(),
            epoch_installed_ns: self.epoch_installed_ns,
        }
    }

    /// Why the node stopped serving, once it did.
    pub fn stopped(&self) -> Option<&MembershipError> {
        self.agent.removed()
    }

    /// Sets the shift between the membership's clock and the cluster's,
    /// whose `now` counts from `cluster_origin` (called when the polling
    /// threads start; the origins never change after).
    pub(crate) fn set_cluster_origin(&mut self, cluster_origin: Instant) {
        self.shift_ns = signed_ns_between(self.member_origin, cluster_origin);
    }

    /// One pass at `now` (cluster clock): the lease check, the runtime if
    /// the node may serve, the agent when due. Returns whether anything
    /// did work. A fenced node's runtime is not polled.
    pub(crate) fn run_with(&mut self, now: Nanos, nic: &mut NicRuntime) -> bool {
        if !self.agent.serving(now) {
            // Past the lease as last read: let the agent read it again (a
            // grant may have come) and record why it stops otherwise.
            self.run_agent(now, nic);
            if !self.agent.serving(now) {
                return false;
            }
        }
        let mut work = nic.run_iteration(now);
        if now >= self.next_agent_ns {
            self.next_agent_ns = now.saturating_add(self.agent_every_ns);
            work |= self.run_agent(now, nic);
        }
        work
    }

    fn run_agent(&mut self, now: Nanos, nic: &mut NicRuntime) -> bool {
        let mut shifted = Shifted {
            inner: self.member.as_mut(),
            shift_ns: self.shift_ns,
        };
        let epoch = nic.epoch();
        let work = self.agent.run_iteration(now, nic, &mut shifted);
        if nic.epoch() != epoch {
            self.epoch_installed_ns = now;
        }
        work
    }
}

/// `to - from` in nanoseconds, signed.
fn signed_ns_between(from: Instant, to: Instant) -> i128 {
    match to.checked_duration_since(from) {
        Some(d) => d.as_nanos() as i128,
        None => -(from.duration_since(to).as_nanos() as i128),
    }
}

/// A membership seen through the cluster's clock: `now` is shifted into
/// the membership's clock on the way in, lease ends back on the way out
/// (0 and `Nanos::MAX` keep their meaning).
struct Shifted<'a> {
    inner: &'a mut (dyn Membership + Send),
    /// Membership time minus cluster time (ns).
    shift_ns: i128,
}

impl Shifted<'_> {
    fn to_member(&self, now: Nanos) -> Nanos {
        clamp(now as i128 + self.shift_ns)
    }
}

fn clamp(t: i128) -> Nanos {
    t.clamp(0, Nanos::MAX as i128) as Nanos
}

impl Membership for Shifted<'_> {
    fn node(&self) -> NodeId {
        self.inner.node()
    }

    fn current(&self) -> Configuration {
        self.inner.current()
    }

    fn lease_until(&self) -> Nanos {
        match self.inner.lease_until() {
            0 => 0,
            Nanos::MAX => Nanos::MAX,
            // A lease that ended before the cluster's clock began ended at 0
            // of it, but is still a lease (1, not "no grant").
            t => clamp(t as i128 - self.shift_ns).max(1),
        }
    }

    fn renew(&mut self, now: Nanos) -> Result<(), MembershipError> {
        let t = self.to_member(now);
        self.inner.renew(t)
    }

    fn report_suspect(&mut self, suspect: NodeId, now: Nanos) -> Result<(), MembershipError> {
        let t = self.to_member(now);
        self.inner.report_suspect(suspect, t)
    }

    fn poll(&mut self, now: Nanos) -> Option<Configuration> {
        let t = self.to_member(now);
        self.inner.poll(t)
    }

    fn report_caught_up(&mut self, epoch: u32, now: Nanos) -> Result<(), MembershipError> {
        let t = self.to_member(now);
        self.inner.report_caught_up(epoch, t)
    }

    fn data_address(&self, node: NodeId) -> Option<std::net::SocketAddr> {
        self.inner.data_address(node)
    }
}
