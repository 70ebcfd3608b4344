//! [`ClusterBuilder`]: the settings of an in-process cluster, checked before
//! anything is built.

use super::driver::Cluster;
use super::load::{node_keys_max, shard_quotas};
use super::parts::{Applications, ClusterParts, NodeParts};
use super::stats::Shared;
use super::ClusterError;
use crate::client::Client;
use crate::deploy::config::ClientSettings;
use crate::node::{build_node, NodeConfig};
use crate::observe::{CallObserver, Observation};
use crate::table::TableKind;
use splitkv_layout::wire::NodeId;
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::net::Transport;
use splitkv_nic::{CommitProtocol, Nanos, Placement, ProcedureRegistry};
use std::sync::Arc;

/// Polling threads of a cluster unless [`ClusterBuilder::threads`] says
/// otherwise: two, for the two-core machines the local driver targets.
pub const THREADS_DEFAULT: usize = 2;
/// Most polling threads a cluster may ask for. (A cluster never starts more
/// than one per component: two per node plus its application components.)
pub const THREADS_MAX: usize = 64;
/// Clients per node unless [`ClusterBuilder::clients_per_node`] says otherwise.
pub const CLIENTS_PER_NODE_DEFAULT: usize = 1;
/// Keys the cluster holds unless [`ClusterBuilder::capacity_keys`] says otherwise.
pub const CAPACITY_KEYS_DEFAULT: usize = 1 << 16;
/// Largest value unless [`ClusterBuilder::value_bytes_max`] says otherwise, in bytes.
pub const VALUE_BYTES_MAX_DEFAULT: usize = 64;
/// Headroom of each node's table over its share of the keys: one eighth more
/// (placement does not spread keys perfectly evenly) ...
const CAPACITY_HEADROOM_DIVISOR: usize = 8;
/// ... plus this many keys (small clusters).
const CAPACITY_HEADROOM_KEYS: usize = 1024;

type Configure = Arc<dyn Fn(&mut NodeConfig) + Send + Sync>;

/// The settings of an in-process cluster. Every setting has a default; see
/// [`Cluster`] for the module-level example.
#[derive(Clone)]
pub struct ClusterBuilder {
    nodes: usize,
    replication: usize,
    table: TableKind,
    capacity_keys: usize,
    value_bytes_max: usize,
    procedures: ProcedureRegistry,
    clients_per_node: usize,
    threads: usize,
    seed: u64,
    dma_latency_ns: Nanos,
    commit: CommitProtocol,
    configure: Option<Configure>,
    observer: Option<Arc<dyn CallObserver>>,
    applications: Option<ClientSettings>,
}

impl std::fmt::Debug for ClusterBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterBuilder")
            .field("nodes", &self.nodes)
            .field("replication", &self.replication)
            .field("table", &self.table)
            .field("capacity_keys", &self.capacity_keys)
            .field("value_bytes_max", &self.value_bytes_max)
            .field("procedures", &self.procedures)
            .field("clients_per_node", &self.clients_per_node)
            .field("threads", &self.threads)
            .field("seed", &self.seed)
            .field("commit", &self.commit)
            .field("observed", &self.observer.is_some())
            .field("applications", &self.applications)
            .finish_non_exhaustive()
    }
}

impl Default for ClusterBuilder {
    fn default() -> Self {
        ClusterBuilder::new()
    }
}

impl ClusterBuilder {
    /// Defaults: 3 nodes, replication 3, Robinhood tables holding
    /// [`CAPACITY_KEYS_DEFAULT`] keys of at most [`VALUE_BYTES_MAX_DEFAULT`]
    /// bytes, no procedures, [`CLIENTS_PER_NODE_DEFAULT`] client per node,
    /// [`THREADS_DEFAULT`] polling threads, seed 0, Xenic OCC.
    pub fn new() -> ClusterBuilder {
        ClusterBuilder {
            nodes: 3,
            replication: 3,
            table: TableKind::Robinhood,
            capacity_keys: CAPACITY_KEYS_DEFAULT,
            value_bytes_max: VALUE_BYTES_MAX_DEFAULT,
            procedures: ProcedureRegistry::new(),
            clients_per_node: CLIENTS_PER_NODE_DEFAULT,
            threads: THREADS_DEFAULT,
            seed: 0,
            dma_latency_ns: 0,
            commit: CommitProtocol::XenicOcc,
            configure: None,
            observer: None,
            applications: None,
        }
    }

