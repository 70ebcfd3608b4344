//! [`EtcdMember`]: one node's polled handle on the etcd membership (the
//! [`Membership`] a [`splitkv_nic::membership::MembershipAgent`] drives).

use super::driver::{self, Command, Counters, DataAddresses, Notice};
use super::keys::{configured_incarnation, Lineage};
use super::{believed_lease_ns, EtcdError, EtcdSettings, EtcdStats, FailStop};
use super::{COMMANDS_MAX, NOTICES_MAX};
use crossbeam::channel::{bounded, Receiver, Sender, TrySendError};
use splitkv_layout::wire::NodeId;
use splitkv_nic::membership::{Configuration, Membership, MembershipError};
use splitkv_nic::{Nanos, NODES_MAX};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One node's handle on the etcd membership: a polled state machine
/// ([`Membership`]) in front of a driver thread that owns the etcd client.
/// Renew every [`EtcdMember::renew_every_ns`]; a node must stop serving once
/// [`EtcdMember::fail_stop`] says so (or [`Membership::renew`] answers
/// [`MembershipError::Removed`]).
///
/// **Incarnations.** [`EtcdMember::connect`] takes this process's
/// incarnation, [`EtcdMember::incarnation`]: the given
/// [`EtcdSettings::incarnation`] raised above every earlier incarnation of
/// the node (a counter in etcd), so it strictly grows per node even when the
/// wall clock steps back. The NIC runtime of the process must use this one.
///
/// **A restarted node** (rejoin; the same behaviour as a restarted
/// `splitkv_sim::membership::SimMember`): a process whose incarnation the
/// stored configuration does not hold — the node was configured out, or
/// its predecessor (a killed process) is still in — connects *joining*
/// ([`EtcdMember::joining`]): it holds a lease (renew it as usual;
/// [`Membership::renew`] is `Ok` and [`EtcdMember::fail_stop`] is `None`
/// while the lease holds), [`Membership::current`] is the empty
/// configuration of epoch 0, and [`Membership::poll`] returns nothing until
/// a configuration admits this node with this incarnation, *copying*
/// (`Configuration::rejoining`). Its driver gets it there: it waits until
/// the predecessor's lease ran out in etcd (never earlier: fencing), the
/// survivors configured the predecessor out and this member was polled
/// once (the node's runtime runs, so it answers the recovery its admission
/// begins), then installs the rejoining configuration. Once the node is
/// copied, the
/// agent's [`Membership::report_caught_up`] with the epoch of the copy
/// makes it a replica (`Configuration::caught_up`) if that epoch is still
/// the stored one. A node the stored configuration holds with this
/// incarnation — the first start of each node: a configuration's
/// incarnation 0 is the node's first registered incarnation — is admitted
/// at once, as before rejoin.
///
/// **Addresses** (a replacement machine for a dead node): the
/// process publishes [`EtcdSettings::addresses`] with its member key, and
/// [`Membership::data_address`] answers, per node of
/// [`Membership::current`], the data address that node's configured
/// incarnation published (read in the same etcd snapshot as the
/// configuration); `None` where it published none. The first configuration
/// (before any change) carries none: a node's first process is where the
/// cluster file says.
pub struct EtcdMember {
    node: NodeId,
    nodes: usize,
    rpc_ns: Nanos,
    /// The lease TTL etcd granted (s).
    granted_ttl_s: i64,
    believed_ns: Nanos,
    config: Configuration,
    /// Per node, the data address its incarnation in `config` published.
    data: DataAddresses,
    incarnation: u32,
    first: Option<u32>,
    lineage: Lineage,
    /// Set by the driver: why this process's generation is over for it
    /// ([`FailStop::GenerationEnded`] or [`FailStop::Stranded`]).
    ended: Option<FailStop>,
    joining: bool,
    returned_epoch: u32,
    lease_until: Nanos,
    lease_lost: bool,
    renew_sent: Option<Nanos>,
    /// [`Command::Serving`] was sent (at the first poll).
    serving_sent: bool,
    stopped: bool,
    commands: Sender<Command>,
    notices: Receiver<Notice>,
    counters: Arc<Counters>,
    commands_dropped: u64,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for EtcdMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdMember")
            .field("node", &self.node)
            .field("config", &self.config)
            .field("lease_until", &self.lease_until)
            .finish_non_exhaustive()
    }
}

