//! The node's membership (`[membership]` of the cluster file) for
//! `splitkv node`: static, or an etcd lease held from process start and
//! handed to the node's polling thread at load (see the parent module).

use crate::Failure;
use serde_json::{json, Value};
use splitkv_host::cluster::{NodeMembership, StatsHandle};
use splitkv_host::deploy::{ClusterConfig, MembershipSettings, VerbsLink};
use std::time::Instant;

/// The node's membership: static, or an etcd lease
/// (`splitkv_host::membership_etcd`, whose client runs on a thread of its
/// own) held from process start. The main thread renews it until a
/// workload is loaded; from then on the agent on the node's polling thread
/// drives it ([`NodeLease::hand_over`]) and the main thread reads it
/// (`/status`, the fail-stop decision) and renews only while the polling
/// thread is late (its threads paused for a load or a results call, which
/// would otherwise fence a node whose pause outlasts its lease). Renewing
/// never lets a node serve without a lease: the agent checks the lease
/// before every pass. Clones share the lease.
#[derive(Clone)]
pub(super) enum NodeLease {
    /// Every node of the file, epoch 1, never changed.
    Static,
    /// An etcd lease and the configuration key.
    #[cfg(feature = "etcd")]
    Etcd(etcd_lease::Shared),
}

impl NodeLease {
    /// Starts the membership the file asks for; etcd unreachable (or any
    /// other etcd start-up failure) is one line and exit 2. On RDMA verbs,
    /// `verbs` is the endpoint published with the registration and the
    /// directory the membership fills with the peers' endpoints.
    pub(super) fn start(
        config: &ClusterConfig,
        id: u16,
        incarnation: u32,
        started: Instant,
        verbs: Option<&VerbsLink>,
    ) -> Result<NodeLease, Failure> {
        match &config.membership {
            MembershipSettings::Static => Ok(NodeLease::Static),
            #[cfg(feature = "etcd")]
            MembershipSettings::Etcd {
                endpoints,
                lease_ttl_s,
                prefix,
            } => {
                use splitkv_host::membership_etcd::{
                    EtcdError, EtcdMember, EtcdSettings, NodeAddresses,
                };
                let mut s = EtcdSettings::new(
                    endpoints.clone(),
                    prefix,
                    id,
                    config.nodes.len(),
                    config.replication,
                );
                s.lease_ttl_s = *lease_ttl_s;
                s.cluster_id = config.cluster_id;
                s.commit = config.protocol.commit;
                s.incarnation = u64::from(incarnation);
                // Published with the registration (for a replacement
                // machine): where this process is, the file's addresses or
                // the node's moved ones.
                s.addresses = config.node(id).map(|n| NodeAddresses {
                    data: n.data,
                    control: n.control,
                    verbs: verbs.map(|v| v.local),
                });
                s.verbs_peers = verbs.map(|v| v.peers.clone());
                let now = started.elapsed().as_nanos() as u64;
                let member = EtcdMember::connect(s, now).map_err(|e| {
                    let fix = match e {
                        EtcdError::Foreign { .. }
                        | EtcdError::OtherShape { .. }
                        | EtcdError::OtherProtocol { .. } => {
                            format!("; if that cluster is stopped for good, clear its state (`splitkv etcd clear --config FILE` with its file, or etcdctl del --prefix /{prefix}/) or give this one another prefix")
                        }
                        _ => String::new(),
                    };
                    Failure::BadInput(format!("membership: {e}{fix}"))
                })?;
                let shared = etcd_lease::Shared::new(member);
                tracing::info!(
                    epoch = shared.epoch(),
                    generation = shared.generation(),
                    "membership: etcd lease held"
                );
                Ok(NodeLease::Etcd(shared))
            }
            #[cfg(not(feature = "etcd"))]
            MembershipSettings::Etcd { .. } => {
                let _ = (id, incarnation, started, verbs);
                Err(Failure::BadInput(
                    "membership.kind = \"etcd\": this binary was built without etcd support".into(),
                ))
            }
        }
    }

    /// The incarnation the membership gave this process (etcd: strictly
    /// above the node's earlier ones, `EtcdMember::incarnation`); `None`
    /// for a static membership (the caller's own is used).
    pub(super) fn incarnation(&self) -> Option<u32> {
        match self {
            NodeLease::Static => None,
            #[cfg(feature = "etcd")]
            NodeLease::Etcd(shared) => Some(shared.incarnation()),
        }
    }

    /// The cluster generation this process serves in (etcd: the
    /// membership's lifecycle, folded into the cluster id its packets
    /// carry; static: always the first).
    pub(super) fn generation(&self) -> u32 {
        match self {
            NodeLease::Static => 1,
            #[cfg(feature = "etcd")]
            NodeLease::Etcd(shared) => shared.generation(),
        }
    }

    /// Whether this process is not admitted by the stored configuration
    /// yet (etcd: a restarted node joining a live generation; static:
    /// never).
    pub(super) fn joining(&self) -> bool {
        match self {
            NodeLease::Static => false,
            #[cfg(feature = "etcd")]
            NodeLease::Etcd(shared) => shared.joining(),
        }
    }

