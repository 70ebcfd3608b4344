//! The etcd driver: one OS thread per member running the async etcd client
//! on a current-thread tokio runtime (DESIGN.md: components are state
//! machines, drivers own threads). It talks to the polled
//! [`super::EtcdMember`] only through two bounded crossbeam channels:
//! commands in ([`Command`], at most [`super::COMMANDS_MAX`] queued),
//! notices out ([`Notice`], at most [`super::NOTICES_MAX`] undelivered;
//! more are dropped and counted).
//!
//! Each iteration (every [`super::DRIVER_TICK_MS`]) it takes the queued
//! commands, hands renewal requests to the renewal task (module `renewal`:
//! one keep-alive on a stream it keeps open, never waiting behind the
//! loop's other etcd calls), records suspect reports, and every
//! `poll_every_ms` (every [`super::POLL_AFTER_SUSPICION_MS`] for two
//! leases after this node reported a suspect) reads a
//! snapshot of the cluster's keys: a newer configuration is passed on; a
//! joined node of the configuration whose member key is gone (its lease ran
//! out in etcd) or held by another incarnation than the configured one (a
//! restarted process took it after its predecessor's lease ran out) is
//! configured out by a compare-and-swap install; a report naming this node
//! as a suspect, if the configuration takes it
//! ([`super::keys::current_suspicions`] over every stored report naming
//! this node's configured incarnation, oldest first: not a suspect's own
//! report, none that strands a shard), stops its
//! renewals, so its own lease runs out (as the simulated manager refuses a
//! suspect's renewals). A restarted node that
//! is not admitted yet *joins* instead (module `rejoin`).
//!
//! **Addresses (replacement machines).** Registering publishes this process's
//! addresses (`addresses/<node>`, [`super::address`]) with its member key;
//! each configuration passed on carries, per node, the data address its
//! configured incarnation published in the snapshot it came from
//! ([`super::address::published_data_addresses`]), so a node replaced by
//! a machine at another address is reached there. On RDMA verbs the
//! endpoints those incarnations published are written into the
//! [`EtcdSettings::verbs_peers`] directory first (`crate::deploy::verbs`).

pub(crate) mod lifecycle;
mod rejoin;
mod renewal;

use super::address::{published_addresses, published_data_addresses, verbs_peers, AddressRecord};
use super::keys::{configured_incarnation, ClusterKeys, Lineage, RecordHeader};
use super::store::{self, timed, StoreError};
use super::{Displacement, EtcdError, EtcdSettings};
use crossbeam::channel::{Receiver, Sender, TryRecvError};
use etcd_client::Client;
pub(crate) use renewal::MemberClock;
use renewal::{Renewal, RenewalHandle};
use splitkv_layout::wire::NodeId;
use splitkv_nic::membership::Configuration;
use splitkv_nic::{CommitProtocol, Nanos, NODES_MAX};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A request from the member to its driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    /// Renew the lease; `sent` is the member's time of the request (ns).
    Renew { sent: Nanos },
    /// Report `node` as a suspect, configured as incarnation `incarnation`
    /// (raw) in the member's configuration.
    Suspect { node: NodeId, incarnation: u32 },
    /// Stop the driver; with `revoke`, revoke the lease first (best effort).
    Stop { revoke: bool },
    /// This node's copy is done as of configuration `epoch` (re-replication).
    CaughtUp { epoch: u32 },
    /// The member was polled: the node's runtime runs and can answer the
    /// recovery its admission begins (a joining process asks to be
    /// admitted only from then on: module `rejoin`).
    Serving,
}

/// News from the driver to the member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Notice {
    /// The renewal asked for at `sent` (member's ns) took: etcd counts the
    /// lease `ttl_s` seconds from a moment after `sent`.
    Grant { sent: Nanos, ttl_s: i64 },
    /// The renewal did not take (etcd failed, or this node is a suspect).
    RenewFailed,
    /// etcd says the lease no longer exists: this node is out.
    LeaseGone,
    /// The stored configuration belongs to a later generation of the
    /// cluster than this process's: this process's generation ended.
    GenerationEnded { generation: u32 },
    /// This joining process waits for a configuration that cannot come: no
    /// configured member of epoch `epoch` is alive to admit it.
    Stranded { epoch: u32 },
    /// The prefix no longer holds this process's cluster: its configuration
    /// is gone or unreadable (cleared by force), another cluster's, or of
    /// an earlier generation.
    Displaced(Displacement),
    /// A configuration read from (or installed in) etcd, and per node the
    /// data address its configured incarnation published (boxed: both are
    /// large).
    Config(Box<(Configuration, DataAddresses)>),
}

