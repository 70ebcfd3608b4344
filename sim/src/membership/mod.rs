//! The simulated configuration manager: leases in virtual time, behind the
//! one membership interface ([`splitkv_nic::membership::Membership`];
//! DESIGN.md "Faults"; crash recovery). The deployed manager (etcd,
//! `splitkv_host::membership_etcd`) is on the same interface.
//!
//! - **Leases.** Every node of the first configuration holds a lease of
//!   [`LeaseConfig::lease_ns`] from time 0. A renewal reaches the manager
//!   after a seeded delay and extends the lease to its arrival plus
//!   `lease_ns`; the grant reaches the node after another delay, and the
//!   node counts its lease from the moment it *sent* the renewal, so a node
//!   never believes in a lease the manager has let lapse.
//! - **Suspects.** A node reports a peer whose session fell silent, naming
//!   the incarnation its own configuration holds for that peer; if the
//!   manager takes the report (the manager's configuration still holds that
//!   incarnation — a report on a restarted node's predecessor that arrives
//!   after the node rejoined does not count, as in etcd, where such a late
//!   report fenced a rejoined node; and [`Configuration::takes_suspicion`]:
//!   not from a suspect, and stranding no shard), from its arrival it renews the
//!   suspect's lease no more (it may be cut off from its peers but not from
//!   the manager), so the suspect is left out once the lease it holds runs
//!   out — never earlier, so a node that still believes in its lease is
//!   never configured out under it.
//! - **Configurations.** When leases have run out, the next configuration
//!   has the epoch one higher and lacks those nodes; every node, the removed
//!   ones too, learns it after a seeded delay. A removed node's renewals are
//!   refused ([`MembershipError::Removed`] once it knows).
//!
//! - **Rejoin.** A restarted node ([`SimMembership::restart`])
//!   holds nothing, not even a configuration: it asks to join, and once its
//!   crashed incarnation is out of the configuration the manager makes the
//!   next one with the node back in, *copying*
//!   (`Configuration::rejoining`), and grants it a lease. A join that finds
//!   the old incarnation still in is asked again (after a seeded delay,
//!   as a request sent when the first was put off), and the lease counts
//!   from the ask that was taken: counted from the first ask, a join put
//!   off for most of a lease was admitted with a lease about to end, and
//!   the node fenced itself before its first renewal (chaos Smallbank seed
//!   157). Until it learns a configuration that admits it, the node renews
//!   nothing and takes no configuration. Once copied it reports itself caught up
//!   ([`SimMember::report_caught_up`], with the epoch of its copy); if that
//!   is still the current epoch the manager makes the next configuration
//!   with the node a replica (`Configuration::caught_up`).
//! - **Lifecycle (cluster generations; module `lifecycle`).** A node's rows
//!   live in its memory only, so once no configured member holds a lease
//!   (every node crashed or was fenced, its lease ran out) nothing is left
//!   to copy from. The first join the manager takes then forms the *next
//!   generation* ([`SimMembership::generation`] one higher): epoch one
//!   higher (epochs keep rising), every node of the cluster a member,
//!   nothing copying, suspicions cleared, the joining process admitted. Each
//!   other node's first process of the generation is admitted at once as
//!   its join arrives (a configuration one epoch higher naming its
//!   incarnation), a member, not copying; a node not yet admitted holds no
//!   lease that could run out. Until then a join whose old incarnation is
//!   out is admitted copying only while some configured member shows it is
//!   alive (renewed within half a lease): otherwise it is put off, so a node
//!   whose old lease ran out first is not admitted copying into a
//!   generation whose other members crashed too and hold leases only until
//!   they run out. A process of an ended generation is never
//!   served: its renewals are refused, its reports ignored, and once it
//!   learns the later generation its renewals fail with
//!   [`MembershipError::Removed`]. As deployed (etcd's cluster generations,
//!   where a starting process likewise waits for evidence of life); unlike
//!   etcd, a join is never stranded: the join that finds the generation
//!   dead forms the next one.
//!
//! Every delay is drawn from one seeded generator, so one seed gives one
//! sequence of configurations. Nothing here reads a clock: callers pass
//! `now` (virtual ns). Bounds: [`MANAGER_REQUESTS_MAX`] requests in flight
//! to the manager, [`NODE_NOTICES_MAX`] undelivered notices per node (more
//! are dropped and counted, as lost messages).

mod lifecycle;
mod member;

