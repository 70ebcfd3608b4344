//! The load generator against hand-driven rings: no drawn transaction is lost
//! to a full ring, conflicts are retried unchanged after a backoff, and the
//! window counts only what it covers.

use super::*;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_layout::host_nic::{HostToNic, NicToHost, TxOutcome};
use splitkv_layout::ring::{ring_pair, RingConsumer, RingProducer};

/// Draws procedure 1 with the sequence number as its argument.
#[derive(Default)]
struct Counting {
    drawn: u64,
    outcomes: Vec<(u64, TxStatus, u32, bool)>,
}

impl TxGenerator for Counting {
    fn next(&mut self, call: &mut TxCall) {
        call.procedure = 1;
        call.args.extend_from_slice(&self.drawn.to_le_bytes());
        self.drawn += 1;
    }
    fn on_outcome(&mut self, o: &AttemptOutcome<'_>) {
        let seq = u64::from_le_bytes(o.call.args[..8].try_into().unwrap());
        self.outcomes.push((seq, o.status, o.attempt, o.last));
    }
}

struct Node {
    requests: RingConsumer,
    outcomes: RingProducer,
    buf: Vec<u8>,
}

impl Node {
    /// Pops every request: (req_id, sequence number).
    fn take(&mut self) -> Vec<(u64, u64)> {
        let mut v = Vec::new();
        while self.requests.try_pop(&mut self.buf).unwrap() {
            match HostToNic::decode(&self.buf).unwrap() {
                HostToNic::TxRequest(r) => {
                    v.push((r.req_id, u64::from_le_bytes(r.args.try_into().unwrap())))
                }
                other => panic!("{other:?}"),
            }
        }
        v
    }

    fn answer(&mut self, req_id: u64, status: TxStatus) {
        let mut out = Vec::new();
        NicToHost::TxOutcome(TxOutcome {
            req_id,
            status,
            result: &[],
        })
        .encode(&mut out);
        self.outcomes.try_push(&out).unwrap();
    }
}

fn setup(request_ring_bytes: usize, max_tries: u32) -> (LoadGen<Counting>, Node) {
    let (req_tx, req_rx) = ring_pair(request_ring_bytes).unwrap();
    let (out_tx, out_rx) = ring_pair(1 << 16).unwrap();
    let cfg = LoadGenConfig {
        seed: 3,
        inflight_max: 64,
        budget: None,
        record: true,
        retry: RetryPolicy {
            max_tries,
            backoff_min_ns: 1_000,
            backoff_max_ns: 4_000,
        },
    };
    let lg = LoadGen::new(0, Client::new(req_tx, out_rx), Counting::default(), cfg);
    let node = Node {
        requests: req_rx,
        outcomes: out_tx,
        buf: Vec::new(),
    };
    (lg, node)
}

#[test]
fn a_full_ring_never_loses_a_drawn_transaction() {
    let (mut lg, mut node) = setup(256, 1);
    let mut seen = Vec::new();
    for round in 0..20 {
        lg.run_iteration(round * 10);
        lg.run_iteration(round * 10 + 1); // ring still full: nothing redrawn
        let s = lg.stats();
        assert_eq!(s.drawn, s.attempts + 1, "exactly one held");
        for (req_id, seq) in node.take() {
            seen.push(seq);
            node.answer(req_id, TxStatus::Committed);
        }
    }
    assert!(seen.len() > 20, "the small ring filled many times");
    assert_eq!(
        seen,
        (0..seen.len() as u64).collect::<Vec<_>>(),
        "none skipped"
    );
    assert_eq!(lg.generator().drawn, lg.stats().drawn);
}

#[test]
fn conflicts_are_retried_unchanged_after_a_backoff_until_max_tries() {
    let (mut lg, mut node) = setup(1 << 16, 3);
    lg.set_window(0, 1_000_000);
    lg.run_iteration(0);
    let first = node.take();
    assert_eq!(first.len(), 64);
    let (req0, seq0) = first[0];
    node.answer(req0, TxStatus::LockConflict);
    lg.run_iteration(10);
    assert!(node.take().is_empty(), "the retry waits out its backoff");
    lg.run_iteration(10 + 2 * 4_000);
    let again = node.take();
    // The retry kept its place in the window: nothing new was drawn beside it.
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].1, seq0, "same arguments");
    node.answer(again[0].0, TxStatus::ValidationFailed);
    lg.run_iteration(20_000);
    lg.run_iteration(40_000);
    let third = node.take();
    assert_eq!(third[0].1, seq0);
    node.answer(third[0].0, TxStatus::LockConflict);
    lg.run_iteration(50_000);
    let s = lg.stats();
    assert_eq!((s.conflicts, s.retries, s.gave_up), (3, 2, 1));
    let seen: Vec<_> = lg.generator().outcomes.clone();
    assert_eq!(
        seen,
        [
            (seq0, TxStatus::LockConflict, 1, false),
            (seq0, TxStatus::ValidationFailed, 2, false),
            (seq0, TxStatus::LockConflict, 3, true),
        ]
    );
    // The gave-up transaction left the window: a new one replaced it.
    assert_eq!(node.take().len(), 1);
    assert_eq!(lg.window_stats(), s, "all inside the window");
}

#[test]
fn the_window_counts_only_outcomes_inside_it() {
    let (mut lg, mut node) = setup(1 << 16, 10);
    lg.set_window(100, 200);
    lg.run_iteration(0);
    let reqs = node.take();
    node.answer(reqs[0].0, TxStatus::Committed);
    lg.run_iteration(50); // before the window
    node.answer(reqs[1].0, TxStatus::Committed);
    node.answer(reqs[2].0, TxStatus::UserAborted);
    lg.run_iteration(150); // inside
    node.answer(reqs[3].0, TxStatus::Committed);
    lg.run_iteration(250); // after
    let (all, w) = (lg.stats(), lg.window_stats());
    assert_eq!((all.committed, all.user_aborted), (3, 1));
    assert_eq!((w.committed, w.user_aborted, w.completed()), (1, 1, 2));
    assert_eq!(lg.latency_ns().len(), 1);
    assert_eq!(
        lg.record().unwrap().len(),
        3,
        "the record keeps every commit"
    );
}

#[test]
fn backoff_stays_within_its_bounds_and_grows() {
    let p = RetryPolicy {
        max_tries: 10,
        backoff_min_ns: 1_000,
        backoff_max_ns: 50_000,
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    for attempt in 1..12 {
        let hi = (1_000u64 << attempt).min(50_000);
        for _ in 0..100 {
            let b = p.backoff_ns(attempt, &mut rng);
            assert!((1_000..=hi).contains(&b), "{attempt}: {b}");
        }
    }
}

#[test]
fn an_unknown_outcome_is_counted_and_never_resubmitted() {
    // max_tries 5: a conflict would be retried; an unknown outcome may have
    // committed, so it is the transaction's last.
    let (mut lg, mut node) = setup(1 << 16, 5);
    lg.run_iteration(0);
    let first = node.take();
    let (req0, seq0) = first[0];
    node.answer(req0, TxStatus::Unknown);
    for t in 1..20 {
        lg.run_iteration(t * 10_000);
    }
    let next = node.take();
    assert_eq!(next.len(), 1, "one new transaction took its place");
    assert_ne!(next[0].1, seq0, "not the unknown one again");
    let s = lg.stats();
    assert_eq!((s.unknown, s.retries, s.failed, s.committed), (1, 0, 0, 0));
    assert_eq!(
        lg.generator().outcomes,
        vec![(seq0, TxStatus::Unknown, 1, true)]
    );
}
