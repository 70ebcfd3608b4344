//! Sending a step's messages again to a peer whose session was renewed
//! within the epoch (see `crate::net::session::incarnation`): the peer's
//! process or NIC runtime restarted, or this node's did, or this node
//! learned that it addressed an incarnation that was gone. Packets held for
//! the old process were dropped, and a NIC runtime that restarts keeps its
//! recovery machine (host memory: `crate::recovery::restart`), so without
//! this the step would wait for a message that no one sends again until a
//! timeout suspects a live node (chaos seeds 66, 157 and 168 with named
//! incarnations: a NIC restart inside a recovery epoch lost evidence held
//! for the leader).
//!
//! What goes again, by phase (the receivers take each at most once:
//! a part already recorded, a second `Applied`, a decision series already
//! complete, a `Resume` after resuming are dropped and counted as
//! unexpected, [`RecoveryStats::unexpected_dropped`](super::RecoveryStats)):
//!
//! | phase here | peer | sent again |
//! |---|---|---|
//! | `AwaitingDecisions` | the leader | every evidence part |
//! | `AwaitingResume` | the leader | `Applied` |
//! | `AwaitingApplied` (leader) | a live node not yet applied | its decisions |
//! | `Serving`, leader of the epoch resumed | a live node | `Resume` |
//!
//! Nothing goes in `Collecting` (the leader sends nothing until every
//! evidence is in; a peer whose NIC restarted sends its own again) nor to a
//! node outside the epoch's live set. Resent messages are queued behind the
//! commands already queued, so an `Applied` never overtakes the recording
//! of the decisions it promises.

use splitkv_layout::wire::{NodeId, RecoveryMsg, RECOVERY_PARTS_MAX};

use super::machine::{Recovery, RecoveryPhase};
use super::types::{RecoveryCommand, COMMANDS_MAX};

impl Recovery {
    /// The session with `peer` was renewed: queues again the messages of the
    /// current step that `peer` may have lost (table in the module docs).
    /// Returns whether any was queued (counted,
    /// [`RecoveryStats::resends`](super::RecoveryStats::resends)); nothing is
    /// queued when fewer than a full series of commands
    /// ([`RECOVERY_PARTS_MAX`]) fit under [`COMMANDS_MAX`] (counted,
    /// [`RecoveryStats::resends_over_limit`](super::RecoveryStats::resends_over_limit)).
    pub fn resend_to(&mut self, peer: NodeId) -> bool {
        if peer == self.node || !self.view.is_live(peer) {
            return false;
        }
        if self.commands_pending() + RECOVERY_PARTS_MAX > COMMANDS_MAX {
            self.stats.resends_over_limit += 1;
            return false;
        }
        let leader = self.view.leader();
        let epoch = self.epoch;
        match self.phase {
            RecoveryPhase::AwaitingDecisions if peer == leader => self.send_evidence(),
            RecoveryPhase::AwaitingResume if peer == leader => {
                let msg = RecoveryMsg::Applied { epoch };
                self.push(RecoveryCommand::Send { to: peer, msg });
            }
            RecoveryPhase::AwaitingApplied if !self.applied.contains(peer) => {
                self.send_decisions(peer);
            }
            RecoveryPhase::Serving if leader == self.node && self.stats.epochs_resumed > 0 => {
                let msg = RecoveryMsg::Resume { epoch };
                self.push(RecoveryCommand::Send { to: peer, msg });
            }
            _ => return false,
        }
        self.stats.resends += 1;
        true
    }
}
