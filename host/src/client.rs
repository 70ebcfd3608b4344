//! The application API (L5 §3: applications talk to the node through
//! shared-memory rings): submit a shipped-procedure request, poll outcomes —
//! or [`Client::call`], which does both and waits.
//!
//! The same client also offers the calls of an application in its own
//! process ([`splitkv_client::KvClient`]: get, put, insert, delete, the
//! one-shot transaction, procedures by name), with the same typed results
//! (`calls` module docs). Its inherent `submit` and `call` take a procedure
//! id; the trait's are reached as `KvClient::submit(&mut client, ..)`.
//!
//! Each application thread has a client of its own (its own request and
//! outcome ring); the node's NIC runtime serves its clients fairly and returns
//! each outcome to the client that submitted the request.
//!
//! A client of a cluster built with
//! [`ClusterBuilder::observe_calls`](crate::cluster::ClusterBuilder::observe_calls)
//! reports every submission and outcome to the cluster's
//! [`CallObserver`](crate::observe::CallObserver) (see [`crate::observe`]:
//! invoke times are read before the push, completion times after the pop).

use crate::cluster::Shared;
use crate::observe::{ClientObservation, Observation};
use splitkv_layout::host_nic::{self, HostToNic, NicToHost, TxRequest, TxStatus, ARGS_BYTES_MAX};
use splitkv_layout::ring::{RingConsumer, RingError, RingProducer};
use splitkv_layout::wire::NodeId;
use splitkv_layout::DecodeError;
use std::sync::Arc;

mod calls;

/// Polls of an empty outcome ring in [`Client::call`] before the waiting
/// thread yields the CPU to the cluster's polling threads.
pub const CALL_SPINS_BEFORE_YIELD: u32 = 64;

/// Why a submission or poll failed. A failed submission changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// Arguments over [`ARGS_BYTES_MAX`].
    #[error("procedure arguments of {len} B exceed the maximum {max} B")]
    ArgsTooLarge {
        /// Bytes given.
        len: usize,
        /// Limit.
        max: usize,
    },
    /// The request ring is full: poll outcomes and try again.
    #[error("request ring full")]
    Busy,
    /// An outcome entry did not decode.
    #[error("bad outcome entry: {0}")]
    BadOutcome(#[from] DecodeError),
    /// A ring failed.
    #[error("ring: {0}")]
    Ring(RingError),
    /// [`Client::call`] on a client with `0` submitted requests whose outcomes
    /// have not been polled; `call` would take their outcomes.
    #[error("{0} submitted requests still await poll(); call() needs none outstanding")]
    Outstanding(u64),
    /// The cluster this client belongs to was shut down.
    #[error("the cluster was shut down")]
    ShutDown,
    /// A node of the cluster stopped on a fault, which stopped the cluster
    /// ([`ClusterError::NodeStopped`](crate::cluster::ClusterError::NodeStopped)).
    #[error("the cluster stopped: node {node} stopped: {reason}")]
    NodeStopped {
        /// The node.
        node: splitkv_layout::wire::NodeId,
        /// Why it stopped.
        reason: String,
    },
    /// A polling thread of the cluster panicked, which stopped the cluster.
    #[error("the cluster stopped: polling thread {thread} panicked: {message}")]
    Panicked {
        /// Name of the thread that panicked.
        thread: String,
        /// The panic's message.
        message: String,
    },
}

/// The outcome of one transaction, owned (what [`Client::call`] returns): the
/// owned form of the outcome ring's [`host_nic::TxOutcome`], without its `req_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOutcome {
    /// How the transaction ended: committed, or why not.
    pub status: TxStatus,
    /// The procedure's result on commit, and on [`TxStatus::Unknown`] the
    /// result it has if it committed (at most
    /// [`RESULT_BYTES_MAX`](splitkv_layout::host_nic::RESULT_BYTES_MAX) bytes);
    /// a short reason when rejected.
    pub result: Vec<u8>,
}

impl ClientOutcome {
    /// Whether the transaction committed.
    pub fn is_committed(&self) -> bool {
        self.status == TxStatus::Committed
    }

    /// Whether it may or may not have committed ([`TxStatus::Unknown`]):
    /// do not resubmit it blindly.
    pub fn is_unknown(&self) -> bool {
        self.status.is_indeterminate()
    }
}

/// One application thread's connection to its node: a request ring and an
/// outcome ring (L5 §3). Non-blocking [`Client::submit`] / [`Client::poll`],
/// or blocking [`Client::call`].
#[derive(Debug)]
pub struct Client {
    requests: RingProducer,
    outcomes: RingConsumer,
    enc: Vec<u8>,
    dec: Vec<u8>,
    /// Submitted requests whose outcomes have not been polled.
    outstanding: u64,
    next_call_id: u64,
    cluster: Option<Arc<Shared>>,
    /// Set when the cluster observes calls ([`crate::observe`]).
    observed: Option<Box<ClientObservation>>,
    /// The calls of [`splitkv_client::KvClient`] in flight ([`calls`]).
    calls: calls::CallState,
}

impl Client {
    /// A client over a request ring (to the NIC runtime) and an outcome ring (from it).
    pub fn new(requests: RingProducer, outcomes: RingConsumer) -> Client {
        Client {
            requests,
            outcomes,
            enc: Vec::with_capacity(2048),
            dec: Vec::with_capacity(2048),
            outstanding: 0,
            next_call_id: 0,
            cluster: None,
            observed: None,
            calls: calls::CallState::default(),
        }
    }

