//! The NIC restart itself (step 1 of the module docs of `recovery::restart`):
//! the NIC runtime's queries of its availability, the restart that drops
//! every volatile part, and the polling that ends the rebuild.

use super::{Availability, Parts, Rebuild, RebuildStats, RestartError, RESTART_DRAIN_ROUNDS_MAX};
use crate::net::fragment::Reassembly;
use crate::net::stack::{Stack, StackConfig};
use crate::protocol::coordinator::{phase_deadline_ns, Coordinator, QueuedOutcome};
use crate::runtime::NicRuntime;
use crate::Nanos;
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::wire::{NodeId, NodeMask, RebuildMsg};

impl NicRuntime {
    /// Whether this node serves, or is rebuilding after a NIC restart.
    pub fn availability(&self) -> Availability {
        match &self.restart.rebuild {
            None => Availability::Serving,
            Some(r) => Availability::Rebuilding {
                waiting_for: r.waiting_for,
            },
        }
    }

    /// Restart and rebuild counters.
    pub fn rebuild_stats(&self) -> RebuildStats {
        self.restart.stats
    }

    /// This NIC runtime's session incarnation (raised by each restart).
    pub fn incarnation(&self) -> u32 {
        self.restart.net.incarnation
    }

    /// The NIC runtime crashed and restarts at `now` (step 1 of
    /// the module docs), as incarnation `incarnation`: DMA requests posted
    /// before the crash complete, every volatile part is dropped, the stack
    /// is rebuilt (same cluster, batching and session set-up), clients'
    /// requests in flight hear `Unknown`, and the rebuild begins; the node
    /// serves again once it ends ([`NicRuntime::availability`]). This is
    /// the call a node's driver makes when the NIC runtime's thread (or
    /// SoC) died and is started again over the same host memory and rings.
    ///
    /// # Errors
    /// [`RestartError`]: an incarnation not above the current one, DMA that
    /// does not drain, a stack that cannot be built. The runtime is unchanged
    /// on an incarnation or stack error.
    pub fn restart_nic(&mut self, now: Nanos, incarnation: u32) -> Result<(), RestartError> {
        let old = self.restart.net.incarnation;
        if incarnation <= old {
            return Err(RestartError::Incarnation {
                old,
                new: incarnation,
            });
        }
        let net = StackConfig {
            incarnation,
            ..self.restart.net
        };
        let net = &net;
        let nodes = self.io.placement.nodes();
        let mut stack = Stack::new(
            self.io.node,
            nodes,
            self.transport.mtu(),
            self.transport.is_lossy(),
            net,
        )?;
        stack.set_inline_bytes_max(self.transport.inline_bytes_max());
        stack.attach_lender(self.transport.as_ref(), net);
        stack.set_epoch(self.io.net.epoch());
        // The membership's view of the peers' incarnations outlives the NIC.
        for p in 0..nodes as NodeId {
            stack.raise_floor(p, self.io.net.floor(p));
        }
        self.io.now = now;
        self.drain_dma()?;
        self.io.net = stack;
        self.io.send_fault = None;
        self.index = self.index.fresh();
        let server = std::mem::take(&mut self.server);
        self.server = server.restarted();
        self.reset_coordinator(net);
        self.reassembly = Reassembly::new(nodes);
        // Copies from here lost their chunks and acknowledgements in flight,
        // recovery its step's messages (its machine is kept: host memory).
        self.copies
            .restart_streams(NodeMask::EMPTY.with(self.io.node));
        self.recovery.peers_renewed(((1u64 << nodes) - 1) as u32);
        self.events.clear();
        self.events_fresh.clear();
        self.restart.net = *net;
        self.restart.stats.restarts += 1;
        self.restart.stats.last_restart_ns = now;
        let excluded = self.coordinator.excluded_peers();
        let all = ((1u64 << nodes) - 1) as u32;
        let peers = all & !excluded & !(1 << self.io.node);
        self.restart.rebuild = Some(Rebuild {
            restart: net.incarnation,
            query_epoch: self.io.net.epoch(),
            waiting_for: peers,
            renewed: 0,
            reported: hashbrown::HashSet::new(),
            records: Vec::new(),
            decided: false,
            recovery_at_restart: (
                self.recovery.machine().stats().epochs_begun,
                self.recovery.paused(),
            ),
        });
        for p in (0..nodes as NodeId).filter(|p| peers & (1 << p) != 0) {
            let q = RebuildMsg::Query {
                restart: net.incarnation,
            };
            self.restart.send(&mut self.io.net, p, &q);
        }
        Ok(())
    }

