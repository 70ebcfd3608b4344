//! The out-of-process client: [`KvClient`] over a [`Connection`]'s rings
//! (L5 §III-A/B). Each call is one `splitkv_layout::app::Request` entry on
//! the request ring, tagged with a request id of the client's; the node
//! answers with one `Outcome` entry carrying that id, matched here to the
//! call in flight. Outcomes are untrusted: an entry that does not decode, an
//! id that matches no call or a body that does not fit the call is a typed
//! [`CallError`], never a panic.
//!
//! The client never has more calls in flight than the node granted
//! (`AppLimits::in_flight_max`): a submit over it fails with
//! [`CallError::InFlightFull`] and sends nothing. A call counts until its
//! completion is handed back. Values and arguments are checked against the
//! node's limits before sending.
//!
//! The connection is lost when the node closes its socket or the rings'
//! shared indices are corrupt: outcomes already in the ring are still
//! handed back, then every call fails with [`CallError::NotConnected`].

use crate::calls::{Call, Completion, Expect, KvClient, ProcedureRef, Reply};
use crate::connection::{ConnectError, ConnectOptions, Connection, ConnectionError};
use crate::error::{CallError, Ticket};
use splitkv_layout::app::{AppLimits, Outcome, Request};
use splitkv_layout::ring::RingError;
use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::time::{Duration, Instant};

/// Longest a wait sleeps on the outcome ring before it checks that the node's
/// socket is still open, ms.
pub const LIVENESS_CHECK_MS: u64 = 50;

/// Bound on a submit's wait for room in a full request ring, ms.
pub const SEND_TIMEOUT_MS: u64 = 1_000;

/// An application's client of one node, in its own process (module docs).
/// One per thread: it is `Send`, not shared.
#[derive(Debug)]
pub struct Client {
    conn: Connection,
    /// `(name, id)` of every procedure the node resolved at set-up; names it
    /// did not resolve have no entry.
    names: Vec<(String, Option<u32>)>,
    next_req_id: u64,
    /// Calls sent whose outcomes have not arrived, by request id.
    pending: HashMap<u64, Expect>,
    /// Calls whose outcomes arrived and were not handed back yet.
    ready: VecDeque<Completion>,
    /// Reused buffers: the request entry, the outcome entry, a
    /// transaction's encoding.
    enc: Vec<u8>,
    dec: Vec<u8>,
    txn_enc: Vec<u8>,
    call_timeout: Option<Duration>,
    /// Why the connection is gone, once it is.
    lost: Option<String>,
}

impl Client {
    /// Connects to the node listening on `path` (`<socket_dir>/node-N.sock`
    /// of its cluster file's `[clients]` section) and resolves
    /// `options.procedures` by name ([`Connection::connect`]).
    ///
    /// # Errors
    /// The [`ConnectError`] of the set-up.
    pub fn connect(
        path: impl AsRef<Path>,
        options: &ConnectOptions,
    ) -> Result<Client, ConnectError> {
        let conn = Connection::connect(path, options)?;
        Ok(Client::new(conn, &options.procedures))
    }

    /// A client over a set-up connection whose Hello asked for `procedures`
    /// (in the order of [`Connection::procedure_ids`]).
    pub fn new(conn: Connection, procedures: &[String]) -> Client {
        let names = procedures
            .iter()
            .cloned()
            .zip(conn.procedure_ids().iter().copied())
            .collect();
        // Sized once for the granted bound: calls do not grow them.
        let in_flight_max = conn.limits().in_flight_max as usize;
        Client {
            conn,
            names,
            next_req_id: 0,
            pending: HashMap::with_capacity(in_flight_max),
            ready: VecDeque::with_capacity(in_flight_max),
            enc: Vec::new(),
            dec: Vec::new(),
            txn_enc: Vec::new(),
            call_timeout: Some(Duration::from_millis(crate::calls::CALL_TIMEOUT_MS_DEFAULT)),
            lost: None,
        }
    }

    /// Sets the bound on blocking calls' waits (`None`: unbounded; the
    /// connection's loss still ends them).
    pub fn set_call_timeout(&mut self, timeout: Option<Duration>) {
        self.call_timeout = timeout;
    }

    /// The node's limits for this connection.
    pub fn limits(&self) -> AppLimits {
        self.conn.limits()
    }

