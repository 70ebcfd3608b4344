//! The set-up of one accepted application socket (L5 §III-B), as a plain
//! function: [`attach()`]. In order, each step bounded by
//! [`AttachPolicy::handshake_timeout`] in total:
//!
//! 1. the peer's user id (`SO_PEERCRED`) must be allowed, else
//!    `Refused(UserNotAllowed)`;
//! 2. a connection place must be free (`connections_max`), else
//!    `Refused(ConnectionsFull)`;
//! 3. the Hello is read (its length checked against `HANDSHAKE_BYTES_MAX`
//!    before the rest is read) and decoded: another layout version is
//!    `Refused(VersionMismatch)`; garbage, an oversized message, or ring
//!    capacities over the node's configured sizes are `Refused(BadHello)`.
//!    The in-flight ask is granted up to the node's `in_flight_max`;
//! 4. the descriptor is received and mapped only after its seals and its
//!    size (exactly the layout's) are checked; then the ring headers the
//!    client wrote must carry the magic, the Hello's capacities, and empty
//!    indices, and the doorbells must fit. Any failure, or no descriptor, is
//!    `Refused(BadMemory)`;
//! 5. the node answers with a Welcome (its limits, the procedure ids).
//!
//! A client that closes or stalls mid-handshake is dropped without answer.

use super::{ConnectionSlots, DropReason, Slot};
use crate::deploy::config::ClientSettings;
use splitkv_client::handshake_io::{read_frame, write_frame, FrameError};
use splitkv_client::{
    peer_credentials, recv_fd, Doorbell, FdPassError, PeerCredentials, SharedMemory,
};
use splitkv_layout::app::{
    AppLimits, AppMemoryLayout, HandshakeError, HandshakeMsg, Hello, Refused, RefusedReason,
    Welcome,
};
use splitkv_layout::host_nic::{ARGS_BYTES_MAX, RESULT_BYTES_MAX};
use splitkv_layout::ring::{RingConsumer, RingError, RingProducer};
use splitkv_layout::VALUE_BYTES_MAX;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Default bound on one connection's whole set-up, ms.
pub const HANDSHAKE_MS_DEFAULT: u64 = 2_000;

/// Resolves a registered procedure's name to its id (`None`: unknown).
pub type ProcedureResolver = Arc<dyn Fn(&str) -> Option<u32> + Send + Sync>;

/// What a node accepts from a connecting client.
#[derive(Clone)]
pub struct AttachPolicy {
    /// The node's id, sent in the Welcome.
    pub node_id: u16,
    /// User ids allowed to connect (already resolved: `allowed_uids`, or the
    /// node process's own user).
    pub allowed_uids: Vec<u32>,
    /// Largest request ring a client may bring (data-area bytes).
    pub request_ring_bytes_max: usize,
    /// Largest outcome ring a client may bring (data-area bytes).
    pub outcome_ring_bytes_max: usize,
    /// Most requests in flight granted per connection.
    pub in_flight_max: u32,
    /// Bound on one connection's whole set-up.
    pub handshake_timeout: Duration,
    /// Resolves the procedure names of a Hello.
    pub resolve: ProcedureResolver,
}

impl std::fmt::Debug for AttachPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttachPolicy")
            .field("node_id", &self.node_id)
            .field("allowed_uids", &self.allowed_uids)
            .field("request_ring_bytes_max", &self.request_ring_bytes_max)
            .field("outcome_ring_bytes_max", &self.outcome_ring_bytes_max)
            .field("in_flight_max", &self.in_flight_max)
            .field("handshake_timeout", &self.handshake_timeout)
            .finish_non_exhaustive()
    }
}

impl AttachPolicy {
    /// The policy of node `node_id` under `[clients]` `settings`: the
    /// configured ring sizes are the largest a client may bring (any power
    /// of two from the minimum up to them is accepted); `allowed_uids`
    /// unset means the node process's own (effective) user, which is what
    /// `SO_PEERCRED` reports of a peer; a set-up bound of
    /// [`HANDSHAKE_MS_DEFAULT`].
    pub fn from_settings(
        settings: &ClientSettings,
        node_id: u16,
        resolve: ProcedureResolver,
    ) -> Self {
        AttachPolicy {
            node_id,
            allowed_uids: settings
                .allowed_uids
                .clone()
                .unwrap_or_else(|| vec![rustix::process::geteuid().as_raw()]),
            request_ring_bytes_max: settings.request_ring_bytes,
            outcome_ring_bytes_max: settings.outcome_ring_bytes,
            in_flight_max: settings.in_flight_max.min(u32::MAX as usize) as u32,
            handshake_timeout: Duration::from_millis(HANDSHAKE_MS_DEFAULT),
            resolve,
        }
    }