pub use member::SimMember;
use member::View;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_layout::wire::NodeId;
#[cfg(doc)]
use splitkv_nic::membership::Membership;
use splitkv_nic::membership::{Configuration, MembershipError};
use splitkv_nic::{Component, Nanos, NODES_MAX};
use std::sync::{Arc, Mutex, MutexGuard};

/// Default lease (10 ms of virtual time; Rowan and FaRM reconfigure in
/// tens of milliseconds).
pub const LEASE_NS_DEFAULT: Nanos = 10_000_000;
/// Default least one-way delay between a node and the manager (ns).
pub const MEMBERSHIP_DELAY_MIN_NS_DEFAULT: Nanos = 50_000;
/// Default largest one-way delay between a node and the manager (ns).
pub const MEMBERSHIP_DELAY_MAX_NS_DEFAULT: Nanos = 500_000;
/// Most requests (renewals, suspect reports) in flight to the manager.
pub const MANAGER_REQUESTS_MAX: usize = 4 * NODES_MAX * 16;
/// Most undelivered notices (grants, configurations) per node.
pub const NODE_NOTICES_MAX: usize = 64;

/// Parameters of the simulated manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseConfig {
    /// Nodes in the first configuration (1..=[`NODES_MAX`]).
    pub nodes: usize,
    /// Replicas per shard (1..=`nodes`): the degree re-replication restores.
    pub replication: usize,
    /// Lease length (ns, > 0).
    pub lease_ns: Nanos,
    /// Least one-way delay (ns).
    pub delay_min_ns: Nanos,
    /// Largest one-way delay (ns, ≥ `delay_min_ns`).
    pub delay_max_ns: Nanos,
    /// Seed of every delay.
    pub seed: u64,
}

impl LeaseConfig {
    /// Defaults for `nodes` nodes with `replication` replicas per shard,
    /// and `seed`.
    pub fn new(nodes: usize, replication: usize, seed: u64) -> LeaseConfig {
        LeaseConfig {
            nodes,
            replication,
            lease_ns: LEASE_NS_DEFAULT,
            delay_min_ns: MEMBERSHIP_DELAY_MIN_NS_DEFAULT,
            delay_max_ns: MEMBERSHIP_DELAY_MAX_NS_DEFAULT,
            seed,
        }
    }
}

/// A lease configuration that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseConfigError {
    /// A parameter out of its range.
    #[error("lease manager: {what} = {value} out of range ({range})")]
    OutOfRange {
        /// The parameter.
        what: &'static str,
        /// Its value.
        value: u64,
        /// The allowed range, in words.
        range: &'static str,
    },
}

/// Counters of the simulated manager.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ManagerStats {
    /// Renewals granted.
    pub renewals: u64,
    /// Renewals refused (from a suspect or a removed node).
    pub renewals_refused: u64,
    /// Suspect reports taken.
    pub suspects: u64,
    /// Suspect reports not taken: the report names another incarnation of
    /// the suspect than the configuration holds, or
    /// ([`Configuration::takes_suspicion`]) the reporter is a suspect
    /// itself, either node is out of the configuration, or the suspicion
    /// would strand a shard.
    pub suspects_ignored: u64,
    /// Nodes left out because their lease ran out.
    pub expired: u64,
    /// Configurations made after the first.
    pub configurations: u64,
    /// Requests or notices dropped at their bound.
    pub dropped: u64,
    /// Restarted nodes admitted back (copying).
    pub joins: u64,
    /// Join requests put off until the node's old incarnation was out (or,
    /// with it out, until a member showed it is alive: module docs,
    /// "Lifecycle").
    pub joins_deferred: u64,
    /// Caught-up reports taken (configurations with the node a replica).
    pub caught_up: u64,
    /// Caught-up reports of an older epoch or from a node not copying.
    pub caught_up_stale: u64,
    /// Cluster generations formed after the first (module docs,
    /// "Lifecycle"; [`SimMembership::generation`]).
    pub generations: u64,
    /// Restarted nodes admitted at once as their node's first process of a
    /// new generation (members, not copying), the one whose join formed
    /// it included.
    pub generation_joins: u64,
}

#[derive(Debug, Clone, Copy)]
enum Request {
    /// Sent at `sent` by a process of generation `generation`.
    Renew {
        sent: Nanos,
        generation: u32,
    },
    /// `node`, as incarnation `incarnation` (raw) in the view of the
    /// reporter, a process of generation `generation`.
    Suspect {
        node: NodeId,
        incarnation: u32,
        generation: u32,
    },
    Join {
        sent: Nanos,
        incarnation: u32,
    },
    CaughtUp {
        epoch: u32,
    },
}

