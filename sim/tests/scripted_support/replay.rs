//! What the TLC trace replays share (`tlc_trace_replay.rs` for Xenic OCC,
//! `dnl4_trace_replay.rs` for Dnl-4): the spec's names for the cluster's
//! nodes, keys and transactions, one request delivered and its answer
//! awaited on held links, and the comparison of a spec state with the
//! code's state.
//!
//! Names: n1, n2, n3 are nodes 0, 1, 2; the keys follow the specs' ring
//! placement (`SplitkvCommon.tla` `RingPrimary`, `RingBackups`): k1 has
//! replicas {n1, n2}, k2 {n2, n3}, k3 {n3, n1}, the primary first. Values
//! are the names of the transactions that wrote them ([`INIT`] for none).
//!
//! What [`Replay::compare`] compares, after every step: each entry of `rec`
//! (a node's host-log records as (t, kind, keys)), `lock` (lock holder per
//! node and key), `val` (stored value per node and key: NIC cache or host
//! table, the newer), `nr` (who lowered READABLE, Dnl specs only: the NIC
//! index's readable map) and `reported` (the client's outcome). The code
//! acts at once on steps that need no held link (its own node's requests,
//! the coordinator's `<Step>Done`), so it may be ahead of the spec: each
//! entry must equal its value in this state or a later one of the window,
//! and a node's records must hold this state's and only the window's last
//! state's.

use super::packets::{is, Msg};
use super::tlc::{State, Value};
use super::{key_on, Cluster, INIT};
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::log_record::LogKind;
use splitkv_layout::wire::{MsgKind, NodeId};
use splitkv_layout::{Key, TxId};
use splitkv_nic::CommitProtocol;
use std::collections::{BTreeMap, BTreeSet};

/// Passes after each step (200 ns each), for what the code does by itself.
pub const STEP_PASSES: usize = 100;
/// Most passes to wait for an answer to appear on its link.
pub const ANSWER_PASSES_MAX: usize = 2_000;
/// The spec's node names, by node id.
pub const NODE_NAMES: [&str; 3] = ["n1", "n2", "n3"];

/// One transaction of a spec's workload, submitted as [`super::Rmw`].
#[derive(Debug, Clone, Copy)]
pub struct SpecTxn {
    /// Its name (`t1`); its number is the client's request id.
    pub name: &'static str,
    /// Its coordinator's name.
    pub coord: &'static str,
    /// Its keys, the written ones first: the order of its result.
    pub keys: &'static [&'static str],
    /// How many of `keys` it writes.
    pub written: usize,
}

/// How the spec names the records a LOG entry of the code holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogNames {
    /// Xenic OCC: a LOG record (`LOG`).
    Xenic,
    /// Dnl: a pending value at the key's primary came with a Lock (`LOCK`),
    /// at a backup with a Replicate (`REPL`).
    Dnl,
}

/// The node id of spec name `name`.
pub fn node_id(name: &str) -> NodeId {
    NODE_NAMES.iter().position(|n| *n == name).expect("a node") as NodeId
}

/// A node's records as the spec writes them: (t, kind, keys).
pub type SpecRecords = BTreeSet<(String, String, BTreeSet<String>)>;

/// The scripted cluster and the spec's names for its parts.
pub struct Replay {
    /// The cluster, every link held.
    pub c: Cluster,
    /// The workload's keys by spec name.
    pub keys: BTreeMap<&'static str, Key>,
    /// The workload.
    pub txns: &'static [SpecTxn],
    /// How LOG entries are named.
    pub log_names: LogNames,
    /// (transaction, node) pairs whose Get was delivered (one Get per node
    /// carries every key read there; the spec reads key by key).
    gets: BTreeSet<(&'static str, NodeId)>,
}

impl Replay {
    /// Three nodes running `protocol` with every link held, the keys
    /// `key_names` placed as the ring says.
    pub fn new(
        seed: u64,
        protocol: CommitProtocol,
        txns: &'static [SpecTxn],
        key_names: &[&'static str],
        log_names: LogNames,
    ) -> Replay {
        let c = Cluster::with_protocol(seed, protocol);
        let keys = key_names
            .iter()
            .map(|k| {
                let i: NodeId = k[1..].parse::<NodeId>().expect("a key named k<i>") - 1;
                (*k, key_on(&c.placement, &[i, (i + 1) % 3]))
            })
            .collect();
        c.hold_all();
        Replay {
            c,
            keys,
            txns,
            log_names,
            gets: BTreeSet::new(),
        }
    }

    /// The workload's transaction `name`.
    pub fn txn(&self, name: &str) -> &'static SpecTxn {
        self.txns
            .iter()
            .find(|t| t.name == name)
            .expect("a transaction")
    }

