//! Single-key calls (GetOne, PutOne/InsertOne at the key's primary;
//! `splitkv_nic::protocol::single_key`) mixed with multi-key register
//! transactions that write the same keys, under the simulator's fault mixes,
//! each run's history checked for strict serializability
//! (`splitkv_check::checker`, register model) and for lost or phantom
//! commits against the primaries' final state
//! (`splitkv_check::lost_commits`).
//!
//! The driver is a workload of its own (this file), run on the one bench
//! cluster path: each client draws a GetOne of one key, a PutOne (or an
//! InsertOne) of one key with a unique value, or a built-in `txn` that
//! reads one key and writes two others. The crash mixes crash one node,
//! so some PutOnes lose their primary in flight: the caller then reports
//! the outcome unknown (`info`), and the checks hold either way — a write
//! reported committed is never lost.

mod fault_support;

use fault_support::{fault_spec, SILENCE_NS};
use splitkv_bench::workload::{AttemptOutcome, RowIter, TxCall, TxGenerator};
use splitkv_bench::{BenchCluster, CheckError, Db, Workload};
use splitkv_check::checker::{check, CheckOptions, Model};
use splitkv_check::history::{History, MicroOp, Op, OpType, ReadValue};
use splitkv_check::lost_commits::{self, FinalRow, FinalValue};
use splitkv_layout::app::txn::{Compare, Condition, Op as TxnOp, Txn, TxnResult};
use splitkv_layout::app::GetResult;
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::Key;
use splitkv_nic::procedure::txn::TXN_PROCEDURE_ID;
use splitkv_nic::protocol::single_key::{GET_ONE_PROCEDURE_ID, WRITE_ONE_PROCEDURE_ID};
use splitkv_nic::{Nanos, ProcedureRegistry};
use splitkv_sim::cluster::{build_on_sim, SimCluster, SimNodesMembership};
use splitkv_sim::membership::LeaseConfig;
use splitkv_sim::{FaultMix, SimConfig};
use std::collections::BTreeMap;

/// The registers' table.
const TABLE: u32 = 9;
/// Registers (few: calls and transactions collide).
const KEYS: u64 = 12;
/// Calls per client.
const BUDGET: u64 = 400;
/// Passes between checks for the end of a run.
const SLICE: u64 = 5_000;
/// Passes after which a run counts as stalled.
const PASSES_MAX: u64 = 4_000_000;
/// The window of the seeded crash (passes), inside a run of the budget.
const CRASH_PASSES: (u64, u64) = (500, 3_000);

fn key(k: u64) -> Key {
    Key::new(TABLE, k)
}

/// SplitMix64: the generator's seeded source.
fn next_rand(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What kind of call a draw is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    GetOne,
    PutOne,
    InsertOne,
    Txn,
}

#[derive(Debug)]
struct Drawn {
    kind: Kind,
    ops: Vec<MicroOp>,
    drawn_ns: Nanos,
    outcome: Option<(TxStatus, Vec<MicroOp>, Nanos, Nanos)>,
}

/// One client's calls and what it saw.
struct SingleKeyGen {
    client: u64,
    rng: u64,
    now: Nanos,
    drawn: Vec<Drawn>,
}

impl SingleKeyGen {
    fn value(&self, seq: usize, i: u64) -> u64 {
        ((self.client + 1) << 40) | ((seq as u64 + 1) << 2) | i
    }

    fn reg(v: u64) -> Vec<u8> {
        v.to_le_bytes().to_vec()
    }
}

