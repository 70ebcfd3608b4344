//! A TLC-generated Dnl-4 trace replayed through the real protocol code
//! (`coordinator/dnl.rs`, `server/dnl.rs`, `server/dnl_steps.rs`; the spec
//! `tla/Dnl4.tla` over `tla/DnlSkeleton.tla`). `tla/traces/dnl4_goal.trace`
//! (how it was made: `tla/traces/README.md`) has no crash: t1 at n1 reads
//! k1 and k2 and writes k1, and commits through Lock (k1 at n1, its own
//! node), ValidateReads (k2 at n2), Replicate (k1 to n2), Unlock (n1) and
//! Readable (n2); t2 at n3 reads k1 and k3 and writes k3, reads k1 while t1
//! holds its lock, locks k3 at its own node, fails its validation of k1 at
//! n1 (t1 changed it) and unlocks (ABORT record).
//!
//! Each spec step becomes a scripted action of three whole nodes running
//! Dnl-4 on the simulated network with every link held (n1, n2, n3 = nodes
//! 0, 1, 2): `Start(t)` submits t at its coordinator; a server step of t at
//! a remote node delivers that request and then its answer (and nothing
//! else: any other protocol message on the way fails the replay) — `Read`
//! a Get, `Lock` a Lock, `ValidateReads` a Validate, `Replicate` a
//! Replicate, `Unlock` an Unlock, `Readable` a Readable; at the
//! coordinator's own node (`ReadLocal` and the others there), and for the
//! coordinator's `<Step>Done` steps, the code acts by itself (its loopback
//! is not a link), so those steps only run passes.
//!
//! What is compared (`scripted_support/replay.rs`): after every step, each
//! node's host-log records as the spec names them (a pending value at the
//! key's primary is t's `LOCK`, at a backup its `REPL`; `COMMIT`, `ABORT`),
//! lock holders, READABLE (`nr`: the NIC index's readable map), stored
//! values and the clients' reported outcomes, each equal to the spec's in
//! this state or a later one (the code runs ahead on the steps it takes by
//! itself); at the end every entry exactly, and what t1 read. A wrong
//! expectation is caught: a test edits the trace and checks that the
//! replay names the edited state and variable. A second trace,
//! `dnl4_departure.trace`, pins the code's one known departure from the
//! spec (a lock holder that is also a backup of the transaction gets one
//! COMMIT at Unlock; `server/dnl.rs`): the replay must depart exactly there.

mod scripted_support;

use scripted_support::replay::{
    added_node, added_record, changed_read, node_id, LogNames, Replay, SpecTxn, NODE_NAMES,
    STEP_PASSES,
};
use scripted_support::tlc::{parse_trace, State, Value};
use splitkv_layout::log_record::LogKind;
use splitkv_layout::wire::{MsgKind, NodeId};
use splitkv_nic::CommitProtocol;
use std::collections::BTreeMap;

const TRACE: &str = include_str!("../../tla/traces/dnl4_goal.trace");

/// The goal model's workload `TraceTx` (written keys first).
const TXNS: [SpecTxn; 2] = [
    SpecTxn {
        name: "t1",
        coord: "n1",
        keys: &["k1", "k2"],
        written: 1,
    },
    SpecTxn {
        name: "t2",
        coord: "n3",
        keys: &["k3", "k1"],
        written: 1,
    },
];
const KEY_NAMES: [&str; 3] = ["k1", "k2", "k3"];
/// The known departure's trace (`tla/traces/Dnl4DepartureGoal.cfg`).
const DEPARTURE_TRACE: &str = include_str!("../../tla/traces/dnl4_departure.trace");
/// Its workload `DepartureTx`: t1 writes k1 and k2, so n2 is a lock holder
/// (k2's primary) and a backup (k1's) of t1.
const DEPARTURE_TXNS: [SpecTxn; 1] = [SpecTxn {
    name: "t1",
    coord: "n1",
    keys: &["k1", "k2"],
    written: 2,
}];

/// The request and answer kinds of a Dnl server step.
fn kinds(action: &str) -> (MsgKind, MsgKind) {
    match action {
        "Lock" => (MsgKind::Lock, MsgKind::LockResp),
        "ValidateReads" => (MsgKind::Validate, MsgKind::ValidateResp),
        "Replicate" => (MsgKind::Replicate, MsgKind::ReplicateAck),
        "Unlock" => (MsgKind::Unlock, MsgKind::UnlockAck),
        _ => (MsgKind::Readable, MsgKind::ReadableAck),
    }
}

