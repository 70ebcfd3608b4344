//! The history a failing or stalled seed leaves behind.

use super::*;
use splitkv_check::history::{History, OpType};

/// A list-append run stopped long before its budget is done (a stall, as
/// `run` sees one): its history is written as `seed-N.failed.jsonl`, in
/// place of a `seed-N.jsonl`, every line a valid history line, with the
/// transactions in flight completed as `info`.
#[test]
fn a_stalled_seed_leaves_its_history_as_failed_jsonl() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let stale = dir.path().join("seed-7.jsonl");
    std::fs::write(&stale, "").expect("write");
    let workload = HistoryCheck::list_append(HISTORY_KEYS, 3, 500, TxShape::Mixed).expect("config");
    let mut spec = ClusterSpec::new();
    spec.nodes = 3;
    spec.replication = 3;
    spec.inflight_per_node = 4;
    spec.budget_per_node = Some(500);
    spec.seed = 7;
    let cfg = SimConfig {
        seed: 7,
        ..SimConfig::default()
    };
    let (mut cluster, net) = build_on_sim(spec, workload, cfg).expect("cluster");
    let mut sim = cluster.sim(cfg);
    let ran = cluster.run_sim_until_quiescent(&mut sim, &net, 100, 2_000);
    assert!(ran.is_err(), "the run must stop before its budget is done");

    let mut why = String::from("run: stalled");
    keep_failed_history(&mut cluster, sim.now(), false, dir.path(), 7, &mut why);

    let path = dir.path().join("seed-7.failed.jsonl");
    assert!(
        why.ends_with(&format!("(history in {})", path.display())),
        "{why}"
    );
    assert!(!stale.exists(), "only the failed history is left");
    let file = std::fs::File::open(&path).expect("the failed history");
    let history = History::read_jsonl(std::io::BufReader::new(file)).expect("valid history lines");
    let count = |kind: OpType| history.ops.iter().filter(|o| o.kind == kind).count();
    let completions = count(OpType::Ok) + count(OpType::Fail) + count(OpType::Info);
    assert!(
        count(OpType::Ok) > 0,
        "some transactions committed before the stop"
    );
    assert!(
        count(OpType::Info) > 0,
        "the transactions in flight are info"
    );
    assert_eq!(
        count(OpType::Invoke),
        completions,
        "every invoke is completed"
    );
}
