//! The one-shot transaction (etcd's `Txn` shape) through a real node with no
//! procedure registered: the built-in at `TXN_PROCEDURE_ID` runs it on the
//! commit protocol. A compare-and-swap commits its success branch once and
//! its failure branch after (with the value read); a delete commits the
//! key's tombstone, which the host table keeps; a `Txn` the built-in
//! cannot run is refused and changes nothing.

use splitkv_host::{build_node, Node, NodeConfig};
use splitkv_layout::app::txn::{Branch, CmpOp, Compare, Condition, GetResult, Op, Txn, TxnResult};
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::Key;
use splitkv_nic::net::mem::{mem_network, MemTransport};
use splitkv_nic::procedure::txn::TXN_PROCEDURE_ID;
use splitkv_nic::{Placement, ProcedureRegistry};

/// A one-node cluster (replication 1) of a two-endpoint network, with no
/// registered procedure.
fn node() -> (Node, MemTransport) {
    let mut net = mem_network(2);
    let peer = net.pop().unwrap();
    let t = net.pop().unwrap();
    let cfg = NodeConfig::new(0, Placement::new(2, 1).unwrap(), 1024, 64);
    let n = build_node(&cfg, ProcedureRegistry::new(), Box::new(t)).expect("node");
    (n, peer)
}

/// Submits `txn` and runs the node until its outcome arrives.
fn run_txn(n: &mut Node, req_id: u64, txn: &[u8]) -> (TxStatus, Vec<u8>) {
    n.client.submit(req_id, TXN_PROCEDURE_ID, txn).unwrap();
    for i in 0..1000u64 {
        n.nic.run_iteration(i);
        n.worker.run_iteration(i);
        let mut got = None;
        n.client
            .poll(1, |o| got = Some((o.status, o.result.to_vec())))
            .unwrap();
        if let Some(g) = got {
            return g;
        }
    }
    panic!("no outcome for request {req_id}");
}

fn encode(compares: &[Compare<'_>], success: &[Op<'_>], failure: &[Op<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    Txn::encode(compares, success, failure, &mut out).expect("a valid Txn");
    out
}

/// Compare-and-swap `key` from `from` to `to`; the failure branch reads it.
fn cas(key: Key, from: &[u8], to: &[u8]) -> Vec<u8> {
    let expect = Compare {
        key,
        condition: Condition::Value {
            op: CmpOp::Equal,
            operand: from,
        },
    };
    encode(&[expect], &[Op::Put { key, value: to }], &[Op::Get(key)])
}

#[test]
fn compare_and_swap_commits_one_branch_or_the_other() {
    let (mut n, _peer) = node();
    let placement = Placement::new(2, 1).unwrap();
    let id = (0..)
        .find(|&i| placement.primary(&Key::new(0, i)) == 0)
        .unwrap();
    let key = Key::new(0, id);

    // Created only if absent.
    let create = Compare {
        key,
        condition: Condition::Absent,
    };
    let put = encode(&[create], &[Op::Put { key, value: b"old" }], &[]);
    let (status, result) = run_txn(&mut n, 1, &put);
    assert_eq!(status, TxStatus::Committed);
    assert_eq!(
        TxnResult::decode(&result).unwrap().branch(),
        Branch::Success
    );

    let (status, result) = run_txn(&mut n, 2, &cas(key, b"old", b"new"));
    assert_eq!(status, TxStatus::Committed);
    assert_eq!(
        TxnResult::decode(&result).unwrap().branch(),
        Branch::Success
    );

    // The same swap again: the compare fails, the failure branch reads.
    let (status, result) = run_txn(&mut n, 3, &cas(key, b"old", b"newer"));
    assert_eq!(status, TxStatus::Committed, "a failed compare is no abort");
    let r = TxnResult::decode(&result).unwrap();
    assert_eq!(r.branch(), Branch::Failure);
    let got: Vec<_> = r.gets().collect();
    assert_eq!(
        got,
        vec![GetResult::Found {
            version: 2,
            value: b"new"
        }]
    );
    // And the put of the absent-only create now fails its compare.
    let (_, result) = run_txn(&mut n, 4, &put);
    assert_eq!(
        TxnResult::decode(&result).unwrap().branch(),
        Branch::Failure
    );

    let mut v = Vec::new();
    for i in 0..50 {
        n.nic.run_iteration(1000 + i);
        n.worker.run_iteration(1000 + i);
    }
    let meta = n.worker.table().get(&key, &mut v).expect("the key exists");
    assert_eq!((meta.version(), v.as_slice()), (2, &b"new"[..]));
    assert_eq!(n.nic.index().locks_held(), 0, "no lock left held");
}

#[test]
fn a_txn_the_built_in_cannot_run_is_refused_and_changes_nothing() {
    let (mut n, _peer) = node();
    let (status, _) = run_txn(&mut n, 2, b"\x01\x00");
    assert_ne!(status, TxStatus::Committed, "garbage is refused");
    assert_eq!(n.nic.index().locks_held(), 0);
}

#[test]
fn a_delete_commits_a_tombstone_the_host_keeps_and_an_absent_key_is_left_alone() {
    let (mut n, _peer) = node();
    // Keys of this node's shard (the peer is silent).
    let placement = Placement::new(2, 1).unwrap();
    let mut here = (0..)
        .map(|i| Key::new(0, i))
        .filter(|k| placement.primary(k) == 0);
    let (key, absent) = (here.next().unwrap(), here.next().unwrap());
    let put = encode(&[], &[Op::Put { key, value: b"v" }], &[]);
    assert_eq!(run_txn(&mut n, 1, &put).0, TxStatus::Committed);
    let delete = encode(&[], &[Op::Delete(key), Op::Delete(absent)], &[]);
    assert_eq!(run_txn(&mut n, 2, &delete).0, TxStatus::Committed);
    // Read back absent, at the tombstone's version.
    let gone = Compare {
        key,
        condition: Condition::Version {
            op: CmpOp::Equal,
            operand: 2,
        },
    };
    let absent_now = Compare {
        key,
        condition: Condition::Absent,
    };
    let check = encode(&[gone, absent_now], &[Op::Get(key)], &[]);
    let (status, result) = run_txn(&mut n, 3, &check);
    assert_eq!(status, TxStatus::Committed);
    let r = TxnResult::decode(&result).unwrap();
    assert_eq!(r.branch(), Branch::Success);
    assert_eq!(r.gets().collect::<Vec<_>>(), vec![GetResult::NotFound]);

    let mut v = Vec::new();
    for i in 0..50 {
        n.nic.run_iteration(1000 + i);
        n.worker.run_iteration(1000 + i);
    }
    let meta = n
        .worker
        .table()
        .get(&key, &mut v)
        .expect("the tombstone stays");
    assert_eq!((meta.version(), meta.is_deleted(), v.len()), (2, true, 0));
    assert_eq!(n.worker.table().get(&absent, &mut v), None, "no write");
    assert_eq!(n.nic.index().locks_held(), 0, "no lock left held");
}
