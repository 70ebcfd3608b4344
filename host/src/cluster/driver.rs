//! A running cluster: its components moved onto a few polling threads (DESIGN.md
//! driver 2), each thread polling a fixed set of NIC runtimes and host workers.

use super::load::{LoadError, LoadProgress};
use super::membership::NodeMembership;
use super::parts::{AppComponent, ClusterParts, NodeParts, DRAIN_PASSES_MAX};
use super::poll::poll_until_stopped;
use super::stats::{ClusterStats, Shared};
use super::{ClusterBuilder, ClusterError};
use crate::client::Client;
use crate::log::HostWorker;
use crate::observe::Observation;
use splitkv_layout::wire::NodeId;
use splitkv_layout::Key;
use splitkv_nic::{Component, Nanos, NicRuntime, Placement};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// How often a polling thread publishes its components' counters for
/// [`Cluster::stats`], in nanoseconds of the cluster's clock.
pub const STATS_PUBLISH_INTERVAL_NS: Nanos = 1_000_000;

/// Where a node component came from: its entry in [`ClusterParts::nodes`]
/// and its node id.
#[derive(Clone, Copy)]
struct Slot {
    entry: usize,
    node: NodeId,
}

/// A component placed on a polling thread, with its node slot (or, for an
/// application component, its index in [`ClusterParts::apps`]).
enum Placed {
    /// A NIC runtime, with its node's membership if it has one.
    Nic(Slot, Box<NicRuntime>, Option<Box<NodeMembership>>),
    Worker(Slot, Box<HostWorker>),
    App(usize, Box<dyn AppComponent>),
}

impl Placed {
    /// One pass of the component; a node component also takes its part
    /// in the copy reads ([`super::copy_reads`]).
    fn run_iteration(&mut self, now: Nanos, shared: &Shared) -> bool {
        match self {
            Placed::Nic(slot, n, m) => {
                let work = match m {
                    None => n.run_iteration(now),
                    Some(m) => m.run_with(now, n),
                };
                // A fenced node serves no copy.
                let serving = m.as_ref().is_none_or(|m| m.agent().serving(now));
                work | (serving && shared.copy_reads[slot.entry].serve(n))
            }
            Placed::Worker(slot, w) => {
                w.run_iteration(now) | shared.copy_reads[slot.entry].scan_if_asked(w)
            }
            Placed::App(_, a) => a.run_iteration(now),
        }
    }

    /// Why the cluster must stop, if this NIC runtime or host worker
    /// stopped on a fault ([`ClusterError::NodeStopped`]) or the node was
    /// fenced by its membership ([`ClusterError::Fenced`]).
    fn fault(&self) -> Option<ClusterError> {
        let stopped = |node, reason| ClusterError::NodeStopped { node, reason };
        match self {
            Placed::Nic(slot, _, Some(m)) if m.stopped().is_some() => Some(ClusterError::Fenced {
                node: slot.node,
                reason: m.stopped().map(ToString::to_string).unwrap_or_default(),
            }),
            Placed::Nic(slot, n, _) => Component::fault(n.as_ref()).map(|r| stopped(slot.node, r)),
            Placed::Worker(slot, w) => Component::fault(w.as_ref()).map(|r| stopped(slot.node, r)),
            Placed::App(..) => None,
        }
    }

    /// Restarts this NIC runtime if [`Cluster::restart_nic`] asked
    /// for it (a NIC-runtime-only crash; `recovery/restart.rs`):
    /// volatile state dropped, the next incarnation, rebuilt from the peers
    /// while the host worker and clients run on. A refused restart is the
    /// node's fault ([`ClusterError::NodeStopped`]).
    fn restart_if_asked(&mut self, now: Nanos, shared: &Shared) {
        let Placed::Nic(slot, n, _) = self else {
            return;
        };
        if !shared.nic_restart[slot.entry].swap(false, Ordering::AcqRel) {
            return;
        }
        let next = n.incarnation().saturating_add(1);
        shared.nic_restarting[slot.entry].store(true, Ordering::Release);
        if let Err(e) = n.restart_nic(now, next) {
            shared.record_failure(ClusterError::NodeStopped {
                node: slot.node,
                reason: format!("NIC runtime restart refused: {e}"),
            });
        }
    }

