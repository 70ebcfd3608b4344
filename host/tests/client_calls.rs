//! The calls of `splitkv_client::KvClient` on the in-process client of a
//! running cluster: single-key calls through one-key transactions of the
//! built-in, a `Txn` with compares taking both branches, procedures by id and
//! by name, the asynchronous submit / poll / wait, concurrent
//! compare-and-swap increments from two clients, and a stopped cluster.

mod support;

use splitkv_client::{
    AbortReason, Branch, Call, CallError, Cmp, CmpOp, KvClient, Reply, Txn, TxnOp, Versioned,
};
use splitkv_host::{Client, Cluster};
use splitkv_layout::Key;
use std::time::{Duration, Instant};
use support::{registry, INCR};

/// Values of at most this many bytes in the test clusters.
const VALUE_MAX: usize = 32;

fn cluster(clients_per_node: usize) -> Cluster {
    Cluster::builder()
        .nodes(2)
        .replication(2)
        .capacity_keys(1000)
        .value_bytes_max(VALUE_MAX)
        .clients_per_node(clients_per_node)
        .procedures(registry())
        .build()
        .expect("cluster")
}

fn k(id: u64) -> Key {
    Key::new(7, id)
}

fn client(c: &Cluster, node: u16) -> Client {
    c.client(node).expect("a free client")
}

#[test]
fn single_key_calls_have_their_semantics() {
    let c = cluster(1);
    let mut a = client(&c, 0);
    let key = k(1);
    assert_eq!(a.get(key), Err(CallError::KeyNotFound));
    a.insert(key, b"one").unwrap();
    assert!(matches!(
        a.insert(key, b"again"),
        Err(CallError::Aborted {
            reason: AbortReason::CompareFailed,
            ..
        })
    ));
    let v1 = a.get(key).unwrap();
    assert_eq!(v1.value, b"one");
    a.put(key, b"two").unwrap();
    let v2 = a.get(key).unwrap();
    assert_eq!(v2.value, b"two");
    assert!(v2.version > v1.version, "{v1:?} then {v2:?}");
    // Put creates an absent key.
    a.put(k(2), b"new").unwrap();
    assert_eq!(a.get(k(2)).unwrap().value, b"new");
    // DeleteOne: the key's tombstone at the next version, read as absent.
    a.delete(key).unwrap();
    assert_eq!(a.get(key), Err(CallError::KeyNotFound));
    assert_eq!(
        a.delete(key),
        Err(CallError::KeyNotFound),
        "already deleted"
    );
    assert_eq!(a.delete(k(3)), Err(CallError::KeyNotFound), "never written");
    let tombstone = v2.version + 1;
    let absent_at = |version| {
        Txn::new()
            .when([Cmp::absent(key), Cmp::version_eq(key, version)])
            .then([TxnOp::get(key)])
    };
    let seen = a.txn(&absent_at(tombstone)).unwrap();
    assert_eq!(
        (seen.branch, seen.gets),
        (Branch::Success, vec![None]),
        "absent, with the tombstone's version"
    );
    // An insert over the tombstone takes the version after it.
    a.insert(key, b"three").unwrap();
    let v3 = a.get(key).unwrap();
    assert_eq!(
        (v3.value.as_slice(), v3.version),
        (&b"three"[..], tombstone + 1)
    );
    let present = Txn::new().when([Cmp::present(key)]).then([TxnOp::get(key)]);
    assert_eq!(a.txn(&present).unwrap().gets, vec![Some(v3.clone())]);
    assert!(!a.txn(&absent_at(tombstone)).unwrap().succeeded());
    // A Txn deletes one key and writes another atomically.
    let swap = Txn::new()
        .when([Cmp::present(key)])
        .then([TxnOp::delete(key), TxnOp::put(k(4), *b"moved")]);
    assert!(a.txn(&swap).unwrap().succeeded());
    assert_eq!(a.get(key), Err(CallError::KeyNotFound));
    assert_eq!(a.get(k(4)).unwrap().value, b"moved");
    assert!(!a.txn(&swap).unwrap().succeeded(), "nothing left to delete");
    // Over the node's value bound: refused before sending.
    assert!(matches!(
        a.put(key, &[0; VALUE_MAX + 1]),
        Err(CallError::TooLarge { .. })
    ));
    assert_eq!(a.in_flight(), 0);
    c.shutdown().unwrap();
}

#[test]
fn a_txn_with_compares_takes_either_branch() {
    let c = cluster(1);
    let mut a = client(&c, 1);
    let (x, y) = (k(10), k(11));
    a.put(x, b"5").unwrap();
    let vx = a.get(x).unwrap();
    // Compare-and-swap on the version: success writes y and reads x.
    let cas = |version| {
        Txn::new()
            .when([Cmp::version_eq(x, version), Cmp::absent(y)])
            .then([
                TxnOp::put(x, *b"6"),
                TxnOp::put(y, *b"y"),
                TxnOp::get(k(12)),
            ])
            .otherwise([TxnOp::get(x), TxnOp::get(y)])
    };
    let won = a.txn(&cas(vx.version)).unwrap();
    assert_eq!(won.branch, Branch::Success);
    assert_eq!(won.gets, vec![None], "k(12) was never written");
    // The same swap again: the version moved, the failure branch reads.
    let lost = a.txn(&cas(vx.version)).unwrap();
    assert!(!lost.succeeded());
    let [gx, gy] = [&lost.gets[0], &lost.gets[1]].map(|g| g.clone().expect("present"));
    assert_eq!(
        (gx.value.as_slice(), gy.value.as_slice()),
        (&b"6"[..], &b"y"[..])
    );
    assert!(gx.version > vx.version);
    // Value compares, bytewise.
    let gt = Txn::new()
        .when([Cmp::value(x, CmpOp::Greater, *b"5"), Cmp::present(y)])
        .then([TxnOp::get(y)]);
    assert_eq!(
        a.txn(&gt).unwrap().gets,
        vec![Some(Versioned {
            version: gy.version,
            value: b"y".to_vec()
        })]
    );
    // A bound broken: typed, nothing sent.
    let twice = Txn::new().then([TxnOp::get(x), TxnOp::put(x, *b"z")]);
    assert!(matches!(a.txn(&twice), Err(CallError::InvalidTxn(_))));
    c.shutdown().unwrap();
}

