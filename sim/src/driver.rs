//! The deterministic single-thread driver: virtual time advances by
//! `tick_ns` per pass, every live component runs once per pass in an order
//! shuffled by the seed, and the network ticks once per pass (partitions,
//! clogs). Node faults: components are mapped to nodes
//! ([`Sim::set_owners`]); a crashed node's components never run again and
//! the network drops everything to and from it; a slow node's components run
//! only every `slow_every`-th pass. Crashes come from the seed
//! ([`crate::NodeFaults`]) or a script ([`Sim::crash_at`]).
//!
//! A crashed node's volatile state is gone in the sense that nothing of it
//! is ever run, read by the network or sent again; its memory stays with
//! the caller (for post-mortem checks). Under a restart fault
//! ([`crate::NodeFaults::restart_ns_max`]) a crashed node restarts after a
//! seeded delay: [`Sim::take_restarts`] hands the caller a fresh network
//! endpoint for it, and the caller replaces the node's components with
//! fresh ones (an empty host, a new incarnation) before the next pass.
//!
//! NIC-runtime-only crashes ([`crate::NodeFaults::nic_crashes`])
//! come from the seed too: the driver only plans them, since restarting a
//! NIC runtime is the cluster's call (its components are opaque
//! here); a run slice ends early at the pass one is due, and
//! [`Sim::take_nic_crashes`] hands the caller the ones due, which it
//! restarts before the next pass.

use crate::chaos::ChaosPlan;
use crate::net::SimNetwork;
use crate::{SimConfig, SimError, CRASHES_MAX};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_layout::wire::NodeId;
use splitkv_nic::{Component, Nanos};

/// The deterministic single-thread driver.
#[derive(Debug)]
pub struct Sim {
    now: Nanos,
    cfg: SimConfig,
    rng: Xoshiro256PlusPlus,
    passes: u64,
    /// Node of each component (by index), once set.
    owners: Vec<NodeId>,
    /// Scheduled crashes: (pass, node), in no particular order.
    crash_plan: Vec<(u64, NodeId)>,
    /// Crashed nodes with their virtual crash time.
    crashed: Vec<(NodeId, Nanos)>,
    /// The slow node and its period.
    slow: Option<(NodeId, u64)>,
    /// The component order of the last pass.
    order: Vec<usize>,
    /// Scheduled restarts: (virtual time, node).
    restart_plan: Vec<(Nanos, NodeId)>,
    /// Restarts done: (node, crash time, restart time).
    restarted: Vec<(NodeId, Nanos, Nanos)>,
    /// Planned NIC-runtime-only crashes: (pass, node).
    nic_crash_plan: Vec<(u64, NodeId)>,
    /// NIC crashes handed to the caller: (node, virtual time).
    nic_crashed: Vec<(NodeId, Nanos)>,
    /// NIC crashes due and not yet taken: (pass, node).
    nic_due: Vec<(u64, NodeId)>,
    /// The chaos mix's overlapping faults, drawn by `set_owners`.
    chaos: Option<ChaosPlan>,
}

