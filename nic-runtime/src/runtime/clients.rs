//! The application side of the host ports (L5 §3: one request/outcome ring
//! pair per application thread): several clients per node, polled fairly, each
//! outcome routed back to the ring of the client that submitted its request.
//!
//! Routing: a request taken from client `c` is started under a *ticket* (an
//! index into a fixed table recording `c` and the application's `req_id`); the
//! coordinator echoes the ticket as the outcome's request id, and
//! the runtime turns it back into `(c, req_id)` when it delivers the outcome.
//!
//! Bounds: a client has at most [`CLIENT_OUTCOMES_QUEUED_MAX`] requests whose
//! outcomes it has not yet taken off the NIC (started, or finished and waiting
//! for room in its outcome ring). When it reaches the bound the runtime stops
//! taking its requests instead of dropping outcomes, so a backlog never grows
//! past that bound and nothing is lost.
//!
//! Corrupt input: a request-ring entry that does not decode, or an entry that
//! is not a request, or a ring error closes that client only (its requests are
//! no longer read; outcomes of requests already taken are still delivered).
//! The reason is kept ([`NicRuntime::client_closed`](super::NicRuntime::client_closed))
//! and counted ([`ClientPortStats::clients_closed`]).

use crate::protocol::coordinator::{Coordinator, TX_INFLIGHT_MAX};
use splitkv_layout::host_nic::{HostToNic, NicToHost, TxOutcome, TxRequest, TxStatus};
use splitkv_layout::ring::{RingConsumer, RingError, RingProducer};
use splitkv_layout::DecodeError;
use std::collections::VecDeque;

use super::REQUESTS_PER_ITERATION_MAX;

/// Most clients (request/outcome ring pairs) one NIC runtime serves.
pub const CLIENTS_PER_NODE_MAX: usize = 256;

/// Most requests of one client whose outcomes are not yet in its outcome ring
/// (in flight, or finished and queued on the NIC for ring room). At the bound
/// the runtime takes no more of that client's requests.
pub const CLIENT_OUTCOMES_QUEUED_MAX: usize = 1024;

/// Tickets (requests started and not yet handed back by the coordinator): every
/// coordinator slot, plus the requests of one iteration that are rejected
/// before taking a slot (their outcome is queued at once).
pub const TICKETS_MAX: usize = TX_INFLIGHT_MAX + REQUESTS_PER_ITERATION_MAX;

/// One client's rings: requests in (application → NIC), outcomes out.
#[derive(Debug)]
pub struct ClientPorts {
    /// Application → NIC: transaction requests (L5-style request ring).
    pub requests: RingConsumer,
    /// NIC → application: transaction outcomes.
    pub outcomes: RingProducer,
}

/// Why a NIC runtime stopped reading a client's request ring.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientClosed {
    /// A request-ring entry did not decode.
    #[error("request ring entry did not decode: {0}")]
    BadEntry(DecodeError),
    /// A request-ring entry decoded to a message that is not a transaction request.
    #[error("request ring carried a message that is not a transaction request")]
    NotARequest,
    /// The request ring failed (its shared memory holds what no producer writes).
    #[error("request ring failed: {0}")]
    RequestRing(RingError),
    /// The outcome ring refused an entry for a reason other than being full.
    #[error("outcome ring failed: {0}")]
    OutcomeRing(RingError),
}

/// Counters of the client ports of one NIC runtime.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientPortStats {
    /// Requests taken from request rings.
    pub requests: u64,
    /// Outcomes taken from the coordinator, by [`TxStatus`] (index `status as usize`).
    pub outcomes: [u64; TxStatus::ALL.len()],
    /// Clients closed for a corrupt request ring (reasons: `client_closed`).
    pub clients_closed: u64,
    /// Times a client's requests were left in its ring because it had
    /// [`CLIENT_OUTCOMES_QUEUED_MAX`] outcomes outstanding.
    pub requests_held_back: u64,
    /// Outcomes queued on the NIC because their client's outcome ring was full.
    pub outcomes_queued: u64,
    /// Outcomes that could not be delivered (unknown ticket, or a failed
    /// outcome ring). Zero unless something is broken.
    pub outcomes_undeliverable: u64,
}

