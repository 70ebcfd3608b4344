//! A stopped cluster: every node's components, owned by the caller. It is what
//! [`ClusterBuilder::build_parts`](super::ClusterBuilder::build_parts) returns
//! for another driver (the simulator) to poll, and what
//! [`Cluster::shutdown`](super::Cluster::shutdown) hands back for checks.

use super::driver::Cluster;
use super::load::{load_rows, LoadError, LoadProgress};
use super::membership::NodeMembership;
use super::stats::{ClusterStats, NodeStats, Shared};
use super::ClusterError;
use crate::client::Client;
use crate::log::HostWorker;
use crate::observe::Observation;
use crate::table::HostTable;
use splitkv_layout::wire::NodeId;
use splitkv_layout::Key;
use splitkv_nic::{Component, Nanos, NicRuntime, Placement};
use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

/// Most passes over every component [`ClusterParts::drain`] makes (on behalf
/// of [`Cluster::shutdown`] and [`Cluster::load`]) waiting for the cluster to
/// go idle.
pub const DRAIN_PASSES_MAX: u64 = 1_000_000;

/// Consecutive passes in which no component does any work after which
/// [`ClusterParts::drain`] gives up on a cluster that is not idle (say, outcomes
/// waiting for an application that no longer polls): far more passes than
/// a DMA completion or a packet takes to arrive.
pub const DRAIN_IDLE_PASSES_MAX: u64 = 10_000;

/// An application component the cluster's polling threads poll beside the
/// nodes (a load generator driving a [`Client`]); any [`Component`] that is
/// `'static` is one. [`ClusterParts::apps`] hands them back after a run; a
/// `Box<dyn AppComponent>` upcasts to `Box<dyn Any>` to get the concrete
/// type back (`Box::<dyn Any>::downcast`).
pub trait AppComponent: Component + Any {}

impl<T: Component + Any> AppComponent for T {}

/// One node's components.
#[derive(Debug)]
pub struct NodeParts {
    /// The protocol engine.
    pub nic: NicRuntime,
    /// The host worker, owner of the node's host table.
    pub worker: HostWorker,
    /// Clients not handed out yet (a running cluster gives them out with
    /// [`Cluster::client`]).
    pub clients: Vec<Client>,
    /// The node's membership and agent, run beside the NIC runtime on its
    /// polling thread ([`ClusterParts::set_membership`]); `None`: a static
    /// membership (every node, epoch 1, never changed).
    pub membership: Option<NodeMembership>,
}

/// Every node of a stopped cluster, by node id.
pub struct ClusterParts {
    /// Placement of keys on nodes.
    pub placement: Placement,
    /// The nodes this process holds: every node of the cluster, by id, for
    /// an in-process cluster; the one node of a deployed process
    /// ([`ClusterBuilder::build_local_parts`](super::ClusterBuilder::build_local_parts)).
    /// [`ClusterParts::node_ids`] gives each entry's node id.
    pub nodes: Vec<NodeParts>,
    /// Application components polled on the cluster's threads beside the
    /// nodes ([`ClusterParts::add_app`]), in the order they were added. They
    /// are not polled by [`ClusterParts::drain`]: stop them submitting before
    /// a shutdown.
    pub apps: Vec<Box<dyn AppComponent>>,
    /// Node id of each entry of `nodes` (`0..n` for an in-process cluster).
    pub(crate) ids: Vec<NodeId>,
    /// Polling threads [`ClusterParts::start`] uses.
    pub(crate) threads: usize,
    /// Clients each node was built with.
    pub(crate) clients_per_node: usize,
    /// Shared with the clients (from the start) and the polling threads of
    /// the running cluster; kept across restarts.
    pub(crate) shared: Arc<Shared>,
    /// Origin of the cluster's clock: `now` is the nanoseconds since it (kept
    /// across restarts: `now` never goes back).
    pub(crate) clock_origin: Option<Instant>,
    /// The call observer the clients report to, with its clock origin
    /// ([`ClusterBuilder::observe_calls`](super::ClusterBuilder::observe_calls)).
    pub(crate) observation: Option<Arc<Observation>>,
    /// What [`ClusterParts::start`] serves applications in other processes
    /// with ([`super::ClusterBuilder::serve_applications`]); `None`: none.
    pub(crate) applications: Option<Applications>,
}

/// The settings, procedures and NIC client ports of the gateways a started
/// cluster runs (one per node it holds). (Unused in `--cfg loom` builds,
/// which leave the application socket out.)
#[cfg_attr(loom, allow(dead_code))]
pub(crate) struct Applications {
    /// `[clients]` settings: the socket directory and the bounds.
    pub settings: crate::deploy::config::ClientSettings,
    /// Resolves the procedure names clients ask for.
    pub procedures: splitkv_nic::ProcedureRegistry,
    /// Each node's gateway port.
    pub ports: Vec<(NodeId, crate::client::Client)>,
}

