//! `splitkv node --config FILE --id N`: one node of a deployed cluster in
//! this process (DESIGN.md driver 3). It reads and checks the cluster file,
//! binds its transport (UDP, or DPDK for `[transport] kind = "dpdk"` in a
//! build with the feature `dpdk`: `splitkv_host::deploy::dpdk`, whose
//! counters `/status` shows as `dpdk` and `/metrics` as `dpdk_*`; or RDMA
//! verbs for `kind = "verbs"` in a build with the feature `verbs`:
//! `splitkv_host::deploy::verbs`, its queue pair published in the etcd
//! address record, so it binds that transport before it takes its
//! membership, and whose counters `/status` shows as `verbs.transport` and
//! `/metrics` as `verbs_*`; with injected faults when the file asks),
//! serves its control endpoint from a thread of its own
//! (`splitkv_host::deploy::control`), builds and runs its node when a
//! workload is loaded (`splitkv_bench::remote::RemoteNode`), and on SIGTERM
//! (or SIGINT, or `POST /drain`) drains: its client stops drawing, the
//! transactions in flight finish, the node shuts down, exit 0.
//!
//! The incarnation is the wall clock at start in tenths of a second since
//! 2025 (`splitkv_host::deploy::incarnation_now`): fresh per process start.
//! `/metrics` is fed from the counters the polling threads publish; the
//! control thread never touches a polling component.
//!
//! Membership (`[membership]` of the cluster file): static by default; with
//! `kind = "etcd"` (cargo feature `etcd`) the node holds its etcd lease from
//! process start ([`NodeLease`]): etcd unreachable at start is one line and
//! exit 2. The main thread renews the lease until a workload is loaded;
//! from then on the membership agent on the node's polling thread
//! (`splitkv_host::cluster::NodeMembership`) renews it, reports the peers
//! its sessions declared failed, and applies each new configuration to the
//! NIC runtime, which runs crash recovery (Xenic §4.2.1, Dandelion §4.4);
//! the main thread then reads the lease for `/status` and the fail-stop
//! decision, and renews it only while the polling threads are paused. New configurations are logged and shown in
//! `/status` (`membership`, `recovery`). Once the lease may have run out
//! (etcd unreachable, or the node was configured out) the polling thread
//! stops polling the NIC runtime at once (fencing: it neither answers nor
//! sends), and the node says so in its log and status
//! (`membership.fail_stop`) and stops (fail-stop, exit 4: safe to start
//! again, it rejoins as a new incarnation).
//!
//! `--data-address` / `--control-address` start the node elsewhere than
//! the cluster file says (a replacement machine for a dead node).
//! With etcd membership every process publishes its data and control
//! address with its registration; once a configuration admits this
//! process, each peer's membership agent re-points its transport at the
//! new data address on the peer's polling thread, before it applies the
//! configuration. `/status` shows the published addresses
//! (`membership.data_addresses`), the peers re-pointed
//! (`sessions.peers_repointed`) and packets still arriving from a former
//! address (`sessions.drops.stale_address`).
//!
//! A node started again after its old process died (rejoin)
//! connects to etcd as a new incarnation (the membership's, above every
//! earlier one) and is *joining*: it holds a lease but no configuration
//! admits it yet. It loads itself (module `rejoin`): it asks its peers
//! for the workload they run (`GET /workload`) and loads it with `rejoin`
//! (its runtime built empty, no row loaded); it asks to be admitted only
//! once its runtime runs (so it answers the recovery epoch its admission
//! begins). Once a
//! configuration admits it as *copying*, the
//! primaries of its shards stream their snapshots to it
//! (`splitkv_host::cluster`'s copy reads), its agent reports it caught up,
//! and the next configuration makes it a replica. `/status`'s
//! `membership.role` says `joining`, `copying` or `replica`, and
//! `membership.copy` has the copy counters.
//!
//! `POST /fault/nic-restart` injects a NIC-runtime-only crash (the NIC restart):
//! the polling thread restarts the NIC runtime with the next
//! incarnation (`splitkv_host::cluster::Cluster::restart_nic`); the host,
//! its data, the lease and the client live on, the client's transactions
//! in flight are answered `Unknown`, and `/status`'s `nic` shows the
//! restarts and whether the NIC runtime serves again.
//!
//! With a `[clients]` section the node serves applications in other
//! processes on `<socket_dir>/node-N.sock` once a workload is loaded (its
//! runtime then runs; `splitkv_host::clients::ClientService`) — at once,
//! from an empty store, with `start = "empty"` —, and removes
//! the socket on drain; `/status`'s `applications` and `/metrics`'
//! `application_*` show the gateway's counters.
//!
//! `/status`'s `events_unix_ms` says when the node's runtime installed its
//! epoch, when its last recovery epoch began and resumed, its first commit
//! after that resume, and when its copy completed, as Unix-epoch
//! milliseconds of the node's wall clock: a monitor (`splitkv bench
//! --cluster`) places them on its own time line by its own wall clock, not
//! by when its poll noticed them.

