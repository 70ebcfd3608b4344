use super::*;
use crate::list_append::codec;
use crate::list_append::codec::ResultError;
use crate::loadgen::{LoadGen, LoadGenConfig, RetryPolicy};
use crate::register::{self, RegisterConfig, RegisterGenerator};
use splitkv_check::history::{History, MicroOp, OpType};
use splitkv_host::Client;
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::host_nic::{HostToNic, NicToHost, TxOutcome};
use splitkv_layout::ring::{ring_pair, RingConsumer, RingProducer};

/// Plays the NIC runtime's end of the rings: takes every request, answers
/// them with `status(i)` in order (a committed one with its reads' values
/// computed on empty registers).
struct FakeNic {
    requests: RingConsumer,
    outcomes: RingProducer,
    taken: Vec<(u64, Vec<u8>)>,
}

impl FakeNic {
    fn take_requests(&mut self) -> usize {
        let mut buf = Vec::new();
        let mut n = 0;
        while self.requests.try_pop(&mut buf).unwrap() {
            let HostToNic::TxRequest(r) = HostToNic::decode(&buf).unwrap() else {
                panic!("a request");
            };
            assert_eq!(r.procedure, 7);
            self.taken.push((r.req_id, r.args.to_vec()));
            n += 1;
        }
        n
    }

    fn answer(&mut self, status: impl Fn(usize) -> TxStatus) {
        let mut enc = Vec::new();
        for (i, (req_id, args)) in std::mem::take(&mut self.taken).into_iter().enumerate() {
            let mut result = Vec::new();
            let s = status(i);
            if s == TxStatus::Committed {
                let ops = codec::decode(&args).unwrap();
                register::run_txn(&ops, |_| None, &mut result, |_, _| {}).unwrap();
            }
            enc.clear();
            NicToHost::TxOutcome(TxOutcome {
                req_id,
                status: s,
                result: &result,
            })
            .encode(&mut enc);
            self.outcomes.try_push(&enc).unwrap();
        }
    }
}

type Recorder = LoadGen<HistoryGen<RegisterGenerator>>;

fn setup(slots: usize) -> (Recorder, FakeNic, RegisterGenerator) {
    let (req_tx, req_rx) = ring_pair(256).unwrap();
    let (out_tx, out_rx) = ring_pair(64 << 10).unwrap();
    let cfg = RegisterConfig::new(4, TxShape::Mixed).unwrap();
    let gen = RegisterGenerator::new(cfg, 0, 3);
    let cfg = LoadGenConfig {
        seed: 1,
        inflight_max: slots,
        budget: None,
        record: false,
        retry: RetryPolicy {
            max_tries: 1,
            ..RetryPolicy::default()
        },
    };
    let client = LoadGen::new(
        0,
        Client::new(req_tx, out_rx),
        HistoryGen::new(gen.clone(), 7, 100),
        cfg,
    );
    let nic = FakeNic {
        requests: req_rx,
        outcomes: out_tx,
        taken: Vec::new(),
    };
    (client, nic, gen)
}

#[test]
fn records_invokes_completions_and_info_with_sound_times() {
    let (mut c, mut nic, mut fresh) = setup(8);
    assert!(c.run_iteration(10));
    let first = nic.take_requests();
    assert!(
        (1..8).contains(&first),
        "the 256-byte ring holds fewer than 8 requests: {first}"
    );
    nic.answer(|i| {
        if i == 0 {
            TxStatus::Committed
        } else {
            TxStatus::LockConflict
        }
    });
    assert!(
        c.run_iteration(20),
        "takes the outcomes, submits the held transaction"
    );
    c.run_iteration(30);
    c.finish(40);
    let ops = c.generator().ops().to_vec();
    let stats = c.generator().stats();
    assert_eq!(stats.committed, 1);
    assert_eq!(stats.failed_with(TxStatus::LockConflict), first as u64 - 1);
    assert_eq!(stats.indeterminate, stats.submitted - first as u64);
    assert_eq!(stats.finished(), stats.submitted);
    // Invokes in submission order are exactly the generator's draws: the
    // transaction drawn while the ring was full was kept, not discarded.
    let invokes: Vec<_> = ops.iter().filter(|o| o.kind == OpType::Invoke).collect();
    assert_eq!(invokes.len() as u64, stats.submitted);
    for inv in &invokes {
        assert_eq!(inv.value, fresh.draw());
        assert!(inv.time_ns == 10 || inv.time_ns == 20);
    }
    for o in &ops {
        match o.kind {
            OpType::Ok => assert_eq!((o.time_ns, o.error.as_deref()), (30, None)),
            OpType::Fail => {
                assert_eq!((o.time_ns, o.error.as_deref()), (30, Some("lock conflict")))
            }
            OpType::Info => assert_eq!(
                (o.time_ns, o.error.as_deref()),
                (40, Some("outcome unknown"))
            ),
            OpType::Invoke => {}
        }
        assert!((100..116).contains(&o.process));
    }
    let ok = ops.iter().find(|o| o.kind == OpType::Ok).unwrap();
    assert!(ok
        .value
        .iter()
        .all(|m| !matches!(m, MicroOp::Read { value: Some(_), .. })));
    // Each process is sequential: invoke, completion, invoke, ...
    for p in 100..116 {
        let kinds: Vec<_> = ops
            .iter()
            .filter(|o| o.process == p)
            .map(|o| o.kind)
            .collect();
        for pair in kinds.chunks(2) {
            assert_eq!(pair[0], OpType::Invoke);
            assert!(pair.len() == 2 && pair[1] != OpType::Invoke, "{kinds:?}");
        }
    }
    let history = History::merge([ops]);
    let path = std::env::temp_dir().join(format!(
        "splitkv-history-client-{}.jsonl",
        std::process::id()
    ));
    write_history(&path, &history).unwrap();
    let back = History::read_jsonl(std::io::BufReader::new(std::fs::File::open(&path).unwrap()));
    std::fs::remove_file(&path).unwrap();
    assert_eq!(back.unwrap(), history);
}