    /// Ties the client to a running cluster, so that [`Client::call`] stops
    /// waiting when the cluster shuts down or a polling thread panics.
    pub(crate) fn attach(&mut self, cluster: Arc<Shared>) {
        self.cluster = Some(cluster);
    }

    /// Reports this client's calls to `observation`, as client `client` of
    /// node `node`.
    pub(crate) fn observe(&mut self, observation: Arc<Observation>, node: NodeId, client: u32) {
        self.observed = Some(Box::new(ClientObservation::new(observation, node, client)));
    }

    /// Submitted requests whose outcomes have not been polled yet.
    pub fn outstanding(&self) -> u64 {
        self.outstanding
    }

    /// Runs `procedure(args)` as one transaction and waits for its outcome.
    ///
    /// Blocks (spinning, then yielding) until the outcome arrives: some other
    /// thread must be driving the node (a running [`crate::Cluster`] does).
    ///
    /// # Errors
    /// [`ClientError::Outstanding`] when requests submitted with
    /// [`Client::submit`] still await [`Client::poll`]; the errors of `submit`
    /// and `poll`; [`ClientError::ShutDown`] or [`ClientError::Panicked`] when
    /// the client's cluster stopped before the outcome arrived (an observer
    /// is then told the outcome is unknown).
    pub fn call(&mut self, procedure: u32, args: &[u8]) -> Result<ClientOutcome, ClientError> {
        if self.outstanding != 0 {
            return Err(ClientError::Outstanding(self.outstanding));
        }
        let id = self.next_call_id;
        self.next_call_id = self.next_call_id.wrapping_add(1);
        let mut spins = 0u32;
        loop {
            match self.submit(id, procedure, args) {
                Ok(()) => break,
                Err(ClientError::Busy) => self.wait_step(&mut spins)?,
                Err(e) => return Err(e),
            }
        }
        let mut got = None;
        loop {
            self.poll(1, |o| {
                got = Some(ClientOutcome {
                    status: o.status,
                    result: o.result.to_vec(),
                })
            })?;
            if let Some(o) = got.take() {
                return Ok(o);
            }
            if let Err(e) = self.wait_step(&mut spins) {
                if let Some(obs) = &mut self.observed {
                    obs.abandon_all();
                }
                return Err(e);
            }
        }
    }

    /// One wait step of [`Client::call`]: spin, then yield; fails when the
    /// cluster has stopped.
    fn wait_step(&self, spins: &mut u32) -> Result<(), ClientError> {
        if let Some(c) = &self.cluster {
            c.client_check()?;
        }
        *spins += 1;
        if *spins >= CALL_SPINS_BEFORE_YIELD {
            *spins = 0;
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
        Ok(())
    }

    /// Submits `procedure(args)` tagged with `req_id` (echoed in its outcome).
    ///
    /// # Errors
    /// [`ClientError::ArgsTooLarge`], [`ClientError::Busy`] (ring full: poll
    /// and retry) or [`ClientError::Ring`]; nothing was submitted then.
    pub fn submit(&mut self, req_id: u64, procedure: u32, args: &[u8]) -> Result<(), ClientError> {
        if args.len() > ARGS_BYTES_MAX {
            return Err(ClientError::ArgsTooLarge {
                len: args.len(),
                max: ARGS_BYTES_MAX,
            });
        }
        self.enc.clear();
        HostToNic::TxRequest(TxRequest {
            req_id,
            procedure,
            args,
        })
        .encode(&mut self.enc);
        // Read before the push: the recorded invoke is never late.
        let invoked_ns = self.observed.as_ref().map(|o| o.now());
        match self.requests.try_push(&self.enc) {
            Ok(_) => {
                self.outstanding += 1;
                if let (Some(obs), Some(t)) = (&mut self.observed, invoked_ns) {
                    obs.invoked(req_id, procedure, args, t);
                }
                Ok(())
            }
            Err(RingError::Full) => Err(ClientError::Busy),
            Err(e) => Err(ClientError::Ring(e)),
        }
    }

    /// Pushes `bytes` as one raw request-ring entry, bypassing encoding. For
    /// testing how the node treats malformed entries; applications use
    /// [`Client::submit`].
    pub fn submit_raw(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        match self.requests.try_push(bytes) {
            Ok(_) => Ok(()),
            Err(RingError::Full) => Err(ClientError::Busy),
            Err(e) => Err(ClientError::Ring(e)),
        }
    }

    /// Calls `f` for each available outcome (at most `max`); returns how many.
    /// An observer sees each outcome before `f` does.
    ///
    /// # Errors
    /// [`ClientError::Ring`] or [`ClientError::BadOutcome`] for a ring entry
    /// that cannot be read.
    pub fn poll(
        &mut self,
        max: usize,
        mut f: impl FnMut(&host_nic::TxOutcome<'_>),
    ) -> Result<usize, ClientError> {
        let mut n = 0;
        while n < max {
            match self.outcomes.try_pop(&mut self.dec) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => return Err(ClientError::Ring(e)),
            }
            self.outstanding = self.outstanding.saturating_sub(1);
            match NicToHost::decode(&self.dec)? {
                NicToHost::TxOutcome(o) => {
                    if let Some(obs) = &mut self.observed {
                        // Read after the pop: the recorded completion is never early.
                        let t = obs.now();
                        obs.completed(o.req_id, o.status, o.result, t);
                    }
                    f(&o)
                }
            }
            n += 1;
        }
        Ok(n)
    }
}

impl Drop for Client {
    /// An observed client dropped with calls outstanding reports them as
    /// unknown: it will never learn their outcomes.
    fn drop(&mut self) {
        if let Some(obs) = &mut self.observed {
            obs.abandon_all();
        }
    }
}
