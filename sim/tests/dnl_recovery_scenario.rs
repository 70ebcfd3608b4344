//! The Dnl recovery rules (`splitkv_nic::protocol::dnl4::decide`, TLA
//! `Dnl4Decide`; `dnl1::decide`, `Dnl1Decide`) on scenarios scripted against
//! the real code, 3 nodes, replication 2 (n1, n2, n3 = nodes 0, 1, 2), every
//! link held; the survivors' evidence is their servers' own
//! (`NicRuntime::recovery_records`), decided with the row's rule as the
//! recovery leader does.
//!
//! Dnl-4: a reported abort whose lock holder keeps its values is not
//! committed by recovery. t1 at node 1 writes k (primary 0, backup 1) and
//! reads j (primary 2); its Lock at node 0 takes k with t1's value, a
//! pending value record there. t2 at node 2 writes j and holds j's lock, so
//! t1's Read validation at node 2 fails: Dnl-4 reports the abort at once and
//! sends Unlock(abort) to node 0, which the script holds. Node 1 crashes.
//! Node 0 is the only surviving replica of k's shard and holds t1's values:
//! only the REPL condition (a REPL is sent only after a commit was decided)
//! keeps recovery from committing t1. With the condition dropped
//! (`splitkv_mutation = "dnl4_recovery_ignores_repl"`) the test fails with
//! "a reported abort is committed by recovery".
//!
//! Dnl-1: a transaction locked at the primary and refused at the backup is
//! not committed by recovery. t2 at node 0 writes k (primary 2, backup 0)
//! and holds k's lock at node 0 (its Lock at node 2 held on the link). t1 at
//! node 1 writes k: its Lock is taken at node 2 with t1's value and refused
//! at node 0, so t1 decides abort and sends Unlock(abort), held (Dnl-1
//! reports an abort only after those acks). Node 1 crashes. Committing t1
//! would install at node 2 a write node 0 never holds; only "every
//! surviving replica of every locked shard holds the LOCK" aborts it. With
//! "some replica" instead (`splitkv_mutation = "dnl1_recovery_some_locked"`)
//! the test fails with "a transaction a replica refused is committed by
//! recovery". `scripts/mutation` requires both.

mod scripted_support;

use scripted_support::packets::{is, Msg};
use scripted_support::{key_on, Cluster};
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::wire::{MsgKind, NodeId, NodeMask};
use splitkv_layout::TxId;
use splitkv_nic::protocol::skeleton::Evidence;
use splitkv_nic::protocol::CommitProtocol;
use splitkv_nic::recovery::{DecisionReason, RecoveryRule, TxEvidence};
use splitkv_nic::PlacementView;

/// Most passes (200 ns each) for one step of the script.
const PASSES_MAX: usize = 5_000;
const T1_COORD: NodeId = 1;
const T2_COORD: NodeId = 2;

/// Delivers the held packets of `src → dst` through the first message
/// `want` accepts, then runs until the reply is held on `dst → src` and
/// delivers it too.
fn step(c: &mut Cluster, src: NodeId, dst: NodeId, want: impl Fn(&Msg) -> bool, reply: MsgKind) {
    c.deliver_through(src, dst, &want)
        .unwrap_or_else(|| panic!("{src} → {dst}: the request is held"));
    let coordinator = src;
    let answered = |c: &Cluster| {
        c.held(dst, src)
            .iter()
            .any(|(_, m)| m.iter().any(|m| is(m, reply, coordinator)))
    };
    assert!(c.run_until(PASSES_MAX, answered), "{dst} answers {reply:?}");
    c.deliver_through(dst, src, |m| is(m, reply, coordinator));
}

#[test]
fn a_reported_abort_whose_lock_holder_kept_its_values_stays_aborted() {
    let mut c = Cluster::with_protocol(7, CommitProtocol::Dnl4);
    c.hold_all();
    let k = key_on(&c.placement, &[0, 1]);
    let j = key_on(&c.placement, &[2, 0]);
    c.submit_reading(T1_COORD, 1, "t1", 1, &[k, j]);
    let sent = |c: &Cluster, dst: NodeId, kind: MsgKind| {
        c.held(T1_COORD, dst)
            .iter()
            .any(|(_, m)| m.iter().any(|m| is(m, kind, T1_COORD)))
    };
    // Execution: Gets at k's and j's primaries.
    assert!(c.run_until(PASSES_MAX, |c| sent(c, 0, MsgKind::Get)
        && sent(c, 2, MsgKind::Get)));
    step(
        &mut c,
        T1_COORD,
        0,
        |m| is(m, MsgKind::Get, T1_COORD),
        MsgKind::GetResp,
    );
    step(
        &mut c,
        T1_COORD,
        2,
        |m| is(m, MsgKind::Get, T1_COORD),
        MsgKind::GetResp,
    );
    // Locking: k at node 0, with t1's value.
    assert!(c.run_until(PASSES_MAX, |c| sent(c, 0, MsgKind::Lock)));
    step(
        &mut c,
        T1_COORD,
        0,
        |m| is(m, MsgKind::Lock, T1_COORD),
        MsgKind::LockResp,
    );
    assert_eq!(
        c.lock_holder(0, &k).map(|t| t.coordinator()),
        Some(T1_COORD)
    );
    // t2 at node 2 takes j's lock (its own primary: no link).
    c.submit(T2_COORD, 2, "t2", &[j]);
    assert!(c.run_until(PASSES_MAX, |c| c
        .lock_holder(2, &j)
        .is_some_and(|t| t.coordinator() == T2_COORD)));
    // Read validation of j at node 2 fails: abort reported at once.
    assert!(c.run_until(PASSES_MAX, |c| sent(c, 2, MsgKind::Validate)));
    step(
        &mut c,
        T1_COORD,
        2,
        |m| is(m, MsgKind::Validate, T1_COORD),
        MsgKind::ValidateResp,
    );
    assert!(c.run_until(PASSES_MAX, |c| c.outcomes.contains_key(&(T1_COORD, 1))));
    let (status, _) = c.outcomes[&(T1_COORD, 1)].clone();
    assert_ne!(status, TxStatus::Committed, "t1's abort is reported");
    assert!(
        c.run_until(PASSES_MAX, |c| sent(c, 0, MsgKind::Unlock)),
        "Unlock(abort) held"
    );
    let t1 = c.lock_holder(0, &k).expect("node 0 still holds t1's lock");
    c.crash(T1_COORD);
    let e = survivors_evidence(&c, t1);
    assert!(
        e.log_holders[c.placement.shard(&k) as usize].contains(0),
        "node 0 holds t1's values of k"
    );
    assert!(!e.repl_record, "no REPL was sent");
    let view = PlacementView::new(c.placement, NodeMask::EMPTY.with(T1_COORD)).unwrap();
    assert_eq!(
        view.live_replicas(c.placement.shard(&k))
            .collect::<Vec<_>>(),
        vec![0]
    );
    let rule = RecoveryRule::Dnl(Evidence::Records);
    let (commit, why) = e.decide_tx(t1, &view, rule);
    assert!(
        !commit,
        "a reported abort is committed by recovery ({why:?})"
    );
    assert_eq!(why, DecisionReason::NotLogged);
}

