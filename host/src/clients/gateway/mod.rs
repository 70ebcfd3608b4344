//! The gateway: the node's side of application connections once they are
//! attached (L5 §III-B for the connection, §IV for the rings' use). A state
//! machine with no thread of its own (DESIGN.md runtime rule); its driver
//! is [`ClientService`].
//!
//! [`Gateway`] owns the attached connections ([`AttachedConnection`]) and
//! one or more NIC client ports ([`Client`]) reserved for it. Each
//! [`Gateway::run_iteration`]:
//!
//! 1. takes up to [`REQUESTS_PER_STEP`] request entries from each
//!    connection's request ring — each copied out of client memory by the
//!    ring consumer before it is decoded (a client may rewrite an entry
//!    between two reads) — decodes each as an application
//!    [`Request`], and turns it into a call of the NIC runtime ([`map`]:
//!    registered procedures as they are, a `Txn` as the built-in Txn
//!    procedure, a get, put, insert or delete as a single-key call at
//!    the key's primary) under a gateway id
//!    unique over the gateway's life, remembered with the connection and
//!    the client's own `req_id`;
//! 2. takes the NIC runtime's outcomes, maps them back ([`map::to_app`])
//!    and writes each [`Outcome`] with the client's `req_id` into its
//!    connection's outcome ring, ringing the client's doorbell; an outcome
//!    that finds the ring full waits in the connection's backlog (at most
//!    its granted in-flight count of them);
//! 3. every [`LIVENESS_INTERVAL_NS`], reads each connection's socket without
//!    blocking: a closed socket means the client is gone.
//!
//! A connection is closed, with its reason logged (`tracing`) and counted
//! ([`GatewayStats`], [`CloseReason`]), and no other connection affected,
//! when: its socket closed (the client exited or was killed); its outcome
//! ring stayed full longer than `outcome_full_ms_max`; a request entry was
//! malformed or oversized, its ring indices impossible, or it wrote on its
//! socket after the set-up; or it had more requests in flight than the
//! in-flight bound granted in its Welcome (the gateway's count never
//! exceeds the client's own, since it counts a request from when it leaves
//! the request ring until its outcome enters the outcome ring). Its
//! transactions already at the NIC runtime still finish there by the
//! protocol's rules (commit or abort; either way they release their locks)
//! and their outcomes are discarded (counted).
//!
//! **Draining** ([`Gateway::begin_drain`], when the node stops serving): a
//! request taken from then on is answered
//! [`Status::Unavailable`]`(`[`UnavailableReason::Draining`]`)` without
//! reaching the NIC runtime, requests already there keep their outcomes
//! coming, and [`Gateway::drained`] says when none is left to answer; the
//! driver then closes every connection (or at its deadline).
//!
//! **NIC restart** ([`Gateway::watch_nic_restart`]): while the node's NIC
//! runtime restarts and rebuilds, a request taken is answered
//! [`Status::Unavailable`]`(`[`UnavailableReason::NicRestarting`]`)`
//! without reaching it.
//!
//! A call of a procedure id that the connection did not resolve at its
//! set-up is answered [`Status::UnknownProcedure`] without reaching the NIC
//! runtime. The number of open connections is bounded by the listener
//! (`connections_max`, [`super::ConnectionSlots`]).

pub mod map;
mod service;
pub mod stats;

pub use service::{
    ClientService, ServiceError, GATEWAY_DRAIN_MS_MAX, GATEWAY_IDLE_SLEEP_US, GATEWAY_SPINS,
    GATEWAY_YIELDS,
};
pub use stats::{status_label, CloseReason, GatewayCounts, GatewayStats};

