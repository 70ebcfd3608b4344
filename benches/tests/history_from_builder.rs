//! A history recorded from the embedding API: an application built with
//! `Cluster::builder()` calls the list-append procedure itself from several
//! threads (each with its own `Client`; one pipelines with `submit`/`poll`),
//! a `HistoryObserver` registered with `observe_calls` records what they saw,
//! and the strict-serializability checker and the lost-commit accounting pass
//! on it; a corrupted read fails the check; the history survives a round
//! trip through JSON lines; a call the client never learned the outcome of
//! is `info`; register calls are recorded and checked alike.

use splitkv_bench::history::node_counters;
use splitkv_bench::history_gen::{MicroOpSource, TxShape};
use splitkv_bench::history_observer::{
    HistoryObserver, PROCESSES_PER_NODE, PROCESS_SLOTS_PER_CLIENT,
};
use splitkv_bench::list_append::{
    decode_list, ListAppendConfig, ListAppendGenerator, ListAppendTxn, LIST_TABLE,
    LIST_VALUE_BYTES_MAX,
};
use splitkv_bench::Db;
use splitkv_check::checker::{self, CheckOptions, CheckReport, Model};
use splitkv_check::history::{History, MicroOp, OpType, ReadValue};
use splitkv_check::lost_commits::{self, FinalRow, FinalValue};
use splitkv_host::cluster::LOADED_VERSION;
use splitkv_host::{Client, Cluster, ClusterParts};
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::Key;
use splitkv_nic::ProcedureRegistry;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

const NODES: u16 = 3;
const CLIENTS_PER_NODE: usize = 2;
/// Transactions each application thread draws.
const TXNS_PER_CLIENT: u64 = 150;
/// Calls the pipelining client keeps outstanding.
const PIPELINE_DEPTH: usize = 3;
const ACTIVE_KEYS: u64 = 6;

fn check(history: &History) -> CheckReport {
    let opts = CheckOptions {
        model: Model::ListAppend,
        realtime: true,
        ..CheckOptions::default()
    };
    checker::check(history, &opts).expect("well-formed history")
}

/// One application thread calling the procedure and waiting for each outcome.
fn run_calls(client: &mut Client, procedure: u32, gen: &mut ListAppendGenerator) {
    let mut args = Vec::new();
    for _ in 0..TXNS_PER_CLIENT {
        let ops = gen.next_tx(&mut args).expect("the budget's keys");
        if !client.call(procedure, &args).expect("call").is_committed() {
            // A failed append never takes a list's room (as the bench's
            // generator is told).
            gen.failed(&ops);
        }
    }
}

/// Takes the outcomes there are; tells `gen` of failed appends.
fn poll_some(
    client: &mut Client,
    gen: &mut ListAppendGenerator,
    in_flight: &mut HashMap<u64, Vec<MicroOp>>,
) {
    let mut failed: Vec<Vec<MicroOp>> = Vec::new();
    let n = client
        .poll(PIPELINE_DEPTH, |o| {
            let ops = in_flight.remove(&o.req_id).expect("own request");
            if o.status != TxStatus::Committed {
                failed.push(ops);
            }
        })
        .expect("poll");
    failed.iter().for_each(|ops| gen.failed(ops));
    if n == 0 {
        std::thread::yield_now();
    }
}

/// One application thread keeping up to [`PIPELINE_DEPTH`] calls in flight.
fn run_pipelined(client: &mut Client, procedure: u32, gen: &mut ListAppendGenerator) {
    let mut args = Vec::new();
    let mut in_flight: HashMap<u64, Vec<MicroOp>> = HashMap::new();
    let mut next_id = 0u64;
    while next_id < TXNS_PER_CLIENT || !in_flight.is_empty() {
        while next_id < TXNS_PER_CLIENT && in_flight.len() < PIPELINE_DEPTH {
            let ops = gen.next_tx(&mut args).expect("the budget's keys");
            while client.submit(next_id, procedure, &args).is_err() {
                poll_some(client, gen, &mut in_flight);
            }
            in_flight.insert(next_id, ops);
            next_id += 1;
        }
        poll_some(client, gen, &mut in_flight);
    }
}