/// The evidence of `tx` the live nodes' servers report now, as the
/// recovery leader gathers it.
fn survivors_evidence(c: &Cluster, tx: TxId) -> TxEvidence {
    let mut e = TxEvidence::default();
    for n in c.live().collect::<Vec<_>>() {
        for r in c.nodes[n as usize].nic.recovery_records() {
            if r.tx_id == tx {
                e.add_record(n, r);
            }
        }
    }
    e
}

#[test]
fn a_transaction_a_backup_refused_to_lock_stays_aborted() {
    const T2_AT: NodeId = 0;
    let mut c = Cluster::with_protocol(11, CommitProtocol::Dnl1);
    c.hold_all();
    let k = key_on(&c.placement, &[2, 0]);
    let sent = |c: &Cluster, from: NodeId, to: NodeId, kind: MsgKind| {
        c.held(from, to)
            .iter()
            .any(|(_, m)| m.iter().any(|m| is(m, kind, from)))
    };
    // t2 at node 0 (k's backup): its Get at the primary, then its Lock,
    // taken at once at node 0 and held on the way to node 2.
    c.submit(T2_AT, 2, "t2", &[k]);
    assert!(c.run_until(PASSES_MAX, |c| sent(c, T2_AT, 2, MsgKind::Get)));
    step(
        &mut c,
        T2_AT,
        2,
        |m| is(m, MsgKind::Get, T2_AT),
        MsgKind::GetResp,
    );
    assert!(c.run_until(PASSES_MAX, |c| sent(c, T2_AT, 2, MsgKind::Lock)));
    let t2_locked = |c: &Cluster| {
        c.lock_holder(0, &k)
            .is_some_and(|t| t.coordinator() == T2_AT)
    };
    assert!(c.run_until(PASSES_MAX, t2_locked), "t2 holds k at node 0");
    // t1 at node 1: its Lock is taken at node 2 and refused at node 0.
    c.submit(T1_COORD, 1, "t1", &[k]);
    assert!(c.run_until(PASSES_MAX, |c| sent(c, T1_COORD, 2, MsgKind::Get)));
    step(
        &mut c,
        T1_COORD,
        2,
        |m| is(m, MsgKind::Get, T1_COORD),
        MsgKind::GetResp,
    );
    assert!(
        c.run_until(PASSES_MAX, |c| sent(c, T1_COORD, 2, MsgKind::Lock)
            && sent(c, T1_COORD, 0, MsgKind::Lock))
    );
    step(
        &mut c,
        T1_COORD,
        2,
        |m| is(m, MsgKind::Lock, T1_COORD),
        MsgKind::LockResp,
    );
    step(
        &mut c,
        T1_COORD,
        0,
        |m| is(m, MsgKind::Lock, T1_COORD),
        MsgKind::LockResp,
    );
    let t1 = c.lock_holder(2, &k).expect("node 2 holds t1's lock");
    assert_eq!(t1.coordinator(), T1_COORD);
    assert!(
        c.run_until(PASSES_MAX, |c| sent(c, T1_COORD, 2, MsgKind::Unlock)),
        "Unlock(abort) held"
    );
    assert!(
        !c.outcomes.contains_key(&(T1_COORD, 1)),
        "Dnl-1 reports an abort only after the Unlock acks"
    );
    c.crash(T1_COORD);
    let e = survivors_evidence(&c, t1);
    let shard = c.placement.shard(&k) as usize;
    assert!(e.lock_holders[shard].contains(2), "node 2 holds t1's LOCK");
    assert!(!e.lock_holders[shard].contains(0), "node 0 refused it");
    let view = PlacementView::new(c.placement, NodeMask::EMPTY.with(T1_COORD)).unwrap();
    let rule = RecoveryRule::Dnl(Evidence::AllLocked);
    let (commit, why) = e.decide_tx(t1, &view, rule);
    assert!(
        !commit,
        "a transaction a replica refused is committed by recovery ({why:?})"
    );
    assert_eq!(why, DecisionReason::NotLogged);
}
