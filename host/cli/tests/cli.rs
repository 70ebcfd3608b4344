//! The `splitkv` binary: bad input is refused before anything starts (exit 2,
//! one line), a panicking thread exits 3 with its message, a short real run
//! passes both checks, a list-append run writes a history the checker
//! accepts, `check history` exits 0/1/2, and the README's usage text matches
//! `--help`, and output into a closed pipe ends quietly.

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
        (&["--max-tries", "0"], "--max-tries"),
        (&["--inflight", "0"], "--inflight"),
        (&["--table", "btree"], "btree"),
        (&["--warmup", "soon"], "soon"),
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
    for args in [
        &["bench", "nosuchworkload"][..],
        &["bench", "smallbank", "--duration", "ten seconds"],
        &["bench", "lookup", "--segment-slots", "3"],
        &["bench", "lookup", "--d-max", "0"],
        &["bench", "list-append", "--keys", "1"],
        &["bench", "list-append", "--nodes", "3", "--replication", "4"],
        &["bench", "register", "--inflight", "0"],
        &["bench", "register", "--shape", "zigzag"],
        &["bench", "micro", "--gets", "0"],
        &["bench", "micro", "--gets", "5", "--puts", "4"],
        &[
            "bench", "micro", "--gets", "4", "--puts", "2", "--keys", "5",
        ],
        &["bench", "micro", "--shape", "mixed"],
        &["check", "history"],
        &["check", "history", "f.jsonl", "--model", "graph"],
    ] {
        let out = splitkv(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}

/// The Dnl rows run in the simulator under every mix but the NIC-only
/// faults (a Dnl NIC runtime restarting alone is not built): nic-crash and
/// chaos are refused before anything runs, exit 2, one line.
#[test]
fn dnl_with_nic_faults_exits_2_with_the_reason() {
    for (protocol, faults) in ["dnl4", "dnl2", "dnl1"]
        .into_iter()
        .flat_map(|p| ["nic-crash", "chaos"].map(|f| (p, f)))
    {
        let args = ["sim", "--protocol", protocol, "--faults", faults];
        let out = splitkv(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("restarting alone"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "nothing ran");
    }
}

/// `--protocol` names every protocol on `sim` and every bench that runs
/// one; an unknown name is clap's refusal: exit 2, one line with the
/// reason, before anything runs.
#[test]
fn unknown_protocols_exit_2_with_the_reason() {
    for sub in [
        &["bench", "smallbank"][..],
        &["bench", "list-append"],
        &["bench", "register"],
        &["bench", "micro"],
        &["sim"],
    ] {
        for protocol in ["paxos", "dnl3"] {
            let mut args = sub.to_vec();
            args.extend_from_slice(&["--protocol", protocol]);
            let out = splitkv(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
            assert!(err.contains(protocol), "{args:?}: {err}");
            assert!(out.stdout.is_empty(), "nothing ran");
        }
    }
}

/// Fault flags that need a membership which admits new incarnations are
/// refused at once on a cluster file without one (the shipped static
/// example), before any node is reached: one line naming the flag, exit 2.
#[test]
fn restart_and_replace_need_etcd_membership() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/cluster-3-udp.toml"
    );
    for (flag, node_flags) in [
        (
            "--restart",
            ["--spawn", "--kill", "1@1", "--restart", "1@2"],
        ),
        (
            "--replace",
            ["--spawn", "--kill", "1@1", "--replace", "1@2"],
        ),
    ] {
        let mut args = vec!["bench", "smallbank", "--cluster", file];
        args.extend_from_slice(&node_flags);
        let started = std::time::Instant::now();
        let out = splitkv(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(flag) && err.contains("etcd"), "{err}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "refused before anything starts, not after a timeout"
        );
    }
}

#[test]
fn a_panicking_polling_thread_exits_3_at_once_with_its_message() {
    let t0 = std::time::Instant::now();
    let out = splitkv(&[
        "bench",
        "smallbank",
        "--accounts-per-node",
        "1000",
        "--duration",
        "60s",
        "--inject-panic",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("injected panic"), "{err}");
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(30),
        "did not wait out --duration"
    );
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
        "--warmup",
        "100ms",
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
    assert!(v["completed"].as_u64().unwrap() >= v["committed"].as_u64().unwrap());
    assert_eq!(v["max_tries"].as_u64(), Some(10));
    assert!(v["balance_reads"].as_u64().unwrap() > 0);
    assert!(v["messages_per_packet"].as_f64().unwrap() >= 1.0);
    assert!(v["money_check"].as_str().unwrap().starts_with("ok"));
    assert!(v["replica_check"].as_str().unwrap().starts_with("ok"));
    for k in [
        "committed_per_s",
        "completed_per_s",
        "conflict_rate",
        "retries_per_committed",
        "latency_us_p50",
        "latency_us_p99",
        "latency_us_p999",
        "packets_sent",
    ] {
        assert!(v[k].is_number(), "{k} missing");
    }
}

/// The usage block of `splitkv NAME` (`NAME` such as `bench smallbank`)
/// under the README heading that names it.
fn readme_usage(name: &str) -> String {
    let readme = include_str!("../../../README.md");
    let heading = format!("`splitkv {name}`");
    let section = readme
        .lines()
        .position(|l| l.starts_with("### ") && l.contains(&heading))
        .expect("README section");
    // The first code block of the section that shows this command.
    let rest = readme
        .lines()
        .skip(section + 1)
        .collect::<Vec<_>>()
        .join("\n");
    rest.split("```")
        .skip(1)
        .step_by(2)
        .map(|b| b[b.find('\n').unwrap_or(0) + 1..].to_string())
        .find(|b| b.trim_start().starts_with(&format!("splitkv {name}")))
        .expect("usage block")
}

/// `(flag, shown value)` pairs of a usage text like `[--nodes 3] [--json]`.
fn readme_flags(usage: &str) -> Vec<(String, Option<String>)> {
    usage
        .split('[')
        .skip(1)
        .map(|item| {
            let item = item.split(']').next().unwrap();
            let mut words = item.split_whitespace();
            let flag = words.next().unwrap().to_string();
            (flag, words.next().map(str::to_string))
        })
        .collect()
}

#[test]
fn readme_usage_matches_help() {
    for name in [
        "bench smallbank",
        "bench list-append",
        "bench register",
        "bench micro",
        "bench lookup",
        "check history",
    ] {
        let usage = readme_usage(name);
        assert!(
            usage.trim_start().starts_with(&format!("splitkv {name}")),
            "{usage}"
        );
        let mut args: Vec<&str> = name.split(' ').collect();
        args.push("--help");
        let help = String::from_utf8(splitkv(&args).stdout).unwrap();
        // Each option of --help: its flag and its text up to the next option.
        let mut options: Vec<(String, String)> = Vec::new();
        for line in help.lines() {
            let t = line.trim_start();
            if t.starts_with("--") || t.starts_with("-h,") || t.starts_with("-V,") {
                let flag = t.split([' ', ',']).find(|w| w.starts_with("--")).unwrap();
                options.push((flag.to_string(), format!("{t} ")));
            } else if let Some(o) = options.last_mut() {
                o.1.push_str(t);
                o.1.push(' ');
            }
        }
        let documented = readme_flags(&usage);
        let mut in_readme: Vec<&str> = documented.iter().map(|(f, _)| f.as_str()).collect();
        let mut in_help: Vec<&str> = options
            .iter()
            .map(|(f, _)| f.as_str())
            .filter(|f| !["--help", "--version"].contains(f))
            .collect();
        in_readme.sort();
        in_help.sort();
        assert_eq!(in_readme, in_help, "{name}: README flags vs --help");
        for (flag, shown) in &documented {
            let text = &options.iter().find(|(f, _)| f == flag).unwrap().1;
            let Some(shown) = shown else { continue };
            if shown.chars().all(|c| c.is_ascii_uppercase()) {
                continue; // a placeholder such as N
            }
            if shown.contains('|') {
                let values = shown.replace('|', ", ");
                assert!(
                    text.contains(&format!("[possible values: {values}]")),
                    "{name} {flag}: README {shown}, help: {text}"
                );
                continue;
            }
            assert!(
                text.contains(&format!("[default: {shown}]")),
                "{name} {flag}: README shows {shown}, help: {text}"
            );
        }
    }
}

/// A fresh path in the test's temporary directory.
fn tmp(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

/// Dandelion's O(4,2): every transaction of the history reads four
/// registers and then writes two others, and the run passes its checks.
#[test]
fn micro_runs_gets_then_puts_and_passes_the_history_checks() {
    let path = tmp("cli-micro.jsonl");
    let _ = std::fs::remove_file(&path);
    let file = path.to_str().unwrap();
    let out = splitkv(&[
        "bench",
        "micro",
        "--gets",
        "4",
        "--puts",
        "2",
        "--keys",
        "64",
        "--transactions",
        "300",
        "--history",
        file,
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["workload"], "register");
    assert_eq!(v["shape"], "O(4,2)");
    assert_eq!(v["keys"], 64);
    assert_eq!(v["submitted"].as_u64(), Some(900));
    assert_eq!(v["history_valid"], true);
    assert!(v["committed"].as_u64().unwrap() > 0);
    let read = splitkv_check::history::History::read_jsonl(std::io::BufReader::new(
        std::fs::File::open(&path).expect("history written"),
    ))
    .expect("Jepsen-shaped JSON lines");
    for op in read
        .ops
        .iter()
        .filter(|o| o.kind == splitkv_check::history::OpType::Invoke)
    {
        let kinds: Vec<bool> = op
            .value
            .iter()
            .map(|m| matches!(m, splitkv_check::history::MicroOp::Read { .. }))
            .collect();
        assert_eq!(kinds, [true, true, true, true, false, false], "{op:?}");
    }
}

#[test]
fn list_append_writes_a_history_the_checker_accepts() {
    let path = tmp("cli-list-append.jsonl");
    let _ = std::fs::remove_file(&path);
    let file = path.to_str().unwrap();
    let out = splitkv(&[
        "bench",
        "list-append",
        "--transactions",
        "400",
        "--keys",
        "4",
        "--history",
        file,
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["workload"], "list-append");
    assert_eq!(v["submitted"].as_u64(), Some(1_200));
    assert_eq!(v["history_valid"], true);
    assert!(v["committed"].as_u64().unwrap() > 0);
    assert!(v["lost_commit_check"].as_str().unwrap().starts_with("ok"));
    // The written file, read and checked by the project's checker.
    let read = splitkv_check::history::History::read_jsonl(std::io::BufReader::new(
        std::fs::File::open(&path).expect("history written"),
    ))
    .expect("Jepsen-shaped JSON lines");
    assert_eq!(read.len(), 2 * 1_200, "an invoke and a completion each");
    let opts = splitkv_check::checker::CheckOptions {
        model: splitkv_check::checker::Model::ListAppend,
        ..Default::default()
    };
    let report = splitkv_check::checker::check(&read, &opts).expect("well-formed");
    assert!(report.valid, "{report}");
    // And through the binary's own check subcommand.
    let out = splitkv(&["check", "history", file, "--model", "list-append"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("valid"));
}

#[test]
fn register_write_skew_run_passes_the_history_checks() {
    let out = splitkv(&[
        "bench",
        "register",
        "--transactions",
        "300",
        "--keys",
        "4",
        "--shape",
        "write-skew",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["workload"], "register");
    assert_eq!(v["submitted"].as_u64(), Some(900));
    assert_eq!(v["history_valid"], true);
    assert_eq!(v["indeterminate"].as_u64(), Some(0));
    assert!(v["history_check"].as_str().unwrap().starts_with("valid"));
}

#[test]
fn check_history_exits_1_on_anomalies_and_2_on_bad_input() {
    // T1 appends 1 to key 1 and completes; T2 starts after and reads key 1
    // empty (T3, concurrent with both, read [1]: the version order): a stale
    // read, which plain serializability allows and strict serializability
    // does not (G-single-realtime).
    let stale = [
        r#"{"index":0,"type":"invoke","f":"txn","process":0,"time":0,"value":[["append",1,1]]}"#,
        r#"{"index":1,"type":"invoke","f":"txn","process":2,"time":0,"value":[["r",1,null]]}"#,
        r#"{"index":2,"type":"ok","f":"txn","process":0,"time":10,"value":[["append",1,1]]}"#,
        r#"{"index":3,"type":"invoke","f":"txn","process":1,"time":20,"value":[["r",1,null]]}"#,
        r#"{"index":4,"type":"ok","f":"txn","process":1,"time":30,"value":[["r",1,[]]]}"#,
        r#"{"index":5,"type":"ok","f":"txn","process":2,"time":100,"value":[["r",1,[1]]]}"#,
    ];
    let path = tmp("cli-stale-read.jsonl");
    std::fs::write(&path, stale.join("\n") + "\n").unwrap();
    let file = path.to_str().unwrap();
    let out = splitkv(&["check", "history", file]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("INVALID"), "{text}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("anomalies found"));
    let out = splitkv(&["check", "history", file, "--no-realtime"]);
    assert_eq!(out.status.code(), Some(0), "serializable without real time");
    let bad = tmp("cli-bad-history.jsonl");
    std::fs::write(&bad, "not json\n").unwrap();
    for f in [bad.to_str().unwrap(), "/nonexistent/history.jsonl"] {
        let out = splitkv(&["check", "history", f]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{f}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

/// `splitkv sim … | true`: the reader closes the pipe before the summary is
/// written. The binary ends quietly with exit 0 (as a tool stopped by
/// SIGPIPE would) instead of panicking with exit 3.
#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_splitkv"))
        .args(["sim", "--seeds", "1..=2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run splitkv");
    drop(child.stdout.take()); // the reader goes away before any output
    let out = child.wait_with_output().expect("wait for splitkv");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {err}");
    assert!(!err.contains("panicked"), "stderr: {err}");
}
