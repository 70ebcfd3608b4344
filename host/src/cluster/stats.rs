//! Counters of a cluster, and the state its polling threads share with the
//! [`Cluster`](super::Cluster) handle and its clients.

use super::copy_reads::CopyReads;
use super::membership::{MembershipView, NodeMembership};
use super::poll::Caught;
use super::ClusterError;
use crate::client::ClientError;
use crate::log::WorkerStats;
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::wire::NodeId;
use splitkv_nic::net::session::SessionEvent;
use splitkv_nic::recovery::rereplication::CopyStats;
use splitkv_nic::runtime::{Availability, RebuildStats, RecoveryActions, RecoveryRuntimeStats};
use splitkv_nic::{ClientClosed, NicMode, NicRuntime, NicStats, NODES_MAX};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// Counters of one node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// The node.
    pub node: NodeId,
    /// Its NIC runtime: coordinator, server, batching, cache and client-port
    /// counters (outcomes by [`TxStatus`] are in `nic.clients.outcomes`).
    pub nic: NicStats,
    /// Its host worker (log entries applied, stale records, bad entries, acks).
    pub worker: WorkerStats,
    /// Clients closed for a corrupt request ring: `(client index, reason)`.
    pub closed_clients: Vec<(usize, ClientClosed)>,
    /// Peers whose session this node declared failed after the configured
    /// silence, each once, in the order reported (at most
    /// [`NODES_MAX`](splitkv_nic::NODES_MAX)). A running [`Cluster`](super::Cluster)'s
    /// polling threads drain them from the NIC runtime's session events
    /// (`NicRuntime::drain_session_events`) unless a membership layer takes
    /// them over. With a membership
    /// ([`NodeStats::membership`]) its agent takes the events, and these are
    /// the peers the coordinator counts as failed (sessions and
    /// configurations).
    pub failed_peers: Vec<NodeId>,
    /// The NIC runtime's membership epoch (0: never set).
    pub epoch: u32,
    /// Its recovery wiring's counters (crash recovery: epochs begun and resumed).
    pub recovery: RecoveryRuntimeStats,
    /// What its recovery did, and when (ns of the cluster's clock).
    pub recovery_actions: RecoveryActions,
    /// The node's membership as its polling thread last saw it (`None`:
    /// static membership).
    pub membership: Option<MembershipView>,
    /// Its NIC runtime's incarnation (a NIC restart takes the next).
    pub nic_incarnation: u32,
    /// Whether its NIC runtime serves (`false` while it rebuilds after a
    /// restart, [`Availability::Rebuilding`]).
    pub nic_serving: bool,
    /// Its NIC runtime's mode ([`NicRuntime::mode`]: serving, awaiting
    /// admission, recovering, rebuilding or stopped; `/status`'s `nic.mode`).
    pub nic_mode: NicMode,
    /// Its NIC runtime's restarts and rebuilds.
    pub rebuild: RebuildStats,
    /// Its re-replication counters (copies served as a shard's
    /// primary, chunks, `Done`s received as a copying node).
    pub copy: CopyStats,
    /// Whether its NIC runtime is being copied and has not finished
    /// (`NicRuntime::copying`).
    pub copying: bool,
}

impl NodeStats {
    /// Refreshes the NIC part from `nic` (and the closed-client reasons when
    /// their count changed).
    pub(crate) fn set_nic(&mut self, nic: &NicRuntime) {
        self.nic = nic.stats();
        self.epoch = nic.epoch();
        self.recovery = nic.recovery_stats();
        self.recovery_actions = nic.recovery_actions();
        self.nic_incarnation = nic.incarnation();
        self.nic_serving = nic.availability() == Availability::Serving;
        self.nic_mode = nic.mode();
        self.rebuild = nic.rebuild_stats();
        self.copy = nic.copy_stats();
        self.copying = nic.copying();
        if self.nic.clients.clients_closed as usize != self.closed_clients.len() {
            self.closed_clients = (0..nic.clients())
                .filter_map(|c| Some((c, nic.client_closed(c)?.clone())))
                .collect();
        }
    }
}

impl NodeStats {
    /// Refreshes the membership part from `m`, and the failed peers from
    /// the coordinator's mask (the agent drained the session events).
    pub(crate) fn set_membership(&mut self, m: &NodeMembership, nic: &NicRuntime) {
        self.membership = Some(m.view());
        let failed = nic.failed_peers();
        self.failed_peers.clear();
        self.failed_peers
            .extend((0..NODES_MAX as NodeId).filter(|&n| failed & (1 << n) != 0));
    }

    /// Moves `nic`'s session events into [`NodeStats::failed_peers`].
    pub(crate) fn take_session_events(&mut self, nic: &mut NicRuntime) {
        let mut events = Vec::new();
        nic.drain_session_events(&mut events);
        for SessionEvent::PeerFailed { node } in events {
            if !self.failed_peers.contains(&node) && self.failed_peers.len() < NODES_MAX {
                self.failed_peers.push(node);
            }
        }
    }
}

