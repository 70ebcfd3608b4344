//! The etcd operations of the membership (async, run only on the driver
//! thread or inside [`ConfigStore`]'s own runtime): create the first
//! configuration, hand out the next incarnation, register a member (or a
//! restarted process waiting for its predecessor's lease to run out), read
//! a snapshot, install the next
//! configuration by compare-and-swap on the configuration key's mod
//! revision, so two nodes never install two configurations for one epoch.

use super::address::{address_records, AddressRecord, NodeAddresses};
use super::keys::{
    current_suspicions, parse_incarnation, ClusterKeys, ConfigRecord, Lineage, RecordHeader,
};
use super::{EtcdError, INCARNATION_TRIES_MAX};
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, DeleteOptions, GetOptions, PutOptions, Txn, TxnOp,
    TxnOpResponse,
};
use splitkv_layout::wire::NodeId;
use splitkv_nic::membership::Configuration;
use splitkv_nic::{CommitProtocol, NODES_MAX};
use std::future::Future;
use std::time::Duration;

/// Why one etcd operation failed (inside the driver; the public face is
/// [`EtcdError`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    /// The etcd client reported an error (connection, gRPC status).
    #[error("{0}")]
    Etcd(#[from] etcd_client::Error),
    /// No answer within the RPC timeout.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The configuration key holds something that is not a configuration.
    #[error("{0}")]
    Corrupt(String),
}

/// A current-thread tokio runtime with time and I/O.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, EtcdError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| EtcdError::Thread(e.to_string()))
}

/// Runs `f` with a deadline of `limit`.
pub(crate) async fn timed<T, E: Into<StoreError>>(
    limit: Duration,
    f: impl Future<Output = Result<T, E>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(limit, f).await {
        Ok(r) => r.map_err(Into::into),
        Err(_) => Err(StoreError::Timeout(limit)),
    }
}

/// Connects a client to `endpoints` (lazily: the first RPC finds out
/// whether etcd answers).
pub(crate) async fn connect(endpoints: &[String], rpc: Duration) -> Result<Client, StoreError> {
    let opts = ConnectOptions::new()
        .with_connect_timeout(rpc)
        .with_timeout(rpc);
    timed(rpc, Client::connect(endpoints, Some(opts))).await
}

/// What one read of the cluster's keys saw (one etcd transaction, so one
/// revision).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// The stored configuration.
    pub config: Configuration,
    /// The configuration key's mod revision (the compare of the next install).
    pub rev: i64,
    /// The configuration's cluster and generation.
    pub lineage: Lineage,
    /// Nodes whose member key exists (their lease is alive).
    pub members: u32,
    /// Per node, the lease holding its member key (0: none).
    pub member_lease: [i64; NODES_MAX],
    /// Nodes that registered once.
    pub joined: u32,
    /// Per node, the incarnation holding its member key.
    pub member_inc: [Option<u32>; NODES_MAX],
    /// Per node, its first incarnation (`joined/<node>`).
    pub first_inc: [Option<u32>; NODES_MAX],
    /// The nodes the stored suspect reports make suspects, judged oldest
    /// first by the stored configuration
    /// ([`Configuration::taken_suspicions`]): a suspect's own reports and
    /// a suspicion that would strand a shard do not count.
    pub suspects: u32,
    /// Per node, the address record of the process holding its member key
    /// (replacement machines).
    pub addresses: [Option<AddressRecord>; NODES_MAX],
    /// Nodes whose address record did not decode (left `None` above).
    pub bad_addresses: u32,
    /// Per node, the incarnation of a starting process of it probing
    /// whether the configured members are alive (`probes/<node>`).
    pub probes: [Option<u32>; NODES_MAX],
}

/// A process registering: node, lease, incarnation, and the addresses it
/// publishes (`addresses/<node>`; `None`: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Holder {
    pub node: NodeId,
    pub lease: i64,
    pub incarnation: u32,
    pub addresses: Option<NodeAddresses>,
}