/// Every key's final version and list at its primary.
fn final_rows(parts: &ClusterParts, keys: u64) -> BTreeMap<u64, FinalRow> {
    let mut buf = Vec::new();
    (0..keys)
        .filter_map(|id| {
            let version = parts.get(&Key::new(LIST_TABLE, id), &mut buf)?;
            let list = decode_list(id, &buf).expect("a list");
            let value = FinalValue::List(list);
            Some((id, FinalRow { version, value }))
        })
        .collect()
}

/// Changes one element of the first committed non-empty list read.
fn corrupt_one_read(history: &mut History) -> bool {
    for op in history.ops.iter_mut().filter(|o| o.kind == OpType::Ok) {
        for m in &mut op.value {
            if let MicroOp::Read {
                value: Some(ReadValue::List(l)),
                ..
            } = m
            {
                if let Some(first) = l.first_mut() {
                    *first = first.wrapping_add(1_000_003);
                    return true;
                }
            }
        }
    }
    false
}

#[test]
fn application_threads_record_a_checkable_history_through_the_builder() {
    let clients = NODES as u64 * CLIENTS_PER_NODE as u64;
    let cfg = ListAppendConfig::new(ACTIVE_KEYS, clients, TXNS_PER_CLIENT, TxShape::Mixed)
        .expect("config");
    let keys = cfg.keys_total();
    let mut registry = ProcedureRegistry::new();
    let procedure = registry.register(Arc::new(ListAppendTxn));
    let observer = Arc::new(HistoryObserver::new().list_append(procedure));
    let mut cluster = Cluster::builder()
        .nodes(NODES as usize)
        .replication(3)
        .value_bytes_max(LIST_VALUE_BYTES_MAX)
        .capacity_keys(keys as usize)
        .clients_per_node(CLIENTS_PER_NODE)
        .procedures(registry)
        .observe_calls(observer.clone())
        .build()
        .expect("cluster");
    let rows = (0..keys).map(|id| (Key::new(LIST_TABLE, id), Vec::<u8>::new()));
    cluster.load(rows, |_| {}).expect("load");
    let mut apps = Vec::new();
    for node in 0..NODES {
        for c in 0..CLIENTS_PER_NODE {
            let i = node as u64 * CLIENTS_PER_NODE as u64 + c as u64;
            let gen = ListAppendGenerator::new(cfg, i, 0x5eed + i);
            apps.push((cluster.client(node).expect("client"), gen, i == 1));
        }
    }
    std::thread::scope(|s| {
        for (client, gen, pipelined) in apps.iter_mut() {
            s.spawn(move || match pipelined {
                true => run_pipelined(client, procedure, gen),
                false => run_calls(client, procedure, gen),
            });
        }
    });
    let parts = cluster.shutdown().expect("shutdown");
    let history = observer.history();
    let stats = observer.stats();
    assert_eq!(stats.invoked, clients * TXNS_PER_CLIENT);
    assert_eq!(stats.committed + stats.failed_total(), stats.invoked);
    // Enough commits for the check to mean something. How many of the calls
    // conflict depends on thread timing (one run saw 439 of 900 commit), so
    // the bound leaves room below half.
    assert!(stats.committed > stats.invoked / 4, "{stats:?}");
    assert_eq!(history.len() as u64, 2 * stats.invoked);
    assert_eq!(observer.outstanding(), 0);
    // The pipelining client (node 0, client 1) had calls in flight at once:
    // each on a process of its own.
    let pipelined = PROCESS_SLOTS_PER_CLIENT;
    assert!(history.ops.iter().any(|o| o.process == pipelined + 1));
    assert!(history
        .ops
        .iter()
        .all(|o| o.process < NODES as u64 * PROCESSES_PER_NODE));

    let report = check(&history);
    assert!(report.valid, "{:?}", report.anomalies);
    let initial: BTreeMap<u64, u64> = (0..keys).map(|k| (k, LOADED_VERSION)).collect();
    let lost = lost_commits::check(&history, &initial, &final_rows(&parts, keys));
    lost.expect("no lost or phantom commits");
    let db = Db {
        placement: parts.placement,
        nodes: &parts.nodes,
        failed: splitkv_layout::wire::NodeMask::EMPTY,
    };
    lost_commits::check_fault_free_counters(&node_counters(&db)).expect("fault-free counters");

    let mut bad = history.clone();
    assert!(corrupt_one_read(&mut bad), "some committed read saw a list");
    assert!(!check(&bad).valid, "a corrupted read is an anomaly");

    let path = std::env::temp_dir().join(format!(
        "splitkv-history-from-builder-{}.jsonl",
        std::process::id()
    ));
    observer.write_jsonl(&path).expect("write");
    let file = std::fs::File::open(&path).expect("open");
    let back = History::read_jsonl(std::io::BufReader::new(file)).expect("read back");
    let _ = std::fs::remove_file(&path);
    assert_eq!(back, history);
}

