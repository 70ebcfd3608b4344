//! The one-shot transaction as a built-in procedure: an application's
//! [`Txn`] (compares, then a success and a failure branch, in the shape of
//! etcd's `Txn`; `splitkv_layout::app::txn`) runs on the commit protocol
//! like any shipped procedure (Xenic §4.2.2), so it needs no code compiled
//! into the node. Its arguments are the `Txn`'s encoding as it is; its
//! result is a [`TxnResult`]. Every procedure registry has it, at
//! [`TXN_PROCEDURE_ID`].
//!
//! **Plan.** The write set is the union of the keys both branches put or
//! delete (the branch is known only once the reads are in, so both are
//! locked); the read set is every compared or read key outside it. The
//! bounds are the format's, checked at decode (`TXN_READS_MAX` =
//! [`READ_SET_MAX`], `TXN_WRITES_MAX` = [`WRITE_SET_MAX`]).
//!
//! **Execute.** Every compare is evaluated on the values and versions read
//! (an absent key — never written, or deleted: its tombstone — `Absent`
//! holds, `Present` and every value compare fail, its version is that of
//! its metadata: 0 if never written, the tombstone's if deleted); the
//! success branch runs if all hold, the failure branch otherwise — a failed
//! compare commits the failure branch, it is not an abort. A branch's gets
//! are answered from the reads; its puts become the writes.
//!
//! **Deletes.** A delete of a key read present writes its tombstone
//! (`WriteSet::delete`: DELETED, the next version, no value; Xenic §4.2's
//! LOG and COMMIT carry it like any write, and every table keeps it, so a
//! reader that validated the old version sees the change and a later
//! insert takes the version after the tombstone). A delete of an absent
//! key writes nothing: the key was locked and read absent, so leaving it
//! as it is (unlocked at COMMIT with the other unwritten keys) is the
//! same outcome without a version for nothing. Tombstones are not
//! reclaimed (that needs a per-shard version floor below every read in
//! flight).

use super::{ProcError, Procedure, ReadView, TxPlan, UserAbort, WriteSet};
#[cfg(doc)]
use super::{READ_SET_MAX, WRITE_SET_MAX};
use splitkv_layout::app::txn::{Branch, Compare, Condition, GetResult, Op, Txn, TxnResult};

/// The name the built-in registers under (what a client resolves).
pub const TXN_PROCEDURE_NAME: &str = "txn";

/// The built-in's id in every [`super::ProcedureRegistry`]: reserved at the
/// top of the id space, below the handshake's "unknown procedure" id
/// (`splitkv_layout::app::PROCEDURE_ID_UNKNOWN`), so registered procedures
/// keep their ids.
pub const TXN_PROCEDURE_ID: u32 = u32::MAX - 1;

const _: () = assert!(TXN_PROCEDURE_ID != splitkv_layout::app::PROCEDURE_ID_UNKNOWN);

/// The one-shot transaction procedure (module docs). Stateless.
#[derive(Debug, Clone, Copy, Default)]
pub struct TxnProcedure;

fn decode(args: &[u8]) -> Result<Txn<'_>, ProcError> {
    Txn::decode(args).map_err(|_| ProcError::BadArgs("not a valid Txn encoding"))
}

/// Whether `c` holds on what `reads` saw of its key.
fn holds(c: &Compare<'_>, reads: &ReadView) -> bool {
    let value = reads.get(&c.key);
    match c.condition {
        Condition::Present => value.is_some(),
        Condition::Absent => value.is_none(),
        Condition::Value { op, operand } => value.is_some_and(|v| op.holds(v, operand)),
        Condition::Version { op, operand } => {
            let version = reads.meta(&c.key).map_or(0, |m| m.version());
            op.holds(&version, &operand)
        }
    }
}

