//! Membership by leases (DESIGN.md "Faults"; Dandelion §4.4, Xenic §4.2.1;
//! FaRM-style leases): every node holds a lease from a configuration
//! manager and renews it; a node whose lease runs out, or that a peer
//! reports as a suspect (its session fell silent) and whose lease then runs
//! out, is left out of the next configuration, whose epoch is one higher.
//! Nodes learn each new configuration and raise their epoch to it
//! ([`crate::NicRuntime::apply_configuration`]), so packets of older epochs
//! are dropped and counted by the sessions.
//!
//! [`Membership`] is the one interface; the simulator implements it with
//! leases in virtual time (`splitkv_sim::membership`), deployed clusters with
//! etcd (`splitkv_host::membership_etcd`). Like every component it is a polled
//! state machine: time is passed in, nothing blocks, sleeps or reads a clock,
//! and a request only queues a message to the manager.

mod configuration;
mod port;

pub use configuration::{Configuration, ShardReplicas};
pub use port::{MembershipPort, RECOVERY_SUSPECTS_MAX};

use crate::placement::NODES_MAX;
use crate::Nanos;
use splitkv_layout::wire::NodeId;
use std::net::SocketAddr;

/// Why a membership request was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MembershipError {
    /// This node is not in the current configuration (its lease ran out or
    /// it was reported failed): it must stop serving and rejoin as a new
    /// incarnation.
    #[error("node {node} is not in configuration epoch {epoch}")]
    Removed {
        /// This node.
        node: NodeId,
        /// The epoch that left it out.
        epoch: u32,
    },
    /// The queue of requests to the manager is full; the request was dropped
    /// (ask again later, as after a lost message).
    #[error("membership request queue full ({max} requests)")]
    Busy {
        /// The bound that was reached.
        max: usize,
    },
    /// This node's lease ran out before a renewal took (FaRM-style lease
    /// fencing, Xenic §4.2.1): the manager may already have configured it
    /// out, so it must stop serving (and rejoin as a new incarnation).
    #[error("node {node}: lease ran out at {lease_until} ns without a renewal")]
    LeaseExpired {
        /// This node.
        node: NodeId,
        /// The end of the lease as the node knew it (the caller's ns).
        lease_until: Nanos,
    },
    /// The node id is outside the cluster.
    #[error("node {node} is outside the cluster of {nodes} nodes")]
    UnknownNode {
        /// The node named.
        node: NodeId,
        /// Nodes in the cluster.
        nodes: usize,
    },
}

/// One node's view of the configuration manager: ask for the configuration,
/// renew the lease, report suspects, learn of new configurations. Every
/// call is non-blocking; `now` is the caller's time (ns).
pub trait Membership {
    /// This node.
    fn node(&self) -> NodeId;

    /// The newest configuration this node knows of.
    fn current(&self) -> Configuration;

    /// Until when (ns) this node's lease is surely valid, as far as it knows
    /// (0 before the first grant): a node whose lease ran out must stop
    /// serving, since the manager may have configured it out.
    fn lease_until(&self) -> Nanos;

    /// Asks the manager to renew this node's lease.
    ///
    /// # Errors
    /// [`MembershipError::Removed`] if this node is known to be out of the
    /// configuration; [`MembershipError::Busy`] if the request was dropped.
    fn renew(&mut self, now: Nanos) -> Result<(), MembershipError>;

    /// Reports `suspect` as failed (its session fell silent): the manager
    /// stops renewing its lease, and once that lease runs out the suspect
    /// is left out of the next configuration.
    ///
    /// # Errors
    /// [`MembershipError::UnknownNode`] for a node outside the cluster;
    /// [`MembershipError::Busy`] if the request was dropped.
    fn report_suspect(&mut self, suspect: NodeId, now: Nanos) -> Result<(), MembershipError>;

    /// A configuration newer than the last one returned, if one arrived by
    /// `now` (the newest, when several did).
    fn poll(&mut self, now: Nanos) -> Option<Configuration>;

    /// Reports that this node, being copied since the configuration of
    /// `epoch`, caught up (re-replication): the manager makes it
    /// a replica (`Configuration::caught_up`) if `epoch` is still current
    /// when the report arrives, and ignores a stale report.
    ///
    /// # Errors
    /// [`MembershipError::Busy`] if the report was dropped (the agent
    /// reports again on its next run); [`MembershipError::Removed`] if this
    /// node is known to be out of the configuration.
    fn report_caught_up(&mut self, epoch: u32, now: Nanos) -> Result<(), MembershipError>;

