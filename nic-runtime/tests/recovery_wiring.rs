//! Crash recovery wired into whole runtimes: three nodes over the
//! in-memory network with replication 2; node 2 is cut off (never polled).
//! The survivors take a configuration without it, run a recovery epoch
//! through the stack (`MsgKind::Recovery` messages: evidence to the leader,
//! node 0; decisions; applied; resume), start no transaction meanwhile, and
//! then serve again.

use splitkv_layout::host_nic::{HostToNic, NicToHost, TxRequest, TxStatus};
use splitkv_layout::log_record::{LogKind, LogRecords};
use splitkv_layout::ring::{RingConsumer, RingProducer};
use splitkv_layout::{Key, TxId};
use splitkv_nic::membership::Configuration;
use splitkv_nic::net::mem::{mem_network, MemTransport};
use splitkv_nic::net::stack::StackConfig;
use splitkv_nic::recovery::RecoveryPhase;
use splitkv_nic::{Nanos, NicRuntime, Placement, ProcedureRegistry};
use std::sync::Arc;
use support::coordinator::WriteKeys;
use support::{key_on, node_runtime};

mod support;

const STEP_NS: Nanos = 5_000;
/// Iterations a recovery epoch may take here (a few message round trips).
const RECOVERY_ITERATIONS_MAX: usize = 200;
/// Iterations a transaction may take here.
const TX_ITERATIONS_MAX: usize = 400;

struct Node {
    nic: NicRuntime,
    requests: RingProducer,
    outcomes: RingConsumer,
    log: RingConsumer,
    acks: RingProducer,
    /// Decision records seen in the host log, in order: (kind, tx_id).
    decisions: Vec<(LogKind, TxId)>,
}

impl Node {
    /// One NIC iteration, then a stand-in for the host worker: drains the
    /// host log and acknowledges it as applied (recovery waits for that
    /// before it answers).
    fn step(&mut self, now: Nanos) {
        self.nic.run_iteration(now);
        let decisions = &mut self.decisions;
        support::drain_host_log(&mut self.log, &mut self.acks, |entry| {
            for r in LogRecords::new(entry) {
                let r = r.unwrap();
                if r.kind != LogKind::Log {
                    decisions.push((r.kind, r.tx_id));
                }
            }
        });
    }
}

fn node(id: u16, placement: Placement, transport: MemTransport, keys: Vec<Key>) -> Node {
    let mut procedures = ProcedureRegistry::new();
    procedures.register(Arc::new(WriteKeys(keys)));
    let support::LoneRuntime {
        nic,
        log,
        acks,
        requests,
        outcomes,
    } = node_runtime(
        id,
        placement,
        transport,
        64,
        StackConfig::default(),
        procedures,
    );
    Node {
        nic,
        requests,
        outcomes,
        log,
        acks,
        decisions: Vec::new(),
    }
}

fn submit(n: &mut Node, req_id: u64) {
    let mut buf = Vec::new();
    HostToNic::TxRequest(TxRequest {
        req_id,
        procedure: 0,
        args: b"",
    })
    .encode(&mut buf);
    n.requests.try_push(&buf).unwrap();
}

/// Steps nodes 0 and 1 until node `at` (0 or 1) has an outcome, at most
/// [`TX_ITERATIONS_MAX`] steps; returns it.
fn until_outcome(
    n0: &mut Node,
    n1: &mut Node,
    now: &mut Nanos,
    at: u16,
) -> Option<(u64, TxStatus)> {
    for _ in 0..TX_ITERATIONS_MAX {
        *now += STEP_NS;
        n0.step(*now);
        n1.step(*now);
        let o = outcome(if at == 0 { &mut *n0 } else { &mut *n1 });
        if o.is_some() {
            return o;
        }
    }
    None
}

/// Steps nodes 0 and 1 `count` times.
fn steps(n0: &mut Node, n1: &mut Node, now: &mut Nanos, count: usize) {
    for _ in 0..count {
        *now += STEP_NS;
        n0.step(*now);
        n1.step(*now);
    }
}

fn outcome(n: &mut Node) -> Option<(u64, TxStatus)> {
    let mut buf = Vec::new();
    if !n.outcomes.try_pop(&mut buf).unwrap() {
        return None;
    }
    let NicToHost::TxOutcome(o) = NicToHost::decode(&buf).unwrap();
    Some((o.req_id, o.status))
}

/// Nodes 0 and 1 (node 2 cut off), their transactions writing a key
/// replicated on exactly nodes 0 and 1.
fn survivors() -> (Node, Node) {
    survivors_writing_on(&[0, 1])
}