impl EtcdMember {
    /// Starts the driver thread, which connects to etcd, takes a lease,
    /// registers this node and creates (first node) or reads the
    /// configuration. Blocks the caller for at most
    /// [`EtcdSettings::start_timeout_ms`] (and a second for the thread).
    /// `now` is the caller's time (ns): the lease is counted from it, and
    /// from each renewal the driver makes by itself while it starts (its
    /// registration writes may outlast a short lease; after this returns,
    /// only [`Membership::renew`] renews).
    ///
    /// # Errors
    /// [`EtcdError::Settings`] / [`EtcdError::ClusterName`] for bad settings;
    /// [`EtcdError::Unreachable`] if etcd does not answer;
    /// [`EtcdError::Store`] / [`EtcdError::Thread`] otherwise. A node the
    /// stored configuration does not admit is no error: it joins (see
    /// [`EtcdMember`]).
    pub fn connect(s: EtcdSettings, now: Nanos) -> Result<EtcdMember, EtcdError> {
        s.check()?;
        let (node, nodes, rpc_ms, start_ms) =
            (s.node, s.nodes, s.rpc_timeout_ms, s.start_timeout_ms);
        let (cmd_tx, cmd_rx) = bounded(COMMANDS_MAX);
        let (note_tx, note_rx) = bounded(NOTICES_MAX);
        let (ready_tx, ready_rx) = bounded(1);
        let clock = driver::MemberClock {
            at: Instant::now(),
            ns: now,
        };
        let counters = Arc::new(Counters::default());
        let c = counters.clone();
        let thread = std::thread::Builder::new()
            .name(format!("splitkv-etcd-{node}"))
            .spawn(move || {
                let rt = match driver::runtime() {
                    Ok(rt) => rt,
                    Err(e) => {
                        _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                rt.block_on(async move {
                    match driver::Driver::start(s, clock, (cmd_rx, note_tx), c).await {
                        Ok((d, ready)) => {
                            _ = ready_tx.send(Ok(ready));
                            d.run().await;
                        }
                        Err(e) => _ = ready_tx.send(Err(e)),
                    }
                });
            })
            .map_err(|e| EtcdError::Thread(e.to_string()))?;
        // Start-up, then settling the generation (module `driver::lifecycle`).
        let wait = Duration::from_millis(start_ms + 1_000 + super::SETTLE_WAIT_MS_MAX);
        let ready = match ready_rx.recv_timeout(wait) {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Err(EtcdError::join(thread, e)),
            Err(_) => {
                // The driver ends by itself: its command channel closes as
                // this returns, and a lease it may still take runs out.
                let e = EtcdError::Thread(format!("no start-up answer within {wait:?}"));
                return Err(e);
            }
        };
        let believed_ns = believed_lease_ns(ready.ttl_s.max(0) as u64);
        let mut member = EtcdMember {
            node,
            nodes,
            rpc_ns: rpc_ms * 1_000_000,
            granted_ttl_s: ready.ttl_s,
            believed_ns,
            config: if ready.joining {
                Configuration::default()
            } else {
                ready.config
            },
            data: [None; NODES_MAX],
            incarnation: ready.incarnation,
            first: ready.first,
            lineage: ready.lineage,
            ended: None,
            joining: ready.joining,
            returned_epoch: Configuration::initial(1, 1).epoch,
            lease_until: now.saturating_add(believed_ns),
            lease_lost: false,
            renew_sent: None,
            serving_sent: false,
            stopped: false,
            commands: cmd_tx,
            notices: note_rx,
            counters,
            commands_dropped: 0,
            thread: Some(thread),
        };
        // The renewals that took during start-up.
        member.drain();
        Ok(member)
    }

    /// How often to renew (ns): a third of the believed lease, so two
    /// renewals may fail before it runs out.
    pub fn renew_every_ns(&self) -> Nanos {
        (self.believed_ns / 3).max(1)
    }

    /// Takes every notice the driver sent (a lost lease, configurations,
    /// the end of a pending renewal): [`EtcdMember::fail_stop`] answers as
    /// of the last call of this, [`Membership::renew`], [`Membership::poll`]
    /// or [`Membership::report_caught_up`] — except for the lease's end,
    /// which counts every grant as soon as the driver has it.
    pub fn refresh(&mut self) {
        self.drain();
    }

    /// Why this node must stop serving at `now`, if it must: its believed
    /// lease ran out, etcd reported it gone, or a configuration left it out.
    /// A joining node is not removed: only its lease counts. As of the last
    /// [`EtcdMember::refresh`] (or renewal, poll, report).
    pub fn fail_stop(&self, now: Nanos) -> Option<FailStop> {
        if let Some(why) = self.ended {
            return Some(why);
        }
        if !self.joining && !self.admits(&self.config) {
            return Some(FailStop::Removed {
                epoch: self.config.epoch,
            });
        }
        if self.lease_lost {
            return Some(FailStop::LeaseLost);
        }
        let lease_until = self.lease_end();
        (now >= lease_until).then_some(FailStop::LeaseExpired { lease_until })
    }

    /// The lease TTL etcd granted (whole seconds): at least the one asked
    /// for, raised by etcd to 3/2 of its election timeout if below.
    pub fn lease_ttl_granted_s(&self) -> i64 {
        self.granted_ttl_s
    }

    /// The cluster and generation this process serves in (see the module
    /// docs of `membership_etcd`, "Lifecycle"): its transport must carry
    /// [`splitkv_layout::wire::generation_cluster_id`] of it.
    pub fn lineage(&self) -> Lineage {
        self.lineage
    }

    /// This process's incarnation (strictly greater than every earlier
    /// incarnation of this node; see [`EtcdMember`]).
    pub fn incarnation(&self) -> u32 {
        self.incarnation
    }

    /// Whether this node is still joining: no configuration admitted it yet
    /// (see [`EtcdMember`]). Up to date as of the last call of
    /// [`Membership::poll`], [`Membership::renew`] or
    /// [`Membership::report_caught_up`].
    pub fn joining(&self) -> bool {
        self.joining
    }

    /// Whether `c` holds this node with this process's incarnation.
    fn admits(&self, c: &Configuration) -> bool {
        configured_incarnation(c, self.node, self.first) == Some(self.incarnation)
    }

    /// Counters so far.
    pub fn stats(&self) -> EtcdStats {
        let c = &self.counters;
        let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        EtcdStats {
            grants: get(&c.grants),
            renewals_failed: get(&c.renewals_failed),
            etcd_errors: get(&c.etcd_errors),
            installs_won: get(&c.installs_won),
            installs_lost: get(&c.installs_lost),
            notices_dropped: get(&c.notices_dropped),
            commands_dropped: self.commands_dropped,
            joins: get(&c.joins),
            joins_deferred: get(&c.joins_deferred),
            join_conflicts: get(&c.join_conflicts),
            caught_up_taken: get(&c.caught_up_taken),
            caught_up_stale: get(&c.caught_up_stale),
            configs_refused: get(&c.configs_refused),
            address_records_bad: get(&c.address_records_bad),
        }
    }

    /// The last failed etcd call, in words (for logs and status).
    pub fn last_error(&self) -> Option<String> {
        let last = self.counters.last_error.lock();
        last.unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Leaves the cluster: revokes this node's lease (best effort, bounded by
    /// the RPC timeout), so the others configure it out without waiting for
    /// the lease to run out; then stops the driver.
    pub fn leave(mut self) {
        self.revoke();
        // Drop joins the driver.
    }

    /// Stops serving and revokes this node's lease (best effort, bounded by
    /// the RPC timeout): what [`EtcdMember::leave`] does, for a member
    /// shared with other threads (a drained node: a cluster stopped whole
    /// and started again then forms its next generation at once, not after
    /// its leases ran out). Afterwards [`EtcdMember::fail_stop`] holds.
    pub fn revoke(&mut self) {
        if self.stopped {
            return;
        }
        let wait = Duration::from_nanos(self.rpc_ns * 4);
        self.stopped = true;
        self.lease_lost = true;
        _ = self
            .commands
            .send_timeout(Command::Stop { revoke: true }, wait);
    }

    fn send(&mut self, c: Command) -> Result<(), MembershipError> {
        match self.commands.try_send(c) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.commands_dropped += 1;
                Err(MembershipError::Busy { max: COMMANDS_MAX })
            }
        }
    }

    /// The end of the believed lease (member's ns): the one counted at
    /// connect or the latest any grant gave, as soon as the renewal task
    /// has it (not only once its notice is taken: a grant left in the
    /// channel kept the end one renewal behind, and a node renewed at a
    /// backup thread's cadence fenced itself while healthy).
    fn lease_end(&self) -> Nanos {
        let granted = self.counters.granted_until.load(Ordering::Acquire);
        self.lease_until.max(granted)
    }

    /// Takes every notice the driver sent.
    fn drain(&mut self) {
        while let Ok(n) = self.notices.try_recv() {
            match n {
                // The lease's end is read from the counters (`lease_end`).
                Notice::Grant { .. } => self.renew_sent = None,
                Notice::RenewFailed => self.renew_sent = None,
                Notice::LeaseGone => self.lease_lost = true,
                Notice::GenerationEnded { generation } => {
                    self.ended.get_or_insert(FailStop::GenerationEnded {
                        ours: self.lineage.generation,
                        stored: generation,
                    });
                }
                Notice::Stranded { epoch } => {
                    self.ended.get_or_insert(FailStop::Stranded { epoch });
                }
                Notice::Displaced(why) => {
                    self.ended.get_or_insert(FailStop::Displaced(why));
                }
                // A restarted node takes no configuration before one that
                // admits it.
                Notice::Config(cd) if self.joining && !self.admits(&cd.0) => {}
                Notice::Config(cd) if cd.0.epoch > self.config.epoch => {
                    (self.config, self.data) = *cd;
                    self.joining = false;
                }
                Notice::Config(_) => {}
            }
        }
    }

    fn removed(&self) -> MembershipError {
        MembershipError::Removed {
            node: self.node,
            epoch: self.config.epoch,
        }
    }
}

impl Membership for EtcdMember {
    fn node(&self) -> NodeId {
        self.node
    }