impl TxGenerator for SingleKeyGen {
    fn next(&mut self, call: &mut TxCall) {
        let seq = self.drawn.len();
        let r = next_rand(&mut self.rng);
        let k = r % KEYS;
        let (kind, ops) = match (r >> 8) % 10 {
            0..=3 => {
                call.procedure = GET_ONE_PROCEDURE_ID;
                call.args.resize(splitkv_layout::KEY_BYTES, 0);
                key(k).encode(&mut call.args);
                (
                    Kind::GetOne,
                    vec![MicroOp::Read {
                        key: k,
                        value: None,
                    }],
                )
            }
            4..=6 => {
                let v = self.value(seq, 0);
                let insert = (r >> 16).is_multiple_of(4);
                let absent = Compare {
                    key: key(k),
                    condition: Condition::Absent,
                };
                let compares: &[Compare<'_>] = if insert { &[absent] } else { &[] };
                let bytes = Self::reg(v);
                let put = TxnOp::Put {
                    key: key(k),
                    value: &bytes,
                };
                Txn::encode(compares, &[put], &[], &mut call.args).expect("encode");
                call.procedure = WRITE_ONE_PROCEDURE_ID;
                let kind = if insert {
                    Kind::InsertOne
                } else {
                    Kind::PutOne
                };
                (kind, vec![MicroOp::Write { key: k, value: v }])
            }
            _ => {
                let (k2, k3) = ((k + 1) % KEYS, (k + 2) % KEYS);
                let (v2, v3) = (self.value(seq, 1), self.value(seq, 2));
                let (b2, b3) = (Self::reg(v2), Self::reg(v3));
                let ops = [
                    TxnOp::Get(key(k)),
                    TxnOp::Put {
                        key: key(k2),
                        value: &b2,
                    },
                    TxnOp::Put {
                        key: key(k3),
                        value: &b3,
                    },
                ];
                Txn::encode(&[], &ops, &[], &mut call.args).expect("encode");
                call.procedure = TXN_PROCEDURE_ID;
                let micro = vec![
                    MicroOp::Read {
                        key: k,
                        value: None,
                    },
                    MicroOp::Write { key: k2, value: v2 },
                    MicroOp::Write { key: k3, value: v3 },
                ];
                (Kind::Txn, micro)
            }
        };
        self.drawn.push(Drawn {
            kind,
            ops,
            drawn_ns: self.now,
            outcome: None,
        });
    }

    fn on_outcome(&mut self, o: &AttemptOutcome<'_>) {
        let Some(d) = self.drawn.get_mut(o.seq as usize) else {
            return;
        };
        let mut ops = d.ops.clone();
        let mut status = o.status;
        if status == TxStatus::Committed {
            let branch_failed = match TxnResult::decode(o.result) {
                Ok(r) => {
                    let mut gets = r.gets();
                    for op in ops.iter_mut() {
                        if let MicroOp::Read { value, .. } = op {
                            *value = match gets.next() {
                                Some(GetResult::Found { value: v, .. }) => {
                                    let b: [u8; 8] = v.try_into().expect("8-byte register");
                                    Some(ReadValue::Register(u64::from_le_bytes(b)))
                                }
                                _ => None,
                            };
                        }
                    }
                    r.branch() == splitkv_layout::app::Branch::Failure
                }
                Err(e) => panic!("client {}: a committed call's result: {e}", self.client),
            };
            // An insert that found its key committed its failure branch:
            // it wrote nothing (a failed operation for the history).
            if branch_failed {
                status = TxStatus::UserAborted;
            }
        }
        d.outcome = Some((
            status,
            ops,
            o.invoked_ns,
            o.completed_ns.max(o.invoked_ns + 1),
        ));
    }

    fn on_iteration(&mut self, now: Nanos) {
        self.now = now;
    }
}

impl SingleKeyGen {
    /// This client's operations; each call is a process of its own.
    fn ops(&self) -> Vec<Op> {
        let mut out = Vec::new();
        for (seq, d) in self.drawn.iter().enumerate() {
            let process = (self.client << 32) | seq as u64;
            let (invoke_ns, completion) = match &d.outcome {
                Some((status, ops, inv, done)) => (*inv, Some((*status, ops, *done))),
                None => (d.drawn_ns, None),
            };
            out.push(Op {
                index: 0,
                process,
                kind: OpType::Invoke,
                value: d.ops.clone(),
                time_ns: invoke_ns,
                error: None,
            });
            if let Some((status, ops, done)) = completion {
                let kind = match status {
                    TxStatus::Committed => OpType::Ok,
                    TxStatus::Unknown => OpType::Info,
                    _ => OpType::Fail,
                };
                out.push(Op {
                    index: 0,
                    process,
                    kind,
                    value: ops.clone(),
                    time_ns: done,
                    error: (kind != OpType::Ok).then(|| format!("{status:?}")),
                });
            }
        }
        out
    }
}

/// What a passing check found.
#[derive(Debug, Default, Clone, Copy)]
struct Report {
    committed: [u64; 4],
    unknown: [u64; 4],
    failed: [u64; 4],
}

/// The workload (module docs).
struct SingleKeyMix;

impl Workload for SingleKeyMix {
    type Generator = SingleKeyGen;
    type Report = Report;

