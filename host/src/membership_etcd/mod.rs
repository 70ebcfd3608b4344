//! Membership on etcd for deployed node processes (feature `etcd`;
//! DESIGN.md "Faults"): the deployed implementation of
//! [`Membership`], next to the simulator's leases in virtual time
//! (`splitkv_sim::membership`), on the same interface.
//!
//! - **Leases.** Each node holds an etcd lease of whole seconds
//!   ([`EtcdSettings::lease_ttl_s`]) with its member key
//!   `/<cluster>/members/<node>` attached ([`keys`]). A renewal is one
//!   keep-alive; the node counts its lease from the moment it *asked* for
//!   the renewal, shortened by the clock-drift bound [`CLOCK_DRIFT_PPM_MAX`]
//!   and the guard [`LEASE_GUARD_NS`], so it believes in its lease only
//!   while etcd surely still holds it (FaRM-style lease fencing).
//!   Keep-alives run on a task of their own (never behind the driver's
//!   other etcd calls), and while the driver starts that task renews by
//!   itself: the start-up's registration writes may outlast a short lease.
//! - **Fencing.** When the lease may have run out (no renewal took, e.g.
//!   etcd is unreachable) the node reports fail-stop
//!   ([`EtcdMember::fail_stop`]; [`Membership::renew`] answers
//!   [`MembershipError::Removed`]) and must stop serving: it does so before
//!   etcd deletes its member key, which is what the others wait for.
//! - **Configurations.** `/<cluster>/config` holds the whole configuration
//!   (epoch, live set, copying set, `since[]`, `incarnation[]`;
//!   [`keys::ConfigRecord`]) and changes only by an etcd transaction
//!   comparing its mod revision, so two nodes never install two
//!   configurations for one epoch. A live node that sees a joined node of
//!   the configuration without a member key (its lease is gone), or with a
//!   member key held by another incarnation than the configured one (a
//!   restarted process, see below), installs the next configuration
//!   without it.
//! - **Suspects.** A reported suspect (its session fell silent) is recorded
//!   under the reporter's lease, naming the incarnation the reporter's
//!   configuration holds for it (a report on a node outside it is not
//!   made; one naming an incarnation the stored configuration no longer
//!   holds does not count: [`keys::current_suspicions`]); if the
//!   configuration takes the report
//!   (`Configuration::taken_suspicions` over every stored report, oldest
//!   first: a suspect's own reports and a suspicion that would strand a
//!   shard do not count), the suspect's own driver stops renewing, so it is
//!   configured out once its lease has run out — never earlier (as the
//!   simulated manager refuses a suspect's renewals).
//! - **Incarnations.** Each process of a node has an incarnation
//!   ([`EtcdMember::incarnation`]): the given one
//!   ([`EtcdSettings::incarnation`], e.g. the wall clock at start) raised
//!   above the node's last one, kept in `/<cluster>/incarnations/<node>`
//!   and updated by compare-and-swap at connect, so it strictly grows per
//!   node even across clock steps. The member key's value is the
//!   incarnation of the process holding it. A configuration's
//!   `incarnation[node]` names the process it admits; 0 (every node of the
//!   first configuration) means the node's *first* incarnation, recorded
//!   once in `/<cluster>/joined/<node>` at its first registration: the
//!   first process of each node is admitted at once, as before rejoin, and
//!   every later process is a different one.
//! - **Rejoin.** A process whose incarnation the configuration
//!   does not admit *joins* (the simulated manager's join,
//!   `splitkv_sim::membership`): it holds a lease but no configuration
//!   ([`EtcdMember`] says how it looks through [`Membership`]). While its
//!   predecessor's lease still holds `members/<node>` it waits under
//!   `joining/<node>`; it takes `members/<node>` only once etcd deleted it
//!   (the predecessor's lease ran out, so the predecessor stopped serving:
//!   fencing). The survivors then configure the predecessor out (its key
//!   is held by another incarnation), and the joining process installs
//!   `Configuration::rejoining(node, incarnation)`: live, copying, by
//!   compare-and-swap (a conflict is counted and retried at the next poll).
//!   A whole cluster restarted on the same etcd prefix has no survivor to
//!   do that: see "Lifecycle".
//! - **Lifecycle (cluster generations).** The store is main-memory: when
//!   every configured member of the stored configuration has stopped
//!   (drained, fenced or killed: its member key is gone), the cluster's rows
//!   are gone. A starting process that finds such a configuration *forms
//!   the next generation*: a configuration one epoch higher with every node
//!   of the file a member and the generation one higher, by
//!   compare-and-swap, clearing the old generation's first incarnations and
//!   suspect reports, so every starting process is admitted as its node's
//!   first ([`keys::Lineage`]; module `driver::lifecycle`). Epochs and
//!   incarnations keep rising. The generation is folded into the cluster id
//!   every packet carries
//!   ([`splitkv_layout::wire::generation_cluster_id`]), so packets of an
//!   earlier generation are dropped and counted (`other_cluster`). While
//!   configured members' keys are still held (the whole cluster killed and
//!   started again within the lease TTL) a starting process waits until
//!   they are gone or show that their holders renew (a configuration
//!   change, or a key outliving its lease's remaining TTL by
//!   [`GENERATION_GUARD_MS`] and a second): then it joins that live
//!   generation. A running process that sees a later generation stored
//!   stops ([`FailStop::GenerationEnded`]); a joining one that finds no
//!   configured member alive stops too ([`FailStop::Stranded`]): started
//!   again, it forms the next generation. The stored record names its
//!   cluster id and shape: a prefix holding another cluster's
//!   ([`EtcdError::Foreign`]) or a configuration of other nodes or
//!   replication ([`EtcdError::OtherShape`]) or of another commit protocol
//!   ([`EtcdError::OtherProtocol`]) is refused at start. A running
//!   process whose prefix no longer holds its cluster (the configuration
//!   gone or unreadable after `splitkv etcd clear --force`, another
//!   cluster's, or an earlier generation's) stops
//!   ([`FailStop::Displaced`]): clearing deletes keys, not leases, so its
//!   renewals alone would not stop it. Every stored configuration refused
//!   while running is counted ([`EtcdStats::configs_refused`]).
//! - **Addresses (replacement machines).** With its member key a process publishes
//!   where it is ([`EtcdSettings::addresses`]: data and control address,
//!   [`address::AddressRecord`] under `addresses/<node>`, under its
//!   lease), and each configuration a member passes on carries the data
//!   address of every member's configured incarnation
//!   ([`Membership::data_address`]): a new machine that replaced a dead
//!   node at another address is reached there once a configuration
//!   admits it.
//! - **Caught up.** [`Membership::report_caught_up`] with the epoch of the
//!   copy installs `Configuration::caught_up(node)` if the stored
//!   configuration still has that epoch with this process copying; a stale
//!   report is ignored and counted ([`EtcdStats::caught_up_stale`]).
//!
//! The async etcd client runs on a driver thread of its own (module `driver`);
//! [`EtcdMember`] is a polled state machine that only exchanges messages
//! with it over bounded channels, so it never blocks except in
//! [`EtcdMember::connect`] (start-up, bounded) and on drop (joins the
//! driver). Its `now` is the caller's clock (ns, any origin, monotonic).

