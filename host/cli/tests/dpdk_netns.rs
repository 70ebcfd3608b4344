//! Three `splitkv node` processes on DPDK (`[transport] kind = "dpdk"`, the
//! `net_af_packet` driver on each node's veth, the veths joined by a bridge
//! in network namespaces this test makes) run Smallbank and list-append,
//! driven by `splitkv bench … --cluster FILE` from node 0's namespace, and
//! pass every check; Smallbank again with 2 % of the packets lost on the way
//! out (`loss_ppm`), recovered by the sessions' retransmissions. A node
//! whose EAL cannot find its device ends with one line naming the cause and
//! exit code 2. Each node's `/status` shows its DPDK counters and its
//! `/metrics` the `dpdk_*` counters.
//!
//! The namespaces and links are `support_netns`'s: made inside their own
//! namespaces, never the root's, and deleted (node processes killed by pid)
//! when a test ends or fails. Node `i` has `10.77.<pid % 256>.<i + 1>` on its
//! `eth0` (the control endpoints and the bench use kernel TCP over it) and
//! the veth's MAC as its `mac`; its DPDK port reads and writes raw frames
//! on that `eth0` (EAL without hugepages or PCI: `--no-huge --no-pci`).
//! Where the machine does not allow namespaces the tests print one line
//! saying why and pass. Built only with the feature `dpdk`.

mod support_deploy;
mod support_netns;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use support_deploy::{assert_history_checks_passed, http, wait_exit, TOKEN};
use support_netns::{
    in_netns, mac, namespace_exists, Netns, Refused, CONTROL_PORT, DATA_PORT, NODES,
};

/// Longest one bench may take.
const BENCH_TIMEOUT: Duration = Duration::from_secs(90);
/// Longest a node refusing its DPDK set-up may take to exit.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(30);
/// Packets each node drops on the way out, per million, in the loss run.
const LOSS_PPM: u32 = 20_000;

/// One cluster at a time: three busy-polling DPDK nodes and a bench
/// already fill a two-core machine.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A three-node DPDK cluster file on `net`'s addresses and MACs, with
/// `device` given to EAL as `net_af_packet0` on `iface` and `extra` lines
/// in `[transport]`; written to `dir/NAME`.
fn cluster_file(net: &Netns, dir: &Path, name: &str, iface: &str, extra: &str) -> PathBuf {
    let mut text = format!(
        "cluster_id = 6\ntoken = \"{TOKEN}\"\nreplication = {NODES}\n\n\
         [table]\ncapacity_keys = 20000\nvalue_bytes_max = 256\n\n\
         [transport]\nkind = \"dpdk\"\ndevice = \"net_af_packet0\"\n\
         eal_args = [\"--no-pci\", \"--no-huge\", \"-m\", \"128\", \
         \"--vdev=net_af_packet0,iface={iface}\", \"--log-level=lib.eal:error\"]\n{extra}\n"
    );
    for i in 0..NODES {
        text.push_str(&format!(
            "\n[[node]]\nid = {i}\ndata = \"{}\"\ncontrol = \"{}\"\ncontrol_public = true\nmac = \"{}\"\n",
            net.addr(i, DATA_PORT),
            net.addr(i, CONTROL_PORT),
            mac(i)
        ));
    }
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write the cluster file");
    path
}

