//! Property test: random calls, pipelined up to the grant and answered out
//! of order, against a model of the replies ([`super::right_answer`]).

use super::*;

/// One call of the property test, owned.
#[derive(Debug, Clone)]
enum Spec {
    Get(u64),
    Put(u64, Vec<u8>),
    Insert(u64, Vec<u8>),
    Delete(u64),
    Txn(Txn),
    Echo(Vec<u8>),
}

impl Spec {
    fn call(&self) -> Call<'_> {
        match self {
            Spec::Get(i) => Call::Get(Key::new(1, *i)),
            Spec::Put(i, v) => Call::Put(Key::new(1, *i), v),
            Spec::Insert(i, v) => Call::Insert(Key::new(1, *i), v),
            Spec::Delete(i) => Call::Delete(Key::new(1, *i)),
            Spec::Txn(t) => Call::Txn(t),
            Spec::Echo(a) => Call::Procedure(ProcedureRef::Name("echo"), a),
        }
    }

    /// What [`right_answer`] makes of the call.
    fn expected(&self) -> Result<Reply, CallError> {
        match self {
            Spec::Get(i) => Ok(Reply::Value(Versioned {
                version: 3,
                value: i.to_le_bytes().to_vec(),
            })),
            Spec::Put(..) => Ok(Reply::Written),
            Spec::Insert(..) => Err(CallError::Aborted {
                reason: AbortReason::CompareFailed,
                detail: "key exists".into(),
            }),
            Spec::Delete(_) => Err(CallError::KeyNotFound),
            Spec::Txn(t) => Ok(Reply::Txn(TxnOutput {
                branch: Branch::Success,
                gets: vec![None; t.get_count(Branch::Success)],
            })),
            Spec::Echo(a) => Ok(Reply::Output(a.iter().rev().copied().collect())),
        }
    }
}

fn spec() -> impl proptest::strategy::Strategy<Value = Spec> {
    use proptest::prelude::*;
    let bytes = || prop::collection::vec(any::<u8>(), 0..600);
    prop_oneof![
        (0..50u64).prop_map(Spec::Get),
        (0..50u64, bytes()).prop_map(|(i, v)| Spec::Put(i, v)),
        (0..50u64, bytes()).prop_map(|(i, v)| Spec::Insert(i, v)),
        (0..50u64).prop_map(Spec::Delete),
        (0..50u64, 0..6u64, bytes()).prop_map(|(i, gets, v)| {
            let k = |j| Key::new(1, j);
            Spec::Txn(
                Txn::new()
                    .when([Cmp::present(k(i))])
                    .then((100..100 + gets).map(|j| TxnOp::get(k(j))))
                    .then([TxnOp::put(k(i), v)]),
            )
        }),
        bytes().prop_map(Spec::Echo),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Random calls, pipelined up to the grant, answered by a node that
    /// holds up to `batch` outcomes and writes them last first: every
    /// completion is its own call's, typed as the model says, and none is
    /// lost or handed back twice.
    #[test]
    fn pipelined_calls_reordered_by_the_node_match_the_model(
        specs in proptest::collection::vec(spec(), 1..150),
        batch in 1usize..6,
        extra in 0u32..8,
    ) {
        let (_dir, path) = socket_path("model");
        let total = specs.len();
        let (mut held, mut seen) = (Vec::new(), 0usize);
        let script: Script = Box::new(move |req, out| {
            seen += 1;
            held.push(right_answer(req));
            if held.len() == batch || seen == total {
                out.extend(held.drain(..).rev());
            }
        });
        let grant = batch as u32 + extra;
        let node = fake_node(&path, limits(grant), vec![Some(ECHO_ID), None], script, None);
        let mut c = connect(&path);
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut sent: HashMap<Ticket, usize> = HashMap::new();
        let (mut next, mut checked) = (0usize, 0usize);
        let mut done = Vec::new();
        while checked < total {
            proptest::prop_assert!(Instant::now() < deadline, "{} of {} done", checked, total);
            while next < total {
                match c.submit(specs[next].call()) {
                    Ok(t) => {
                        proptest::prop_assert!(sent.insert(t, next).is_none());
                        next += 1;
                    }
                    Err(CallError::InFlightFull { max }) => {
                        proptest::prop_assert_eq!(max, grant);
                        break;
                    }
                    Err(e) => proptest::prop_assert!(false, "submit {}: {}", next, e),
                }
            }
            proptest::prop_assert!(c.in_flight() <= grant as usize);
            done.clear();
            c.poll_all(&mut done).unwrap();
            for d in &done {
                let i = sent.remove(&d.ticket).expect("a ticket in flight");
                proptest::prop_assert_eq!(&d.result, &specs[i].expected(), "call {}", i);
                checked += 1;
            }
            if done.is_empty() {
                std::thread::yield_now();
            }
        }
        proptest::prop_assert!(sent.is_empty());
        drop(c);
        proptest::prop_assert_eq!(node.join().unwrap().requests, total);
    }
}