pub mod address;
pub mod admin;
mod driver;
pub mod keys;
mod record;
mod store;

pub use address::NodeAddresses;
pub use store::ConfigStore;

use splitkv_layout::wire::NodeId;
#[cfg(doc)]
use splitkv_nic::membership::{Membership, MembershipError};
use splitkv_nic::{CommitProtocol, Nanos, NODES_MAX};

/// Default lease TTL (whole seconds; etcd's least TTL is 1.5 election
/// timeouts rounded up, 2 s with etcd's default 1 s election timeout).
pub const LEASE_TTL_S_DEFAULT: u32 = 2;
/// Longest lease TTL accepted (s).
pub const LEASE_TTL_S_MAX: u32 = 60;
/// Bound on the rate difference between a node's clock and etcd's (parts
/// per million): the node believes in a TTL of `t` for `t·(1 − drift)`.
pub const CLOCK_DRIFT_PPM_MAX: u64 = 1_000;
/// Taken off every lease the node believes in (ns): covers the time
/// between a node's last lease check and its last served request.
pub const LEASE_GUARD_NS: Nanos = 100_000_000;
/// Default interval between reads of the cluster's keys (ms).
pub const POLL_EVERY_MS_DEFAULT: u64 = 100;
/// Interval between reads of the cluster's keys (ms) for two leases after
/// the node reported a suspect (at most `poll_every_ms`): the survivors
/// see a dead member's key gone within this of etcd deleting it.
pub const POLL_AFTER_SUSPICION_MS: u64 = 20;
/// Default bound on one etcd call (ms).
pub const RPC_TIMEOUT_MS_DEFAULT: u64 = 250;
/// The driver's iteration period (ms).
pub const DRIVER_TICK_MS: u64 = 5;
/// Most commands queued from a member to its driver.
pub const COMMANDS_MAX: usize = 64;
/// Most undelivered notices from a driver to its member (more are dropped
/// and counted).
pub const NOTICES_MAX: usize = 64;
/// Etcd calls at start-up (connect, lease grant, register, create and read
/// the configuration): each may take a share of the start timeout.
pub const START_RPCS_MAX: u32 = 10;
/// Compare-and-swap tries on a node's incarnation counter at connect.
pub const INCARNATION_TRIES_MAX: u32 = 4;
/// Compare-and-swap tries of one caught-up report (a conflict re-reads
/// the configuration, whose epoch has then moved on: the report is stale).
pub const CAUGHT_UP_TRIES_MAX: u32 = 2;
/// Default bound on the whole start-up (ms): no lease is held yet, so it
/// may be longer than an RPC timeout (a freshly started etcd is slow).
pub const START_TIMEOUT_MS_DEFAULT: u64 = 5_000;
/// Longest start-up bound accepted (ms).
pub const START_TIMEOUT_MS_MAX: u64 = 60_000;
/// Added to a configured member's remaining lease before a starting
/// process takes a key still held as proof that its holder renews (ms):
/// etcd rounds the remaining TTL down to whole seconds (one more second is
/// added for that) and its lessor revokes expired leases every 500 ms.
pub const GENERATION_GUARD_MS: u64 = 500;
/// Longest a starting process waits to learn whether the stored
/// configuration's members are alive (ms): the longest lease, its rounding
/// and the guard.
pub const SETTLE_WAIT_MS_MAX: u64 = (LEASE_TTL_S_MAX as u64 + 1) * 1_000 + GENERATION_GUARD_MS;