/// Runs both nodes until neither recovers any more; returns the time.
fn recover(n0: &mut Node, n1: &mut Node, mut now: Nanos) -> Nanos {
    for _ in 0..RECOVERY_ITERATIONS_MAX {
        if !n0.nic.recovering() && !n1.nic.recovering() {
            return now;
        }
        now += STEP_NS;
        n0.step(now);
        n1.step(now);
    }
    panic!("recovery did not resume within {RECOVERY_ITERATIONS_MAX} iterations");
}

#[test]
fn survivors_recover_through_the_stack_and_resume() {
    let (mut n0, mut n1) = survivors();
    let config = Configuration::initial(3, 2).without(1 << 2);
    n0.nic.apply_configuration(&config);
    n1.nic.apply_configuration(&config);
    assert_eq!(n0.nic.recovery_refusal(), None);
    assert!(n0.nic.recovering() && n1.nic.recovering());
    assert_eq!(n0.nic.recovery().phase(), RecoveryPhase::Collecting);
    assert_eq!(n1.nic.recovery().phase(), RecoveryPhase::AwaitingDecisions);
    recover(&mut n0, &mut n1, 0);
    for n in [&n0, &n1] {
        assert_eq!(n.nic.recovery().phase(), RecoveryPhase::Serving);
        assert_eq!(n.nic.recovery().epoch(), config.epoch);
        let s = n.nic.recovery_stats();
        assert_eq!((s.epochs_begun, s.epochs_resumed), (1, 1));
        assert!(s.messages_sent >= 1 && s.messages_received >= 1, "{s:?}");
        assert_eq!(s.send_failed + s.messages_bad + s.inbox_dropped, 0);
    }
    // Leader: one Evidence in, one Applied in; Decisions and Resume out.
    assert_eq!(n0.nic.recovery_stats().messages_received, 2);
    assert_eq!(n0.nic.recovery_stats().messages_sent, 2);
    assert_eq!(n0.nic.stats().bad_packets, 0);
}

#[test]
fn no_transaction_starts_while_recovering_and_they_commit_after() {
    let (mut n0, mut n1) = survivors();
    let config = Configuration::initial(3, 2).without(1 << 2);
    n0.nic.apply_configuration(&config);
    n1.nic.apply_configuration(&config);
    submit(&mut n0, 7);
    // Only the leader runs: it waits for node 1's evidence, paused.
    let mut now = 0;
    for _ in 0..20 {
        now += STEP_NS;
        n0.step(now);
    }
    assert!(n0.nic.recovering());
    assert_eq!(n0.nic.recovery_stats().paused_iterations, 20);
    assert_eq!(n0.nic.stats().clients.requests, 0, "the request waits");
    assert_eq!(outcome(&mut n0), None);
    now = recover(&mut n0, &mut n1, now);
    let seen = until_outcome(&mut n0, &mut n1, &mut now, 0);
    assert_eq!(seen, Some((7, TxStatus::Committed)));
    steps(&mut n0, &mut n1, &mut now, 20);
    assert_eq!(n0.nic.index().locks_held(), 0);
    assert_eq!(n1.nic.index().locks_held(), 0);
}

#[test]
fn a_configuration_without_failures_does_not_pause() {
    let (mut n0, _n1) = survivors();
    n0.nic.apply_configuration(&Configuration::initial(3, 2));
    assert!(!n0.nic.recovering());
    assert_eq!(n0.nic.recovery_stats().epochs_begun, 0);
}

/// Nodes 0 and 1 (node 2 cut off), their transactions writing a key
/// replicated on exactly nodes `replicas` (primary first).
fn survivors_writing_on(replicas: &[u16]) -> (Node, Node) {
    let (n0, n1, _cut_off) = nodes_writing_on(replicas);
    (n0, n1)
}

/// Nodes 0, 1 and 2 of 3 (replication 2), their transactions writing a key
/// replicated on exactly nodes `replicas` (primary first).
fn nodes_writing_on(replicas: &[u16]) -> (Node, Node, Node) {
    let placement = Placement::new(3, 2).unwrap();
    let keys = vec![key_on(&placement, replicas)];
    let mut net = mem_network(3);
    let n2 = node(2, placement, net.pop().unwrap(), keys.clone());
    let n1 = node(1, placement, net.pop().unwrap(), keys.clone());
    let n0 = node(0, placement, net.pop().unwrap(), keys);
    (n0, n1, n2)
}

