//! Crash recovery across `splitkv node` processes with etcd membership
//! (feature `etcd`; a CI test of surviving faults deployed): three UDP node
//! processes run Smallbank, one is SIGKILLed mid-run; the survivors reach the
//! next epoch (etcd configures the dead node out once its lease of 1 s runs
//! out), their NIC runtimes run the recovery epoch (Xenic §4.2.1, Dandelion
//! §4.4; counters in `/status`), and their committed counts grow again after
//! it. The real time SIGKILL → epoch change → resumed → first commit after the
//! resume is printed (`--nocapture`), as seen by polling `/status`.
//!
//! Then bad input: a sender with a stale epoch (packets of epoch 1 from the
//! dead node's address and a new incarnation, as a restarted node that
//! skipped the membership would send) keeps sending to a survivor; its
//! packets are dropped and counted (`sessions.drops.old_epoch`) and
//! nothing else changes (epoch, other drop counters, commits go on).

#[path = "../../tests/etcd_support/mod.rs"]
mod etcd_support;
mod support_deploy;

use etcd_support::{membership_toml, Etcd};
use serde_json::Value;
use splitkv_layout::wire::{BodyWriter, MsgHeader, MsgKind, PacketHeader};
use splitkv_layout::{Key, ObjectMeta, TxId};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};
use support_deploy::*;

/// Longest wait for a node's first answer, a load or the first commits.
const STARTUP: Duration = Duration::from_secs(15);
/// Longest wait for the survivors to change epoch and resume after the kill.
const RECOVERY: Duration = Duration::from_secs(10);
/// Longest wait for commits to resume (or go on) once seen to stop.
const COMMITS: Duration = Duration::from_secs(10);
/// How often the test reads `/status` while it times the recovery.
const POLL: Duration = Duration::from_millis(5);
/// Commits each node makes before the kill, and each survivor after it.
const COMMITS_MIN: u64 = 50;
/// Stale packets sent to a survivor.
const STALE_PACKETS: u64 = 64;
/// The node killed (not the recovery leader, which is node 0).
const VICTIM: usize = 2;
/// The cluster id of the test cluster files (`support_deploy`).
const CLUSTER_ID: u32 = 5;

fn status(file: &ClusterFile, i: usize) -> Value {
    wait_status(file.controls[i], STARTUP)
}

fn committed(s: &Value) -> u64 {
    s["transactions"]["committed"].as_u64().unwrap_or(0)
}

fn post(file: &ClusterFile, i: usize, path: &str, body: &str) {
    let (code, answer) = http(file.controls[i], "POST", path, Some(TOKEN), body)
        .unwrap_or_else(|e| panic!("node {i} {path}: {e}"));
    assert_eq!(code, 200, "node {i} {path}: {answer}");
}

/// Loads Smallbank on every node, then starts its client on every node
/// (running until stopped).
fn load_and_start(file: &ClusterFile, nodes: usize) {
    let load =
        r#"{"version":1,"workload":{"kind":"smallbank","accounts":1000,"hot_accounts":null}}"#;
    let start = r#"{"version":1,"seed":7,"inflight":8,"budget":null,"max_tries":10,"warmup_ms":0,"run_ms":null}"#;
    (0..nodes).for_each(|i| post(file, i, "/load", load));
    (0..nodes).for_each(|i| post(file, i, "/workload/start", start));
}