#[test]
fn a_call_whose_outcome_the_client_never_took_is_info() {
    let mut registry = ProcedureRegistry::new();
    let procedure = registry.register(Arc::new(ListAppendTxn));
    let observer = Arc::new(HistoryObserver::new().list_append(procedure));
    let mut cluster = Cluster::builder()
        .nodes(3)
        .value_bytes_max(LIST_VALUE_BYTES_MAX)
        .procedures(registry)
        .observe_calls(observer.clone())
        .build()
        .expect("cluster");
    cluster
        .load([(Key::new(LIST_TABLE, 0), Vec::<u8>::new())], |_| {})
        .expect("load");
    let mut client = cluster.client(2).expect("client");
    let mut args = Vec::new();
    let append = |element| [MicroOp::Append { key: 0, element }];
    splitkv_bench::list_append::codec::encode(&append(7), &mut args);
    assert!(client.call(procedure, &args).expect("call").is_committed());
    splitkv_bench::list_append::codec::encode(&append(8), &mut args);
    client.submit(99, procedure, &args).expect("submit");
    let _parts = cluster.shutdown().expect("shutdown");
    drop(client); // never polled: the client cannot know the outcome
    let h = observer.history();
    let kinds: Vec<OpType> = h.ops.iter().map(|o| o.kind).collect();
    let want = [OpType::Invoke, OpType::Ok, OpType::Invoke, OpType::Info];
    assert_eq!(kinds, want);
    assert_eq!(observer.stats().unknown, 1);
    assert!(h.ops.iter().all(|o| o.process == h.ops[0].process));
    assert!(h.ops.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
}

#[test]
fn register_calls_record_a_checkable_history_too() {
    use splitkv_bench::register::{
        RegisterConfig, RegisterGenerator, RegisterTxn, REGISTER_TABLE, REGISTER_VALUE_BYTES,
    };
    const KEYS: u64 = 4;
    let cfg = RegisterConfig::new(KEYS, TxShape::Mixed).expect("config");
    let mut registry = ProcedureRegistry::new();
    let procedure = registry.register(Arc::new(RegisterTxn));
    let observer = Arc::new(HistoryObserver::new().register(procedure));
    let mut cluster = Cluster::builder()
        .nodes(3)
        .value_bytes_max(REGISTER_VALUE_BYTES)
        .clients_per_node(1)
        .procedures(registry)
        .observe_calls(observer.clone())
        .build()
        .expect("cluster");
    let rows = (0..KEYS).map(|id| (Key::new(REGISTER_TABLE, id), Vec::<u8>::new()));
    cluster.load(rows, |_| {}).expect("load");
    let mut apps: Vec<(Client, RegisterGenerator)> = (0..3u16)
        .map(|n| {
            let gen = RegisterGenerator::new(cfg, n as u64, 7 + n as u64);
            (cluster.client(n).expect("client"), gen)
        })
        .collect();
    std::thread::scope(|s| {
        for (client, gen) in apps.iter_mut() {
            s.spawn(move || {
                let mut args = Vec::new();
                for _ in 0..TXNS_PER_CLIENT {
                    gen.next_tx(&mut args).expect("registers never run out");
                    client.call(procedure, &args).expect("call");
                }
            });
        }
    });
    let _parts = cluster.shutdown().expect("shutdown");
    let stats = observer.stats();
    assert_eq!(stats.invoked, 3 * TXNS_PER_CLIENT);
    assert!(stats.committed > 0, "{stats:?}");
    let opts = CheckOptions {
        model: Model::Register,
        ..CheckOptions::default()
    };
    let report = checker::check(&observer.history(), &opts).expect("well-formed");
    assert!(report.valid, "{:?}", report.anomalies);
}
