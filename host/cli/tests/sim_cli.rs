//! `splitkv sim`: a few seeds of each workload pass every check, a seed's
//! history is the same bytes on every run (one seed reproduces a run), and
//! bad flags are refused before anything runs (exit 2, one line).

use std::process::Command;

fn splitkv(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_splitkv"))
        .args(args)
        .output()
        .expect("run splitkv")
}

#[test]
fn seeds_of_every_workload_pass_their_checks() {
    for workload in ["smallbank", "list-append", "register", "micro"] {
        let out = splitkv(&[
            "sim",
            "--workload",
            workload,
            "--seeds",
            "1..=3",
            "--transactions",
            "200",
        ]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{workload}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains("3 seeds run, 3 passed, 0 failed"),
            "{workload}: {stdout}"
        );
    }
}

#[test]
fn one_seed_reproduces_its_history_byte_for_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |sub: &str| {
        let d = dir.path().join(sub);
        let out = splitkv(&[
            "sim",
            "--workload",
            "list-append",
            "--seeds",
            "7..9",
            "--jobs",
            "2",
            "--history",
            d.to_str().expect("utf-8 path"),
        ]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let read =
            |seed: u64| std::fs::read(d.join(format!("seed-{seed}.jsonl"))).expect("history");
        (read(7), read(8))
    };
    let (a7, a8) = run("a");
    let (b7, b8) = run("b");
    assert!(
        !a7.is_empty() && a7 == b7 && a8 == b8,
        "same seed, same history"
    );
    assert_ne!(a7, a8, "different seeds, different runs");
}

#[test]
fn bad_flags_exit_2_with_one_line() {
    for (args, needle) in [
        (&["sim", "--seeds", "5..5"][..], "empty"),
        (&["sim", "--seeds", "x"], "not a seed"),
        (&["sim", "--faults", "wind"], "wind"),
        (&["sim", "--nodes", "0"], "--nodes"),
        (&["sim", "--replication", "4"], "--replication"),
        (&["sim", "--jobs", "0"], "--jobs"),
        (&["sim", "--workload", "tpcc"], "tpcc"),
        (
            &["sim", "--workload", "register", "--gets", "2"],
            "--workload micro",
        ),
        (
            &["sim", "--workload", "micro", "--gets", "9"],
            "--gets + --puts",
        ),
    ] {
        let out = splitkv(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "nothing ran");
    }
}