    /// The node's id in its cluster.
    pub fn node_id(&self) -> u16 {
        self.conn.node_id()
    }

    /// The connection underneath.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The id the node gave procedure `name` at set-up.
    ///
    /// # Errors
    /// [`CallError::UnknownProcedure`] for a name not asked for or not known
    /// to the node.
    pub fn procedure_id(&self, name: &str) -> Result<u32, CallError> {
        self.names
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, id)| *id)
            .ok_or_else(|| CallError::UnknownProcedure {
                name: name.to_owned(),
            })
    }

    /// Checks that the node knows every procedure asked for at set-up.
    ///
    /// # Errors
    /// [`CallError::UnknownProcedure`] for the first it does not know.
    pub fn require_procedures(&self) -> Result<(), CallError> {
        for (name, _) in &self.names {
            self.procedure_id(name)?;
        }
        Ok(())
    }

    fn not_connected(&self) -> Option<CallError> {
        self.lost
            .as_ref()
            .map(|d| CallError::NotConnected { detail: d.clone() })
    }

    fn lose(&mut self, detail: String) -> CallError {
        let e = CallError::NotConnected {
            detail: detail.clone(),
        };
        self.lost.get_or_insert(detail);
        e
    }

    /// Encodes `call` as request `req_id` into `self.enc`; the body it
    /// expects back.
    fn encode(&mut self, req_id: u64, call: &Call<'_>) -> Result<Expect, CallError> {
        let limits = self.conn.limits();
        let value_max = limits.value_bytes_max as usize;
        let too_large = |what: &str, len: usize, max: usize| CallError::TooLarge {
            detail: format!("{what} of {len} B exceeds the node's maximum {max} B"),
        };
        let mut txn_bytes = std::mem::take(&mut self.txn_enc);
        txn_bytes.clear();
        let request = match *call {
            Call::Get(key) => Request::Get { req_id, key },
            Call::Delete(key) => Request::Delete { req_id, key },
            Call::Put(_, value) | Call::Insert(_, value) if value.len() > value_max => {
                return Err(too_large("value", value.len(), value_max))
            }
            Call::Put(key, value) => Request::Put { req_id, key, value },
            Call::Insert(key, value) => Request::Insert { req_id, key, value },
            Call::Txn(txn) => {
                txn.encode(value_max, &mut txn_bytes)?;
                let args_max = limits.args_bytes_max as usize;
                if txn_bytes.len() > args_max {
                    return Err(too_large("transaction", txn_bytes.len(), args_max));
                }
                let txn = splitkv_layout::app::Txn::decode(&txn_bytes)
                    .map_err(|e| CallError::InvalidTxn(crate::TxnError::Invalid(e)))?;
                Request::Txn { req_id, txn }
            }
            Call::Procedure(procedure, args) => {
                let procedure = match procedure {
                    ProcedureRef::Id(id) => id,
                    ProcedureRef::Name(name) => self.procedure_id(name)?,
                };
                let args_max = limits.args_bytes_max as usize;
                if args.len() > args_max {
                    return Err(too_large("arguments", args.len(), args_max));
                }
                Request::Call {
                    req_id,
                    procedure,
                    args,
                }
            }
        };
        self.enc.clear();
        request
            .encode(&mut self.enc)
            .map_err(|e| CallError::TooLarge {
                detail: e.to_string(),
            })?;
        Ok(Expect::of(call))
    }

    /// Decodes the outcome entry in `self.dec` and files its completion.
    ///
    /// # Errors
    /// [`CallError::BadOutcome`] for an entry that does not decode,
    /// [`CallError::UnmatchedOutcome`] for an id no call in flight has.
    fn accept(&mut self) -> Result<(), CallError> {
        let outcome = Outcome::decode(&self.dec).map_err(|error| CallError::BadOutcome {
            req_id: None,
            error,
        })?;
        let Some(expect) = self.pending.remove(&outcome.req_id) else {
            return Err(CallError::UnmatchedOutcome {
                req_id: outcome.req_id,
            });
        };
        self.ready.push_back(Completion {
            ticket: Ticket(outcome.req_id),
            result: expect.reply(outcome.req_id, outcome.status, outcome.body),
        });
        Ok(())
    }

    /// Pops one outcome entry if there is one and files it; whether one was
    /// there.
    fn try_take(&mut self) -> Result<bool, CallError> {
        if self.lost.is_some() && self.pending.is_empty() {
            return Ok(false);
        }
        match self.conn.try_recv(&mut self.dec) {
            Ok(true) => self.accept().map(|()| true),
            Ok(false) => Ok(false),
            Err(e) => Err(self.lose(format!("outcome ring unusable: {e}"))),
        }
    }

    /// Removes and returns the completion of `ticket`, if it arrived.
    fn take_ready(&mut self, ticket: Ticket) -> Option<Result<Reply, CallError>> {
        let at = self.ready.iter().position(|c| c.ticket == ticket)?;
        self.ready.remove(at).map(|c| c.result)
    }
}

