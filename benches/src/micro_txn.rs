//! The shape the history workloads' shipped procedures share (Xenic §4.2.2):
//! list-append ([`crate::list_append::ListAppendTxn`]) and the read-write
//! register ([`crate::register::RegisterTxn`]) both take a transaction's
//! micro-ops as arguments ([`crate::list_append::codec`]), plan its read keys
//! into the read set and its written keys into the write set, run the
//! micro-ops in order on the values read, and return what every read saw in
//! the result. They differ only in their table, the write micro-op they take
//! and how a read's value is stored and reported; those are the parameters of
//! the helpers here.

use crate::list_append::codec::{self, OpKind, TxOps};
use splitkv_layout::Key;
use splitkv_nic::{ProcError, ReadView, TxPlan, UserAbort, WriteSet};

/// [`splitkv_nic::Procedure::plan`] of a micro-op transaction over `table`:
/// reads go to the read set, `write_kind` micro-ops to the write set.
///
/// # Errors
/// [`ProcError::BadArgs`] if `args` do not decode, or (with `wrong_kind`) if a
/// micro-op is neither a read nor a `write_kind`.
pub(crate) fn plan_ops(
    args: &[u8],
    plan: &mut TxPlan,
    table: u32,
    write_kind: OpKind,
    wrong_kind: &'static str,
) -> Result<(), ProcError> {
    for op in codec::decode(args)
        .map_err(|e| ProcError::BadArgs(e.0))?
        .as_slice()
    {
        let key = Key::new(table, op.key);
        match op.kind {
            OpKind::Read => plan.read(key),
            k if k == write_kind => plan.write(key),
            _ => return Err(ProcError::BadArgs(wrong_kind)),
        }
    }
    Ok(())
}

/// [`splitkv_nic::Procedure::execute`] of a micro-op transaction over
/// `table`: decodes `args` and calls `run(ops, stored, result, write)` (the
/// workload's `run_txn`) with the values `reads` holds and a `write` into
/// `writes`, both by key within `table`.
///
/// # Errors
/// [`UserAbort`] if `args` do not decode or `run` fails (nothing was written
/// then).
pub(crate) fn execute_ops<'a, E>(
    args: &[u8],
    reads: &'a ReadView,
    writes: &mut WriteSet,
    result: &mut Vec<u8>,
    table: u32,
    run: impl FnOnce(
        &TxOps,
        &dyn Fn(u64) -> Option<&'a [u8]>,
        &mut Vec<u8>,
        &mut dyn FnMut(u64, &[u8]),
    ) -> Result<(), E>,
) -> Result<(), UserAbort> {
    let ops = codec::decode(args).map_err(|_| UserAbort)?;
    run(
        &ops,
        &|k| reads.get(&Key::new(table, k)),
        result,
        &mut |k, v| writes.put(Key::new(table, k), v),
    )
    .map_err(|_| UserAbort)
}

/// Helpers the workloads' unit tests share.
#[cfg(test)]
pub(crate) mod test_support {
    use crate::list_append::codec::{self, ResultError, TxOps};
    use splitkv_check::history::{MicroOp, ReadValue};

    /// The micro-ops `m` as the procedure decodes them.
    pub(crate) fn ops(m: &[MicroOp]) -> TxOps {
        let mut b = Vec::new();
        codec::encode(m, &mut b);
        codec::decode(&b).unwrap()
    }

    /// Writes made (key, value) and reads' completed values, in order.
    pub(crate) type WritesAndReads = (Vec<(u64, Vec<u8>)>, Vec<Option<ReadValue>>);

    /// Runs "read 1, `own` (a write of key 1), read 1, read 2" through a
    /// workload's `run` (its `run_txn`) with `stored` at key 1 and nothing at
    /// key 2, and its `complete` on the result; checks that `complete` refuses
    /// that result one byte short and one byte long. Returns the writes made
    /// and the three reads' completed values.
    pub(crate) fn own_write_then_reads<'a, E: std::fmt::Debug>(
        own: MicroOp,
        stored: &'a [u8],
        run: impl FnOnce(
            &TxOps,
            &dyn Fn(u64) -> Option<&'a [u8]>,
            &mut Vec<u8>,
            &mut dyn FnMut(u64, &[u8]),
        ) -> Result<(), E>,
        complete: impl Fn(&[MicroOp], &[u8]) -> Result<Vec<MicroOp>, ResultError>,
    ) -> WritesAndReads {
        let read = |key| MicroOp::Read { key, value: None };
        let invoked = [read(1), own, read(1), read(2)];
        let mut result = Vec::new();
        let mut written = Vec::new();
        run(
            &ops(&invoked),
            &|k| (k == 1).then_some(stored),
            &mut result,
            &mut |k, v| written.push((k, v.to_vec())),
        )
        .unwrap();
        let reads = complete(&invoked, &result)
            .unwrap()
            .into_iter()
            .filter_map(|m| match m {
                MicroOp::Read { value, .. } => Some(value),
                _ => None,
            })
            .collect();
        assert!(complete(&invoked, &result[..result.len() - 1]).is_err());
        let mut longer = result;
        longer.push(0);
        assert!(complete(&invoked, &longer).is_err());
        (written, reads)
    }
}

#[cfg(test)]
mod tests {
    use crate::list_append::{codec, ListAppendTxn, LIST_TABLE};
    use crate::register::{RegisterTxn, REGISTER_TABLE};
    use splitkv_check::history::MicroOp;
    use splitkv_layout::Key;
    use splitkv_nic::{Procedure, TxPlan};

    fn args(m: &[MicroOp]) -> Vec<u8> {
        let mut b = Vec::new();
        codec::encode(m, &mut b);
        b
    }

    #[test]
    fn plans_put_reads_and_each_workloads_writes_in_their_sets_and_refuse_the_other_kind() {
        let read = MicroOp::Read {
            key: 1,
            value: None,
        };
        let append = MicroOp::Append { key: 2, element: 5 };
        let write = MicroOp::Write { key: 3, value: 6 };
        let mut plan = TxPlan::default();
        ListAppendTxn
            .plan(&args(&[read.clone(), append.clone()]), &mut plan)
            .unwrap();
        assert_eq!(plan.reads, [Key::new(LIST_TABLE, 1)]);
        assert_eq!(plan.writes, [Key::new(LIST_TABLE, 2)]);
        let mut plan = TxPlan::default();
        RegisterTxn
            .plan(&args(&[read.clone(), write.clone()]), &mut plan)
            .unwrap();
        assert_eq!(plan.reads, [Key::new(REGISTER_TABLE, 1)]);
        assert_eq!(plan.writes, [Key::new(REGISTER_TABLE, 3)]);
        let mut plan = TxPlan::default();
        assert!(ListAppendTxn.plan(&args(&[write]), &mut plan).is_err());
        assert!(RegisterTxn.plan(&args(&[append]), &mut plan).is_err());
        assert!(RegisterTxn.plan(&[], &mut plan).is_err());
    }
}
