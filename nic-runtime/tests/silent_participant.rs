//! Whole runtimes with a participant that never answers (crash
//! recovery's timeouts): three nodes over the in-memory network, node 2
//! crashed from the start (never polled). Node 0 coordinates; its session
//! with node 2 falls silent and suspects it. When node 2 was to lock (before
//! any LOG) the transaction ends `Unavailable` at once, well before the
//! phase deadline, with no lock left at the live primary, node 1. When node
//! 2 was to log, a suspicion is not enough to commit without its LOG: at
//! the deadline the transaction aborts in two rounds, and since node 2
//! never acknowledges the ABORT, the client hears the abort and the lock at
//! node 1 is released only once a configuration excludes node 2.

use splitkv_layout::host_nic::{HostToNic, NicToHost, TxRequest, TxStatus};
use splitkv_layout::Key;
use splitkv_nic::membership::Configuration;
use splitkv_nic::net::mem::{mem_network, MemTransport};
use splitkv_nic::net::session::SessionConfig;
use splitkv_nic::net::stack::StackConfig;
use splitkv_nic::protocol::coordinator::phase_deadline_ns;
use splitkv_nic::{Nanos, Placement, ProcedureRegistry};
use std::sync::Arc;
use support::coordinator::WriteKeys;
use support::{key_on, node_runtime, LoneRuntime};

mod support;

const SILENCE_NS: Nanos = 1_000_000;
const STEP_NS: Nanos = 5_000;
/// Steps run after an outcome, for its ABORT or COMMIT to arrive.
const STEPS_AFTER: u64 = 20;
/// Bound on the rounds of [`STEPS_AFTER`] steps a recovery may take.
const RECOVERY_STEPS_MAX: usize = 1_000;

type Node = LoneRuntime;

fn node(id: u16, placement: Placement, transport: MemTransport, keys: Vec<Key>) -> Node {
    let mut procedures = ProcedureRegistry::new();
    procedures.register(Arc::new(WriteKeys(keys)));
    let net = StackConfig {
        session: SessionConfig {
            silence_ns: SILENCE_NS,
            ..SessionConfig::default()
        },
        ..StackConfig::default()
    };
    node_runtime(id, placement, transport, 64, net, procedures)
}

/// Runs one transaction of `keys` coordinated by node 0 while node 2 is
/// down, excluding node 2 at `exclude_at` (ns) if given; returns its
/// status, when it came (ns), and nodes 0 and 1 at the end.
fn run(
    keys: impl Fn(&Placement) -> Vec<Key>,
    exclude_at: Option<Nanos>,
) -> (TxStatus, Nanos, Node, Node) {
    let placement = Placement::new(3, 2).unwrap();
    let keys = keys(&placement);
    let mut net = mem_network(3);
    let _down = net.pop().unwrap(); // node 2: never polled
    let mut n1 = node(1, placement, net.pop().unwrap(), keys.clone());
    let mut n0 = node(0, placement, net.pop().unwrap(), keys);
    let mut buf = Vec::new();
    HostToNic::TxRequest(TxRequest {
        req_id: 5,
        procedure: 0,
        args: b"",
    })
    .encode(&mut buf);
    n0.requests.try_push(&buf).unwrap();
    let deadline = phase_deadline_ns(SILENCE_NS);
    let limit = exclude_at.map_or(2 * deadline, |t| t + deadline);
    let mut now = 0;
    let mut seen = None;
    while now < limit && seen.is_none() {
        now += STEP_NS;
        if exclude_at == Some(now) {
            assert_eq!(n1.nic.index().locks_held(), 1, "round 1 unlocks nothing");
            let config = Configuration {
                epoch: 2,
                live: 0b011,
                ..Default::default()
            };
            n0.nic.apply_configuration(&config);
            n1.nic.apply_configuration(&config);
        }
        step(&mut n0, now);
        step(&mut n1, now);
        if n0.outcomes.try_pop(&mut buf).unwrap() {
            let NicToHost::TxOutcome(o) = NicToHost::decode(&buf).unwrap();
            assert_eq!(o.req_id, 5);
            seen = Some(o.status);
        }
    }
    let status = seen.expect("an outcome within the bound");
    let at = now;
    // The ABORT or COMMIT reaches node 1.
    steps(&mut n0, &mut n1, &mut now);
    assert_eq!(n0.nic.failed_peers(), 1 << 2);
    (status, at, n0, n1)
}

/// Runs both live nodes for a few steps after `now`.
fn steps(n0: &mut Node, n1: &mut Node, now: &mut Nanos) {
    for _ in 0..STEPS_AFTER {
        *now += STEP_NS;
        step(n0, *now);
        step(n1, *now);
    }
}

/// One NIC iteration of `n`, then a stand-in for its host worker: drains the
/// host log and acknowledges it as applied (recovery waits for that).
fn step(n: &mut Node, now: Nanos) {
    n.nic.run_iteration(now);
    support::drain_host_log(&mut n.log, &mut n.acks, |_| {});
}

#[test]
fn a_down_primary_ends_the_transaction_unavailable_and_frees_the_live_locks() {
    let (status, at, _, n1) = run(|p| vec![key_on(p, &[1, 2]), key_on(p, &[2, 0])], None);
    assert_eq!(status, TxStatus::Unavailable);
    assert!(
        at < phase_deadline_ns(SILENCE_NS),
        "ended by the failure, not the deadline: {at}"
    );
    assert_eq!(
        n1.nic.index().locks_held(),
        0,
        "no lock left at the live primary"
    );
}

#[test]
fn a_down_backup_aborts_in_two_rounds_and_its_exclusion_reports_and_unlocks() {
    // Node 2 is excluded after three phase deadlines: the Log phase was
    // overdue after one, and round 1's ABORT to node 2 resent since.
    let exclude_at = 3 * phase_deadline_ns(SILENCE_NS);
    let (status, at, mut n0, mut n1) = run(|p| vec![key_on(p, &[1, 2])], Some(exclude_at));
    assert_eq!(status, TxStatus::Unavailable);
    assert!(
        at >= exclude_at,
        "no report before every LOG holder acknowledged or was excluded: {at}"
    );
    let mut now = at + STEPS_AFTER * STEP_NS; // where `run` left off
    steps(&mut n0, &mut n1, &mut now);
    assert_eq!(
        n1.nic.index().locks_held(),
        0,
        "round 2 released the lock at the live primary"
    );
    let c = n0.nic.stats().coordinator;
    assert_eq!(
        (c.committed, c.aborts_after_log, c.deadlines.log_overdue),
        (0, 1, 1)
    );
    assert!(c.abort_log_resends >= 1, "{c:?}");
    assert_eq!(c.abort_log_acks, 1, "node 1 acknowledged, node 2 never");
    assert_eq!(c.deadlines.unknown, 0, "a decision, never unknown");
    // Recovery over the two survivors resumes service.
    for _ in 0..RECOVERY_STEPS_MAX {
        if !n0.nic.recovering() && !n1.nic.recovering() {
            break;
        }
        steps(&mut n0, &mut n1, &mut now);
    }
    assert!(
        !n0.nic.recovering() && !n1.nic.recovering(),
        "recovery resumed"
    );
    let d = n1.nic.stats().coordinator.deadlines;
    assert_eq!(d.unknown, 0, "node 1 coordinated nothing");
}
