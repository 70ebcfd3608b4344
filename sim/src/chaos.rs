//! The chaos mix's overlapping faults: NIC-runtime-only restarts
//! placed *inside* a recovery epoch and inside a re-replication copy, and a
//! second node crash during a copy, on top of the rejoin mix's crash and
//! restart. The seed draws a [`ChaosPlan`] ([`crate::Sim::chaos_plan`]);
//! the cluster driver ([`crate::cluster`]) fires each part when
//! the state it waits for is first seen (it knows the NIC runtimes; the
//! driver does not), so the overlap happens on every seed rather than by
//! chance.
//!
//! # How many crashes are correct
//! Replication degree `R = f + 1`: a shard survives as long as one of its
//! *caught-up* replicas lives. A node being copied is not a replica yet
//! (it holds only part of the shard), so it adds nothing to the tolerance,
//! and its crash costs nothing either. The bound is therefore on the nodes
//! that are crashed, restarted and not yet caught up, or copying, counted
//! together: at most `f` at any time ([`second_crash_victim`]). With 3 nodes
//! and `R = 3` (the CLI's default) a second crash during a copy is allowed
//! (the copying node plus the crashed one: 2 = f) and hits a source or the
//! other replica; with `R = 2` (f = 1) only the copying node itself may
//! crash (the copy starts over once it restarts).

use rand::Rng;
use splitkv_nic::Nanos;

/// Longest delay from the first recovery epoch seen to the NIC restart
/// placed inside it (ns of virtual time): a recovery epoch lasts some 12 µs
/// in the simulator (sim/README.md), so most draws land inside it.
pub const CHAOS_RECOVERY_DELAY_NS_MAX: Nanos = 10_000;
/// Longest delay from the first copy seen to the NIC restart placed inside
/// it (ns): a copy of a few hundred objects per shard takes tens of µs.
pub const CHAOS_COPY_DELAY_NS_MAX: Nanos = 20_000;
/// Longest delay from the first copy seen to the second node crash (ns).
pub const CHAOS_SECOND_CRASH_DELAY_NS_MAX: Nanos = 30_000;

/// Whose NIC runtime restarts during a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyRole {
    /// A node streaming a shard to the copying node (a primary).
    Source,
    /// The node being copied.
    Copying,
}

/// The overlapping faults of one chaos seed (see the module docs); every
/// delay counts from the moment the cluster driver first sees the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChaosPlan {
    /// NIC restart of a node in a recovery epoch, this long after the first
    /// recovery epoch is seen (ns).
    pub recovery_nic_delay_ns: Nanos,
    /// Whose NIC restarts during the first copy.
    pub copy_role: CopyRole,
    /// That NIC restart, this long after the first copy is seen (ns).
    pub copy_nic_delay_ns: Nanos,
    /// A second node crash, this long after the first copy is seen (ns),
    /// if the seed draws one (one seed in two); its victim obeys
    /// [`second_crash_victim`].
    pub second_crash_delay_ns: Option<Nanos>,
    /// Drawn number that picks the second crash's victim among those
    /// allowed.
    pub second_crash_pick: u32,
}

impl ChaosPlan {
    /// Draws a plan from `rng` (the driver's seeded generator).
    pub fn draw(rng: &mut impl Rng) -> ChaosPlan {
        let recovery_nic_delay_ns = rng.gen_range(0..=CHAOS_RECOVERY_DELAY_NS_MAX);
        let copy_role = if rng.gen_bool(0.5) {
            CopyRole::Source
        } else {
            CopyRole::Copying
        };
        let copy_nic_delay_ns = rng.gen_range(0..=CHAOS_COPY_DELAY_NS_MAX);
        let second = rng.gen_bool(0.5);
        let delay = rng.gen_range(0..=CHAOS_SECOND_CRASH_DELAY_NS_MAX);
        let second_crash_pick = rng.gen();
        ChaosPlan {
            recovery_nic_delay_ns,
            copy_role,
            copy_nic_delay_ns,
            second_crash_delay_ns: second.then_some(delay),
            second_crash_pick,
        }
    }
}

/// The node a second crash may hit, or `None` if none may (see the module
/// docs): among `nodes` nodes with replication degree `replication`, `down`
/// (crashed, or restarted and not yet a replica) and `copying` (being
/// copied) as masks by node id. A node outside both may crash only if the
/// nodes then down or copying stay within `f = replication - 1`; a copying
/// node may always crash (it is no replica). `pick` chooses among the
/// allowed nodes (ascending).
pub fn second_crash_victim(
    nodes: usize,
    replication: usize,
    down: u32,
    copying: u32,
    pick: u32,
) -> Option<u16> {
    let f = replication.saturating_sub(1) as u32;
    let not_replicas = (down | copying).count_ones();
    let allowed: Vec<u16> = (0..nodes.min(32) as u16)
        .filter(|&n| down & (1 << n) == 0)
        .filter(|&n| copying & (1 << n) != 0 || not_replicas < f)
        .collect();
    if allowed.is_empty() {
        return None;
    }
    Some(allowed[pick as usize % allowed.len()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn the_second_crash_stays_within_f() {
        // 3 nodes, R = 3 (f = 2): node 0 copying; nodes 1 and 2 may crash.
        for pick in 0..4 {
            let v = second_crash_victim(3, 3, 0, 0b001, pick).unwrap();
            assert!(v <= 2);
        }
        assert_eq!(second_crash_victim(3, 3, 0, 0b001, 1), Some(1));
        // R = 2 (f = 1): only the copying node itself.
        for pick in 0..4 {
            assert_eq!(second_crash_victim(3, 2, 0, 0b001, pick), Some(0));
        }
        // Already f nodes not replicas and nothing copying: none.
        assert_eq!(second_crash_victim(3, 3, 0b011, 0, 0), None);
        // A crashed node is never picked again.
        assert_eq!(second_crash_victim(3, 3, 0b010, 0b001, 0), Some(0));
    }

    #[test]
    fn plans_follow_the_seed_and_stay_in_their_bounds() {
        let draw = |seed| ChaosPlan::draw(&mut Xoshiro256PlusPlus::seed_from_u64(seed));
        assert_eq!(draw(5), draw(5));
        let plans: Vec<ChaosPlan> = (0..64).map(draw).collect();
        assert!(plans.iter().all(|p| {
            p.recovery_nic_delay_ns <= CHAOS_RECOVERY_DELAY_NS_MAX
                && p.copy_nic_delay_ns <= CHAOS_COPY_DELAY_NS_MAX
                && p.second_crash_delay_ns
                    .is_none_or(|d| d <= CHAOS_SECOND_CRASH_DELAY_NS_MAX)
        }));
        assert!(plans.iter().any(|p| p.second_crash_delay_ns.is_some()));
        assert!(plans.iter().any(|p| p.second_crash_delay_ns.is_none()));
        assert!(plans.iter().any(|p| p.copy_role == CopyRole::Source));
        assert!(plans.iter().any(|p| p.copy_role == CopyRole::Copying));
    }
}
