//! The narrow interface through which the membership agent reaches a
//! node's NIC runtime ([`MembershipPort`]): five operations, up (what the
//! runtime saw) and down (what the membership decided). The agent depends
//! on nothing else of the runtime, so the lease and the agent can stay in
//! the host process when the NIC runtime runs as a process of its own (a
//! port over host shared memory then implements this trait).

use super::Configuration;
use crate::net::session::SessionEvent;
use crate::net::PeerAddressError;
use splitkv_layout::wire::NodeId;
use std::net::SocketAddr;

/// Most suspicions a NIC runtime keeps for the membership until drained
/// ([`MembershipPort::drain_recovery_suspects`]); more are dropped and
/// counted (`RecoveryRuntimeStats::suspects_dropped`).
pub const RECOVERY_SUSPECTS_MAX: usize = 64;

/// What the membership agent ([`super::MembershipAgent`]) asks of a NIC
/// runtime, in the order it asks each iteration: drain the session events
/// and the recovery suspects (up), re-point peers and apply a new
/// configuration (down), take the end of this node's copy (up).
/// [`crate::NicRuntime`] implements it; drivers pass `&mut NicRuntime`.
pub trait MembershipPort {
    /// Moves the session events raised so far (peers declared failed after
    /// silence, at most [`SESSION_EVENTS_MAX`](crate::net::session::SESSION_EVENTS_MAX)
    /// kept) into `out`, oldest first.
    fn drain_session_events(&mut self, out: &mut Vec<SessionEvent>);

    /// Moves the nodes recovery suspects (silent during an epoch change, at
    /// most [`RECOVERY_SUSPECTS_MAX`] kept) into `out`.
    fn drain_recovery_suspects(&mut self, out: &mut Vec<NodeId>);

    /// Sends node `node`'s packets to data address `addr` from now on;
    /// returns whether the address changed.
    ///
    /// # Errors
    /// [`PeerAddressError`] from the transport; nothing changes.
    fn set_peer_address(
        &mut self,
        node: NodeId,
        addr: SocketAddr,
    ) -> Result<bool, PeerAddressError>;

    /// Takes a new configuration: epoch, failed peers, the placement it
    /// serves, recovery epochs and admission (see
    /// [`crate::NicRuntime::apply_configuration`]).
    fn apply_configuration(&mut self, config: &Configuration);

    /// The epoch in which this node, being copied, got every shard it
    /// joins, once (then `None`).
    fn take_caught_up(&mut self) -> Option<u32>;
}