#[test]
fn the_coordinators_transaction_in_flight_is_evidence_and_gets_a_decision() {
    let (mut n0, mut n1) = survivors_writing_on(&[1, 2]);
    submit(&mut n0, 9);
    let mut now = 0;
    // The transaction logs at node 1 and waits for node 2's LOG ack.
    steps(&mut n0, &mut n1, &mut now, 50);
    assert_eq!(n0.nic.stats().coordinator.started, 1);
    assert!(!n0.nic.is_quiescent(), "the transaction is in flight");
    let config = Configuration::initial(3, 2).without(1 << 2);
    n0.nic.apply_configuration(&config);
    n1.nic.apply_configuration(&config);
    recover(&mut n0, &mut n1, now);
    // Every live replica of its one written shard (node 1) holds the LOG:
    // the coordinator moved to COMMIT, reported that, and the leader
    // decided commit.
    let a = n0.nic.recovery_actions();
    assert_eq!((a.finished_coordinated, a.finished_committed), (1, 1));
    assert_eq!(n1.nic.recovery_actions().finished_coordinated, 0);
}

#[test]
fn after_recovery_the_first_surviving_backup_serves_the_dead_primarys_keys() {
    // Node 2 was primary of the key, node 0 its backup.
    let (mut n0, mut n1) = survivors_writing_on(&[2, 0]);
    let config = Configuration::initial(3, 2).without(1 << 2);
    n0.nic.apply_configuration(&config);
    n1.nic.apply_configuration(&config);
    let mut now = recover(&mut n0, &mut n1, 0);
    assert_eq!(
        n0.nic.recovery_actions().promoted_shards,
        1,
        "node 0 took shard 2"
    );
    assert_eq!(n1.nic.recovery_actions().promoted_shards, 0);
    // Coordinated by node 1: it must send to node 0, the new primary.
    submit(&mut n1, 11);
    let seen = until_outcome(&mut n0, &mut n1, &mut now, 1);
    assert_eq!(seen, Some((11, TxStatus::Committed)));
    steps(&mut n0, &mut n1, &mut now, 20);
    assert_eq!(n0.nic.index().locks_held(), 0);
    assert!(n0.nic.is_quiescent() && n1.nic.is_quiescent());
}

#[test]
fn locks_of_a_crashed_coordinator_without_log_are_released() {
    // Node 2 coordinates a transaction writing a key of shard 0 (replicas
    // 0 and 1); it crashes after node 0 locked the key, before any LOG.
    let (mut n0, mut n1, mut n2) = nodes_writing_on(&[0, 1]);
    submit(&mut n2, 3);
    let mut now = STEP_NS;
    n2.step(now); // sends EXECUTE to node 0, then crashes
    steps(&mut n0, &mut n1, &mut now, 20);
    assert_eq!(n0.nic.index().locks_held(), 1, "node 0 locked for node 2");
    let config = Configuration::initial(3, 2).without(1 << 2);
    n0.nic.apply_configuration(&config);
    n1.nic.apply_configuration(&config);
    recover(&mut n0, &mut n1, now);
    assert_eq!(n0.nic.index().locks_held(), 0, "no lock outlives the crash");
    assert_eq!(n0.nic.stats().server.orphan_locks_released, 1);
    assert_eq!(n1.nic.stats().server.orphan_locks_released, 0);
}

#[test]
fn a_crashed_coordinators_transaction_logged_everywhere_is_committed_by_recovery() {
    // Node 2 coordinates a write of a key of shard 0 (primary 0, backup 1)
    // and crashes once both replicas took its LOG, before any COMMIT.
    let (mut n0, mut n1, mut n2) = nodes_writing_on(&[0, 1]);
    submit(&mut n2, 5);
    let mut now = 0;
    let logged = |n: &Node| n.nic.stats().server.log_appends;
    for _ in 0..TX_ITERATIONS_MAX {
        if logged(&n0) == 1 && logged(&n1) == 1 {
            break;
        }
        now += STEP_NS;
        n0.step(now);
        n1.step(now);
        n2.step(now);
    }
    assert_eq!(
        (logged(&n0), logged(&n1)),
        (1, 1),
        "both replicas took the LOG"
    );
    assert_eq!(n0.nic.index().locks_held(), 1, "held until the decision");
    // Node 2 crashes now: its LOG acknowledgements are never read.
    let config = Configuration::initial(3, 2).without(1 << 2);
    n0.nic.apply_configuration(&config);
    n1.nic.apply_configuration(&config);
    now = recover(&mut n0, &mut n1, now);
    let tx = n0.decisions.first().map(|d| d.1);
    for n in [&n0, &n1] {
        let a = n.nic.recovery_actions();
        assert_eq!((a.committed_pending, a.dropped_pending), (1, 0), "{a:?}");
        assert_eq!(n.decisions, vec![(LogKind::Commit, tx.unwrap())]);
        assert!(a.last_begun_ns > 0 && a.last_resumed_ns >= a.last_begun_ns);
    }
    assert_eq!(tx.map(|t| t.coordinator()), Some(2), "node 2's transaction");
    assert_eq!(
        n0.nic.index().locks_held(),
        0,
        "no lock outlives its decision"
    );
    // Service goes on: node 1 writes the same key through node 0.
    submit(&mut n1, 6);
    let seen = until_outcome(&mut n0, &mut n1, &mut now, 1);
    assert_eq!(seen, Some((6, TxStatus::Committed)));
    let first = n1.nic.recovery_actions().first_commit_after_resume_ns;
    assert!(first > n1.nic.recovery_actions().last_resumed_ns);
}

