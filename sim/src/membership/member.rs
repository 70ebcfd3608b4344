//! One node's side of the simulated manager: its handle ([`SimMember`],
//! the [`Membership`] a node's agent uses) over its view (`View`): the
//! configuration it knows, its lease as it believes it, the notices on
//! their way to it, and whether it is still joining or its generation
//! ended (the module docs of `membership`, "Rejoin" and "Lifecycle").

use super::{Notice, Request, SimMembership};
use splitkv_layout::wire::NodeId;
use splitkv_nic::membership::{Configuration, Membership, MembershipError};
use splitkv_nic::Nanos;

/// One node's side: what it knows, and what is on its way to it.
#[derive(Debug, Default)]
pub(super) struct View {
    pub(super) config: Configuration,
    pub(super) returned_epoch: u32,
    pub(super) lease_until: Nanos,
    pub(super) notices: Vec<(Nanos, Notice)>,
    /// Restarted and not yet admitted: renews nothing, takes only a
    /// configuration that admits its incarnation.
    pub(super) joining: bool,
    /// The incarnation of the process that restarted (0: the first).
    pub(super) incarnation: u32,
    /// The generation of `config` (0 while joining).
    pub(super) generation: u32,
    /// The epoch of a later generation's configuration this process
    /// learned: its generation ended, it is removed.
    pub(super) ended: Option<u32>,
}

/// One node's handle on the simulated manager.
#[derive(Debug, Clone)]
pub struct SimMember {
    pub(super) node: NodeId,
    pub(super) manager: SimMembership,
}

impl Membership for SimMember {
    fn node(&self) -> NodeId {
        self.node
    }

    fn current(&self) -> Configuration {
        self.manager.lock().views[self.node as usize].config
    }

    fn lease_until(&self) -> Nanos {
        self.manager.lock().views[self.node as usize].lease_until
    }

    /// # Errors
    /// [`MembershipError::Removed`] if this node knows it is out of its
    /// configuration, or that its generation ended (with the epoch of the
    /// later generation's configuration it learned); `Busy` as the trait.
    fn renew(&mut self, now: Nanos) -> Result<(), MembershipError> {
        let mut m = self.manager.lock();
        let view = &m.views[self.node as usize];
        if view.joining {
            // The join request carries the first lease.
            return Ok(());
        }
        if let Some(epoch) = view.ended {
            return Err(MembershipError::Removed {
                node: self.node,
                epoch,
            });
        }
        if !view.config.contains(self.node) {
            let epoch = view.config.epoch;
            return Err(MembershipError::Removed {
                node: self.node,
                epoch,
            });
        }
        let generation = view.generation;
        m.request(
            self.node,
            now,
            Request::Renew {
                sent: now,
                generation,
            },
        )
    }

    fn report_suspect(&mut self, suspect: NodeId, now: Nanos) -> Result<(), MembershipError> {
        let mut m = self.manager.lock();
        let nodes = m.cfg.nodes;
        if suspect as usize >= nodes {
            return Err(MembershipError::UnknownNode {
                node: suspect,
                nodes,
            });
        }
        let view = &m.views[self.node as usize];
        let r = Request::Suspect {
            node: suspect,
            incarnation: view.config.incarnation[suspect as usize],
            generation: view.generation,
        };
        m.request(self.node, now, r)
    }

    fn poll(&mut self, now: Nanos) -> Option<Configuration> {
        let mut m = self.manager.lock();
        let view = &mut m.views[self.node as usize];
        let mut i = 0;
        while i < view.notices.len() {
            if view.notices[i].0 > now {
                i += 1;
                continue;
            }
            match view.notices.swap_remove(i).1 {
                Notice::Grant { until } => view.lease_until = view.lease_until.max(until),
                // A process of an ended generation takes nothing more.
                Notice::Config(..) if view.ended.is_some() => {}
                // A restarted node takes no configuration before one that
                // admits it: one with its node id in is not enough while
                // that is its old incarnation (chaos Smallbank seed 10 of 4
                // nodes: the new process took such a configuration, renewed
                // the old incarnation's lease for good and was never
                // admitted).
                Notice::Config(c, _)
                    if view.joining
                        && !(c.contains(self.node)
                            && c.incarnation[self.node as usize] == view.incarnation) => {}
                // A later generation formed: this process's ended (its
                // node is in the new configuration, this process is not).
                Notice::Config(c, g) if !view.joining && g > view.generation => {
                    view.ended = Some(c.epoch);
                }
                Notice::Config(c, g) if c.epoch > view.config.epoch => {
                    view.config = c;
                    view.generation = g;
                    view.joining = false;
                }
                Notice::Config(..) => {}
            }
        }
        (view.config.epoch > view.returned_epoch).then(|| {
            view.returned_epoch = view.config.epoch;
            view.config
        })
    }

    /// The report reaches the manager after a seeded delay; the manager
    /// makes this node a replica if `epoch` is still current then.
    fn report_caught_up(&mut self, epoch: u32, now: Nanos) -> Result<(), MembershipError> {
        self.manager
            .lock()
            .request(self.node, now, Request::CaughtUp { epoch })
    }
}