use super::AttachedConnection;
use crate::client::{Client, ClientError};
use map::Kind;
use splitkv_layout::app::{Outcome, Request, Status, UnavailableReason};
use splitkv_layout::host_nic::TxOutcome;
use std::collections::{HashMap, VecDeque};
use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Request entries taken from one connection per step (batch at our own
/// pace; a busy client cannot starve the others).
pub const REQUESTS_PER_STEP: usize = 32;

/// Outcomes taken from one NIC port per step.
pub const OUTCOMES_PER_STEP: usize = 256;

/// How often each connection's socket is checked for a closed peer, ns.
pub const LIVENESS_INTERVAL_NS: u64 = 20_000_000;

/// The gateway's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatewayConfig {
    /// The node it serves (for logs).
    pub node: u16,
    /// How long a client may leave its outcome ring full, ms (`[clients]`
    /// `outcome_full_ms_max`).
    pub outcome_full_ms_max: u64,
}

/// Why a gateway cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GatewayError {
    /// It was given no NIC client port.
    #[error("a gateway needs at least one NIC client port")]
    NoPorts,
}

/// One open connection.
struct Conn {
    conn: AttachedConnection,
    /// Tells a reused place's connections apart.
    generation: u64,
    /// Requests taken and not yet answered into the outcome ring.
    in_flight: u32,
    /// Encoded outcomes waiting for room in the outcome ring.
    backlog: VecDeque<Vec<u8>>,
    /// Since when (ns) an outcome has waited for room.
    full_since_ns: Option<u64>,
    /// Set when the connection must close.
    doomed: Option<(CloseReason, String)>,
}

/// A request at the NIC runtime.
#[derive(Debug, Clone, Copy)]
struct Pending {
    place: usize,
    generation: u64,
    req_id: u64,
    kind: Kind,
}

/// A NIC call that found its port's request ring full.
struct Blocked {
    id: u64,
    procedure: u32,
    args: Vec<u8>,
}

