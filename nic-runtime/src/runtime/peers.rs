//! The runtime's side of membership (`crate::membership`): its
//! epoch, new configurations (which exclude nodes and begin recovery
//! epochs), and the sessions' suspicions, passed to the coordinator and on
//! to the membership.

use super::{NicRuntime, SESSION_EVENTS_MAX};
use crate::membership::{Configuration, MembershipPort};
use crate::net::session::SessionEvent;
use crate::net::PeerAddressError;
use splitkv_layout::wire::{NodeId, NodeMask};
use std::net::SocketAddr;

/// The membership agent's narrow view of this runtime: each operation is
/// the inherent method of the same name.
impl MembershipPort for NicRuntime {
    fn drain_session_events(&mut self, out: &mut Vec<SessionEvent>) {
        NicRuntime::drain_session_events(self, out)
    }

    fn drain_recovery_suspects(&mut self, out: &mut Vec<NodeId>) {
        NicRuntime::drain_recovery_suspects(self, out)
    }

    fn set_peer_address(
        &mut self,
        node: NodeId,
        addr: SocketAddr,
    ) -> Result<bool, PeerAddressError> {
        NicRuntime::set_peer_address(self, node, addr)
    }

    fn apply_configuration(&mut self, config: &Configuration) {
        NicRuntime::apply_configuration(self, config)
    }

    fn take_caught_up(&mut self) -> Option<u32> {
        NicRuntime::take_caught_up(self)
    }
}

impl NicRuntime {
    /// Moves the session events raised so far (peers declared failed after
    /// silence) into `out`, oldest first, for the membership layer (to
    /// report suspects, [`crate::membership::Membership::report_suspect`]).
    /// The coordinator has already acted on each, in the iteration that
    /// raised it.
    pub fn drain_session_events(&mut self, out: &mut Vec<SessionEvent>) {
        self.take_session_events();
        out.append(&mut self.events);
    }

    /// Raises this node's membership epoch: stamped on every packet sent,
    /// and packets of older epochs are dropped from now on.
    pub fn set_epoch(&mut self, epoch: u32) {
        self.io.net.set_epoch(epoch);
    }

    /// This node's membership epoch.
    pub fn epoch(&self) -> u32 {
        self.io.net.epoch()
    }

    /// Takes a new configuration ([`crate::membership`]): raises the epoch
    /// to its epoch (older-epoch packets are dropped and counted from now
    /// on), and the coordinator treats the nodes outside it as failed
    /// (their transactions end by the deadline rules at once).
    ///
    /// A configuration with failed nodes also begins a recovery epoch
    /// ([`crate::recovery`]): the node starts no new transaction until the
    /// recovery leader's `Resume`; its timeouts count from the time of the
    /// last iteration. When the recovery epoch cannot begin (the epoch is not
    /// newer than the last recovered one, this node is in the failed set)
    /// the epoch and failed peers are taken all the same, the node is not
    /// paused, and the refusal is counted
    /// ([`RecoveryRuntimeStats::begin_refused`](crate::runtime::RecoveryRuntimeStats::begin_refused)) and kept
    /// ([`NicRuntime::recovery_refusal`]).
    pub fn apply_configuration(&mut self, config: &Configuration) {
        self.admit_if(config);
        self.set_epoch(config.epoch);
        // Every member is at least the incarnation the configuration names:
        // restarted peers rejoining are addressed as their new
        // process from now on (their sessions renewed).
        for n in 0..self.io.placement.nodes() {
            self.io.net.raise_floor(n as u16, config.incarnation[n]);
        }
        self.coordinator
            .set_live(&mut self.io, &self.procedures, config.live);
        self.restart.peers_excluded(config.live);
        let all = (1u32 << self.io.placement.nodes()) - 1;
        let failed = NodeMask((all & !config.live) as u16);
        // A copying node is a new incarnation (rejoin): whatever its old
        // one coordinated is orphaned like a failed coordinator's, even when
        // this node never applied the configuration that left it out (a
        // node takes only the newest of several configurations).
        let orphaned = NodeMask(failed.0 | (config.copying & all) as u16);
        if !orphaned.is_empty() {
            self.server
                .release_orphan_locks(&mut self.index, orphaned.0 as u32);
        }
        let local = self.local_evidence();
        self.recovery_refusal = self
            .recovery
            .begin(self.io.now, config, failed, local)
            .err();
        if self.recovery.paused() {
            // Taken with the evidence, before any host read completes: a
            // Lock that gets its record later would be in no evidence.
            self.server.drop_unrecorded_dnl_locks(&mut self.index);
            self.actions.last_begun_ns = self.io.now;
            // A new configuration abandons every copy (re-replication); the
            // epoch's Resume begins them again.
            self.copies.abandon();
        } else if self.recovery_refusal.is_none() && config.epoch > self.copies.epoch() {
            // A newer epoch without a recovery epoch (same members and
            // order): packets of the old one are dropped from now on, so
            // the copies begin again at once, in the new epoch.
            let view = *self.recovery.machine().view();
            self.copies.restart(config.epoch, &view);
        }
    }