/// Waits until every node of `nodes` has committed at least `min`.
fn wait_commits(file: &ClusterFile, nodes: &[usize], min: u64) {
    let t0 = Instant::now();
    for &i in nodes {
        loop {
            let s = status(file, i);
            if committed(&s) >= min {
                break;
            }
            assert!(t0.elapsed() < STARTUP, "node {i} committed too little: {s}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The data (UDP) address of node `id` in the cluster file.
fn data_addr(file: &ClusterFile, id: usize) -> SocketAddr {
    let text = std::fs::read_to_string(&file.path).expect("read the cluster file");
    let node = text
        .split("[[node]]")
        .find(|n| n.contains(&format!("id = {id}\n")))
        .expect("the node's table");
    let data = node
        .lines()
        .find_map(|l| l.strip_prefix("data = \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("the node's data address");
    data.parse().expect("a socket address")
}

/// Real times after the SIGKILL (the first `/status` poll that showed each).
#[derive(Debug, Default)]
struct Timeline {
    epoch: Option<Duration>,
    resumed: Option<Duration>,
    first_commit: Option<Duration>,
}

/// Polls the survivors until both resumed after an epoch change and each
/// committed again since its resume; returns when each step was first seen
/// (the later survivor's time for each).
fn time_recovery(file: &ClusterFile, survivors: &[usize], t_kill: Instant) -> Timeline {
    let mut t = Timeline::default();
    // Per survivor: its committed count when its resume was first seen.
    let mut at_resume: Vec<Option<u64>> = vec![None; survivors.len()];
    let mut epoch_seen = vec![false; survivors.len()];
    let mut committed_again = vec![false; survivors.len()];
    while committed_again.iter().any(|c| !c) {
        assert!(
            t_kill.elapsed() < RECOVERY + COMMITS,
            "no recovery: {t:?} {:?}",
            survivors
                .iter()
                .map(|&i| status(file, i))
                .collect::<Vec<_>>()
        );
        for (k, &i) in survivors.iter().enumerate() {
            let s = status(file, i);
            let r = &s["recovery"];
            epoch_seen[k] |= r["epoch"].as_u64().unwrap_or(0) >= 2;
            if at_resume[k].is_none() && r["epochs_resumed"].as_u64().unwrap_or(0) >= 1 {
                at_resume[k] = Some(committed(&s));
            }
            if let Some(c) = at_resume[k] {
                committed_again[k] |= committed(&s) > c;
            }
        }
        let now = t_kill.elapsed();
        let all = |v: &[bool]| v.iter().all(|&b| b);
        if t.epoch.is_none() && all(&epoch_seen) {
            t.epoch = Some(now);
        }
        let resumed: Vec<bool> = at_resume.iter().map(Option::is_some).collect();
        if t.resumed.is_none() && all(&resumed) {
            t.resumed = Some(now);
        }
        if t.first_commit.is_none() && all(&committed_again) {
            t.first_commit = Some(now);
        }
        std::thread::sleep(POLL);
    }
    t
}

/// One data packet of epoch 1 from a new incarnation of node `src` to
/// node `dst`, numbered `seq` (far from the session's numbers).
fn stale_packet(src: u16, dst: u16, src_incarnation: u32, seq: u32) -> Vec<u8> {
    let mut w = BodyWriter::new();
    w.begin_items(MsgKind::Log, TxId::from_bits(u64::from(seq)));
    w.push_item(&Key::new(0, 1), ObjectMeta(1), b"stale");
    let mut msg = Vec::new();
    MsgHeader::whole(w.kind(), w.bytes().len() as u32).encode(&mut msg);
    msg.extend_from_slice(w.bytes());
    let mut pkt = Vec::new();
    PacketHeader {
        src,
        dst,
        count: 1,
        len: msg.len() as u32,
        cluster_id: CLUSTER_ID,
        src_incarnation,
        epoch: 1,
        seq,
        ..PacketHeader::default()
    }
    .encode(&mut pkt);
    pkt.extend_from_slice(&msg);
    pkt
}

/// The session drop counters other than `old_epoch` (`/status`).
fn other_drops(s: &Value) -> Vec<(String, Value)> {
    let drops = s["sessions"]["drops"].as_object().expect("drops").clone();
    drops
        .into_iter()
        .filter(|(k, _)| k != "old_epoch")
        .collect()
}

fn old_epoch_drops(s: &Value) -> u64 {
    s["sessions"]["drops"]["old_epoch"]
        .as_u64()
        .expect("old_epoch")
}

/// Sends stale packets to survivor `to` and checks they are dropped and
/// counted with nothing else changing.
fn stale_sender_is_ignored(file: &ClusterFile, to: usize, victim_incarnation: u32) {
    let before = status(file, to);
    // The transport takes datagrams from configured peers only: send from
    // the dead node's data address (free since it died).
    let socket = UdpSocket::bind(data_addr(file, VICTIM)).expect("bind the dead node's port");
    let dst = data_addr(file, to);
    for n in 0..STALE_PACKETS {
        let pkt = stale_packet(
            VICTIM as u16,
            to as u16,
            victim_incarnation + 1,
            1 << 30 | n as u32,
        );
        socket.send_to(&pkt, dst).expect("send a stale packet");
        std::thread::sleep(Duration::from_millis(1));
    }
    let t0 = Instant::now();
    let after = loop {
        let s = status(file, to);
        if old_epoch_drops(&s) >= old_epoch_drops(&before) + STALE_PACKETS {
            break s;
        }
        assert!(
            t0.elapsed() < COMMITS,
            "stale packets not counted: before {} now {}",
            before["sessions"],
            s["sessions"]
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(other_drops(&after), other_drops(&before), "{after}");
    assert_eq!(after["recovery"]["epoch"], before["recovery"]["epoch"]);
    assert_eq!(after["membership"]["epoch"], before["membership"]["epoch"]);
    assert_eq!(after["failure"], Value::Null, "{after}");
    wait_commits(file, &[to], committed(&after) + COMMITS_MIN);
}

#[test]
fn a_killed_node_process_is_configured_out_and_the_survivors_recover_and_commit() {
    let etcd = Etcd::start();
    let file = cluster_file(3, 3, &membership_toml(&etcd.endpoint));
    let mut nodes: Vec<NodeProc> = (0..3).map(|i| spawn_node(&file, i)).collect();
    for i in 0..3 {
        let s = status(&file, i);
        assert_eq!(s["membership"]["kind"], "etcd", "{s}");
    }
    load_and_start(&file, 3);
    wait_commits(&file, &[0, 1, 2], COMMITS_MIN);
    let victim_incarnation = status(&file, VICTIM)["incarnation"].as_u64().unwrap() as u32;
    signal(&nodes[VICTIM], libc::SIGKILL);
    let t_kill = Instant::now();
    let _ = wait_exit(&mut nodes[VICTIM], STARTUP);
    let survivors = [0, 1];
    let t = time_recovery(&file, &survivors, t_kill);
    eprintln!(
        "SIGKILL -> epoch 2 in both survivors' runtimes {:?}, -> resumed {:?}, -> first commit after the resume in both {:?} (etcd lease TTL 1 s; /status polled every {POLL:?})",
        t.epoch.unwrap(),
        t.resumed.unwrap(),
        t.first_commit.unwrap()
    );
    for &i in &survivors {
        let s = status(&file, i);
        let (m, r) = (&s["membership"], &s["recovery"]);
        assert_eq!(m["epoch"], 2, "node {i}: {s}");
        assert_eq!(m["live"], 0b011, "node {i}: {s}");
        assert!(r["epochs_begun"].as_u64().unwrap() >= 1, "node {i}: {s}");
        assert!(r["epochs_resumed"].as_u64().unwrap() >= 1, "node {i}: {s}");
        assert!(r["last_resumed_ns"].as_u64().unwrap() > 0, "node {i}: {s}");
        assert!(
            m["agent"]["configurations"].as_u64().unwrap() >= 1,
            "node {i}: {s}"
        );
        assert_eq!(s["failure"], Value::Null, "node {i}: {s}");
        let ns = |k: &str| r[k].as_u64().unwrap();
        let ms = |d: u64| d as f64 / 1e6;
        eprintln!(
            "node {i} (its own clock): recovery epoch begun -> resumed {:.3} ms, resumed -> first commit {:.3} ms",
            ms(ns("last_resumed_ns") - ns("last_begun_ns")),
            ms(ns("first_commit_after_resume_ns").saturating_sub(ns("last_resumed_ns")))
        );
    }
    // Service resumed: the survivors keep committing.
    let now: Vec<u64> = survivors
        .iter()
        .map(|&i| committed(&status(&file, i)))
        .collect();
    for (k, &i) in survivors.iter().enumerate() {
        wait_commits(&file, &[i], now[k] + COMMITS_MIN);
    }
    stale_sender_is_ignored(&file, 0, victim_incarnation);
    // Dropping `nodes` and `etcd` kills every process this test started.
}