/// Counters of every node, with sums over the cluster. Taken from a running
/// cluster they are at most [`STATS_PUBLISH_INTERVAL_NS`](super::STATS_PUBLISH_INTERVAL_NS)
/// old; from a stopped one, exact.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterStats {
    /// By node id.
    pub nodes: Vec<NodeStats>,
}

impl ClusterStats {
    fn sum(&self, f: impl Fn(&NodeStats) -> u64) -> u64 {
        self.nodes.iter().map(f).sum()
    }

    /// Transactions that ended with `status`, as their coordinators reported them.
    pub fn outcomes(&self, status: TxStatus) -> u64 {
        self.sum(|n| n.nic.clients.outcomes[status as usize])
    }

    /// Committed transactions.
    pub fn committed(&self) -> u64 {
        self.outcomes(TxStatus::Committed)
    }

    /// Transactions that did not commit, whatever the reason
    /// ([`ClusterStats::outcomes`] gives each reason); not those whose
    /// outcome is unknown ([`TxStatus::Unknown`]: they may have committed).
    pub fn aborted(&self) -> u64 {
        TxStatus::ALL
            .iter()
            .filter(|s| **s != TxStatus::Committed && !s.is_indeterminate())
            .map(|s| self.outcomes(*s))
            .sum()
    }

    /// Network packets sent (Dnl batching, Dandelion §5.1).
    pub fn packets(&self) -> u64 {
        self.sum(|n| n.nic.net.batch.packets)
    }

    /// Messages in those packets.
    pub fn messages(&self) -> u64 {
        self.sum(|n| n.nic.net.batch.messages)
    }

    /// Messages per packet (0 when no packet was sent).
    pub fn messages_per_packet(&self) -> f64 {
        match self.packets() {
            0 => 0.0,
            p => self.messages() as f64 / p as f64,
        }
    }

    /// NIC object-cache hits (Xenic §4.1.3).
    pub fn cache_hits(&self) -> u64 {
        self.sum(|n| n.nic.cache.hits)
    }

    /// NIC object-cache misses.
    pub fn cache_misses(&self) -> u64 {
        self.sum(|n| n.nic.cache.misses)
    }

    /// DMA read vectors the servers submitted.
    pub fn dma_reads(&self) -> u64 {
        self.sum(|n| n.nic.server.dma_reads)
    }

    /// Host-worker counters summed over nodes.
    pub fn worker(&self) -> WorkerStats {
        let mut w = WorkerStats::default();
        for n in &self.nodes {
            w.entries += n.worker.entries;
            w.applied += n.worker.applied;
            w.stale += n.worker.stale;
            w.bad_entries += n.worker.bad_entries;
            w.acks += n.worker.acks;
        }
        w
    }

    /// Clients closed for a corrupt request ring, over all nodes.
    pub fn clients_closed(&self) -> u64 {
        self.sum(|n| n.nic.clients.clients_closed)
    }
}

const RUNNING: u8 = 0;
const PAUSED: u8 = 1;
const SHUT_DOWN: u8 = 2;
/// A thread panicked or a node stopped: the cluster stopped for good.
const FAILED: u8 = 3;

/// What a cluster's polling threads, its handle and its clients share.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Polling threads leave their loop when set.
    pub stop: AtomicBool,
    state: AtomicU8,
    /// The first panic or node fault, once the cluster failed.
    failure: Mutex<Option<ClusterError>>,
    /// Latest counters, by entry of the process's nodes, published by the
    /// polling threads.
    pub stats: Vec<Mutex<NodeStats>>,
    /// NIC runtime restarts asked for and not yet made, by entry
    /// (`Cluster::restart_nic`; the owning polling thread takes them).
    pub nic_restart: Vec<AtomicBool>,
    /// Whether each node's NIC runtime is restarting (restarted and not
    /// serving again yet), by entry: set by its polling thread at the
    /// restart and with each publish; its application gateway answers new
    /// requests [`UnavailableReason::NicRestarting`](splitkv_layout::app::UnavailableReason::NicRestarting)
    /// meanwhile.
    pub nic_restarting: Vec<std::sync::Arc<AtomicBool>>,
    /// Copy-read handoffs between each node's NIC runtime and host worker
    /// threads, by entry (re-replication, [`super::copy_reads`]).
    pub copy_reads: Vec<CopyReads>,
    /// The origin of the cluster's clock (the `now` of every time in the
    /// counters), set when the polling threads first start.
    pub clock_origin: OnceLock<Instant>,
    /// The counters of each node's application gateway, when the cluster
    /// serves applications ([`super::ClusterBuilder::serve_applications`]).
    #[cfg(not(loom))]
    pub applications: Mutex<Vec<(NodeId, std::sync::Arc<crate::clients::GatewayStats>)>>,
}