/// Runs step `cur` (reached from `prev`).
fn step(r: &mut Replay, prev: &State, cur: &State) {
    let action = cur.action.as_str();
    match action {
        "Start" => {
            let t = r.changed_txn(prev, cur, "phase");
            r.submit(t);
        }
        "Read" => {
            let (t, k) = changed_read(prev, cur);
            r.read(cur.number, &t, &k);
        }
        "Lock" | "ValidateReads" | "Replicate" => {
            let t = r.changed_txn(prev, cur, "acked");
            let (n, coord) = (added_node(prev, cur, t), r.coord(t));
            if n != coord {
                let (req, ans) = kinds(action);
                r.exchange(cur.number, coord, n, req, ans);
            }
        }
        // Neither answers into `acked`: each adds one record at n.
        "Unlock" | "Readable" => {
            let (n, t) = added_record(prev, cur);
            let coord = r.coord(&t);
            if n != coord {
                let (req, ans) = kinds(action);
                r.exchange(cur.number, coord, n, req, ans);
            }
        }
        "ReadLocal" | "ExecDone" | "LockDone" | "ValidateReadsDone" | "ReplicateDone"
        | "UnlockDone" | "ReadableDone" => {}
        other => panic!("state {}: no mapping for action {other}", cur.number),
    }
    r.c.run(STEP_PASSES);
}

/// Replays states `1..upto` of `states` (no crash) on a fresh Dnl-4
/// cluster running `txns`, comparing after each step as the module docs
/// say; panics at the first difference, naming the state.
fn replay_prefix(states: &[State], upto: usize, txns: &'static [SpecTxn]) -> Replay {
    assert_eq!(states[0].action, "Initial");
    let mut r = Replay::new(11, CommitProtocol::Dnl4, txns, &KEY_NAMES, LogNames::Dnl);
    r.compare(states);
    for i in 1..upto {
        step(&mut r, &states[i - 1], &states[i]);
        r.compare(&states[i..]);
    }
    r
}

/// Replays the whole of `states` (workload [`TXNS`]), then compares every
/// entry of the last state exactly, and what t1 read.
fn replay(states: &[State]) {
    let r = replay_prefix(states, states.len(), &TXNS);
    let last = states.last().unwrap();
    r.compare(std::slice::from_ref(last));
    r.compare_reads(last);
}

fn parsed() -> Vec<State> {
    let states = parse_trace(TRACE).expect("the checked-in trace parses");
    assert_eq!(states.len(), 25, "the README's trace");
    states
}

#[test]
fn the_tlc_trace_of_a_dnl4_commit_and_a_validation_abort_replays_on_the_code() {
    let states = parsed();
    let actions: Vec<&str> = states.iter().map(|s| s.action.as_str()).collect();
    for a in [
        "Read",
        "ReadLocal",
        "Lock",
        "ValidateReads",
        "Replicate",
        "Unlock",
        "Readable",
        "ReadableDone",
    ] {
        assert!(actions.contains(&a), "the trace takes {a}");
    }
    let last = states.last().unwrap();
    assert_eq!(last.var("reported").at("t1").str(), "commit");
    assert_eq!(last.var("reported").at("t2").str(), "abort");
    replay(&states);
}

/// A wrong expectation: `var[entry.0][entry.1]` (`entry.1` empty:
/// `var[entry.0]`) set to `to` from state `from` on, which the replay must
/// report as a message starting with `want`.
struct Edit {
    why: &'static str,
    from: usize,
    var: &'static str,
    entry: (&'static str, &'static str),
    to: Value,
    want: &'static str,
}

/// Sets `var[a][b]` (`b` empty: `var[a]`) to `to` in states `from..` (1-based).
fn edit(states: &mut [State], from: usize, var: &str, path: (&str, &str), to: Value) {
    for s in &mut states[from - 1..] {
        let Some(Value::Rec(m)) = s.vars.get_mut(var) else {
            panic!("{var} is a function");
        };
        let entry = m.get_mut(path.0).expect("an entry");
        match (entry, path.1) {
            (e, "") => *e = to.clone(),
            (Value::Rec(inner), b) => *inner.get_mut(b).expect("an entry") = to.clone(),
            _ => panic!("{var}[{}] is a function", path.0),
        }
    }
}

/// The panic message of `f`, if it panics.
fn failure_of(f: impl FnOnce()) -> Option<String> {
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).err()?;
    Some(
        failed
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_else(|| format!("{:?}", failed.downcast_ref::<&str>())),
    )
}

/// The replay's panic message, if it fails.
fn replay_failure(states: &[State]) -> Option<String> {
    failure_of(|| replay(states))
}

