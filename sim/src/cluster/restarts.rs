//! Restarts and re-replication between the simulator's slices: NIC
//! runtimes restarted (the nic-crash mix), crashed nodes coming
//! back as new processes that rejoin empty (the rejoin mix), the snapshots
//! a copy reads from the host tables, and when re-replication is over (see
//! the [module docs](super)).

use super::{crashed_mask, restarted_mask, SimNodesMembership, COMPONENTS_PER_NODE};
use crate::dma::{NullDma, SimDma};
use crate::{Sim, SimError, SimNetwork};
use splitkv_bench::{BenchCluster, Workload};
use splitkv_layout::wire::NodeId;
use splitkv_nic::membership::MembershipAgent;
#[cfg(doc)]
use splitkv_nic::NicRuntime;

/// Restarts the NIC runtimes whose NIC-only crash is due
/// ([`Sim::take_nic_crashes`]), each as its next incarnation.
///
/// # Errors
/// [`SimError::ComponentStopped`] (the node's NIC runtime component) if
/// a restart is refused.
pub(super) fn restart_nics<W: Workload>(
    cluster: &mut BenchCluster<W>,
    sim: &mut Sim,
) -> Result<(), SimError> {
    for node in sim.take_nic_crashes() {
        let nic = &mut cluster.parts.nodes[node as usize].nic;
        let next = nic.incarnation().saturating_add(1);
        if let Err(e) = nic.restart_nic(sim.now(), next) {
            return Err(SimError::ComponentStopped {
                index: node as usize * COMPONENTS_PER_NODE,
                now_ns: sim.now(),
                reason: format!("NIC runtime restart refused: {e}"),
            });
        }
    }
    Ok(())
}

/// Whether re-replication is over: no restart is still
/// planned, no node is being copied in the manager's configuration (a
/// restarted node, or a survivor chosen as a shard's new backup: the
/// replication degree is restored), and if a node restarted, every
/// node is in the configuration and each restarted node is idle.
pub(super) fn is_restored<W: Workload>(
    cluster: &mut BenchCluster<W>,
    sim: &Sim,
    m: &SimNodesMembership,
) -> bool {
    if !sim.planned_restarts().is_empty() {
        return false;
    }
    let c = m.manager.current();
    if (0..cluster.parts.nodes.len() as NodeId).any(|n| c.is_copying(n)) {
        return false;
    }
    if sim.restarted().is_empty() {
        return true;
    }
    let all = (1u32 << cluster.parts.nodes.len()) - 1;
    let crashed = u32::from(crashed_mask(sim).0);
    let back = restarted_mask(sim);
    // Every restarted node's last incarnation was admitted (a join put
    // off while its old incarnation was still in is not yet).
    let admitted = back.iter().all(|n| {
        crashed & (1 << n) != 0 || c.incarnation[n as usize] == m.incarnations[n as usize]
    });
    admitted
        && c.live | crashed == all
        && c.copying == 0
        && cluster.parts.nodes.iter_mut().enumerate().all(|(n, p)| {
            !back.contains(n as NodeId)
                || (p.worker.is_quiescent() && !p.nic.recovering() && !p.nic.copying())
        })
}

/// Takes every snapshot a copy waits for, from its node's host table
/// (re-replication; see [`NicRuntime::serve_copy_reads`]); returns whether a
/// copy is under way anywhere.
pub(super) fn serve_copy_reads<W: Workload>(cluster: &mut BenchCluster<W>) -> bool {
    let mut under_way = false;
    for node in cluster.parts.nodes.iter_mut() {
        if node.nic.needs_copy_reads() {
            let table = node.worker.table();
            // A shard too large to copy is counted by the runtime; the
            // run then never restores its degree and times out.
            let _ = node
                .nic
                .serve_copy_reads(&mut |f: &mut dyn FnMut(_, _, &[u8])| table.for_each(f));
        }
        under_way |= node.nic.copying() || node.nic.sourcing_copies();
    }
    under_way
}

/// Restarts the nodes whose restart is due (rejoin): fresh components
/// of a new incarnation over a fresh endpoint, a fresh membership
/// handle and agent, and the old client stopped.
pub(super) fn restart_due<W: Workload>(
    cluster: &mut BenchCluster<W>,
    sim: &mut Sim,
    net: &SimNetwork,
    m: &mut SimNodesMembership,
) -> Result<(), SimError> {
    let cfg = sim.config();
    for (node, transport) in sim.take_restarts(net) {
        let n = node as usize;
        // Above every earlier incarnation of the node, its NIC
        // restarts' included (peers drop an older one's packets).
        let incarnation = cluster.parts.nodes[n]
            .nic
            .incarnation()
            .max(m.incarnations[n])
            .saturating_add(1);
        m.incarnations[n] = incarnation;
        let spec = &cluster.spec;
        let settings = splitkv_bench::cluster::node_settings(spec);
        let fail = |reason: String| SimError::ComponentStopped {
            index: n * COMPONENTS_PER_NODE,
            now_ns: sim.now(),
            reason,
        };
        let mut parts = splitkv_bench::cluster::builder(spec, &cluster.workload)
            .configure(move |c| {
                settings(c);
                c.net.incarnation = incarnation;
            })
            .build_local_parts(node, Box::new(transport))
            .map_err(|e| fail(format!("restarted node {node} not built: {e}")))?;
        let mut fresh = parts.nodes.pop().expect("one node built");
        // The new process serves nothing until a configuration admits
        // it (chaos list-append seed 107).
        fresh.nic.await_admission();
        if cfg.dma.on {
            let inner = fresh.nic.replace_dma(Box::new(NullDma));
            let seed = (cfg.seed ^ u64::from(incarnation))
                .wrapping_add((n as u64 + 1).wrapping_mul(0x9E37_79B9));
            fresh
                .nic
                .replace_dma(Box::new(SimDma::new(inner, cfg.dma, seed)));
        }
        cluster.parts.nodes[n] = fresh;
        cluster.loadgens[n].stop();
        m.members[n] = m
            .manager
            .restart(node, sim.now(), incarnation)
            .map_err(|e| fail(format!("restarted node {node} cannot rejoin: {e}")))?;
        m.agents[n] = MembershipAgent::new(m.renew_ns);
    }
    Ok(())
}

/// Under a restart fault, a node its membership fenced (lease run out, or
/// configured out) exits as the deployed node process does (`splitkv node`
/// fail-stops), and comes back after the mix's seeded restart delay as a new
/// incarnation that rejoins empty — what a supervisor (systemd's
/// `Restart=on-failure`) does for a deployed node. Without a restart fault a
/// fenced node stays out, as before. Before this, a live node fenced by a
/// false suspicion stayed out for good, and chaos seeds beyond the CI range
/// stalled (sim/README "Stalls beyond the CI seeds").
pub(super) fn exit_fenced(sim: &mut Sim, net: &SimNetwork, m: &SimNodesMembership) {
    if sim.config().nodes.restart_ns_max == 0 {
        return;
    }
    let crashed = crashed_mask(sim);
    for (n, agent) in m.agents.iter().enumerate() {
        let node = n as NodeId;
        if agent.removed().is_some() && !crashed.contains(node) {
            sim.crash_now(net, node);
        }
    }
}