// A configuration holds every shard's replicas (about 1.2 KiB); a node's
// notice queue holds a handful, so they stay unboxed and `Copy`.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy)]
enum Notice {
    Grant {
        until: Nanos,
    },
    /// A configuration of generation `.1`.
    Config(Configuration, u32),
}

/// The manager's state (shared by the handles of [`SimMembership`]). Its
/// methods: requests, leases, expiry and joins here; the generations in
/// `lifecycle.rs` (`holders`, `showing_life`, `form_generation`,
/// `admit_first`); the nodes' views in `member.rs`.
#[derive(Debug)]
struct Manager {
    cfg: LeaseConfig,
    config: Configuration,
    lease_until: [Nanos; NODES_MAX],
    suspected: u32,
    /// (arrival, order, sender, request).
    requests: Vec<(Nanos, u64, NodeId, Request)>,
    order: u64,
    views: Vec<View>,
    history: Vec<(Nanos, Configuration)>,
    rng: Xoshiro256PlusPlus,
    stats: ManagerStats,
    /// The cluster generation (1 for the first configuration's).
    generation: u32,
    /// The members of `config` whose process of the current generation
    /// was admitted (every node of the first configuration; in a later
    /// one, those that registered): only they hold leases that can run
    /// out.
    registered: u32,
}

impl Manager {
    fn delay(&mut self) -> Nanos {
        self.rng
            .gen_range(self.cfg.delay_min_ns..=self.cfg.delay_max_ns)
    }

    fn notify(&mut self, node: NodeId, at: Nanos, notice: Notice) {
        let view = &mut self.views[node as usize];
        if view.notices.len() >= NODE_NOTICES_MAX {
            self.stats.dropped += 1;
            return;
        }
        view.notices.push((at, notice));
    }

    fn request(&mut self, from: NodeId, now: Nanos, r: Request) -> Result<(), MembershipError> {
        if self.requests.len() >= MANAGER_REQUESTS_MAX {
            self.stats.dropped += 1;
            return Err(MembershipError::Busy {
                max: MANAGER_REQUESTS_MAX,
            });
        }
        let at = now.saturating_add(self.delay());
        self.order += 1;
        self.requests.push((at, self.order, from, r));
        Ok(())
    }

    fn run(&mut self, now: Nanos) -> bool {
        self.requests.sort_unstable_by_key(|r| (r.0, r.1));
        let due = self.requests.partition_point(|r| r.0 <= now);
        let work = due > 0;
        let taken: Vec<_> = self.requests.drain(..due).collect();
        for (at, _, from, r) in taken {
            match r {
                Request::Join { sent, incarnation } => {
                    self.join(at, now, from, (sent, incarnation));
                }
                _ => self.take(at, from, r),
            }
        }
        let gone = (0..self.cfg.nodes)
            .filter(|&n| self.config.contains(n as NodeId) && self.registered & (1 << n) != 0)
            .filter(|&n| self.lease_until[n] <= now)
            .fold(0u32, |m, n| m | 1 << n);
        if gone == 0 {
            return work;
        }
        self.stats.expired += gone.count_ones() as u64;
        self.stats.configurations += 1;
        self.config = self.config.without(gone);
        self.suspected &= !gone;
        self.history.push((now, self.config));
        for n in 0..self.cfg.nodes as NodeId {
            let at = now.saturating_add(self.delay());
            self.notify(n, at, Notice::Config(self.config, self.generation));
        }
        true
    }

    /// Takes node `from`'s join (sent at `.0` by incarnation `.1`) that
    /// arrived at `at`, in the run at `now`: forms the next generation when
    /// no configured member holds a lease, admits a node's first process
    /// of the generation at once, puts the join off while the node's old
    /// incarnation is in, or admits the node copying (module docs).
    fn join(&mut self, at: Nanos, now: Nanos, from: NodeId, (sent, incarnation): (Nanos, u32)) {
        if self.holders(at) == 0 {
            return self.form_generation(at, from, sent, incarnation);
        }
        let in_config = self.config.contains(from);
        if in_config && self.registered & (1 << from) == 0 {
            return self.admit_first(at, from, sent, incarnation);
        }
        // The old incarnation is still in, or no member shows it is alive
        // (module `lifecycle`: the generation may be dying, the rest of
        // the cluster crashed too): the node asks again.
        if in_config || self.showing_life(at) == 0 {
            return self.ask_again(now, from, incarnation);
        }
        let Some(next) = self.config.rejoining(from, incarnation) else {
            return;
        };
        self.stats.joins += 1;
        self.admit(at, from, sent, next);
    }