impl Sim {
    /// A simulator at virtual time 0.
    pub fn new(cfg: SimConfig) -> Sim {
        Sim {
            now: 0,
            cfg,
            rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed),
            passes: 0,
            owners: Vec::new(),
            crash_plan: Vec::new(),
            crashed: Vec::new(),
            slow: None,
            order: Vec::new(),
            restart_plan: Vec::new(),
            restarted: Vec::new(),
            nic_crash_plan: Vec::new(),
            nic_crashed: Vec::new(),
            nic_due: Vec::new(),
            chaos: None,
        }
    }

    /// The chaos mix's plan of overlapping faults ([`crate::chaos`]), drawn
    /// from the seed by [`Sim::set_owners`] when `cfg.nodes.chaos`; the
    /// cluster driver fires it.
    pub fn chaos_plan(&self) -> Option<ChaosPlan> {
        self.chaos
    }

    /// The configuration this driver runs.
    pub fn config(&self) -> SimConfig {
        self.cfg
    }

    /// Restarts not yet done: (virtual time, node).
    pub fn planned_restarts(&self) -> &[(Nanos, NodeId)] {
        &self.restart_plan
    }

    /// Restarts done so far: (node, crash time, restart time).
    pub fn restarted(&self) -> &[(NodeId, Nanos, Nanos)] {
        &self.restarted
    }

    /// The crashed nodes whose restart is due by now, each with a fresh
    /// endpoint on `net` ([`SimNetwork::restart`]): they are no longer
    /// crashed, so their components run from the next pass on. The caller
    /// must first give each such node fresh components (what a restarted
    /// process holds: nothing).
    pub fn take_restarts(&mut self, net: &SimNetwork) -> Vec<(NodeId, crate::SimTransport)> {
        let now = self.now;
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.restart_plan.len() {
            if self.restart_plan[i].0 > now {
                i += 1;
                continue;
            }
            let (_, node) = self.restart_plan.swap_remove(i);
            let Some(k) = self.crashed.iter().position(|&(n, _)| n == node) else {
                continue;
            };
            let (_, crashed_at) = self.crashed.swap_remove(k);
            if let Some(t) = net.restart(node, now) {
                self.restarted.push((node, crashed_at, now));
                out.push((node, t));
            }
        }
        out.sort_by_key(|&(n, _)| n);
        out
    }

    /// Current virtual time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Passes run so far.
    pub fn passes(&self) -> u64 {
        self.passes
    }

    /// Names the node of each component (`owners[i]` for the `i`-th of the
    /// slice later given to [`Sim::run_until`]) and draws the seeded node
    /// faults of `cfg.nodes` over those nodes: which nodes crash at which
    /// passes, and which one is slow. Without it node faults do nothing.
    pub fn set_owners(&mut self, owners: Vec<NodeId>) {
        let nodes = owners.iter().map(|&n| n as usize + 1).max().unwrap_or(0);
        self.owners = owners;
        let f = self.cfg.nodes;
        let crashes = (f.crashes.min(CRASHES_MAX) as usize).min(nodes.saturating_sub(1));
        let mut ids: Vec<NodeId> = (0..nodes as NodeId).collect();
        ids.shuffle(&mut self.rng);
        for &node in &ids[..crashes] {
            let lo = f.crash_pass_min;
            let pass = if f.crash_pass_max > lo {
                self.rng.gen_range(lo..=f.crash_pass_max)
            } else {
                lo
            };
            self.crash_plan.push((pass, node));
        }
        if f.slow_every >= 2 && crashes < nodes {
            self.slow = Some((ids[crashes], f.slow_every as u64));
        }
        // Drawn last, and only when asked for, so the other faults of a
        // seed stay what they were.
        for _ in 0..f.nic_crashes.min(CRASHES_MAX) {
            if nodes == 0 {
                break;
            }
            let node = self.rng.gen_range(0..nodes) as NodeId;
            let lo = f.nic_crash_pass_min;
            let pass = if f.nic_crash_pass_max > lo {
                self.rng.gen_range(lo..=f.nic_crash_pass_max)
            } else {
                lo
            };
            self.nic_crash_plan.push((pass, node));
        }
        if f.chaos {
            self.chaos = Some(ChaosPlan::draw(&mut self.rng));
        }
    }

    /// Schedules a crash of `node` at the start of pass `pass` (scripted).
    pub fn crash_at(&mut self, node: NodeId, pass: u64) {
        self.crash_plan.push((pass, node));
    }

    /// The crashes planned and not yet happened: (pass, node).
    pub fn planned_crashes(&self) -> &[(u64, NodeId)] {
        &self.crash_plan
    }

    /// Nodes crashed so far, with their virtual crash times.
    pub fn crashed(&self) -> &[(NodeId, Nanos)] {
        &self.crashed
    }

    /// The slow node and its period in passes, if any.
    pub fn slow_node(&self) -> Option<(NodeId, u64)> {
        self.slow
    }

    /// Crashes `node` now: its components stop and `net` drops everything
    /// to and from it.
    pub fn crash_now(&mut self, net: &SimNetwork, node: NodeId) {
        if self.crashed.iter().any(|&(n, _)| n == node) {
            return;
        }
        self.crashed.push((node, self.now));
        net.crash(node, self.now);
        let f = self.cfg.nodes;
        if f.restart_ns_max > 0 {
            let delay = if f.restart_ns_max > f.restart_ns_min {
                self.rng.gen_range(f.restart_ns_min..=f.restart_ns_max)
            } else {
                f.restart_ns_min
            };
            self.restart_plan
                .push((self.now.saturating_add(delay.max(1)), node));
        }
    }

    /// The planned NIC-runtime-only crashes whose pass has come, oldest
    /// first, each of a node not crashed: the caller restarts that node's
    /// NIC runtime now. Recorded in [`Sim::nic_crashed`].
    pub fn take_nic_crashes(&mut self) -> Vec<NodeId> {
        self.nic_crashes_came_due();
        let mut due = std::mem::take(&mut self.nic_due);
        due.sort_unstable();
        let mut out = Vec::new();
        for (_, node) in due {
            if !self.is_crashed(node) {
                self.nic_crashed.push((node, self.now));
                out.push(node);
            }
        }
        out
    }

    /// Moves the planned NIC crashes whose pass has come to the due list;
    /// returns whether any moved.
    fn nic_crashes_came_due(&mut self) -> bool {
        let pass = self.passes;
        let before = self.nic_due.len();
        let due = &mut self.nic_due;
        self.nic_crash_plan.retain(|&(p, n)| {
            let now = p <= pass;
            if now {
                due.push((p, n));
            }
            !now
        });
        self.nic_due.len() != before
    }

    /// NIC-runtime-only crashes handed out so far: (node, virtual time).
    pub fn nic_crashed(&self) -> &[(NodeId, Nanos)] {
        &self.nic_crashed
    }

    /// NIC-runtime-only crashes planned and not yet due: (pass, node).
    pub fn planned_nic_crashes(&self) -> &[(u64, NodeId)] {
        &self.nic_crash_plan
    }

    fn is_crashed(&self, node: NodeId) -> bool {
        self.crashed.iter().any(|&(n, _)| n == node)
    }

    /// Whether component `i` runs in this pass.
    fn runs(&self, i: usize) -> bool {
        let Some(&node) = self.owners.get(i) else {
            return true;
        };
        if self.is_crashed(node) {
            return false;
        }
        match self.slow {
            Some((slow, every)) if slow == node => self.passes.is_multiple_of(every),
            _ => true,
        }
    }

    fn apply_crash_plan(&mut self, net: &SimNetwork) {
        let pass = self.passes;
        let mut i = 0;
        while i < self.crash_plan.len() {
            if self.crash_plan[i].0 <= pass {
                let (_, node) = self.crash_plan.swap_remove(i);
                self.crash_now(net, node);
            } else {
                i += 1;
            }
        }
    }

    /// Runs exactly `passes` passes over `components` (see [`Sim::run_until`]).
    /// Use it when the stop condition needs the components themselves: run a
    /// slice, release the borrow, inspect, repeat.
    ///
    /// # Errors
    /// As [`Sim::run_until`].
    pub fn run_passes(
        &mut self,
        net: &SimNetwork,
        components: &mut [&mut dyn Component],
        passes: u64,
    ) -> Result<(), SimError> {
        let mut left = passes;
        let done = |_| {
            let stop = left == 0;
            left = left.saturating_sub(1);
            stop
        };
        self.run_until(net, components, done, passes + 1)
            .map(|_| ())
    }

    /// Runs passes over `components` (each live one once per pass, in a
    /// seeded random order) until `done(now)` holds, checked before every
    /// pass, or a planned NIC crash comes due (then it returns early, `Ok`,
    /// once per crash: the caller takes it with [`Sim::take_nic_crashes`];
    /// a caller that does not is not held up). Each pass first applies the crashes planned for it, then ticks
    /// `net`, then runs the components.
    ///
    /// # Errors
    /// [`SimError::Timeout`] after `max_passes` passes;
    /// [`SimError::ComponentStopped`] as soon as a live component reports a
    /// fault.
    pub fn run_until(
        &mut self,
        net: &SimNetwork,
        components: &mut [&mut dyn Component],
        mut done: impl FnMut(Nanos) -> bool,
        max_passes: u64,
    ) -> Result<Nanos, SimError> {
        if self.order.len() != components.len() {
            self.order = (0..components.len()).collect();
        }
        for _ in 0..max_passes {
            if done(self.now) {
                return Ok(self.now);
            }
            // A NIC crash came due: end the slice early (once) so the
            // caller restarts that NIC runtime at this very pass.
            if self.nic_crashes_came_due() {
                return Ok(self.now);
            }
            self.apply_crash_plan(net);
            net.tick(self.now);
            // Kept across calls, so the order depends on the seed and the
            // pass only, not on how the caller slices the run.
            self.order.shuffle(&mut self.rng);
            for k in 0..self.order.len() {
                let i = self.order[k];
                if !self.runs(i) {
                    continue;
                }
                components[i].run_iteration(self.now);
                if let Some(reason) = components[i].fault() {
                    return Err(SimError::ComponentStopped {
                        index: i,
                        now_ns: self.now,
                        reason,
                    });
                }
            }
            self.now += self.cfg.tick_ns;
            self.passes += 1;
        }
        Err(SimError::Timeout {
            passes: max_passes,
            now_ns: self.now,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::NodeFaults;

    /// Counts its iterations.
    struct Counter(u64);

    impl Component for Counter {
        fn run_iteration(&mut self, _now: Nanos) -> bool {
            self.0 += 1;
            true
        }
    }

    fn run(cfg: SimConfig, script: &[(NodeId, u64)], passes: u64) -> (Vec<u64>, Sim, SimNetwork) {
        let (net, _ends) = SimNetwork::new(3, cfg);
        let mut sim = Sim::new(cfg);
        sim.set_owners(vec![0, 0, 1, 1, 2, 2]);
        for &(node, pass) in script {
            sim.crash_at(node, pass);
        }
        let mut cs: Vec<Counter> = (0..6).map(|_| Counter(0)).collect();
        let mut refs: Vec<&mut dyn Component> =
            cs.iter_mut().map(|c| c as &mut dyn Component).collect();
        sim.run_passes(&net, &mut refs, passes).expect("runs");
        (cs.iter().map(|c| c.0).collect(), sim, net)
    }

    #[test]
    fn scripted_crash_stops_the_nodes_components() {
        let (counts, sim, net) = run(SimConfig::default(), &[(1, 40)], 100);
        assert_eq!(counts, [100, 100, 40, 40, 100, 100]);
        assert_eq!(sim.crashed(), &[(1, 40 * 200)]);
        assert!(net.is_crashed(1));
        assert!(net.trace().tail(5).contains("crash   node 1"));
    }

    #[test]
    fn seeded_crash_and_slow_node_follow_the_seed() {
        let cfg = SimConfig {
            seed: 21,
            nodes: NodeFaults {
                crashes: 1,
                crash_pass_min: 10,
                crash_pass_max: 50,
                slow_every: 4,
                ..NodeFaults::NONE
            },
            ..SimConfig::default()
        };
        let (counts, sim, _) = run(cfg, &[], 100);
        let (crashed, at) = sim.crashed()[0];
        let (slow, every) = sim.slow_node().expect("a slow node");
        assert_ne!(crashed, slow);
        assert_eq!(every, 4);
        let pass = at / cfg.tick_ns;
        assert!((10..=50).contains(&pass));
        assert_eq!(counts[crashed as usize * 2], pass);
        assert_eq!(counts[slow as usize * 2], 25, "one pass in 4");
        let (again, sim2, _) = run(cfg, &[], 100);
        assert_eq!(
            (counts, sim.crashed()),
            (again, sim2.crashed()),
            "same seed"
        );
    }

    #[test]
    fn nic_crashes_follow_the_seed_and_leave_the_other_faults_alone() {
        let base = SimConfig {
            seed: 21,
            nodes: NodeFaults {
                crashes: 1,
                crash_pass_min: 10,
                crash_pass_max: 50,
                ..NodeFaults::NONE
            },
            ..SimConfig::default()
        };
        let nic = SimConfig {
            nodes: NodeFaults {
                nic_crashes: 2,
                nic_crash_pass_min: 20,
                nic_crash_pass_max: 30,
                ..base.nodes
            },
            ..base
        };
        let (_, plain, _) = run(base, &[], 10);
        let (counts, mut sim, _) = run(nic, &[], 10);
        assert_eq!(plain.planned_crashes(), sim.planned_crashes());
        assert_eq!(counts, [10; 6], "a NIC crash stops nothing in the driver");
        assert_eq!(sim.planned_nic_crashes().len(), 2);
        assert!(sim.take_nic_crashes().is_empty(), "not due at pass 10");
        let (net, _ends) = SimNetwork::new(3, nic);
        let mut cs: Vec<Counter> = (0..6).map(|_| Counter(0)).collect();
        let mut refs: Vec<&mut dyn Component> =
            cs.iter_mut().map(|c| c as &mut dyn Component).collect();
        let mut taken = 0;
        while sim.passes() < 40 {
            // A slice ends early at the pass a NIC crash is due.
            sim.run_passes(&net, &mut refs, 40).expect("runs");
            let due = sim.take_nic_crashes();
            for _ in &due {
                assert!((20..=30).contains(&sim.passes()), "at its pass");
            }
            taken += due.len();
        }
        assert!(sim.planned_nic_crashes().is_empty());
        assert_eq!(sim.nic_crashed().len(), taken);
        assert!(taken <= 2, "a crashed node's NIC crash is skipped");
    }
}
