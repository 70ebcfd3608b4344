//! A node killed mid-run: its client's journal replays to what the live
//! generator reported, a torn tail leaves its transactions indeterminate, a
//! corrupted journal is refused, and the money and lost-commit checks over
//! the survivors still fail when the killed node's journal claims a commit
//! the database does not hold (and pass when the same transaction has no
//! outcome: indeterminate).

use super::*;
use crate::history::HistoryCheck;
use crate::history_gen::TxShape;
use crate::remote::journal::Journaled;
use crate::remote::replay::{results_from_journal, JournalError};
use crate::smallbank::{SmallbankGenerator, TxType};
use crate::workload::{AttemptOutcome, TxCall, TxGenerator};
use splitkv_check::history::MicroOp;
use splitkv_layout::host_nic::TxStatus;

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("splitkv-kill-test-{}-{name}", std::process::id()))
}

/// Results of a surviving node that did nothing (no rows: the mirror is
/// loaded directly).
pub(super) fn survivor(node: u16, smallbank: bool) -> Results {
    Results {
        version: PROTOCOL_VERSION,
        node,
        done: true,
        all: LoadCounters::default(),
        window: LoadCounters::default(),
        latency_ns: Vec::new(),
        counters: NodeCounters::default(),
        clock: ClockOrigin::default(),
        smallbank: smallbank.then(SmallbankSummary::default),
        history: (!smallbank).then(HistorySummary::default),
        rows: Vec::new(),
        roles: None,
    }
}

/// A 3-node mirror holding `rows` on every replica, node 2 dead.
fn mirror<W: Workload>(w: &W) -> Mirror {
    let mut m = Mirror::new(w, 3, 3, &[]).unwrap();
    m.parts.load(w.initial_rows(), |_| {}).unwrap();
    m.with_failed(NodeMask::EMPTY.with(2))
}

/// Drives a journaled Smallbank generator as the load generator would: each
/// iteration draws one transaction and takes the previous one's outcome.
fn drive_smallbank(g: &mut Journaled<SmallbankGenerator>, draws: u64) {
    let mut calls: Vec<TxCall> = Vec::new();
    for i in 0..draws {
        g.on_iteration(1_000 * (i + 1));
        let mut call = TxCall::default();
        g.next(&mut call);
        calls.push(call);
        let Some(prev) = i.checked_sub(1) else {
            continue;
        };
        let delta = (i as i64 % 7) - 3;
        let result = [delta.to_le_bytes(), 5i64.to_le_bytes()].concat();
        let status = match i % 5 {
            0 => TxStatus::Unknown,
            1 => TxStatus::LockConflict,
            _ => TxStatus::Committed,
        };
        g.on_outcome(&AttemptOutcome {
            call: &calls[prev as usize],
            status,
            result: &result,
            invoked_ns: 0,
            completed_ns: 1_000 * (i + 1),
            attempt: 1,
            last: true,
            seq: prev,
        });
    }
}

#[test]
fn a_journal_replays_to_the_live_summary_and_a_torn_tail_is_indeterminate() {
    let w = Smallbank::new(100, None).unwrap();
    let path = tmp("smallbank");
    let clock = ClockOrigin {
        lo_ns: 10,
        hi_ns: 20,
    };
    let mut live = Journaled::to_file(w.generator(1, 7), &path, 1, 7, clock).unwrap();
    drive_smallbank(&mut live, 40);
    live.finish(50_000);
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let built = BuiltWorkload::Smallbank(w);
    let r = results_from_journal(&built, 1, &text).unwrap();
    assert_eq!(r.smallbank.unwrap(), SmallbankSummary::of(live.inner()));
    assert_eq!((r.all.drawn, r.clock, r.done), (40, clock, true));
    assert!(live.inner().money_unknown() != (0, 0));
    // Cut in the middle of a line, as a kill during a write would.
    let cut = &text[..text.len() / 2 + 3];
    let r = results_from_journal(&built, 1, cut).unwrap();
    assert!(r.all.drawn < 40 && r.all.drawn > 0, "{:?}", r.all);
    assert!(
        r.all.unknown >= 1,
        "the last draw has no outcome: {:?}",
        r.all
    );
}