/// The gateway state machine (module docs).
pub struct Gateway {
    config: GatewayConfig,
    ports: Vec<Client>,
    next_port: usize,
    conns: Vec<Option<Conn>>,
    /// The place of the connection a request was last taken from: the one
    /// whose doorbell an idle gateway thread sleeps on.
    last_request_place: usize,
    next_generation: u64,
    pending: HashMap<u64, Pending>,
    next_id: u64,
    blocked: Option<Blocked>,
    draining: bool,
    /// Set while the node's NIC runtime restarts ([`Gateway::watch_nic_restart`]).
    nic_restarting: Arc<AtomicBool>,
    stats: Arc<GatewayStats>,
    next_liveness_ns: u64,
    entry: Vec<u8>,
    args: Vec<u8>,
    body: Vec<u8>,
    out: Vec<u8>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("node", &self.config.node)
            .field("ports", &self.ports.len())
            .field("connections", &self.connections())
            .field("in_flight", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// A gateway over the NIC client ports `ports` (requests spread over
    /// them in turn), counting into `stats`.
    ///
    /// # Errors
    /// [`GatewayError::NoPorts`] for an empty `ports`.
    pub fn new(
        config: GatewayConfig,
        ports: Vec<Client>,
        stats: Arc<GatewayStats>,
    ) -> Result<Gateway, GatewayError> {
        if ports.is_empty() {
            return Err(GatewayError::NoPorts);
        }
        Ok(Gateway {
            config,
            ports,
            next_port: 0,
            conns: Vec::new(),
            last_request_place: 0,
            next_generation: 0,
            pending: HashMap::new(),
            next_id: 0,
            blocked: None,
            draining: false,
            nic_restarting: Arc::new(AtomicBool::new(false)),
            stats,
            next_liveness_ns: 0,
            entry: Vec::new(),
            args: Vec::new(),
            body: Vec::new(),
            out: Vec::new(),
        })
    }

    /// Takes over an attached connection. Its socket is made non-blocking
    /// (the liveness check peeks at it).
    pub fn add(&mut self, conn: AttachedConnection) {
        let _ = conn.socket().set_nonblocking(true);
        self.stats.attached();
        self.next_generation += 1;
        let c = Conn {
            conn,
            generation: self.next_generation,
            in_flight: 0,
            backlog: VecDeque::new(),
            full_since_ns: None,
            doomed: None,
        };
        match self.conns.iter_mut().find(|p| p.is_none()) {
            Some(place) => *place = Some(c),
            None => self.conns.push(Some(c)),
        }
    }

    /// Connections open.
    pub fn connections(&self) -> usize {
        self.conns.iter().filter(|c| c.is_some()).count()
    }

    /// Requests at the NIC runtime (including those of closed connections).
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// The counters.
    pub fn stats(&self) -> &Arc<GatewayStats> {
        &self.stats
    }

    /// One step at time `now_ns` (module docs); true if it did anything.
    pub fn run_iteration(&mut self, now_ns: u64) -> bool {
        let mut work = self.retry_blocked();
        if self.blocked.is_none() {
            work |= self.take_requests();
        }
        work |= self.take_outcomes();
        work |= self.flush_backlogs(now_ns);
        if now_ns >= self.next_liveness_ns {
            self.next_liveness_ns = now_ns + LIVENESS_INTERVAL_NS;
            self.check_liveness();
        }
        self.close_doomed();
        work
    }

    /// Answers every new request
    /// [`UnavailableReason::NicRestarting`] while `flag` is set (the node's
    /// NIC runtime restarted and is rebuilding from its peers; DESIGN.md's
    /// NIC-only crash): the caller learns at once that retrying later may
    /// succeed, rather than waiting for the rebuild with its request held.
    /// Requests already at the NIC runtime when it restarted end
    /// [`Status::OutcomeUnknown`] (their transactions may still commit).
    pub fn watch_nic_restart(&mut self, flag: Arc<AtomicBool>) {
        self.nic_restarting = flag;
    }

    /// From now on answers every new request
    /// [`UnavailableReason::Draining`] (module docs, "Draining").
    pub fn begin_drain(&mut self) {
        self.draining = true;
    }

    /// Whether the gateway is draining and has nothing left to answer: no
    /// request at the NIC runtime or waiting to be submitted, no outcome
    /// waiting for room in a ring.
    pub fn drained(&self) -> bool {
        self.draining
            && self.pending.is_empty()
            && self.blocked.is_none()
            && self.conns.iter().flatten().all(|c| c.backlog.is_empty())
    }

    /// Closes every connection (the node stops serving).
    pub fn close_all(&mut self) {
        for c in self.conns.iter_mut().flatten() {
            c.doomed = Some((CloseReason::Stopped, "the node stops serving".into()));
        }
        self.close_doomed();
    }

    fn retry_blocked(&mut self) -> bool {
        let Some(b) = self.blocked.take() else {
            return false;
        };
        match self.submit(b.id, b.procedure, &b.args) {
            Ok(()) => true,
            Err(()) => {
                self.blocked = Some(b);
                false
            }
        }
    }

    /// Submits on the next port; `Err` if its request ring is full. Other
    /// submission errors cannot happen (the arguments are within bounds);
    /// if one does, the call is answered as refused.
    fn submit(&mut self, id: u64, procedure: u32, args: &[u8]) -> Result<(), ()> {
        let port = self.next_port % self.ports.len();
        match self.ports[port].submit(id, procedure, args) {
            Ok(()) => {
                self.next_port = port + 1;
                Ok(())
            }
            Err(ClientError::Busy) => Err(()),
            Err(e) => {
                tracing::error!(node = self.config.node, error = %e, "gateway: NIC submission failed");
                if let Some(p) = self.pending.remove(&id) {
                    let reason = e.to_string();
                    self.answer(p, Status::Rejected, reason.as_bytes());
                }
                Ok(())
            }
        }
    }

    /// Step 1 for every connection, until a NIC port is full.
    fn take_requests(&mut self) -> bool {
        let mut work = false;
        for place in 0..self.conns.len() {
            for _ in 0..REQUESTS_PER_STEP {
                if self.blocked.is_some() || !self.take_one(place) {
                    break;
                }
                work = true;
            }
        }
        work
    }

    /// Takes one request of the connection at `place`; false if there was
    /// none (or the connection is closing).
    fn take_one(&mut self, place: usize) -> bool {
        let Some(c) = self.conns.get_mut(place).and_then(Option::as_mut) else {
            return false;
        };
        if c.doomed.is_some() {
            return false;
        }
        match c.conn.try_recv(&mut self.entry) {
            Ok(true) => self.last_request_place = place,
            Ok(false) => return false,
            Err(e) => {
                c.doomed = Some((CloseReason::Malformed, format!("request ring: {e}")));
                return false;
            }
        }
        let req = match Request::decode(&self.entry) {
            Ok(r) => r,
            Err(e) => {
                c.doomed = Some((CloseReason::Malformed, format!("request entry: {e}")));
                return false;
            }
        };
        self.stats.request();
        let granted = c.conn.limits().in_flight_max;
        if c.in_flight >= granted {
            c.doomed = Some((
                CloseReason::InFlightExceeded,
                format!("more than the {granted} requests in flight granted"),
            ));
            return false;
        }
        c.in_flight += 1;
        let pending = Pending {
            place,
            generation: c.generation,
            req_id: req.req_id(),
            kind: Kind::Call,
        };
        if let Request::Call { procedure, .. } = req {
            if !c.conn.procedure_ids().contains(&Some(procedure)) {
                let why = format!("procedure id {procedure} was not resolved by this connection");
                self.answer(pending, Status::UnknownProcedure, why.as_bytes());
                return true;
            }
        }
        if self.draining {
            let why = b"the node is draining: it takes no new request";
            self.answer(
                pending,
                Status::Unavailable(UnavailableReason::Draining),
                why,
            );
            return true;
        }
        if self.nic_restarting.load(Ordering::Acquire) {
            let why = b"the node's NIC runtime is restarting: retry once it serves again";
            let status = Status::Unavailable(UnavailableReason::NicRestarting);
            self.answer(pending, status, why);
            return true;
        }
        let (procedure, kind) = match map::to_nic(&req, &mut self.args) {
            Ok(m) => m,
            Err(status) => {
                self.answer(pending, status, b"request over the node's limits");
                return true;
            }
        };
        let id = self.next_id;
        self.next_id += 1;
        self.pending.insert(id, Pending { kind, ..pending });
        let args = std::mem::take(&mut self.args);
        if self.submit(id, procedure, &args).is_err() {
            self.blocked = Some(Blocked {
                id,
                procedure,
                args: args.clone(),
            });
        }
        self.args = args;
        true
    }

    /// Step 2: the NIC runtime's outcomes, answered to their connections
    /// straight from the port's ring (no copy of the result).
    fn take_outcomes(&mut self) -> bool {
        let Gateway {
            config,
            ports,
            pending,
            conns,
            stats,
            body,
            out,
            ..
        } = self;
        let node = config.node;
        let mut answering = Answering {
            node,
            conns,
            stats,
            out,
        };
        let mut work = false;
        for port in ports.iter_mut() {
            let polled = port.poll(OUTCOMES_PER_STEP, |o: &TxOutcome<'_>| {
                work = true;
                let Some(p) = pending.remove(&o.req_id) else {
                    tracing::error!(node, id = o.req_id, "gateway: outcome of no request");
                    return;
                };
                let status = map::to_app(p.kind, o.status, o.result, body);
                answering.answer(p, status, body);
            });
            if let Err(e) = polled {
                tracing::error!(node, error = %e, "gateway: NIC outcome unreadable");
            }
        }
        work
    }