/// Wrong expectations are caught, each at the state it is first wrong, by
/// the variable edited: the replay compares what it claims to.
#[test]
fn an_edited_trace_fails_the_replay_at_the_edited_state() {
    let none = || Value::Str("none".into());
    let t1 = || Value::Str("t1".into());
    let rec = |entries: &[(&str, &str, &[&str])]| {
        Value::Set(
            entries
                .iter()
                .map(|(t, kind, keys)| {
                    Value::Rec(BTreeMap::from([
                        ("t".to_string(), Value::Str(t.to_string())),
                        ("kind".to_string(), Value::Str(kind.to_string())),
                        (
                            "keys".to_string(),
                            Value::Set(keys.iter().map(|k| Value::Str(k.to_string())).collect()),
                        ),
                    ]))
                })
                .collect(),
        )
    };
    // Replicate(t1, n2) is state 16; the code's own-node steps after it
    // (ReplicateDone, Unlock at n1: states 17, 18) run in the same passes,
    // and t2's abort report (state 23) comes with its failed validation's
    // answer (state 22).
    let cases = [
        Edit {
            why: "Replicate leaves READABLE up (Dnl4NoReadable)",
            from: 16,
            var: "nr",
            entry: ("n2", "k1"),
            to: none(),
            want: "state 16: nr[n2][k1]",
        },
        Edit {
            why: "Replicate installs at the backup at once",
            from: 16,
            var: "val",
            entry: ("n2", "k1"),
            to: t1(),
            want: "state 16: val[n2][k1]",
        },
        Edit {
            why: "Replicate carries k2 too",
            from: 16,
            var: "rec",
            entry: ("n2", ""),
            to: rec(&[("t1", "REPL", &["k1", "k2"])]),
            want: "state 16: rec[n2]",
        },
        Edit {
            why: "Unlock keeps the lock",
            from: 18,
            var: "lock",
            entry: ("n1", "k1"),
            to: t1(),
            want: "state 16: lock[n1][k1]",
        },
        Edit {
            why: "t2 is reported committed",
            from: 23,
            var: "reported",
            entry: ("t2", ""),
            to: Value::Str("commit".into()),
            want: "state 22: reported[t2]",
        },
    ];
    for Edit {
        why,
        from,
        var,
        entry,
        to,
        want,
    } in cases
    {
        let mut states = parsed();
        edit(&mut states, from, var, entry, to);
        let failure = replay_failure(&states);
        let failure = failure.unwrap_or_else(|| panic!("{why}: the edited trace replayed"));
        eprintln!("{why}: {failure}");
        assert!(
            failure.starts_with(want),
            "{why}: failed elsewhere: {failure}"
        );
    }
}

/// COMMIT records in node `n`'s host log.
fn commits(r: &Replay, n: NodeId) -> usize {
    let recs = &r.c.nodes[n as usize].tap.records;
    recs.iter().filter(|x| x.kind == LogKind::Commit).count()
}

/// The code's known departure (`server/dnl.rs` module docs): a node that is
/// a lock holder and a backup of one Dnl-4 transaction gets one COMMIT
/// record at its Unlock, and its host applies every pending value of the
/// transaction there, the replicated ones too; the spec appends COMMIT of
/// the locked keys at Unlock and installs the replicated ones only at
/// Readable. READABLE stays down until the Readable in both, so no read
/// sees the value early (Gets go to primaries, a GetOne refuses a lowered
/// key). In `dnl4_departure.trace` (t1 at n1 writes k1 and k2) n2 is k2's
/// primary and k1's backup: the replay agrees up to state 12 and departs at
/// state 13, Unlock(t1, n2); from the Readable on the two agree again on
/// every value, lock and READABLE bit. Should the code come to follow the
/// spec, this test fails: then replay this trace whole.
#[test]
fn the_known_departure_one_commit_at_a_lock_holder_that_is_also_a_backup() {
    let states = parse_trace(DEPARTURE_TRACE).expect("the checked-in trace parses");
    assert_eq!(states.len(), 17, "the README's trace");
    let unlock = 12; // state 13
    assert_eq!(states[unlock].action, "Unlock");
    let mut r = replay_prefix(&states, unlock, &DEPARTURE_TXNS);
    step(&mut r, &states[unlock - 1], &states[unlock]);
    let (s, n2) = (&states[unlock], node_id("n2"));
    assert_eq!(s.var("val").at("n2").at("k1").str(), "init");
    assert_eq!(
        r.code_val(n2, "k1"),
        "t1",
        "the code installs k1 at n2's Unlock"
    );
    assert_eq!(s.var("nr").at("n2").at("k1").str(), "t1");
    assert_eq!(r.code_nr(n2, "k1"), "t1", "READABLE stays down");
    assert_eq!(commits(&r, n2), 1, "one COMMIT record at n2's Unlock");
    let why = failure_of(|| r.compare(&states[unlock..])).expect("the departure is seen");
    eprintln!("departed: {why}");
    assert!(
        why.starts_with("state 13: rec[n2]") && why.contains(r#"("t1", "COMMIT", {"k1", "k2"})"#),
        "departed elsewhere: {why}"
    );
    for i in unlock + 1..states.len() {
        step(&mut r, &states[i - 1], &states[i]);
    }
    let last = states.last().unwrap();
    assert_eq!(commits(&r, n2), 2, "the Readable's COMMIT record at n2");
    for n in NODE_NAMES {
        for k in KEY_NAMES {
            let spec = |var: &str| last.var(var).at(n).at(k).str().to_string();
            let id = node_id(n);
            assert_eq!(r.code_val(id, k), spec("val"), "val[{n}][{k}]");
            assert_eq!(r.code_lock(id, k), spec("lock"), "lock[{n}][{k}]");
            assert_eq!(r.code_nr(id, k), spec("nr"), "nr[{n}][{k}]");
        }
    }
    assert_eq!(r.code_reported("t1"), "commit");
    r.compare_reads(last);
}