/// Per node id, a published data address (`None`: none known).
pub(crate) type DataAddresses = [Option<SocketAddr>; NODES_MAX];

/// Counters the driver keeps for [`super::EtcdMember::stats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub grants: AtomicU64,
    /// The end of the lease the grants so far give (member's ns): written
    /// by the renewal task as each grant arrives, so the member judges its
    /// lease on every grant, whether or not it has taken the notice yet.
    pub granted_until: AtomicU64,
    pub renewals_failed: AtomicU64,
    pub etcd_errors: AtomicU64,
    pub installs_won: AtomicU64,
    pub installs_lost: AtomicU64,
    pub notices_dropped: AtomicU64,
    pub joins: AtomicU64,
    pub joins_deferred: AtomicU64,
    pub join_conflicts: AtomicU64,
    pub caught_up_taken: AtomicU64,
    pub caught_up_stale: AtomicU64,
    pub configs_refused: AtomicU64,
    pub address_records_bad: AtomicU64,
    pub last_error: Mutex<Option<String>>,
}

impl Counters {
    fn error(&self, what: &str, e: &StoreError) {
        self.etcd_errors.fetch_add(1, Ordering::Relaxed);
        let mut last = self.last_error.lock().unwrap_or_else(|p| p.into_inner());
        *last = Some(format!("{what}: {e}"));
    }
}

/// Adds one to counter `c`.
fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Sends `n` to the member; returns whether it was taken (a dropped one is
/// counted in `counters`).
fn notify(notices: &Sender<Notice>, counters: &Counters, n: Notice) -> bool {
    let taken = notices.try_send(n).is_ok();
    if !taken {
        bump(&counters.notices_dropped);
    }
    taken
}

/// What a started driver found: the granted TTL, the stored configuration,
/// this process's incarnation and whether it is joining (not admitted by
/// that configuration).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ready {
    pub ttl_s: i64,
    pub config: Configuration,
    pub lineage: Lineage,
    pub incarnation: u32,
    pub joining: bool,
    pub first: Option<u32>,
}

pub(crate) use super::store::runtime;

/// The driver's state (lives on its thread).
pub(crate) struct Driver {
    s: EtcdSettings,
    keys: ClusterKeys,
    client: Client,
    lease: i64,
    /// The lease TTL etcd granted (s).
    ttl_s: i64,
    /// The lease's renewals (a task of their own).
    renewal: RenewalHandle,
    known_epoch: u32,
    /// The cluster and generation this process serves in (fixed: its
    /// packets carry the generation).
    lineage: Lineage,
    /// This process's incarnation.
    inc: u32,
    /// Not admitted yet: waiting for the member key or the configuration.
    joining: bool,
    /// [`Command::Serving`] arrived.
    serving: bool,
    /// Per node, the address record and first incarnation in the last
    /// snapshot (replacement machines).
    records: [Option<AddressRecord>; NODES_MAX],
    first_inc: [Option<u32>; NODES_MAX],
    /// Per node, the probe this process answered last (module `lifecycle`).
    acked: [Option<u32>; NODES_MAX],
    commands: Receiver<Command>,
    notices: Sender<Notice>,
    counters: Arc<Counters>,
}

impl Driver {
    fn rpc(&self) -> Duration {
        Duration::from_millis(self.s.rpc_timeout_ms)
    }