/// Creates the first configuration of cluster `cluster_id` running
/// `commit` (epoch 1, generation 1, all `nodes` live) unless one exists,
/// and returns the stored record's header (whatever cluster it was written
/// for).
pub(crate) async fn init_config(
    client: &mut Client,
    keys: &ClusterKeys,
    (nodes, replication): (usize, usize),
    (cluster_id, commit): (u32, CommitProtocol),
    rpc: Duration,
) -> Result<RecordHeader, StoreError> {
    let initial = Configuration::initial(nodes, replication);
    let first = ConfigRecord::encode(&initial, Lineage::first(cluster_id), commit);
    let txn = Txn::new()
        .when([Compare::create_revision(keys.config(), CompareOp::Equal, 0)])
        .and_then([TxnOp::put(keys.config(), first, None)]);
    timed(rpc, client.txn(txn)).await?;
    let r = timed(rpc, client.get(keys.config(), None)).await?;
    let kv = r
        .kvs()
        .first()
        .ok_or_else(|| StoreError::Corrupt(format!("{} is missing", keys.config())))?;
    ConfigRecord::header(kv.value())
        .map_err(|e| StoreError::Corrupt(format!("{}: {e}", keys.config())))
}

/// A stored configuration: the record decoded, its lineage, its commit
/// protocol (Xenic OCC in older records) and its mod revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stored {
    pub config: Configuration,
    pub lineage: Lineage,
    pub commit: CommitProtocol,
    pub rev: i64,
}

/// Reads the stored configuration, its lineage and its mod revision.
pub(crate) async fn read_config(
    client: &mut Client,
    keys: &ClusterKeys,
    nodes: usize,
    replication: usize,
    rpc: Duration,
) -> Result<Stored, StoreError> {
    let r = timed(rpc, client.get(keys.config(), None)).await?;
    let kv = r
        .kvs()
        .first()
        .ok_or_else(|| StoreError::Corrupt(format!("{} is missing", keys.config())))?;
    decode_stored(keys, kv.value(), nodes, replication).map(|(config, h)| Stored {
        config,
        lineage: h.lineage,
        commit: h.commit.unwrap_or_default(),
        rev: kv.mod_revision(),
    })
}

/// A stored record decoded for a cluster of `nodes` with `replication`,
/// with its header.
fn decode_stored(
    keys: &ClusterKeys,
    bytes: &[u8],
    nodes: usize,
    replication: usize,
) -> Result<(Configuration, RecordHeader), StoreError> {
    let corrupt =
        |e: super::keys::RecordError| StoreError::Corrupt(format!("{}: {e}", keys.config()));
    let h = ConfigRecord::header(bytes).map_err(corrupt)?;
    let c = ConfigRecord::decode(bytes, nodes, replication).map_err(corrupt)?;
    Ok((c, h))
}

/// Forms the next cluster generation if the configuration key's mod
/// revision is still `rev` (module `lifecycle`): stores `next` (every node
/// of the file a member, nothing copying) under `lineage`, running `commit`, and in the same
/// transaction clears the old generation's first incarnations
/// (`joined/`) and suspect reports, so the first process of each node in
/// the new generation is admitted as it registers. Returns whether this
/// call formed it.
pub(crate) async fn form_generation(
    client: &mut Client,
    keys: &ClusterKeys,
    rev: i64,
    (next, lineage, commit): (&Configuration, Lineage, CommitProtocol),
    rpc: Duration,
) -> Result<bool, StoreError> {
    let prefix = || Some(DeleteOptions::new().with_prefix());
    let txn = Txn::new()
        .when([Compare::mod_revision(keys.config(), CompareOp::Equal, rev)])
        .and_then([
            TxnOp::put(
                keys.config(),
                ConfigRecord::encode(next, lineage, commit),
                None,
            ),
            TxnOp::delete(keys.joined(), prefix()),
            TxnOp::delete(keys.suspects(), prefix()),
        ]);
    Ok(timed(rpc, client.txn(txn)).await?.succeeded())
}