    /// The data address (IP and port) that node `node`'s incarnation in
    /// [`Membership::current`] published with its registration, if it
    /// published one (a replacement machine: a new machine that replaces a dead
    /// node sends and receives at another address than the node's first
    /// process). `None` (the default) for a membership that carries no
    /// addresses, such as the simulator's: every node then keeps the address
    /// its transport was built with.
    fn data_address(&self, node: NodeId) -> Option<SocketAddr> {
        let _ = node;
        None
    }
}

/// Default interval between lease renewals (ns): a quarter of the
/// simulated manager's default lease, so three renewals may be lost before
/// the lease runs out.
pub const RENEW_EVERY_NS_DEFAULT: Nanos = 2_500_000;

/// Counters of a [`MembershipAgent`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentStats {
    /// Renewals asked for.
    pub renewals: u64,
    /// Suspects reported (peers whose sessions failed, and nodes recovery
    /// found silent during an epoch change).
    pub suspects_reported: u64,
    /// New configurations applied to the runtime.
    pub configurations: u64,
    /// Requests the membership refused ([`MembershipError`]).
    pub refused: u64,
    /// Times the agent stopped the node because its lease ran out (0 or 1).
    pub lease_expired: u64,
    /// Caught-up reports the membership took (re-replication).
    pub caught_up_reported: u64,
    /// Peers whose data address a new configuration moved: the transport
    /// was re-pointed before the configuration was applied (replacement machines).
    pub peers_repointed: u64,
    /// Published data addresses the transport refused
    /// ([`crate::net::PeerAddressError`]: no addresses, another family, an
    /// address another node has); the peer keeps its address.
    pub peer_addresses_refused: u64,
}

/// Connects one node's NIC runtime, through the narrow [`MembershipPort`]
/// (drivers pass `&mut NicRuntime`), to its [`Membership`]: renews
/// the lease every `renew_every_ns`, reports each peer its sessions declared
/// failed as a suspect, and applies every new configuration
/// ([`MembershipPort::apply_configuration`]: epoch, failed peers),
/// first re-pointing the transport at each member's published data address
/// ([`Membership::data_address`], [`MembershipPort::set_peer_address`];
/// a replacement machine), so the configuration's first packets
/// to a node's new incarnation already go to its new machine. A
/// polled state machine like the runtime; the driver calls
/// [`MembershipAgent::run_iteration`] next to the runtime's.
///
/// **Fencing** (Xenic §4.2.1, FaRM leases; DESIGN.md "Faults"): once the
/// lease was granted, the agent stops the node when `now` reaches
/// [`Membership::lease_until`] (the node's own, conservative view of its
/// lease), when a configuration leaves it out, or when the membership
/// refuses a renewal as [`MembershipError::Removed`]; it then renews and
/// applies nothing more. The driver must stop polling the runtime as soon
/// as [`MembershipAgent::serving`] is false: it may check that every pass
/// (a comparison) and run the agent itself less often, since the lease the
/// node believes in already ends a guard before the manager's.
#[derive(Debug)]
pub struct MembershipAgent {
    renew_every_ns: Nanos,
    next_renew: Nanos,
    events: Vec<crate::net::session::SessionEvent>,
    /// Nodes the runtime's recovery suspects (silent during an epoch change).
    suspects: Vec<NodeId>,
    removed: Option<MembershipError>,
    /// [`Membership::lease_until`] when last read (0: no grant yet).
    lease_until: Nanos,
    /// Whether a lease was ever granted (fencing applies from then on).
    granted: bool,
    /// The epoch of a caught-up report the membership has not taken yet
    /// (reported again on the next run).
    caught_up: Option<u32>,
    stats: AgentStats,
}