    /// Connects, takes a lease (renewed by the renewal task from then on,
    /// grants counted in the member's `clock`), registers, and creates or
    /// reads the configuration. Every failure before etcd first answers is
    /// [`EtcdError::Unreachable`].
    pub(crate) async fn start(
        s: EtcdSettings,
        clock: MemberClock,
        (commands, notices): (Receiver<Command>, Sender<Notice>),
        counters: Arc<Counters>,
    ) -> Result<(Driver, Ready), EtcdError> {
        let rpc = Duration::from_millis(s.start_timeout_ms / u64::from(super::START_RPCS_MAX));
        let unreachable = |e| EtcdError::unreachable(&s.endpoints, e);
        let mut client = store::connect(&s.endpoints, rpc)
            .await
            .map_err(unreachable)?;
        let grant = timed(rpc, client.lease_grant(i64::from(s.lease_ttl_s), None))
            .await
            .map_err(unreachable)?;
        let keys = ClusterKeys::new(&s.cluster);
        let (lease, ttl_s) = (grant.id(), grant.ttl());
        let tick = Duration::from_millis(super::DRIVER_TICK_MS);
        // A keep-alive's answer is awaited up to the believed lease, not
        // one RPC timeout: its grant counts from when it was sent, so a late
        // answer is still good, and one asked again would wait behind the
        // same writes in etcd (module `renewal`).
        let believed = Duration::from_nanos(super::believed_lease_ns(ttl_s.max(0) as u64));
        let answer_within = believed.max(Duration::from_millis(s.rpc_timeout_ms));
        let mut renewal = Renewal::new(
            client.clone(),
            (lease, ttl_s),
            (answer_within, tick),
            clock,
            (notices.clone(), counters.clone()),
        )
        .spawn();
        let ready = match join(&mut client, &keys, &s, lease, rpc).await {
            Ok(r) => Ready { ttl_s, ..r },
            Err(e) => {
                renewal.stop().await;
                // Best effort: leave no member key behind for the others.
                _ = timed(rpc, client.lease_revoke(lease)).await;
                return Err(e);
            }
        };
        let d = Driver {
            s,
            keys,
            client,
            lease,
            ttl_s,
            renewal,
            known_epoch: if ready.joining { 0 } else { ready.config.epoch },
            lineage: ready.lineage,
            inc: ready.incarnation,
            joining: ready.joining,
            serving: false,
            records: [None; NODES_MAX],
            first_inc: [None; NODES_MAX],
            acked: [None; NODES_MAX],
            commands,
            notices,
            counters,
        };
        Ok((d, ready))
    }

    /// The driver loop: runs until [`Command::Stop`] or the member is gone.
    pub(crate) async fn run(mut self) {
        let tick = Duration::from_millis(super::DRIVER_TICK_MS);
        self.renewal.started();
        let poll_every = Duration::from_millis(self.s.poll_every_ms);
        let poll_fast = poll_every.min(Duration::from_millis(super::POLL_AFTER_SUSPICION_MS));
        // Until when polls come at `poll_fast`: two leases after a suspect
        // report, the suspect's lease runs out meanwhile, and the sooner a
        // survivor sees its key gone the sooner service resumes.
        let fast_for = Duration::from_secs(2 * self.ttl_s.max(1) as u64);
        let mut fast_until = Instant::now();
        let mut next_poll = Instant::now();
        loop {
            let mut suspects = [None; NODES_MAX];
            loop {
                match self.commands.try_recv() {
                    Ok(Command::Renew { sent }) => self.renewal.request(sent),
                    Ok(Command::Suspect { node, incarnation }) => {
                        suspects[node as usize] = Some(incarnation)
                    }
                    Ok(Command::CaughtUp { epoch }) => self.caught_up(epoch).await,
                    Ok(Command::Serving) => self.serving = true,
                    Ok(Command::Stop { revoke }) => return self.stop(revoke).await,
                    Err(TryRecvError::Disconnected) => return self.stop(false).await,
                    Err(TryRecvError::Empty) => break,
                }
            }
            for (n, inc) in suspects.iter().enumerate() {
                if let Some(inc) = *inc {
                    self.suspect(n as NodeId, inc).await;
                    fast_until = Instant::now() + fast_for;
                }
            }
            if Instant::now() >= next_poll {
                self.poll().await;
                let every = if Instant::now() < fast_until {
                    poll_fast
                } else {
                    poll_every
                };
                next_poll = Instant::now() + every;
            }
            tokio::time::sleep(tick).await;
        }
    }