/// Puts `value` at `key` under `lease` (a probe, an ack).
pub(crate) async fn put_leased(
    client: &mut Client,
    (key, value): (String, String),
    lease: i64,
    rpc: Duration,
) -> Result<(), StoreError> {
    let opts = PutOptions::new().with_lease(lease);
    timed(rpc, client.put(key, value, Some(opts))).await?;
    Ok(())
}

/// The members that answered `prober`'s probe of incarnation `incarnation`
/// (a mask by node id).
pub(crate) async fn acks(
    client: &mut Client,
    keys: &ClusterKeys,
    (prober, incarnation): (NodeId, u32),
    rpc: Duration,
) -> Result<u32, StoreError> {
    let prefix = keys.acks_of(prober);
    let r = timed(
        rpc,
        client.get(prefix.clone(), Some(GetOptions::new().with_prefix())),
    )
    .await?;
    let by_node =
        ClusterKeys::incarnations_of(&prefix, r.kvs().iter().map(|kv| (kv.key(), kv.value())));
    Ok((0..NODES_MAX)
        .filter(|&n| by_node[n] == Some(incarnation))
        .fold(0, |m, n| m | 1 << n))
}

/// The remaining and granted TTL of lease `lease` (s); `None` once etcd
/// no longer has it.
pub(crate) async fn lease_ttl(
    client: &mut Client,
    lease: i64,
    rpc: Duration,
) -> Result<Option<(i64, i64)>, StoreError> {
    let r = timed(rpc, client.lease_time_to_live(lease, None)).await?;
    Ok((r.ttl() >= 0).then(|| (r.ttl(), r.granted_ttl())))
}

/// Hands out node `node`'s next incarnation: `max(last + 1, given, 1)`
/// where `last` is the value of `incarnations/<node>`, stored back by a
/// compare-and-swap on that key's mod revision (at most
/// [`INCARNATION_TRIES_MAX`] tries), so incarnations of one node only grow,
/// even when the wall clock that gave `given` stepped back.
pub(crate) async fn next_incarnation(
    client: &mut Client,
    keys: &ClusterKeys,
    node: NodeId,
    given: u64,
    rpc: Duration,
) -> Result<u32, StoreError> {
    let key = keys.incarnations(node);
    let given = given.min(u64::from(u32::MAX)) as u32;
    for _ in 0..INCARNATION_TRIES_MAX {
        let r = timed(rpc, client.get(key.clone(), None)).await?;
        let (last, rev) = match r.kvs().first() {
            Some(kv) => {
                let last = parse_incarnation(kv.value())
                    .ok_or_else(|| StoreError::Corrupt(format!("{key}: not an incarnation")))?;
                (last, kv.mod_revision())
            }
            None => (0, 0),
        };
        let next = last
            .checked_add(1)
            .ok_or_else(|| StoreError::Corrupt(format!("{key}: incarnations exhausted")))?
            .max(given);
        let txn = Txn::new()
            .when([Compare::mod_revision(key.clone(), CompareOp::Equal, rev)])
            .and_then([TxnOp::put(key.clone(), next.to_string(), None)]);
        if timed(rpc, client.txn(txn)).await?.succeeded() {
            return Ok(next);
        }
    }
    Err(StoreError::Corrupt(format!(
        "{key}: {INCARNATION_TRIES_MAX} compare-and-swap conflicts"
    )))
}

/// What registering found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Registered {
    /// The node's first incarnation (the value of `joined/<node>`; `None`
    /// for the empty value of clusters older than rejoin).
    pub first: Option<u32>,
    /// Whether this process holds `members/<node>` (otherwise an earlier
    /// incarnation's lease still holds it and this one waits under
    /// `joining/<node>`).
    pub holds_member: bool,
}