/// How to reach etcd and which member this is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdSettings {
    /// Client URLs (`http://host:port`), at least one.
    pub endpoints: Vec<String>,
    /// The cluster's name: the key prefix `/<cluster>/` (no `/`, at most
    /// [`keys::CLUSTER_NAME_BYTES_MAX`] bytes).
    pub cluster: String,
    /// The cluster's id (the cluster file's `cluster_id`), stored with the
    /// configuration: a prefix holding another cluster's is refused
    /// ([`EtcdError::Foreign`]).
    pub cluster_id: u32,
    /// This node.
    pub node: NodeId,
    /// Nodes in the cluster (1..=[`NODES_MAX`]).
    pub nodes: usize,
    /// Replicas per shard (1..=`nodes`): the degree re-replication
    /// restores.
    pub replication: usize,
    /// Lease TTL asked for (whole seconds, 1..=[`LEASE_TTL_S_MAX`]); etcd
    /// may grant more, and the granted TTL is used.
    pub lease_ttl_s: u32,
    /// Interval between reads of the cluster's keys (ms, > 0).
    pub poll_every_ms: u64,
    /// Bound on one etcd call (ms, > 0, at most a quarter of the TTL).
    pub rpc_timeout_ms: u64,
    /// Bound on the whole start-up (ms, [`START_RPCS_MAX`] ..=
    /// [`START_TIMEOUT_MS_MAX`]); each start-up call gets a
    /// [`START_RPCS_MAX`]th of it.
    pub start_timeout_ms: u64,
    /// This process's incarnation as given (e.g. the wall clock at start):
    /// the one used is `max(given, last + 1)` over the node's earlier
    /// incarnations, at most `u32::MAX` ([`EtcdMember::incarnation`]).
    pub incarnation: u64,
    /// Where this process's transport and control endpoint are, published
    /// under `addresses/<node>` with its member key (for a
    /// replacement machine at another address than the cluster file's);
    /// `None` publishes none, and the peers keep the addresses they were
    /// built with.
    pub addresses: Option<NodeAddresses>,
    /// On RDMA verbs: the directory into which the driver writes, before
    /// passing each configuration on, the verbs endpoint each member's
    /// configured incarnation published (`crate::deploy::verbs`); `None`
    /// on other transports.
    pub verbs_peers: Option<crate::deploy::VerbsPeers>,
    /// The commit protocol this process runs, stored with the
    /// configuration: a stored configuration of another protocol is refused
    /// ([`EtcdError::OtherProtocol`]). Default Xenic OCC.
    pub commit: CommitProtocol,
}