impl std::fmt::Debug for ClusterParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterParts")
            .field("placement", &self.placement)
            .field("nodes", &self.nodes)
            .field("apps", &self.apps.len())
            .finish_non_exhaustive()
    }
}

impl ClusterParts {
    /// Node `node`'s host table, for checks.
    ///
    /// # Errors
    /// [`ClusterError::BadNode`] outside the cluster.
    pub fn table(&self, node: NodeId) -> Result<&HostTable, ClusterError> {
        let i = self.index_of(node)?;
        Ok(self.nodes[i].worker.table())
    }

    /// The node id of each entry of [`ClusterParts::nodes`], in order.
    pub fn node_ids(&self) -> &[NodeId] {
        &self.ids
    }

    /// The entry of [`ClusterParts::nodes`] holding node `node`.
    ///
    /// # Errors
    /// [`ClusterError::BadNode`] if this process does not hold it.
    pub fn index_of(&self, node: NodeId) -> Result<usize, ClusterError> {
        self.ids
            .iter()
            .position(|&id| id == node)
            .ok_or(ClusterError::BadNode {
                node,
                nodes: self.placement.nodes(),
            })
    }

    /// Reads `key` at its primary: its value into `value_out` and its version,
    /// or `None` when absent (or when this process does not hold the primary).
    pub fn get(&self, key: &Key, value_out: &mut Vec<u8>) -> Option<u64> {
        let p = self.index_of(self.placement.primary(key)).ok()?;
        let meta = self.nodes.get(p)?.worker.table().get(key, value_out)?;
        Some(meta.version())
    }

    /// Takes a client of node `node` that was not handed out yet.
    ///
    /// # Errors
    /// [`ClusterError::BadNode`], or [`ClusterError::NoFreeClient`] when all
    /// are taken.
    pub fn client(&mut self, node: NodeId) -> Result<Client, ClusterError> {
        let i = self.index_of(node)?;
        let clients_per_node = self.clients_per_node;
        self.nodes[i]
            .clients
            .pop()
            .ok_or(ClusterError::NoFreeClient {
                node,
                clients: clients_per_node,
            })
    }

    /// Gives node `node` its membership: from the next
    /// [`ClusterParts::start`] on, its polling thread runs the membership's
    /// agent beside the node's NIC runtime and stops polling the runtime once
    /// the node is fenced (see [`NodeMembership`]). Replaces the one it had.
    ///
    /// # Errors
    /// [`ClusterError::BadNode`] if this process does not hold `node`, or
    /// `membership` is another node's (it is dropped).
    pub fn set_membership(
        &mut self,
        node: NodeId,
        membership: NodeMembership,
    ) -> Result<(), ClusterError> {
        let bad = ClusterError::BadNode {
            node: membership.node(),
            nodes: self.placement.nodes(),
        };
        let i = self.index_of(node)?;
        if membership.node() != node {
            return Err(bad);
        }
        self.nodes[i].membership = Some(membership);
        Ok(())
    }

    /// Adds a component for the polling threads to run beside the nodes
    /// (after [`ClusterParts::start`]); components are spread round robin
    /// over the threads after the nodes' own.
    pub fn add_app(&mut self, app: impl AppComponent) {
        self.apps.push(Box::new(app));
    }

    /// Every node component, node by node: NIC runtime, then host worker
    /// (the order a driver polls them in). Application components are in
    /// [`ClusterParts::apps`]; [`ClusterParts::all_components`] has both.
    pub fn components(&mut self) -> Vec<&mut dyn Component> {
        let mut v: Vec<&mut dyn Component> = Vec::with_capacity(2 * self.nodes.len());
        for n in &mut self.nodes {
            v.push(&mut n.nic);
            v.push(&mut n.worker);
        }
        v
    }

    /// The node components ([`ClusterParts::components`]), then the
    /// application components: everything a driver of its own (the
    /// simulator) polls.
    pub fn all_components(&mut self) -> Vec<&mut dyn Component> {
        let mut v: Vec<&mut dyn Component> =
            Vec::with_capacity(2 * self.nodes.len() + self.apps.len());
        for n in &mut self.nodes {
            v.push(&mut n.nic);
            v.push(&mut n.worker);
        }
        for a in &mut self.apps {
            v.push(a.as_mut());
        }
        v
    }

    /// Whether every NIC runtime and host worker is idle (no transaction,
    /// DMA, queued outcome, unsent packet or unapplied log entry).
    pub fn is_quiescent(&mut self) -> bool {
        self.nodes
            .iter_mut()
            .all(|n| n.nic.is_quiescent() && n.worker.is_quiescent())
    }

