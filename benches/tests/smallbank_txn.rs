//! Smallbank through the one-shot `Txn` on the cluster path (three in-process
//! nodes, a hot set of four accounts): the money and replica checks pass,
//! compares fail and are retried from the values read, and no Smallbank
//! procedure is registered. The mutation that drops the write `Txn`'s version
//! compares loses updates under that contention, and the money check fails.

use splitkv_bench::smallbank::txn::TxnFigures;
use splitkv_bench::{BenchCluster, CheckError, ClusterSpec, Smallbank, TxApi};
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::net::Transport;

/// Runs `workload` to the end of a budget of 1500 `Txn` calls per node (8 in
/// flight), drains, and checks replicas; returns the money check and the
/// `Txn` clients' figures summed.
fn run(workload: Smallbank) -> (Result<i64, CheckError>, TxnFigures) {
    let mut spec = ClusterSpec::new();
    spec.inflight_per_node = 8;
    spec.budget_per_node = Some(1_500);
    let transports = mem_network(spec.nodes)
        .into_iter()
        .map(|t| Box::new(t) as Box<dyn Transport>)
        .collect();
    let mut c = BenchCluster::build(spec, workload, transports, |_| {}).expect("build");
    c.drain(0, 1_000, 50_000_000).expect("quiesces");
    c.check_replicas().expect("replicas");
    let mut figures = TxnFigures::default();
    for l in &c.loadgens {
        let client = l.generator().txn_client().expect("a Txn client");
        figures.add(&client.figures());
    }
    let stats = c.load_stats();
    assert_eq!(stats.finished(), stats.drawn, "every Txn call ended");
    let by = stats.committed_by_procedure;
    assert_eq!(by[..6], [0; 6], "no Smallbank procedure ran");
    assert_eq!(by[splitkv_bench::api::TXN_SLOT], stats.committed);
    (c.check().map(|m| m.created), figures)
}

fn hot() -> Smallbank {
    Smallbank::new(4, None)
        .expect("4 accounts")
        .with_api(TxApi::Txn)
        .expect("txn is built")
}

#[test]
fn smallbank_through_the_txn_passes_the_money_check_and_retries_failed_compares() {
    let (money, f) = run(hot());
    money.expect("money check");
    assert!(f.committed > 500, "{f:?}");
    assert!(
        f.compare_retries > 0,
        "contention makes compares fail: {f:?}"
    );
    assert!(
        f.user_aborted > 0,
        "SendPayment finds empty accounts: {f:?}"
    );
    assert_eq!(f.unknown, 0, "{f:?}");
    assert!(f.committed_by_type.iter().all(|n| *n > 0), "{f:?}");
}

#[test]
fn without_the_version_compares_the_money_check_fails() {
    let (money, f) = run(hot().without_version_compares());
    assert_eq!(f.compare_retries, 0, "no compare to fail: {f:?}");
    match money {
        Err(CheckError::Money {
            actual, expected, ..
        }) => assert_ne!(actual, expected),
        other => panic!("lost updates must fail the money check: {other:?}"),
    }
}

#[test]
fn interactive_is_refused() {
    let e = Smallbank::new(4, None)
        .unwrap()
        .with_api(TxApi::Interactive)
        .unwrap_err();
    assert!(e.to_string().contains("not built yet"), "{e}");
}
