//! Several clients per node (L5 §3: one ring pair per application thread): the
//! NIC runtime polls their request rings fairly, routes every outcome to the
//! client that asked, and holds back a client's requests rather than drop its
//! outcomes when its outcome ring is full.

mod support;

use proptest::prelude::*;
use splitkv_host::{build_node, Client, HostWorker, NodeConfig};
use splitkv_layout::host_nic::TxStatus;
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::runtime::{CLIENT_OUTCOMES_QUEUED_MAX, REQUESTS_PER_ITERATION_MAX};
use splitkv_nic::{NicRuntime, Placement};
use std::collections::BTreeSet;
use support::{registry, NOOP};

/// A one-node cluster with `clients` clients and request/outcome rings of
/// `ring_bytes` each.
fn node(clients: usize, ring_bytes: usize) -> (NicRuntime, HostWorker, Vec<Client>) {
    let t = mem_network(1).pop().unwrap();
    let mut cfg = NodeConfig::new(0, Placement::new(1, 1).unwrap(), 1024, 8);
    cfg.clients = clients;
    cfg.app_ring_bytes = ring_bytes;
    build_node(&cfg, registry(), Box::new(t))
        .expect("node")
        .into_clients()
}

fn run(nic: &mut NicRuntime, worker: &mut HostWorker, passes: usize) {
    for i in 0..passes {
        nic.run_iteration(i as u64);
        worker.run_iteration(i as u64);
    }
}

/// Request id `i` of client `c`.
fn tag(c: usize, i: u64) -> u64 {
    ((c as u64) << 32) | i
}

#[test]
fn several_clients_each_get_exactly_their_outcomes() {
    const PER_CLIENT: u64 = 300;
    let (mut nic, mut worker, mut clients) = node(4, 1 << 12);
    assert_eq!(nic.clients(), 4);
    let mut sent = [0u64; 4];
    let mut got: Vec<Vec<u64>> = vec![Vec::new(); 4];
    for _ in 0..10_000 {
        for (c, client) in clients.iter_mut().enumerate() {
            while sent[c] < PER_CLIENT && client.submit(tag(c, sent[c]), NOOP, b"").is_ok() {
                sent[c] += 1;
            }
        }
        run(&mut nic, &mut worker, 1);
        for (c, client) in clients.iter_mut().enumerate() {
            client
                .poll(usize::MAX, |o| {
                    assert_eq!(o.status, TxStatus::Committed);
                    got[c].push(o.req_id);
                })
                .unwrap();
        }
        if got.iter().all(|g| g.len() as u64 == PER_CLIENT) {
            break;
        }
    }
    for (c, g) in got.iter().enumerate() {
        let want: BTreeSet<u64> = (0..PER_CLIENT).map(|i| tag(c, i)).collect();
        let have: BTreeSet<u64> = g.iter().copied().collect();
        assert_eq!(g.len(), have.len(), "client {c} got an outcome twice");
        assert_eq!(have, want, "client {c} got exactly its own outcomes");
    }
    let s = nic.stats().clients;
    assert_eq!(s.requests, 4 * PER_CLIENT);
    assert_eq!(s.outcomes[TxStatus::Committed as usize], 4 * PER_CLIENT);
    assert_eq!(s.outcomes_undeliverable, 0);
}

#[test]
fn a_flooding_client_does_not_starve_another() {
    let (mut nic, mut worker, mut clients) = node(2, 1 << 16);
    let mut flood = 0u64;
    while clients[0].submit(tag(0, flood), NOOP, b"").is_ok() {
        flood += 1;
    }
    assert!(
        flood > 2 * REQUESTS_PER_ITERATION_MAX as u64,
        "the ring holds several iterations' worth"
    );
    clients[1].submit(tag(1, 0), NOOP, b"").unwrap();
    run(&mut nic, &mut worker, 1);
    let mut got = Vec::new();
    clients[1].poll(8, |o| got.push(o.req_id)).unwrap();
    assert_eq!(got, vec![tag(1, 0)], "served in the first iteration");
    let mut first = 0;
    clients[0].poll(usize::MAX, |_| first += 1).unwrap();
    assert_eq!(
        first,
        REQUESTS_PER_ITERATION_MAX - 1,
        "the flood got the rest of the iteration"
    );
}