    fn limits(&self, asked: u32) -> AppLimits {
        AppLimits {
            in_flight_max: asked.min(self.in_flight_max).max(1),
            value_bytes_max: VALUE_BYTES_MAX as u32,
            args_bytes_max: ARGS_BYTES_MAX as u32,
            result_bytes_max: RESULT_BYTES_MAX as u32,
        }
    }
}

/// Why a socket was not attached.
#[derive(Debug, thiserror::Error)]
pub enum AttachFailure {
    /// The node answered `Refused(reason)` and closed the socket.
    #[error("refused ({reason:?}): {detail}")]
    Refused {
        /// The reason sent to the client.
        reason: RefusedReason,
        /// What exactly was wrong, for the log.
        detail: String,
    },
    /// The client left (or stalled) before an answer; none was sent.
    #[error("dropped ({reason:?}): {detail}")]
    Dropped {
        /// Why.
        reason: DropReason,
        /// What exactly happened, for the log.
        detail: String,
    },
}

fn refused(reason: RefusedReason, detail: impl std::fmt::Display) -> AttachFailure {
    AttachFailure::Refused {
        reason,
        detail: detail.to_string(),
    }
}

fn dropped(e: FrameError) -> AttachFailure {
    let reason = match &e {
        FrameError::TimedOut => DropReason::TimedOut,
        FrameError::PeerClosed => DropReason::PeerClosed,
        FrameError::Malformed(_) | FrameError::Io(_) => DropReason::Io,
    };
    AttachFailure::Dropped {
        reason,
        detail: e.to_string(),
    }
}

/// One attached application connection: the node consumes the request ring
/// and produces the outcome ring of the client's memory. The socket stays
/// open (its closing tells the node that the client is gone); dropping the
/// value closes it and frees the connection's place.
#[derive(Debug)]
pub struct AttachedConnection {
    socket: UnixStream,
    peer: PeerCredentials,
    limits: AppLimits,
    procedure_ids: Vec<Option<u32>>,
    requests: RingConsumer,
    request_bell: Doorbell,
    outcomes: RingProducer,
    outcome_bell: Doorbell,
    memory: SharedMemory,
    _slot: Slot,
}

impl AttachedConnection {
    /// The client's credentials at connection time.
    pub fn peer(&self) -> PeerCredentials {
        self.peer
    }

    /// The limits granted in the Welcome.
    pub fn limits(&self) -> AppLimits {
        self.limits
    }

    /// The procedure ids sent in the Welcome, in the Hello's order.
    pub fn procedure_ids(&self) -> &[Option<u32>] {
        &self.procedure_ids
    }

    /// The socket to the client.
    pub fn socket(&self) -> &UnixStream {
        &self.socket
    }

    /// Bytes of the client's memory.
    pub fn memory_bytes(&self) -> usize {
        self.memory.len_bytes()
    }

    /// The request doorbell (the client rings it after each request).
    pub fn request_doorbell(&mut self) -> &mut Doorbell {
        &mut self.request_bell
    }

    /// Sleeps at most `timeout` on the request doorbell unless a request is
    /// already waiting ([`Doorbell::sleep_once`]: the client's next request
    /// ends the sleep, the client cannot lengthen it); true if a request is
    /// waiting afterwards.
    pub fn sleep_until_request(&mut self, timeout: std::time::Duration) -> bool {
        let requests = &mut self.requests;
        self.request_bell
            .sleep_once(|| !requests.is_empty(), timeout)
    }

    /// Copies the next request entry out of client memory into `out`;
    /// `Ok(false)` if there is none.
    ///
    /// # Errors
    /// [`RingError::Corrupt`] for indices or lengths the client could not
    /// have written legitimately; the connection is unusable after that.
    pub fn try_recv(&mut self, out: &mut Vec<u8>) -> Result<bool, RingError> {
        self.requests.try_pop(out)
    }

