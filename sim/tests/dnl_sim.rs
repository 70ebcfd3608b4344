//! Every Dnl row — Dnl-4, Dnl-2, Dnl-1 (`splitkv_nic::protocol::coordinator`
//! `coordinator/dnl.rs` and the servers' Dnl steps; `tla/DnlSkeleton.tla`
//! rows `Dnl4Row`, `Dnl2Row`, `Dnl1Row`) — under the deterministic
//! simulator with the fault mixes that have no node faults (none and net:
//! loss, duplication, reordering, partitions, DMA latencies), a few seeds
//! each: list-append and register histories (mixed and write-skew shapes)
//! checked for strict serializability and for lost and phantom commits
//! against the primaries' final state, as `history_sim.rs` checks Xenic
//! OCC, and Smallbank checked for money; every run's replicas agree.
//!
//! Counted, not timed, from the coordinators' counters: each row reports a
//! commit after its own number of round trips at most (Dnl-1 one, the
//! Lock acks; Dnl-2 two; Dnl-4 four) and some commits take exactly that
//! many; Dnl-RO (read-only transactions, under every row) never sends a
//! Lock, while read-only transactions do commit.

mod history_support;

use history_support::{assert_every_outcome_known, check_run, list_append, register, spec};
use splitkv_bench::history::HistoryCheck;
use splitkv_bench::history_gen::TxShape;
use splitkv_bench::{ClusterSpec, Smallbank};
use splitkv_layout::host_nic::TxStatus;
use splitkv_nic::protocol::coordinator::{CoordinatorStats, COMMIT_ROUND_TRIPS_MAX};
use splitkv_nic::protocol::skeleton::{row_of, Shape};
use splitkv_nic::CommitProtocol;
use splitkv_sim::cluster::{build_on_sim, SimCluster};
use splitkv_sim::faults::FaultMix;
use splitkv_sim::SimConfig;

const NODES: usize = 3;
const INFLIGHT: usize = 4;
/// Transactions per node of a history run.
const BUDGET: u64 = 400;
/// Transactions per node of a Smallbank run.
const SMALLBANK_BUDGET: u64 = 500;
/// Smallbank accounts (few, so transactions conflict).
const SMALLBANK_ACCOUNTS: u64 = 300;
const PASSES_PER_SLICE: u64 = 5_000;
/// Passes after which a run counts as stalled.
const PASSES_MAX: u64 = 5_000_000;
/// Silence after which a session declares its peer failed (ns): longer
/// than the net mix's longest partition, so no live peer is (as
/// `splitkv sim` sets it).
const SESSION_SILENCE_NS: u64 = 30_000_000;
const ROWS: [CommitProtocol; 3] = [
    CommitProtocol::Dnl4,
    CommitProtocol::Dnl2,
    CommitProtocol::Dnl1,
];
const MIXES: [FaultMix; 2] = [FaultMix::None, FaultMix::Net];

/// The cluster shape of a run of `protocol` seeded by `seed`.
fn dnl_spec(protocol: CommitProtocol, budget: u64, seed: u64) -> ClusterSpec {
    let mut spec = spec(NODES, INFLIGHT, budget, seed, 500);
    spec.commit = protocol;
    spec.session_silence_ns = Some(SESSION_SILENCE_NS);
    spec
}

/// The coordinators' counters summed over the nodes.
fn coordinator_stats<W: splitkv_bench::Workload>(
    cluster: &splitkv_bench::BenchCluster<W>,
) -> CoordinatorStats {
    let mut sum = CoordinatorStats::default();
    for n in &cluster.parts.stats().nodes {
        let c = n.nic.coordinator;
        sum.committed += c.committed;
        sum.lock_requests += c.lock_requests;
        sum.read_only_lock_requests += c.read_only_lock_requests;
        sum.read_only_committed += c.read_only_committed;
        for (s, n) in sum
            .commits_by_round_trips
            .iter_mut()
            .zip(c.commits_by_round_trips)
        {
            *s += n;
        }
    }
    sum
}

/// The most round trips `protocol` takes before it reports a commit (a
/// transaction that reads a key it does not write, and writes).
fn round_trips_max(protocol: CommitProtocol) -> usize {
    let shape = Shape {
        reads_not_written: 1,
        written: 1,
    };
    row_of(protocol)
        .expect("a Dnl row")
        .round_trips_to_commit_report(shape)
}