    /// Puts node `from`'s join (incarnation `incarnation`) off in the run at
    /// `now`: the node asks again, a join sent now. Its first lease counts
    /// from the ask that is taken, not from the first one: a join can be put
    /// off for up to a lease (until the old incarnation's runs out), and a
    /// lease counted from its first ask could end right after the
    /// admission, before the node's first renewal (chaos Smallbank seed
    /// 157).
    fn ask_again(&mut self, now: Nanos, from: NodeId, incarnation: u32) {
        self.stats.joins_deferred += 1;
        let again = now.saturating_add(self.delay());
        self.order += 1;
        let r = Request::Join {
            sent: now,
            incarnation,
        };
        self.requests.push((again, self.order, from, r));
    }

    /// Admits node `from` (its join sent at `sent`, taken at `at`) in
    /// `next`: grants it its first lease and installs `next`.
    fn admit(&mut self, at: Nanos, from: NodeId, sent: Nanos, next: Configuration) {
        self.suspected &= !(1 << from);
        self.registered |= 1 << from;
        self.lease_until[from as usize] = at.saturating_add(self.cfg.lease_ns);
        let back = at.saturating_add(self.delay());
        let until = sent.saturating_add(self.cfg.lease_ns);
        self.notify(from, back, Notice::Grant { until });
        self.install(at, next);
    }

    fn take(&mut self, at: Nanos, from: NodeId, r: Request) {
        match r {
            Request::Renew { sent, generation } => {
                let bit = 1u32 << from;
                // A process of an ended generation is never served (its
                // node may be in the new configuration; the process is not).
                let ended = generation != self.generation;
                if ended || !self.config.contains(from) || self.suspected & bit != 0 {
                    self.stats.renewals_refused += 1;
                    let back = at.saturating_add(self.delay());
                    let notice = Notice::Config(self.config, self.generation);
                    self.notify(from, back, notice);
                    return;
                }
                self.stats.renewals += 1;
                self.lease_until[from as usize] = at.saturating_add(self.cfg.lease_ns);
                let back = at.saturating_add(self.delay());
                let until = sent.saturating_add(self.cfg.lease_ns);
                self.notify(from, back, Notice::Grant { until });
            }
            Request::Suspect {
                node: s,
                incarnation,
                generation,
            } => {
                // Configuration::takes_suspicion: a suspect's own reports do
                // not count, and no suspicion strands a shard. Nor does a
                // report from a process of an ended generation.
                let current = generation == self.generation
                    && self.config.incarnation[s as usize] == incarnation;
                if current && self.config.takes_suspicion(self.suspected, from, s) {
                    self.stats.suspects += 1;
                    self.suspected |= 1 << s;
                } else {
                    self.stats.suspects_ignored += 1;
                }
            }
            // Taken by `run` (`Manager::join`).
            Request::Join { .. } => {}
            Request::CaughtUp { epoch } => {
                match self
                    .config
                    .caught_up(from)
                    .filter(|_| epoch == self.config.epoch)
                {
                    Some(next) => {
                        self.stats.caught_up += 1;
                        self.install(at, next);
                    }
                    None => self.stats.caught_up_stale += 1,
                }
            }
        }
    }

    /// Makes `next` the configuration at `at` and tells every node.
    fn install(&mut self, at: Nanos, next: Configuration) {
        self.stats.configurations += 1;
        self.config = next;
        self.history.push((at, next));
        for n in 0..self.cfg.nodes as NodeId {
            let when = at.saturating_add(self.delay());
            self.notify(n, when, Notice::Config(next, self.generation));
        }
    }
}

/// The simulated configuration manager, shared by every node's handle
/// ([`SimMembership::member`]). Run it as a [`Component`] of the simulation
/// (its [`Component::run_iteration`] takes the requests that arrived and
/// makes the next configuration when leases ran out).
#[derive(Debug, Clone)]
pub struct SimMembership {
    inner: Arc<Mutex<Manager>>,
}