#[derive(Debug)]
struct Queued {
    req_id: u64,
    status: TxStatus,
    result: Vec<u8>,
}

#[derive(Debug)]
struct Port {
    rings: ClientPorts,
    /// Tickets held by this client's requests.
    outstanding: usize,
    /// Outcomes waiting for room in the outcome ring, oldest first.
    backlog: VecDeque<Queued>,
    closed: Option<ClientClosed>,
}

impl Port {
    fn admits(&self) -> bool {
        self.closed.is_none() && self.outstanding + self.backlog.len() < CLIENT_OUTCOMES_QUEUED_MAX
    }
}

#[derive(Debug, Clone, Copy)]
struct Ticket {
    client: u32,
    req_id: u64,
    live: bool,
}

/// Clients closed from the start for being over [`CLIENTS_PER_NODE_MAX`].
fn ports_extra(ports: &[Port]) -> u64 {
    ports.iter().filter(|p| p.closed.is_some()).count() as u64
}

/// The clients of one NIC runtime.
#[derive(Debug)]
pub(crate) struct Clients {
    ports: Vec<Port>,
    tickets: Vec<Ticket>,
    free: Vec<u32>,
    /// Where the next search for a request starts (round robin).
    next: usize,
    enc: Vec<u8>,
    stats: ClientPortStats,
}

impl Clients {
    /// Serves `rings` (at most [`CLIENTS_PER_NODE_MAX`]; extra ones are closed).
    pub(crate) fn new(rings: Vec<ClientPorts>) -> Clients {
        let ports: Vec<Port> = rings
            .into_iter()
            .enumerate()
            .map(|(i, rings)| Port {
                rings,
                outstanding: 0,
                backlog: VecDeque::new(),
                closed: (i >= CLIENTS_PER_NODE_MAX).then_some(ClientClosed::RequestRing(
                    RingError::BadHeader("more clients than CLIENTS_PER_NODE_MAX"),
                )),
            })
            .collect();
        let extra = ports_extra(&ports);
        let dead = Ticket {
            client: 0,
            req_id: 0,
            live: false,
        };
        Clients {
            ports,
            tickets: vec![dead; TICKETS_MAX],
            free: (0..TICKETS_MAX as u32).rev().collect(),
            next: 0,
            enc: Vec::with_capacity(2048),
            stats: ClientPortStats {
                clients_closed: extra,
                ..ClientPortStats::default()
            },
        }
    }

    pub(crate) fn stats(&self) -> ClientPortStats {
        self.stats
    }

    pub(crate) fn len(&self) -> usize {
        self.ports.len()
    }

    pub(crate) fn closed(&self, client: usize) -> Option<&ClientClosed> {
        self.ports.get(client)?.closed.as_ref()
    }