    /// Lets every DMA request posted before the crash complete (they are
    /// in the engine's queue or host memory), feeding completions to the
    /// old server so its record table follows the host log.
    fn drain_dma(&mut self) -> Result<(), RestartError> {
        let mut completions = std::mem::take(&mut self.completions);
        for _ in 0..RESTART_DRAIN_ROUNDS_MAX {
            if self.io.dma.inflight() == 0 && !self.server.busy() {
                break;
            }
            self.io.dma.poll(Nanos::MAX, &mut completions);
            for c in completions.drain(..) {
                self.server.on_dma(&mut self.io, &mut self.index, &c);
            }
            self.server.retry_deferred(&mut self.io, &mut self.index);
        }
        self.completions = completions;
        match self.io.dma.inflight() {
            0 => Ok(()),
            inflight => Err(RestartError::Drain { inflight }),
        }
    }

    /// A fresh coordinator with the old one's excluded peers, its client
    /// requests in flight answered `Unknown`.
    fn reset_coordinator(&mut self, net: &StackConfig) {
        let excluded = self.coordinator.excluded_peers();
        let all = ((1u64 << self.io.placement.nodes()) - 1) as u32;
        let mut c = Coordinator::new();
        c.set_phase_deadline_ns(phase_deadline_ns(net.session.silence_ns));
        c.set_live(&mut self.io, &self.procedures, all & !excluded);
        // New transaction ids go on above the lost ones this node's fence
        // saw; the peers' reports raise them further (`take_report`).
        c.number_above(self.server.newest_generation(self.io.node));
        for ticket in self.clients.live_tickets() {
            self.restart.stats.outcomes_unknown += 1;
            c.outcomes().push_back(QueuedOutcome {
                req_id: ticket,
                status: TxStatus::Unknown,
                // Empty: the procedure's result is not known (an
                // application reads a result as the one it would have had
                // on commit).
                result: Vec::new(),
            });
        }
        self.coordinator = c;
        // Its single-key calls were among the tickets just answered, and the
        // writes it coordinated for callers went with the old coordinator.
        self.single.reset();
    }

    /// Each iteration: the restarted node's progress (steps 5–6 of the
    /// module docs; the messages are handled as they arrive). Returns
    /// whether anything was done.
    pub(crate) fn poll_rebuild(&mut self, now: Nanos) -> bool {
        let parts = Parts {
            io: &mut self.io,
            index: &mut self.index,
            server: &mut self.server,
            coordinator: &mut self.coordinator,
            recovering: self.recovery.paused(),
        };
        let answered = self.restart.answer_deferred(parts);
        // Copies to a node whose NIC restarted lost what was in flight.
        let restarted = std::mem::take(&mut self.restart.answered);
        if restarted != 0 {
            self.copies.restart_streams(NodeMask(restarted as u16));
        }
        answered | self.release_recovered() | self.requery() | self.advance_rebuild(now)
    }

    /// Peer side: releases the locks of recovered commits whose records
    /// the host has applied (see `Server::commit_recovered_holding_locks`).
    fn release_recovered(&mut self) -> bool {
        let mut releases = std::mem::take(&mut self.restart.releases);
        let before = releases.len();
        let (server, index) = (&mut self.server, &mut self.index);
        let applied = self.host_applied;
        releases.retain_mut(|(tx_id, target)| {
            if target.is_none() && !server.appending(*tx_id) {
                *target = Some(server.appended_tail());
            }
            match *target {
                Some(t) if t <= applied => {
                    server.release_recovered(index, *tx_id);
                    false
                }
                _ => true,
            }
        });
        let work = releases.len() != before;
        self.restart.releases = releases;
        work
    }
}
