//! Observing the application API: a hook that sees every transaction an
//! application submits through a [`Client`](crate::Client) of an observed
//! cluster, and its outcome — what a history recorder (Jepsen's shape, as in
//! Elle, Kingsbury & Alvaro, VLDB'20) needs to check the run for strict
//! serializability.
//!
//! Register a [`CallObserver`] with
//! [`ClusterBuilder::observe_calls`](crate::cluster::ClusterBuilder::observe_calls);
//! every client of the cluster then calls it
//!
//! - [`CallObserver::invoked`] once per accepted submission
//!   ([`Client::submit`](crate::Client::submit), and so
//!   [`Client::call`](crate::Client::call)), after the request entered the
//!   ring; a refused submission (ring full, arguments too large) is not
//!   reported;
//! - [`CallObserver::completed`] once per submission: with
//!   [`CallOutcome::Completed`] when [`Client::poll`](crate::Client::poll)
//!   (or `call`) takes its outcome, or [`CallOutcome::Unknown`] when the
//!   client gives up on it — `call` failed because the cluster stopped, or
//!   the client was dropped with the call outstanding. An unknown call may or
//!   may not have committed.
//!
//! **Times are sound for real-time order.** A call's invoke time is read
//! *before* its request is pushed onto the ring, and its completion time
//! *after* its outcome was popped from the ring; so the recorded interval
//! contains the transaction's real one, and "T1 completed before T2 was
//! invoked" by the recorded times holds in fact. Times are nanoseconds on the
//! cluster's monotonic clock ([`Cluster::now`](crate::Cluster::now)), shared
//! by every client of one cluster. Parts driven by another driver (the
//! simulator) without ever being started read the same clock, whose origin is
//! then fixed by the first observed call: it is the machine's clock, not
//! virtual time.
//!
//! **Cost.** With no observer registered a client pays one branch per
//! submission and per outcome. With one, a client keeps each outstanding
//! call's arguments (buffers reused once warm) to report them again at
//! completion; there are at most as many as the client's rings and its node
//! hold requests for.
//!
//! An outcome whose request id matches no outstanding observed call (a
//! request pushed with [`Client::submit_raw`](crate::Client::submit_raw)) is
//! not reported. When an application reuses a request id while an earlier
//! call with it is outstanding, an outcome is matched to the oldest of them.

use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::wire::NodeId;
use splitkv_nic::Nanos;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// One call of the application API, as an observer sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallRecord<'a> {
    /// The node whose client submitted the call.
    pub node: NodeId,
    /// The client's index at its node, `0..clients_per_node`.
    pub client: u32,
    /// The call's sequence number at its client: 0, 1, 2... in submission
    /// order (a refused submission takes none).
    pub seq: u64,
    /// The request id the application tagged it with (`call` numbers its own).
    pub req_id: u64,
    /// The procedure's id (its registration index).
    pub procedure: u32,
    /// The procedure's arguments, as submitted.
    pub args: &'a [u8],
    /// When the event happened, in nanoseconds on the cluster's clock: for
    /// [`CallObserver::invoked`] read before the request was pushed, for
    /// [`CallObserver::completed`] after the outcome was popped (or when the
    /// client gave up on it).
    pub time_ns: Nanos,
}

/// How an observed call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOutcome<'a> {
    /// The node's outcome: committed, or why not.
    Completed {
        /// How the transaction ended.
        status: TxStatus,
        /// The procedure's result on commit; a short reason when rejected.
        result: &'a [u8],
    },
    /// The client never learned the outcome (the cluster stopped while the
    /// call was outstanding, or the client was dropped): the transaction may
    /// or may not have committed.
    Unknown,
}