#[test]
fn a_log_reaching_a_node_in_a_recovery_epoch_is_refused_and_recovery_aborts_it() {
    // Node 0 is in a recovery epoch (node 2 failed); node 1 is in the same
    // epoch number but has not learned of the failure, so it still starts
    // transactions: its write of a key of shard 0 (replicas 0, 1) is
    // executed at node 0, whose evidence is taken, so node 0 refuses its LOG.
    let (mut n0, mut n1) = survivors();
    let config = Configuration::initial(3, 2).without(1 << 2);
    n0.nic.apply_configuration(&config);
    n1.nic.apply_configuration(&Configuration {
        epoch: config.epoch,
        ..Configuration::initial(3, 2)
    });
    assert!(n0.nic.recovering() && !n1.nic.recovering());
    submit(&mut n1, 8);
    let mut now = 0;
    let seen = until_outcome(&mut n0, &mut n1, &mut now, 1);
    // A refused LOG aborts in two rounds (`tests/abort_after_log.rs`): both
    // replicas acknowledged the ABORT (node 0 takes it during its recovery
    // epoch: it adds no record its evidence lacks, only a decision), then
    // the lock is released and the client hears the abort.
    assert_eq!(seen, Some((8, TxStatus::Unavailable)));
    assert_eq!(n0.nic.stats().server.refused_recovering, 1);
    assert_eq!(n0.nic.stats().server.abort_log_requests, 1);
    assert_eq!(
        n0.nic.stats().server.log_appends,
        0,
        "no record after the evidence"
    );
    let c = n1.nic.stats().coordinator;
    assert_eq!(
        (c.log_refusals, c.aborts_after_log, c.abort_log_acks),
        (1, 1, 2)
    );
    steps(&mut n0, &mut n1, &mut now, 20);
    assert_eq!(n0.nic.index().locks_held(), 0, "round 2 released its lock");
    // Node 1 takes the configuration: recovery finds nothing to decide
    // against the abort (node 1's ABORT record), and nothing more is told.
    n1.nic.apply_configuration(&config);
    now = recover(&mut n0, &mut n1, now);
    steps(&mut n0, &mut n1, &mut now, 20);
    assert_eq!(n1.nic.stats().coordinator.recovered, 0, "finished before");
    assert_eq!(n0.nic.index().locks_held(), 0);
    assert_eq!(outcome(&mut n1), None, "the client heard once");
}

#[test]
fn a_live_coordinators_transaction_recovery_aborts_is_reported_unavailable_and_unlocked() {
    // Node 0 writes a key of shard 1 (primary 1, backup 2) and the epoch
    // changes (node 2 failed) right after its EXECUTE left: recovery finds
    // it in Execute, decides abort, and node 0 reports it and unlocks.
    let (mut n0, mut n1) = survivors_writing_on(&[1, 2]);
    submit(&mut n0, 4);
    n0.step(STEP_NS);
    let config = Configuration::initial(3, 2).without(1 << 2);
    n0.nic.apply_configuration(&config);
    n1.nic.apply_configuration(&config);
    let mut now = recover(&mut n0, &mut n1, STEP_NS);
    let a = n0.nic.recovery_actions();
    assert_eq!(
        (a.finished_coordinated, a.finished_committed),
        (1, 0),
        "{a:?}"
    );
    let mut seen = None;
    for _ in 0..20 {
        now += STEP_NS;
        n0.step(now);
        n1.step(now);
        seen = seen.or(outcome(&mut n0));
    }
    assert_eq!(seen, Some((4, TxStatus::Unavailable)));
    assert_eq!(
        n1.nic.index().locks_held(),
        0,
        "no lock outlives its decision"
    );
    assert!(n0.nic.is_quiescent() && n1.nic.is_quiescent());
}
