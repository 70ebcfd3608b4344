//! `splitkv node`: one node process serves `/status` and `/metrics`;
//! control calls without the token change nothing (401); SIGTERM drains a
//! running node and exits 0; malformed cluster files and flags are one line
//! and exit 2.

mod support_deploy;

use std::time::Duration;
use support_deploy::*;

const STARTUP: Duration = Duration::from_secs(15);
const EXIT: Duration = Duration::from_secs(20);

#[test]
fn one_node_serves_status_and_metrics_and_refuses_calls_without_the_token() {
    let file = cluster_file(1, 1, "");
    let mut node = spawn_node(&file, 0);
    let addr = file.controls[0];
    let status = wait_status(addr, STARTUP);
    assert_eq!(status["node"], 0, "{status}");
    assert_eq!(status["cluster"], 5, "{status}");
    assert!(status["incarnation"].as_u64().unwrap() > 0, "{status}");
    assert_eq!(status["state"], "idle", "{status}");
    let (code, metrics) = http(addr, "GET", "/metrics", None, "").unwrap();
    assert_eq!(code, 200);
    assert!(
        metrics.contains("splitkv_transactions_total") && metrics.contains("node=\"0\""),
        "{metrics}"
    );
    let load =
        r#"{"version":1,"workload":{"kind":"smallbank","accounts":100,"hot_accounts":null}}"#;
    for token in [None, Some("wrong")] {
        let (code, _) = http(addr, "POST", "/load", token, load).unwrap();
        assert_eq!(code, 401, "token {token:?}");
    }
    assert_eq!(
        wait_status(addr, STARTUP)["state"],
        "idle",
        "nothing loaded"
    );
    let (code, body) = http(addr, "POST", "/load", Some(TOKEN), load).unwrap();
    assert_eq!(code, 200, "{body}");
    assert_eq!(wait_status(addr, STARTUP)["state"], "loaded");
    let status = wait_status(addr, STARTUP);
    assert_eq!(status["nic"]["mode"], "serving", "{status}");
    signal(&node, libc::SIGTERM);
    assert!(wait_exit(&mut node, EXIT).success());
}

