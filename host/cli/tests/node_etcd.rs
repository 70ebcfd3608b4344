//! `splitkv node` with `[membership] kind = "etcd"` (feature `etcd`) against
//! a real etcd on loopback: etcd unreachable at start is one line and exit
//! 2; three node processes hold leases (epoch 1 in `/status`); a SIGKILLed
//! node is configured out by the others once its lease runs out (epoch 2);
//! the survivors then load Smallbank and commit; with etcd killed they keep
//! committing until their leases run out, then their polling threads fence
//! them (no commit after, `/status` says why) and they fail-stop (a log
//! line, exit 4: a fail-stop, not an internal error).

#[path = "../../tests/etcd_support/mod.rs"]
mod etcd_support;
mod support_deploy;

use etcd_support::{free_port, membership_toml, Etcd};
use std::time::{Duration, Instant};
use support_deploy::*;

const STARTUP: Duration = Duration::from_secs(15);
/// Longest wait for a membership change seen in `/status`.
const CHANGE: Duration = Duration::from_secs(8);

#[test]
fn etcd_unreachable_at_start_is_one_line_and_exit_2() {
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    let file = cluster_file(1, 1, &membership_toml(&endpoint));
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

/// Loads Smallbank on `nodes` and starts their clients (until stopped).
fn load_and_start(file: &ClusterFile, nodes: &[usize]) {
    let load =
        r#"{"version":1,"workload":{"kind":"smallbank","accounts":500,"hot_accounts":null}}"#;
    let start = r#"{"version":1,"seed":5,"inflight":8,"budget":null,"max_tries":10,"warmup_ms":0,"run_ms":null}"#;
    for (path, body) in [("/load", load), ("/workload/start", start)] {
        for &i in nodes {
            let (code, answer) = http(file.controls[i], "POST", path, Some(TOKEN), body).unwrap();
            assert_eq!(code, 200, "node {i} {path}: {answer}");
        }
    }
}

fn committed(s: &serde_json::Value) -> u64 {
    s["transactions"]["committed"].as_u64().unwrap_or(0)
}

/// Commits a node makes before etcd is killed.
const COMMITS_MIN: u64 = 50;

/// Node `i`'s `/status` read every few ms until it stops answering (the
/// process exited), with the time since `t0` of each.
fn statuses_until_exit(
    file: &ClusterFile,
    i: usize,
    t0: Instant,
) -> Vec<(Duration, serde_json::Value)> {
    let mut out = Vec::new();
    while t0.elapsed() < CHANGE {
        let Ok((200, body)) = http(file.controls[i], "GET", "/status", None, "") else {
            break;
        };
        out.push((
            t0.elapsed(),
            serde_json::from_str(&body).expect("status is JSON"),
        ));
        std::thread::sleep(Duration::from_millis(10));
    }
    out
}

/// With etcd gone, node `i` committed until its lease ran out, then its
/// polling thread fenced it: the first status that shows the agent stopped
/// (published once the runtime was polled no more) holds the final count.
fn commits_went_on_until_the_lease_ran_out(
    i: usize,
    before: u64,
    statuses: &[(Duration, serde_json::Value)],
) {
    let fenced = statuses
        .iter()
        .position(|(_, s)| !s["membership"]["agent"]["stopped"].is_null())
        .unwrap_or_else(|| panic!("node {i}: never seen fenced: {:?}", statuses.last()));
    let (at, s) = &statuses[fenced];
    let m = &s["membership"];
    assert!(
        m["agent"]["stopped"]
            .as_str()
            .unwrap()
            .contains("lease ran out"),
        "node {i}: {m}"
    );
    assert!(m["fail_stop"].is_string(), "node {i}: {m}");
    assert_eq!(m["agent"]["lease_expired"], 1, "node {i}: {m}");
    let last = committed(s);
    assert!(
        last >= before + COMMITS_MIN,
        "node {i}: {before} committed when etcd died, {last} when fenced at {at:?}"
    );
    // Fenced once its lease ran out, not at once (a lease renewed every
    // third of 1 s has at least ~0.5 s left when etcd dies).
    assert!(
        *at >= Duration::from_millis(300),
        "node {i} fenced at {at:?}"
    );
    for (later, s) in &statuses[fenced..] {
        assert_eq!(
            committed(s),
            last,
            "node {i} committed after its fence ({later:?})"
        );
    }
    eprintln!(
        "node {i}: {} commits after etcd died, fenced {at:?} after (seen in /status)",
        last - before
    );
}

#[test]
fn nodes_hold_leases_configure_out_a_killed_node_and_fail_stop_without_etcd() {
    let mut etcd = Etcd::start();
    let file = cluster_file(3, 2, &membership_toml(&etcd.endpoint));
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
    // The survivors load after the change: their polling threads take the
    // lease over and apply epoch 2 to the runtimes before any transaction.
    // With replication 2 each survivor is also a new backup of a shard node
    // 2 held; they are copied and reported caught up (re-replication), one more
    // epoch each, before etcd dies: the degree is restored.
    load_and_start(&file, &[0, 1]);
    for i in 0..2 {
        let t0 = Instant::now();
        loop {
            let s = wait_status(file.controls[i], STARTUP);
            let m = &s["membership"];
            let restored = m["joining"] == 0 && m["short_shards"] == 0;
            if committed(&s) >= COMMITS_MIN && restored && m["runtime_epoch"] == m["epoch"] {
                assert!(m["epoch"].as_u64() >= Some(3), "node {i}: {s}");
                assert_eq!(m["polled_by_node"], true, "node {i}: {s}");
                break;
            }
            assert!(t0.elapsed() < STARTUP, "node {i} committed too little: {s}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let before: Vec<u64> = (0..2)
        .map(|i| committed(&wait_status(file.controls[i], STARTUP)))
        .collect();
    etcd.kill();
    let t_kill = Instant::now();
    let statuses: Vec<_> = std::thread::scope(|s| {
        let polls: Vec<_> = (0..2)
            .map(|i| {
                let file = &file;
                s.spawn(move || statuses_until_exit(file, i, t_kill))
            })
            .collect();
        polls.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, node) in nodes.iter_mut().take(2).enumerate() {
        let status = wait_exit(node, CHANGE);
        let mut err = String::new();
        std::io::Read::read_to_string(node.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(
            status.code(),
            Some(4),
            "node {i}: exit 4 is a fail-stop: {err}"
        );
        assert!(err.contains("fail-stop"), "node {i}: {err}");
        commits_went_on_until_the_lease_ran_out(i, before[i], &statuses[i]);
    }
    // Not before a lease could run out (TTL 1 s less the guard and drift).
    assert!(
        t_kill.elapsed() >= Duration::from_millis(500),
        "{:?}",
        t_kill.elapsed()
    );
}

/// Three node processes of a fresh file (replication 3) on `etcd`, each
/// holding its lease in generation 1, epoch 1.
fn three_serving_on(etcd: &Etcd) -> (ClusterFile, Vec<NodeProc>) {
    let file = cluster_file(3, 3, &membership_toml(&etcd.endpoint));
    let nodes: Vec<NodeProc> = (0..3).map(|i| spawn_node(&file, i)).collect();
    for i in 0..3 {
        wait_membership(&file, i, |m| m["generation"] == 1 && m["epoch"] == 1);
    }
    (file, nodes)
}

/// `splitkv etcd show|clear` on a running then stopped cluster, and a node
/// of another cluster id pointed at this cluster's prefix: `show` names
/// the configuration (epoch, generation, cluster) and each member's lease;
/// `clear` is refused (exit 1) while members hold leases and deletes
/// everything once the nodes drained (exit 0); a node whose file has
/// another `cluster_id` on the same prefix is refused at start with one
/// line naming both (exit 2).
#[test]
fn etcd_show_and_clear_and_another_clusters_node_refused() {
    let etcd = Etcd::start();
    let (file, mut nodes) = three_serving_on(&etcd);
    let path = file.path.to_str().unwrap();
    let out = splitkv(&["etcd", "show", "--config", path]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("configuration: epoch 1, generation 1, cluster 5, 3 nodes, replication 3"),
        "{text}"
    );
    assert_eq!(text.matches("lease ").count(), 3, "{text}");
    let out = splitkv(&["etcd", "show", "--config", path, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["configuration"]["ours"], true, "{v}");
    assert_eq!(v["members"].as_array().map(Vec::len), Some(3), "{v}");

    // Another cluster's node on this prefix.
    let other = std::fs::read_to_string(&file.path)
        .unwrap()
        .replace("cluster_id = 5", "cluster_id = 6")
        .replace("lease_ttl_s = 1", "lease_ttl_s = 1\nprefix = \"splitkv-5\"");
    let other_path = file.dir.path().join("other.toml");
    std::fs::write(&other_path, other).unwrap();
    let out = splitkv(&[
        "node",
        "--config",
        other_path.to_str().unwrap(),
        "--id",
        "0",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("holds the configuration of cluster 5, not of cluster 6"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains("etcdctl del --prefix /splitkv-5/"), "{line}");
    assert!(line.contains("splitkv etcd clear --config FILE"), "{line}");

    let out = splitkv(&["etcd", "clear", "--config", path]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "refused while running: {err}");
    assert!(
        err.contains("hold leases") && err.contains("nothing deleted"),
        "{err}"
    );
    for node in &nodes {
        signal(node, libc::SIGTERM);
    }
    for node in nodes.iter_mut() {
        assert_eq!(wait_exit(node, STARTUP).code(), Some(0));
    }
    // Drained nodes revoked their leases: cleared at once.
    let out = splitkv(&["etcd", "clear", "--config", path]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("keys deleted"), "{text}");
    let out = splitkv(&["etcd", "show", "--config", path]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("configuration: none stored"), "{text}");
    assert!(text.contains("none: no process holds a lease"), "{text}");
}

/// `splitkv status`: exit 0 and "healthy" on three serving nodes (one
/// configuration, every shard at its degree), exit 1 and the reasons once
/// node 2 is SIGKILLed and configured out (it does not answer, shards are
/// short of replicas), `--json` the same as an object, exit 2 on a bad
/// interval, exit 3 once no node answers.
#[test]
fn status_is_healthy_then_degraded_then_unreachable() {
    let etcd = Etcd::start();
    let (file, mut nodes) = three_serving_on(&etcd);
    let path = file.path.to_str().unwrap();
    let status = |extra: &[&str]| {
        let mut args = vec!["status", "--config", path, "--interval", "0.2"];
        args.extend_from_slice(extra);
        splitkv(&args)
    };
    let out = status(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("configuration: etcd, epoch 1, cluster generation 1"),
        "{text}"
    );
    assert!(
        text.contains("shard 2  primary 2  backups 0,1  replicas 3/3"),
        "{text}"
    );
    assert!(text.contains("status: healthy"), "{text}");
    assert_eq!(text.matches("  replica  lease").count(), 3, "{text}");

    signal(&nodes[2], libc::SIGKILL);
    let _ = wait_exit(&mut nodes[2], STARTUP);
    for i in 0..2 {
        wait_membership(&file, i, |m| m["epoch"] == 2);
    }
    let out = status(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}{err}");
    assert!(text.contains("status: DEGRADED"), "{text}");
    assert!(err.contains("node 2 is not a member"), "{err}");
    assert!(err.contains("short of replicas"), "{err}");
    let out = status(&["--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["healthy"], false, "{v}");
    assert_eq!(v["configuration"]["epoch"], 2, "{v}");
    assert_eq!(v["members"][2]["answered"], false, "{v}");
    assert!(
        v["shards"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["short"] == true),
        "{v}"
    );

    let out = status(&["--interval", "0"]);
    assert_eq!(out.status.code(), Some(2));
    for node in nodes.iter().take(2) {
        signal(node, libc::SIGTERM);
    }
    for node in nodes.iter_mut().take(2) {
        let _ = wait_exit(node, STARTUP);
    }
    let out = status(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("no node of"), "{err}");
}