    /// The coordinator of `name`.
    pub fn coord(&self, name: &str) -> NodeId {
        node_id(self.txn(name).coord)
    }

    /// The transaction a tx id belongs to (one per coordinator here).
    pub fn txn_of(&self, tx_id: TxId) -> &'static str {
        let c = tx_id.coordinator();
        self.txns
            .iter()
            .find(|t| node_id(t.coord) == c)
            .expect("a coordinator of the workload")
            .name
    }

    /// The spec name of `k`.
    pub fn key_name(&self, k: &Key) -> &'static str {
        self.keys
            .iter()
            .find(|(_, v)| *v == k)
            .expect("a workload key")
            .0
    }

    /// The keys of `t`, written ones first.
    pub fn keys_of(&self, t: &str) -> Vec<Key> {
        self.txn(t).keys.iter().map(|k| self.keys[k]).collect()
    }

    /// Submits `t` at its coordinator (request id: its number).
    pub fn submit(&mut self, t: &str) {
        let keys = self.keys_of(t);
        let spec = self.txn(t);
        let req = t[1..].parse().expect("a transaction named t<i>");
        self.c
            .submit_reading(self.coord(t), req, t, spec.written, &keys);
    }

    /// Spec step `step`: `t`'s Get reaches `k`'s primary and is answered,
    /// unless that node already answered t's Get (or is the coordinator).
    pub fn read(&mut self, step: usize, t: &str, k: &str) {
        let t = self.txn(t).name;
        let (coord, n) = (self.coord(t), self.c.placement.primary(&self.keys[k]));
        if n != coord && self.gets.insert((t, n)) {
            self.exchange(step, coord, n, MsgKind::Get, MsgKind::GetResp);
        }
    }

    /// Delivers `req` from `coord` to `n`, waits for and delivers the
    /// answer `ans`; panics (naming spec state `step`) if either never
    /// comes, or if any other protocol message is delivered on the way.
    pub fn exchange(&mut self, step: usize, coord: NodeId, n: NodeId, req: MsgKind, ans: MsgKind) {
        let only = |msgs: Vec<Msg>, kind| {
            for m in msgs {
                assert!(
                    is(&m, kind, coord),
                    "state {step}: delivering {kind:?} also delivered {m:?}, a step the trace does not take"
                );
            }
        };
        let sent = self.c.deliver_through(coord, n, |m| is(m, req, coord));
        only(
            sent.unwrap_or_else(|| panic!("state {step}: node {coord} never sent {req:?} to {n}")),
            req,
        );
        let answered = self.c.run_until(ANSWER_PASSES_MAX, |c| {
            c.held(n, coord)
                .iter()
                .any(|p| p.1.iter().any(|m| is(m, ans, coord)))
        });
        assert!(answered, "state {step}: node {n} never answered {req:?}");
        only(
            self.c
                .deliver_through(n, coord, |m| is(m, ans, coord))
                .unwrap(),
            ans,
        );
    }

    /// Node `n`'s host-log records as the spec names them. A decision's
    /// keys are its transaction's keys of pending values at this node.
    pub fn code_rec(&self, n: NodeId) -> SpecRecords {
        let recs = &self.c.nodes[n as usize].tap.records;
        recs.iter()
            .map(|r| {
                let keys: BTreeSet<String> = recs
                    .iter()
                    .filter(|l| l.tx_id == r.tx_id && l.kind == LogKind::Log)
                    .flat_map(|l| l.writes.iter().map(|w| self.key_name(&w.0).to_string()))
                    .collect();
                let at_primary = r
                    .writes
                    .first()
                    .is_some_and(|w| self.c.placement.primary(&w.0) == n);
                let kind = match (r.kind, self.log_names) {
                    (LogKind::Log, LogNames::Xenic) => "LOG",
                    (LogKind::Log, LogNames::Dnl) if at_primary => "LOCK",
                    (LogKind::Log, LogNames::Dnl) => "REPL",
                    (LogKind::Commit, _) => "COMMIT",
                    (LogKind::Abort, _) => "ABORT",
                    (LogKind::Lock, _) => "LOCK",
                    (LogKind::Repl, _) => "REPL",
                };
                let keys = if r.kind == LogKind::Log {
                    r.writes
                        .iter()
                        .map(|w| self.key_name(&w.0).to_string())
                        .collect()
                } else {
                    keys
                };
                (self.txn_of(r.tx_id).to_string(), kind.to_string(), keys)
            })
            .collect()
    }

    /// Who holds `k`'s lock at `n` (`none`).
    pub fn code_lock(&self, n: NodeId, k: &str) -> String {
        self.c
            .lock_holder(n, &self.keys[k])
            .map_or("none".to_string(), |t| self.txn_of(t).to_string())
    }

    /// Who lowered `k`'s READABLE at `n` (`none`: readable).
    pub fn code_nr(&self, n: NodeId, k: &str) -> String {
        self.c.nodes[n as usize]
            .nic
            .index()
            .unreadable_by(&self.keys[k])
            .map_or("none".to_string(), |t| self.txn_of(t).to_string())
    }

    /// The value `n` stores for `k` ([`INIT`] for none).
    pub fn code_val(&self, n: NodeId, k: &str) -> String {
        self.c
            .stored(n, &self.keys[k])
            .map_or(INIT.to_string(), |v| {
                String::from_utf8_lossy(&v).into_owned()
            })
    }

    /// The client's outcome of `t`, if reported.
    pub fn outcome(&self, t: &str) -> Option<&(TxStatus, Vec<u8>)> {
        let req: u64 = t[1..].parse().unwrap();
        self.c.outcomes.get(&(self.coord(t), req))
    }

    /// The client's outcome of `t` as the spec's `reported` names it.
    pub fn code_reported(&self, t: &str) -> String {
        match self.outcome(t) {
            None => "none".into(),
            Some((TxStatus::Committed, _)) => "commit".into(),
            Some((TxStatus::Unknown, _)) => "unknown".into(),
            Some(_) => "abort".into(),
        }
    }

    /// Compares state `ahead[0]` with the code (module docs): each entry
    /// must equal its value in one of the states `ahead`, and each node's
    /// records must hold `ahead[0]`'s and only the last state's.
    pub fn compare(&self, ahead: &[State]) {
        let cur = &ahead[0];
        let at = cur.number;
        let check = |what: String, code: String, f: &dyn Fn(&State) -> &Value| {
            let spec: Vec<&str> = ahead.iter().map(|s| f(s).str()).collect();
            assert!(
                spec.contains(&code.as_str()),
                "state {at}: {what} is {code:?} in the code, {:?} in the spec (from this state on)",
                spec[0]
            );
        };
        let dnl = cur.vars.contains_key("nr");
        for n in NODE_NAMES {
            let id = node_id(n);
            let code = self.code_rec(id);
            let now = spec_rec(cur.var("rec").at(n));
            let last = spec_rec(ahead.last().unwrap().var("rec").at(n));
            assert!(
                now.is_subset(&code) && code.is_subset(&last),
                "state {at}: rec[{n}] is {code:?} in the code, {now:?} in the spec"
            );
            for k in self.keys.keys().copied() {
                check(format!("lock[{n}][{k}]"), self.code_lock(id, k), &|s| {
                    s.var("lock").at(n).at(k)
                });
                check(format!("val[{n}][{k}]"), self.code_val(id, k), &|s| {
                    s.var("val").at(n).at(k)
                });
                if dnl {
                    check(format!("nr[{n}][{k}]"), self.code_nr(id, k), &|s| {
                        s.var("nr").at(n).at(k)
                    });
                }
            }
        }
        for t in self.txns.iter().map(|t| t.name) {
            check(format!("reported[{t}]"), self.code_reported(t), &|s| {
                s.var("reported").at(t)
            });
        }
    }

    /// `obs` of every transaction reported committed: what it read.
    pub fn compare_reads(&self, s: &State) {
        for txn in self.txns {
            let Some((TxStatus::Committed, result)) = self.outcome(txn.name) else {
                continue;
            };
            let read: Vec<String> = String::from_utf8_lossy(result)
                .split(',')
                .map(String::from)
                .collect();
            assert_eq!(
                read.len(),
                txn.keys.len(),
                "{}: one value per key",
                txn.name
            );
            for (k, got) in txn.keys.iter().zip(read) {
                assert_eq!(
                    got,
                    s.var("obs").at(txn.name).at(k).str(),
                    "state {}: obs[{}][{k}]",
                    s.number,
                    txn.name
                );
            }
        }
    }

    /// The one transaction whose entry of `var` differs between the states.
    pub fn changed_txn(&self, prev: &State, cur: &State, var: &str) -> &'static str {
        let changed: Vec<&'static str> = self
            .txns
            .iter()
            .map(|t| t.name)
            .filter(|t| prev.var(var).at(t) != cur.var(var).at(t))
            .collect();
        assert_eq!(
            changed.len(),
            1,
            "state {}: {var} changed for {changed:?}",
            cur.number
        );
        changed[0]
    }
}

