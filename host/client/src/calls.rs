//! The calls an application makes, in process and out of process alike: the
//! [`KvClient`] trait and the values its calls return.
//!
//! - single-key calls (Dandelion §3): [`KvClient::get`], [`KvClient::put`],
//!   [`KvClient::insert`], [`KvClient::delete`];
//! - the one-shot transaction ([`KvClient::txn`] of a [`crate::Txn`]);
//! - a registered procedure by name or id ([`KvClient::call`], Xenic
//!   §4.2.2), names resolved once when the client is set up.
//!
//! Every call is blocking (submit, then wait) or asynchronous:
//! [`KvClient::submit`] returns a [`Ticket`], and [`KvClient::poll_one`],
//! [`KvClient::poll_all`] (non-blocking) or [`KvClient::wait`] (until a
//! deadline) hand back its [`Completion`]. A committed call returns its
//! results; anything else is a typed [`CallError`].
//!
//! Implemented by the out-of-process [`crate::Client`] (rings in shared
//! memory, L5 §III) and by the embedding API's in-process client
//! (`splitkv_host::Client`).

use crate::error::{CallError, Ticket};
use crate::txn_builder::Txn;
use splitkv_layout::app::{Branch, GetResult, GetValue, Status, TxnResult};
use splitkv_layout::{DecodeError, Key};
use std::time::{Duration, Instant};

/// Default bound on a blocking call's wait for its outcome, ms
/// ([`KvClient::call_timeout`]).
pub const CALL_TIMEOUT_MS_DEFAULT: u64 = 10_000;

/// A key's value and version, as a get read it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Versioned {
    /// The key's version (at most `splitkv_layout::VERSION_MAX`).
    pub version: u64,
    /// The key's value (at most the node's `value_bytes_max` bytes).
    pub value: Vec<u8>,
}

/// The result of a committed [`crate::Txn`]: the branch that ran, and for
/// each get of that branch, in order, what it read (`None`: absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOutput {
    /// The branch that ran ([`Branch::Failure`] when a compare failed: the
    /// transaction still committed).
    pub branch: Branch,
    /// One entry per get of that branch, in order.
    pub gets: Vec<Option<Versioned>>,
}

impl TxnOutput {
    /// Whether every compare held.
    pub fn succeeded(&self) -> bool {
        self.branch == Branch::Success
    }

    /// The owned form of a decoded result.
    pub fn from_result(result: &TxnResult<'_>) -> TxnOutput {
        TxnOutput {
            branch: result.branch(),
            gets: result
                .gets()
                .map(|g| match g {
                    GetResult::NotFound => None,
                    GetResult::Found { version, value } => Some(Versioned {
                        version,
                        value: value.to_vec(),
                    }),
                })
                .collect(),
        }
    }

    /// Decodes a committed transaction's result body and checks it against
    /// what the transaction asked: as many gets as the branch that ran has
    /// (`gets[0]` success, `gets[1]` failure).
    ///
    /// # Errors
    /// The result's [`DecodeError`], or [`DecodeError::Inconsistent`] for a
    /// get count that does not fit.
    pub fn decode(body: &[u8], gets: [usize; 2]) -> Result<TxnOutput, DecodeError> {
        let r = TxnResult::decode(body)?;
        if r.get_count() != gets[r.branch() as usize] {
            return Err(DecodeError::Inconsistent {
                what: "TxnResult",
                detail: "get count differs from the branch's gets",
            });
        }
        Ok(TxnOutput::from_result(&r))
    }
}

/// What a committed call returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A get's value and version.
    Value(Versioned),
    /// A put, insert or delete committed (no body).
    Written,
    /// A transaction's result.
    Txn(TxnOutput),
    /// A procedure's output bytes.
    Output(Vec<u8>),
}

/// A procedure, by the name the client resolved when it was set up, or by
/// id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProcedureRef<'a> {
    /// A name (resolved once, at connection time).
    Name(&'a str),
    /// An id the node gave (or the embedding registry's).
    Id(u32),
}

impl<'a> From<&'a str> for ProcedureRef<'a> {
    fn from(name: &'a str) -> Self {
        ProcedureRef::Name(name)
    }
}

impl From<u32> for ProcedureRef<'_> {
    fn from(id: u32) -> Self {
        ProcedureRef::Id(id)
    }
}