impl Shared {
    /// Shared state of a process holding the nodes `ids` (stats by entry).
    pub(crate) fn new(ids: &[NodeId]) -> Shared {
        Shared {
            stop: AtomicBool::new(false),
            state: AtomicU8::new(RUNNING),
            failure: Mutex::new(None),
            stats: ids
                .iter()
                .map(|&n| {
                    Mutex::new(NodeStats {
                        node: n,
                        ..NodeStats::default()
                    })
                })
                .collect(),
            nic_restart: ids.iter().map(|_| AtomicBool::new(false)).collect(),
            nic_restarting: (ids.iter())
                .map(|_| std::sync::Arc::new(AtomicBool::new(false)))
                .collect(),
            copy_reads: ids.iter().map(|_| CopyReads::default()).collect(),
            clock_origin: OnceLock::new(),
            #[cfg(not(loom))]
            applications: Mutex::new(Vec::new()),
        }
    }

    /// Marks the cluster running (threads started or restarted).
    pub(crate) fn set_running(&self) {
        self.stop.store(false, Ordering::Relaxed);
        self.state.store(RUNNING, Ordering::Release);
    }

    /// Marks the cluster paused (between runs) or shut down, and stops the threads.
    pub(crate) fn set_stopped(&self, shut_down: bool) {
        self.stop.store(true, Ordering::Relaxed);
        let to = if shut_down { SHUT_DOWN } else { PAUSED };
        let _ = self
            .state
            .compare_exchange(RUNNING, to, Ordering::AcqRel, Ordering::Acquire);
        if shut_down {
            let _ = self
                .state
                .compare_exchange(PAUSED, to, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// Records a polling thread's panic (the first failure is kept) and
    /// stops every thread.
    pub(crate) fn record_panic(&self, caught: Caught) {
        self.record_failure(ClusterError::Panicked {
            thread: caught.thread,
            message: caught.message,
        });
    }

    /// Records a failure (the first is kept: a panic, a node's fault, a
    /// fenced node) and stops every thread.
    pub(crate) fn record_failure(&self, e: ClusterError) {
        self.stop.store(true, Ordering::Relaxed);
        let mut f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if f.is_none() {
            *f = Some(e);
        }
        self.state.store(FAILED, Ordering::Release);
    }

    /// The recorded failure ([`ClusterError::Panicked`] or
    /// [`ClusterError::NodeStopped`]), if the cluster failed.
    pub(crate) fn failure(&self) -> Option<ClusterError> {
        if self.state.load(Ordering::Acquire) != FAILED {
            return None;
        }
        let f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        f.clone()
    }

    /// What a waiting client should do: go on waiting, or stop with an error
    /// because the cluster was shut down or a polling thread panicked.
    pub(crate) fn client_check(&self) -> Result<(), ClientError> {
        match self.state.load(Ordering::Acquire) {
            SHUT_DOWN => Err(ClientError::ShutDown),
            FAILED => match self.failure() {
                Some(ClusterError::Panicked { thread, message }) => {
                    Err(ClientError::Panicked { thread, message })
                }
                Some(
                    ClusterError::NodeStopped { node, reason }
                    | ClusterError::Fenced { node, reason },
                ) => Err(ClientError::NodeStopped { node, reason }),
                _ => Err(ClientError::ShutDown),
            },
            _ => Ok(()),
        }
    }

    /// A copy of the latest published counters.
    pub(crate) fn snapshot(&self) -> ClusterStats {
        ClusterStats {
            nodes: self
                .stats
                .iter()
                .map(|m| m.lock().unwrap_or_else(|e| e.into_inner()).clone())
                .collect(),
        }
    }
}

/// A handle on the counters a running [`Cluster`](super::Cluster)'s polling
/// threads publish, readable from any thread without the `Cluster` itself
/// (a control endpoint's thread, while another thread owns the cluster).
/// It stays valid across [`Cluster::load`](super::Cluster::load) and
/// [`Cluster::pause_with`](super::Cluster::pause_with).
#[derive(Debug, Clone)]
pub struct StatsHandle {
    pub(crate) shared: std::sync::Arc<Shared>,
}

impl StatsHandle {
    /// The counters last published (at most
    /// [`STATS_PUBLISH_INTERVAL_NS`](super::STATS_PUBLISH_INTERVAL_NS) old while the
    /// cluster runs), one entry per node the process holds.
    pub fn snapshot(&self) -> ClusterStats {
        self.shared.snapshot()
    }

    /// The counters of each node's application gateway now, by node (empty
    /// when the cluster serves no applications).
    #[cfg(not(loom))]
    pub fn applications(&self) -> Vec<(NodeId, crate::clients::GatewayCounts)> {
        let list = self
            .shared
            .applications
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        list.iter().map(|(n, s)| (*n, s.snapshot())).collect()
    }

    /// The failure that stopped the cluster, if any
    /// ([`ClusterError::Panicked`] or [`ClusterError::NodeStopped`]).
    pub fn failure(&self) -> Option<ClusterError> {
        self.shared.failure()
    }

    /// The instant the cluster's clock counts from: every time in the
    /// counters (ns, such as [`NodeStats::recovery_actions`]' or
    /// [`MembershipView::epoch_installed_ns`]) is nanoseconds since it.
    /// `None` until the polling threads first started.
    pub fn clock_origin(&self) -> Option<Instant> {
        self.shared.clock_origin.get().copied()
    }
}