    fn name(&self) -> &'static str {
        "single-key-mix"
    }
    fn register(&self, _: &mut ProcedureRegistry) {}
    fn rows(&self) -> u64 {
        KEYS
    }
    fn value_bytes_max(&self) -> usize {
        8
    }
    fn initial_rows(&self) -> RowIter<'_> {
        Box::new(std::iter::empty())
    }
    fn max_tries(&self) -> Option<u32> {
        Some(1)
    }
    fn generator(&self, client: u16, seed: u64) -> SingleKeyGen {
        SingleKeyGen {
            client: client as u64,
            rng: seed ^ (client as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F),
            now: 0,
            drawn: Vec::new(),
        }
    }
    fn check(&self, db: &Db<'_>, gens: &[&SingleKeyGen]) -> Result<Report, CheckError> {
        let failed = |detail: String| CheckError::Failed {
            check: "single-key mix",
            detail,
        };
        let history = History::merge(gens.iter().map(|g| g.ops()));
        let opts = CheckOptions {
            model: Model::Register,
            ..CheckOptions::default()
        };
        let r = check(&history, &opts).map_err(|e| failed(e.to_string()))?;
        if !r.valid {
            return Err(failed(format!("anomalies found: {:?}", r.found)));
        }
        let mut finals = BTreeMap::new();
        let mut v = Vec::new();
        for k in 0..KEYS {
            if let Some(meta) = db.get(&key(k), &mut v) {
                let b: [u8; 8] = v[..]
                    .try_into()
                    .map_err(|_| failed("not a register".into()))?;
                let value = FinalValue::Register(Some(u64::from_le_bytes(b)));
                let version = meta.version();
                finals.insert(k, FinalRow { version, value });
            }
        }
        lost_commits::check(&history, &BTreeMap::new(), &finals)
            .map_err(|e| failed(e.to_string()))?;
        let mut report = Report::default();
        for g in gens {
            for d in &g.drawn {
                let i = d.kind as usize;
                match d.outcome.as_ref().map(|o| o.0) {
                    Some(TxStatus::Committed) => report.committed[i] += 1,
                    Some(TxStatus::Unknown) | None => report.unknown[i] += 1,
                    Some(_) => report.failed[i] += 1,
                }
            }
        }
        Ok(report)
    }
}