/// One call, borrowed, for [`KvClient::submit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call<'a> {
    /// Read one key (Dandelion `GetOne`).
    Get(Key),
    /// Write one key, creating it if absent (`PutOne`).
    Put(Key, &'a [u8]),
    /// Create one key that must be absent (`InsertOne`).
    Insert(Key, &'a [u8]),
    /// Delete one key that must be present (`DeleteOne`).
    Delete(Key),
    /// Run a one-shot transaction.
    Txn(&'a Txn),
    /// Run a registered procedure with these arguments.
    Procedure(ProcedureRef<'a>, &'a [u8]),
}

/// A finished call handed back by [`KvClient::poll_one`]: its ticket and
/// how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The call's ticket.
    pub ticket: Ticket,
    /// Its results, or why it did not commit.
    pub result: Result<Reply, CallError>,
}

/// What the body of a committed outcome must be, by the call that asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// A get: a `GetValue`.
    Value,
    /// A put, insert or delete: empty.
    Written,
    /// A transaction with this many gets in its success and failure
    /// branches: a `TxnResult` that fits.
    Txn([usize; 2]),
    /// A procedure: its output, any bytes.
    Output,
}

impl Expect {
    /// What a call of this kind expects.
    pub fn of(call: &Call<'_>) -> Expect {
        match call {
            Call::Get(_) => Expect::Value,
            Call::Put(..) | Call::Insert(..) | Call::Delete(_) => Expect::Written,
            Call::Txn(t) => {
                Expect::Txn([t.get_count(Branch::Success), t.get_count(Branch::Failure)])
            }
            Call::Procedure(..) => Expect::Output,
        }
    }

    /// How the call with request id `req_id` ended, from its outcome's
    /// `status` and `body` (a result when committed, else a reason text).
    ///
    /// # Errors
    /// The [`CallError`] of a status other than committed;
    /// [`CallError::BadOutcome`] for a committed body that does not fit.
    pub fn reply(self, req_id: u64, status: Status, body: &[u8]) -> Result<Reply, CallError> {
        if let Some(e) = CallError::from_status(status, &String::from_utf8_lossy(body)) {
            return Err(e);
        }
        let bad = |error| CallError::bad(req_id, error);
        Ok(match self {
            Expect::Value => {
                let v = GetValue::decode(body).map_err(bad)?;
                Reply::Value(Versioned {
                    version: v.version,
                    value: v.value.to_vec(),
                })
            }
            Expect::Written if body.is_empty() => Reply::Written,
            Expect::Written => {
                return Err(bad(DecodeError::Inconsistent {
                    what: "outcome",
                    detail: "a body on a committed put, insert or delete",
                }))
            }
            Expect::Txn(gets) => Reply::Txn(TxnOutput::decode(body, gets).map_err(bad)?),
            Expect::Output => Reply::Output(body.to_vec()),
        })
    }
}

/// A reply of another kind than the call's: a bug of the implementation
/// (each checks the body against the call), reported rather than panicked.
fn wrong_reply(ticket: Ticket) -> CallError {
    CallError::bad(
        ticket.0,
        DecodeError::Inconsistent {
            what: "reply",
            detail: "a reply of another kind than the call",
        },
    )
}

