//! Finding and naming dependency cycles (Adya 1999 ch. 4; Elle §4.2).
//!
//! The graph's strongly connected components (iterative Tarjan) hold every
//! cycle. In each component of more than one transaction the checker reports
//! one short cycle, searching edge sets from the most specific anomaly to the
//! least, so a cycle is given the strongest name it deserves:
//!
//! 1. ww only (G0); 2. ww+wr (G1c); 3. one rw closed by a ww/wr path
//!    (G-single); 4. ww+wr+rw (G2-item); then 5–8, the same with real-time
//!    edges added (the `-realtime` variants, which plain serializability
//!    allows but strict serializability does not).
//!
//! A cycle is named by the edges it actually uses
//! ([`AnomalyKind::of_cycle`]). Searches are breadth-first, so cycles are
//! shortest through their start node. The single-rw search first tries the rw
//! edges whose ends share a component of the ww/wr (and rt) subgraph (a
//! closing path surely exists), then the others, at most
//! [`RW_EDGES_TRIED_MAX`] rw edges and [`CYCLE_SEARCH_VISITS_MAX`] node visits
//! per tier and component, so a huge component costs O(bound), not
//! O(rw edges x component). Past those bounds a cycle may be reported under a
//! weaker name (G2-item for a G-single), never missed: the last tier follows
//! all of the component's edges with no bound, and a component always has a
//! cycle in it.

use super::anomaly::{Anomaly, AnomalyKind, Sink, Step};
use super::graph::{self, Edge, EdgeKind, Graph, KindMask, Scratch};
use super::txn::Txn;
use std::collections::{HashMap, HashSet};

/// Most rw edges of one component tried as the single anti-dependency of a
/// G-single cycle, per tier.
pub const RW_EDGES_TRIED_MAX: usize = 1_024;

/// Most node visits of the breadth-first searches of one tier in one
/// component.
pub const CYCLE_SEARCH_VISITS_MAX: usize = 1 << 20;

use EdgeKind::{Realtime as Rt, Rw, Wr, Ww};

/// One tier of the search: the edge kinds followed, and whether the cycle
/// must be closed by exactly one rw edge.
struct Tier {
    mask: KindMask,
    single_rw: bool,
}

fn tiers() -> [Tier; 8] {
    let t = |kinds: &[EdgeKind], single_rw| Tier {
        mask: KindMask::of(kinds),
        single_rw,
    };
    [
        t(&[Ww], false),
        t(&[Ww, Wr], false),
        t(&[Ww, Wr], true),
        t(&[Ww, Wr, Rw], false),
        t(&[Ww, Rt], false),
        t(&[Ww, Wr, Rt], false),
        t(&[Ww, Wr, Rt], true),
        t(&[Ww, Wr, Rw, Rt], false),
    ]
}

/// Reports one named cycle per non-trivial strongly connected component of
/// `g` (transactions indexed as in `txns`). Returns the number of components.
pub fn report_cycles(g: &Graph, txns: &[Txn], sink: &mut Sink) -> usize {
    let mut s = Scratch::new(g.nodes());
    let all: Vec<u32> = (0..g.nodes() as u32).collect();
    let every = KindMask::of(&EdgeKind::ALL);
    let comps = graph::sccs(g, &all, &|_| true, every, &mut s);
    let mut comp_of = vec![u32::MAX; g.nodes()];
    for (c, nodes) in comps.iter().enumerate() {
        for &v in nodes {
            comp_of[v as usize] = c as u32;
        }
    }
    for (c, nodes) in comps.iter().enumerate() {
        let member = |v: u32| comp_of[v as usize] == c as u32;
        let found = find_cycle(g, nodes, &member, &mut s);
        debug_assert!(
            found.is_some(),
            "a strongly connected component has a cycle"
        );
        if let Some(cycle) = found {
            let kinds: Vec<EdgeKind> = cycle.iter().map(|e| e.kind).collect();
            let kind = AnomalyKind::of_cycle(&kinds);
            sink.push(kind, || anomaly(kind, &cycle, txns));
        }
    }
    comps.len()
}

/// The first cycle found in a component by the tiers in order.
fn find_cycle(
    g: &Graph,
    nodes: &[u32],
    member: &dyn Fn(u32) -> bool,
    s: &mut Scratch,
) -> Option<Vec<Edge>> {
    let all = tiers();
    let last = all.len() - 1;
    for (i, tier) in all.into_iter().enumerate() {
        // The last tier follows every edge of the component with no bound
        // (one O(component) search), so a component always gives a cycle.
        let mut budget = if i == last {
            usize::MAX
        } else {
            CYCLE_SEARCH_VISITS_MAX
        };
        let sub = graph::sccs(g, nodes, member, tier.mask, s);
        let found = if tier.single_rw {
            single_rw_cycle(g, nodes, member, &sub, tier.mask, &mut budget, s)
        } else {
            // Any cycle of the tier's edges: through a node of one of its
            // components, within that component.
            sub.first().and_then(|sub| {
                let set: HashSet<u32> = sub.iter().copied().collect();
                let within = |v: u32| set.contains(&v);
                graph::shortest_path(g, sub[0], sub[0], &within, tier.mask, &mut budget, s)
            })
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// A cycle made of one rw edge `a -> b` and a shortest `mask` path `b ->* a`
/// (`sub`: the components of the `mask` subgraph).
fn single_rw_cycle(
    g: &Graph,
    nodes: &[u32],
    member: &dyn Fn(u32) -> bool,
    sub: &[Vec<u32>],
    mask: KindMask,
    budget: &mut usize,
    s: &mut Scratch,
) -> Option<Vec<Edge>> {
    let sub_of: HashMap<u32, usize> = sub
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.iter().map(move |&v| (v, i)))
        .collect();
    let same_sub =
        |e: &Edge| matches!((sub_of.get(&e.from), sub_of.get(&e.to)), (Some(x), Some(y)) if x == y);
    let rws: Vec<Edge> = nodes
        .iter()
        .flat_map(|&v| g.out(v).iter())
        .filter(|e| e.kind == Rw && member(e.to))
        .copied()
        .collect();
    // Sure successes first (both ends in one component), searched within it.
    let sure = rws.iter().filter(|e| same_sub(e)).take(1);
    for rw in sure {
        let c = sub_of[&rw.from];
        let within = |v: u32| sub_of.get(&v) == Some(&c);
        let path = graph::shortest_path(g, rw.to, rw.from, &within, mask, budget, s);
        if let Some(path) = path {
            return Some([vec![*rw], path].concat());
        }
    }
    for rw in rws.iter().filter(|e| !same_sub(e)).take(RW_EDGES_TRIED_MAX) {
        let path = graph::shortest_path(g, rw.to, rw.from, member, mask, budget, s);
        if let Some(path) = path {
            return Some([vec![*rw], path].concat());
        }
        if *budget == 0 {
            break;
        }
    }
    None
}

/// The anomaly for a cycle of graph edges.
fn anomaly(kind: AnomalyKind, cycle: &[Edge], txns: &[Txn]) -> Anomaly {
    let ids: Vec<u32> = cycle.iter().map(|e| e.from).collect();
    let n = ids.len();
    let steps = (0..n)
        .map(|i| Step {
            from: i,
            to: (i + 1) % n,
            kind: cycle[i].kind,
            key: cycle[i].key,
        })
        .collect();
    let names: Vec<&str> = cycle.iter().map(|e| e.kind.name()).collect();
    Anomaly {
        kind,
        txns: ids.iter().map(|&t| txns[t as usize].clone()).collect(),
        steps,
        detail: format!("a cycle of {n} transactions ({})", names.join(", ")),
    }
}