    /// Sends node `node`'s packets to data address `addr` from now on (issue
    /// 12: a new machine replaced it; [`crate::net::Transport::set_peer_address`]).
    /// Called on the thread that polls this runtime, by the membership
    /// agent, before it applies the configuration that admits the node's
    /// new incarnation. Returns whether the address changed.
    ///
    /// # Errors
    /// The transport's [`PeerAddressError`] (no addresses, an unknown node,
    /// another family, an address another node has); nothing changes.
    pub fn set_peer_address(
        &mut self,
        node: NodeId,
        addr: SocketAddr,
    ) -> Result<bool, PeerAddressError> {
        self.transport.set_peer_address(node, addr)
    }

    /// The nodes the coordinator counts as failed (a mask by node id).
    pub fn failed_peers(&self) -> u32 {
        self.coordinator.failed_peers()
    }

    /// Feeds the sessions' new events to the coordinator (a failed peer ends
    /// the phases waiting on it at once) and keeps them, at most
    /// [`SESSION_EVENTS_MAX`], for [`NicRuntime::drain_session_events`].
    /// Returns whether any event came.
    fn take_session_events(&mut self) -> bool {
        self.io.net.drain_events(&mut self.events_fresh);
        let any = !self.events_fresh.is_empty();
        // During recovery the coordinator's transactions wait for its
        // decisions (see `watch_peers`); the membership still hears.
        let frozen = self.recovery.paused();
        for ev in self.events_fresh.drain(..) {
            let SessionEvent::PeerFailed { node } = ev;
            if !frozen {
                self.coordinator
                    .on_peer_failed(&mut self.io, &self.procedures, node);
            }
            if self.events.len() < SESSION_EVENTS_MAX {
                self.events.push(ev);
            } else {
                self.events_dropped += 1;
            }
        }
        any
    }

    /// Peers whose session was renewed for a newer incarnation
    /// ([`crate::net::session::incarnation`]): what was in flight to their
    /// old process is lost, so recovery sends its step's messages again
    /// ([`crate::recovery::Recovery::resend_to`]), a rebuild asks them again,
    /// and copies to them begin again from a new snapshot. (Transactions
    /// end by the coordinator's deadline rules, or the peer's rebuild
    /// answers them.) Returns whether any was renewed.
    pub(super) fn take_renewed_sessions(&mut self) -> bool {
        let renewed = self.io.net.take_renewed();
        if renewed == 0 {
            return false;
        }
        self.recovery.peers_renewed(renewed);
        self.restart.peers_renewed(renewed);
        self.copies.restart_streams(NodeMask(renewed as u16));
        true
    }

    /// Failed peers and overdue phases end the transactions they hold up
    /// (see [`crate::protocol::coordinator`]'s `deadline` module). Not
    /// during a recovery epoch: the transactions in flight were reported as
    /// evidence and end by recovery's decisions, so the coordinator takes no
    /// step of its own on them (nor any response: `Handlers::message`).
    pub(super) fn watch_peers(&mut self) -> bool {
        let mut work = self.take_session_events();
        if !self.recovery.paused() {
            self.coordinator
                .check_deadlines(&mut self.io, &self.procedures);
        }
        // Single-key calls end by their own deadlines, recovery or not:
        // ending one is never wrong (`protocol/single_key.rs`).
        let failed = self.coordinator.failed_peers();
        work |= self
            .single
            .check_deadlines(&self.io, &mut self.coordinator, failed);
        work
    }
}