/// Registers `h` (incarnation `h.incarnation` of `h.node` under
/// `h.lease`). The node's first registration (in a cluster generation)
/// creates `joined/<node>` with it and takes the member key in one
/// transaction; a later one takes the member key ([`take_member`]) or,
/// while an earlier incarnation's lease still holds it, waits under
/// `joining/<node>` (and a first one then registers again later).
pub(crate) async fn register(
    client: &mut Client,
    keys: &ClusterKeys,
    h: &Holder,
    rpc: Duration,
) -> Result<Registered, StoreError> {
    let (node, lease, incarnation) = (h.node, h.lease, h.incarnation);
    let joined = keys.joined_node(node);
    // A node's first registration writes `joined/<node>` and takes its
    // member key in one transaction: between two, the others' rule
    // ("registered once, member key gone") would configure it out.
    let mut ops = vec![TxnOp::put(joined.clone(), incarnation.to_string(), None)];
    ops.extend(member_ops(keys, h));
    let first = Txn::new()
        .when([
            Compare::create_revision(joined.clone(), CompareOp::Equal, 0),
            Compare::create_revision(keys.member(node), CompareOp::Equal, 0),
        ])
        .and_then(ops);
    if timed(rpc, client.txn(first)).await?.succeeded() {
        return Ok(Registered {
            first: Some(incarnation),
            holds_member: true,
        });
    }
    // `joined/<node>` is never written without the member key: a node
    // whose first process of a generation (module `driver::lifecycle`) finds
    // the key still held by an earlier process that was never admitted
    // would otherwise look restarted, and be configured out.
    let holds_member = take_member(client, keys, h, rpc).await? || {
        // Registering again in a new generation (module `lifecycle`): this
        // process may hold the key already.
        let r = timed(rpc, client.get(keys.member(node), None)).await?;
        let held = r.kvs().first().and_then(|kv| parse_incarnation(kv.value()));
        held == Some(incarnation)
    };
    if holds_member {
        // This process holds the member key: in a new generation (its
        // `joined/` cleared) it is the node's first process.
        let txn = Txn::new()
            .when([Compare::create_revision(
                joined.clone(),
                CompareOp::Equal,
                0,
            )])
            .and_then([TxnOp::put(joined.clone(), incarnation.to_string(), None)]);
        timed(rpc, client.txn(txn)).await?;
    } else {
        let opts = PutOptions::new().with_lease(lease);
        let put = client.put(keys.joining(node), incarnation.to_string(), Some(opts));
        timed(rpc, put).await?;
    }
    let r = timed(rpc, client.get(joined, None)).await?;
    let first = r.kvs().first().and_then(|kv| parse_incarnation(kv.value()));
    Ok(Registered {
        first,
        holds_member,
    })
}

/// Takes `members/<node>` for `h` if no process holds it (its last
/// holder's lease ran out, or none ever did), clearing the `joining/<node>`
/// wait and the suspect reports on the node (they named an earlier
/// incarnation) and publishing `h`'s addresses. Returns whether this call
/// took it.
pub(crate) async fn take_member(
    client: &mut Client,
    keys: &ClusterKeys,
    h: &Holder,
    rpc: Duration,
) -> Result<bool, StoreError> {
    let txn = Txn::new()
        .when([Compare::create_revision(
            keys.member(h.node),
            CompareOp::Equal,
            0,
        )])
        .and_then(member_ops(keys, h));
    Ok(timed(rpc, client.txn(txn)).await?.succeeded())
}

/// The operations that make `h` hold `members/<node>` under its lease: the
/// member key, its address record (`addresses/<node>`, under the same
/// lease, so it names the member key's holder), the end of its
/// `joining/<node>` wait, and the suspect reports on the node cleared
/// (they named an earlier incarnation).
fn member_ops(keys: &ClusterKeys, h: &Holder) -> Vec<TxnOp> {
    let under_lease = || Some(PutOptions::new().with_lease(h.lease));
    let mut ops = vec![
        TxnOp::put(
            keys.member(h.node),
            h.incarnation.to_string(),
            under_lease(),
        ),
        TxnOp::delete(keys.joining(h.node), None),
        TxnOp::delete(
            keys.suspects_of(h.node),
            Some(DeleteOptions::new().with_prefix()),
        ),
    ];
    let record = h.addresses.map(|addresses| AddressRecord {
        incarnation: h.incarnation,
        addresses,
    });
    ops.push(match record {
        Some(r) => TxnOp::put(keys.address(h.node), r.encode(), under_lease()),
        // A process that publishes nothing leaves no predecessor's record.
        None => TxnOp::delete(keys.address(h.node), None),
    });
    ops
}