    /// Nodes in the cluster, 1 to [`splitkv_nic::NODES_MAX`].
    pub fn nodes(mut self, nodes: usize) -> Self {
        self.nodes = nodes;
        self
    }

    /// Replicas of each key (primary plus backups), 1 to `nodes`.
    pub fn replication(mut self, replication: usize) -> Self {
        self.replication = replication;
        self
    }

    /// Which host table the nodes keep their data in.
    pub fn table(mut self, table: TableKind) -> Self {
        self.table = table;
        self
    }

    /// Distinct keys the whole cluster will hold (at least 1). Each node's
    /// table is sized for its share (`keys × replication / nodes`) with
    /// headroom; each shard may then hold its quota of keys (the node's table
    /// split among the shards it hosts, [`shard_quotas`]), and an insert past
    /// it aborts with `TxStatus::TableFull` (the DLHT grows instead).
    pub fn capacity_keys(mut self, keys: usize) -> Self {
        self.capacity_keys = keys;
        self
    }

    /// Largest value in bytes, 1 to [`VALUE_BYTES_MAX`](splitkv_layout::VALUE_BYTES_MAX)
    /// (the DLHT stores at most 8 B where the NIC can read it).
    pub fn value_bytes_max(mut self, bytes: usize) -> Self {
        self.value_bytes_max = bytes;
        self
    }

    /// The shipped procedures every node runs (Xenic §4.2.2); a procedure's id
    /// is its registration index.
    pub fn procedures(mut self, registry: ProcedureRegistry) -> Self {
        self.procedures = registry;
        self
    }

    /// Clients (request/outcome ring pairs) per node: how many application
    /// threads may each hold a [`Client`](crate::Client) of one node; 1 to
    /// [`CLIENTS_PER_NODE_MAX`](splitkv_nic::runtime::CLIENTS_PER_NODE_MAX).
    pub fn clients_per_node(mut self, clients: usize) -> Self {
        self.clients_per_node = clients;
        self
    }

    /// Polling threads, 1 to [`THREADS_MAX`]; a cluster starts at most one
    /// per component (two per node, plus application components).
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// The run's seed: every random choice of the nodes derives from it.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// DMA completion latency in nanoseconds (0: the next poll).
    pub fn dma_latency_ns(mut self, ns: Nanos) -> Self {
        self.dma_latency_ns = ns;
        self
    }

    /// The commit protocol every node runs (DESIGN.md "Commit protocols";
    /// default [`CommitProtocol::XenicOcc`]). A protocol not implemented yet
    /// makes the build fail with [`ClusterError::Node`] holding
    /// [`NodeError::Commit`](crate::node::NodeError::Commit).
    pub fn commit_protocol(mut self, commit: CommitProtocol) -> Self {
        self.commit = commit;
        self
    }

    /// Adjusts every node's [`NodeConfig`] after the builder has filled it in
    /// (ring sizes, `d_max`, cache size...); `build_node` checks the result.
    pub fn configure(mut self, f: impl Fn(&mut NodeConfig) + Send + Sync + 'static) -> Self {
        self.configure = Some(Arc::new(f));
        self
    }