impl SimMembership {
    /// A manager whose first configuration (epoch 1) holds every one of
    /// `cfg.nodes` nodes, each with a lease until `cfg.lease_ns`.
    ///
    /// # Errors
    /// [`LeaseConfigError`] if `nodes` is 0 or over [`NODES_MAX`], the lease
    /// is 0, or the delays are out of order.
    pub fn new(cfg: LeaseConfig) -> Result<SimMembership, LeaseConfigError> {
        let bad =
            |what, value: u64, range| Err(LeaseConfigError::OutOfRange { what, value, range });
        if cfg.nodes == 0 || cfg.nodes > NODES_MAX {
            return bad("nodes", cfg.nodes as u64, "1..=NODES_MAX");
        }
        if cfg.replication == 0 || cfg.replication > cfg.nodes {
            return bad("replication", cfg.replication as u64, "1..=nodes");
        }
        if cfg.lease_ns == 0 {
            return bad("lease_ns", 0, "at least 1");
        }
        if cfg.delay_max_ns < cfg.delay_min_ns {
            return bad("delay_max_ns", cfg.delay_max_ns, "at least delay_min_ns");
        }
        let config = Configuration::initial(cfg.nodes, cfg.replication);
        let views = (0..cfg.nodes)
            .map(|_| View {
                config,
                returned_epoch: config.epoch,
                lease_until: cfg.lease_ns,
                notices: Vec::with_capacity(NODE_NOTICES_MAX),
                joining: false,
                incarnation: 0,
                generation: 1,
                ended: None,
            })
            .collect();
        let mut lease_until = [0; NODES_MAX];
        lease_until[..cfg.nodes].fill(cfg.lease_ns);
        let manager = Manager {
            cfg,
            config,
            lease_until,
            suspected: 0,
            requests: Vec::with_capacity(MANAGER_REQUESTS_MAX),
            order: 0,
            views,
            history: vec![(0, config)],
            rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed),
            stats: ManagerStats::default(),
            generation: 1,
            registered: config.live,
        };
        Ok(SimMembership {
            inner: Arc::new(Mutex::new(manager)),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Manager> {
        // One simulation thread: a poisoned lock means a test already failed.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Node `node`'s handle (the [`Membership`] it uses).
    ///
    /// # Errors
    /// [`MembershipError::UnknownNode`] for a node outside the cluster.
    pub fn member(&self, node: NodeId) -> Result<SimMember, MembershipError> {
        let nodes = self.lock().cfg.nodes;
        if node as usize >= nodes {
            return Err(MembershipError::UnknownNode { node, nodes });
        }
        Ok(SimMember {
            node,
            manager: self.clone(),
        })
    }

    /// The manager's current configuration.
    pub fn current(&self) -> Configuration {
        self.lock().config
    }

    /// Every configuration made so far with the virtual time it was made
    /// (the first at 0).
    pub fn history(&self) -> Vec<(Nanos, Configuration)> {
        self.lock().history.clone()
    }

    /// Counters so far.
    pub fn stats(&self) -> ManagerStats {
        self.lock().stats
    }

    /// The current cluster generation: 1 for the first configuration's,
    /// one more for each generation formed since (module docs,
    /// "Lifecycle").
    pub fn generation(&self) -> u32 {
        self.lock().generation
    }

    /// Node `node` restarted at `now` as incarnation `incarnation` (newer
    /// than any before), holding nothing (rejoin): its view is forgotten
    /// and it asks to join (see the module docs: admitted copying into a
    /// live generation, or as a member into the next one when none is
    /// live). Returns its fresh handle.
    ///
    /// # Errors
    /// [`MembershipError::UnknownNode`] for a node outside the cluster;
    /// [`MembershipError::Busy`] if the join request was dropped.
    pub fn restart(
        &self,
        node: NodeId,
        now: Nanos,
        incarnation: u32,
    ) -> Result<SimMember, MembershipError> {
        let member = self.member(node)?;
        let mut m = self.lock();
        m.views[node as usize] = View {
            notices: Vec::with_capacity(NODE_NOTICES_MAX),
            joining: true,
            incarnation,
            ..View::default()
        };
        m.request(
            node,
            now,
            Request::Join {
                sent: now,
                incarnation,
            },
        )?;
        Ok(member)
    }
}

impl Component for SimMembership {
    fn run_iteration(&mut self, now: Nanos) -> bool {
        self.lock().run(now)
    }
}