    /// Sends `n`; returns whether it was taken (a dropped one is counted).
    fn notify(&self, n: Notice) -> bool {
        notify(&self.notices, &self.counters, n)
    }

    async fn stop(mut self, revoke: bool) {
        self.renewal.stop().await;
        if revoke {
            let rpc = self.rpc();
            if let Err(e) = timed(rpc, self.client.lease_revoke(self.lease)).await {
                self.counters.error("lease revoke", &e);
            }
        }
    }

    async fn suspect(&mut self, suspect: NodeId, incarnation: u32) {
        let (rpc, node, lease) = (self.rpc(), self.s.node, self.lease);
        let named = (suspect, incarnation);
        let r = store::report_suspect(&mut self.client, &self.keys, named, node, lease, rpc);
        if let Err(e) = r.await {
            self.counters.error("suspect report", &e);
        }
    }

    /// Reads a snapshot; passes on a newer configuration; configures out the
    /// nodes whose leases ran out or whose member key another incarnation
    /// holds; while joining, takes the next step of the join instead.
    /// Tells the renewal task whether the configuration takes a report
    /// naming this node.
    async fn poll(&mut self) {
        let (rpc, node, nodes) = (self.rpc(), self.s.node, self.s.nodes);
        let replication = self.s.replication;
        let snap =
            match store::snapshot(&mut self.client, &self.keys, nodes, replication, rpc).await {
                Ok(s) => s,
                Err(e @ StoreError::Corrupt(_)) => {
                    self.counters.error("snapshot", &e);
                    return self.displaced(Displacement::Gone);
                }
                Err(e) => return self.counters.error("snapshot", &e),
            };
        if !snap.lineage.belongs_to(self.s.cluster_id) {
            let stored = snap.lineage.cluster_id.unwrap_or_default();
            return self.displaced(Displacement::Foreign { stored });
        }
        if snap.lineage.generation < self.lineage.generation {
            return self.displaced(Displacement::EarlierGeneration {
                ours: self.lineage.generation,
                stored: snap.lineage.generation,
            });
        }
        self.note_addresses(&snap);
        if snap.lineage.generation != self.lineage.generation {
            bump(&self.counters.configs_refused);
            self.notify(Notice::GenerationEnded {
                generation: snap.lineage.generation,
            });
            return;
        }
        if self.joining {
            // Reports on this node named its predecessor.
            return self.join_step(&snap).await;
        }
        self.renewal.set_suspected(snap.suspects & (1 << node) != 0);
        self.learn(snap.config);
        self.answer_probes(&snap).await;
        if snap.member_inc[node as usize] != Some(self.inc) {
            // etcd deleted this node's member key (its lease ran out), or a
            // later incarnation took it after that.
            self.notify(Notice::LeaseGone);
            return;
        }
        let gone = gone(&snap);
        if gone == 0 || !snap.config.contains(node) {
            return;
        }
        let next = snap.config.without(gone);
        self.install(snap.rev, next, |c| &c.installs_won).await;
    }

    /// Counts a stored state this process refuses to serve under and tells
    /// the member (a fail-stop): its cluster's state under the prefix is
    /// gone or another's.
    fn displaced(&mut self, why: Displacement) {
        bump(&self.counters.configs_refused);
        let mut last = (self.counters.last_error.lock()).unwrap_or_else(|p| p.into_inner());
        *last = Some(format!("snapshot: {why}"));
        drop(last);
        self.notify(Notice::Displaced(why));
    }

    /// Answers each new probe of a starting process (module `lifecycle`):
    /// this member, admitted in the stored generation, is alive.
    async fn answer_probes(&mut self, snap: &store::Snapshot) {
        let (me, rpc) = (self.s.node, self.rpc());
        for p in (0..NODES_MAX).filter(|&p| p != me as usize) {
            let Some(inc) = snap.probes[p].filter(|&i| self.acked[p] != Some(i)) else {
                continue;
            };
            let ack = (self.keys.ack(p as NodeId, me), inc.to_string());
            match store::put_leased(&mut self.client, ack, self.lease, rpc).await {
                Ok(()) => self.acked[p] = Some(inc),
                Err(e) => self.counters.error("probe answer", &e),
            }
        }
    }

