//! Coordinator deadlines and failed peers (issue 11 "Recovery": timeouts;
//! `nic-runtime/src/protocol/coordinator/deadline.rs`): a participant that
//! never answers ends its transaction as `Unavailable` before any LOG (with
//! ABORT to the primaries that may hold its locks) and as `Unknown` after
//! (when overdue); the slot and the locks stay until the decision, which the
//! live coordinator makes once a configuration excludes the silent replica
//! (a suspicion alone never lets it commit without a replica's LOG); the
//! client hears once.

use splitkv_layout::host_nic::{TxRequest, TxStatus};
use splitkv_layout::wire::{BodyWriter, MsgKind, NodeId, ReplyStatus};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
use splitkv_nic::protocol::coordinator::{DEADLINE_SCAN_INTERVAL_NS, PHASE_DEADLINE_NS_DEFAULT};
use splitkv_nic::Placement;
use support::coordinator::CoordinatorRig as Rig;

mod support;

/// A key whose primary is not node 0 (the coordinator), so it can fail.
const KEY: Key = Key::new(0, 1);

/// Node 0 of 3 with replication `replicas`, at time 1 µs; its procedure
/// writes [`KEY`].
fn rig(replicas: usize) -> Rig {
    let mut r = Rig::new(Placement::new(3, replicas).unwrap(), vec![KEY]);
    r.io.now = 1_000;
    r
}

impl Rig {
    fn outcomes(&mut self) -> Vec<TxStatus> {
        self.coord.outcomes().drain(..).map(|o| o.status).collect()
    }

    /// Moves time on by `ns` and runs the deadline check.
    fn advance(&mut self, ns: u64) {
        self.io.now += ns;
        self.coord.check_deadlines(&mut self.io, &self.procs);
    }

    /// `node`'s session fell silent (a suspicion, which may be false).
    fn fail(&mut self, node: NodeId) {
        self.coord.on_peer_failed(&mut self.io, &self.procs, node);
    }

    /// A configuration leaves `node` out (of the 3 nodes).
    fn exclude(&mut self, node: NodeId) {
        let live = 0b111 & !(1u32 << node);
        self.coord.set_live(&mut self.io, &self.procs, live);
    }

    /// Starts the transaction; returns its tx_id and the primary of KEY.
    fn start(&mut self) -> (u64, NodeId) {
        let req = TxRequest {
            req_id: 1,
            procedure: 0,
            args: b"",
        };
        self.coord.start(&mut self.io, &self.procs, &req);
        let primary = self.io.placement.primary(&KEY);
        assert_ne!(primary, 0, "the test key's primary must be a peer");
        let tx = match self.sent_kinds()[..] {
            [(p, MsgKind::Execute, tx)] if p == primary => tx,
            ref other => panic!("one EXECUTE to the primary expected: {other:?}"),
        };
        (tx, primary)
    }

    /// Starts and answers EXECUTE (lock granted); returns the tx id and
    /// the nodes LOG went to.
    fn start_to_log(&mut self) -> (u64, NodeId, Vec<NodeId>) {
        let (tx, primary) = self.start();
        let mut w = BodyWriter::new();
        w.begin_execute_resp(tx, ReplyStatus::Ok);
        w.push_item(&KEY, ObjectMeta::new(3, ObjectFlags::empty()), b"old");
        self.respond(primary, &w);
        let logs: Vec<NodeId> = self
            .sent_kinds()
            .iter()
            .map(|&(d, k, _)| {
                assert_eq!(k, MsgKind::Log);
                d
            })
            .collect();
        (tx, primary, logs)
    }
}

#[test]
fn a_silent_primary_in_execute_ends_unavailable_at_the_deadline_and_is_sent_abort() {
    let mut r = rig(2);
    let (tx, primary) = r.start();
    r.advance(PHASE_DEADLINE_NS_DEFAULT - 1);
    assert!(r.outcomes().is_empty(), "not before the deadline");
    assert_eq!(r.coord.inflight(), 1);
    // Found overdue by the next scan, at most one scan interval later.
    r.advance(DEADLINE_SCAN_INTERVAL_NS);
    assert_eq!(r.outcomes(), vec![TxStatus::Unavailable]);
    // Its EXECUTE may have locked: the ABORT follows it on the session.
    assert_eq!(r.sent_kinds(), vec![(primary, MsgKind::Abort, tx)]);
    assert_eq!(r.coord.inflight(), 0);
    assert_eq!(r.coord.stats().deadlines.unavailable, 1);
    r.advance(PHASE_DEADLINE_NS_DEFAULT);
    assert!(r.outcomes().is_empty(), "told once");
}

