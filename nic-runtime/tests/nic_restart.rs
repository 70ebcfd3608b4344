//! A NIC runtime that restarts alone (the NIC restart; `recovery::restart`), over
//! whole runtimes on the in-memory network (`restart_rig`): four nodes,
//! replication 2, node 2 restarted with a new incarnation while
//! transactions commit.

use restart_rig::*;
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::{Key, TxId};
use splitkv_nic::runtime::Availability;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use support::key_on;

mod restart_rig;
mod support;

#[test]
fn a_restarted_nic_takes_back_its_peers_locks_before_it_serves() {
    let (mut nodes, mut now, k) = t1_held_on_its_way_to_node_3();
    for _ in 0..20 {
        step_all(&mut nodes, &mut now);
    }
    assert!(nodes[0].told.is_empty(), "T1 waits for node 3's LOG ack");
    let t1 = nodes[2].nic.index().lock_holder(&k).unwrap();

    restart(&mut nodes[2], now, 2);
    assert_eq!(nodes[2].nic.index().locks_held(), 0, "locks are volatile");
    assert!(matches!(
        nodes[2].nic.availability(),
        Availability::Rebuilding { .. }
    ));
    until(&mut nodes, &mut now, "node 2 rebuilt", |n| {
        n[2].nic.availability() == Availability::Serving
    });
    assert_eq!(
        nodes[2].nic.index().lock_holder(&k),
        Some(t1),
        "T1's lock came back from its coordinator"
    );
    let s = nodes[2].nic.rebuild_stats();
    assert_eq!(
        (s.restarts, s.rebuilds_done, s.locks_reinstalled),
        (1, 1, 1)
    );

    // The rebuilt lock is served: a conflicting writer is refused.
    nodes[1].submit(2, &[k]);
    until(&mut nodes, &mut now, "T2's outcome", |n| {
        n[1].told.contains_key(&2)
    });
    assert_eq!(nodes[1].told[&2], TxStatus::LockConflict);

    // T1 goes on and commits at both replicas; then k is free.
    nodes[0].blocked.store(0, Ordering::Relaxed);
    until(&mut nodes, &mut now, "T1's outcome", |n| {
        n[0].told.contains_key(&1)
    });
    assert_eq!(nodes[0].told[&1], TxStatus::Committed);
    until(&mut nodes, &mut now, "T1's COMMIT records", |n| {
        n[2].host.commits.contains(&t1) && n[3].host.commits.contains(&t1)
    });
    nodes[1].submit(3, &[k]);
    until(&mut nodes, &mut now, "T3's outcome", |n| {
        n[1].told.contains_key(&3)
    });
    assert_eq!(nodes[1].told[&3], TxStatus::Committed);
    until(&mut nodes, &mut now, "no lock left", |n| {
        n.iter().all(|x| x.nic.index().locks_held() == 0)
    });
}

#[test]
fn an_unavailable_node_refuses_execute_rather_than_serve_without_locks() {
    let p = placement();
    let k = key_on(&p, &[2, 3]);
    let mut nodes = cluster();
    let mut now = 0;
    for _ in 0..5 {
        step_all(&mut nodes, &mut now);
    }
    // Node 3 is silent toward node 2: node 2 waits for its report.
    nodes[3].blocked.store(1 << 2, Ordering::Relaxed);
    restart(&mut nodes[2], now, 2);
    nodes[1].submit(1, &[k]);
    until(&mut nodes, &mut now, "the outcome", |n| {
        n[1].told.contains_key(&1)
    });
    assert_eq!(nodes[1].told[&1], TxStatus::Unavailable);
    assert!(
        nodes[2].nic.rebuild_stats().requests_refused
            + nodes[2].nic.rebuild_stats().answered_refused
            >= 1
    );
    assert_eq!(
        nodes[2].nic.availability(),
        Availability::Rebuilding {
            waiting_for: 1 << 3
        }
    );
    nodes[3].blocked.store(0, Ordering::Relaxed);
    until(&mut nodes, &mut now, "node 2 rebuilt", |n| {
        n[2].nic.availability() == Availability::Serving
    });
    nodes[1].submit(2, &[k]);
    until(&mut nodes, &mut now, "the outcome", |n| {
        n[1].told.contains_key(&2)
    });
    assert_eq!(nodes[1].told[&2], TxStatus::Committed);
    assert!(
        nodes[2].nic.restart_nic(now, 2).is_err(),
        "incarnation 2 is the current one"
    );
}