/// The records of a spec `rec[n]` value.
pub fn spec_rec(v: &Value) -> SpecRecords {
    v.set()
        .iter()
        .map(|r| {
            let keys = r
                .at("keys")
                .set()
                .iter()
                .map(|k| k.str().to_string())
                .collect();
            (
                r.at("t").str().to_string(),
                r.at("kind").str().to_string(),
                keys,
            )
        })
        .collect()
}

/// The names in a set of strings.
pub fn names(v: &Value) -> BTreeSet<String> {
    v.set().iter().map(|x| x.str().to_string()).collect()
}

/// The one node `acked[t]` gained from `prev` to `cur`.
pub fn added_node(prev: &State, cur: &State, t: &str) -> NodeId {
    let added: Vec<String> = names(cur.var("acked").at(t))
        .difference(&names(prev.var("acked").at(t)))
        .cloned()
        .collect();
    assert_eq!(
        added.len(),
        1,
        "state {}: acked[{t}] grew by {added:?}",
        cur.number
    );
    node_id(&added[0])
}

/// The one record added to some `rec[n]` from `prev` to `cur`: (n, t).
pub fn added_record(prev: &State, cur: &State) -> (NodeId, String) {
    let mut added = Vec::new();
    for n in NODE_NAMES {
        let before = spec_rec(prev.var("rec").at(n));
        for r in spec_rec(cur.var("rec").at(n)).difference(&before) {
            added.push((node_id(n), r.0.clone()));
        }
    }
    assert_eq!(
        added.len(),
        1,
        "state {}: records added {added:?}",
        cur.number
    );
    added.remove(0)
}

/// The one (t, k) whose `obs[t][k]` changed from `prev` to `cur`.
pub fn changed_read(prev: &State, cur: &State) -> (String, String) {
    let mut changed = Vec::new();
    let (Value::Rec(p), Value::Rec(c)) = (prev.var("obs"), cur.var("obs")) else {
        panic!("state {}: obs is not a function", cur.number);
    };
    for (t, reads) in c {
        let Value::Rec(reads) = reads else {
            panic!("state {}: obs[{t}] is not a function", cur.number);
        };
        for (k, v) in reads {
            if p[t].at(k) != v {
                changed.push((t.clone(), k.clone()));
            }
        }
    }
    assert_eq!(
        changed.len(),
        1,
        "state {}: reads changed {changed:?}",
        cur.number
    );
    changed.remove(0)
}
