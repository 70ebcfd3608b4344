//! The `splitkv` command: bad input is refused before anything starts (exit 2,
//! one line), and a short real run passes both checks.

use std::process::Command;

fn splitkv(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_splitkv"))
        .args(args)
        .output()
        .expect("run splitkv")
}

#[test]
fn bad_flags_exit_2_with_one_line() {
    let cases: &[(&[&str], &str)] = &[
        (&["--nodes", "0"], "--nodes"),
        (&["--nodes", "3", "--replication", "4"], "--replication"),
        (&["--replication", "0"], "--replication"),
        (&["--duration", "0s"], "--duration"),
        (&["--threads", "0"], "--threads"),
        (&["--accounts-per-node", "0"], "--accounts-per-node"),
        (&["--hot-accounts", "1"], "--hot-accounts"),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["bench", "smallbank"];
        args.extend_from_slice(extra);
        let out = splitkv(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(
            err.trim().lines().count(),
            1,
            "{args:?}: one line, got {err}"
        );
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "nothing ran");
    }
    let out = splitkv(&["bench", "nosuchworkload"]);
    assert_eq!(out.status.code(), Some(2));
    let out = splitkv(&["bench", "smallbank", "--duration", "ten seconds"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn short_run_passes_both_checks_and_reports_json() {
    let out = splitkv(&[
        "bench",
        "smallbank",
        "--accounts-per-node",
        "2000",
        "--duration",
        "300ms",
        "--json",
        "--seed",
        "5",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
    assert!(v["committed"].as_u64().unwrap() > 0);
    assert!(v["messages_per_packet"].as_f64().unwrap() >= 1.0);
    assert!(v["money_check"].as_str().unwrap().starts_with("ok"));
    assert!(v["replica_check"].as_str().unwrap().starts_with("ok"));
    for k in [
        "committed_per_s",
        "abort_rate",
        "latency_us_p50",
        "latency_us_p99",
        "latency_us_p999",
        "packets_sent",
    ] {
        assert!(v[k].is_number(), "{k} missing");
    }
}
