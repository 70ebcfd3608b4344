//! The driver's side of rejoin (the simulated manager's `Join`
//! and `CaughtUp` requests, `splitkv_sim::membership`), one step per poll:
//!
//! 1. A restarted process whose predecessor's lease still holds
//!    `members/<node>` waits (deferred, counted) until etcd deletes that key
//!    when the lease runs out, then takes it — never earlier, so the
//!    predecessor, which believes in its lease only while etcd still holds
//!    it, has stopped serving (fencing).
//! 2. It waits (deferred, counted) while the configuration still holds the
//!    predecessor: the survivors configure it out, seeing `members/<node>`
//!    gone or held by another incarnation than the configured one (as the
//!    simulated manager puts off a join until the old incarnation is out).
//! 3. It waits (deferred, counted) until its member was first polled: the
//!    node's runtime runs. The configuration that admits it begins a
//!    recovery epoch at every member, whose leader suspects a member that
//!    sends no evidence within its timeout (tens of ms), and a suspicion
//!    in etcd is not withdrawn: a process admitted while still loading
//!    could be suspected, stop renewing and be fenced.
//! 4. Then it installs `config.rejoining(node, incarnation)` by a
//!    compare-and-swap on the configuration key's mod revision; a conflict
//!    is counted and retried at the next poll (one try per poll).
//!
//! A process that sees a later incarnation of its node holding the member
//! key gives up (reported as its lease gone: it must stop), as does one
//! that finds no configured member but its own predecessor alive (module
//! `lifecycle`: nobody is left to admit it; started again, it forms the
//! next generation).
//!
//! A caught-up report installs `config.caught_up(node)` if the stored
//! configuration still has the report's epoch and this node copying.

use super::{bump, store, Driver, Notice};
use crate::membership_etcd::keys::configured_incarnation;
use crate::membership_etcd::CAUGHT_UP_TRIES_MAX;
use splitkv_nic::membership::Configuration;

impl Driver {
    /// Whether `c` admits this process (holds this node with its incarnation).
    pub(super) fn admits(&self, c: &Configuration, first: Option<u32>) -> bool {
        configured_incarnation(c, self.s.node, first) == Some(self.inc)
    }

    /// One step of the join (module docs) on snapshot `snap`.
    pub(super) async fn join_step(&mut self, snap: &store::Snapshot) {
        let (rpc, node) = (self.rpc(), self.s.node);
        let me = node as usize;
        if snap.member_inc[me].is_some_and(|h| h > self.inc) {
            // A later process of this node took over: this one never joins.
            self.notify(Notice::LeaseGone);
            return;
        }
        if snap.member_inc[me] != Some(self.inc) {
            let h = self.holder();
            match store::take_member(&mut self.client, &self.keys, &h, rpc).await {
                // The next snapshot shows it.
                Ok(true) => {}
                Ok(false) => bump(&self.counters.joins_deferred),
                Err(e) => self.counters.error("member key take", &e),
            }
            return;
        }
        let c = snap.config;
        if self.admits(&c, snap.first_inc[me]) {
            // Admitted by an install whose answer was lost.
            self.admitted(c);
            return;
        }
        if super::lifecycle::configured_holders(snap) & !(1 << me) == 0 {
            // No survivor is left to configure the predecessor out or to
            // copy this node from: this generation's data is gone.
            self.notify(Notice::Stranded { epoch: c.epoch });
            return;
        }
        if c.contains(node) {
            // The predecessor is still in: the survivors configure it out.
            bump(&self.counters.joins_deferred);
            return;
        }
        if !self.serving {
            bump(&self.counters.joins_deferred);
            return;
        }
        let Some(next) = c.rejoining(node, self.inc) else {
            return;
        };
        if self.install(snap.rev, next, |c| &c.joins).await {
            self.admitted(next);
        } else {
            bump(&self.counters.join_conflicts);
        }
    }

    /// The join is done: `c` admits this process.
    fn admitted(&mut self, c: Configuration) {
        self.joining = false;
        self.learn(c);
    }

    /// This node's copy is done as of configuration `epoch`: installs
    /// `caught_up(node)` if the stored configuration is still that epoch
    /// with this process copying; otherwise the report is stale (counted).
    /// "This process" is the configured incarnation as [`Driver::admits`]
    /// reads it: a node that never restarted is configured as incarnation
    /// 0, which stands for its first process (a survivor chosen as a new backup
    /// in re-replication; comparing the raw 0 made every such report stale).
    pub(super) async fn caught_up(&mut self, epoch: u32) {
        let (rpc, node, nodes) = (self.rpc(), self.s.node, self.s.nodes);
        for _ in 0..CAUGHT_UP_TRIES_MAX {
            if self.joining {
                break;
            }
            let store::Stored {
                config: c,
                rev,
                lineage,
                ..
            } = match store::read_config(
                &mut self.client,
                &self.keys,
                nodes,
                self.s.replication,
                rpc,
            )
            .await
            {
                Ok(r) => r,
                Err(e) => return self.counters.error("configuration read", &e),
            };
            let next = c
                .caught_up(node)
                .filter(|_| lineage == self.lineage && c.epoch == epoch)
                .filter(|_| self.admits(&c, self.first_inc[node as usize]));
            let Some(next) = next else { break };
            if self.install(rev, next, |c| &c.caught_up_taken).await {
                return;
            }
        }
        bump(&self.counters.caught_up_stale);
    }
}