impl Procedure for TxnProcedure {
    fn name(&self) -> &'static str {
        TXN_PROCEDURE_NAME
    }

    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        let txn = decode(args)?;
        let ops = || txn.ops(Branch::Success).chain(txn.ops(Branch::Failure));
        for o in ops().filter(Op::is_write) {
            plan.write(o.key());
        }
        for k in txn.compares().map(|c| c.key).chain(ops().map(|o| o.key())) {
            plan.read(k);
        }
        plan.check()
    }

    fn execute(
        &self,
        args: &[u8],
        reads: &ReadView,
        writes: &mut WriteSet,
        result: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        // Planned from the same bytes: a failure here cannot happen; abort
        // rather than write anything if it does.
        let txn = decode(args).map_err(|_| UserAbort)?;
        let branch = match txn.compares().all(|c| holds(&c, reads)) {
            true => Branch::Success,
            false => Branch::Failure,
        };
        let mut gets = [GetResult::NotFound; splitkv_layout::app::txn::TXN_BRANCH_GETS_MAX];
        let mut n = 0;
        for op in txn.ops(branch) {
            match op {
                Op::Get(k) => {
                    gets[n] = match (reads.get(&k), reads.meta(&k)) {
                        (Some(value), Some(meta)) => GetResult::Found {
                            version: meta.version(),
                            value,
                        },
                        _ => GetResult::NotFound,
                    };
                    n += 1;
                }
                Op::Put { key, value } => writes.put(key, value),
                // Only a present key gets a tombstone (module docs).
                Op::Delete(k) if reads.get(&k).is_some() => writes.delete(k),
                Op::Delete(_) => {}
            }
        }
        result.clear();
        TxnResult::encode(branch, &gets[..n], result).map_err(|_| UserAbort)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use splitkv_layout::app::txn::CmpOp;
    use splitkv_layout::{Key, ObjectFlags, ObjectMeta};

    const A: Key = Key::new(0, 1);
    const B: Key = Key::new(0, 2);

    fn encode(compares: &[Compare<'_>], success: &[Op<'_>], failure: &[Op<'_>]) -> Vec<u8> {
        let mut out = Vec::new();
        Txn::encode(compares, success, failure, &mut out).expect("a valid Txn");
        out
    }

    /// A compare-and-swap of A from "old" to "new" that reads B either way.
    fn cas() -> Vec<u8> {
        let expect = Compare {
            key: A,
            condition: Condition::Value {
                op: CmpOp::Equal,
                operand: b"old",
            },
        };
        let swap = [Op::Put {
            key: A,
            value: b"new",
        }];
        encode(&[expect], &swap, &[Op::Get(A)])
    }

    fn run(args: &[u8], view: &ReadView) -> (Vec<(Key, Vec<u8>)>, Vec<u8>) {
        let (w, result) = run_set(args, view);
        let writes = w.iter().map(|(k, v)| (*k, v.to_vec())).collect();
        (writes, result)
    }

    fn run_set(args: &[u8], view: &ReadView) -> (WriteSet, Vec<u8>) {
        let (mut w, mut result) = (WriteSet::default(), Vec::new());
        TxnProcedure
            .execute(args, view, &mut w, &mut result)
            .expect("no abort");
        (w, result)
    }

    #[test]
    fn the_plan_locks_both_branches_writes_and_reads_the_rest() {
        let args = encode(
            &[Compare {
                key: B,
                condition: Condition::Present,
            }],
            &[Op::Put {
                key: A,
                value: b"x",
            }],
            &[Op::Get(A), Op::Get(Key::new(1, 9))],
        );
        let mut plan = TxPlan::default();
        TxnProcedure.plan(&args, &mut plan).unwrap();
        assert_eq!(plan.writes, vec![A]);
        assert_eq!(plan.reads, vec![B, Key::new(1, 9)]);
        let del = encode(&[], &[], &[Op::Delete(A), Op::Get(B)]);
        let mut plan = TxPlan::default();
        TxnProcedure.plan(&del, &mut plan).unwrap();
        assert_eq!(
            (plan.writes, plan.reads),
            (vec![A], vec![B]),
            "a delete locks"
        );
        assert!(matches!(
            TxnProcedure.plan(b"\xff", &mut TxPlan::default()),
            Err(ProcError::BadArgs(_))
        ));
    }

    #[test]
    fn a_held_compare_runs_the_success_branch_and_a_failed_one_the_failure_branch() {
        let meta = ObjectMeta::new(4, ObjectFlags::empty());
        let mut view = ReadView::default();
        view.insert(A, meta, b"old", true);
        let (writes, result) = run(&cas(), &view);
        assert_eq!(writes, vec![(A, b"new".to_vec())]);
        let r = TxnResult::decode(&result).unwrap();
        assert_eq!((r.branch(), r.get_count()), (Branch::Success, 0));

        view.clear();
        view.insert(A, meta, b"other", true);
        let (writes, result) = run(&cas(), &view);
        assert!(writes.is_empty(), "the failure branch writes nothing");
        let r = TxnResult::decode(&result).unwrap();
        assert_eq!(r.branch(), Branch::Failure);
        let got: Vec<_> = r.gets().collect();
        assert_eq!(
            got,
            vec![GetResult::Found {
                version: 4,
                value: b"other"
            }]
        );
    }

    #[test]
    fn an_absent_key_is_absent_has_no_value_and_its_version_counts() {
        let deleted = ObjectMeta::new(7, ObjectFlags::DELETED);
        let mut view = ReadView::default();
        view.insert(A, deleted, b"", false);
        let cond = |condition| Compare { key: A, condition };
        let branch = |c: Compare<'_>| {
            let (_, result) = run(&encode(&[c], &[], &[]), &view);
            TxnResult::decode(&result).unwrap().branch()
        };
        assert_eq!(branch(cond(Condition::Absent)), Branch::Success);
        assert_eq!(branch(cond(Condition::Present)), Branch::Failure);
        for op in CmpOp::ALL {
            let value = Condition::Value { op, operand: b"" };
            assert_eq!(branch(cond(value)), Branch::Failure, "{op:?}");
        }
        let version = Condition::Version {
            op: CmpOp::Equal,
            operand: 7,
        };
        assert_eq!(branch(cond(version)), Branch::Success);
        let (_, result) = run(&encode(&[], &[Op::Get(A)], &[]), &view);
        let got: Vec<_> = TxnResult::decode(&result).unwrap().gets().collect();
        assert_eq!(got, vec![GetResult::NotFound]);
    }

    #[test]
    fn a_delete_of_a_present_key_writes_its_tombstone_and_of_an_absent_one_nothing() {
        let present = |c| Compare {
            key: A,
            condition: c,
        };
        let args = encode(
            &[present(Condition::Present)],
            &[Op::Delete(A), Op::Delete(B)],
            &[Op::Delete(A)],
        );
        let mut view = ReadView::default();
        view.insert(A, ObjectMeta::new(3, ObjectFlags::empty()), b"x", true);
        view.insert(B, ObjectMeta::new(0, ObjectFlags::DELETED), b"", false);
        let (w, result) = run_set(&args, &view);
        assert_eq!(w.len(), 1, "B is absent: no write");
        assert!(w.is_delete(&A) && !w.is_delete(&B));
        assert_eq!(w.iter().next(), Some((&A, &b""[..])));
        assert_eq!(
            TxnResult::decode(&result).unwrap().branch(),
            Branch::Success
        );

        // A deleted A (its tombstone): the failure branch's delete writes nothing.
        view.clear();
        view.insert(A, ObjectMeta::new(4, ObjectFlags::DELETED), b"", false);
        view.insert(B, ObjectMeta::new(0, ObjectFlags::DELETED), b"", false);
        let (w, result) = run_set(&args, &view);
        assert!(w.is_empty());
        assert_eq!(
            TxnResult::decode(&result).unwrap().branch(),
            Branch::Failure
        );
    }
}