    /// Pushes one outcome entry and rings the client; `Ok(false)` if the
    /// outcome ring is full now.
    ///
    /// # Errors
    /// [`RingError::TooLarge`] or [`RingError::Corrupt`] (the client's head
    /// index is impossible).
    pub fn try_send(&mut self, entry: &[u8]) -> Result<bool, RingError> {
        let pushed = match self.outcomes.try_push(entry) {
            Ok(_) => true,
            Err(RingError::Full) => false,
            Err(e) => return Err(e),
        };
        self.outcome_bell.ring();
        Ok(pushed)
    }
}

/// Sets up the accepted socket `socket` under `policy` (module docs),
/// reserving a place in `slots`; blocks at most `policy.handshake_timeout`.
///
/// # Errors
/// [`AttachFailure::Refused`] (answered, with the reason) or
/// [`AttachFailure::Dropped`] (no answer: the client closed or stalled).
pub fn attach(
    mut socket: UnixStream,
    policy: &AttachPolicy,
    slots: &ConnectionSlots,
) -> Result<AttachedConnection, AttachFailure> {
    let deadline = Instant::now() + policy.handshake_timeout;
    match set_up(&mut socket, policy, slots, deadline) {
        Ok((parts, welcome)) => {
            write_frame(&mut socket, &welcome, deadline).map_err(dropped)?;
            Ok(parts.into_connection(socket))
        }
        Err(failure) => {
            if let AttachFailure::Refused { reason, .. } = &failure {
                let mut msg = Vec::new();
                HandshakeMsg::Refused(Refused { reason: *reason }).encode(&mut msg);
                // Best effort: the client may be gone already.
                let _ = write_frame(&mut socket, &msg, deadline);
            }
            Err(failure)
        }
    }
}

/// Everything of a connection but its socket.
struct Parts {
    peer: PeerCredentials,
    limits: AppLimits,
    procedure_ids: Vec<Option<u32>>,
    requests: RingConsumer,
    request_bell: Doorbell,
    outcomes: RingProducer,
    outcome_bell: Doorbell,
    memory: SharedMemory,
    slot: Slot,
}

impl Parts {
    fn into_connection(self, socket: UnixStream) -> AttachedConnection {
        AttachedConnection {
            socket,
            peer: self.peer,
            limits: self.limits,
            procedure_ids: self.procedure_ids,
            requests: self.requests,
            request_bell: self.request_bell,
            outcomes: self.outcomes,
            outcome_bell: self.outcome_bell,
            memory: self.memory,
            _slot: self.slot,
        }
    }
}

fn set_up(
    socket: &mut UnixStream,
    policy: &AttachPolicy,
    slots: &ConnectionSlots,
    deadline: Instant,
) -> Result<(Parts, Vec<u8>), AttachFailure> {
    let peer = peer_credentials(&*socket).map_err(|e| AttachFailure::Dropped {
        reason: DropReason::Io,
        detail: e.to_string(),
    })?;
    if !policy.allowed_uids.contains(&peer.uid) {
        return Err(refused(
            RefusedReason::UserNotAllowed,
            format!("user id {} (pid {})", peer.uid, peer.pid),
        ));
    }
    let slot = slots.try_reserve().ok_or_else(|| {
        refused(
            RefusedReason::ConnectionsFull,
            format!("{} connections open", slots.open()),
        )
    })?;
    let mut bytes = Vec::new();
    read_frame(socket, &mut bytes, deadline).map_err(|e| match e {
        FrameError::Malformed(d) => refused(RefusedReason::BadHello, d),
        other => dropped(other),
    })?;
    let hello = match HandshakeMsg::decode(&bytes) {
        Ok(HandshakeMsg::Hello(h)) => h,
        Ok(_) => return Err(refused(RefusedReason::BadHello, "not a Hello")),
        Err(e @ HandshakeError::VersionMismatch { .. }) => {
            return Err(refused(RefusedReason::VersionMismatch, e))
        }
        Err(HandshakeError::Decode(e)) => return Err(refused(RefusedReason::BadHello, e)),
    };
    check_hello(&hello, policy)?;
    let limits = policy.limits(hello.in_flight_max);
    let procedure_ids: Vec<Option<u32>> = hello.names().map(|n| (policy.resolve)(n)).collect();
    let memory = receive_memory(socket, &hello.layout, deadline)?;
    let (requests, request_bell, outcomes, outcome_bell) = attach_rings(&memory, &hello.layout)?;
    let mut welcome = Vec::new();
    // Fails only for a resolver that returns the id reserved for unknown
    // names: the node's fault, answered as "not serving".
    Welcome::encode(policy.node_id, &limits, &procedure_ids, &mut welcome)
        .map_err(|e| refused(RefusedReason::Unavailable, e))?;
    let parts = Parts {
        peer,
        limits,
        procedure_ids,
        requests,
        request_bell,
        outcomes,
        outcome_bell,
        memory,
        slot,
    };
    Ok((parts, welcome))
}