impl EtcdSettings {
    /// Defaults for `node` of `nodes` (with `replication` replicas per
    /// shard) in `cluster` at `endpoints`.
    pub fn new(
        endpoints: Vec<String>,
        cluster: &str,
        node: NodeId,
        nodes: usize,
        replication: usize,
    ) -> EtcdSettings {
        EtcdSettings {
            endpoints,
            cluster: cluster.to_string(),
            cluster_id: 0,
            node,
            nodes,
            replication,
            lease_ttl_s: LEASE_TTL_S_DEFAULT,
            poll_every_ms: POLL_EVERY_MS_DEFAULT,
            rpc_timeout_ms: RPC_TIMEOUT_MS_DEFAULT,
            start_timeout_ms: START_TIMEOUT_MS_DEFAULT,
            incarnation: 0,
            addresses: None,
            verbs_peers: None,
            commit: CommitProtocol::XenicOcc,
        }
    }

    fn check(&self) -> Result<(), EtcdError> {
        let bad = |what, value: u64, range| Err(EtcdError::Settings { what, value, range });
        check_name(&self.cluster)?;
        if self.endpoints.is_empty() {
            return bad("endpoints", 0, "at least one");
        }
        if self.nodes == 0 || self.nodes > NODES_MAX {
            return bad("nodes", self.nodes as u64, "1..=NODES_MAX");
        }
        if self.node as usize >= self.nodes {
            return bad("node", u64::from(self.node), "below nodes");
        }
        if self.replication == 0 || self.replication > self.nodes {
            return bad("replication", self.replication as u64, "1..=nodes");
        }
        if self.lease_ttl_s == 0 || self.lease_ttl_s > LEASE_TTL_S_MAX {
            return bad(
                "lease_ttl_s",
                self.lease_ttl_s.into(),
                "1..=LEASE_TTL_S_MAX",
            );
        }
        if self.poll_every_ms == 0 {
            return bad("poll_every_ms", 0, "at least 1");
        }
        let quarter_ms = u64::from(self.lease_ttl_s) * 250;
        if self.rpc_timeout_ms == 0 || self.rpc_timeout_ms > quarter_ms {
            return bad("rpc_timeout_ms", self.rpc_timeout_ms, "1..=lease TTL / 4");
        }
        let start = self.start_timeout_ms;
        if start < u64::from(START_RPCS_MAX) || start > START_TIMEOUT_MS_MAX {
            return bad(
                "start_timeout_ms",
                start,
                "START_RPCS_MAX..=START_TIMEOUT_MS_MAX",
            );
        }
        Ok(())
    }
}

fn check_name(cluster: &str) -> Result<(), EtcdError> {
    if keys::ClusterKeys::valid_name(cluster) {
        return Ok(());
    }
    Err(EtcdError::ClusterName(cluster.to_string()))
}

/// The nodes of `mask`, comma-separated (`-` for none).
pub fn node_list(mask: u32) -> String {
    let nodes: Vec<String> = (0..32)
        .filter(|n| mask & (1 << n) != 0)
        .map(|n| n.to_string())
        .collect();
    match nodes.is_empty() {
        true => "-".into(),
        false => nodes.join(","),
    }
}