mod empty_start;
mod lease;
mod rejoin;
mod status;

use crate::cli::NodeArgs;
use crate::Failure;
use lease::NodeLease;
use serde_json::{json, Value};
use splitkv_bench::remote::protocol::{LoadRequest, WorkloadSpec, PROTOCOL_VERSION};
use splitkv_bench::remote::RemoteNode;
use splitkv_host::cluster::{ClusterError, NodeMembership, StatsHandle};
use splitkv_host::deploy::metrics::outcome_label;
use splitkv_host::deploy::{
    incarnation_now, node_builder, node_transport_counted, CallError, ClientsStart, ClusterConfig,
    ControlHandler, ControlServer, DpdkCounters, LogTarget, MembershipSettings, NodeMetrics,
    NodeTransport, Route, SessionCounters, TransportKind, VerbsLink,
};
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::wire::generation_cluster_id;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Longest a drain waits for the transactions in flight to finish.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a node that stopped on a failure (a fail-stop) keeps serving
/// `/status` before it exits.
const FAIL_STOP_LINGER: Duration = Duration::from_millis(300);
/// How often the main thread checks for a signal or a failed node.
const SIGNAL_POLL: Duration = Duration::from_millis(20);

/// What the control endpoint serves.
struct NodeHandler {
    node: u16,
    cluster_id: u32,
    /// The cluster file's `[protocol] commit` (`/status`'s `protocol`).
    commit: splitkv_nic::CommitProtocol,
    incarnation: u32,
    started: Instant,
    remote: Mutex<RemoteNode>,
    stats: Mutex<Option<StatsHandle>>,
    metrics: Arc<NodeMetrics>,
    /// Set by a signal or `POST /drain`: the main thread drains.
    drain: Arc<AtomicBool>,
    /// The membership (read for `/status`; the main thread drives it).
    membership: NodeLease,
    /// A DPDK transport's published counters (`None` on UDP).
    dpdk: Option<DpdkCounters>,
    /// On verbs: this node's endpoint, its peers' and its transport's
    /// published counters (`/status`'s `verbs`).
    verbs: Option<VerbsLink>,
}

impl NodeHandler {
    fn stats(&self) -> Option<StatsHandle> {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn transactions(&self) -> Value {
        let Some(h) = self.stats() else {
            return json!({});
        };
        let snap = h.snapshot();
        let mut m = serde_json::Map::new();
        for s in TxStatus::ALL {
            let n: u64 = snap
                .nodes
                .iter()
                .map(|n| n.nic.clients.outcomes[s as usize])
                .sum();
            m.insert(outcome_label(s).into(), json!(n));
        }
        Value::Object(m)
    }
}

impl ControlHandler for NodeHandler {
    fn status(&self) -> Value {
        // `try_lock`: a long call (a load) must not hold up a status.
        let (state, done) = match self.remote.try_lock() {
            Ok(r) if !r.is_loaded() => ("idle", None),
            Ok(r) => match r.run_done() {
                None => ("loaded", None),
                Some(false) => ("running", Some(false)),
                Some(true) => ("done", Some(true)),
            },
            Err(_) => ("busy", None),
        };
        let failure = self
            .stats()
            .and_then(|h| h.failure())
            .map(|e| e.to_string());
        json!({
            "node": self.node,
            "cluster": self.cluster_id,
            "protocol": self.commit.as_str(),
            "incarnation": self.incarnation,
            "uptime_ms": self.started.elapsed().as_millis() as u64,
            "state": if self.drain.load(Ordering::Acquire) { "draining" } else { state },
            "run_done": done,
            "failure": failure,
            "transactions": self.transactions(),
            "sessions": self.sessions(),
            "recovery": self.recovery(),
            "nic": self.nic(),
            "applications": self.applications(),
            "membership": self.membership.view(self.started, self.stats().as_ref()),
            "events_unix_ms": self.events_unix_ms(),
            "dpdk": self.dpdk.as_ref().map(DpdkCounters::to_json),
            "verbs": self.verbs.as_ref().map(VerbsLink::to_json),
        })
    }

