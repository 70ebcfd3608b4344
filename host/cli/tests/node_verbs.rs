//! `splitkv node` with `[transport] kind = "verbs"` on a machine without an
//! RDMA device: built with the feature `verbs` (scripts/test's verbs stage:
//! `--features verbs --test node_verbs`), opening the device fails and the
//! node ends with one line naming the cause ("no RDMA device …") and exit
//! code 2; built without it (the default), the node ends with one line
//! saying the build lacks verbs, exit code 2. Either way before it reaches
//! for etcd (the transport comes first: its queue pair number is what the
//! node publishes there), so the file's etcd endpoint is never dialled.
//! Skipped, with a line, where an RDMA device exists.

mod support_deploy;

use std::process::Command;
use std::time::Duration;
use support_deploy::{cluster_file, wait_exit};

/// Longest a node refusing its verbs set-up may take to exit.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether the kernel lists an RDMA device.
fn rdma_device_present() -> bool {
    std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some())
}

#[test]
fn a_verbs_node_without_a_device_or_without_verbs_exits_2_with_one_line() {
    if cfg!(feature = "verbs") && rdma_device_present() {
        println!(
            "node_verbs skipped: this machine has an RDMA device (see the README's RDMA section)"
        );
        return;
    }
    // Port 9 (discard) on loopback: nothing answers, and nothing should
    // ever be asked.
    let file = cluster_file(
        3,
        3,
        "[transport]\nkind = \"verbs\"\n\n[membership]\nkind = \"etcd\"\n\
         endpoints = [\"http://127.0.0.1:9\"]\nlease_ttl_s = 2\n",
    );
    let err_path = file.dir.path().join("node.err");
    let mut node = Command::new(env!("CARGO_BIN_EXE_splitkv"))
        .args(["node", "--config", file.path.to_str().unwrap(), "--id", "0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("spawn splitkv node");
    let status = wait_exit(&mut node, REFUSAL_TIMEOUT);
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    assert_eq!(status.code(), Some(2), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(lines.len(), 1, "one error line: {err}");
    let line = lines[0];
    assert!(line.starts_with("error: node[0].transport"), "{err}");
    if cfg!(feature = "verbs") {
        assert!(line.contains("no RDMA device"), "{err}");
    } else {
        assert!(line.contains("needs a build with RDMA verbs"), "{err}");
    }
    assert!(
        !err.contains("membership"),
        "etcd was not reached for: {err}"
    );
}