impl KvClient for Client {
    fn submit(&mut self, call: Call<'_>) -> Result<Ticket, CallError> {
        if let Some(e) = self.not_connected() {
            return Err(e);
        }
        let max = self.conn.limits().in_flight_max;
        if self.in_flight() >= max as usize {
            return Err(CallError::InFlightFull { max });
        }
        // Ids wrap; one still in flight (after 2^64 calls) is skipped.
        let mut req_id = self.next_req_id;
        while self.pending.contains_key(&req_id) || self.ready.iter().any(|c| c.ticket.0 == req_id)
        {
            req_id = req_id.wrapping_add(1);
        }
        let expect = self.encode(req_id, &call)?;
        let deadline = Instant::now() + Duration::from_millis(SEND_TIMEOUT_MS);
        match self.conn.send(&self.enc, Some(deadline)) {
            Ok(()) => {}
            Err(ConnectionError::TimedOut) if self.conn.peer_closed() => {
                return Err(self.lose("the node closed the connection".into()))
            }
            Err(ConnectionError::TimedOut) => return Err(CallError::Busy),
            Err(ConnectionError::Ring(RingError::TooLarge { len, max })) => {
                return Err(CallError::TooLarge {
                    detail: format!("request of {len} B exceeds the ring's entry maximum {max} B"),
                })
            }
            Err(ConnectionError::Ring(e)) => {
                return Err(self.lose(format!("request ring unusable: {e}")))
            }
        }
        self.next_req_id = req_id.wrapping_add(1);
        self.pending.insert(req_id, expect);
        Ok(Ticket(req_id))
    }

    fn poll_one(&mut self) -> Result<Option<Completion>, CallError> {
        if self.ready.is_empty() && !self.pending.is_empty() {
            self.try_take()?;
        }
        if let Some(c) = self.ready.pop_front() {
            return Ok(Some(c));
        }
        if !self.pending.is_empty() && self.conn.peer_closed() {
            // Outcomes written before the close are in the ring: take them.
            if self.try_take()? {
                return Ok(self.ready.pop_front());
            }
            self.pending.clear();
            return Err(self.lose("the node closed the connection".into()));
        }
        Ok(None)
    }

    fn wait(&mut self, ticket: Ticket, deadline: Option<Instant>) -> Result<Reply, CallError> {
        loop {
            if let Some(r) = self.take_ready(ticket) {
                return r;
            }
            if !self.pending.contains_key(&ticket.0) {
                return Err(self
                    .not_connected()
                    .unwrap_or(CallError::UnknownTicket { ticket }));
            }
            if self.try_take()? {
                continue;
            }
            if self.conn.peer_closed() {
                if self.try_take()? {
                    continue;
                }
                self.pending.clear();
                return Err(self.lose("the node closed the connection".into()));
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Err(CallError::TimedOut { ticket });
            }
            let slice = now + Duration::from_millis(LIVENESS_CHECK_MS);
            let until = deadline.map_or(slice, |d| d.min(slice));
            match self.conn.recv(&mut self.dec, Some(until)) {
                Ok(()) => self.accept()?,
                Err(ConnectionError::TimedOut) => {}
                Err(e) => return Err(self.lose(format!("outcome ring unusable: {e}"))),
            }
        }
    }

    fn in_flight(&self) -> usize {
        self.pending.len() + self.ready.len()
    }

    fn call_timeout(&self) -> Option<Duration> {
        self.call_timeout
    }
}

#[cfg(test)]
mod tests;
