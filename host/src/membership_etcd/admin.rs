//! An operator's view of one cluster's state in etcd (`splitkv etcd show`
//! and `clear`): what is stored under its prefix, and deleting it once
//! the cluster is stopped for good. Blocking calls on a runtime of their
//! own, each bounded by the RPC timeout (not a component).

use super::keys::{parse_incarnation, ClusterKeys, ConfigRecord, RecordHeader};
use super::store::{self, timed};
use super::EtcdError;
use etcd_client::{Client, Compare, CompareOp, DeleteOptions, GetOptions, Txn, TxnOp};
use splitkv_layout::wire::NodeId;
use splitkv_nic::membership::Configuration;
use splitkv_nic::NODES_MAX;
use std::time::Duration;

/// One node's member key: the process holding it and its lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberKey {
    /// The node.
    pub node: NodeId,
    /// The incarnation of the process holding it (`None`: a value that is
    /// not an incarnation).
    pub incarnation: Option<u32>,
    /// Seconds left on its lease, as etcd rounds them down (`None`: the
    /// lease is gone, the key about to be deleted).
    pub ttl_s: Option<i64>,
    /// The lease's granted TTL (s; 0 when gone).
    pub granted_ttl_s: i64,
}

/// What is stored under a cluster's prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterState {
    /// The prefix, `/<cluster>/`.
    pub prefix: String,
    /// Keys under the prefix.
    pub keys: usize,
    /// The configuration record's header, if one is stored (`Err`: the
    /// record is unreadable, with the reason).
    pub header: Option<Result<RecordHeader, String>>,
    /// The configuration decoded for the shape it names (or the caller's,
    /// for records without one); `None` with no record or an unreadable one.
    pub config: Option<Configuration>,
    /// Every member key, by node.
    pub members: Vec<MemberKey>,
    /// Per node with one, its last incarnation handed out.
    pub incarnations: Vec<(NodeId, u32)>,
}

impl ClusterState {
    /// The nodes whose member key a live lease holds (a mask by node id).
    pub fn held(&self) -> u32 {
        self.members
            .iter()
            .filter(|m| m.ttl_s.is_some())
            .fold(0, |mask, m| mask | 1 << m.node)
    }
}

/// A blocking handle on one cluster's keys, for operators.
pub struct EtcdAdmin {
    rt: tokio::runtime::Runtime,
    client: Client,
    keys: ClusterKeys,
    prefix: String,
    rpc: Duration,
}

impl EtcdAdmin {
    /// Connects to `endpoints` for the cluster whose keys live under
    /// `/<cluster>/`; each later call waits at most `rpc`.
    ///
    /// # Errors
    /// [`EtcdError::ClusterName`] for a name that cannot be a prefix;
    /// [`EtcdError::Unreachable`] if etcd does not answer.
    pub fn connect(
        endpoints: &[String],
        cluster: &str,
        rpc: Duration,
    ) -> Result<EtcdAdmin, EtcdError> {
        super::check_name(cluster)?;
        let rt = store::runtime()?;
        let mut client = rt
            .block_on(store::connect(endpoints, rpc))
            .map_err(|e| EtcdError::unreachable(endpoints, e))?;
        rt.block_on(timed(rpc, client.status()))
            .map_err(|e| EtcdError::unreachable(endpoints, e))?;
        Ok(EtcdAdmin {
            rt,
            client,
            keys: ClusterKeys::new(cluster),
            prefix: format!("/{cluster}/"),
            rpc,
        })
    }

    /// Reads everything under the prefix; a record without a shape is
    /// decoded for `shape` (nodes, replication).
    ///
    /// # Errors
    /// [`EtcdError::Store`] if an etcd call failed.
    pub fn show(&mut self, shape: (usize, usize)) -> Result<ClusterState, EtcdError> {
        let (rt, client, rpc) = (&self.rt, &mut self.client, self.rpc);
        let all = GetOptions::new().with_prefix();
        let r = rt
            .block_on(timed(rpc, client.get(self.prefix.clone(), Some(all))))
            .map_err(EtcdError::store)?;
        let mut state = ClusterState {
            prefix: self.prefix.clone(),
            keys: r.kvs().len(),
            header: None,
            config: None,
            members: Vec::new(),
            incarnations: Vec::new(),
        };
        let (members, incs) = (self.keys.members(), self.keys.incarnations_all());
        for kv in r.kvs() {
            if kv.key() == self.keys.config().as_bytes() {
                state.read_record(kv.value(), shape);
            } else if let Some(n) = ClusterKeys::node_of(&members, kv.key()) {
                let ttl = rt
                    .block_on(store::lease_ttl(client, kv.lease(), rpc))
                    .map_err(EtcdError::store)?;
                state.members.push(MemberKey {
                    node: n as NodeId,
                    incarnation: parse_incarnation(kv.value()),
                    ttl_s: ttl.map(|t| t.0),
                    granted_ttl_s: ttl.map_or(0, |t| t.1),
                });
            } else if let Some(n) = ClusterKeys::node_of(&incs, kv.key()) {
                if let Some(inc) = parse_incarnation(kv.value()) {
                    state.incarnations.push((n as NodeId, inc));
                }
            }
        }
        state.members.sort_by_key(|m| m.node);
        state.incarnations.sort_unstable();
        Ok(state)
    }

    /// Deletes every key under the prefix, in one etcd transaction that
    /// first checks no member key exists (a live member holds its key
    /// under its lease), unless `force`. Returns the keys deleted.
    ///
    /// # Errors
    /// [`EtcdError::MembersAlive`] (nothing deleted) while members hold
    /// their keys and not `force`; [`EtcdError::Store`] if etcd failed.
    pub fn clear(&mut self, force: bool) -> Result<u64, EtcdError> {
        let (rt, client, rpc) = (&self.rt, &mut self.client, self.rpc);
        let none_held: Vec<Compare> = (0..NODES_MAX as NodeId)
            .map(|n| Compare::create_revision(self.keys.member(n), CompareOp::Equal, 0))
            .collect();
        let delete = TxnOp::delete(
            self.prefix.clone(),
            Some(DeleteOptions::new().with_prefix()),
        );
        let txn = match force {
            true => Txn::new().and_then([delete]),
            false => Txn::new().when(none_held).and_then([delete]),
        };
        let r = rt
            .block_on(timed(rpc, client.txn(txn)))
            .map_err(EtcdError::store)?;
        if !r.succeeded() {
            let held = self.show((1, 1))?.held();
            return Err(EtcdError::MembersAlive {
                prefix: self.prefix.clone(),
                nodes: held,
            });
        }
        let deleted = r.op_responses().into_iter().find_map(|o| match o {
            etcd_client::TxnOpResponse::Delete(d) => Some(d.deleted()),
            _ => None,
        });
        Ok(deleted.unwrap_or(0).max(0) as u64)
    }
}

impl ClusterState {
    fn read_record(&mut self, bytes: &[u8], (nodes, replication): (usize, usize)) {
        match ConfigRecord::header(bytes) {
            Ok(h) => {
                let shape = (
                    h.nodes.unwrap_or(nodes),
                    h.replication.unwrap_or(replication),
                );
                self.config = ConfigRecord::decode(bytes, shape.0, shape.1).ok();
                self.header = Some(Ok(h));
            }
            Err(e) => self.header = Some(Err(e.to_string())),
        }
    }
}
