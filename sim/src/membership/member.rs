//! One node's side of the simulated manager: its handle ([`SimMember`],
//! the [`Membership`] a node's agent uses) over its view (`View`): the
//! configuration it knows, its lease as it believes it, the notices on
//! their way to it, and whether it is still joining (the module docs of
//! `membership`, "Rejoin").

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

    fn renew(&mut self, now: Nanos) -> Result<(), MembershipError> {
        let mut m = self.manager.lock();
        let view = &m.views[self.node as usize];
        if view.joining {
            // The join request carries the first lease.
            return Ok(());
        }
        if !view.config.contains(self.node) {
            let epoch = view.config.epoch;
            return Err(MembershipError::Removed {
                node: self.node,
                epoch,
            });
        }
        m.request(self.node, now, Request::Renew { sent: now })
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
        let incarnation = m.views[self.node as usize].config.incarnation[suspect as usize];
        let r = Request::Suspect {
            node: suspect,
            incarnation,
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
                // A restarted node takes no configuration before one that
                // admits it: one with its node id in is not enough while
                // that is its old incarnation (chaos Smallbank seed 10 of 4
                // nodes: the new process took such a configuration, renewed
                // the old incarnation's lease for good and was never
                // admitted).
                Notice::Config(c)
                    if view.joining
                        && !(c.contains(self.node)
                            && c.incarnation[self.node as usize] == view.incarnation) => {}
                Notice::Config(c) if c.epoch > view.config.epoch => {
                    view.config = c;
                    view.joining = false;
                }
                Notice::Config(_) => {}
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