#[test]
fn procedures_by_id_and_by_name() {
    let c = cluster(1);
    let mut a = client(&c, 0);
    let args = 3u64.to_le_bytes();
    // The trait's `call` (the inherent one takes an id and returns the raw
    // outcome).
    let one = KvClient::call(&mut a, INCR, &args).unwrap();
    let two = KvClient::call(&mut a, "incr", &args).unwrap();
    assert_eq!(
        (one, two),
        (1u64.to_le_bytes().to_vec(), 2u64.to_le_bytes().to_vec())
    );
    assert_eq!(a.procedure_id("incr"), Ok(INCR));
    assert!(matches!(
        KvClient::call(&mut a, "nope", &args),
        Err(CallError::UnknownProcedure { name }) if name == "nope"
    ));
    assert!(matches!(
        KvClient::call(&mut a, 999u32, &args),
        Err(CallError::Rejected { .. })
    ));
    // Bad arguments: the procedure refuses them.
    assert!(matches!(
        KvClient::call(&mut a, "incr", b"x"),
        Err(CallError::Rejected { .. })
    ));
    c.shutdown().unwrap();
}

#[test]
fn submit_then_poll_or_wait() {
    let c = cluster(1);
    let mut a = client(&c, 0);
    let end = Instant::now() + Duration::from_secs(10);
    let deadline = Some(end);
    let puts: Vec<_> = (0..8u64)
        .map(|i| KvClient::submit(&mut a, Call::Put(k(100 + i), &i.to_le_bytes())).unwrap())
        .collect();
    assert_eq!(a.in_flight(), 8);
    // Waiting for the last files the others.
    assert_eq!(a.wait(puts[7], deadline), Ok(Reply::Written));
    let mut done = Vec::new();
    while done.len() < 7 {
        assert!(Instant::now() < end, "{} of 7 polled", done.len());
        a.poll_all(&mut done).unwrap();
    }
    assert!(done.iter().all(|d| d.result == Ok(Reply::Written)));
    let mut tickets: Vec<_> = done.iter().map(|d| d.ticket).collect();
    tickets.sort();
    assert_eq!(tickets, puts[..7].to_vec());
    assert_eq!(a.in_flight(), 0);
    assert_eq!(
        a.wait(puts[0], deadline),
        Err(CallError::UnknownTicket { ticket: puts[0] })
    );
    let get = KvClient::submit(&mut a, Call::Get(k(103))).unwrap();
    assert!(matches!(a.wait(get, deadline), Ok(Reply::Value(v)) if v.value == 3u64.to_le_bytes()));
    c.shutdown().unwrap();
}

/// Increments `counter` `times` times by compare-and-swap on its version,
/// retrying failed compares and conflicts; returns the retries. Generic: the
/// out-of-process client runs the same code (examples/cas.rs).
fn increment(client: &mut dyn KvClient, counter: Key, times: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut retries = 0;
    let mut done = 0;
    while done < times {
        assert!(Instant::now() < deadline, "{done} of {times} increments");
        let current = match client.get(counter) {
            Ok(v) => v,
            Err(e) if e.is_retryable() => {
                retries += 1;
                continue;
            }
            Err(e) => panic!("get: {e}"),
        };
        let n = u64::from_le_bytes(current.value.as_slice().try_into().expect("8 bytes"));
        let cas = Txn::new()
            .when([Cmp::version_eq(counter, current.version)])
            .then([TxnOp::put(counter, (n + 1).to_le_bytes())]);
        match client.txn(&cas) {
            Ok(out) if out.succeeded() => done += 1,
            Ok(_) => retries += 1,
            Err(e) if e.is_retryable() => retries += 1,
            Err(e) => panic!("txn: {e}"),
        }
    }
    retries
}

#[test]
fn concurrent_compare_and_swap_increments_lose_none() {
    let c = cluster(1);
    let counter = k(500);
    let (mut a, mut b) = (client(&c, 0), client(&c, 1));
    a.put(counter, &0u64.to_le_bytes()).unwrap();
    let per_thread = 40;
    std::thread::scope(|s| {
        let t = s.spawn(|| increment(&mut a, counter, per_thread));
        increment(&mut b, counter, per_thread);
        t.join().expect("thread");
    });
    let end = b.get(counter).unwrap();
    assert_eq!(end.value, (2 * per_thread).to_le_bytes());
    assert!(
        end.version >= 2 * per_thread,
        "one version per committed write"
    );
    c.shutdown().unwrap();
}

#[test]
fn a_stopped_cluster_leaves_its_clients_not_connected() {
    let c = cluster(1);
    let mut a = client(&c, 0);
    a.put(k(1), b"v").unwrap();
    c.shutdown().unwrap();
    assert!(matches!(a.get(k(1)), Err(CallError::NotConnected { .. })));
    assert_eq!(a.in_flight(), 0);
}