    /// The tickets (request ids the coordinator knows) of requests in
    /// flight: what a restarted NIC runtime answers `Unknown`
    /// (`recovery::restart`).
    pub(crate) fn live_tickets(&self) -> impl Iterator<Item = u64> + '_ {
        self.tickets
            .iter()
            .enumerate()
            .filter(|(_, t)| t.live)
            .map(|(i, _)| i as u64)
    }

    /// Outcomes queued on the NIC for ring room, over all clients.
    pub(crate) fn queued(&self) -> usize {
        self.ports.iter().map(|p| p.backlog.len()).sum()
    }

    fn close(&mut self, client: usize, why: ClientClosed) {
        let p = &mut self.ports[client];
        if p.closed.is_none() {
            p.closed = Some(why);
            self.stats.clients_closed += 1;
        }
    }

    /// Takes the next request, visiting clients round robin from where the last
    /// search ended; its `req_id` is replaced by a ticket. `None` when no client
    /// has a request it may start (or no ticket is free).
    pub(crate) fn pop_request<'b>(&mut self, buf: &'b mut Vec<u8>) -> Option<TxRequest<'b>> {
        let n = self.ports.len();
        let mut found = None;
        for step in 0..n {
            if self.free.is_empty() {
                break;
            }
            let c = (self.next + step) % n;
            if !self.ports[c].admits() {
                if self.ports[c].closed.is_none() {
                    self.stats.requests_held_back += 1;
                }
                continue;
            }
            match self.ports[c].rings.requests.try_pop(buf) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    self.close(c, ClientClosed::RequestRing(e));
                    continue;
                }
            }
            match HostToNic::decode(buf) {
                Ok(HostToNic::TxRequest(req)) => {
                    found = Some((c, req.req_id));
                    break;
                }
                Ok(_) => self.close(c, ClientClosed::NotARequest),
                Err(e) => self.close(c, ClientClosed::BadEntry(e)),
            }
        }
        let (c, req_id) = found?;
        let ticket = self.free.pop()?;
        self.tickets[ticket as usize] = Ticket {
            client: c as u32,
            req_id,
            live: true,
        };
        self.ports[c].outstanding += 1;
        self.stats.requests += 1;
        self.next = (c + 1) % n;
        match HostToNic::decode(buf) {
            Ok(HostToNic::TxRequest(req)) => Some(TxRequest {
                req_id: ticket as u64,
                ..req
            }),
            // Decoded above from the same bytes.
            _ => None,
        }
    }

    /// Routes every outcome the coordinator has ready to its client: into the
    /// client's outcome ring, or, when that is full (or older outcomes wait),
    /// onto its backlog. Result buffers go back to the coordinator. Returns
    /// whether anything moved.
    pub(crate) fn deliver(&mut self, coordinator: &mut Coordinator) -> bool {
        let mut work = self.flush_backlogs(coordinator);
        while let Some(o) = coordinator.outcomes().pop_front() {
            work = true;
            self.stats.outcomes[o.status as usize] += 1;
            let Some(t) = self.tickets.get_mut(o.req_id as usize).filter(|t| t.live) else {
                self.stats.outcomes_undeliverable += 1;
                coordinator.recycle(o.result);
                continue;
            };
            t.live = false;
            let (c, req_id) = (t.client as usize, t.req_id);
            self.free.push(o.req_id as u32);
            self.ports[c].outstanding -= 1;
            let q = Queued {
                req_id,
                status: o.status,
                result: o.result,
            };
            if !self.ports[c].backlog.is_empty() {
                self.stats.outcomes_queued += 1;
                self.ports[c].backlog.push_back(q);
                continue;
            }
            match self.push(c, &q) {
                Err(RingError::Full) => {
                    self.stats.outcomes_queued += 1;
                    self.ports[c].backlog.push_back(q);
                }
                _ => coordinator.recycle(q.result),
            }
        }
        work
    }

    /// Pushes one outcome to client `c`'s ring. A failure other than a full
    /// ring closes the client and counts the outcome as undeliverable.
    fn push(&mut self, c: usize, q: &Queued) -> Result<(), RingError> {
        self.enc.clear();
        NicToHost::TxOutcome(TxOutcome {
            req_id: q.req_id,
            status: q.status,
            result: &q.result,
        })
        .encode(&mut self.enc);
        match self.ports[c].rings.outcomes.try_push(&self.enc) {
            Ok(_) => Ok(()),
            Err(RingError::Full) => Err(RingError::Full),
            Err(e) => {
                self.stats.outcomes_undeliverable += 1;
                self.close(c, ClientClosed::OutcomeRing(e.clone()));
                Err(e)
            }
        }
    }

    /// Moves queued outcomes into their rings, oldest first, as rings have room.
    fn flush_backlogs(&mut self, coordinator: &mut Coordinator) -> bool {
        let mut work = false;
        for c in 0..self.ports.len() {
            while let Some(q) = self.ports[c].backlog.pop_front() {
                if let Err(RingError::Full) = self.push(c, &q) {
                    self.ports[c].backlog.push_front(q);
                    break;
                }
                work = true;
                coordinator.recycle(q.result);
            }
        }
        work
    }
}