/// A run where every node submits transactions writing two of `keys`, node
/// 2 restarting at iteration `at`; returns the nodes once every outcome is in.
fn run_with_restart(at: usize, seed: u64) -> Vec<Node> {
    let keys: Vec<Key> = (0..12).map(|i| Key::new(0, i)).collect();
    let mut nodes = cluster();
    let mut now = 0;
    let mut rng = seed | 1;
    let mut next = |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    const PER_NODE: u64 = 24;
    const OUTSTANDING_MAX: u64 = 3;
    let mut submitted = [0u64; NODES];
    for i in 0..ITERATIONS_MAX {
        if i == at {
            restart(&mut nodes[2], now, 2);
        }
        for (id, n) in nodes.iter_mut().enumerate() {
            let open = submitted[id] - n.told.len() as u64;
            if submitted[id] < PER_NODE && open < OUTSTANDING_MAX {
                let a = keys[next(12) as usize];
                let b = keys[next(12) as usize];
                let req = (id as u64) << 32 | submitted[id];
                let both = [a, b];
                n.submit(req, if a == b { &both[..1] } else { &both[..] });
                submitted[id] += 1;
            }
        }
        step_all(&mut nodes, &mut now);
        let all_told = nodes.iter().all(|n| n.told.len() as u64 == PER_NODE);
        if i > at && all_told && nodes[2].nic.availability() == Availability::Serving {
            for _ in 0..50 {
                step_all(&mut nodes, &mut now);
            }
            return nodes;
        }
    }
    for (i, n) in nodes.iter().enumerate() {
        eprintln!(
            "node {i}: told {} of {}, {:?} {:?}\n  {:?} inflight {}",
            n.told.len(),
            submitted[i],
            n.nic.availability(),
            n.nic.rebuild_stats(),
            n.nic.stats().coordinator,
            n.nic.stats().clients.requests,
        );
    }
    panic!("restart at {at}: not every outcome within {ITERATIONS_MAX} iterations");
}

/// The checks of a run: a transaction told committed has its writes decided
/// commit at every replica; one told aborted is committed nowhere; no
/// replica decides a transaction differently from another; no LOG record
/// stays undecided; no lock stays held.
fn check(nodes: &[Node], at: usize) {
    let p = placement();
    let mut decided: HashMap<TxId, bool> = HashMap::new();
    for (id, n) in nodes.iter().enumerate() {
        for tx in n.host.logs.keys() {
            let c = n.host.commits.contains(tx);
            assert!(
                c || n.host.aborts.contains(tx),
                "restart at {at}: tx {tx:#x} undecided at node {id}"
            );
            let d = *decided.entry(*tx).or_insert(c);
            assert_eq!(d, c, "restart at {at}: tx {tx:#x} decided both ways");
        }
        assert_eq!(
            n.nic.index().locks_held(),
            0,
            "restart at {at}: node {id} holds locks"
        );
    }
    for n in nodes {
        for (req, status) in &n.told {
            let marker = req.to_le_bytes();
            // The transactions (at any replica) that wrote this request's marker.
            let txs: HashSet<TxId> = nodes
                .iter()
                .flat_map(|m| m.host.logs.iter())
                .filter(|(_, w)| w.iter().any(|(_, v)| v[..] == marker))
                .map(|(tx, _)| *tx)
                .collect();
            let committed = txs.iter().any(|tx| decided.get(tx) == Some(&true));
            match status {
                TxStatus::Committed => {
                    assert!(
                        committed,
                        "restart at {at}: request {req:#x} told committed, not committed"
                    );
                    for m in nodes
                        .iter()
                        .flat_map(|m| m.host.logs.iter())
                        .filter(|(tx, _)| txs.contains(tx))
                    {
                        for (k, _) in m.1 {
                            for r in 0..NODES as u16 {
                                if p.is_replica(r, k) {
                                    let hn = &nodes[r as usize].host;
                                    assert!(
                                        txs.iter().any(|tx| hn.commits.contains(tx)
                                            && hn.logs[tx].iter().any(|(kk, _)| kk == k)),
                                        "restart at {at}: request {req:#x}'s write lost at node {r}"
                                    );
                                }
                            }
                        }
                    }
                }
                TxStatus::Unknown => {}
                _ => assert!(
                    !committed,
                    "restart at {at}: request {req:#x} told {status:?}, committed"
                ),
            }
        }
    }
}

#[test]
fn a_restart_in_the_middle_of_commits_loses_no_committed_write_and_leaves_no_lock() {
    let mut unknown = 0;
    let mut reinstalled = 0;
    for (i, at) in (3..60).step_by(4).enumerate() {
        let nodes = run_with_restart(at, 0x5EED + i as u64);
        check(&nodes, at);
        let s = nodes[2].nic.rebuild_stats();
        assert_eq!((s.restarts, s.rebuilds_done), (1, 1), "restart at {at}");
        unknown += s.outcomes_unknown;
        reinstalled += s.locks_reinstalled;
    }
    // The restarts hit transactions in flight.
    assert!(
        unknown > 0 && reinstalled > 0,
        "unknown {unknown}, reinstalled {reinstalled}"
    );
}

/// The restarted node's new transactions are numbered above its lost ones
/// (the peers' reports carry the newest generation their per-slot fences
/// saw, `Coordinator::number_above`): none is refused as late, so no client
/// hears `Rejected`. Numbered from generation 1 again, they were refused
/// until they passed the old ones (100–400 `Rejected` outcomes per
/// restart in the simulator's nic-crash seeds).
#[test]
fn a_restarted_nic_numbers_its_new_transactions_above_the_lost_ones() {
    let mut after = 0;
    for (i, at) in (20..60).step_by(8).enumerate() {
        let nodes = run_with_restart(at, 0xF3_0CE + i as u64);
        check(&nodes, at);
        for (id, n) in nodes.iter().enumerate() {
            let rejected = n.told.values().filter(|s| **s == TxStatus::Rejected);
            assert_eq!(rejected.count(), 0, "restart at {at}: node {id}");
        }
        after += nodes[2]
            .told
            .values()
            .filter(|s| **s == TxStatus::Committed)
            .count();
    }
    assert!(after > 0, "the restarted node committed");
}