    /// Writes the outcome of `p`, as [`Answering::answer`].
    fn answer(&mut self, p: Pending, status: Status, body: &[u8]) {
        Answering {
            node: self.config.node,
            conns: &mut self.conns,
            stats: &self.stats,
            out: &mut self.out,
        }
        .answer(p, status, body)
    }

    /// Moves backlogged outcomes into their rings; dooms a connection whose
    /// ring stayed full too long.
    fn flush_backlogs(&mut self, now_ns: u64) -> bool {
        let bound_ns = self.config.outcome_full_ms_max.saturating_mul(1_000_000);
        let mut work = false;
        for c in self.conns.iter_mut().flatten() {
            while let Some(front) = c.backlog.front() {
                match c.conn.try_send(front) {
                    Ok(true) => {
                        c.backlog.pop_front();
                        c.in_flight = c.in_flight.saturating_sub(1);
                        c.full_since_ns = None;
                        work = true;
                    }
                    Ok(false) => break,
                    Err(e) => {
                        c.doomed = Some((CloseReason::Malformed, format!("outcome ring: {e}")));
                        break;
                    }
                }
            }
            if c.backlog.is_empty() {
                continue;
            }
            let since = *c.full_since_ns.get_or_insert(now_ns);
            if now_ns.saturating_sub(since) > bound_ns && c.doomed.is_none() {
                c.doomed = Some((
                    CloseReason::OutcomeRingStalled,
                    format!(
                        "outcome ring full for more than {} ms",
                        self.config.outcome_full_ms_max
                    ),
                ));
            }
        }
        work
    }

