//! The chaos mix's overlapping faults, fired by the cluster driver (the
//! schedule, [`crate::chaos`], says what they are and the bound on
//! crashes; this is the trigger that fires them). The
//! NIC restarts are fired from inside a pass, by the node's own component
//! ([`ChaosState::before_nic`], called by the NIC runtime's wrapper), the
//! first time the state they wait for is seen past their delay, so they
//! land inside a recovery epoch (which lasts some 60 passes) whatever the
//! slicing; the second crash needs the simulator, so the component ends
//! the slice ([`ChaosState::wants_driver`]) and the driver crashes the
//! victim before the next pass ([`ChaosState::second_crash`]).

use super::{crashed_mask, SimNodesMembership, COMPONENTS_PER_NODE};
use crate::chaos::{second_crash_victim, ChaosPlan, CopyRole};
use crate::{Sim, SimError, SimNetwork};
use splitkv_bench::{BenchCluster, Workload};
use splitkv_layout::wire::NodeId;
use splitkv_nic::membership::Configuration;
use splitkv_nic::{Nanos, NicRuntime};

/// Why a chaos NIC restart was fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChaosNicRestart {
    /// The node was in a recovery epoch.
    InRecovery,
    /// The node was a copy source.
    CopySource,
    /// The node was being copied.
    CopyingNode,
}

/// What the chaos mix did in one run (every part may also not have come:
/// a copy that ended before its delay, say).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChaosRecord {
    /// NIC restarts fired: (node, virtual time, why).
    pub nic_restarts: Vec<(NodeId, Nanos, ChaosNicRestart)>,
    /// The second crash: (node, virtual time), if it happened.
    pub second_crash: Option<(NodeId, Nanos)>,
    /// The second crash was due but no node could crash within f.
    pub second_crash_refused: bool,
}

/// The chaos plan under way (one per run).
#[derive(Debug)]
pub(super) struct ChaosState {
    plan: ChaosPlan,
    /// When the NIC restart inside a recovery epoch is due.
    recovery_due: Option<Nanos>,
    recovery_done: bool,
    /// When the NIC restart during a copy is due.
    copy_due: Option<Nanos>,
    copy_done: bool,
    /// When the second crash is due.
    crash_due: Option<Nanos>,
    crash_done: bool,
    /// A component asked the driver to end the slice (the second crash).
    stop: bool,
    /// A NIC restart refused: (node, time, why).
    pub(super) error: Option<(NodeId, Nanos, String)>,
    pub(super) record: ChaosRecord,
}

impl ChaosState {
    pub(super) fn new(plan: ChaosPlan) -> ChaosState {
        ChaosState {
            plan,
            recovery_due: None,
            recovery_done: false,
            copy_due: None,
            copy_done: false,
            crash_due: None,
            crash_done: false,
            stop: false,
            error: None,
            record: ChaosRecord::default(),
        }
    }

    /// Called by `node`'s NIC wrapper before its NIC runtime runs at `now`:
    /// arms the triggers on the first recovery epoch and the first copy
    /// seen, and restarts this node's NIC runtime when one is due and this
    /// node is in the state it waits for.
    pub(super) fn before_nic(&mut self, now: Nanos, node: NodeId, nic: &mut NicRuntime) {
        let (recovering, copying, sourcing) =
            (nic.recovering(), nic.copying(), nic.sourcing_copies());
        if recovering && self.recovery_due.is_none() {
            self.recovery_due = Some(now + self.plan.recovery_nic_delay_ns);
        }
        if (copying || sourcing) && self.copy_due.is_none() {
            self.copy_due = Some(now + self.plan.copy_nic_delay_ns);
            self.crash_due = self.plan.second_crash_delay_ns.map(|d| now + d);
        }
        let due = |at: Option<Nanos>| at.is_some_and(|t| now >= t);
        let why = if !self.recovery_done && recovering && due(self.recovery_due) {
            self.recovery_done = true;
            Some(ChaosNicRestart::InRecovery)
        } else if !self.copy_done && due(self.copy_due) {
            let (hit, why) = match self.plan.copy_role {
                CopyRole::Source => (sourcing, ChaosNicRestart::CopySource),
                CopyRole::Copying => (copying, ChaosNicRestart::CopyingNode),
            };
            self.copy_done = hit;
            hit.then_some(why)
        } else {
            None
        };
        if let Some(why) = why {
            let next = nic.incarnation().saturating_add(1);
            match nic.restart_nic(now, next) {
                Ok(()) => self.record.nic_restarts.push((node, now, why)),
                Err(e) => self.error = Some((node, now, format!("{why:?}: {e}"))),
            }
        }
        if !self.crash_done && copying && due(self.crash_due) {
            self.stop = true;
        }
    }

    /// Whether a component asked the driver to end the slice.
    pub(super) fn wants_driver(&self) -> bool {
        self.stop || self.error.is_some()
    }

    /// Between slices: the node to crash now as the second crash, if due
    /// (once), chosen within f (`second_crash_victim`) from the manager's
    /// configuration `config` and the crashed nodes `crashed` (a mask).
    pub(super) fn second_crash(
        &mut self,
        now: Nanos,
        nodes: usize,
        replication: usize,
        config: &Configuration,
        crashed: u32,
    ) -> Option<NodeId> {
        if !self.stop {
            return None;
        }
        self.stop = false;
        self.crash_done = true;
        let all = (1u32 << nodes) - 1;
        let down = crashed | (all & !config.live);
        let victim = second_crash_victim(
            nodes,
            replication,
            down,
            config.copying & !down,
            self.plan.second_crash_pick,
        );
        match victim {
            Some(v) => self.record.second_crash = Some((v, now)),
            None => self.record.second_crash_refused = true,
        }
        victim
    }
}

/// After a slice under the chaos mix: a refused NIC restart is the
/// run's fault; a second crash that came due is done now.
pub(super) fn fire_chaos<W: Workload>(
    cluster: &mut BenchCluster<W>,
    sim: &mut Sim,
    net: &SimNetwork,
    m: &mut SimNodesMembership,
) -> Result<(), SimError> {
    let Some(chaos) = m.chaos.as_mut() else {
        return Ok(());
    };
    let chaos = chaos.get_mut().unwrap_or_else(|p| p.into_inner());
    if let Some((node, now_ns, reason)) = chaos.error.take() {
        return Err(SimError::ComponentStopped {
            index: node as usize * COMPONENTS_PER_NODE,
            now_ns,
            reason: format!("NIC runtime restart refused: {reason}"),
        });
    }
    let config = m.manager.current();
    let crashed = u32::from(crashed_mask(sim).0);
    let (nodes, replication) = (cluster.parts.nodes.len(), cluster.spec.replication);
    if let Some(victim) = chaos.second_crash(sim.now(), nodes, replication, &config, crashed) {
        sim.crash_now(net, victim);
    }
    Ok(())
}