    fn metrics(&self, out: &mut String) {
        if let Some(h) = self.stats() {
            for n in &h.snapshot().nodes {
                self.metrics.update_from(&n.nic);
                let s = &n.nic.net.sessions;
                self.metrics.update_sessions(&SessionCounters {
                    packets_received: s.packets_received,
                    retransmissions: s.retransmissions,
                    duplicates_dropped: s.duplicates_dropped,
                    sessions_failed: s.sessions_failed,
                });
            }
            for (_, c) in h.applications() {
                self.metrics.update_applications(&c);
            }
        }
        if let Some(d) = &self.dpdk {
            self.metrics.update_dpdk(&d.snapshot());
        }
        if let Some(v) = &self.verbs {
            self.metrics.update_verbs(&v.counters.snapshot());
        }
        let _ = self.metrics.encode(out);
    }

    fn call(&self, route: Route, body: &Value) -> Result<Value, CallError> {
        if self.drain.load(Ordering::Acquire) {
            return Err(CallError::Unavailable("the node is draining".into()));
        }
        let mut remote = self.remote.lock().unwrap_or_else(|e| e.into_inner());
        let to_json =
            |v: Result<Value, serde_json::Error>| v.map_err(|e| CallError::Internal(e.to_string()));
        match route {
            Route::Load => {
                let (answer, handle) = remote.load(body)?;
                *self.stats.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
                tracing::info!(rows = answer.rows, "loaded");
                to_json(serde_json::to_value(answer))
            }
            Route::WorkloadStart => {
                let answer = remote.start(body)?;
                tracing::info!(start_ns = answer.start_ns, "workload started");
                to_json(serde_json::to_value(answer))
            }
            Route::WorkloadStop => to_json(serde_json::to_value(remote.stop()?)),
            Route::Results => to_json(serde_json::to_value(remote.results()?)),
            Route::Drain => {
                self.drain.store(true, Ordering::Release);
                Ok(json!({ "draining": true }))
            }
            Route::NicRestart => self.restart_nic(),
            Route::Workload => to_json(serde_json::to_value(remote.workload()?)),
        }
    }
}

/// Sends the `tracing` log to the file's target.
fn init_log(target: &LogTarget) -> Result<(), Failure> {
    let builder = tracing_subscriber::fmt().with_ansi(false);
    let done = match target {
        LogTarget::Stderr => builder.with_writer(std::io::stderr).try_init(),
        LogTarget::File(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| {
                    Failure::BadInput(format!("log: cannot open {}: {e}", path.display()))
                })?;
            builder.with_writer(Mutex::new(file)).try_init()
        }
    };
    done.map_err(|e| Failure::Internal(format!("log: {e}")))
}

/// Pins this thread (and the threads it starts later) to `cores`.
fn pin(cores: &[usize]) -> Result<(), Failure> {
    if cores.is_empty() {
        return Ok(());
    }
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and
    // sched_setaffinity get a valid pointer and its size.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cores {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(Failure::BadInput(format!(
            "cores {cores:?}: cannot pin: {e}"
        )));
    }
    Ok(())
}