/// The calls of a client of a splitkv node (module docs). One client is used
/// by one thread at a time; open one per thread.
pub trait KvClient {
    /// Sends `call` and returns its ticket without waiting.
    ///
    /// # Errors
    /// Nothing was sent when this fails: [`CallError::InFlightFull`] (the
    /// granted bound), [`CallError::Busy`] (request ring full),
    /// [`CallError::TooLarge`] (a value or arguments over the node's limits),
    /// [`CallError::InvalidTxn`], [`CallError::UnknownProcedure`] (a name not
    /// resolved at set-up), [`CallError::NotConnected`].
    fn submit(&mut self, call: Call<'_>) -> Result<Ticket, CallError>;

    /// Hands back one finished call if there is one, without blocking.
    ///
    /// # Errors
    /// [`CallError::UnmatchedOutcome`] or [`CallError::BadOutcome`] for an
    /// outcome entry the node should not have sent (consumed; poll again),
    /// [`CallError::NotConnected`] when the connection is gone and no
    /// outcome is left.
    fn poll_one(&mut self) -> Result<Option<Completion>, CallError>;

    /// Waits until the call with `ticket` finishes or `deadline` passes
    /// (`None`: no bound), and returns how it ended. Other calls finishing
    /// meanwhile are kept for [`KvClient::poll_one`].
    ///
    /// # Errors
    /// The call's own [`CallError`]; [`CallError::TimedOut`] (still in
    /// flight), [`CallError::UnknownTicket`], [`CallError::NotConnected`],
    /// and the errors of [`KvClient::poll_one`] for another call's bad
    /// outcome met on the way (the wait can be repeated).
    fn wait(&mut self, ticket: Ticket, deadline: Option<Instant>) -> Result<Reply, CallError>;

    /// Calls submitted whose completions have not been handed back yet;
    /// counted against the in-flight bound.
    fn in_flight(&self) -> usize;

    /// Bound on a blocking call's wait ([`CALL_TIMEOUT_MS_DEFAULT`] unless
    /// the implementation says otherwise; `None`: no bound).
    fn call_timeout(&self) -> Option<Duration> {
        Some(Duration::from_millis(CALL_TIMEOUT_MS_DEFAULT))
    }

    /// Hands back every finished call now available into `out`; returns
    /// how many.
    ///
    /// # Errors
    /// As [`KvClient::poll_one`]; completions gathered before the error stay
    /// in `out`.
    fn poll_all(&mut self, out: &mut Vec<Completion>) -> Result<usize, CallError> {
        let mut n = 0;
        while let Some(c) = self.poll_one()? {
            out.push(c);
            n += 1;
        }
        Ok(n)
    }

    /// Submits `call` and waits for it within [`KvClient::call_timeout`].
    ///
    /// # Errors
    /// As [`KvClient::submit`] and [`KvClient::wait`].
    fn run(&mut self, call: Call<'_>) -> Result<(Ticket, Reply), CallError> {
        let ticket = self.submit(call)?;
        let deadline = self.call_timeout().map(|t| Instant::now() + t);
        Ok((ticket, self.wait(ticket, deadline)?))
    }

    /// Reads `key`: its value and version.
    ///
    /// # Errors
    /// [`CallError::KeyNotFound`] for an absent key; an
    /// [`CallError::Aborted`] lock conflict (retryable) for a key being
    /// written; the errors of [`KvClient::run`].
    fn get(&mut self, key: Key) -> Result<Versioned, CallError> {
        match self.run(Call::Get(key))? {
            (_, Reply::Value(v)) => Ok(v),
            (t, _) => Err(wrong_reply(t)),
        }
    }

    /// Writes `value` at `key`, creating it if absent.
    ///
    /// # Errors
    /// As [`KvClient::run`].
    fn put(&mut self, key: Key, value: &[u8]) -> Result<(), CallError> {
        match self.run(Call::Put(key, value))? {
            (_, Reply::Written) => Ok(()),
            (t, _) => Err(wrong_reply(t)),
        }
    }

    /// Creates `key` with `value`; the key must be absent.
    ///
    /// # Errors
    /// [`CallError::Aborted`] with `AbortReason::CompareFailed` if it
    /// exists; the errors of [`KvClient::run`].
    fn insert(&mut self, key: Key, value: &[u8]) -> Result<(), CallError> {
        match self.run(Call::Insert(key, value))? {
            (_, Reply::Written) => Ok(()),
            (t, _) => Err(wrong_reply(t)),
        }
    }

    /// Deletes `key`; the key must be present.
    ///
    /// # Errors
    /// [`CallError::KeyNotFound`] if it is absent; the errors of
    /// [`KvClient::run`].
    fn delete(&mut self, key: Key) -> Result<(), CallError> {
        match self.run(Call::Delete(key))? {
            (_, Reply::Written) => Ok(()),
            (t, _) => Err(wrong_reply(t)),
        }
    }

    /// Runs a one-shot transaction: the branch that ran and what its gets
    /// read. A failed compare is not an error (the failure branch commits).
    ///
    /// # Errors
    /// [`CallError::InvalidTxn`] before sending; the errors of
    /// [`KvClient::run`].
    fn txn(&mut self, txn: &Txn) -> Result<TxnOutput, CallError> {
        match self.run(Call::Txn(txn))? {
            (_, Reply::Txn(t)) => Ok(t),
            (t, _) => Err(wrong_reply(t)),
        }
    }

    /// Runs a registered procedure by name or id; returns its output.
    ///
    /// # Errors
    /// [`CallError::UnknownProcedure`]; a user abort or conflict as
    /// [`CallError::Aborted`]; the errors of [`KvClient::run`].
    fn call<'p>(
        &mut self,
        procedure: impl Into<ProcedureRef<'p>>,
        args: &[u8],
    ) -> Result<Vec<u8>, CallError>
    where
        Self: Sized,
    {
        match self.run(Call::Procedure(procedure.into(), args))? {
            (_, Reply::Output(o)) => Ok(o),
            (t, _) => Err(wrong_reply(t)),
        }
    }
}
