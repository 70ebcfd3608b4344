//! The in-process [`Client`] offers the calls of an application in its own
//! process ([`splitkv_client::KvClient`]; `splitkv_client::Client`), with the
//! same typed results, on its host↔NIC rings.
//!
//! Every call is one request on the client's ring: a procedure by id or by
//! name (names of the node's registry, resolved when the node is built), a
//! one-shot transaction through the built-in ([`TXN_PROCEDURE_ID`];
//! `splitkv_nic::procedure::txn`), and the single-key calls as Dandelion
//! §3's `GetOne`/`PutOne`/`InsertOne`/`DeleteOne` in one round at the key's primary
//! (`splitkv_nic::protocol::single_key`), which answer in the built-in's
//! result shape:
//!
//! | call | request | committed result |
//! |---|---|---|
//! | `get(k)` | GetOne ([`GET_ONE_PROCEDURE_ID`]) of `k` | found: the value; not found: [`CallError::KeyNotFound`]; locked: [`CallError::Aborted`] with [`AbortReason::LockConflict`] (retryable) |
//! | `put(k, v)` | WriteOne ([`WRITE_ONE_PROCEDURE_ID`]): success `[put k v]` | written |
//! | `insert(k, v)` | WriteOne: `absent(k)`, success `[put k v]` | failure branch: [`CallError::Aborted`] with [`AbortReason::CompareFailed`] |
//! | `delete(k)` | WriteOne: `present(k)`, success `[delete k]` (the key's tombstone) | failure branch: [`CallError::KeyNotFound`] |
//!
//! A deleted key reads as not found; an insert over it succeeds with the
//! version after its tombstone's. An unknown procedure id is
//! [`CallError::Rejected`] (the NIC runtime does not tell it apart); an
//! unknown name is [`CallError::UnknownProcedure`] before anything is sent.
//! The host↔NIC status maps to the application's as
//! `splitkv_layout::app::Status::from` says.
//!
//! Calls in flight are bounded by [`APP_IN_FLIGHT_MAX`] (a completion counts
//! until handed back) and by the request ring ([`CallError::Busy`]). Do not
//! mix these calls with [`Client::submit`] / [`Client::poll`] /
//! [`Client::call`] on one client: their outcomes would be taken by the
//! other API ([`CallError::UnmatchedOutcome`]).

use super::{Client, ClientError};
use splitkv_client::{
    Call, CallError, Completion, Expect, KvClient, ProcedureRef, Reply, Ticket, Txn, TxnOp,
    TxnOutput,
};
use splitkv_client::{Cmp, TxnError};
use splitkv_layout::app::{AbortReason, Branch, Status, APP_IN_FLIGHT_MAX};
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::VALUE_BYTES_MAX;
use splitkv_nic::procedure::txn::{TXN_PROCEDURE_ID, TXN_PROCEDURE_NAME};
use splitkv_nic::protocol::single_key::{GET_ONE_PROCEDURE_ID, WRITE_ONE_PROCEDURE_ID};
use splitkv_nic::ProcedureRegistry;
use std::collections::{HashMap, VecDeque};
use std::time::Instant;

/// What a call expects back, by how it was run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// A one-key transaction standing for a single-key call.
    Single(Single),
    /// A transaction or procedure: the body as `Expect` reads it.
    Direct(Expect),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Single {
    Get,
    Put,
    Insert,
    Delete,
}

/// The state of the calls of [`KvClient`] on an in-process client.
#[derive(Debug)]
pub(super) struct CallState {
    /// `(name, id)` of the node's procedures.
    names: Vec<(String, u32)>,
    value_bytes_max: usize,
    next_req_id: u64,
    pending: HashMap<u64, Via>,
    ready: VecDeque<Completion>,
}

impl Default for CallState {
    fn default() -> Self {
        CallState {
            names: vec![(TXN_PROCEDURE_NAME.to_owned(), TXN_PROCEDURE_ID)],
            value_bytes_max: VALUE_BYTES_MAX,
            next_req_id: 0,
            pending: HashMap::new(),
            ready: VecDeque::new(),
        }
    }
}

/// The cluster stopped, or a ring failed: the calls in flight will not end.
fn not_connected(e: ClientError) -> CallError {
    CallError::NotConnected {
        detail: e.to_string(),
    }
}

