//! The skeleton against `tla/DnlSkeleton.tla`: the rows are its `Table`,
//! `has`/`next_step` its `Has`/`NextPhase` (checked against a set-based
//! transliteration over every small transaction), `step_done` its
//! `StepDone` on each protocol's paths, and the report points the rtt counts
//! the protocols are named after.

use super::*;
use crate::protocol::{dnl1, dnl2, dnl4, dnl_ro, CommitProtocol};

/// A row as the spec writes it: `(lockAt, lockR, validate, replAt,
/// reportCommit, reportAbort, evidence, readable)`.
type TlaRow = (
    &'static str,
    bool,
    bool,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
);

fn at_tla(at: At) -> &'static str {
    match (at.primary, at.backups) {
        (false, false) => "{}",
        (true, false) => "{\"P\"}",
        (false, true) => "{\"B\"}",
        (true, true) => "{\"P\", \"B\"}",
    }
}

fn report_tla(r: Report) -> &'static str {
    match r {
        Report::Decision => "decision",
        Report::After(s) => s.tla_name(),
    }
}

fn tla(row: &Row) -> TlaRow {
    (
        at_tla(row.lock_at),
        row.lock_reads,
        row.validate,
        at_tla(row.replicate_at),
        report_tla(row.report_commit),
        report_tla(row.report_abort),
        match row.evidence {
            Evidence::Records => "record",
            Evidence::AllLocked => "all-locked",
        },
        row.readable,
    )
}