/// Builds the namespaces, starts the DPDK nodes, runs `bench WORKLOAD ARGS`
/// from node 0's namespace and returns its stdout (asserting exit 0 and
/// "checks: ok") and every node's `/status`, or `None` (after one line
/// saying why) where namespaces are not allowed.
fn bench_on_dpdk(
    tag: &str,
    extra: &str,
    workload: &str,
    args: &[&str],
) -> Option<(String, Vec<serde_json::Value>)> {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let t0 = Instant::now();
    let mut net = match Netns::build(tag) {
        Ok(n) => n,
        Err(Refused(why)) => {
            println!("dpdk netns test skipped: network namespaces are not available here ({why})");
            return None;
        }
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = cluster_file(&net, dir.path(), "cluster.toml", "eth0", extra);
    let stdout = net.run_bench(&config, dir.path(), workload, args, BENCH_TIMEOUT);
    println!("{workload} on DPDK across namespaces:\n{stdout}");
    let statuses = net.statuses();
    let control = net.addr(1, CONTROL_PORT);
    let metrics = in_netns(&net.nodes[0], || {
        http(control, "GET", "/metrics", None, "").expect("/metrics")
    });
    for (i, s) in statuses.iter().enumerate() {
        let dpdk = &s["dpdk"];
        assert!(
            dpdk["rx"]["packets"].as_u64().unwrap_or(0) > 0,
            "node {i}: {dpdk}"
        );
        assert!(
            dpdk["tx"]["packets"].as_u64().unwrap_or(0) > 0,
            "node {i}: {dpdk}"
        );
        // Every peer's MAC came from the file: nothing went to broadcast,
        // and no splitkv frame came from an unknown address.
        assert_eq!(dpdk["tx"]["broadcast_frames"], 0, "node {i}: {dpdk}");
        assert_eq!(dpdk["tx"]["unknown_destination"], 0, "node {i}: {dpdk}");
        assert_eq!(dpdk["rx"]["dropped"]["stranger"], 0, "node {i}: {dpdk}");
        assert_eq!(s["sessions"]["sessions_failed"], 0, "node {i}: {s}");
    }
    let (code, body) = metrics;
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains("splitkv_dpdk_packets_received_total{"),
        "{body}"
    );
    assert!(body.contains("splitkv_dpdk_rx_dropped_total{"), "{body}");
    let names = net.made.clone();
    drop(net);
    for ns in &names {
        assert!(!namespace_exists(ns), "{ns} left behind");
    }
    assert!(t0.elapsed() < BENCH_TIMEOUT * 2, "took {:?}", t0.elapsed());
    Some((stdout, statuses))
}

/// Smallbank's arguments of these runs.
const SMALLBANK_ARGS: [&str; 8] = [
    "--accounts-per-node",
    "500",
    "--duration",
    "1s",
    "--warmup",
    "200ms",
    "--inflight",
    "8",
];

#[test]
fn three_dpdk_node_processes_run_smallbank_over_af_packet_and_pass_every_check() {
    let Some((stdout, _)) = bench_on_dpdk("s", "", "smallbank", &SMALLBANK_ARGS) else {
        return;
    };
    assert!(stdout.contains("money check    ok"), "{stdout}");
    assert!(stdout.contains("replica check  ok"), "{stdout}");
}

#[test]
fn three_dpdk_node_processes_run_list_append_over_af_packet_and_pass_every_check() {
    let args = ["--transactions", "500", "--inflight", "4"];
    let Some((stdout, _)) = bench_on_dpdk("l", "", "list-append", &args) else {
        return;
    };
    assert_history_checks_passed(&stdout);
    assert!(stdout.contains("1500 submitted"), "{stdout}");
}

#[test]
fn smallbank_on_dpdk_with_injected_loss_passes_every_check() {
    let extra = format!("loss_ppm = {LOSS_PPM}");
    let Some((stdout, statuses)) = bench_on_dpdk("x", &extra, "smallbank", &SMALLBANK_ARGS) else {
        return;
    };
    assert!(stdout.contains("money check    ok"), "{stdout}");
    assert!(stdout.contains("replica check  ok"), "{stdout}");
    let retransmissions: u64 = statuses
        .iter()
        .map(|s| s["sessions"]["retransmissions"].as_u64().unwrap_or(0))
        .sum();
    assert!(
        retransmissions > 0,
        "2% loss and no retransmission: {statuses:?}"
    );
}

#[test]
fn a_node_whose_dpdk_device_is_missing_exits_2_with_one_line() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let net = match Netns::build("e") {
        Ok(n) => n,
        Err(Refused(why)) => {
            println!("dpdk netns test skipped: network namespaces are not available here ({why})");
            return;
        }
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = cluster_file(&net, dir.path(), "bad.toml", "nosuch0", "");
    let args = ["node", "--config", config.to_str().unwrap(), "--id", "0"];
    let mut node = net.exec(&net.nodes[0], &args, dir.path(), "node");
    let status = wait_exit(&mut node, REFUSAL_TIMEOUT);
    let err = std::fs::read_to_string(dir.path().join("node.err")).unwrap_or_default();
    assert_eq!(status.code(), Some(2), "{err}");
    // DPDK logs its own lines first; splitkv's is the last, and names the
    // node's transport and the device.
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: node[0].transport: ") && last.contains("net_af_packet0"),
        "{err}"
    );
}