fn check_hello(hello: &Hello<'_>, policy: &AttachPolicy) -> Result<(), AttachFailure> {
    let l = &hello.layout;
    if l.request_ring_capacity_bytes > policy.request_ring_bytes_max
        || l.outcome_ring_capacity_bytes > policy.outcome_ring_bytes_max
    {
        return Err(refused(
            RefusedReason::BadHello,
            format!(
                "rings of {} B and {} B over the node's {} B and {} B",
                l.request_ring_capacity_bytes,
                l.outcome_ring_capacity_bytes,
                policy.request_ring_bytes_max,
                policy.outcome_ring_bytes_max
            ),
        ));
    }
    Ok(())
}

fn receive_memory(
    socket: &mut UnixStream,
    layout: &AppMemoryLayout,
    deadline: Instant,
) -> Result<SharedMemory, AttachFailure> {
    let left = deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| dropped(FrameError::TimedOut))?;
    socket
        .set_read_timeout(Some(left))
        .map_err(|e| dropped(FrameError::Io(e)))?;
    let fd = match recv_fd(&*socket) {
        Ok(fd) => fd,
        Err(FdPassError::PeerClosed) => return Err(dropped(FrameError::PeerClosed)),
        Err(FdPassError::Receive(rustix::io::Errno::AGAIN)) => {
            return Err(dropped(FrameError::TimedOut))
        }
        Err(e @ FdPassError::Receive(_)) => {
            return Err(AttachFailure::Dropped {
                reason: DropReason::Io,
                detail: e.to_string(),
            })
        }
        Err(e) => return Err(refused(RefusedReason::BadMemory, e)),
    };
    SharedMemory::from_fd(fd, layout.memory_bytes).map_err(|e| refused(RefusedReason::BadMemory, e))
}

type Rings = (RingConsumer, Doorbell, RingProducer, Doorbell);

/// Attaches the node's ends of the client-initialised rings, checking each
/// header against the Hello's layout first.
fn attach_rings(memory: &SharedMemory, layout: &AppMemoryLayout) -> Result<Rings, AttachFailure> {
    let region = memory.region();
    let bad = |what: &str, e: &dyn std::fmt::Display| {
        refused(RefusedReason::BadMemory, format!("{what}: {e}"))
    };
    let requests = RingConsumer::attach(region.clone(), layout.request_ring_offset)
        .map_err(|e| bad("request ring", &e))?;
    let outcomes = RingProducer::attach(region.clone(), layout.outcome_ring_offset)
        .map_err(|e| bad("outcome ring", &e))?;
    if requests.capacity_bytes() != layout.request_ring_capacity_bytes
        || outcomes.capacity_bytes() != layout.outcome_ring_capacity_bytes
    {
        return Err(bad("ring headers", &"capacity differs from the Hello's"));
    }
    if requests.consumed_bytes() != 0 || outcomes.produced_bytes() != 0 {
        return Err(bad("ring headers", &"indices of a ring already used"));
    }
    let request_bell = Doorbell::attach(region.clone(), layout.request_doorbell_offset)
        .map_err(|e| bad("request doorbell", &e))?;
    let outcome_bell = Doorbell::attach(region.clone(), layout.outcome_doorbell_offset)
        .map_err(|e| bad("outcome doorbell", &e))?;
    Ok((requests, request_bell, outcomes, outcome_bell))
}

#[cfg(test)]
mod tests;