    /// Leaves the membership after a drain: revokes the etcd lease, so a
    /// cluster stopped whole and started again forms its next generation
    /// without waiting for the lease to run out.
    pub(super) fn leave(&self) {
        match self {
            NodeLease::Static => {}
            #[cfg(feature = "etcd")]
            NodeLease::Etcd(shared) => shared.leave(),
        }
    }

    /// The membership for the node's polling thread (`None`: static).
    pub(super) fn hand_over(&self, started: Instant) -> Option<NodeMembership> {
        let _ = started; // read only with etcd
        match self {
            NodeLease::Static => None,
            #[cfg(feature = "etcd")]
            NodeLease::Etcd(shared) => Some(shared.hand_over(started)),
        }
    }

    /// Renews the lease when due (until the polling thread took it over)
    /// and logs new configurations. `Err` says why the node must stop serving.
    pub(super) fn step(&mut self, started: Instant) -> Result<(), String> {
        let _ = started; // read only with etcd
        match self {
            NodeLease::Static => Ok(()),
            #[cfg(feature = "etcd")]
            NodeLease::Etcd(shared) => shared.step(started.elapsed().as_nanos() as u64),
        }
    }

    /// What `/status` shows under `membership`: the lease, and (once the
    /// node runs) what its polling thread last published.
    pub(super) fn view(&self, started: Instant, stats: Option<&StatsHandle>) -> Value {
        let _ = started; // read only with etcd
        let node = stats.and_then(|h| h.snapshot().nodes.into_iter().next());
        let mut v = match self {
            NodeLease::Static => json!({ "kind": "static" }),
            #[cfg(feature = "etcd")]
            NodeLease::Etcd(shared) => shared.view(started.elapsed().as_nanos() as u64),
        };
        if let (Some(n), Some(map)) = (node, v.as_object_mut()) {
            map.insert("runtime_epoch".into(), json!(n.epoch));
            // Re-replication: this node's copy (as copying
            // node) and the copies it serves (as a shard's primary).
            let c = &n.copy;
            map.insert(
                "copy".into(),
                json!({
                    "copying": n.copying,
                    "copies_begun": c.copies_begun,
                    "snapshots": c.snapshots,
                    "snapshot_objects": c.snapshot_objects,
                    "chunks_sent": c.chunks_sent,
                    "objects_acked": c.objects_acked,
                    "done_sent": c.done_sent,
                    "done_received": c.done_received,
                    "abandoned": c.abandoned,
                    "failed": c.failed,
                }),
            );
            if let Some(m) = n.membership {
                map.insert(
                    "agent".into(),
                    json!({
                        "renewals": m.agent.renewals,
                        "suspects_reported": m.agent.suspects_reported,
                        "configurations": m.agent.configurations,
                        "refused": m.agent.refused,
                        "lease_expired": m.agent.lease_expired,
                        "peers_repointed": m.agent.peers_repointed,
                        "peer_addresses_refused": m.agent.peer_addresses_refused,
                        "stopped": m.stopped.map(|e| e.to_string()),
                    }),
                );
            }
        }
        v
    }
}

/// The etcd lease shared between the main thread and the node's polling
/// thread (see [`NodeLease`]).
#[cfg(feature = "etcd")]
mod etcd_lease {
    use serde_json::{json, Value};
    use splitkv_host::cluster::NodeMembership;
    use splitkv_host::membership_etcd::EtcdMember;
    use splitkv_layout::wire::NodeId;
    use splitkv_nic::membership::{Configuration, Membership, MembershipError};
    use splitkv_nic::Nanos;
    use std::sync::{Arc, Mutex, MutexGuard};
    use std::time::Instant;

    struct Inner {
        member: EtcdMember,
        /// Set on the polling thread's first call: from then on the main
        /// thread renews only when the polling thread is late (paused).
        handed_over: bool,
        /// When the next renewal is due (set by whichever thread renewed).
        next_renew_ns: Nanos,
        /// The last epoch logged.
        logged_epoch: u32,
    }

    /// The lease, behind a mutex both threads lock briefly.
    #[derive(Clone)]
    pub(in crate::node) struct Shared(Arc<Mutex<Inner>>);

    impl Shared {
        pub(super) fn new(member: EtcdMember) -> Shared {
            let logged_epoch = member.current().epoch;
            Shared(Arc::new(Mutex::new(Inner {
                member,
                handed_over: false,
                next_renew_ns: 0,
                logged_epoch,
            })))
        }

        fn lock(&self) -> MutexGuard<'_, Inner> {
            self.0.lock().unwrap_or_else(|e| e.into_inner())
        }

        pub(super) fn epoch(&self) -> u32 {
            self.lock().member.current().epoch
        }

        pub(super) fn incarnation(&self) -> u32 {
            self.lock().member.incarnation()
        }

        pub(super) fn generation(&self) -> u32 {
            self.lock().member.lineage().generation
        }