/// Records that `reporter` suspects `suspect`, configured as incarnation
/// `incarnation` (raw, [`Configuration::incarnation`]) in the reporter's
/// configuration (under the reporter's lease).
pub(crate) async fn report_suspect(
    client: &mut Client,
    keys: &ClusterKeys,
    (suspect, incarnation): (NodeId, u32),
    reporter: NodeId,
    lease: i64,
    rpc: Duration,
) -> Result<(), StoreError> {
    let opts = PutOptions::new().with_lease(lease);
    let key = keys.suspect(suspect, reporter);
    timed(rpc, client.put(key, incarnation.to_string(), Some(opts))).await?;
    Ok(())
}

/// Reads the configuration, the member and joined keys (with their
/// incarnations), the suspect reports and the address records, in one
/// transaction.
pub(crate) async fn snapshot(
    client: &mut Client,
    keys: &ClusterKeys,
    nodes: usize,
    replication: usize,
    rpc: Duration,
) -> Result<Snapshot, StoreError> {
    let prefix = || Some(GetOptions::new().with_prefix());
    let txn = Txn::new().and_then([
        TxnOp::get(keys.config(), None),
        TxnOp::get(keys.members(), prefix()),
        TxnOp::get(keys.joined(), prefix()),
        TxnOp::get(keys.suspects(), prefix()),
        TxnOp::get(keys.addresses(), prefix()),
        TxnOp::get(keys.probes(), prefix()),
    ]);
    let r = timed(rpc, client.txn(txn)).await?;
    let gets: Vec<_> = r
        .op_responses()
        .into_iter()
        .filter_map(|o| match o {
            TxnOpResponse::Get(g) => Some(g),
            _ => None,
        })
        .collect();
    let [config, members, joined, suspects, addresses, probes] = &gets[..] else {
        return Err(StoreError::Corrupt(format!(
            "snapshot: {} answers to 6 reads",
            gets.len()
        )));
    };
    let kv = config
        .kvs()
        .first()
        .ok_or_else(|| StoreError::Corrupt(format!("{} is missing", keys.config())))?;
    let (c, header) = decode_stored(keys, kv.value(), nodes, replication)?;
    let lineage = header.lineage;
    let mask = |prefix: String, g: &etcd_client::GetResponse| {
        ClusterKeys::node_mask(&prefix, g.kvs().iter().map(|kv| kv.key()))
    };
    let incs = |prefix: String, g: &etcd_client::GetResponse| {
        ClusterKeys::incarnations_of(&prefix, g.kvs().iter().map(|kv| (kv.key(), kv.value())))
    };
    let records = address_records(
        &keys.addresses(),
        addresses.kvs().iter().map(|kv| (kv.key(), kv.value())),
    );
    Ok(Snapshot {
        config: c,
        rev: kv.mod_revision(),
        lineage,
        members: mask(keys.members(), members),
        member_lease: member_leases(keys, members),
        joined: mask(keys.joined(), joined),
        member_inc: incs(keys.members(), members),
        first_inc: incs(keys.joined(), joined),
        suspects: current_suspicions(
            &c,
            &keys.suspects(),
            suspects
                .kvs()
                .iter()
                .map(|kv| (kv.key(), kv.value(), kv.create_revision())),
        ),
        addresses: records.0,
        bad_addresses: records.1,
        probes: incs(keys.probes(), probes),
    })
}

/// Per node, the lease holding its member key in `members` (0: none).
fn member_leases(keys: &ClusterKeys, members: &etcd_client::GetResponse) -> [i64; NODES_MAX] {
    let mut out = [0; NODES_MAX];
    for kv in members.kvs() {
        if let Some(n) = ClusterKeys::node_of(&keys.members(), kv.key()) {
            out[n] = kv.lease();
        }
    }
    out
}