/// The cluster file with this node at `--data-address` / `--control-address`
/// where given (a replacement machine); a moved data address
/// needs a membership that publishes it (etcd).
fn moved(config: ClusterConfig, args: &NodeArgs) -> Result<ClusterConfig, Failure> {
    let (data, control) = (args.data_address, args.control_address);
    if data.is_none() && control.is_none() {
        return Ok(config);
    }
    let file_data = config.node(args.id).map(|n| n.data);
    if data.is_some() && data != file_data && config.membership == MembershipSettings::Static {
        return Err(Failure::BadInput(format!(
            "--data-address needs [membership] kind = \"etcd\" in {}: peers learn a moved node's address from it",
            args.config.display()
        )));
    }
    config.with_node_moved(args.id, data, control).map_err(|e| {
        let flag = match e.field() {
            Some(f) if f.ends_with(".control") => "--control-address",
            Some(f) if f.ends_with(".data") => "--data-address",
            _ => "--id",
        };
        Failure::BadInput(format!("{flag}: {e}"))
    })
}

/// Runs the node until it is told to drain; see the module docs.
pub fn run(args: &NodeArgs) -> Result<(), Failure> {
    let bad = |e: &dyn std::fmt::Display| Failure::BadInput(e.to_string());
    let config = ClusterConfig::from_file(&args.config)
        .map_err(|e| Failure::BadInput(format!("{}: {e}", args.config.display())))?;
    let config = moved(config, args)?;
    let me = config.node(args.id).cloned().ok_or_else(|| {
        Failure::BadInput(format!(
            "--id {} is not a node of {} (ids 0 ..= {})",
            args.id,
            args.config.display(),
            config.nodes.len().saturating_sub(1)
        ))
    })?;
    init_log(&config.log)?;
    pin(&me.cores)?;
    let started = Instant::now();
    // On DPDK this starts EAL; a refusal (no device, bad arguments, no DPDK
    // or verbs in this build) is one line and exit 2.
    let transport = || node_transport_counted(&config, args.id, args.seed).map_err(|e| bad(&e));
    // On verbs the transport comes before the membership: the node
    // publishes its queue pair, which exists only once the transport does.
    // Otherwise after it, so that a process the membership refuses (another
    // cluster's state, a node already running) says so, not that its
    // socket is taken.
    let early = match me.transport.kind {
        TransportKind::Verbs => Some(transport()?),
        _ => None,
    };
    let verbs = early.as_ref().and_then(|t| t.verbs.as_ref());
    let mut membership = NodeLease::start(&config, args.id, incarnation_now(), started, verbs)?;
    // With etcd the membership raises it above the node's earlier
    // incarnations: the NIC runtime must use that one (a restarted node is
    // admitted under it when it rejoins).
    let incarnation = membership.incarnation().unwrap_or_else(incarnation_now);
    let NodeTransport {
        transport,
        dpdk,
        verbs,
    } = match early {
        Some(t) => t,
        None => transport()?,
    };
    // A later cluster generation's packets carry another cluster id, so
    // an earlier generation's stragglers are dropped (and counted).
    let wire = ClusterConfig {
        cluster_id: generation_cluster_id(config.cluster_id, membership.generation()),
        ..config.clone()
    };
    let builder = node_builder(&wire, args.threads, args.seed, incarnation);
    let drain = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, drain.clone())
            .map_err(|e| Failure::Internal(format!("signal handler: {e}")))?;
    }
    // Fed by the polling side (the client's latencies) and the control
    // thread (counters copied from the published snapshot at each scrape).
    let metrics = NodeMetrics::new(config.cluster_id, args.id);
    let metrics = Arc::new(match (&dpdk, &verbs) {
        (Some(_), _) => metrics.with_dpdk(),
        (None, Some(_)) => metrics.with_verbs(),
        (None, None) => metrics,
    });
    let handler = Arc::new(NodeHandler {
        node: args.id,
        cluster_id: config.cluster_id,
        commit: config.protocol.commit,
        incarnation,
        started,
        remote: Mutex::new(with_membership(
            RemoteNode::new(args.id, builder, transport).with_metrics(metrics.clone()),
            membership.hand_over(started),
        )),
        stats: Mutex::new(None),
        metrics,
        drain: drain.clone(),
        membership: membership.clone(),
        dpdk,
        verbs,
    });
    let control = ControlServer::start(me.control, &config.token, handler.clone())
        .map_err(|e| bad(&format_args!("node[{}].control: {e}", args.id)))?;
    tracing::info!(
        node = args.id,
        incarnation,
        data = %me.data,
        control = %control.local_addr(),
        threads = args.threads,
        "node started"
    );
    if membership.joining() {
        let peers = (config.nodes.iter())
            .filter(|n| n.id != args.id)
            .map(|n| (n.id, n.control))
            .collect();
        rejoin::spawn(handler.clone(), peers, config.token.clone())
            .map_err(|e| Failure::Internal(format!("cannot start a thread: {e}")))?;
        tracing::info!("joining a live cluster: loading the workload its nodes run");
    } else if let Some(c) = (config.clients.as_ref()).filter(|c| c.start == ClientsStart::Empty) {
        let peers = (config.nodes.iter())
            .filter(|n| n.id != args.id)
            .map(|n| (n.id, n.control))
            .collect();
        empty_start::spawn(handler.clone(), peers, config.token.clone())
            .map_err(|e| Failure::Internal(format!("cannot start a thread: {e}")))?;
        let socket = c.socket_path(args.id);
        tracing::info!(socket = %socket.display(), "starting empty: the application socket opens once the peers answer");
    }
    let failed = wait_for_drain(&handler, &mut membership);
    if failed.is_some() {
        // Keep answering `/status` (which shows why) a little longer, so a
        // monitor sees the fail-stop, not only a refused connection.
        std::thread::sleep(FAIL_STOP_LINGER);
    }
    tracing::info!("draining");
    let drained = handler
        .remote
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain(DRAIN_TIMEOUT);
    let _ = control.shutdown();
    if failed.is_none() {
        // After the drain: no transaction is in flight, nothing is served.
        membership.leave();
    }
    if let Some(f) = failed {
        return Err(f);
    }
    match drained {
        Ok(true) => {
            tracing::info!("drained");
            Ok(())
        }
        Ok(false) => Err(Failure::Internal(format!(
            "transactions still in flight after {DRAIN_TIMEOUT:?}"
        ))),
        Err(e) => Err(Failure::Internal(e.to_string())),
    }
}