#[test]
fn a_full_outcome_ring_holds_requests_back_and_drops_no_outcome() {
    // Outcome rings of 4 KiB hold ~170 empty outcomes: far fewer than
    // CLIENT_OUTCOMES_QUEUED_MAX, so the backlog on the NIC fills to its bound.
    let total = CLIENT_OUTCOMES_QUEUED_MAX as u64 + 600;
    let (mut nic, mut worker, mut clients) = node(2, 1 << 12);
    let mut sent = 0u64;
    for _ in 0..20_000 {
        while sent < total && clients[0].submit(tag(0, sent), NOOP, b"").is_ok() {
            sent += 1;
        }
        run(&mut nic, &mut worker, 1);
        if sent == total {
            break;
        }
        if nic.stats().clients.requests_held_back > 0 {
            break;
        }
    }
    run(&mut nic, &mut worker, 50);
    let s = nic.stats().clients;
    assert!(s.requests_held_back > 0, "requests were held back: {s:?}");
    assert!(s.outcomes_queued > 0);
    let taken = s.requests;
    assert!(
        taken <= CLIENT_OUTCOMES_QUEUED_MAX as u64 + 200,
        "backlog bounded: {taken} taken"
    );
    assert!(!nic.is_quiescent(), "outcomes wait on the NIC");
    // The other client is still served while the first one's outcomes wait.
    clients[1].submit(tag(1, 0), NOOP, b"").unwrap();
    run(&mut nic, &mut worker, 2);
    assert_eq!(clients[1].poll(8, |_| {}).unwrap(), 1);
    // Now the application polls: every outcome arrives, in order, exactly once.
    let mut got = Vec::new();
    for _ in 0..20_000 {
        while sent < total && clients[0].submit(tag(0, sent), NOOP, b"").is_ok() {
            sent += 1;
        }
        clients[0].poll(usize::MAX, |o| got.push(o.req_id)).unwrap();
        run(&mut nic, &mut worker, 1);
        if got.len() as u64 == total {
            break;
        }
    }
    let want: Vec<u64> = (0..total).map(|i| tag(0, i)).collect();
    assert_eq!(got, want);
    assert!(nic.is_quiescent());
    assert_eq!(nic.stats().clients.outcomes_undeliverable, 0);
}

#[test]
fn call_refuses_to_run_while_submitted_outcomes_await_poll() {
    let (mut nic, mut worker, mut clients) = node(1, 1 << 12);
    clients[0].submit(1, NOOP, b"").unwrap();
    assert_eq!(clients[0].outstanding(), 1);
    assert_eq!(
        clients[0].call(NOOP, b"").unwrap_err(),
        splitkv_host::ClientError::Outstanding(1)
    );
    run(&mut nic, &mut worker, 3);
    assert_eq!(clients[0].poll(8, |_| {}).unwrap(), 1);
    assert_eq!(clients[0].outstanding(), 0);
}

#[derive(Debug, Clone)]
enum Op {
    /// Client submits this many requests (as many as its ring takes).
    Submit(usize, u8),
    /// Client polls at most this many outcomes.
    Poll(usize, u8),
    /// The node runs this many iterations.
    Run(u8),
}

fn op(clients: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..clients, 1..40u8).prop_map(|(c, n)| Op::Submit(c, n)),
        (0..clients, 0..40u8).prop_map(|(c, n)| Op::Poll(c, n)),
        (1..4u8).prop_map(Op::Run),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Whatever the interleaving of submissions, polls and iterations, and
    /// with small rings that fill, every request's outcome reaches the client
    /// that submitted it, exactly once.
    #[test]
    fn every_outcome_reaches_its_submitter_exactly_once(
        ops in (1..5usize).prop_flat_map(|n| (Just(n), prop::collection::vec(op(n), 1..120)))
    ) {
        let (n, ops) = ops;
        let (mut nic, mut worker, mut clients) = node(n, 1 << 12);
        let mut sent = vec![0u64; n];
        let mut got: Vec<Vec<u64>> = vec![Vec::new(); n];
        let mut now = 0;
        for o in ops {
            match o {
                Op::Submit(c, k) => {
                    for _ in 0..k {
                        // Counter (id % 3): writes that conflict now and then.
                        let (proc_id, args) = if sent[c] % 2 == 0 {
                            (NOOP, Vec::new())
                        } else {
                            (support::INCR, (sent[c] % 3).to_le_bytes().to_vec())
                        };
                        if clients[c].submit(tag(c, sent[c]), proc_id, &args).is_err() {
                            break;
                        }
                        sent[c] += 1;
                    }
                }
                Op::Poll(c, k) => {
                    clients[c].poll(k as usize, |o| got[c].push(o.req_id)).unwrap();
                }
                Op::Run(k) => {
                    for _ in 0..k {
                        nic.run_iteration(now);
                        worker.run_iteration(now);
                        now += 1;
                    }
                }
            }
        }
        for _ in 0..10_000 {
            for (c, client) in clients.iter_mut().enumerate() {
                client.poll(usize::MAX, |o| got[c].push(o.req_id)).unwrap();
            }
            if nic.is_quiescent() && (0..n).all(|c| got[c].len() as u64 == sent[c]) {
                break;
            }
            nic.run_iteration(now);
            worker.run_iteration(now);
            now += 1;
        }
        for c in 0..n {
            let mut have = got[c].clone();
            have.sort_unstable();
            let want: Vec<u64> = (0..sent[c]).map(|i| tag(c, i)).collect();
            prop_assert_eq!(have, want, "client {}", c);
        }
        prop_assert_eq!(nic.stats().clients.outcomes_undeliverable, 0);
    }
}