#[test]
fn a_process_is_reused_only_after_its_completion_is_recorded() {
    let (mut c, mut nic, _) = setup(1);
    c.run_iteration(1);
    assert_eq!(nic.take_requests(), 1);
    nic.answer(|_| TxStatus::ValidationFailed);
    c.run_iteration(2);
    assert_eq!(
        nic.take_requests(),
        1,
        "the next transaction is drawn at once"
    );
    nic.answer(|_| TxStatus::ValidationFailed);
    c.run_iteration(3);
    assert_eq!(nic.take_requests(), 1);
    c.finish(4);
    let ops: Vec<_> = c
        .generator()
        .ops()
        .iter()
        .map(|o| (o.kind, o.time_ns, o.process))
        .collect();
    assert_eq!(
        ops,
        [
            (OpType::Invoke, 1, 100),
            // Process 100's completion is not stamped yet: a new process.
            (OpType::Invoke, 2, 101),
            (OpType::Fail, 3, 100),
            // Stamped at 3: process 100 is free again.
            (OpType::Invoke, 3, 100),
            (OpType::Fail, 4, 101),
            (OpType::Info, 4, 100),
        ]
    );
    assert!(c.generator().is_finished());
}

#[test]
fn an_unknown_outcome_is_recorded_as_info_and_its_writes_kept() {
    let (mut c, mut nic, _) = setup(4);
    c.run_iteration(10);
    let n = nic.take_requests();
    assert!(n >= 1);
    nic.answer(|_| TxStatus::Unknown);
    c.run_iteration(20);
    c.run_iteration(30); // completions are stamped by the next iteration
    let stats = c.generator().stats();
    assert_eq!(stats.indeterminate, n as u64, "{stats:?}");
    assert_eq!(stats.failed_total(), 0, "Unknown is not a failure");
    let infos: Vec<_> = c
        .generator()
        .ops()
        .iter()
        .filter(|o| o.kind == OpType::Info)
        .cloned()
        .collect();
    assert_eq!(infos.len(), n);
    for o in &infos {
        assert_eq!(
            (o.time_ns, o.error.as_deref()),
            (30, Some("unknown outcome"))
        );
        assert!(
            !o.value.is_empty(),
            "the invoked micro-ops, writes included"
        );
    }
    let mut out = Vec::new();
    History::merge([infos]).write_jsonl(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.matches("\"info\"").count(), n, "{text}");
}

/// The one classifier of outcomes (shared with `history_observer`): `ok`
/// with the completed micro-ops, `info` for an undecodable result, an
/// indeterminate status and an unknown outcome, `fail` for the rest.
#[test]
fn completion_maps_each_outcome_to_ok_info_or_fail() {
    let invoked = vec![MicroOp::Append { key: 1, element: 2 }];
    let done = vec![MicroOp::Append { key: 1, element: 3 }];
    let decoded = |_: &[MicroOp]| -> Result<Vec<MicroOp>, ResultError> { Ok(done.clone()) };
    let undecodable =
        |_: &[MicroOp]| -> Result<Vec<MicroOp>, ResultError> { Err(ResultError::Trailing(1)) };
    let c = completion(invoked.clone(), Some(TxStatus::Committed), decoded);
    assert_eq!(
        (c.ending, c.kind, &c.value, c.error),
        (Ending::Committed, OpType::Ok, &done, None)
    );
    let c = completion(invoked.clone(), Some(TxStatus::Committed), undecodable);
    assert_eq!(
        (c.ending, c.kind, &c.value),
        (Ending::BadResult, OpType::Info, &invoked)
    );
    assert!(c
        .error
        .unwrap()
        .starts_with("committed, result undecodable"));
    let c = completion(invoked.clone(), Some(TxStatus::Unknown), decoded);
    assert_eq!(
        (c.ending, c.kind, &c.value, c.error.as_deref()),
        (
            Ending::Indeterminate,
            OpType::Info,
            &invoked,
            Some(TxStatus::Unknown.name())
        )
    );
    let c = completion(invoked.clone(), None, decoded);
    assert_eq!(
        (c.ending, c.kind, &c.value, c.error.as_deref()),
        (
            Ending::Indeterminate,
            OpType::Info,
            &invoked,
            Some(OUTCOME_UNKNOWN)
        )
    );
    let c = completion(invoked.clone(), Some(TxStatus::LockConflict), decoded);
    assert_eq!(
        (c.ending, c.kind, &c.value, c.error.as_deref()),
        (
            Ending::Failed(TxStatus::LockConflict),
            OpType::Fail,
            &invoked,
            Some("lock conflict")
        )
    );
}