#[test]
fn a_suspected_primary_ends_execute_at_once_and_is_sent_abort() {
    let mut r = rig(2);
    let (tx, primary) = r.start();
    r.fail(primary);
    assert_eq!(r.outcomes(), vec![TxStatus::Unavailable]);
    // A suspicion may be false: the primary may live and hold the lock.
    assert_eq!(r.sent_kinds(), vec![(primary, MsgKind::Abort, tx)]);
    assert_eq!(r.coord.inflight(), 0);
    let s = r.coord.stats().deadlines;
    assert_eq!((s.peers_failed, s.unavailable), (1, 1));
    assert_eq!(r.coord.failed_peers(), 1 << primary);
    assert_eq!(r.coord.excluded_peers(), 0);
}

#[test]
fn an_excluded_primary_ends_execute_at_once_without_sending_to_it() {
    let mut r = rig(2);
    let (_, primary) = r.start();
    r.exclude(primary);
    assert_eq!(r.outcomes(), vec![TxStatus::Unavailable]);
    assert!(
        r.sent_kinds().is_empty(),
        "nothing goes to an excluded node"
    );
    assert_eq!(r.coord.inflight(), 0);
    assert_eq!(r.coord.excluded_peers(), 1 << primary);
    assert_eq!(r.coord.failed_peers(), 1 << primary);
}

#[test]
fn a_silent_replica_after_log_gives_unknown_then_the_live_coordinator_commits() {
    let mut r = rig(3);
    let (tx, _, logs) = r.start_to_log();
    assert!(
        logs.len() >= 2,
        "replication 3 logs on 2 nodes at least: {logs:?}"
    );
    let silent = *logs.iter().rev().find(|&&n| n != 0).unwrap();
    let mut w = BodyWriter::new();
    for &n in logs.iter().filter(|&&n| n != silent) {
        w.ack(MsgKind::LogAck, tx, ReplyStatus::Ok);
        r.respond(n, &w);
    }
    assert!(r.outcomes().is_empty());
    r.advance(PHASE_DEADLINE_NS_DEFAULT);
    assert_eq!(r.outcomes(), vec![TxStatus::Unknown]);
    assert_eq!(
        r.coord.inflight(),
        1,
        "the slot and locks wait for a decision"
    );
    assert!(r.sent_kinds().is_empty());
    r.advance(PHASE_DEADLINE_NS_DEFAULT);
    assert!(r.outcomes().is_empty(), "told once");
    // Suspected only: it may be alive without the LOG, so no commit yet.
    r.fail(silent);
    r.advance(DEADLINE_SCAN_INTERVAL_NS);
    assert!(r.sent_kinds().is_empty(), "no COMMIT on a suspicion");
    assert_eq!(r.coord.inflight(), 1);
    // A configuration excludes it: every written key is logged at a live
    // replica, so the live coordinator commits (recovery's rule).
    r.exclude(silent);
    let commits = r.sent_kinds();
    assert!(!commits.is_empty());
    assert!(commits
        .iter()
        .all(|&(d, k, t)| d != silent && k == MsgKind::Commit && t == tx));
    // The live replicas acknowledge; nothing is awaited from the excluded one.
    for &(d, _, _) in &commits {
        w.ack(MsgKind::CommitAck, tx, ReplyStatus::Ok);
        r.respond(d, &w);
    }
    assert!(r.outcomes().is_empty(), "the client already heard Unknown");
    assert_eq!(r.coord.inflight(), 0);
    let s = r.coord.stats().deadlines;
    assert_eq!(
        (s.unknown, s.unknown_committed, s.unknown_aborted),
        (1, 1, 0)
    );
}

