//! `--api txn`: the register and Smallbank workloads reach the store through
//! the one-shot `Txn` (the node's built-in procedure) and pass every check —
//! in process (`splitkv bench`), under the simulator with every fault mix
//! (one seed each), and on three node processes (`--cluster F --spawn`);
//! `--api interactive` and list-append through the `Txn` are refused before
//! anything runs (exit 2, one line).

mod support_deploy;

use std::process::Output;
use support_deploy::{assert_history_checks_passed, bench_on_three, splitkv};

fn assert_ok(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{err}");
    stdout
}

/// The number after `label` on the first line that starts with it.
fn figure(stdout: &str, label: &str) -> u64 {
    stdout
        .lines()
        .find(|l| l.trim_start().starts_with(label))
        .and_then(|l| l.trim_start()[label.len()..].split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {label:?} figure: {stdout}"))
}

#[test]
fn register_through_the_txn_passes_the_history_checks_in_process() {
    let out = splitkv(&[
        "bench",
        "register",
        "--api",
        "txn",
        "--transactions",
        "1000",
    ]);
    let stdout = assert_ok(&out);
    assert!(stdout.contains(", api txn"), "{stdout}");
    assert_history_checks_passed(&stdout);
    assert!(stdout.contains("3000 submitted"), "{stdout}");
}

#[test]
fn write_skew_through_the_txn_compares_runs_both_branches_and_passes_the_history_checks() {
    let out = splitkv(&[
        "bench",
        "register",
        "--api",
        "txn",
        "--shape",
        "write-skew",
        "--transactions",
        "1000",
    ]);
    let stdout = assert_ok(&out);
    assert_history_checks_passed(&stdout);
    // "N failed (M conflicts)": the failed compares are the difference.
    let line = stdout
        .lines()
        .find(|l| l.starts_with("transactions:"))
        .unwrap_or_else(|| panic!("{stdout}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = |w: &str| words.iter().position(|x| x.trim_start_matches('(') == w);
    let failed: u64 = words[at("failed").unwrap() - 1].parse().unwrap();
    let conflicts: u64 = words[at("conflicts),").unwrap() - 1]
        .trim_start_matches('(')
        .parse()
        .unwrap();
    assert_eq!(figure(line, "transactions:"), 3_000, "submitted: {line}");
    assert!(!line.contains(" 0 committed"), "{line}");
    assert!(failed > conflicts, "some compares failed: {line}");
}

#[test]
fn smallbank_through_the_txn_passes_the_money_check_in_process_and_reports_compare_retries() {
    let out = splitkv(&[
        "bench",
        "smallbank",
        "--api",
        "txn",
        "--accounts-per-node",
        "200",
        "--duration",
        "500ms",
        "--warmup",
        "100ms",
    ]);
    let stdout = assert_ok(&out);
    assert!(stdout.contains(", api txn"), "{stdout}");
    assert!(stdout.contains("money check    ok"), "{stdout}");
    assert!(stdout.contains("replica check  ok"), "{stdout}");
    assert!(figure(&stdout, "committed") > 0, "{stdout}");
    assert!(figure(&stdout, "Txn calls") > 0, "{stdout}");
    assert!(stdout.contains("compare failed"), "{stdout}");
}

#[test]
fn every_fault_mix_passes_through_the_txn_under_the_simulator() {
    let mixes = [
        "none",
        "net",
        "crash",
        "all",
        "rejoin",
        "nic-crash",
        "chaos",
    ];
    for workload in ["register", "smallbank"] {
        for faults in mixes {
            let out = splitkv(&[
                "sim",
                "--workload",
                workload,
                "--api",
                "txn",
                "--faults",
                faults,
                "--seeds",
                "3",
                "--jobs",
                "1",
            ]);
            let stdout = assert_ok(&out);
            assert!(
                stdout.contains("1 seeds run, 1 passed, 0 failed"),
                "{workload} {faults}: {stdout}"
            );
        }
    }
}

#[test]
fn interactive_and_list_append_through_the_txn_exit_2_with_one_line() {
    for (args, needle) in [
        (
            &["bench", "smallbank", "--api", "interactive"][..],
            "not built yet",
        ),
        (
            &["bench", "register", "--api", "interactive"],
            "not built yet",
        ),
        (&["bench", "micro", "--api", "interactive"], "not built yet"),
        (&["sim", "--api", "interactive"], "not built yet"),
        (&["bench", "list-append", "--api", "txn"], "list-append"),
        (
            &["sim", "--workload", "list-append", "--api", "txn"],
            "list-append",
        ),
        (&["bench", "register", "--api", "rest"], "rest"),
    ] {
        let out = splitkv(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
}

#[test]
fn three_node_processes_run_register_and_smallbank_through_the_txn() {
    let out = bench_on_three(
        "register",
        &["--api", "txn", "--transactions", "500", "--inflight", "4"],
        None,
        || (String::new(), ()),
    );
    let stdout = assert_ok(&out);
    assert!(stdout.contains("checks: ok"), "{stdout}");
    assert_history_checks_passed(&stdout);
    assert!(stdout.contains("1500 submitted"), "{stdout}");

    let out = bench_on_three(
        "smallbank",
        &[
            "--api",
            "txn",
            "--accounts-per-node",
            "100",
            "--duration",
            "1s",
            "--warmup",
            "200ms",
            "--inflight",
            "8",
        ],
        None,
        || (String::new(), ()),
    );
    let stdout = assert_ok(&out);
    assert!(stdout.contains("checks: ok"), "{stdout}");
    assert!(stdout.contains(", api txn"), "{stdout}");
    assert!(stdout.contains("money check    ok"), "{stdout}");
    assert!(stdout.contains("replica check  ok"), "{stdout}");
    assert!(figure(&stdout, "committed") > 0, "{stdout}");
    assert!(figure(&stdout, "Txn calls") > 0, "{stdout}");
}