    /// Polls every node component on this thread (not the [`apps`](Self::apps);
    /// not the NIC runtime of a node its membership fenced),
    /// `now` from `clock`, until a pass finds the whole cluster idle and no
    /// component did work. Gives up after `passes_max` passes, or after
    /// [`DRAIN_IDLE_PASSES_MAX`] passes in a row without work. Returns
    /// whether the cluster went idle.
    pub fn drain(&mut self, passes_max: u64, mut clock: impl FnMut() -> Nanos) -> bool {
        let mut idle = 0;
        for _ in 0..passes_max {
            let now = clock();
            let mut work = false;
            for n in &mut self.nodes {
                // A fenced node's runtime is not polled here either (its
                // lease as last read: a drain runs no agent).
                if n.membership.as_ref().is_none_or(|m| m.agent().serving(now)) {
                    work |= n.nic.run_iteration(now);
                    work |= super::copy_reads::serve_direct(&mut n.nic, n.worker.table());
                }
                work |= n.worker.run_iteration(now);
            }
            if work {
                idle = 0;
                continue;
            }
            if self.is_quiescent() {
                return true;
            }
            idle += 1;
            if idle >= DRAIN_IDLE_PASSES_MAX {
                break;
            }
        }
        false
    }

    /// The cluster's clock: nanoseconds since its threads first started (0
    /// if they never did), for polling these parts on the caller's thread
    /// after a run without moving `now` backwards.
    pub fn now(&self) -> Nanos {
        self.clock_origin
            .map_or(0, |e| e.elapsed().as_nanos() as Nanos)
    }

    /// Sets the origin of the cluster's clock (`now` = nanoseconds since
    /// `origin`) before its threads first start, so a deployed node can tell
    /// others where its clock starts (its histories' times, shifted by the
    /// origin, compare across processes of one machine). Ignored once the
    /// clock has an origin (the threads started, or a client of an observed
    /// cluster timed a call): `now` never goes backwards.
    pub fn set_clock_origin(&mut self, origin: Instant) {
        self.settle_clock_origin(origin);
    }

    /// The clock's origin, fixing it to `candidate` if it had none. The
    /// clients of an observed cluster read the same clock
    /// ([`crate::observe`]): whichever fixes the origin first fixes it for both.
    pub(crate) fn settle_clock_origin(&mut self, candidate: Instant) -> Instant {
        if let Some(origin) = self.clock_origin {
            return origin;
        }
        let origin = match &self.observation {
            Some(obs) => obs.origin_or(candidate),
            None => candidate,
        };
        self.clock_origin = Some(origin);
        origin
    }

    /// Counters of every node (exact: nothing is running).
    pub fn stats(&self) -> ClusterStats {
        ClusterStats {
            nodes: self
                .nodes
                .iter()
                .zip(&self.ids)
                .map(|(n, &id)| {
                    let mut s = NodeStats {
                        node: id,
                        worker: n.worker.stats(),
                        ..NodeStats::default()
                    };
                    s.set_nic(&n.nic);
                    s.membership = n.membership.as_ref().map(NodeMembership::view);
                    s
                })
                .collect(),
        }
    }

    /// Puts every row on every replica the placement names for its key (of
    /// the nodes this process holds: a deployed node loads only the rows it
    /// replicates), with
    /// version 1 (Xenic §4.1.2's host table, written directly: nothing runs),
    /// and adds the rows of each shard to its primary's key count
    /// ([`Room::add_loaded`](splitkv_nic::protocol::server::Room::add_loaded):
    /// inserts reserve room against it). A load may pass a shard's quota (the
    /// tables refuse only rows they have no room for); inserts of that shard
    /// then abort with `TxStatus::TableFull`.
    /// `progress` is called every [`LOAD_PROGRESS_ROWS`](super::LOAD_PROGRESS_ROWS)
    /// rows and once at the end. Load keys no transaction has touched.
    ///
    /// # Errors
    /// [`LoadError`]: a value over the table's limit, a key already present,
    /// or a full table. Rows before the failing one are loaded; the failing
    /// row may be on some of its replicas.
    pub fn load<V: AsRef<[u8]>>(
        &mut self,
        rows: impl IntoIterator<Item = (Key, V)>,
        progress: impl FnMut(LoadProgress),
    ) -> Result<LoadProgress, LoadError> {
        let placement = self.placement;
        let mut primary_rows = vec![0u64; self.nodes.len()];
        let mut tables: Vec<&mut HostTable> = self
            .nodes
            .iter_mut()
            .map(|n| n.worker.table_mut())
            .collect();
        let loaded = load_rows(
            placement,
            &self.ids,
            &mut tables,
            rows,
            &mut primary_rows,
            progress,
        );
        for (n, rows) in self.nodes.iter_mut().zip(primary_rows) {
            n.nic.room_mut().add_loaded(rows);
        }
        loaded
    }

    /// Starts polling threads over these components: a running [`Cluster`].
    ///
    /// # Errors
    /// [`ClusterError::Spawn`] if a thread could not be started (the threads
    /// already started are stopped).
    pub fn start(self) -> Result<Cluster, ClusterError> {
        Cluster::start(self)
    }
}