impl MembershipAgent {
    /// An agent renewing every `renew_every_ns` (at least 1 ns).
    pub fn new(renew_every_ns: Nanos) -> MembershipAgent {
        MembershipAgent {
            renew_every_ns: renew_every_ns.max(1),
            next_renew: 0,
            events: Vec::with_capacity(crate::net::session::SESSION_EVENTS_MAX),
            suspects: Vec::with_capacity(RECOVERY_SUSPECTS_MAX),
            removed: None,
            lease_until: 0,
            granted: false,
            caught_up: None,
            stats: AgentStats::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> AgentStats {
        self.stats
    }

    /// Why this node stopped, once it must stop serving: a configuration
    /// or the membership left it out ([`MembershipError::Removed`]), or its
    /// lease ran out ([`MembershipError::LeaseExpired`]).
    pub fn removed(&self) -> Option<&MembershipError> {
        self.removed.as_ref()
    }

    /// The end of this node's lease (ns) as last read from the membership
    /// (0 before the first grant).
    pub fn lease_until(&self) -> Nanos {
        self.lease_until
    }

    /// Whether the node may serve at `now`: not stopped, and (once a lease
    /// was granted) `now` is before the lease's end as last read. A
    /// comparison, cheap enough for every pass of a polling loop.
    pub fn serving(&self, now: Nanos) -> bool {
        self.removed.is_none() && !(self.granted && now >= self.lease_until)
    }

    /// Renews when due, reports new suspects, applies a new configuration,
    /// reports the end of this node's copy ([`MembershipPort::take_caught_up`],
    /// again after a refusal), and stops the node when its lease has run
    /// out (see the type's docs). Returns whether it did anything besides
    /// the caught-up report. Once stopped it does nothing.
    pub fn run_iteration(
        &mut self,
        now: Nanos,
        nic: &mut dyn MembershipPort,
        m: &mut dyn Membership,
    ) -> bool {
        if self.removed.is_some() {
            return false;
        }
        if self.fence(now, m) {
            return true;
        }
        let mut work = false;
        if now >= self.next_renew {
            self.next_renew = now.saturating_add(self.renew_every_ns);
            self.stats.renewals += 1;
            work = true;
            self.note(m.renew(now));
        }
        work |= self.report_suspects(now, nic, m);
        if let Some(c) = m.poll(now) {
            self.stats.configurations += 1;
            work = true;
            self.repoint_peers(&c, nic, m);
            nic.apply_configuration(&c);
            if !c.contains(m.node()) {
                self.removed = Some(MembershipError::Removed {
                    node: m.node(),
                    epoch: c.epoch,
                });
            }
        }
        self.report_caught_up(now, nic, m);
        // A grant may have arrived meanwhile: keep the newest lease end.
        work | self.fence(now, m)
    }

    /// Forwards the end of this node's copy to the membership; keeps it for
    /// the next run if the membership did not take it.
    fn report_caught_up(
        &mut self,
        now: Nanos,
        nic: &mut dyn MembershipPort,
        m: &mut dyn Membership,
    ) {
        let Some(epoch) = nic.take_caught_up().or(self.caught_up) else {
            return;
        };
        let r = m.report_caught_up(epoch, now);
        self.caught_up = r.is_err().then_some(epoch);
        match r {
            Ok(()) => self.stats.caught_up_reported += 1,
            Err(e) => self.note(Err(e)),
        }
    }

    /// Points the transport at the data address each other member of `c`
    /// published (where the membership knows one); an unchanged address
    /// is no work.
    fn repoint_peers(
        &mut self,
        c: &Configuration,
        nic: &mut dyn MembershipPort,
        m: &mut dyn Membership,
    ) {
        let me = m.node();
        for n in (0..NODES_MAX as NodeId).filter(|&n| n != me && c.contains(n)) {
            let Some(addr) = m.data_address(n) else {
                continue;
            };
            match nic.set_peer_address(n, addr) {
                Ok(true) => self.stats.peers_repointed += 1,
                Ok(false) => {}
                Err(_) => self.stats.peer_addresses_refused += 1,
            }
        }
    }

    /// Reads the lease's end; stops the node (returns true) if it ran out.
    fn fence(&mut self, now: Nanos, m: &dyn Membership) -> bool {
        self.lease_until = m.lease_until();
        self.granted |= self.lease_until > 0;
        if self.removed.is_some() || !self.granted || now < self.lease_until {
            return false;
        }
        self.stats.lease_expired += 1;
        self.removed = Some(MembershipError::LeaseExpired {
            node: m.node(),
            lease_until: self.lease_until,
        });
        true
    }

    /// Reports the peers the sessions declared failed and the nodes
    /// recovery suspects.
    fn report_suspects(
        &mut self,
        now: Nanos,
        nic: &mut dyn MembershipPort,
        m: &mut dyn Membership,
    ) -> bool {
        let mut work = false;
        nic.drain_session_events(&mut self.events);
        for i in 0..self.events.len() {
            let crate::net::session::SessionEvent::PeerFailed { node } = self.events[i];
            self.stats.suspects_reported += 1;
            work = true;
            self.note(m.report_suspect(node, now));
        }
        self.events.clear();
        nic.drain_recovery_suspects(&mut self.suspects);
        for i in 0..self.suspects.len() {
            self.stats.suspects_reported += 1;
            work = true;
            self.note(m.report_suspect(self.suspects[i], now));
        }
        self.suspects.clear();
        work
    }

    fn note(&mut self, r: Result<(), MembershipError>) {
        if let Err(e) = r {
            self.stats.refused += 1;
            if matches!(
                e,
                MembershipError::Removed { .. } | MembershipError::LeaseExpired { .. }
            ) {
                self.removed = Some(e);
            }
        }
    }
}