/// Runs the mix under `mix` for `seed` (with the membership in the loop for
/// the crash and NIC-crash mixes); returns the report and the cluster's
/// single-key counters summed over the nodes that did not crash.
fn run(mix: FaultMix, seed: u64) -> (Report, splitkv_nic::protocol::single_key::SingleKeyStats) {
    let mut cfg: SimConfig = mix.config(seed);
    cfg.nodes.crash_pass_min = CRASH_PASSES.0;
    cfg.nodes.crash_pass_max = CRASH_PASSES.1;
    cfg.nodes.nic_crash_pass_min = CRASH_PASSES.0;
    cfg.nodes.nic_crash_pass_max = CRASH_PASSES.1;
    let spec = fault_spec(seed, BUDGET, Some(SILENCE_NS));
    let (mut cluster, net): (BenchCluster<SingleKeyMix>, _) =
        build_on_sim(spec, SingleKeyMix, cfg).expect("build");
    let mut sim = cluster.sim(cfg);
    let result = if cfg.nodes.crashes > 0 || cfg.nodes.nic_crashes > 0 {
        let lease = LeaseConfig::new(cluster.spec.nodes, cluster.spec.replication, seed);
        let mut m = SimNodesMembership::new(lease).expect("lease config");
        cluster.run_sim_with_membership(&mut sim, &net, &mut m, SLICE, PASSES_MAX)
    } else {
        cluster.run_sim_until_quiescent(&mut sim, &net, SLICE, PASSES_MAX)
    };
    if let Err(e) = result {
        panic!("{mix} seed {seed}: {e}\n{}", net.trace().tail(40));
    }
    cluster.finish(sim.now());
    let report = cluster
        .check()
        .unwrap_or_else(|e| panic!("{mix} seed {seed}: {e}"));
    let mut stats = splitkv_nic::protocol::single_key::SingleKeyStats::default();
    for (n, node) in cluster.parts.nodes.iter().enumerate() {
        if cluster.failed.contains(n as u16) {
            continue;
        }
        let s = node.nic.stats().single_key;
        stats.get_one_sent += s.get_one_sent;
        stats.get_one_replies += s.get_one_replies;
        stats.write_one_sent += s.write_one_sent;
        stats.write_one_replies += s.write_one_replies;
        stats.write_one_started += s.write_one_started;
        stats.given_up += s.given_up;
    }
    (report, stats)
}

#[test]
fn single_key_calls_and_transactions_are_strictly_serializable_without_faults() {
    for seed in [1, 2] {
        let (r, s) = run(FaultMix::None, seed);
        let (get, put, txn) = (
            Kind::GetOne as usize,
            Kind::PutOne as usize,
            Kind::Txn as usize,
        );
        assert!(r.committed[get] > 100, "seed {seed}: {r:?}");
        assert!(r.committed[put] > 50, "seed {seed}: {r:?}");
        assert!(r.committed[txn] > 10, "seed {seed}: {r:?}");
        assert!(
            r.failed[get] > 0,
            "seed {seed}: some gets found a locked key: {r:?}"
        );
        assert_eq!(r.unknown, [0; 4], "seed {seed}: no fault, nothing unknown");
        assert_eq!(
            (s.get_one_sent, s.write_one_sent, s.given_up),
            (s.get_one_replies, s.write_one_replies, 0),
            "seed {seed}: every call one request and one reply: {s:?}"
        );
    }
}

#[test]
fn single_key_calls_stay_strictly_serializable_under_network_faults() {
    for seed in [3, 4] {
        let (r, _) = run(FaultMix::Net, seed);
        assert!(r.committed.iter().sum::<u64>() > 300, "seed {seed}: {r:?}");
    }
}

#[test]
fn a_crashed_primary_leaves_put_ones_unknown_or_committed_never_lost() {
    let mut unknown_writes = 0;
    for (mix, seed) in [
        (FaultMix::Crash, 5),
        (FaultMix::Crash, 6),
        (FaultMix::Crash, 7),
        (FaultMix::All, 8),
    ] {
        let (r, _) = run(mix, seed);
        assert!(
            r.committed.iter().sum::<u64>() > 100,
            "{mix} seed {seed}: {r:?}"
        );
        unknown_writes += r.unknown[Kind::PutOne as usize] + r.unknown[Kind::InsertOne as usize];
    }
    assert!(
        unknown_writes > 0,
        "some PutOne was in flight at the crashed primary (its caller reported it unknown)"
    );
}

#[test]
fn single_key_calls_survive_nic_restarts() {
    for seed in [9, 10] {
        let (r, s) = run(FaultMix::NicCrash, seed);
        assert!(r.committed.iter().sum::<u64>() > 100, "seed {seed}: {r:?}");
        assert!(s.get_one_replies > 100, "seed {seed}: {s:?}");
    }
}