#[test]
fn gets_puts_shapes_are_checked_and_named() {
    assert_eq!(
        TxShape::gets_puts(4, 2),
        Ok(TxShape::GetsPuts { gets: 4, puts: 2 })
    );
    assert_eq!(
        TxShape::gets_puts(0, 0),
        Err(WorkloadConfigError::OpsPerTx {
            gets: 0,
            puts: 0,
            max: codec::MICRO_OPS_PER_TX_MAX
        })
    );
    assert!(TxShape::gets_puts(5, 4).is_err());
    assert!(TxShape::gets_puts(8, 0).is_ok());
    assert_eq!(TxShape::GetsPuts { gets: 4, puts: 2 }.to_string(), "O(4,2)");
    assert_eq!(TxShape::Mixed.to_string(), "mixed");
    // A shape built without gets_puts is checked when a workload takes it.
    let unchecked = TxShape::GetsPuts { gets: 9, puts: 0 };
    assert!(matches!(
        unchecked.check(100),
        Err(WorkloadConfigError::OpsPerTx { .. })
    ));
    assert_eq!(
        TxShape::GetsPuts { gets: 4, puts: 2 }.check(5),
        Err(WorkloadConfigError::TooFewKeys { keys: 5, min: 6 })
    );
    assert!(RegisterConfig::new(6, TxShape::GetsPuts { gets: 4, puts: 2 }).is_ok());
    assert!(RegisterConfig::new(5, TxShape::GetsPuts { gets: 4, puts: 2 }).is_err());
}

#[test]
fn gets_puts_transactions_read_then_write_distinct_keys() {
    let cfg = RegisterConfig::new(6, TxShape::gets_puts(4, 2).unwrap()).unwrap();
    let mut g = RegisterGenerator::new(cfg, 0, 3);
    let mut first_keys = std::collections::HashSet::new();
    for _ in 0..500 {
        let tx = g.draw();
        assert_eq!(tx.len(), 6);
        assert!(tx[..4]
            .iter()
            .all(|m| matches!(m, MicroOp::Read { value: None, .. })));
        assert!(tx[4..].iter().all(|m| matches!(m, MicroOp::Write { .. })));
        let keys: std::collections::HashSet<u64> = tx.iter().map(|m| m.key()).collect();
        assert_eq!(
            keys.len(),
            6,
            "every key of a transaction is distinct: {tx:?}"
        );
        assert!(keys.iter().all(|&k| k < 6));
        first_keys.insert(tx[0].key());
    }
    assert_eq!(
        first_keys.len(),
        6,
        "keys are drawn over the whole key space"
    );
    // Read-only and write-only shapes.
    let mut reads = RegisterGenerator::new(
        RegisterConfig::new(50, TxShape::gets_puts(1, 0).unwrap()).unwrap(),
        1,
        3,
    );
    assert!(matches!(reads.draw()[..], [MicroOp::Read { .. }]));
    let mut writes = RegisterGenerator::new(
        RegisterConfig::new(50, TxShape::gets_puts(0, 1).unwrap()).unwrap(),
        1,
        3,
    );
    assert!(matches!(writes.draw()[..], [MicroOp::Write { .. }]));
}

#[test]
fn gets_puts_list_append_transactions_read_then_append() {
    use crate::list_append::{ListAppendConfig, ListAppendGenerator};
    let cfg = ListAppendConfig::new(8, 2, 100, TxShape::gets_puts(2, 2).unwrap()).unwrap();
    let mut g = ListAppendGenerator::new(cfg, 1, 4);
    for _ in 0..100 {
        let tx = g.draw().expect("the key space covers the budget");
        assert_eq!(tx.len(), 4);
        assert!(tx[..2].iter().all(|m| matches!(m, MicroOp::Read { .. })));
        assert!(tx[2..].iter().all(|m| matches!(m, MicroOp::Append { .. })));
        let keys: std::collections::HashSet<u64> = tx.iter().map(|m| m.key()).collect();
        assert_eq!(keys.len(), 4);
    }
}
