//! The cluster lifecycle at start-up: which life of the cluster a starting
//! process belongs to (the module docs of `membership_etcd`, "Lifecycle").
//!
//! The store is main-memory: once no configured member of the stored
//! configuration is alive, the cluster's rows are gone. So a starting
//! process that the stored configuration does not admit decides, before
//! its transport exists (the generation is folded into the cluster id its
//! packets carry):
//!
//! - **A live generation** — a configured member still holds its member
//!   key and shows it is alive: the process *joins* it (module `rejoin`).
//!   Evidence of life is an answer to the process's probe (it puts
//!   `probes/<node>` under its lease; every admitted member's driver answers
//!   a new probe at its next poll with `acks/<node>/<member>`), a
//!   configuration change (only live members install one), or a member key
//!   that outlives the remaining TTL etcd reports for its lease by a second
//!   and [`GENERATION_GUARD_MS`] (a dead process's key is deleted when its
//!   lease runs out; etcd rounds the TTL down to seconds and its lessor
//!   revokes expired leases every 500 ms).
//! - **A dead generation** — no configured member holds its member key
//!   (every configured process stopped: fenced, drained or killed, and its
//!   lease ran out): the process *forms the next generation*
//!   ([`store::form_generation`]: epoch one higher, generation one higher,
//!   every node of the file a member, the old generation's first
//!   incarnations and suspect reports cleared, by compare-and-swap on the
//!   configuration's mod revision) and registers in it, as every other
//!   starting process does once it sees it. No row of the old generation is
//!   consulted: there are none.
//!
//! While the old members' keys are still held (the whole cluster killed and
//! started again within the lease TTL) the process waits, logging why.

use super::Ready;
use crate::membership_etcd::keys::{configured_incarnation, ClusterKeys, Lineage};
use crate::membership_etcd::store::{self, Holder, Snapshot};
use crate::membership_etcd::{EtcdError, EtcdSettings, GENERATION_GUARD_MS, SETTLE_WAIT_MS_MAX};
use etcd_client::Client;
use splitkv_layout::wire::NodeId;
use splitkv_nic::membership::Configuration;
use splitkv_nic::NODES_MAX;
use std::time::{Duration, Instant};

/// The configured members of `snap`'s configuration whose member key is
/// held by their configured incarnation (a mask by node id). Where the
/// configured incarnation is not known (a cluster older than rejoin), any
/// holder counts.
pub(crate) fn configured_holders(snap: &Snapshot) -> u32 {
    let c = &snap.config;
    (0..NODES_MAX)
        .filter(|&n| c.contains(n as NodeId))
        .filter(|&n| {
            let held = snap.member_inc[n];
            let configured = configured_incarnation(c, n as NodeId, snap.first_inc[n]);
            held.is_some() && (configured.is_none() || configured == held)
        })
        .fold(0, |m, n| m | 1 << n)
}

/// The first configuration of the generation after `snap`'s, for a
/// cluster of `nodes` with `replication`: every node a member, the epoch
/// one higher (epochs keep rising across generations).
pub(crate) fn next_generation(snap: &Snapshot, s: &EtcdSettings) -> (Configuration, Lineage) {
    let c = Configuration {
        epoch: snap.config.epoch.saturating_add(1),
        ..Configuration::initial(s.nodes, s.replication)
    };
    let lineage = Lineage {
        cluster_id: Some(s.cluster_id),
        generation: snap.lineage.generation.saturating_add(1),
    };
    (c, lineage)
}

/// When the configured members' keys are to be gone if their processes
/// are dead: per lease, the time it was first seen plus its remaining TTL
/// (whole seconds, rounded down by etcd) plus one second and the guard.
struct Deadlines {
    /// Per node: the lease seen holding its member key and its deadline.
    by_node: [Option<(i64, Instant)>; NODES_MAX],
}

impl Deadlines {
    /// Whether a configured member outlived its deadline (it renews: alive).
    async fn outlived(
        &mut self,
        client: &mut Client,
        snap: &Snapshot,
        holders: u32,
        rpc: Duration,
    ) -> Result<bool, EtcdError> {
        let now = Instant::now();
        for n in (0..NODES_MAX).filter(|n| holders & (1 << n) != 0) {
            let lease = snap.member_lease[n];
            match self.by_node[n] {
                Some((l, deadline)) if l == lease => {
                    if now >= deadline {
                        return Ok(true);
                    }
                }
                _ => {
                    let ttl = store::lease_ttl(client, lease, rpc)
                        .await
                        .map_err(EtcdError::store)?;
                    let remaining_s = ttl.map_or(0, |(r, _)| r.max(0) as u64);
                    let wait =
                        Duration::from_millis((remaining_s + 1) * 1_000 + GENERATION_GUARD_MS);
                    self.by_node[n] = Some((lease, now + wait));
                }
            }
        }
        Ok(false)
    }
}

