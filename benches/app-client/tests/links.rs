//! The external client links nothing of the store: its normal dependency
//! tree (as `cargo tree` resolves it for this workspace) has
//! `splitkv-client` and `splitkv-workloads` and none of `splitkv-host`,
//! `splitkv-nic` or `splitkv-bench`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Bound on `cargo tree` (it reads the lock file and the manifests only).
const CARGO_TREE_TIMEOUT: Duration = Duration::from_secs(120);

#[test]
fn the_client_program_depends_on_no_store_crate() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = std::env::temp_dir().join(format!(
        "splitkv-app-client-tree-{}.txt",
        std::process::id()
    ));
    let file = std::fs::File::create(&out).unwrap();
    let mut child = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-p",
            "splitkv-app-client",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(file)
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + CARGO_TREE_TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cargo tree took more than {CARGO_TREE_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let tree = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    assert!(status.success(), "cargo tree failed:\n{tree}");
    let crates: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for wanted in ["splitkv-app-client", "splitkv-client", "splitkv-workloads"] {
        assert!(crates.contains(&wanted), "{wanted} missing from:\n{tree}");
    }
    for store in [
        "splitkv-host",
        "splitkv-nic",
        "splitkv-bench",
        "splitkv-sim",
    ] {
        assert!(!crates.contains(&store), "{store} is linked:\n{tree}");
    }
}