impl Client {
    /// Resolves procedure names to the ids of `registry` (every registered
    /// procedure and the built-in `txn`), for [`KvClient::call`] by name,
    /// and bounds values at `value_bytes_max` (the node's table's). Done by
    /// the node builder for every client it makes.
    pub fn resolve_procedures(&mut self, registry: &ProcedureRegistry, value_bytes_max: usize) {
        let state = &mut self.calls;
        state.names.truncate(1);
        state.names.extend(
            (0u32..)
                .map_while(|id| registry.get(id).ok().map(|p| (p.name().to_owned(), id)))
                .filter(|(n, _)| n != TXN_PROCEDURE_NAME),
        );
        state.value_bytes_max = value_bytes_max.min(VALUE_BYTES_MAX);
    }

    /// The id of the procedure named `name` ([`Client::resolve_procedures`]).
    ///
    /// # Errors
    /// [`CallError::UnknownProcedure`].
    pub fn procedure_id(&self, name: &str) -> Result<u32, CallError> {
        self.calls
            .names
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, id)| *id)
            .ok_or_else(|| CallError::UnknownProcedure {
                name: name.to_owned(),
            })
    }

    /// The one-key transaction for a single-key call; `None` for others.
    fn single_txn(call: &Call<'_>) -> Option<(Single, Txn)> {
        Some(match *call {
            Call::Get(k) => (Single::Get, Txn::new().then([TxnOp::get(k)])),
            Call::Put(k, v) => (Single::Put, Txn::new().then([TxnOp::put(k, v)])),
            Call::Insert(k, v) => (
                Single::Insert,
                Txn::new().when([Cmp::absent(k)]).then([TxnOp::put(k, v)]),
            ),
            Call::Delete(k) => (
                Single::Delete,
                Txn::new().when([Cmp::present(k)]).then([TxnOp::delete(k)]),
            ),
            Call::Txn(_) | Call::Procedure(..) => return None,
        })
    }

    /// The procedure, its arguments and what the call expects back.
    fn plan_call(&self, call: &Call<'_>) -> Result<(u32, Vec<u8>, Via), CallError> {
        let value_max = self.calls.value_bytes_max;
        let mut args = Vec::new();
        if let Call::Put(_, v) | Call::Insert(_, v) = *call {
            if v.len() > value_max {
                return Err(CallError::TooLarge {
                    detail: format!(
                        "value of {} B exceeds the node's maximum {value_max} B",
                        v.len()
                    ),
                });
            }
        }
        if let Call::Get(k) = *call {
            args.resize(splitkv_layout::KEY_BYTES, 0);
            k.encode(&mut args);
            return Ok((GET_ONE_PROCEDURE_ID, args, Via::Single(Single::Get)));
        }
        if let Some((single, txn)) = Self::single_txn(call) {
            txn.encode(value_max, &mut args)?;
            let procedure = match single {
                Single::Put | Single::Insert | Single::Delete => WRITE_ONE_PROCEDURE_ID,
                Single::Get => TXN_PROCEDURE_ID,
            };
            return Ok((procedure, args, Via::Single(single)));
        }
        match *call {
            Call::Txn(txn) => {
                txn.encode(value_max, &mut args)?;
                Ok((TXN_PROCEDURE_ID, args, Via::Direct(Expect::of(call))))
            }
            Call::Procedure(p, a) => {
                let id = match p {
                    ProcedureRef::Id(id) => id,
                    ProcedureRef::Name(name) => self.procedure_id(name)?,
                };
                Ok((id, a.to_vec(), Via::Direct(Expect::Output)))
            }
            _ => Err(CallError::InvalidTxn(TxnError::Invalid(
                splitkv_layout::DecodeError::Inconsistent {
                    what: "call",
                    detail: "a single-key call without its transaction",
                },
            ))),
        }
    }

    /// Files every available outcome of the calls in flight.
    fn take_outcomes(&mut self) -> Result<(), CallError> {
        let mut got: Vec<(u64, TxStatus, Vec<u8>)> = Vec::new();
        self.poll(usize::MAX, |o| {
            got.push((o.req_id, o.status, o.result.to_vec()))
        })
        .map_err(|e| match e {
            ClientError::BadOutcome(error) => CallError::BadOutcome {
                req_id: None,
                error,
            },
            other => not_connected(other),
        })?;
        let mut unmatched = None;
        for (req_id, status, body) in got {
            let Some(via) = self.calls.pending.remove(&req_id) else {
                unmatched.get_or_insert(CallError::UnmatchedOutcome { req_id });
                continue;
            };
            self.calls.ready.push_back(Completion {
                ticket: Ticket(req_id),
                result: reply(via, req_id, status, &body),
            });
        }
        unmatched.map_or(Ok(()), Err)
    }
}