/// Forms the generation after `snap`'s (a lost compare-and-swap is no
/// error: the next snapshot shows the winner's).
async fn form_next(
    client: &mut Client,
    keys: &ClusterKeys,
    s: &EtcdSettings,
    snap: &Snapshot,
    rpc: Duration,
) -> Result<(), EtcdError> {
    let (next, lineage) = next_generation(snap, s);
    tracing::warn!(
        generation = lineage.generation,
        epoch = next.epoch,
        "membership: no member of configuration epoch {} is alive: forming cluster generation {} (the earlier generation's data is gone)",
        snap.config.epoch,
        lineage.generation
    );
    store::form_generation(client, keys, snap.rev, (&next, lineage, s.commit), rpc)
        .await
        .map_err(EtcdError::store)?;
    Ok(())
}

/// What a starting process has seen of the stored generation's members.
struct Liveness {
    deadlines: Deadlines,
    /// The configuration's mod revision when first read.
    first_rev: Option<i64>,
    /// This process's probe is stored.
    probed: bool,
}

impl Liveness {
    /// Whether the configured members `configured_holders(snap)` showed
    /// that the generation lives: one answered this process's probe, the
    /// configuration changed, or a member's key outlived its lease.
    async fn shown(
        &mut self,
        client: &mut Client,
        keys: &ClusterKeys,
        h: &Holder,
        snap: &Snapshot,
        rpc: Duration,
    ) -> Result<bool, EtcdError> {
        let holders = configured_holders(snap);
        if !self.probed {
            let probe = (keys.probe(h.node), h.incarnation.to_string());
            store::put_leased(client, probe, h.lease, rpc)
                .await
                .map_err(EtcdError::store)?;
            self.probed = true;
        }
        let answered = store::acks(client, keys, (h.node, h.incarnation), rpc)
            .await
            .map_err(EtcdError::store)?;
        let changed = self.first_rev.is_some_and(|r| r != snap.rev);
        self.first_rev.get_or_insert(snap.rev);
        Ok(answered & holders != 0
            || changed
            || self.deadlines.outlived(client, snap, holders, rpc).await?)
    }
}

/// Registers `h` and settles which generation it serves in (module docs):
/// admitted at once, joining a live generation, or admitted in the next
/// generation it or another starting process formed. Bounded by
/// [`SETTLE_WAIT_MS_MAX`].
pub(crate) async fn settle(
    client: &mut Client,
    keys: &ClusterKeys,
    s: &EtcdSettings,
    h: &Holder,
    rpc: Duration,
) -> Result<Ready, EtcdError> {
    let (node, me) = (s.node, s.node as usize);
    let mut reg = store::register(client, keys, h, rpc)
        .await
        .map_err(EtcdError::store)?;
    let mut liveness = Liveness {
        deadlines: Deadlines {
            by_node: [None; NODES_MAX],
        },
        first_rev: None,
        probed: false,
    };
    let mut logged = false;
    let give_up = Instant::now() + Duration::from_millis(SETTLE_WAIT_MS_MAX);
    loop {
        let snap = store::snapshot(client, keys, s.nodes, s.replication, rpc)
            .await
            .map_err(EtcdError::store)?;
        if snap.joined & (1 << me) == 0 {
            // A new generation formed (clearing `joined/`) since this
            // process registered: its first process of this node is this
            // one, once an earlier process that was never admitted lets
            // go of the member key.
            reg = store::register(client, keys, h, rpc)
                .await
                .map_err(EtcdError::store)?;
            if !reg.holds_member {
                tokio::time::sleep(Duration::from_millis(s.poll_every_ms)).await;
            }
            continue;
        }
        let first = snap.first_inc[me].or(reg.first);
        let ready = |joining| Ready {
            ttl_s: 0,
            config: snap.config,
            lineage: snap.lineage,
            incarnation: h.incarnation,
            joining,
            first,
        };
        let holds = snap.member_inc[me] == Some(h.incarnation);
        if configured_incarnation(&snap.config, node, first) == Some(h.incarnation) {
            if holds {
                return Ok(ready(false));
            }
            // Admitted, but an earlier process of this node that was never
            // admitted still holds the member key: wait for its lease.
            store::take_member(client, keys, h, rpc)
                .await
                .map_err(EtcdError::store)?;
            tokio::time::sleep(Duration::from_millis(s.poll_every_ms)).await;
            continue;
        }
        // A configured predecessor of this node counts: two live
        // processes of one node are an operator's error, and a dead one's
        // key is waited out like any other.
        let holders = configured_holders(&snap);
        if holders == 0 {
            form_next(client, keys, s, &snap, rpc).await?;
            continue;
        }
        if liveness.shown(client, keys, h, &snap, rpc).await? {
            return Ok(ready(true));
        }
        if Instant::now() >= give_up {
            return Err(EtcdError::Store(format!(
                "members {holders:#x} of configuration epoch {} neither renewed nor let their leases run out within {} ms",
                snap.config.epoch,
                SETTLE_WAIT_MS_MAX
            )));
        }
        if !logged {
            logged = true;
            tracing::info!(
                members = holders,
                epoch = snap.config.epoch,
                "membership: waiting to learn whether the members of configuration epoch {} are alive (their leases renewed) or gone (the whole cluster stopped)",
                snap.config.epoch
            );
        }
        tokio::time::sleep(Duration::from_millis(s.poll_every_ms)).await;
    }
}