    fn publish(&mut self, shared: &Shared) {
        match self {
            Placed::Nic(slot, n, m) => {
                let mut s = shared.stats[slot.entry]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                s.set_nic(n);
                let restarting = !s.nic_serving;
                shared.nic_restarting[slot.entry].store(restarting, Ordering::Release);
                match m {
                    // The agent takes the session events (to report the
                    // suspects): the failed peers are the coordinator's.
                    Some(m) => s.set_membership(m, n),
                    None => s.take_session_events(n),
                }
            }
            Placed::Worker(slot, w) => {
                let mut s = shared.stats[slot.entry]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                s.worker = w.stats();
            }
            Placed::App(..) => {}
        }
    }
}

/// A running in-process cluster: nodes polled by threads over the `mem`
/// transport (or whatever transports [`ClusterBuilder::build_parts`] was
/// given). Hands out [`Client`]s, loads rows, reports counters, and shuts down
/// into a [`ClusterParts`]. Dropping it stops its threads.
pub struct Cluster {
    pub(super) shared: Arc<Shared>,
    threads: Vec<JoinHandle<Vec<Placed>>>,
    /// Clients not handed out yet, by entry.
    clients: Mutex<Vec<Vec<Client>>>,
    /// Node id of each entry (every node of an in-process cluster, one for a
    /// deployed node).
    ids: Vec<NodeId>,
    placement: Placement,
    thread_count: usize,
    clients_per_node: usize,
    clock_origin: Instant,
    /// The clients' call observer, handed back with the parts.
    observation: Option<Arc<Observation>>,
    /// Each node's application service, when it serves applications.
    #[cfg(not(loom))]
    services: Vec<crate::clients::ClientService>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("nodes", &self.placement.nodes())
            .field("threads", &self.thread_count)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// A builder with the defaults (3 nodes, replication 3, Robinhood tables).
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::new()
    }

    /// Moves `parts` onto polling threads.
    pub(crate) fn start(mut parts: ClusterParts) -> Result<Cluster, ClusterError> {
        let nodes = parts.nodes.len();
        let applications = parts.applications.take();
        let clock_origin = parts.settle_clock_origin(Instant::now());
        let shared = parts.shared;
        let _ = shared.clock_origin.set(clock_origin);
        shared.set_running();
        let components = 2 * nodes + parts.apps.len();
        let thread_count = parts.threads.clamp(1, components.max(1));
        let mut groups: Vec<Vec<Placed>> = (0..thread_count).map(|_| Vec::new()).collect();
        let mut clients = Vec::with_capacity(nodes);
        for (i, n) in parts.nodes.into_iter().enumerate() {
            let slot = Slot {
                entry: i,
                node: parts.ids[i],
            };
            clients.push(n.clients);
            // NIC runtimes round robin from thread 0, host workers from thread
            // 1, applications from thread 0 again: on 2 threads the NICs (the
            // busiest components) split 2:1 instead of all landing on one thread.
            let membership = n.membership.map(|mut m| {
                m.set_cluster_origin(clock_origin);
                Box::new(m)
            });
            groups[i % thread_count].push(Placed::Nic(slot, Box::new(n.nic), membership));
            groups[(i + 1) % thread_count].push(Placed::Worker(slot, Box::new(n.worker)));
        }
        for (i, a) in parts.apps.into_iter().enumerate() {
            groups[i % thread_count].push(Placed::App(i, a));
        }
        let mut cluster = Cluster {
            shared,
            threads: Vec::with_capacity(thread_count),
            clients: Mutex::new(clients),
            ids: parts.ids,
            placement: parts.placement,
            thread_count,
            clients_per_node: parts.clients_per_node,
            clock_origin,
            observation: parts.observation,
            #[cfg(not(loom))]
            services: Vec::new(),
        };
        for (i, group) in groups.into_iter().enumerate() {
            let handle = cluster.spawn(i, group)?;
            cluster.threads.push(handle);
        }
        #[cfg(not(loom))]
        if let Some(apps) = applications {
            cluster.serve_applications(apps)?;
        }
        #[cfg(loom)]
        drop(applications);
        Ok(cluster)
    }

    /// Starts each node's application service over its gateway port
    /// ([`ClusterBuilder::serve_applications`]).
    #[cfg(not(loom))]
    fn serve_applications(&mut self, apps: super::parts::Applications) -> Result<(), ClusterError> {
        let procedures = apps.procedures;
        let resolve: crate::clients::ProcedureResolver =
            Arc::new(move |name: &str| procedures.id_of(name));
        for (node, port) in apps.ports {
            let entry = (self.ids.iter().position(|&n| n == node)).ok_or_else(|| {
                ClusterError::Applications {
                    node,
                    message: "no such node in this process".into(),
                }
            })?;
            let service = crate::clients::ClientService::start(
                &apps.settings,
                node,
                vec![port],
                resolve.clone(),
                self.shared.nic_restarting[entry].clone(),
            )
            .map_err(|e| ClusterError::Applications {
                node,
                message: e.to_string(),
            })?;
            self.shared
                .applications
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((node, service.stats()));
            self.services.push(service);
        }
        Ok(())
    }

    /// Stops serving applications: sockets removed, connections closed.
    fn stop_applications(&mut self) {
        #[cfg(not(loom))]
        for s in self.services.drain(..) {
            s.stop();
        }
    }

    fn spawn(
        &self,
        i: usize,
        mut group: Vec<Placed>,
    ) -> Result<JoinHandle<Vec<Placed>>, ClusterError> {
        let name = format!("splitkv-poll-{i}");
        let shared = self.shared.clone();
        let clock_origin = self.clock_origin;
        let thread = name.clone();
        std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || {
                let mut next_publish = 0;
                let run = poll_until_stopped(&thread, clock_origin, &shared.stop, |now| {
                    let mut work = false;
                    for c in group.iter_mut() {
                        c.restart_if_asked(now, &shared);
                        work |= c.run_iteration(now, &shared);
                        if let Some(e) = c.fault() {
                            shared.record_failure(e);
                        }
                    }
                    if now >= next_publish {
                        next_publish = now + STATS_PUBLISH_INTERVAL_NS;
                        group.iter_mut().for_each(|c| c.publish(&shared));
                    }
                    work
                });
                match run {
                    // Final counters, so a paused cluster's stats are exact.
                    Ok(()) => group.iter_mut().for_each(|c| c.publish(&shared)),
                    Err(caught) => shared.record_panic(caught),
                }
                group
            })
            .map_err(|e| {
                self.shared.set_stopped(true);
                ClusterError::Spawn {
                    thread: name,
                    message: e.to_string(),
                }
            })
    }

    /// Placement of keys on nodes.
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// Nodes in the cluster.
    pub fn nodes(&self) -> usize {
        self.placement.nodes()
    }

    /// A client of node `node` for one application thread (each thread needs
    /// its own). There are [`ClusterBuilder::clients_per_node`] per node.
    ///
    /// # Errors
    /// [`ClusterError::BadNode`] outside the cluster, or
    /// [`ClusterError::NoFreeClient`] when all of the node's are handed out.
    pub fn client(&self, node: NodeId) -> Result<Client, ClusterError> {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        let nodes = self.placement.nodes();
        let entry = self.ids.iter().position(|&id| id == node);
        let free = entry
            .and_then(|e| clients.get_mut(e))
            .ok_or(ClusterError::BadNode { node, nodes })?;
        free.pop().ok_or(ClusterError::NoFreeClient {
            node,
            clients: self.clients_per_node,
        })
    }

    /// Asks the polling thread owning `node`'s NIC runtime to restart it in
    /// place between two passes (a NIC-runtime-only crash;
    /// `NicRuntime::restart_nic` with the next incarnation): its host
    /// worker, host memory and clients live on, the client requests in
    /// flight are answered `Unknown`, and the node serves again once its
    /// peers' reports rebuilt its locks ([`NodeStats::nic_serving`](super::NodeStats::nic_serving),
    /// [`NodeStats::rebuild`](super::NodeStats::rebuild)). Asking twice before the thread
    /// takes it is one restart.
    ///
    /// # Errors
    /// [`ClusterError::BadNode`] if this process does not hold `node`.
    pub fn restart_nic(&self, node: NodeId) -> Result<(), ClusterError> {
        self.shared.request_nic_restart(node)
    }

    /// [`ClusterError::Panicked`] if a polling thread panicked (which stopped
    /// the cluster); `Ok` while it runs.
    pub fn check(&self) -> Result<(), ClusterError> {
        self.shared.failure().map_or(Ok(()), Err)
    }

    /// The counters every polling thread last published (at most
    /// [`STATS_PUBLISH_INTERVAL_NS`] old while it runs).
    pub fn stats(&self) -> ClusterStats {
        self.shared.snapshot()
    }

    /// Loads rows between runs: stops the threads, lets the cluster go idle,
    /// puts each row on every replica of its key ([`ClusterParts::load`]),
    /// and starts the threads again. Clients handed out keep working.
    ///
    /// # Errors
    /// [`ClusterError::Panicked`] if a thread had panicked; [`ClusterError::Load`]
    /// ([`LoadError`]) for a row that cannot be loaded (the threads run again
    /// all the same); [`ClusterError::Spawn`] if they cannot be restarted.
    pub fn load<V: AsRef<[u8]>>(
        &mut self,
        rows: impl IntoIterator<Item = (Key, V)>,
        progress: impl FnMut(LoadProgress),
    ) -> Result<LoadProgress, ClusterError> {
        let mut parts = self.stop(false)?;
        let loaded = parts.load(rows, progress);
        // `self` has no threads left: replacing it joins nothing.
        *self = Cluster::start(parts)?;
        loaded.map_err(|e: LoadError| ClusterError::Load(e))
    }

    /// Pauses the cluster (stops and joins its threads, leaving every
    /// component where it was: no drain, so a node whose peers in other
    /// processes keep sending is paused at once), calls `f` on its parts on
    /// this thread (add or take application components, read the tables;
    /// [`ClusterParts::drain`] first for a quiescent view), and starts the
    /// threads again. Clients handed out keep working; `now` never goes
    /// backwards.
    ///
    /// # Errors
    /// [`ClusterError::Panicked`] or [`ClusterError::NodeStopped`] if the
    /// cluster had failed; [`ClusterError::Spawn`] if it cannot be restarted.
    pub fn pause_with<R>(
        &mut self,
        f: impl FnOnce(&mut ClusterParts) -> R,
    ) -> Result<R, ClusterError> {
        let mut parts = self.stop_inner(false, false)?;
        let r = f(&mut parts);
        // The application services keep serving across the pause (their
        // requests wait in the gateway's rings).
        #[cfg(not(loom))]
        let services = std::mem::take(&mut self.services);
        // `self` has no threads left: replacing it joins nothing.
        *self = Cluster::start(parts)?;
        #[cfg(not(loom))]
        {
            self.services = services;
        }
        Ok(r)
    }

    /// A handle on the published counters, for another thread.
    pub fn stats_handle(&self) -> super::StatsHandle {
        super::StatsHandle {
            shared: self.shared.clone(),
        }
    }

    /// The node ids this process holds (every node of an in-process cluster).
    pub fn node_ids(&self) -> &[NodeId] {
        &self.ids
    }

    /// The cluster's clock now: nanoseconds since its threads first started,
    /// the `now` its components see.
    pub fn now(&self) -> Nanos {
        self.clock_origin.elapsed().as_nanos() as Nanos
    }

    /// Stops the threads and hands back every node's components, after
    /// letting in-flight work finish ([`ClusterParts::drain`], at most
    /// [`DRAIN_PASSES_MAX`] passes: check [`ClusterParts::is_quiescent`] when
    /// applications may still have been submitting, or have stopped polling). Clients still waiting in
    /// [`Client::call`] get [`ClientError::ShutDown`](crate::ClientError::ShutDown).
    ///
    /// # Errors
    /// [`ClusterError::Panicked`] (the thread's name and the panic's message)
    /// if a polling thread panicked.
    pub fn shutdown(mut self) -> Result<ClusterParts, ClusterError> {
        self.stop(true)
    }

    /// Stops and joins the threads, drains, and reassembles the parts.
    fn stop(&mut self, shut_down: bool) -> Result<ClusterParts, ClusterError> {
        // First: no new application request reaches a node being drained.
        self.stop_applications();
        self.stop_inner(shut_down, true)
    }

    /// Stops and joins the threads, drains if `drain`, and reassembles the parts.
    fn stop_inner(&mut self, shut_down: bool, drain: bool) -> Result<ClusterParts, ClusterError> {
        self.shared.set_stopped(shut_down);
        let entries = self.ids.len();
        let mut nics: Vec<Option<(NicRuntime, Option<NodeMembership>)>> =
            (0..entries).map(|_| None).collect();
        let mut workers: Vec<Option<HostWorker>> = (0..entries).map(|_| None).collect();
        let mut apps: Vec<(usize, Box<dyn AppComponent>)> = Vec::new();
        for h in std::mem::take(&mut self.threads) {
            // Panics are caught inside the thread, so `join` succeeds.
            for p in h.join().unwrap_or_default() {
                match p {
                    Placed::Nic(slot, nic, m) => nics[slot.entry] = Some((*nic, m.map(|m| *m))),
                    Placed::Worker(slot, w) => workers[slot.entry] = Some(*w),
                    Placed::App(i, a) => apps.push((i, a)),
                }
            }
        }
        if let Some(e) = self.shared.failure() {
            return Err(e);
        }
        let mut clients =
            std::mem::take(&mut *self.clients.lock().unwrap_or_else(|e| e.into_inner()));
        clients.resize_with(entries, Vec::new);
        let nodes = nics
            .into_iter()
            .zip(workers)
            .zip(clients)
            .filter_map(|((nic, worker), clients)| {
                let (nic, membership) = nic?;
                Some(NodeParts {
                    nic,
                    worker: worker?,
                    clients,
                    membership,
                })
            })
            .collect();
        apps.sort_by_key(|(i, _)| *i);
        let mut parts = ClusterParts {
            placement: self.placement,
            nodes,
            ids: self.ids.clone(),
            apps: apps.into_iter().map(|(_, a)| a).collect(),
            threads: self.thread_count,
            clients_per_node: self.clients_per_node,
            shared: self.shared.clone(),
            clock_origin: Some(self.clock_origin),
            observation: self.observation.clone(),
            applications: None,
        };
        let clock_origin = self.clock_origin;
        if drain {
            // Same clock as the threads: `now` never goes backwards.
            parts.drain(DRAIN_PASSES_MAX, || {
                clock_origin.elapsed().as_nanos() as Nanos
            });
        }
        Ok(parts)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop_applications();
        if self.threads.is_empty() {
            return;
        }
        self.shared.set_stopped(true);
        for h in std::mem::take(&mut self.threads) {
            let _ = h.join();
        }
    }
}

impl Shared {
    /// Marks `node`'s NIC runtime for a NIC restart ([`Cluster::restart_nic`]).
    fn request_nic_restart(&self, node: NodeId) -> Result<(), ClusterError> {
        let entry = self
            .stats
            .iter()
            .position(|s| s.lock().unwrap_or_else(|e| e.into_inner()).node == node)
            .ok_or(ClusterError::BadNode {
                node,
                nodes: self.stats.len(),
            })?;
        self.nic_restart[entry].store(true, Ordering::Release);
        Ok(())
    }
}

impl super::StatsHandle {
    /// [`Cluster::restart_nic`] from another thread (a node process's
    /// control endpoint).
    ///
    /// # Errors
    /// [`ClusterError::BadNode`] if this process does not hold `node`.
    pub fn restart_nic(&self, node: NodeId) -> Result<(), ClusterError> {
        self.shared.request_nic_restart(node)
    }
}