/// Starts the node's runtime with no built-in workload (`[clients] start =
/// "empty"`): an empty store that serves applications only.
fn load_empty(handler: &NodeHandler) -> Result<(), Failure> {
    let body = LoadRequest {
        version: PROTOCOL_VERSION,
        workload: WorkloadSpec::Applications,
        rejoin: false,
    };
    let body = serde_json::to_value(body).map_err(|e| Failure::Internal(e.to_string()))?;
    handler
        .call(Route::Load, &body)
        .map(drop)
        .map_err(|e| Failure::Internal(format!("cannot start the empty store: {e}")))
}

/// Waits for a signal or a drain call, driving the membership meanwhile
/// (until the node's polling thread takes it over); returns the failure if
/// the node stopped on one instead: [`Failure::FailStop`] when its
/// membership fenced it, [`Failure::Internal`] otherwise.
fn wait_for_drain(handler: &NodeHandler, membership: &mut NodeLease) -> Option<Failure> {
    let fail_stop = |why: &dyn std::fmt::Display, membership: &NodeLease| {
        // What the membership saw (lease, etcd counters, its last error):
        // the reason alone does not say why no renewal took.
        let view = membership.view(handler.started, handler.stats().as_ref());
        tracing::error!(reason = %why, membership = %view, "membership: fail-stop, the node stops serving");
        Some(Failure::FailStop(format!(
            "membership: fail-stop: {why} (safe to start again: it rejoins as a new incarnation)"
        )))
    };
    while !handler.drain.load(Ordering::Acquire) {
        let stepped = membership.step(handler.started);
        if let Err(why) = stepped {
            return fail_stop(&why, membership);
        }
        if let Some(e) = handler.stats().and_then(|h| h.failure()) {
            if let ClusterError::Fenced { reason, .. } = &e {
                return fail_stop(reason, membership);
            }
            tracing::error!(error = %e, "node failed");
            return Some(Failure::Internal(e.to_string()));
        }
        std::thread::sleep(SIGNAL_POLL);
    }
    None
}

/// `remote` with `membership` for its polling thread, if there is one.
fn with_membership(remote: RemoteNode, membership: Option<NodeMembership>) -> RemoteNode {
    match membership {
        Some(m) => remote.with_membership(m),
        None => remote,
    }
}