    /// Step 3: a non-blocking read of each socket. A closed peer reads 0
    /// bytes; any byte after the set-up breaks the protocol (a client never
    /// writes on its socket once attached, so nothing is lost by reading).
    fn check_liveness(&mut self) {
        use std::io::Read;
        let mut byte = [0u8; 1];
        for c in self.conns.iter_mut().flatten() {
            let why = match (&mut c.conn.socket()).read(&mut byte) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Ok(0) => (CloseReason::PeerClosed, "socket closed".to_string()),
                Err(e) => (CloseReason::PeerClosed, format!("socket: {e}")),
                Ok(_) => (
                    CloseReason::Malformed,
                    "bytes on the socket after the set-up".to_string(),
                ),
            };
            c.doomed.get_or_insert(why);
        }
    }

    fn close_doomed(&mut self) {
        for place in self.conns.iter_mut() {
            let Some((reason, detail)) = place.as_mut().and_then(|c| c.doomed.take()) else {
                continue;
            };
            let Some(c) = place.take() else {
                continue;
            };
            let peer = c.conn.peer();
            tracing::info!(
                node = self.config.node,
                pid = peer.pid,
                uid = peer.uid,
                reason = reason.label(),
                detail = %detail,
                in_flight = c.in_flight,
                "application disconnected"
            );
            self.stats.closed(reason);
        }
    }
}

/// What writing an outcome needs of the gateway, borrowed apart from its
/// ports (so outcomes are answered while a port's ring is being read).
struct Answering<'g> {
    node: u16,
    conns: &'g mut Vec<Option<Conn>>,
    stats: &'g GatewayStats,
    out: &'g mut Vec<u8>,
}

impl Answering<'_> {
    /// Writes the outcome of `p` (or queues it behind its connection's
    /// backlog); a closed connection's outcome is discarded.
    fn answer(&mut self, p: Pending, status: Status, body: &[u8]) {
        let Some(c) = self
            .conns
            .get_mut(p.place)
            .and_then(Option::as_mut)
            .filter(|c| c.generation == p.generation && c.doomed.is_none())
        else {
            self.stats.discarded();
            return;
        };
        self.out.clear();
        let outcome = Outcome {
            req_id: p.req_id,
            status,
            body,
        };
        if let Err(e) = outcome.encode(self.out) {
            // Only a reason text over its bound can fail: send none.
            tracing::warn!(node = self.node, error = %e, "gateway: outcome body dropped");
            let bare = Outcome {
                body: &[],
                ..outcome
            };
            if bare.encode(self.out).is_err() {
                return;
            }
        }
        self.stats.outcome(status);
        if !c.backlog.is_empty() {
            c.backlog.push_back(self.out.clone());
            return;
        }
        match c.conn.try_send(self.out) {
            Ok(true) => {
                c.in_flight = c.in_flight.saturating_sub(1);
                c.full_since_ns = None;
            }
            Ok(false) => c.backlog.push_back(self.out.clone()),
            Err(e) => c.doomed = Some((CloseReason::Malformed, format!("outcome ring: {e}"))),
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.close_all();
    }
}
