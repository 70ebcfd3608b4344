//! What explains a simulated run that failed or stalled: the membership's
//! configurations and, per node, its incarnation, epoch, mode
//! (`NicRuntime::mode`: serving, awaiting admission, recovering, rebuilding
//! or stopped) with the recovery phase behind it, whether it copies, whether its client and host
//! are done, and its counters that say where messages went. Printed by
//! `splitkv sim --trace` for a failed seed, and by the chaos tests.

use super::SimNodesMembership;
use crate::Sim;
use splitkv_bench::{BenchCluster, Workload};
use std::fmt::Write;

/// A multi-line description of the run's state at `sim`'s time (module
/// docs), with the membership `m` when the run had one
/// ([`super::SimCluster::describe_state`]).
pub(super) fn describe_state<W: Workload>(
    cluster: &mut BenchCluster<W>,
    sim: &Sim,
    m: Option<&SimNodesMembership>,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "at {} ns: crashed {:?}, restarted {:?}, NIC restarts {:?}",
        sim.now(),
        sim.crashed(),
        sim.restarted(),
        sim.nic_crashed()
    );
    if let Some(m) = m {
        let _ = writeln!(s, "chaos {:?}", m.chaos());
        for (t, c) in m.manager.history() {
            let nodes = cluster.parts.nodes.len();
            let _ = writeln!(
                s,
                "  config at {t} ns: epoch {} live {:#b} copying {:#b} incarnations {:?}",
                c.epoch,
                c.live,
                c.copying,
                &c.incarnation[..nodes]
            );
        }
    }
    for (n, p) in cluster.parts.nodes.iter_mut().enumerate() {
        let nic = &p.nic;
        let _ = writeln!(
            s,
            "node {n}: incarnation {} epoch {} mode {} {:?}, recovering {} ({:?}, refusal {:?}), copying {} sourcing {}, host idle {}, load done {}",
            nic.incarnation(),
            nic.epoch(),
            nic.mode(),
            nic.availability(),
            nic.recovering(),
            nic.recovery().phase(),
            nic.recovery_refusal(),
            nic.copying(),
            nic.sourcing_copies(),
            p.worker.is_quiescent(),
            cluster.loadgens[n].is_done(),
        );
        let _ = writeln!(s, "  recovery {:?}", nic.recovery().stats());
        let _ = writeln!(s, "  rebuild {:?}", nic.rebuild_stats());
        let _ = writeln!(s, "  copies {:?}", nic.copy_stats());
        let agent = m.and_then(|m| m.agent(n as u16)).map(|a| a.stats());
        let _ = writeln!(s, "  agent {agent:?}");
        let _ = writeln!(
            s,
            "  session drops {:?}, admission drops {}",
            nic.stats().net.sessions.drops,
            nic.admission_drops()
        );
    }
    s
}