/// Installs `next` of `lineage`, running `commit`, if the configuration
/// key's mod revision is still `rev` (compare-and-swap). Returns whether
/// this call installed it.
pub(crate) async fn install(
    client: &mut Client,
    keys: &ClusterKeys,
    rev: i64,
    (next, lineage, commit): (&Configuration, Lineage, CommitProtocol),
    rpc: Duration,
) -> Result<bool, StoreError> {
    let record = ConfigRecord::encode(next, lineage, commit);
    let txn = Txn::new()
        .when([Compare::mod_revision(keys.config(), CompareOp::Equal, rev)])
        .and_then([TxnOp::put(keys.config(), record, None)]);
    Ok(timed(rpc, client.txn(txn)).await?.succeeded())
}

/// A blocking handle on one cluster's configuration key, for operators and
/// tests (not a component: each call blocks its caller for at most the
/// RPC timeout, on a runtime of its own).
pub struct ConfigStore {
    rt: tokio::runtime::Runtime,
    client: Client,
    keys: ClusterKeys,
    nodes: usize,
    replication: usize,
    rpc: Duration,
}

impl ConfigStore {
    /// Connects to `endpoints` for cluster `cluster` of `nodes` nodes with
    /// `replication` replicas per shard; each later call waits at most
    /// `rpc`.
    ///
    /// # Errors
    /// [`EtcdError::Settings`] for a bad cluster name;
    /// [`EtcdError::Unreachable`] if etcd does not answer.
    pub fn connect(
        endpoints: &[String],
        cluster: &str,
        nodes: usize,
        replication: usize,
        rpc: Duration,
    ) -> Result<ConfigStore, EtcdError> {
        super::check_name(cluster)?;
        let rt = runtime()?;
        let client = rt
            .block_on(connect(endpoints, rpc))
            .map_err(|e| EtcdError::unreachable(endpoints, e))?;
        let mut s = ConfigStore {
            rt,
            client,
            keys: ClusterKeys::new(cluster),
            nodes,
            replication,
            rpc,
        };
        s.rt.block_on(timed(rpc, s.client.status()))
            .map_err(|e| EtcdError::unreachable(endpoints, e))?;
        Ok(s)
    }

    /// The stored configuration and its mod revision.
    ///
    /// # Errors
    /// [`EtcdError::Store`] if etcd failed or the record is unreadable.
    pub fn read(&mut self) -> Result<(Configuration, i64), EtcdError> {
        self.read_lineage().map(|(c, _, rev)| (c, rev))
    }

    /// The stored configuration, its lineage and its mod revision.
    ///
    /// # Errors
    /// [`EtcdError::Store`] if etcd failed or the record is unreadable.
    pub fn read_lineage(&mut self) -> Result<(Configuration, Lineage, i64), EtcdError> {
        let (c, k, n, r) = (&mut self.client, &self.keys, self.nodes, self.rpc);
        self.rt
            .block_on(read_config(c, k, n, self.replication, r))
            .map(|s| (s.config, s.lineage, s.rev))
            .map_err(EtcdError::store)
    }

    /// Installs `next` (keeping the stored lineage and commit protocol) if
    /// the configuration key's mod revision is still `rev`. Returns whether
    /// this call won.
    ///
    /// # Errors
    /// [`EtcdError::Store`] if etcd failed or the record is unreadable.
    pub fn try_install(&mut self, rev: i64, next: &Configuration) -> Result<bool, EtcdError> {
        let (c, k, n, r) = (&mut self.client, &self.keys, self.nodes, self.rpc);
        let stored = self
            .rt
            .block_on(read_config(c, k, n, self.replication, r))
            .map_err(EtcdError::store)?;
        let (c, k) = (&mut self.client, &self.keys);
        self.rt
            .block_on(install(c, k, rev, (next, stored.lineage, stored.commit), r))
            .map_err(EtcdError::store)
    }
}
