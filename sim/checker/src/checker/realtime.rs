//! Real-time edges for strict serializability: `T1 -> T2` when T1 completed
//! (`ok`) before T2 was invoked (Herlihy & Wing's real-time order; Elle §4.3).
//!
//! All n² such pairs are not needed, only a graph with the same transitive
//! closure. As in Elle's `realtime-graph`, events are swept in time order
//! keeping a *frontier*: the committed transactions that completed most
//! recently, none of which completed before another's invoke. An invoke takes
//! an edge from every frontier member; a completion joins the frontier and
//! evicts the members its own invoke took edges from (they reach everything
//! later through it). Each invoke takes at most as many edges as transactions
//! were concurrent, so the sweep is O(n log n + n·concurrency).
//!
//! Only committed transactions have outgoing edges: an indeterminate one may
//! have committed at any time after its invoke, so no completion time bounds
//! it; failed ones are outside the graph. Times from different machines are
//! only comparable as far as their clocks are synchronised: real-time edges
//! across machines need synchronised clocks, or they may be wrong.

use super::graph::{Edge, EdgeKind};
use super::txn::{HistoryOutcome, Txn};

/// Real-time edges among the transactions for which `in_graph` holds (a
/// transitive reduction of "completed before invoked"). Equal times give no
/// edge: T1 must complete strictly before T2 is invoked.
pub fn realtime_edges(txns: &[Txn], in_graph: &[bool]) -> Vec<Edge> {
    // (time, 0 = invoke / 1 = completion, txn): invokes sort first at a tie.
    let mut events: Vec<(u64, u8, u32)> = Vec::with_capacity(2 * txns.len());
    for (i, t) in txns.iter().enumerate() {
        if !in_graph[i] {
            continue;
        }
        events.push((t.invoke_ns, 0, i as u32));
        if let (HistoryOutcome::Committed, Some(done)) = (t.outcome, t.complete_ns) {
            events.push((done, 1, i as u32));
        }
    }
    events.sort_unstable();
    let mut frontier: Vec<u32> = Vec::new();
    // Per transaction: the frontier it took edges from, until it completes.
    let mut preds: Vec<Vec<u32>> = vec![Vec::new(); txns.len()];
    let mut edges = Vec::new();
    for (_, what, t) in events {
        if what == 0 {
            for &p in &frontier {
                edges.push(Edge {
                    from: p,
                    to: t,
                    kind: EdgeKind::Realtime,
                    key: None,
                });
            }
            if txns[t as usize].outcome == HistoryOutcome::Committed {
                preds[t as usize] = frontier.clone();
            }
        } else {
            let before = std::mem::take(&mut preds[t as usize]);
            frontier.retain(|f| !before.contains(f));
            frontier.push(t);
        }
    }
    edges
}
