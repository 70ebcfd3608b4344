//! Cluster generations in the simulated manager (the module docs of
//! `membership`, "Lifecycle"; the deployed counterpart is
//! `splitkv_host::membership_etcd`, module `driver::lifecycle`).
//!
//! A node's rows live in its memory only. Once no configured member of the
//! current configuration holds a lease (every one crashed or was fenced,
//! and its lease ran out), nothing is left to copy from: a restarted node
//! admitted *copying* (`Configuration::rejoining`) would wait for good.
//! Before generations that is what a whole-cluster restart with the
//! manager's state kept did: each join was put off until its node's old
//! lease ran out, the manager configured every node out (a configuration
//! with no node live), then admitted each restarted node as a copying
//! joining backup of every shard, with no caught-up replica of any shard
//! left.
//!
//! The leases of a cluster that crashed whole run out one by one (each
//! counted from its node's last renewal), and a restarted node's join is
//! taken within a delay of its old incarnation going out: it would be
//! admitted copying while the other nodes, as dead, still hold leases, and
//! then, itself a live member holding a lease, keep the dead generation
//! alive. So a join is admitted copying only while some configured member
//! *shows it is alive* ([`Manager::showing_life`]: renewed within half a
//! lease), the simulator's counterpart of the deployed manager's evidence
//! of life (a probe answered, a configuration installed, a member key
//! outliving its lease); otherwise it is put off and asked again. No seed
//! run is affected: a survivor renews every quarter lease.
//!
//! The join the manager takes once no configured member holds a lease
//! (never earlier: a member may believe in its lease until the manager's
//! runs out) forms the *next generation* (at the join, not before: until a
//! node restarts there is nobody to admit, and the ended generation's last
//! configuration stays current): epoch one higher (epochs keep rising across generations),
//! every node of the cluster a member, nothing copying, the generation one
//! higher, the ended generation's suspicions cleared. The joining process
//! is admitted in it at once. Every other node's first process of the new
//! generation is admitted at once too as its join arrives (a configuration
//! one epoch higher naming its incarnation, not copying); until then its
//! entry in `Configuration::incarnation` names its node's last process of
//! the ended generation, so incarnations keep rising, and its lease cannot
//! run out (it holds none yet), as a deployed node that never started stays
//! configured. A process of an ended generation is never served: its
//! renewals are refused and its reports ignored, and once it learns of the
//! later generation its renewals fail with `MembershipError::Removed`.
//!
//! Unlike the deployed manager, a joining process of the ended generation is
//! not stranded (etcd's `FailStop::Stranded`, then started again): the
//! simulated manager sees the whole state at once, so the join it takes
//! forms the generation itself.

use super::Manager;
use splitkv_layout::wire::NodeId;
use splitkv_nic::membership::Configuration;
use splitkv_nic::Nanos;

impl Manager {
    /// The configured members holding a lease at `at`, a mask by node id:
    /// admitted in the current generation, their lease running past `at`.
    /// None means the generation is dead.
    pub(super) fn holders(&self, at: Nanos) -> u32 {
        (0..self.cfg.nodes)
            .filter(|&n| self.config.contains(n as NodeId) && self.registered & (1 << n) != 0)
            .filter(|&n| self.lease_until[n] > at)
            .fold(0, |m, n| m | 1 << n)
    }

    /// The configured members that show they are alive at `at`, a mask by
    /// node id: admitted in the current generation, their last renewal
    /// taken less than half a lease before `at` (lease running past `at`
    /// plus half a lease). An agent renews every quarter lease
    /// (`RENEW_EVERY_NS_DEFAULT`, at most a quarter of the lease in
    /// `SimNodesMembership`), so a live member's last renewal is never that
    /// old unless the manager refuses it (a suspect: some caught-up replica
    /// of every shard is not one, `Configuration::takes_suspicion`).
    pub(super) fn showing_life(&self, at: Nanos) -> u32 {
        let alive_until = at.saturating_add(self.cfg.lease_ns / 2);
        self.holders(alive_until)
    }

    /// Forms the generation after the current one at `at`, admitting
    /// incarnation `incarnation` of node `from` (its join sent at `sent`)
    /// as its node's first process of it (module docs).
    pub(super) fn form_generation(
        &mut self,
        at: Nanos,
        from: NodeId,
        sent: Nanos,
        incarnation: u32,
    ) {
        let mut next = Configuration {
            epoch: self.config.epoch.saturating_add(1),
            incarnation: self.config.incarnation,
            ..Configuration::initial(self.cfg.nodes, self.cfg.replication)
        };
        next.incarnation[from as usize] = incarnation;
        self.generation = self.generation.saturating_add(1);
        self.stats.generations += 1;
        self.stats.generation_joins += 1;
        self.registered = 0;
        self.suspected = 0;
        self.admit(at, from, sent, next);
    }

    /// Admits incarnation `incarnation` of node `from` (its join sent at
    /// `sent`), a member of the current generation whose process has not
    /// been admitted yet, at once: the next configuration names its
    /// incarnation, nothing else changes.
    pub(super) fn admit_first(&mut self, at: Nanos, from: NodeId, sent: Nanos, incarnation: u32) {
        let mut next = Configuration {
            epoch: self.config.epoch.saturating_add(1),
            ..self.config
        };
        next.incarnation[from as usize] = incarnation;
        self.stats.generation_joins += 1;
        self.admit(at, from, sent, next);
    }
}