/// The spec's broken rows (`Table` after the first three), one design
/// choice undone each, for the transition tests below.
fn broken_rows() -> [(&'static str, Row); 5] {
    [
        (
            "Dnl4NoValidation",
            Row {
                validate: false,
                ..dnl4::ROW
            },
        ),
        (
            "Dnl4NoReadable",
            Row {
                readable: false,
                ..dnl4::ROW
            },
        ),
        (
            "Dnl4EarlyReport",
            Row {
                report_commit: Report::After(Step::Replicate),
                ..dnl4::ROW
            },
        ),
        (
            "Dnl1NoBackupLocks",
            Row {
                lock_at: At::P,
                ..dnl1::ROW
            },
        ),
        (
            "Dnl1EarlyAbortReport",
            Row {
                report_abort: Report::Decision,
                ..dnl1::ROW
            },
        ),
    ]
}

#[test]
fn rows_are_the_spec_table() {
    // Copied from DnlSkeleton.tla's Dnl4Row, Dnl2Row, Dnl1Row.
    assert_eq!(
        tla(&dnl4::ROW),
        ("{\"P\"}", false, true, "{\"B\"}", "unlock", "decision", "record", true)
    );
    assert_eq!(
        tla(&dnl2::ROW),
        (
            "{\"P\"}",
            true,
            false,
            "{\"P\", \"B\"}",
            "replicate",
            "decision",
            "record",
            true
        )
    );
    assert_eq!(
        tla(&dnl1::ROW),
        (
            "{\"P\", \"B\"}",
            true,
            false,
            "{}",
            "decision",
            "unlock",
            "all-locked",
            true
        )
    );
    assert_eq!(row_of(CommitProtocol::XenicOcc), None);
    assert_eq!(row_of(CommitProtocol::Dnl4), Some(&dnl4::ROW));
    assert_eq!(row_of(CommitProtocol::Dnl2), Some(&dnl2::ROW));
    assert_eq!(row_of(CommitProtocol::Dnl1), Some(&dnl1::ROW));
}

/// A transaction over keys `0..KEYS` as the spec sees it: `RS`, `WS ⊆ RS`
/// (bit masks).
const KEYS: u32 = 4;

/// `Has(t, s)` written with sets, as in the spec (`LockKeys`, `ValKeys`).
fn has_by_sets(row: &Row, rs: u32, ws: u32, s: Step) -> bool {
    let lock_keys = if row.lock_reads { rs } else { ws };
    let val_keys = if ws == 0 {
        rs
    } else if row.validate {
        rs & !lock_keys
    } else {
        0
    };
    match s {
        Step::Lock | Step::Unlock => ws != 0 && !row.lock_at.is_empty(),
        Step::Validate => val_keys != 0,
        Step::Replicate => ws != 0 && !row.replicate_at.is_empty(),
        Step::Exec | Step::Done => true,
    }
}

/// `NextPhase(t, s)`: the first later step of `Order` that `Has`.
fn next_phase_by_sets(row: &Row, rs: u32, ws: u32, s: Step) -> Step {
    let i = Step::ORDER.iter().position(|&o| o == s).unwrap();
    Step::ORDER[i + 1..]
        .iter()
        .copied()
        .find(|&o| has_by_sets(row, rs, ws, o))
        .unwrap()
}

fn every_row() -> Vec<(&'static str, Row)> {
    let mut rows = vec![
        ("Dnl4", dnl4::ROW),
        ("Dnl2", dnl2::ROW),
        ("Dnl1", dnl1::ROW),
    ];
    rows.extend(broken_rows());
    rows
}

#[test]
fn has_and_next_step_are_the_specs_over_every_small_transaction() {
    let mut checked = 0;
    for (name, row) in every_row() {
        for rs in 0..1u32 << KEYS {
            // Every write set within the read set.
            let mut ws = rs;
            loop {
                let shape = Shape {
                    reads_not_written: (rs & !ws).count_ones() as usize,
                    written: ws.count_ones() as usize,
                };
                for s in Step::ORDER {
                    assert_eq!(
                        row.has(s, shape),
                        has_by_sets(&row, rs, ws, s),
                        "{name} {rs:#b}/{ws:#b} Has {s:?}"
                    );
                    let visit = row.visit(s, shape);
                    if s != Step::Exec && s != Step::Done {
                        assert_eq!(
                            !visit.is_empty(shape),
                            row.has(s, shape),
                            "{name} {rs:#b}/{ws:#b}: a step is run iff it sends"
                        );
                    }
                    if s != Step::Done {
                        assert_eq!(
                            row.next_step(s, shape),
                            next_phase_by_sets(&row, rs, ws, s),
                            "{name} {rs:#b}/{ws:#b} NextPhase {s:?}"
                        );
                    }
                    checked += 1;
                }
                if ws == 0 {
                    break;
                }
                ws = (ws - 1) & rs;
            }
        }
    }
    assert!(checked > 1000, "{checked}");
}

/// Runs `row` on `shape` from Exec, failing `fails`, and returns the steps
/// run and, per step, the outcome reported when its last response was in.
fn run(row: &Row, shape: Shape, fails: Option<Step>) -> (Vec<Step>, Vec<Option<Decision>>) {
    let (mut step, mut decision, mut reported) = (Step::Exec, None, false);
    let (mut steps, mut reports) = (vec![], vec![]);
    while step != Step::Done {
        let done = row.step_done(step, shape, fails == Some(step), decision, reported);
        steps.push(step);
        reports.push(done.report);
        reported |= done.report.is_some();
        (step, decision) = (done.next, done.decision);
    }
    assert!(reported, "every transaction's outcome is reported");
    assert!(decision.is_some(), "and decided");
    (steps, reports)
}

const C: Option<Decision> = Some(Decision::Commit);
const A: Option<Decision> = Some(Decision::Abort);
use Step::{Exec, Lock, Replicate, Unlock, Validate};

#[test]
fn each_protocol_runs_its_steps_and_reports_at_its_point() {
    let mixed = Shape {
        reads_not_written: 2,
        written: 1,
    };
    // Dnl-4: 4 rtts, commit reported after the Unlock acks.
    assert_eq!(
        run(&dnl4::ROW, mixed, None),
        (
            vec![Exec, Lock, Validate, Replicate, Unlock],
            vec![None, None, None, None, C]
        )
    );
    // Every read written: Validate is elided, the decision is at LockDone.
    let rmw = Shape {
        reads_not_written: 0,
        written: 2,
    };
    assert_eq!(
        run(&dnl4::ROW, rmw, None).0,
        vec![Exec, Lock, Replicate, Unlock]
    );
    // Dnl-2: commit reported after the Replicate acks, then Unlocking.
    assert_eq!(
        run(&dnl2::ROW, mixed, None),
        (
            vec![Exec, Lock, Replicate, Unlock],
            vec![None, None, C, None]
        )
    );
    // Dnl-1: commit reported after the Lock acks.
    assert_eq!(
        run(&dnl1::ROW, mixed, None),
        (vec![Exec, Lock, Unlock], vec![None, C, None])
    );
    // Aborts: at once, except Dnl-1's, after the Unlock acks.
    assert_eq!(
        run(&dnl4::ROW, mixed, Some(Validate)),
        (
            vec![Exec, Lock, Validate, Unlock],
            vec![None, None, A, None]
        )
    );
    assert_eq!(
        run(&dnl2::ROW, mixed, Some(Lock)),
        (vec![Exec, Lock, Unlock], vec![None, A, None])
    );
    assert_eq!(
        run(&dnl1::ROW, mixed, Some(Lock)),
        (vec![Exec, Lock, Unlock], vec![None, None, A])
    );
}

#[test]
fn round_trips_to_the_report_are_the_protocols_names() {
    let mixed = Shape {
        reads_not_written: 3,
        written: 1,
    };
    assert_eq!(dnl4::ROW.round_trips_to_commit_report(mixed), 4);
    assert_eq!(dnl2::ROW.round_trips_to_commit_report(mixed), 2);
    assert_eq!(dnl1::ROW.round_trips_to_commit_report(mixed), 1);
    assert_eq!(dnl1::ROW.round_trips_to_abort_report(mixed, Lock), 2);
    assert_eq!(dnl4::ROW.round_trips_to_abort_report(mixed, Lock), 1);
    // The broken early-report row reports after 3, before the Unlock acks.
    let early = broken_rows()[2].1;
    assert_eq!(early.round_trips_to_commit_report(mixed), 3);
    assert_eq!(
        broken_rows()[4].1.round_trips_to_abort_report(mixed, Lock),
        1
    );
}

#[test]
fn read_only_transactions_run_dnl_ro_under_every_row_and_never_lock() {
    let ro = Shape {
        reads_not_written: 3,
        written: 0,
    };
    for (name, row) in every_row() {
        assert_eq!(
            dnl_ro::steps(&row, ro),
            Some(vec![Exec, Validate, Step::Done]),
            "{name}"
        );
        assert_eq!(run(&row, ro, None), (vec![Exec, Validate], vec![None, C]));
        assert_eq!(
            run(&row, ro, Some(Validate)),
            (vec![Exec, Validate], vec![None, A])
        );
        for s in [Lock, Replicate, Unlock] {
            assert_eq!(row.visit(s, ro), Visit::NONE, "{name} {s:?}");
        }
        assert_eq!(
            row.visit(Validate, ro),
            Visit {
                set: KeySet::Reads,
                at: At::P
            }
        );
        // Nothing read: nothing to validate.
        assert_eq!(
            dnl_ro::steps(&row, Shape::default()),
            Some(vec![Exec, Step::Done])
        );
    }
    assert_eq!(
        dnl_ro::steps(
            &dnl4::ROW,
            Shape {
                reads_not_written: 0,
                written: 1
            }
        ),
        None
    );
}

#[test]
fn each_step_visits_the_rows_keys_and_replicas() {
    let shape = Shape {
        reads_not_written: 2,
        written: 1,
    };
    let v = |set, at| Visit { set, at };
    let visits = |row: &Row| [Lock, Validate, Replicate, Unlock].map(|s| row.visit(s, shape));
    assert_eq!(
        visits(&dnl4::ROW),
        [
            v(KeySet::Writes, At::P),
            v(KeySet::ReadsNotWritten, At::P),
            v(KeySet::Writes, At::B),
            v(KeySet::Writes, At::P),
        ]
    );
    assert_eq!(
        visits(&dnl2::ROW),
        [
            v(KeySet::Reads, At::P),
            v(KeySet::Empty, At::P),
            v(KeySet::Writes, At::PB),
            v(KeySet::Reads, At::P),
        ]
    );
    assert_eq!(
        visits(&dnl1::ROW),
        [
            v(KeySet::Reads, At::PB),
            v(KeySet::Empty, At::P),
            v(KeySet::Writes, At::NONE),
            v(KeySet::Reads, At::PB),
        ]
    );
    assert_eq!(
        dnl4::ROW.visit(Exec, shape),
        v(KeySet::Reads, At::P),
        "Gets read the whole read set"
    );
    assert_eq!(KeySet::Reads.len(shape), 3);
}

#[test]
fn an_outcome_is_reported_once() {
    let shape = Shape {
        reads_not_written: 1,
        written: 1,
    };
    for (name, row) in every_row() {
        for s in [Exec, Lock, Validate, Replicate, Unlock] {
            for failed in [false, true] {
                for decision in [None, C, A] {
                    let done = row.step_done(s, shape, failed, decision, true);
                    assert_eq!(done.report, None, "{name} {s:?}");
                }
            }
        }
    }
}