#[test]
fn a_corrupted_journal_or_another_node_s_is_refused() {
    let w = Smallbank::new(100, None).unwrap();
    let path = tmp("corrupt");
    let mut live =
        Journaled::to_file(w.generator(1, 7), &path, 1, 7, ClockOrigin::default()).unwrap();
    drive_smallbank(&mut live, 5);
    live.finish(9_000);
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let built = BuiltWorkload::Smallbank(w);
    assert!(results_from_journal(&built, 1, &text).is_ok());
    let other = results_from_journal(&built, 2, &text);
    assert!(matches!(other, Err(JournalError::Header(_))), "{other:?}");
    // One argument byte changed: the generator draws something else.
    let n = text.find("\nn ").unwrap() + 1;
    let end = n + text[n..].find('\n').unwrap();
    let mut bad = text.clone();
    let last = if &text[end - 1..end] == "0" { "1" } else { "0" };
    bad.replace_range(end - 1..end, last);
    let r = results_from_journal(&built, 1, &bad);
    assert!(
        matches!(r, Err(JournalError::Diverged { seq: 0, .. })),
        "{r:?}"
    );
    let r = results_from_journal(&built, 1, &format!("{text}o 999 0 1 1 \n"));
    assert!(matches!(r, Err(JournalError::Malformed { .. })), "{r:?}");
}

/// Node 2's journal text: draws from a fresh generator of `w` until `pick`
/// says one is the transaction to report (the others fail with a lock
/// conflict); returns the text and its seq.
fn journal_until<G: TxGenerator>(
    mut g: G,
    mut pick: impl FnMut(&G, &TxCall) -> bool,
) -> (String, u64) {
    let mut text = String::from("h 1 2 5 0 0\nt 1\n");
    for seq in 0..1_000 {
        let mut call = TxCall::default();
        g.next(&mut call);
        text.push_str(&format!("n {} {}\n", call.procedure, to_hex(&call.args)));
        if pick(&g, &call) {
            return (text, seq);
        }
        text.push_str(&format!("o {seq} {} 1 1 \n", TxStatus::LockConflict as u8));
    }
    panic!("no transaction picked in 1000 draws");
}

#[test]
fn the_money_check_allows_a_killed_node_s_unknown_deposit_but_not_a_claimed_one() {
    let w = Smallbank::new(60, None).unwrap();
    let m = mirror(&w);
    let (text, seq) = journal_until(w.generator(2, 5), |_, c| {
        c.procedure == TxType::DepositChecking as u32
    });
    let built = BuiltWorkload::Smallbank(w);
    let results = |text: &str| {
        let killed = results_from_journal(&built, 2, text).unwrap();
        vec![survivor(0, true), survivor(1, true), killed]
    };
    let report = m.check_money(&w, &results(&text)).unwrap();
    assert_eq!(report.created, 0);
    // The journal now says the deposit committed: the database disagrees.
    let amount = TxType::DepositChecking.amount_cents();
    let result = to_hex(&[amount.to_le_bytes(), 0i64.to_le_bytes()].concat());
    let claimed = format!("{text}o {seq} {} 1 1 {result}\n", TxStatus::Committed as u8);
    let r = m.check_money(&w, &results(&claimed));
    assert!(matches!(r, Err(CheckError::Money { .. })), "{r:?}");
    assert!(m.check_replicas().is_ok());
}

#[test]
fn the_lost_commit_check_fails_on_a_killed_node_s_claimed_append() {
    let w = HistoryCheck::list_append(8, 3, 50, TxShape::Mixed).unwrap();
    let m = mirror(&w);
    let all_appends = |g: &crate::history::HistoryGenerator, _: &TxCall| {
        let invoke = g.ops().last().expect("an invoke");
        let appends = invoke.value.iter();
        appends.clone().count() > 0 && appends.clone().all(|o| matches!(o, MicroOp::Append { .. }))
    };
    let (text, seq) = journal_until(w.generator(2, 5), all_appends);
    let built = BuiltWorkload::History(w.clone());
    let results = |text: &str| {
        let killed = results_from_journal(&built, 2, text).unwrap();
        vec![survivor(0, false), survivor(1, false), killed]
    };
    let checked = m.check_history(&w, &results(&text), None).unwrap();
    assert!(checked.checker.valid);
    let claimed = format!("{text}o {seq} {} 1 1 \n", TxStatus::Committed as u8);
    let r = m.check_history(&w, &results(&claimed), None);
    assert!(
        matches!(
            &r,
            Err(CheckError::Failed {
                check: "lost-commit",
                ..
            })
        ),
        "{r:?}"
    );
}
