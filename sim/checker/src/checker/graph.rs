//! The dependency graph over transactions (Adya's direct serialization graph
//! plus real-time edges) and the two searches run on it: strongly connected
//! components by an iterative Tarjan (no recursion: histories are large) and
//! the shortest cycle through a node by breadth-first search, both restricted
//! to a set of edge kinds and a set of nodes.

use std::fmt;

/// The kind of a dependency edge `T1 -> T2` (Adya 1999 §3.1.4; Elle §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EdgeKind {
    /// Write-write: T2 installed the next version after T1's of some key.
    Ww,
    /// Write-read: T2 read a version T1 installed.
    Wr,
    /// Read-write (anti-dependency): T1 read a version T2 overwrote.
    Rw,
    /// Real-time: T1 completed (`ok`) before T2 was invoked.
    Realtime,
}

impl EdgeKind {
    /// Every kind, in the order a search prefers them (most specific first).
    pub const ALL: [EdgeKind; 4] = [EdgeKind::Ww, EdgeKind::Wr, EdgeKind::Rw, EdgeKind::Realtime];

    /// Short name: `ww`, `wr`, `rw`, `rt`.
    pub fn name(self) -> &'static str {
        match self {
            EdgeKind::Ww => "ww",
            EdgeKind::Wr => "wr",
            EdgeKind::Rw => "rw",
            EdgeKind::Realtime => "rt",
        }
    }

    /// This kind as a bit of a [`KindMask`].
    pub fn bit(self) -> KindMask {
        KindMask(1 << self as u8)
    }
}

impl fmt::Display for EdgeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of [`EdgeKind`]s a search may follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindMask(pub u8);

impl KindMask {
    /// The union of `kinds`.
    pub fn of(kinds: &[EdgeKind]) -> KindMask {
        KindMask(kinds.iter().fold(0, |m, k| m | k.bit().0))
    }

    /// Whether `kind` is in the set.
    pub fn has(self, kind: EdgeKind) -> bool {
        self.0 & kind.bit().0 != 0
    }
}

/// One edge; `key` is the key that gave it (`None` for real-time edges).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Edge {
    /// Source transaction (index into the checker's transaction list).
    pub from: u32,
    /// Target transaction.
    pub to: u32,
    /// Why `from` precedes `to`.
    pub kind: EdgeKind,
    /// The key of a ww/wr/rw edge.
    pub key: Option<u64>,
}

/// A graph in compressed sparse rows: edges sorted by (from, to, kind), one
/// edge kept per (from, to, kind), no self-edges.
#[derive(Debug, Default)]
pub struct Graph {
    nodes: usize,
    start: Vec<u32>,
    edges: Vec<Edge>,
}

/// Sentinel for "not visited" in the search arrays.
const NONE: u32 = u32::MAX;

impl Graph {
    /// Builds the graph over `nodes` transactions from `edges` (in any order,
    /// with duplicates and self-edges, which are dropped).
    pub fn new(nodes: usize, mut edges: Vec<Edge>) -> Graph {
        edges.retain(|e| e.from != e.to);
        edges.sort_unstable_by_key(|e| (e.from, e.to, e.kind));
        edges.dedup_by_key(|e| (e.from, e.to, e.kind));
        let mut start = vec![0u32; nodes + 1];
        for e in &edges {
            start[e.from as usize + 1] += 1;
        }
        for i in 0..nodes {
            start[i + 1] += start[i];
        }
        Graph {
            nodes,
            start,
            edges,
        }
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// All edges, sorted by (from, to, kind).
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }

    /// The edges out of `v`, sorted by (to, kind).
    pub fn out(&self, v: u32) -> &[Edge] {
        &self.edges[self.start[v as usize] as usize..self.start[v as usize + 1] as usize]
    }
}

/// Reusable per-node arrays for the searches; only touched entries are reset,
/// so many small searches on a large graph stay linear overall.
#[derive(Debug)]
pub struct Scratch {
    index: Vec<u32>,
    low: Vec<u32>,
    on_stack: Vec<bool>,
    parent: Vec<u32>,
    touched: Vec<u32>,
}

