//! `--clients external`: each node's workload client runs as a
//! `splitkv-app-client` process attached to the node's application socket,
//! and every check runs as with in-node clients (money and replicas for
//! Smallbank, strict serializability and lost commits for the history
//! workloads, from the clients' own recordings). A missing client program
//! and an api the external client does not run are refused with one line,
//! exit 2.

mod support_deploy;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Bound on one bench run (a second of load plus start-up and checks).
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs `cmd` to its end within `timeout` (killed past it), output captured.
fn run_within(mut cmd: Command, timeout: Duration) -> Output {
    let out_path = std::env::temp_dir().join(format!(
        "splitkv-ext-test-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let (out_file, err_file) = (
        std::fs::File::create(out_path.with_extension("out")).unwrap(),
        std::fs::File::create(out_path.with_extension("err")).unwrap(),
    );
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out_file)
        .stderr(err_file)
        .spawn()
        .expect("start");
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} took more than {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |ext| {
        let p = out_path.with_extension(ext);
        let b = std::fs::read(&p).unwrap();
        let _ = std::fs::remove_file(&p);
        b
    };
    Output {
        status,
        stdout: read("out"),
        stderr: read("err"),
    }
}

fn splitkv(args: &[&str]) -> Output {
    support_deploy::client_program();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_splitkv"));
    cmd.args(args);
    run_within(cmd, RUN_TIMEOUT)
}

#[test]
fn smallbank_with_external_clients_passes_the_money_and_replica_checks() {
    let out = splitkv(&[
        "bench",
        "smallbank",
        "--clients",
        "external",
        "--nodes",
        "3",
        "--accounts-per-node",
        "500",
        "--duration",
        "1s",
        "--warmup",
        "200ms",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["committed"].as_u64().unwrap() > 0, "{report}");
    for check in ["money_check", "replica_check"] {
        let verdict = report[check].as_str().unwrap();
        assert!(verdict.starts_with("ok"), "{check}: {report}");
    }
    assert!(stderr.contains("per committed transaction"), "{stderr}");
}

#[test]
fn history_workloads_with_external_clients_pass_their_checks() {
    for workload in ["list-append", "register"] {
        let out = splitkv(&[
            "bench",
            workload,
            "--clients",
            "external",
            "--transactions",
            "300",
            "--json",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{workload}: {stderr}");
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["submitted"], 900, "{workload}: {report}");
        assert!(report["committed"].as_u64().unwrap() > 0, "{report}");
        assert_eq!(report["history_valid"], true, "{workload}: {report}");
        let lost = report["lost_commit_check"].as_str().unwrap();
        assert!(lost.starts_with("ok"), "{workload}: {report}");
    }
}

#[test]
fn a_missing_client_program_or_an_api_it_does_not_run_is_refused() {
    let dir = std::env::temp_dir().join(format!("splitkv-ext-lonely-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lonely = dir.join("splitkv");
    std::fs::copy(env!("CARGO_BIN_EXE_splitkv"), &lonely).unwrap();
    let mut cmd = Command::new(&lonely);
    cmd.args([
        "bench",
        "smallbank",
        "--clients",
        "external",
        "--duration",
        "1s",
    ]);
    let out = run_within(cmd, RUN_TIMEOUT);
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cargo build --release -p splitkv-app-client"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    let out = splitkv(&[
        "bench",
        "register",
        "--clients",
        "external",
        "--api",
        "txn",
        "--transactions",
        "10",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--api shipped"), "{err}");
}