    fn current(&self) -> Configuration {
        self.config
    }

    fn lease_until(&self) -> Nanos {
        if self.lease_lost {
            return 0;
        }
        self.lease_end()
    }

    fn renew(&mut self, now: Nanos) -> Result<(), MembershipError> {
        self.drain();
        if self.fail_stop(now).is_some() {
            if !self.stopped {
                // Fail-stop: revoke what may be left of the lease so the
                // others need not wait for it, and stop renewing (without
                // waiting: the driver does it on its thread).
                self.stopped = true;
                _ = self.commands.try_send(Command::Stop { revoke: true });
            }
            return Err(self.removed());
        }
        // One renewal at a time; a lost answer is given up after 2 RPC timeouts.
        if let Some(sent) = self.renew_sent {
            if now < sent.saturating_add(2 * self.rpc_ns) {
                return Ok(());
            }
        }
        self.send(Command::Renew { sent: now })?;
        self.renew_sent = Some(now);
        Ok(())
    }

    /// The report names the suspect's incarnation in this member's
    /// configuration, and counts only while the stored configuration
    /// configures that one (`keys::current_suspicions`). A suspect outside
    /// this member's configuration is already out: nothing is reported
    /// (a session to a dead node can fall silent again after the node was
    /// configured out, as a restarted NIC runtime's does).
    fn report_suspect(&mut self, suspect: NodeId, _now: Nanos) -> Result<(), MembershipError> {
        self.drain();
        if suspect as usize >= self.nodes || suspect == self.node {
            return Err(MembershipError::UnknownNode {
                node: suspect,
                nodes: self.nodes,
            });
        }
        if !self.config.contains(suspect) {
            return Ok(());
        }
        self.send(Command::Suspect {
            node: suspect,
            incarnation: self.config.incarnation[suspect as usize],
        })
    }