        pub(super) fn joining(&self) -> bool {
            self.lock().member.joining()
        }

        pub(super) fn leave(&self) {
            self.lock().member.revoke();
        }

        /// A handle for the polling thread; its clock counts from `started`.
        pub(super) fn hand_over(&self, started: Instant) -> NodeMembership {
            let renew = self.lock().member.renew_every_ns();
            NodeMembership::new(Box::new(Polled(self.clone())), started, renew)
        }

        /// See [`super::NodeLease::step`]; `now` counts from process start.
        pub(super) fn step(&self, now: Nanos) -> Result<(), String> {
            let mut g = self.lock();
            let inner = &mut *g;
            // Once handed over, the main thread is only the backup: it
            // renews while the polling threads are paused (a load or a
            // results call), when the polling side is half an interval late.
            let every = inner.member.renew_every_ns();
            let late = if inner.handed_over { every / 2 } else { 0 };
            if now >= inner.next_renew_ns.saturating_add(late) {
                inner.next_renew_ns = now + every;
                let _ = inner.member.renew(now);
            }
            // Every grant so far counts before the lease is judged.
            inner.member.refresh();
            let c = inner.member.current();
            if c.epoch > inner.logged_epoch {
                inner.logged_epoch = c.epoch;
                tracing::warn!(
                    epoch = c.epoch,
                    live = c.live,
                    "membership: new configuration"
                );
            }
            match inner.member.fail_stop(now) {
                Some(why) => Err(why.to_string()),
                None => Ok(()),
            }
        }

        pub(super) fn view(&self, now: Nanos) -> Value {
            let g = self.lock();
            let m = &g.member;
            let c = m.current();
            let etcd = m.stats();
            json!({
                "kind": "etcd",
                "generation": m.lineage().generation,
                "epoch": c.epoch,
                "live": c.live,
                "copying": c.copying,
                "joining": c.joining_any(),
                "short_shards": c.short_shards(),
                "role": role(m.joining(), c.copying & (1 << m.node()) != 0),
                "polled_by_node": g.handed_over,
                "lease_remaining_ms": m.lease_until().saturating_sub(now) / 1_000_000,
                "lease_ttl_granted_s": m.lease_ttl_granted_s(),
                "fail_stop": m.fail_stop(now).map(|f| f.to_string()),
                "last_error": m.last_error(),
                "data_addresses": data_addresses(m),
                "etcd": {
                    "grants": etcd.grants,
                    "renewals_failed": etcd.renewals_failed,
                    "errors": etcd.etcd_errors,
                    "installs_won": etcd.installs_won,
                    "installs_lost": etcd.installs_lost,
                    "caught_up_taken": etcd.caught_up_taken,
                    "caught_up_stale": etcd.caught_up_stale,
                    "configs_refused": etcd.configs_refused,
                },
            })
        }
    }

    /// The data address each node's configured incarnation published, by
    /// node id (nodes without one left out).
    fn data_addresses(m: &EtcdMember) -> Value {
        let by_node = (0..splitkv_nic::NODES_MAX as NodeId)
            .filter_map(|n| Some((n.to_string(), json!(m.data_address(n)?.to_string()))));
        Value::Object(by_node.collect())
    }

    /// This node's part in the configuration (rejoin): `joining` (a
    /// restarted node not admitted yet), `copying` (admitted, being
    /// copied), or `replica`.
    fn role(joining: bool, copying: bool) -> &'static str {
        match (joining, copying) {
            (true, _) => "joining",
            (false, true) => "copying",
            (false, false) => "replica",
        }
    }

    /// The polling thread's side: every call marks the lease handed over.
    struct Polled(Shared);

    impl Polled {
        fn taken(&mut self) -> MutexGuard<'_, Inner> {
            let mut g = self.0.lock();
            g.handed_over = true;
            g
        }
    }

    impl Membership for Polled {
        fn node(&self) -> NodeId {
            self.0.lock().member.node()
        }
        fn current(&self) -> Configuration {
            self.0.lock().member.current()
        }
        fn lease_until(&self) -> Nanos {
            // Counts every grant the driver has, the main thread's backup
            // renewals' too (`EtcdMember`'s lease end).
            self.0.lock().member.lease_until()
        }
        fn renew(&mut self, now: Nanos) -> Result<(), MembershipError> {
            let mut g = self.taken();
            g.next_renew_ns = now + g.member.renew_every_ns();
            g.member.renew(now)
        }
        fn report_suspect(&mut self, suspect: NodeId, now: Nanos) -> Result<(), MembershipError> {
            self.taken().member.report_suspect(suspect, now)
        }
        fn poll(&mut self, now: Nanos) -> Option<Configuration> {
            self.taken().member.poll(now)
        }
        fn report_caught_up(&mut self, epoch: u32, now: Nanos) -> Result<(), MembershipError> {
            self.taken().member.report_caught_up(epoch, now)
        }
        fn data_address(&self, node: NodeId) -> Option<std::net::SocketAddr> {
            self.0.lock().member.data_address(node)
        }
    }
}
