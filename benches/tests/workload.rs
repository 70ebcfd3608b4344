//! A second workload on the same cluster path as Smallbank: a counter per key,
//! incremented by one procedure. It shows what implementing [`Workload`] takes
//! (the shape the list-append and register workloads follow), and its check
//! reads the database: the counters at their primaries must sum to the commits
//! the clients saw, and a check given wrong bookkeeping fails.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_bench::workload::RowIter;
use splitkv_bench::{
    AttemptOutcome, BenchCluster, CheckError, ClusterSpec, Db, TxCall, TxGenerator, Workload,
};
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::Key;
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::net::Transport;
use splitkv_nic::{ProcError, Procedure, ProcedureRegistry, ReadView, TxPlan, UserAbort, WriteSet};
use std::sync::Arc;

const TABLE: u32 = 7;

struct Increment;

fn key_of(args: &[u8]) -> Result<Key, ProcError> {
    let id = args
        .try_into()
        .map_err(|_| ProcError::BadArgs("8-byte key id"))?;
    Ok(Key::new(TABLE, u64::from_le_bytes(id)))
}

impl Procedure for Increment {
    fn name(&self) -> &'static str {
        "Increment"
    }
    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        plan.write(key_of(args)?);
        Ok(())
    }
    fn execute(
        &self,
        args: &[u8],
        r: &ReadView,
        w: &mut WriteSet,
        out: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        let k = key_of(args).map_err(|_| UserAbort)?;
        let v = r.get(&k).ok_or(UserAbort)?;
        let n = u64::from_le_bytes(v.try_into().map_err(|_| UserAbort)?) + 1;
        w.put(k, &n.to_le_bytes());
        out.extend_from_slice(&n.to_le_bytes());
        Ok(())
    }
}

struct Counters {
    keys: u64,
    /// Added to the expected total (a test of the check itself).
    skew: u64,
}

struct CounterGen {
    rng: Xoshiro256PlusPlus,
    keys: u64,
    committed: u64,
}

impl TxGenerator for CounterGen {
    fn next(&mut self, call: &mut TxCall) {
        call.procedure = 0;
        let k: u64 = self.rng.gen_range(0..self.keys);
        call.args.extend_from_slice(&k.to_le_bytes());
    }
    fn on_outcome(&mut self, o: &AttemptOutcome<'_>) {
        self.committed += (o.status == TxStatus::Committed) as u64;
    }
}

impl Workload for Counters {
    type Generator = CounterGen;
    type Report = u64;
    fn name(&self) -> &'static str {
        "counters"
    }
    fn register(&self, reg: &mut ProcedureRegistry) {
        reg.register(Arc::new(Increment));
    }
    fn rows(&self) -> u64 {
        self.keys
    }
    fn value_bytes_max(&self) -> usize {
        8
    }
    fn initial_rows(&self) -> RowIter<'_> {
        Box::new((0..self.keys).map(|k| (Key::new(TABLE, k), 0u64.to_le_bytes().to_vec())))
    }
    fn generator(&self, client: u16, seed: u64) -> CounterGen {
        CounterGen {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed ^ client as u64),
            keys: self.keys,
            committed: 0,
        }
    }
    fn check(&self, db: &Db<'_>, gens: &[&CounterGen]) -> Result<u64, CheckError> {
        let expected: u64 = gens.iter().map(|g| g.committed).sum::<u64>() + self.skew;
        let mut buf = Vec::new();
        let mut total = 0;
        for k in 0..self.keys {
            let key = Key::new(TABLE, k);
            db.get(&key, &mut buf).ok_or(CheckError::MissingRow(key))?;
            total += u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
        }
        if total != expected {
            return Err(CheckError::Failed {
                check: "counters",
                detail: format!("counters sum to {total}, clients committed {expected}"),
            });
        }
        Ok(total)
    }
}

fn run(skew: u64) -> (Result<u64, CheckError>, u64) {
    let mut spec = ClusterSpec::new();
    spec.inflight_per_node = 8;
    spec.budget_per_node = Some(2_000);
    let transports = mem_network(spec.nodes)
        .into_iter()
        .map(|t| Box::new(t) as Box<dyn Transport>)
        .collect();
    let workload = Counters { keys: 50, skew };
    let mut c = BenchCluster::build(spec, workload, transports, |_| {}).expect("build");
    c.drain(0, 1_000, 50_000_000).expect("quiesces");
    c.check_replicas().expect("replicas");
    let stats = c.load_stats();
    assert_eq!(stats.drawn, 6_000);
    assert_eq!(stats.finished(), stats.drawn);
    (c.check(), stats.conflicts)
}

#[test]
fn a_counter_workload_runs_on_the_cluster_path_and_its_check_reads_the_database() {
    let (ok, conflicts) = run(0);
    assert!(ok.expect("counter check") > 5_000, "most increments commit");
    assert!(
        conflicts > 0,
        "50 keys, 24 in flight: conflicts were retried"
    );
    let (bad, _) = run(1);
    assert!(
        matches!(
            bad,
            Err(CheckError::Failed {
                check: "counters",
                ..
            })
        ),
        "{bad:?}"
    );
}

/// The counters on the embedding API's polling threads (the binary's path):
/// the budget completes, the check passes; a panicking polling thread comes
/// back as `ClusterError::Panicked` with its message.
#[test]
fn the_cluster_path_runs_on_the_api_threads_and_reports_a_panic() {
    use splitkv_bench::{BuildError, ThreadRun};
    use splitkv_host::cluster::ClusterError;
    use std::time::Duration;
    let build = || {
        let mut spec = ClusterSpec::new();
        spec.inflight_per_node = 8;
        spec.budget_per_node = Some(1_000);
        let transports = mem_network(spec.nodes)
            .into_iter()
            .map(|t| Box::new(t) as Box<dyn Transport>)
            .collect();
        let workload = Counters { keys: 50, skew: 0 };
        BenchCluster::build(spec, workload, transports, |_| {}).expect("build")
    };
    let mut run = ThreadRun {
        stop_after: None,
        timeout: Duration::from_secs(60),
        inject_panic: false,
    };
    let (mut c, elapsed) = build().run_threads(run, |_| {}).expect("no panic");
    assert!(elapsed < run.timeout);
    let now = c.parts.now();
    c.drain(now, 1_000, 10_000_000).expect("quiesces");
    assert_eq!(c.load_stats().drawn, 3_000);
    assert_eq!(c.load_stats().finished(), 3_000);
    assert!(c.check().expect("counter check") > 2_500);
    c.check_replicas().expect("replicas");
    run.inject_panic = true;
    match build().run_threads(run, |_| {}) {
        Err(BuildError::Cluster(ClusterError::Panicked { message, .. })) => {
            assert!(message.contains("injected panic"), "{message}")
        }
        other => panic!("expected a panic report, got {:?}", other.map(|_| ())),
    }
}