/// How a call that ran `via` ended, from its host↔NIC outcome.
fn reply(via: Via, req_id: u64, status: TxStatus, body: &[u8]) -> Result<Reply, CallError> {
    let status = Status::from(status);
    let single = match via {
        Via::Direct(expect) => return expect.reply(req_id, status, body),
        Via::Single(s) => s,
    };
    if let Some(e) = CallError::from_status(status, &String::from_utf8_lossy(body)) {
        return Err(e);
    }
    let gets = [usize::from(single == Single::Get), 0];
    let out = TxnOutput::decode(body, gets).map_err(|error| CallError::BadOutcome {
        req_id: Some(req_id),
        error,
    })?;
    match (single, out.branch, out.gets.into_iter().next()) {
        (Single::Get, Branch::Success, Some(Some(v))) => Ok(Reply::Value(v)),
        (Single::Get, Branch::Success, Some(None)) => Err(CallError::KeyNotFound),
        (_, Branch::Success, _) => Ok(Reply::Written),
        (Single::Insert, Branch::Failure, _) => Err(CallError::Aborted {
            reason: AbortReason::CompareFailed,
            detail: "the key exists".into(),
        }),
        (Single::Delete, Branch::Failure, _) => Err(CallError::KeyNotFound),
        // A transaction without compares runs its success branch.
        (_, Branch::Failure, _) => Err(CallError::BadOutcome {
            req_id: Some(req_id),
            error: splitkv_layout::DecodeError::Inconsistent {
                what: "TxnResult",
                detail: "the failure branch of a transaction without compares",
            },
        }),
    }
}

impl KvClient for Client {
    fn submit(&mut self, call: Call<'_>) -> Result<Ticket, CallError> {
        if self.in_flight() >= APP_IN_FLIGHT_MAX {
            return Err(CallError::InFlightFull {
                max: APP_IN_FLIGHT_MAX as u32,
            });
        }
        let (procedure, args, via) = self.plan_call(&call)?;
        let mut req_id = self.calls.next_req_id;
        while self.calls.pending.contains_key(&req_id)
            || self.calls.ready.iter().any(|c| c.ticket.0 == req_id)
        {
            req_id = req_id.wrapping_add(1);
        }
        match Client::submit(self, req_id, procedure, &args) {
            Ok(()) => {}
            Err(ClientError::Busy) => return Err(CallError::Busy),
            Err(ClientError::ArgsTooLarge { len, max }) => {
                return Err(CallError::TooLarge {
                    detail: format!("arguments of {len} B exceed the maximum {max} B"),
                })
            }
            Err(e) => return Err(not_connected(e)),
        }
        self.calls.next_req_id = req_id.wrapping_add(1);
        self.calls.pending.insert(req_id, via);
        Ok(Ticket(req_id))
    }

    fn poll_one(&mut self) -> Result<Option<Completion>, CallError> {
        if self.calls.ready.is_empty() && !self.calls.pending.is_empty() {
            self.take_outcomes()?;
        }
        Ok(self.calls.ready.pop_front())
    }

    fn wait(&mut self, ticket: Ticket, deadline: Option<Instant>) -> Result<Reply, CallError> {
        let mut spins = 0;
        loop {
            if let Some(at) = self.calls.ready.iter().position(|c| c.ticket == ticket) {
                if let Some(c) = self.calls.ready.remove(at) {
                    return c.result;
                }
            }
            if !self.calls.pending.contains_key(&ticket.0) {
                return Err(CallError::UnknownTicket { ticket });
            }
            self.take_outcomes()?;
            if self.calls.ready.iter().any(|c| c.ticket == ticket) {
                continue;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(CallError::TimedOut { ticket });
            }
            if let Err(e) = self.wait_step(&mut spins) {
                self.calls.pending.clear();
                return Err(not_connected(e));
            }
        }
    }

    fn in_flight(&self) -> usize {
        self.calls.pending.len() + self.calls.ready.len()
    }
}
