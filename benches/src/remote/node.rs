//! The node side of a bench across processes: one deployed node
//! ([`ClusterBuilder::build_local_parts`]) that loads a workload's rows it
//! replicates, runs the workload's client on its own polling thread(s) as an
//! application component (co-located with the node, as FaSST and Dandelion
//! run their clients), and hands back results and the checkers' inputs.
//!
//! The node is built when the workload is loaded: the workload's procedures
//! are part of every node (Xenic §4.2.2, ids are registration indices), so
//! the transport bound at process start waits in [`RemoteNode`] until then.
//! One workload per process: a second load is a conflict.

use super::collect::LatencyFeed;
use super::journal::Journaled;
use super::protocol::*;
use crate::history::HistoryGenerator;
use crate::loadgen::{LoadGen, LoadGenConfig, RetryPolicy};
use crate::smallbank::SmallbankGenerator;
use crate::workload::{TxGenerator, Workload};
use splitkv_host::cluster::{Cluster, ClusterBuilder, ClusterParts, NodeMembership, StatsHandle};
use splitkv_host::deploy::{CallError, NodeMetrics};
use splitkv_layout::wire::NodeId;
use splitkv_nic::net::Transport;
use splitkv_nic::{Component, Nanos, ProcedureRegistry};
use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often [`RemoteNode::drain`] checks whether the client finished.
pub const DRAIN_POLL: Duration = Duration::from_millis(5);

/// The workload's client on a polling thread: stops drawing at `stop_at_ns`
/// or when `stop` is set, sets `done` once it has nothing in flight, and
/// feeds its latencies to the node's metrics (if it has them).
struct Polled<G> {
    loadgen: LoadGen<G>,
    stop_at_ns: Nanos,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    latency: Option<LatencyFeed>,
}

impl<G: TxGenerator> Component for Polled<G> {
    fn run_iteration(&mut self, now: Nanos) -> bool {
        if now >= self.stop_at_ns || self.stop.load(Ordering::Relaxed) {
            self.loadgen.stop();
        }
        let work = self.loadgen.run_iteration(now);
        if let Some(feed) = self.latency.as_mut() {
            feed.run(now, self.loadgen.latency_ns());
        }
        if self.loadgen.is_done() {
            self.done.store(true, Ordering::Release);
        }
        work
    }
}

/// A run in progress (or ended).
struct Run {
    start_ns: Nanos,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
}

/// A loaded node.
struct Loaded {
    /// What `/load` asked for (served by [`RemoteNode::workload`]).
    spec: WorkloadSpec,
    workload: BuiltWorkload,
    cluster: Cluster,
    clock: ClockOrigin,
    run: Option<Run>,
}

/// One deployed node driven by the control calls (see the module docs).
pub struct RemoteNode {
    node: NodeId,
    base: ClusterBuilder,
    transport: Option<Box<dyn Transport>>,
    loaded: Option<Loaded>,
    metrics: Option<Arc<NodeMetrics>>,
    /// Handed to the node's polling thread at load (`None`: static).
    membership: Option<NodeMembership>,
}

impl std::fmt::Debug for RemoteNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteNode")
            .field("node", &self.node)
            .field("loaded", &self.loaded.is_some())
            .finish_non_exhaustive()
    }
}

fn bad(e: impl std::fmt::Display) -> CallError {
    CallError::BadRequest(e.to_string())
}

fn internal(e: impl std::fmt::Display) -> CallError {
    CallError::Internal(e.to_string())
}

fn check_version(version: u32) -> Result<(), CallError> {
    if version == PROTOCOL_VERSION {
        Ok(())
    } else {
        Err(bad(format!(
            "protocol version {version}, this node speaks {PROTOCOL_VERSION}"
        )))
    }
}