    /// Installs `next` over mod revision `rev`; on a win counts `won` and
    /// passes it on. Returns whether this call installed it (a loss is
    /// counted in `installs_lost`: the next snapshot shows the winner).
    async fn install(
        &mut self,
        rev: i64,
        next: Configuration,
        won: fn(&Counters) -> &AtomicU64,
    ) -> bool {
        let rpc = self.rpc();
        let (keys, lineage) = (&self.keys, self.lineage);
        let commit = self.s.commit;
        match store::install(&mut self.client, keys, rev, (&next, lineage, commit), rpc).await {
            Ok(true) => {
                bump(won(&self.counters));
                self.learn(next);
                true
            }
            Ok(false) => {
                bump(&self.counters.installs_lost);
                false
            }
            Err(e) => {
                self.counters.error("configuration install", &e);
                false
            }
        }
    }

    /// Passes on `c`, with the data addresses its members' configured
    /// incarnations published, if it is newer than the last one passed on
    /// (a dropped notice is sent again after the next snapshot).
    fn learn(&mut self, c: Configuration) {
        if let Some(dir) = self
            .s
            .verbs_peers
            .as_ref()
            .filter(|_| c.epoch >= self.known_epoch)
        {
            // Before the notice: the transport registers these endpoints
            // before the agent re-points peers at their data addresses.
            dir.publish(&verbs_peers(&published_addresses(
                &c,
                &self.records,
                &self.first_inc,
            )));
        }
        let data = published_data_addresses(&c, &self.records, &self.first_inc);
        if c.epoch > self.known_epoch && self.notify(Notice::Config(Box::new((c, data)))) {
            self.known_epoch = c.epoch;
        }
    }

    /// Keeps the snapshot's address records and first incarnations; an
    /// unreadable record is counted (its node keeps its old address).
    fn note_addresses(&mut self, snap: &store::Snapshot) {
        self.records = snap.addresses;
        self.first_inc = snap.first_inc;
        if snap.bad_addresses != 0 {
            bump(&self.counters.address_records_bad);
            let mut last = self
                .counters
                .last_error
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            *last = Some(format!(
                "snapshot: unreadable address records of nodes {:#x}",
                snap.bad_addresses
            ));
        }
    }

    /// This process as it registers: node, lease, incarnation, addresses.
    fn holder(&self) -> store::Holder {
        store::Holder {
            node: self.s.node,
            lease: self.lease,
            incarnation: self.inc,
            addresses: self.s.addresses,
        }
    }
}

/// The nodes of the snapshot's configuration to configure out: each that
/// registered once and whose member key is gone (its lease ran out) or is
/// held by another incarnation than the configured one (a restarted
/// process took it, which it does only once its predecessor's lease ran
/// out, so that predecessor is fenced).
fn gone(snap: &store::Snapshot) -> u32 {
    let mut gone = snap.config.live & snap.joined & !snap.members;
    for n in 0..super::NODES_MAX {
        let configured = configured_incarnation(&snap.config, n as NodeId, snap.first_inc[n]);
        let held = snap.member_inc[n];
        if snap.joined & (1 << n) != 0 && configured.is_some_and(|c| held.is_some_and(|h| h != c)) {
            gone |= 1 << n;
        }
    }
    gone
}

/// Creates or reads the configuration (refusing another cluster's, or one
/// of another shape), takes this process's incarnation, registers it under
/// `lease` and settles its generation (module `lifecycle`): admitted, or
/// joining a live generation (`ttl_s` of the answer is left 0).
async fn join(
    client: &mut Client,
    keys: &ClusterKeys,
    s: &EtcdSettings,
    lease: i64,
    rpc: Duration,
) -> Result<Ready, EtcdError> {
    let shape = (s.nodes, s.replication);
    let header = store::init_config(client, keys, shape, (s.cluster_id, s.commit), rpc)
        .await
        .map_err(EtcdError::store)?;
    ours(s, &header)?;
    let inc = store::next_incarnation(client, keys, s.node, s.incarnation, rpc)
        .await
        .map_err(EtcdError::store)?;
    let holder = store::Holder {
        node: s.node,
        lease,
        incarnation: inc,
        addresses: s.addresses,
    };
    lifecycle::settle(client, keys, s, &holder, rpc).await
}

