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
//! expectation is caught: the last test edits the trace and checks that the
//! replay names the edited state and variable.

mod scripted_support;

use scripted_support::replay::{
    added_node, added_record, changed_read, LogNames, Replay, SpecTxn, STEP_PASSES,
};
use scripted_support::tlc::{parse_trace, State, Value};
use splitkv_layout::wire::MsgKind;
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

/// Replays `states` (no crash) and compares as the module docs say;
/// panics at the first difference, naming the state.
fn replay(states: &[State]) {
    assert_eq!(states[0].action, "Initial");
    let mut r = Replay::new(11, CommitProtocol::Dnl4, &TXNS, &KEY_NAMES, LogNames::Dnl);
    r.compare(states);
    for i in 1..states.len() {
        step(&mut r, &states[i - 1], &states[i]);
        r.compare(&states[i..]);
    }
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

/// The replay's panic message, if it fails.
fn replay_failure(states: &[State]) -> Option<String> {
    let failed = std::panic::catch_unwind(|| replay(states)).err()?;
    Some(
        failed
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_else(|| format!("{:?}", failed.downcast_ref::<&str>())),
    )
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