/// `CLOCK_MONOTONIC` now, ns (the clock `Instant` reads on Linux).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl RemoteNode {
    /// Node `node` of the cluster `base` describes (every setting but the
    /// procedures, which the workload brings), over `transport`.
    pub fn new(node: NodeId, base: ClusterBuilder, transport: Box<dyn Transport>) -> RemoteNode {
        RemoteNode {
            node,
            base,
            transport: Some(transport),
            loaded: None,
            metrics: None,
            membership: None,
        }
    }

    /// Runs `membership` (its agent) beside the node's NIC runtime once a
    /// workload is loaded ([`ClusterParts::set_membership`]).
    pub fn with_membership(mut self, membership: NodeMembership) -> RemoteNode {
        self.membership = Some(membership);
        self
    }

    /// Feeds the latencies of the client this node runs (committed
    /// transactions in the measured window) to `metrics`'s
    /// `transaction_latency_us` histogram, every
    /// [`LATENCY_FEED_INTERVAL_NS`](super::collect::LATENCY_FEED_INTERVAL_NS).
    pub fn with_metrics(mut self, metrics: Arc<NodeMetrics>) -> RemoteNode {
        self.metrics = Some(metrics);
        self
    }

    /// The node id.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// `POST /load`: builds the node for the workload, loads the rows it
    /// replicates (none when [`LoadRequest::rejoin`]) and starts its
    /// polling threads. Returns the answer and a
    /// handle on the node's published counters.
    ///
    /// # Errors
    /// [`CallError::BadRequest`] for a bad body or workload;
    /// [`CallError::Conflict`] once loaded; [`CallError::Internal`] if the
    /// node cannot be built or a row does not load.
    pub fn load(
        &mut self,
        body: &serde_json::Value,
    ) -> Result<(LoadAnswer, StatsHandle), CallError> {
        let req: LoadRequest = serde_json::from_value(body.clone()).map_err(bad)?;
        check_version(req.version)?;
        if self.loaded.is_some() {
            return Err(CallError::Conflict("a workload is already loaded".into()));
        }
        let workload = req.workload.build().map_err(bad)?;
        let mut procedures = ProcedureRegistry::new();
        match &workload {
            BuiltWorkload::Smallbank(w) => w.register(&mut procedures),
            BuiltWorkload::History(w) => w.register(&mut procedures),
            BuiltWorkload::Applications => {}
        }
        let transport = self
            .transport
            .take()
            .ok_or_else(|| internal("no transport"))?;
        let builder = self.base.clone().procedures(procedures).clients_per_node(1);
        let mut parts = builder
            .build_local_parts(self.node, transport)
            .map_err(internal)?;
        if req.rejoin && self.membership.is_some() {
            // A restarted node's new process answers nothing and starts no
            // transaction until a configuration admits its incarnation, as
            // the crashed process it replaces (chaos list-append seed 107:
            // an empty table served as the old primary).
            for n in parts.nodes.iter_mut() {
                n.nic.await_admission();
            }
        }
        let none = std::iter::empty::<(splitkv_layout::Key, Vec<u8>)>();
        let loaded = match &workload {
            // A rejoining node starts empty: its shards are copied to it.
            _ if req.rejoin => parts.load(none, |_| {}),
            BuiltWorkload::Smallbank(w) => parts.load(w.initial_rows(), |_| {}),
            BuiltWorkload::History(w) => parts.load(w.initial_rows(), |_| {}),
            BuiltWorkload::Applications => parts.load(none, |_| {}),
        }
        .map_err(internal)?;
        if let Some(m) = self.membership.take() {
            parts.set_membership(self.node, m).map_err(internal)?;
        }
        let lo_ns = monotonic_ns();
        parts.set_clock_origin(Instant::now());
        let hi_ns = monotonic_ns();
        let cluster = parts.start().map_err(internal)?;
        let handle = cluster.stats_handle();
        self.loaded = Some(Loaded {
            spec: req.workload,
            workload,
            cluster,
            clock: ClockOrigin { lo_ns, hi_ns },
            run: None,
        });
        let answer = LoadAnswer {
            version: PROTOCOL_VERSION,
            node: self.node,
            rows: loaded.rows,
        };
        Ok((answer, handle))
    }

    /// `GET /workload`: the load this node took, as a body for another
    /// node's `/load` (without `rejoin`): a restarted peer loads the same
    /// workload by itself.
    ///
    /// # Errors
    /// [`CallError::Conflict`] before a load.
    pub fn workload(&self) -> Result<LoadRequest, CallError> {
        let l = (self.loaded.as_ref())
            .ok_or_else(|| CallError::Conflict("no workload is loaded".into()))?;
        Ok(LoadRequest {
            version: PROTOCOL_VERSION,
            workload: l.spec,
            rejoin: false,
        })
    }

    fn loaded(&mut self) -> Result<&mut Loaded, CallError> {
        self.loaded
            .as_mut()
            .ok_or_else(|| CallError::Conflict("no workload is loaded".into()))
    }

    /// `POST /workload/start`: starts the node's client of the loaded workload
    /// (none if the request says the clients are external: the run is then
    /// done at once).
    ///
    /// # Errors
    /// [`CallError::BadRequest`] for a bad body; [`CallError::Conflict`]
    /// before a load or after a start; [`CallError::Internal`] if the node
    /// failed.
    pub fn start(&mut self, body: &serde_json::Value) -> Result<StartAnswer, CallError> {
        let req: StartRequest = serde_json::from_value(body.clone()).map_err(bad)?;
        check_version(req.version)?;
        let (node, metrics) = (self.node, self.metrics.clone());
        let l = self.loaded()?;
        if l.run.is_some() {
            return Err(CallError::Conflict(
                "the workload was already started".into(),
            ));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(req.external));
        let start_ns = l.cluster.now();
        if req.external {
            l.run = Some(Run {
                start_ns,
                stop,
                done,
            });
            return Ok(StartAnswer {
                version: PROTOCOL_VERSION,
                node,
                start_ns,
            });
        }
        let warmup_ns = req.warmup_ms.saturating_mul(1_000_000);
        let run_ns = req
            .run_ms
            .map_or(Nanos::MAX, |ms| ms.saturating_mul(1_000_000));
        let (from, until) = (start_ns + warmup_ns, start_ns.saturating_add(run_ns));
        let client = l.cluster.client(node).map_err(internal)?;
        let mut cfg = LoadGenConfig {
            seed: req.seed,
            inflight_max: req.inflight.max(1),
            budget: req.budget,
            record: false,
            retry: RetryPolicy {
                max_tries: req.max_tries.max(1),
                ..RetryPolicy::default()
            },
        };
        let ends = Ends {
            stop_at_ns: until,
            stop: stop.clone(),
            done: done.clone(),
            latency: metrics.map(LatencyFeed::new),
        };
        let journal = req.journal.as_deref().map(std::path::Path::new);
        let (seed, clock) = (req.seed, l.clock);
        let added = match &l.workload {
            BuiltWorkload::Smallbank(w) => {
                let gen = journaled(w.generator(node, seed), journal, node, seed, clock)?;
                let mut loadgen = LoadGen::new(node, client, gen, cfg);
                loadgen.set_window(from, until);
                l.cluster.pause_with(|p| add(p, loadgen, ends))
            }
            BuiltWorkload::History(w) => {
                cfg.retry.max_tries = 1;
                let gen = journaled(w.generator(node, seed), journal, node, seed, clock)?;
                let mut loadgen = LoadGen::new(node, client, gen, cfg);
                loadgen.set_window(from, until);
                l.cluster.pause_with(|p| add(p, loadgen, ends))
            }
            BuiltWorkload::Applications => {
                return Err(CallError::Conflict(
                    "this store serves applications only: it runs no built-in workload".into(),
                ))
            }
        };
        added.map_err(internal)?;
        l.run = Some(Run {
            start_ns,
            stop,
            done,
        });
        Ok(StartAnswer {
            version: PROTOCOL_VERSION,
            node,
            start_ns,
        })
    }

    /// `POST /workload/stop`: the client stops drawing; those in flight finish.
    ///
    /// # Errors
    /// [`CallError::Conflict`] when no run was started.
    pub fn stop(&mut self) -> Result<StartAnswer, CallError> {
        let node = self.node;
        let run = self.loaded()?.run.as_ref();
        let run = run.ok_or_else(|| CallError::Conflict("no workload was started".into()))?;
        run.stop.store(true, Ordering::Release);
        Ok(StartAnswer {
            version: PROTOCOL_VERSION,
            node,
            start_ns: run.start_ns,
        })
    }

    /// Whether a run was started and its client is done (`None`: no run).
    pub fn run_done(&self) -> Option<bool> {
        let run = self.loaded.as_ref()?.run.as_ref()?;
        Some(run.done.load(Ordering::Acquire))
    }

    /// Whether a workload is loaded.
    pub fn is_loaded(&self) -> bool {
        self.loaded.is_some()
    }

    /// `GET /results`: the client's counters and recordings and the node's
    /// rows, once the run is done (`done: false` and nothing else before).
    ///
    /// # Errors
    /// [`CallError::Conflict`] when no run was started; [`CallError::Internal`]
    /// if the node failed.
    pub fn results(&mut self) -> Result<Results, CallError> {
        let node = self.node;
        let l = self.loaded()?;
        let run = l.run.as_ref();
        let run = run.ok_or_else(|| CallError::Conflict("no workload was started".into()))?;
        let clock = l.clock;
        let mut r = Results::empty(node, clock, run.done.load(Ordering::Acquire));
        if !r.done {
            return Ok(r);
        }
        l.cluster
            .pause_with(|p| super::collect::collect(p, &mut r))
            .map_err(internal)?;
        Ok(r)
    }

    /// Drains the node (SIGTERM, `POST /drain`): its client stops drawing,
    /// the transactions in flight finish (waiting at most `timeout`), and the
    /// node shuts down. Returns whether the client finished in time.
    ///
    /// # Errors
    /// [`CallError::Internal`] if the node had failed.
    pub fn drain(&mut self, timeout: Duration) -> Result<bool, CallError> {
        let Some(l) = self.loaded.take() else {
            return Ok(true);
        };
        let mut finished = true;
        if let Some(run) = &l.run {
            run.stop.store(true, Ordering::Release);
            let start = Instant::now();
            while !run.done.load(Ordering::Acquire) && start.elapsed() < timeout {
                l.cluster.check().map_err(internal)?;
                std::thread::sleep(DRAIN_POLL);
            }
            finished = run.done.load(Ordering::Acquire);
        }
        l.cluster.shutdown().map_err(internal)?;
        Ok(finished)
    }
}