impl Scratch {
    /// Arrays for a graph of `nodes` nodes.
    pub fn new(nodes: usize) -> Scratch {
        Scratch {
            index: vec![NONE; nodes],
            low: vec![0; nodes],
            on_stack: vec![false; nodes],
            parent: vec![NONE; nodes],
            touched: Vec::new(),
        }
    }

    fn reset(&mut self) {
        for &v in &self.touched {
            self.index[v as usize] = NONE;
            self.on_stack[v as usize] = false;
            self.parent[v as usize] = NONE;
        }
        self.touched.clear();
    }
}

/// The strongly connected components of more than one node among `nodes`,
/// following only edges of a kind in `mask` between nodes for which `member`
/// holds. Iterative Tarjan: O(nodes + edges) time, no recursion.
pub fn sccs(
    g: &Graph,
    nodes: &[u32],
    member: &dyn Fn(u32) -> bool,
    mask: KindMask,
    s: &mut Scratch,
) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    let mut next_index = 0u32;
    let mut stack: Vec<u32> = Vec::new();
    // (node, position in its out-edges)
    let mut call: Vec<(u32, usize)> = Vec::new();
    for &root in nodes {
        if s.index[root as usize] != NONE {
            continue;
        }
        call.push((root, 0));
        visit(s, &mut stack, root, &mut next_index);
        while let Some(&mut (v, ref mut pos)) = call.last_mut() {
            let out_edges = g.out(v);
            let mut descended = false;
            while *pos < out_edges.len() {
                let e = out_edges[*pos];
                *pos += 1;
                let w = e.to;
                if !mask.has(e.kind) || !member(w) {
                    continue;
                }
                if s.index[w as usize] == NONE {
                    visit(s, &mut stack, w, &mut next_index);
                    call.push((w, 0));
                    descended = true;
                    break;
                } else if s.on_stack[w as usize] {
                    s.low[v as usize] = s.low[v as usize].min(s.index[w as usize]);
                }
            }
            if descended {
                continue;
            }
            call.pop();
            if let Some(&(u, _)) = call.last() {
                s.low[u as usize] = s.low[u as usize].min(s.low[v as usize]);
            }
            if s.low[v as usize] == s.index[v as usize] {
                let mut comp = Vec::new();
                loop {
                    let w = stack.pop().expect("Tarjan stack holds v");
                    s.on_stack[w as usize] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    out.push(comp);
                }
            }
        }
    }
    s.reset();
    out
}

fn visit(s: &mut Scratch, stack: &mut Vec<u32>, v: u32, next_index: &mut u32) {
    s.index[v as usize] = *next_index;
    s.low[v as usize] = *next_index;
    *next_index += 1;
    s.on_stack[v as usize] = true;
    s.touched.push(v);
    stack.push(v);
}

/// The shortest path from `from` to `to` (they may be equal: then a cycle of
/// at least one edge) following edges of a kind in `mask` between `member`
/// nodes; `None` if there is none or the search has used up `budget` (node
/// visits, decremented as it goes, shared by a series of searches). Between two nodes it follows the most specific kind
/// (ww before wr before rw before rt). O(visited nodes + their edges).
pub fn shortest_path(
    g: &Graph,
    from: u32,
    to: u32,
    member: &dyn Fn(u32) -> bool,
    mask: KindMask,
    budget: &mut usize,
    s: &mut Scratch,
) -> Option<Vec<Edge>> {
    let mut queue = std::collections::VecDeque::new();
    let mut via: Vec<(u32, Edge)> = Vec::new();
    queue.push_back(from);
    let mut found = None;
    'bfs: while let Some(v) = queue.pop_front() {
        for e in g.out(v) {
            if !mask.has(e.kind) || !member(e.to) || s.parent[e.to as usize] != NONE {
                continue;
            }
            s.parent[e.to as usize] = via.len() as u32;
            s.touched.push(e.to);
            via.push((v, *e));
            if e.to == to {
                found = Some(via.len() - 1);
                break 'bfs;
            }
            if *budget == 0 {
                break 'bfs;
            }
            *budget -= 1;
            queue.push_back(e.to);
        }
    }
    let path = found.map(|mut i| {
        let mut path = Vec::new();
        loop {
            let (prev, e) = via[i];
            path.push(e);
            if prev == from {
                break;
            }
            i = s.parent[prev as usize] as usize;
        }
        path.reverse();
        path
    });
    s.reset();
    path
}