    /// Reports every call of every [`Client`](crate::Client) of the cluster
    /// (each submission, and each outcome taken or given up on) to `observer`,
    /// with the node, the client's index, a per-client sequence number, the
    /// procedure, its arguments, status and result, and times on the
    /// cluster's clock: an invoke's read before its request is pushed, a
    /// completion's after its outcome is popped, so the real-time order of
    /// the recorded times holds in fact. See [`crate::observe`]. Without an
    /// observer a client pays one branch per submission and per outcome.
    pub fn observe_calls(mut self, observer: Arc<dyn CallObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Serves applications in other processes: once started, each node of
    /// the cluster (or the one node of [`ClusterBuilder::build_local`])
    /// listens on `settings.socket_path(node)` and serves the connections
    /// attached there through a gateway
    /// ([`ClientService`](crate::clients::ClientService), L5 §III-B) on a
    /// NIC client port of its own, beside the
    /// [`ClusterBuilder::clients_per_node`] ones [`Cluster::client`] hands
    /// out (so `clients_per_node + 1` ≤
    /// [`CLIENTS_PER_NODE_MAX`](splitkv_nic::runtime::CLIENTS_PER_NODE_MAX)).
    /// The sockets are removed when the cluster shuts down or is dropped;
    /// a cluster started again from its parts serves no applications.
    /// Not in `--cfg loom` builds (the socket code is left out there).
    pub fn serve_applications(mut self, settings: ClientSettings) -> Self {
        self.applications = Some(settings);
        self
    }

    /// The gateways' ports (one per node built) and what they serve with.
    fn applications(&self, ports: Vec<(NodeId, Client)>) -> Option<Applications> {
        let settings = self.applications.clone()?;
        Some(Applications {
            settings,
            procedures: self.procedures.clone(),
            ports,
        })
    }

    /// A fresh observation for one built cluster (its own clock origin).
    fn observation(&self) -> Option<Arc<Observation>> {
        self.observer
            .as_ref()
            .map(|o| Arc::new(Observation::new(o.clone())))
    }

    fn check(&self) -> Result<Placement, ClusterError> {
        let setting = |setting, value: usize, expected| ClusterError::Setting {
            setting,
            value: value as u64,
            expected,
        };
        let placement = Placement::new(self.nodes, self.replication)?;
        if self.capacity_keys == 0 {
            return Err(setting("capacity_keys", 0, "at least 1"));
        }
        if self.value_bytes_max == 0 {
            return Err(setting("value_bytes_max", 0, "at least 1"));
        }
        if self.threads == 0 || self.threads > THREADS_MAX {
            return Err(setting("threads", self.threads, "1 to THREADS_MAX (64)"));
        }
        Ok(placement)
    }

    /// The configuration of node `node`.
    fn node_config(&self, node: usize, placement: Placement) -> NodeConfig {
        let share = (self.capacity_keys as u128 * self.replication as u128)
            .div_ceil(self.nodes as u128)
            .min(usize::MAX as u128 / 2) as usize;
        let capacity = share + share / CAPACITY_HEADROOM_DIVISOR + CAPACITY_HEADROOM_KEYS;
        let mut cfg = NodeConfig::new(node as u16, placement, capacity, self.value_bytes_max);
        cfg.table_kind = self.table;
        // One more port for the gateway, if applications are served.
        cfg.clients = self.clients_per_node + usize::from(self.applications.is_some());
        cfg.seed = self.seed;
        cfg.dma_latency_ns = self.dma_latency_ns;
        cfg.commit = self.commit;
        if let Some(f) = &self.configure {
            f(&mut cfg);
        }
        cfg
    }

    /// Assembles every node over `transports` (one per node, in node order)
    /// without starting anything: for a driver of the caller's (the
    /// simulator), or [`ClusterParts::start`] later. Each primary gets its
    /// shard's quota of keys ([`shard_quotas`] of what each node's table
    /// guarantees, [`node_keys_max`]; see `splitkv_nic::protocol::server::Room`):
    /// an insert past it aborts with `TxStatus::TableFull`.
    ///
    /// # Errors
    /// [`ClusterError::Placement`], [`ClusterError::Setting`] or
    /// [`ClusterError::Node`] for a bad setting; [`ClusterError::Transports`]
    /// when the transports do not match the nodes.
    pub fn build_parts(
        &self,
        transports: Vec<Box<dyn Transport>>,
    ) -> Result<ClusterParts, ClusterError> {
        let placement = self.check()?;
        if transports.len() != self.nodes {
            return Err(ClusterError::Transports {
                given: transports.len(),
                nodes: self.nodes,
            });
        }
        let ids: Vec<NodeId> = (0..self.nodes as NodeId).collect();
        let shared = Arc::new(Shared::new(&ids));
        let observation = self.observation();
        let mut nodes = Vec::with_capacity(self.nodes);
        let configs: Vec<NodeConfig> = (0..self.nodes)
            .map(|i| self.node_config(i, placement))
            .collect();
        let node_keys: Vec<u64> = configs.iter().map(node_keys_max).collect();
        let quotas = shard_quotas(&placement, &node_keys);
        let mut ports = Vec::new();
        for ((t, cfg), quota) in transports.into_iter().zip(&configs).zip(quotas) {
            let (parts, port) = self.node_parts(cfg, quota, t, &shared, observation.as_ref())?;
            nodes.push(parts);
            ports.extend(port.map(|p| (cfg.node, p)));
        }
        Ok(ClusterParts {
            placement,
            nodes,
            ids,
            apps: Vec::new(),
            threads: self.threads,
            clients_per_node: self.clients_per_node,
            shared,
            clock_origin: None,
            observation,
            applications: self.applications(ports),
        })
    }

    /// Assembles one node with its shard's quota and attaches its clients
    /// (to `observation` too, if calls are observed); the gateway's port
    /// (the last client, not observed) apart when applications are served.
    fn node_parts(
        &self,
        cfg: &NodeConfig,
        quota: u64,
        transport: Box<dyn Transport>,
        shared: &Arc<Shared>,
        observation: Option<&Arc<Observation>>,
    ) -> Result<(NodeParts, Option<Client>), ClusterError> {
        let (mut nic, worker, mut clients) =
            build_node(cfg, self.procedures.clone(), transport)?.into_clients();
        let gateway_port = match self.applications {
            Some(_) => clients.pop(),
            None => None,
        };
        // Inserts reserve room against the shard's quota (the room rule).
        nic.room_mut().set_quota(quota);
        if let Some(obs) = observation {
            for (i, c) in clients.iter_mut().enumerate() {
                c.observe(obs.clone(), cfg.node, i as u32);
            }
        }
        // `Cluster::client` pops from the back: hand out client 0 first.
        clients.reverse();
        clients.iter_mut().for_each(|c| c.attach(shared.clone()));
        let parts = NodeParts {
            nic,
            worker,
            clients,
            membership: None,
        };
        Ok((parts, gateway_port))
    }

    /// Assembles only node `node` of the cluster over `transport` (its
    /// peers live in other processes and are reached through it): the
    /// deployed node of DESIGN.md driver 3. The node's table, quota and
    /// seed are those [`ClusterBuilder::build_parts`] would give it, so a
    /// cluster of processes each built this way is the in-process cluster
    /// split apart. [`ClusterParts::nodes`] then holds one entry
    /// ([`ClusterParts::node_ids`] is `[node]`); [`ClusterParts::load`] loads
    /// only the rows the node replicates. Start it with
    /// [`ClusterParts::start`].
    ///
    /// # Errors
    /// As [`ClusterBuilder::build_parts`]; [`ClusterError::BadNode`] for a
    /// node outside the cluster.
    pub fn build_local_parts(
        &self,
        node: NodeId,
        transport: Box<dyn Transport>,
    ) -> Result<ClusterParts, ClusterError> {
        let placement = self.check()?;
        if node as usize >= self.nodes {
            return Err(ClusterError::BadNode {
                node,
                nodes: self.nodes,
            });
        }
        let ids = vec![node];
        let shared = Arc::new(Shared::new(&ids));
        let observation = self.observation();
        let configs: Vec<NodeConfig> = (0..self.nodes)
            .map(|i| self.node_config(i, placement))
            .collect();
        let node_keys: Vec<u64> = configs.iter().map(node_keys_max).collect();
        let quota = shard_quotas(&placement, &node_keys)[node as usize];
        let cfg = &configs[node as usize];
        let (parts, port) =
            self.node_parts(cfg, quota, transport, &shared, observation.as_ref())?;
        let ports = port.map(|p| (node, p)).into_iter().collect();
        Ok(ClusterParts {
            placement,
            nodes: vec![parts],
            ids,
            apps: Vec::new(),
            threads: self.threads,
            clients_per_node: self.clients_per_node,
            shared,
            clock_origin: None,
            observation,
            applications: self.applications(ports),
        })
    }

    /// [`ClusterBuilder::build_local_parts`], started on its polling threads.
    ///
    /// # Errors
    /// As [`ClusterBuilder::build_local_parts`], and [`ClusterError::Spawn`].
    pub fn build_local(
        &self,
        node: NodeId,
        transport: Box<dyn Transport>,
    ) -> Result<Cluster, ClusterError> {
        self.build_local_parts(node, transport)?.start()
    }

    /// Builds the cluster over the in-process `mem` transport and starts its
    /// polling threads.
    ///
    /// # Errors
    /// As [`ClusterBuilder::build_parts`], and [`ClusterError::Spawn`] if a
    /// thread cannot be started.
    pub fn build(&self) -> Result<Cluster, ClusterError> {
        self.check()?;
        let transports = mem_network(self.nodes)
            .into_iter()
            .map(|t| Box::new(t) as Box<dyn Transport>)
            .collect();
        self.build_parts(transports)?.start()
    }
}