/// How long (ns) a node believes in a lease of `ttl_s` seconds counted from
/// its renewal request: the TTL less the drift bound and the guard.
pub fn believed_lease_ns(ttl_s: u64) -> Nanos {
    let ttl_ns = ttl_s.saturating_mul(1_000_000_000);
    let drift_ns = ttl_ns / 1_000_000 * CLOCK_DRIFT_PPM_MAX;
    ttl_ns
        .saturating_sub(drift_ns)
        .saturating_sub(LEASE_GUARD_NS)
}

/// Why the etcd membership could not start or an operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EtcdError {
    /// etcd did not answer at the endpoints.
    #[error("etcd unreachable at {endpoints}: {reason}")]
    Unreachable {
        /// The endpoints tried, comma-separated.
        endpoints: String,
        /// The client's reason.
        reason: String,
    },
    /// An etcd call failed after etcd first answered, or a stored record is
    /// unreadable.
    #[error("etcd: {0}")]
    Store(String),
    /// A setting out of its range.
    #[error("etcd membership: {what} = {value} out of range ({range})")]
    Settings {
        /// The setting.
        what: &'static str,
        /// Its value.
        value: u64,
        /// The allowed range, in words.
        range: &'static str,
    },
    /// The cluster name cannot be a key prefix.
    #[error("etcd membership: cluster name {0:?} must be 1-64 bytes without '/'")]
    ClusterName(String),
    /// The stored configuration leaves this node out. No longer returned:
    /// such a node now joins ([`EtcdMember::joining`]); kept so callers that
    /// match on it still build.
    #[error("node {node} is not in the stored configuration (epoch {epoch})")]
    NotInConfiguration {
        /// This node.
        node: NodeId,
        /// The stored epoch.
        epoch: u32,
    },
    /// The prefix holds the configuration of another cluster.
    #[error("{key} holds the configuration of cluster {stored}, not of cluster {ours}")]
    Foreign {
        /// The configuration key.
        key: String,
        /// The stored record's cluster id.
        stored: u32,
        /// This cluster's.
        ours: u32,
    },
    /// The prefix holds a configuration for another number of nodes or
    /// replication degree than this process's.
    #[error("{key} holds a configuration of {} nodes with replication {}, not {} with {}", stored.0, stored.1, ours.0, ours.1)]
    OtherShape {
        /// The configuration key.
        key: String,
        /// The stored (nodes, replication).
        stored: (usize, usize),
        /// This process's (nodes, replication).
        ours: (usize, usize),
    },
    /// The prefix holds a configuration of a cluster running another
    /// commit protocol than this process's: a cluster's protocol changes
    /// only with a new cluster (its etcd state cleared).
    #[error("{key} holds a configuration of a cluster running commit protocol {stored}, not {ours}: a cluster's protocol changes only with a new cluster (its etcd state cleared)")]
    OtherProtocol {
        /// The configuration key.
        key: String,
        /// The stored record's protocol.
        stored: CommitProtocol,
        /// This process's.
        ours: CommitProtocol,
    },
    /// Members hold their keys under live leases: the cluster still runs,
    /// so its state is not cleared.
    #[error("{prefix}: node(s) {} hold leases: the cluster still runs", node_list(*nodes))]
    MembersAlive {
        /// The prefix.
        prefix: String,
        /// The nodes holding their member keys (a mask by node id).
        nodes: u32,
    },
    /// The driver thread or its runtime could not start, or it stopped
    /// before reporting.
    #[error("etcd driver: {0}")]
    Thread(String),
}

impl EtcdError {
    fn unreachable(endpoints: &[String], e: store::StoreError) -> EtcdError {
        EtcdError::Unreachable {
            endpoints: endpoints.join(","),
            reason: e.to_string(),
        }
    }

    fn store(e: store::StoreError) -> EtcdError {
        EtcdError::Store(e.to_string())
    }
}

