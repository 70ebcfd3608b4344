//! The restarted node asks an awaited peer again (step 2 of
//! `recovery::restart`'s docs) when its query or the report may be lost.

use super::RestartState;
use crate::runtime::NicRuntime;
use splitkv_layout::wire::{NodeId, RebuildMsg};

impl RestartState {
    /// The sessions with the nodes of `renewed` (a mask by node id) were
    /// renewed for a newer incarnation (`crate::net::session::incarnation`):
    /// a query held for the old process was dropped, or the process that
    /// took it is gone with its report. Those still awaited are asked again
    /// at the next poll (`requery`).
    pub(crate) fn peers_renewed(&mut self, renewed: u32) {
        if let Some(r) = self.rebuild.as_mut() {
            r.renewed |= renewed & r.waiting_for;
        }
    }
}

impl NicRuntime {
    /// Restarted side: asks again the peers still awaited — all of them
    /// after this node took a newer membership epoch (their answers to the
    /// earlier query, if any, carried an older epoch and are dropped here),
    /// or those whose session was renewed ([`RestartState::peers_renewed`]).
    /// A peer that gets both queries answers both, and the second report is
    /// ignored as no longer awaited.
    pub(super) fn requery(&mut self) -> bool {
        let epoch = self.io.net.epoch();
        let Some(r) = self.restart.rebuild.as_mut() else {
            return false;
        };
        let ask = if epoch > r.query_epoch {
            r.query_epoch = epoch;
            r.waiting_for
        } else {
            r.renewed & r.waiting_for
        };
        r.renewed = 0;
        if ask == 0 {
            return false;
        }
        let restart = r.restart;
        for p in (0..self.io.placement.nodes() as NodeId).filter(|p| ask & (1 << p) != 0) {
            self.restart.stats.queries_resent += 1;
            let q = RebuildMsg::Query { restart };
            self.restart.send(&mut self.io.net, p, &q);
        }
        true
    }
}