/// How a client's run ends and what it reports on the way (see [`Polled`]).
struct Ends {
    stop_at_ns: Nanos,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    latency: Option<LatencyFeed>,
}

/// `gen`, journaled to `journal` if given ([`Journaled`]).
fn journaled<G: TxGenerator>(
    gen: G,
    journal: Option<&std::path::Path>,
    node: NodeId,
    seed: u64,
    clock: ClockOrigin,
) -> Result<Journaled<G>, CallError> {
    match journal {
        Some(path) => Journaled::to_file(gen, path, node, seed, clock)
            .map_err(|e| internal(format!("journal {}: {e}", path.display()))),
        None => Ok(Journaled::off(gen)),
    }
}

/// Adds the client to the node's polling threads.
fn add<G: TxGenerator + 'static>(parts: &mut ClusterParts, loadgen: LoadGen<G>, ends: Ends) {
    parts.add_app(Polled {
        loadgen,
        stop_at_ns: ends.stop_at_ns,
        stop: ends.stop,
        done: ends.done,
        latency: ends.latency,
    });
}

/// The client's load generator among `parts.apps`, if it has type `G`.
pub(super) fn loadgen_mut<G: TxGenerator + 'static>(
    parts: &mut ClusterParts,
) -> Option<&mut LoadGen<G>> {
    parts.apps.iter_mut().find_map(|a| {
        let any: &mut dyn Any = a.as_mut();
        any.downcast_mut::<Polled<G>>().map(|p| &mut p.loadgen)
    })
}

// The two generator types a node runs are application components.
const _: fn() = || {
    fn is_app<T: splitkv_host::cluster::AppComponent>() {}
    is_app::<Polled<Journaled<SmallbankGenerator>>>();
    is_app::<Polled<Journaled<HistoryGenerator>>>();
};