/// Why a member stopped serving (fail-stop; never split-brain).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FailStop {
    /// No renewal took before the believed lease ran out (etcd unreachable,
    /// or this node was reported as a suspect).
    #[error("lease ran out at {lease_until} ns without a renewal: stopped serving")]
    LeaseExpired {
        /// The end of the believed lease (member's ns).
        lease_until: Nanos,
    },
    /// etcd reported the lease gone.
    #[error("etcd reports this node's lease gone: stopped serving")]
    LeaseLost,
    /// A configuration without this node was installed.
    #[error("configuration epoch {epoch} leaves this node out: stopped serving")]
    Removed {
        /// That configuration's epoch.
        epoch: u32,
    },
    /// The cluster formed a later generation (this process's had no live
    /// member left, as seen by a starting process).
    #[error("the cluster formed generation {stored} after this process's generation {ours}: stopped serving")]
    GenerationEnded {
        /// This process's generation.
        ours: u32,
        /// The stored one.
        stored: u32,
    },
    /// This joining process has no live member to admit it: its
    /// generation's data is gone (started again, it forms the next one).
    #[error("no configured member of epoch {epoch} is alive to admit this node: stopped (started again, it forms a new cluster generation)")]
    Stranded {
        /// The stored configuration's epoch.
        epoch: u32,
    },
    /// The prefix no longer holds this process's cluster: its configuration
    /// is gone or unreadable (the prefix was cleared by force), another
    /// cluster's, or of an earlier generation. Counted in
    /// [`EtcdStats::configs_refused`].
    #[error("{0}: stopped serving")]
    Displaced(Displacement),
}

/// What a running process found under its prefix instead of its cluster
/// ([`FailStop::Displaced`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Displacement {
    /// No configuration, or one that does not decode for this cluster's
    /// shape (the prefix was cleared by force, perhaps reused).
    #[error("the cluster's configuration in etcd is gone or unreadable")]
    Gone,
    /// Another cluster id's configuration.
    #[error("etcd holds cluster {stored}'s configuration under this cluster's prefix")]
    Foreign {
        /// The stored cluster id.
        stored: u32,
    },
    /// A configuration of an earlier generation than this process's (the
    /// prefix was cleared by force and a new cluster formed).
    #[error("etcd holds a configuration of generation {stored}, before this process's {ours}")]
    EarlierGeneration {
        /// This process's generation.
        ours: u32,
        /// The stored one.
        stored: u32,
    },
}

/// Counters of one [`EtcdMember`] and its driver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EtcdStats {
    /// Renewals etcd granted.
    pub grants: u64,
    /// Renewals that did not take (etcd error, or suspected).
    pub renewals_failed: u64,
    /// Failed etcd calls (the last one's reason: [`EtcdMember::last_error`]).
    pub etcd_errors: u64,
    /// Configurations this node installed (won the compare-and-swap).
    pub installs_won: u64,
    /// Installs that lost the compare-and-swap to another node.
    pub installs_lost: u64,
    /// Notices dropped at [`NOTICES_MAX`].
    pub notices_dropped: u64,
    /// Requests dropped at [`COMMANDS_MAX`].
    pub commands_dropped: u64,
    /// Configurations admitting this (restarted) node that it installed.
    pub joins: u64,
    /// Polls at which this joining node had to wait: its predecessor's
    /// lease still held the member key, the predecessor was still in the
    /// configuration (the survivors configure it out), or the member was
    /// not polled yet (the node's runtime does not run).
    pub joins_deferred: u64,
    /// Join installs that lost the compare-and-swap (retried at the next
    /// poll).
    pub join_conflicts: u64,
    /// Caught-up reports that made this node a replica.
    pub caught_up_taken: u64,
    /// Caught-up reports ignored: the epoch had moved on, or this node was
    /// not copying (or not admitted) then.
    pub caught_up_stale: u64,
    /// Stored configurations this process refused to serve under: a later
    /// generation's ([`FailStop::GenerationEnded`]), or one that is gone,
    /// unreadable, another cluster's or an earlier generation's
    /// ([`FailStop::Displaced`]); the reason in [`EtcdMember::last_error`].
    pub configs_refused: u64,
    /// Snapshots that held an address record that did not decode (its node
    /// keeps the address its peers had; the reason in
    /// [`EtcdMember::last_error`]).
    pub address_records_bad: u64,
}

mod member;
pub use member::EtcdMember;