    /// The first call also tells the driver that the node's runtime runs:
    /// a joining process asks to be admitted only from then on (see
    /// [`EtcdMember`], "A restarted node").
    fn poll(&mut self, _now: Nanos) -> Option<Configuration> {
        if !self.serving_sent {
            self.serving_sent = self.send(Command::Serving).is_ok();
        }
        self.drain();
        (self.config.epoch > self.returned_epoch).then(|| {
            self.returned_epoch = self.config.epoch;
            self.config
        })
    }

    /// Queues the report to the driver, which installs
    /// `Configuration::caught_up` for this node if the stored configuration
    /// is still `epoch` with this node copying, and otherwise ignores the
    /// report (counted in [`EtcdStats::caught_up_stale`]).
    ///
    /// # Errors
    /// [`MembershipError::Busy`] if the command queue is full.
    fn report_caught_up(&mut self, epoch: u32, _now: Nanos) -> Result<(), MembershipError> {
        self.drain();
        self.send(Command::CaughtUp { epoch })
    }

    /// See [`EtcdMember`], "Addresses": as of the last drained notice.
    fn data_address(&self, node: NodeId) -> Option<SocketAddr> {
        self.data.get(node as usize).copied().flatten()
    }
}

impl Drop for EtcdMember {
    fn drop(&mut self) {
        if !self.stopped {
            let wait = Duration::from_nanos(self.rpc_ns * 4);
            _ = self
                .commands
                .send_timeout(Command::Stop { revoke: false }, wait);
        }
        // The driver ends after its current etcd call (bounded by the RPC
        // timeout) even if the Stop was lost: the channel is closed now.
        let (closed, _) = bounded(0);
        drop(std::mem::replace(&mut self.commands, closed));
        if let Some(t) = self.thread.take() {
            _ = t.join();
        }
    }
}

impl EtcdError {
    /// `e`, after the driver thread that reported it has ended.
    fn join(thread: JoinHandle<()>, e: EtcdError) -> EtcdError {
        _ = thread.join();
        e
    }
}