#[test]
fn sigterm_drains_a_running_node_and_exits_0() {
    let file = cluster_file(1, 1, "");
    let mut node = spawn_node(&file, 0);
    let addr = file.controls[0];
    wait_status(addr, STARTUP);
    let load =
        r#"{"version":1,"workload":{"kind":"smallbank","accounts":200,"hot_accounts":null}}"#;
    assert_eq!(
        http(addr, "POST", "/load", Some(TOKEN), load).unwrap().0,
        200
    );
    let start = r#"{"version":1,"seed":3,"inflight":8,"budget":null,"max_tries":10,"warmup_ms":0,"run_ms":null}"#;
    let (code, body) = http(addr, "POST", "/workload/start", Some(TOKEN), start).unwrap();
    assert_eq!(code, 200, "{body}");
    // Running until stopped: wait until it has committed something.
    let t0 = std::time::Instant::now();
    loop {
        let s = wait_status(addr, STARTUP);
        assert_eq!(s["state"], "running", "{s}");
        if s["transactions"]["committed"].as_u64().unwrap_or(0) > 0 {
            break;
        }
        assert!(t0.elapsed() < STARTUP, "nothing committed: {s}");
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(&node, libc::SIGTERM);
    let status = wait_exit(&mut node, EXIT);
    let mut err = String::new();
    std::io::Read::read_to_string(node.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{status}: {err}");
    assert!(err.contains("draining") && err.contains("drained"), "{err}");
}

#[test]
fn malformed_cluster_files_and_flags_exit_2_with_one_line() {
    let good = cluster_file(3, 3, "");
    let bad_replication = cluster_file(3, 4, "");
    let unknown_field = cluster_file(1, 1, "colour = \"blue\"");
    let missing = good.dir.path().join("missing.toml");
    let good_path = good.path.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "node",
                "--config",
                bad_replication.path.to_str().unwrap(),
                "--id",
                "0",
            ],
            "replication",
        ),
        (
            vec![
                "node",
                "--config",
                unknown_field.path.to_str().unwrap(),
                "--id",
                "0",
            ],
            "colour",
        ),
        (
            vec!["node", "--config", missing.to_str().unwrap(), "--id", "0"],
            "missing.toml",
        ),
        (vec!["node", "--config", good_path, "--id", "7"], "--id"),
        (
            vec!["node", "--config", good_path, "--id", "0", "--threads", "3"],
            "--threads",
        ),
        (vec!["node", "--id", "0"], "required"),
        (
            vec![
                "node",
                "--config",
                good_path,
                "--id",
                "0",
                "--data-address",
                "x",
            ],
            "--data-address",
        ),
        (
            // A moved data address needs a membership that publishes it.
            vec![
                "node",
                "--config",
                good_path,
                "--id",
                "0",
                "--data-address",
                "127.0.0.2:7000",
            ],
            "etcd",
        ),
        (
            vec![
                "node",
                "--config",
                good_path,
                "--id",
                "0",
                "--control-address",
                "10.0.0.1:7000",
            ],
            "--control-address: node[0].control",
        ),
        (vec!["bench", "smallbank", "--spawn"], "required"),
        (
            vec![
                "bench",
                "list-append",
                "--cluster",
                bad_replication.path.to_str().unwrap(),
            ],
            "replication",
        ),
    ];
    for (args, needle) in cases {
        let out = splitkv(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(
            err.trim().lines().count(),
            1,
            "{args:?}: one line, got {err}"
        );
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn a_bench_against_nodes_that_are_not_running_is_one_line_and_exit_2() {
    let file = cluster_file(3, 3, "");
    let out = splitkv(&[
        "bench",
        "smallbank",
        "--cluster",
        file.path.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("node 0") && err.contains("unreachable"),
        "{err}"
    );
}

#[test]
fn readme_usage_of_node_lists_the_flags_of_its_help() {
    let readme = include_str!("../../../README.md");
    let usage = readme
        .split("```")
        .find(|b| b.trim_start().starts_with("splitkv node "))
        .expect("usage block of splitkv node");
    let mut documented: Vec<&str> = usage
        .split_whitespace()
        .filter(|w| w.trim_start_matches('[').starts_with("--"))
        .map(|w| w.trim_start_matches('['))
        .collect();
    let help = String::from_utf8(splitkv(&["node", "--help"]).stdout).unwrap();
    let mut flags: Vec<&str> = help
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("--") || l.starts_with("-h,"))
        .filter_map(|l| l.split([' ', ',']).find(|w| w.starts_with("--")))
        .filter(|f| !["--help", "--version"].contains(f))
        .collect();
    documented.sort();
    flags.sort();
    assert_eq!(documented, flags, "README vs --help");
    for (flag, default) in [("--threads", "2"), ("--seed", "1")] {
        assert!(usage.contains(&format!("[{flag} {default}]")), "{usage}");
        assert!(help.contains(&format!("[default: {default}]")), "{help}");
    }
}

#[test]
fn post_drain_needs_the_token_and_then_stops_the_node_with_exit_0() {
    let file = cluster_file(1, 1, "");
    let mut node = spawn_node(&file, 0);
    let addr = file.controls[0];
    wait_status(addr, STARTUP);
    assert_eq!(http(addr, "POST", "/drain", None, "").unwrap().0, 401);
    std::thread::sleep(Duration::from_millis(100));
    assert!(node.try_wait().unwrap().is_none(), "still running");
    assert_eq!(wait_status(addr, STARTUP)["state"], "idle");
    assert_eq!(
        http(addr, "POST", "/drain", Some(TOKEN), "").unwrap().0,
        200
    );
    assert!(wait_exit(&mut node, EXIT).success());
}
