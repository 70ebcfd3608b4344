//! `splitkv node` with `[membership] kind = "etcd"` (feature `etcd`) against
//! a real etcd on loopback: etcd unreachable at start is one line and exit
//! 2; three node processes hold leases (epoch 1 in `/status`); a SIGKILLed
//! node is configured out by the others once its lease runs out (epoch 2);
//! with etcd killed, the survivors keep serving until their leases run out,
//! then fail-stop (a log line, exit 3).

#[path = "../../tests/etcd_support/mod.rs"]
mod etcd_support;
mod support_deploy;

use etcd_support::{free_port, Etcd};
use std::time::{Duration, Instant};
use support_deploy::*;

const STARTUP: Duration = Duration::from_secs(15);
/// Longest wait for a membership change seen in `/status`.
const CHANGE: Duration = Duration::from_secs(8);

fn membership(endpoint: &str) -> String {
    format!("[membership]\nkind = \"etcd\"\nendpoints = [\"{endpoint}\"]\nlease_ttl_s = 1\n")
}

#[test]
fn etcd_unreachable_at_start_is_one_line_and_exit_2() {
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    let file = cluster_file(1, 1, &membership(&endpoint));
    let out = splitkv(&["node", "--config", file.path.to_str().unwrap(), "--id", "0"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let lines: Vec<_> = err
        .lines()
        .filter(|l| l.contains("etcd unreachable at"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains(&endpoint), "{err}");
}

/// Polls node `i`'s `/status` until its membership satisfies `ok`.
fn wait_membership(file: &ClusterFile, i: usize, ok: impl Fn(&serde_json::Value) -> bool) {
    let t0 = Instant::now();
    loop {
        let s = wait_status(file.controls[i], STARTUP);
        if ok(&s["membership"]) {
            return;
        }
        assert!(t0.elapsed() < CHANGE, "node {i}: {}", s["membership"]);
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn nodes_hold_leases_configure_out_a_killed_node_and_fail_stop_without_etcd() {
    let mut etcd = Etcd::start();
    let file = cluster_file(3, 2, &membership(&etcd.endpoint));
    let mut nodes: Vec<NodeProc> = (0..3).map(|i| spawn_node(&file, i)).collect();
    for i in 0..3 {
        wait_membership(&file, i, |m| m["kind"] == "etcd" && m["epoch"] == 1);
    }
    signal(&nodes[2], libc::SIGKILL);
    let t_sigkill = Instant::now();
    let _ = wait_exit(&mut nodes[2], STARTUP);
    for i in 0..2 {
        wait_membership(&file, i, |m| m["epoch"] == 2 && m["live"] == 0b011);
    }
    eprintln!(
        "SIGKILL to the new configuration in both survivors' status (TTL 1 s): {} ms",
        t_sigkill.elapsed().as_millis()
    );
    etcd.kill();
    let t_kill = Instant::now();
    for (i, node) in nodes.iter_mut().take(2).enumerate() {
        let status = wait_exit(node, CHANGE);
        let mut err = String::new();
        std::io::Read::read_to_string(node.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(3), "node {i}: {err}");
        assert!(err.contains("fail-stop"), "node {i}: {err}");
    }
    // Not before a lease could run out (TTL 1 s less the guard and drift).
    assert!(
        t_kill.elapsed() >= Duration::from_millis(500),
        "{:?}",
        t_kill.elapsed()
    );
}