/// A hook on every call of an observed cluster's clients (see the module
/// docs). Calls come from the application threads that own the clients, so
/// an implementation synchronises itself; it should be quick, since the
/// client waits for it.
pub trait CallObserver: Send + Sync {
    /// `call` was accepted into the request ring.
    fn invoked(&self, call: &CallRecord<'_>);

    /// `call` (the same node, client, sequence number, request id, procedure
    /// and arguments as its invoke; `time_ns` the completion's) ended with
    /// `outcome`.
    fn completed(&self, call: &CallRecord<'_>, outcome: &CallOutcome<'_>);
}

/// An observer shared by the clients of one cluster, with the origin of the
/// cluster's clock.
pub(crate) struct Observation {
    pub(crate) observer: Arc<dyn CallObserver>,
    origin: OnceLock<Instant>,
}

impl std::fmt::Debug for Observation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observation")
            .field("origin", &self.origin.get())
            .finish_non_exhaustive()
    }
}

impl Observation {
    pub(crate) fn new(observer: Arc<dyn CallObserver>) -> Observation {
        Observation {
            observer,
            origin: OnceLock::new(),
        }
    }

    /// The clock's origin, `candidate` if it had none.
    pub(crate) fn origin_or(&self, candidate: Instant) -> Instant {
        *self.origin.get_or_init(|| candidate)
    }

    /// Nanoseconds on the cluster's clock now.
    pub(crate) fn now(&self) -> Nanos {
        self.origin_or(Instant::now()).elapsed().as_nanos() as Nanos
    }
}

/// A call submitted and not completed yet.
#[derive(Debug)]
struct Pending {
    seq: u64,
    req_id: u64,
    procedure: u32,
    args: Vec<u8>,
}

/// One client's side of an observation: who it is, and its outstanding calls.
#[derive(Debug)]
pub(crate) struct ClientObservation {
    shared: Arc<Observation>,
    node: NodeId,
    client: u32,
    next_seq: u64,
    pending: Vec<Pending>,
    spare: Vec<Vec<u8>>,
}

impl ClientObservation {
    pub(crate) fn new(shared: Arc<Observation>, node: NodeId, client: u32) -> ClientObservation {
        ClientObservation {
            shared,
            node,
            client,
            next_seq: 0,
            pending: Vec::new(),
            spare: Vec::new(),
        }
    }

    /// The cluster's clock now.
    pub(crate) fn now(&self) -> Nanos {
        self.shared.now()
    }

    fn record<'a>(&self, p: &'a Pending, time_ns: Nanos) -> CallRecord<'a> {
        CallRecord {
            node: self.node,
            client: self.client,
            seq: p.seq,
            req_id: p.req_id,
            procedure: p.procedure,
            args: &p.args,
            time_ns,
        }
    }

    /// A submission taken at `time_ns` (read before the push).
    pub(crate) fn invoked(&mut self, req_id: u64, procedure: u32, args: &[u8], time_ns: Nanos) {
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(args);
        let p = Pending {
            seq: self.next_seq,
            req_id,
            procedure,
            args: buf,
        };
        self.next_seq += 1;
        self.shared.observer.invoked(&self.record(&p, time_ns));
        self.pending.push(p);
    }

    /// An outcome popped at `time_ns`.
    pub(crate) fn completed(
        &mut self,
        req_id: u64,
        status: TxStatus,
        result: &[u8],
        time_ns: Nanos,
    ) {
        let Some(i) = self.pending.iter().position(|p| p.req_id == req_id) else {
            return;
        };
        let p = self.pending.remove(i);
        let outcome = CallOutcome::Completed { status, result };
        self.shared
            .observer
            .completed(&self.record(&p, time_ns), &outcome);
        self.spare.push(p.args);
    }

    /// Reports every outstanding call as [`CallOutcome::Unknown`].
    pub(crate) fn abandon_all(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let time_ns = self.now();
        for p in std::mem::take(&mut self.pending) {
            self.shared
                .observer
                .completed(&self.record(&p, time_ns), &CallOutcome::Unknown);
            self.spare.push(p.args);
        }
    }
}
