//! Dnl-4's recovery rule (`splitkv_nic::protocol::dnl4::decide`, TLA
//! `Dnl4Decide`) on a scenario scripted against the real code: a reported
//! abort whose lock holder keeps its values is not committed by recovery.
//!
//! 3 nodes, replication 2 (n1, n2, n3 = nodes 0, 1, 2), every link held. t1
//! at node 1 writes k (primary 0, backup 1) and reads j (primary 2); its Lock
//! at node 0 takes k with t1's value, a pending value record there. t2 at
//! node 2 writes j and holds j's lock, so t1's Read validation at node 2
//! fails: Dnl-4 reports the abort at once and sends Unlock(abort) to node 0,
//! which the script holds. Node 1 crashes. Node 0 is the only surviving
//! replica of k's shard and holds t1's values: only the REPL condition
//! (a REPL is sent only after a commit was decided) keeps recovery from
//! committing t1. The survivors' evidence is their servers' own
//! (`NicRuntime::recovery_records`), decided with the Dnl-4 rule.
//!
//! With the condition dropped (`splitkv_mutation = "dnl4_recovery_ignores_repl"`)
//! recovery commits the aborted t1: the test fails with "a reported abort
//! is committed by recovery", which `scripts/mutation` requires.

mod scripted_support;

use scripted_support::packets::{is, Msg};
use scripted_support::{key_on, Cluster};
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::wire::{MsgKind, NodeId, NodeMask, RecordKind};
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
    // Recovery, as the leader decides it from the survivors' evidence.
    let view = PlacementView::new(c.placement, NodeMask::EMPTY.with(T1_COORD)).unwrap();
    assert_eq!(
        view.live_replicas(c.placement.shard(&k))
            .collect::<Vec<_>>(),
        vec![0]
    );
    let mut e = TxEvidence::default();
    for n in c.live().collect::<Vec<_>>() {
        for r in c.nodes[n as usize].nic.recovery_records() {
            if r.tx_id == t1 {
                assert_ne!(r.kind, RecordKind::Repl, "no REPL was sent");
                e.add_record(n, r);
            }
        }
    }
    assert!(
        e.log_holders[c.placement.shard(&k) as usize].contains(0),
        "node 0 holds t1's values of k"
    );
    let rule = RecoveryRule::Dnl(Evidence::Records);
    let (commit, why) = e.decide_tx(t1, &view, rule);
    assert!(
        !commit,
        "a reported abort is committed by recovery ({why:?})"
    );
    assert_eq!(why, DecisionReason::NotLogged);
}