#[test]
fn a_replica_failing_in_commit_is_not_waited_for() {
    let mut r = rig(3);
    let (tx, _, logs) = r.start_to_log();
    let mut w = BodyWriter::new();
    for &n in &logs {
        w.ack(MsgKind::LogAck, tx, ReplyStatus::Ok);
        r.respond(n, &w);
    }
    let commits: Vec<NodeId> = r
        .sent()
        .iter()
        .filter(|x| x.1 == MsgKind::Commit)
        .map(|x| x.0)
        .collect();
    let failing = *commits
        .iter()
        .find(|&&n| n != 0)
        .expect("a COMMIT to a peer");
    for &d in commits.iter().filter(|&&d| d != failing) {
        w.ack(MsgKind::CommitAck, tx, ReplyStatus::Ok);
        r.respond(d, &w);
    }
    assert!(r.outcomes().is_empty());
    // Suspected only: it may live and hold locks until its COMMIT.
    r.fail(failing);
    r.advance(DEADLINE_SCAN_INTERVAL_NS);
    assert!(r.outcomes().is_empty());
    assert_eq!(r.coord.inflight(), 1);
    r.exclude(failing);
    assert_eq!(r.outcomes(), vec![TxStatus::Committed]);
    assert_eq!(r.coord.stats().deadlines.commit_without_failed, 1);
    assert_eq!(r.coord.inflight(), 0);
}

#[test]
fn a_log_on_no_live_replica_aborts_and_releases_the_lock() {
    // Replication 2: KEY's replicas are two peers, not node 0.
    let mut r = rig(2);
    assert!(
        !r.io.placement.is_replica(0, &KEY),
        "pick a KEY node 0 does not hold"
    );
    let (tx, primary, logs) = r.start_to_log();
    for &n in logs.iter().filter(|&&n| n != primary) {
        r.exclude(n);
    }
    assert!(!r.outcomes().is_empty() || logs.contains(&primary));
    r.advance(PHASE_DEADLINE_NS_DEFAULT);
    assert!(r.coord.outcomes().is_empty() || r.outcomes() == vec![TxStatus::Unknown]);
    let mut w = BodyWriter::new();
    if logs.contains(&primary) {
        // The primary logged it and lives: the decision is commit, made
        // at the next scan (the failed backup's LOG ack never comes).
        w.ack(MsgKind::LogAck, tx, ReplyStatus::Ok);
        r.respond(primary, &w);
        r.advance(DEADLINE_SCAN_INTERVAL_NS);
        assert!(r.sent_kinds().contains(&(primary, MsgKind::Commit, tx)));
        w.ack(MsgKind::CommitAck, tx, ReplyStatus::Ok);
        r.respond(primary, &w);
        r.advance(DEADLINE_SCAN_INTERVAL_NS);
        assert_eq!(r.coord.stats().deadlines.unknown_committed, 1);
    } else {
        // Only the failed backup was sent the LOG: no live replica holds
        // it, so abort, and the live primary's lock is released.
        assert_eq!(r.sent_kinds(), vec![(primary, MsgKind::Abort, tx)]);
        assert_eq!(r.coord.stats().deadlines.unknown_aborted, 1);
    }
    assert_eq!(r.coord.stats().deadlines.unknown, 1);
    assert_eq!(r.coord.inflight(), 0);
    assert!(r.outcomes().is_empty(), "told once");
}

#[test]
fn an_excluded_replica_in_log_lets_the_live_coordinator_commit_and_report_committed() {
    let mut r = rig(3);
    let (tx, _, logs) = r.start_to_log();
    let gone = *logs.iter().rev().find(|&&n| n != 0).unwrap();
    let mut w = BodyWriter::new();
    for &n in logs.iter().filter(|&&n| n != gone) {
        w.ack(MsgKind::LogAck, tx, ReplyStatus::Ok);
        r.respond(n, &w);
    }
    r.exclude(gone);
    // Not overdue: the coordinator decides, and the client hears the commit.
    let commits = r.sent_kinds();
    assert!(!commits.is_empty());
    assert!(commits
        .iter()
        .all(|&(d, k, t)| d != gone && k == MsgKind::Commit && t == tx));
    for &(d, _, _) in &commits {
        w.ack(MsgKind::CommitAck, tx, ReplyStatus::Ok);
        r.respond(d, &w);
    }
    assert_eq!(r.outcomes(), vec![TxStatus::Committed]);
    assert_eq!(r.coord.stats().deadlines.unknown, 0);
    assert_eq!(r.coord.inflight(), 0);
}