/// Refuses a stored configuration that cannot be this cluster's: written
/// by another `cluster_id`, for another number of nodes or replication, or
/// for another commit protocol (older records ran Xenic OCC).
fn ours(s: &EtcdSettings, h: &RecordHeader) -> Result<(), EtcdError> {
    let prefix = ClusterKeys::new(&s.cluster).config();
    if !h.lineage.belongs_to(s.cluster_id) {
        return Err(EtcdError::Foreign {
            key: prefix,
            stored: h.lineage.cluster_id.unwrap_or_default(),
            ours: s.cluster_id,
        });
    }
    let stored = (
        h.nodes.unwrap_or(s.nodes),
        h.replication.unwrap_or(s.replication),
    );
    if stored != (s.nodes, s.replication) {
        return Err(EtcdError::OtherShape {
            key: prefix,
            stored,
            ours: (s.nodes, s.replication),
        });
    }
    let stored = h.commit.unwrap_or(CommitProtocol::XenicOcc);
    if stored != s.commit {
        return Err(EtcdError::OtherProtocol {
            key: prefix,
            stored,
            ours: s.commit,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use splitkv_nic::NODES_MAX;

    fn snap(member_inc: [Option<u32>; 3], first_inc: [Option<u32>; 3]) -> store::Snapshot {
        let mut s = store::Snapshot {
            config: Configuration::initial(3, 3),
            rev: 1,
            lineage: Lineage::first(7),
            members: 0,
            member_lease: [0; NODES_MAX],
            joined: 0b111,
            member_inc: [None; NODES_MAX],
            first_inc: [None; NODES_MAX],
            suspects: 0,
            addresses: [None; NODES_MAX],
            bad_addresses: 0,
            probes: [None; NODES_MAX],
        };
        for n in 0..3 {
            s.member_inc[n] = member_inc[n];
            s.first_inc[n] = first_inc[n];
            if member_inc[n].is_some() {
                s.members |= 1 << n;
            }
        }
        s
    }

    #[test]
    fn a_member_key_of_another_incarnation_configures_its_node_out() {
        let first = [Some(1), Some(1), Some(1)];
        assert_eq!(gone(&snap([Some(1), Some(1), Some(1)], first)), 0);
        assert_eq!(gone(&snap([Some(1), Some(1), None], first)), 0b100);
        assert_eq!(gone(&snap([Some(1), Some(1), Some(5)], first)), 0b100);
        // A rejoined node is configured with its own incarnation.
        let mut s = snap([Some(1), Some(1), Some(5)], first);
        s.config = s.config.without(1 << 2).rejoining(2, 5).expect("out");
        assert_eq!(gone(&s), 0);
        s.member_inc[2] = Some(6);
        assert_eq!(gone(&s), 0b100);
        // Clusters older than rejoin (no first incarnation known): as before.
        assert_eq!(gone(&snap([Some(1), Some(1), Some(5)], [None; 3])), 0);
    }

    #[test]
    fn a_stored_configuration_of_another_commit_protocol_is_refused() {
        let mut s = EtcdSettings::new(vec!["http://127.0.0.1:1".into()], "c", 0, 3, 3);
        s.cluster_id = 7;
        let header = |commit| RecordHeader {
            epoch: 1,
            lineage: Lineage::first(7),
            nodes: Some(3),
            replication: Some(3),
            commit,
        };
        assert_eq!(ours(&s, &header(Some(CommitProtocol::XenicOcc))), Ok(()));
        // Older records ran Xenic OCC.
        assert_eq!(ours(&s, &header(None)), Ok(()));
        s.commit = CommitProtocol::Dnl2;
        let e = ours(&s, &header(None)).unwrap_err();
        assert!(
            matches!(
                e,
                EtcdError::OtherProtocol {
                    stored: CommitProtocol::XenicOcc,
                    ours: CommitProtocol::Dnl2,
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains("commit protocol xenic-occ, not dnl2"),
            "{e}"
        );
    }
}
