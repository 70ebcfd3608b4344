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
//! shortest through their start node; the single-rw search tries at most
//! [`RW_EDGES_TRIED_MAX`] rw edges per component, and every search visits at
//! most [`CYCLE_SEARCH_VISITS_MAX`] nodes — past those bounds a cycle may be
//! reported under a weaker name (G2-item for a G-single), never missed: the
//! last tier's edge set is the component's own.

use super::anomaly::{Anomaly, AnomalyKind, Sink, Step};
use super::graph::{self, Edge, EdgeKind, Graph, KindMask, Scratch};
use super::txn::Txn;

/// Most rw edges of one component tried as the single anti-dependency of a
/// G-single cycle, per tier.
pub const RW_EDGES_TRIED_MAX: usize = 1_024;

/// Most nodes one breadth-first cycle search visits.
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
        if let Some(cycle) = find_cycle(g, nodes, &member, &mut s) {
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
    for tier in tiers() {
        let found = if tier.single_rw {
            single_rw_cycle(g, nodes, member, tier.mask, s)
        } else {
            let sub = graph::sccs(g, nodes, member, tier.mask, s);
            sub.first().and_then(|sub| {
                let set: std::collections::HashSet<u32> = sub.iter().copied().collect();
                let within = |v: u32| set.contains(&v);
                graph::shortest_path(
                    g,
                    sub[0],
                    sub[0],
                    &within,
                    tier.mask,
                    CYCLE_SEARCH_VISITS_MAX,
                    s,
                )
            })
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// A cycle made of one rw edge `a -> b` and a shortest `mask` path `b ->* a`.
fn single_rw_cycle(
    g: &Graph,
    nodes: &[u32],
    member: &dyn Fn(u32) -> bool,
    mask: KindMask,
    s: &mut Scratch,
) -> Option<Vec<Edge>> {
    let rws = nodes
        .iter()
        .flat_map(|&v| g.out(v).iter())
        .filter(|e| e.kind == Rw && member(e.to))
        .take(RW_EDGES_TRIED_MAX);
    for rw in rws {
        let path =
            graph::shortest_path(g, rw.to, rw.from, member, mask, CYCLE_SEARCH_VISITS_MAX, s);
        if let Some(mut path) = path {
            path.insert(0, *rw);
            return Some(path);
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