/// The counted claims of one run (module docs).
fn check_counters(protocol: CommitProtocol, s: &CoordinatorStats, name: &str) {
    assert_eq!(s.read_only_lock_requests, 0, "{name}: Dnl-RO never locks");
    assert!(s.lock_requests > 0, "{name}: writing transactions locked");
    let max = round_trips_max(protocol);
    let trips = s.commits_by_round_trips;
    assert_eq!(trips.iter().sum::<u64>(), s.committed, "{name}: {trips:?}");
    assert!(
        trips[max + 1..=COMMIT_ROUND_TRIPS_MAX]
            .iter()
            .all(|&n| n == 0),
        "{name}: no commit reported after more than {max} round trips: {trips:?}"
    );
    assert!(trips[max] > 0, "{name}: some commit took {max}: {trips:?}");
}

/// Runs a history `workload` on a `protocol` cluster under `mix`, seeded
/// by `seed`; checks its history, replicas and counters; returns
/// (committed, conflict aborts, the coordinators' counters).
fn run_history(
    protocol: CommitProtocol,
    mix: FaultMix,
    workload: HistoryCheck,
    seed: u64,
    name: &str,
) -> (u64, u64, CoordinatorStats) {
    let cfg: SimConfig = mix.config(seed);
    let spec = dnl_spec(protocol, BUDGET, seed);
    let (mut cluster, net) = build_on_sim(spec, workload, cfg).expect("build");
    let mut sim = cluster.sim(cfg);
    if let Err(e) = cluster.run_sim_until_quiescent(&mut sim, &net, PASSES_PER_SLICE, PASSES_MAX) {
        panic!("{name}: no stall without node faults: {e}");
    }
    cluster.finish(sim.now());
    let checked = check_run(&mut cluster, name);
    cluster.check_replicas().expect("replicas agree");
    let s = checked.stats;
    assert_every_outcome_known(&s, BUDGET * NODES as u64, name);
    assert_eq!(s.failed_with(TxStatus::Rejected), 0, "{name}: none refused");
    assert!(
        checked.lost.committed_key_writes > 0,
        "{name}: committed writes were checked against the primaries"
    );
    let counters = coordinator_stats(&cluster);
    check_counters(protocol, &counters, name);
    (s.committed, s.conflicts(), counters)
}

#[test]
fn every_dnl_row_keeps_list_append_strictly_serializable() {
    for protocol in ROWS {
        let mut read_only = 0;
        for mix in MIXES {
            for (seed, shape) in [(31, TxShape::Mixed), (32, TxShape::WriteSkew)] {
                let name = format!("{protocol}_{mix:?}_list_append_{seed}");
                let w = list_append(8, NODES, BUDGET, shape);
                let (committed, conflicts, s) = run_history(protocol, mix, w, seed, &name);
                assert!(committed > 0 && conflicts > 0, "{name}: contended");
                read_only += s.read_only_committed;
            }
        }
        assert!(
            read_only > 0,
            "{protocol}: read-only transactions committed"
        );
    }
}

#[test]
fn every_dnl_row_keeps_registers_strictly_serializable() {
    for protocol in ROWS {
        for mix in MIXES {
            for (seed, shape) in [(33, TxShape::Mixed), (34, TxShape::WriteSkew)] {
                let name = format!("{protocol}_{mix:?}_register_{seed}");
                let w = register(4, shape);
                let (committed, conflicts, _) = run_history(protocol, mix, w, seed, &name);
                assert!(committed > 0 && conflicts > 0, "{name}: contended");
            }
        }
    }
}

/// Smallbank: the money check (every committed transfer's effect and no
/// other in the final balances) and replica agreement, its read-only
/// Balance transactions running Dnl-RO.
#[test]
fn every_dnl_row_keeps_smallbank_money() {
    for protocol in ROWS {
        for mix in MIXES {
            for seed in [35, 36] {
                let name = format!("{protocol}_{mix:?}_smallbank_{seed}");
                let cfg: SimConfig = mix.config(seed);
                let spec = dnl_spec(protocol, SMALLBANK_BUDGET, seed);
                let w = Smallbank::new(SMALLBANK_ACCOUNTS, None).expect("accounts");
                let (mut cluster, net) = build_on_sim(spec, w, cfg).expect("build");
                let mut sim = cluster.sim(cfg);
                let ran =
                    cluster.run_sim_until_quiescent(&mut sim, &net, PASSES_PER_SLICE, PASSES_MAX);
                if let Err(e) = ran {
                    panic!("{name}: no stall without node faults: {e}");
                }
                cluster.finish(sim.now());
                cluster.check().expect("money check");
                cluster.check_replicas().expect("replicas agree");
                let load = cluster.load_stats();
                assert_eq!(load.finished(), SMALLBANK_BUDGET * NODES as u64, "{name}");
                assert_eq!(load.failed + load.unknown, 0, "{name}: {load:?}");
                let s = coordinator_stats(&cluster);
                check_counters(protocol, &s, &name);
                assert!(s.read_only_committed > 0, "{name}: Balance ran Dnl-RO");
            }
        }
    }
}
