//! The read-write register workload of Jepsen's Elle (Kingsbury & Alvaro,
//! VLDB'20 §4): transactions of 1–[`MICRO_OPS_PER_TX_MAX`] micro-ops (their
//! shape: [`TxShape`]; Dandelion §7's O(G,P) is one), each a
//! read of a register or a write of a unique `u64` value, over a small fixed
//! set of keys. Unique values let the checker tell which write a read saw
//! (write-read edges); unlike list-append, a register read does not reveal the
//! order of earlier writes, so the checker infers fewer write-write edges.
//!
//! A register is stored as its value, 8 bytes little-endian; the empty value
//! is the initial state every key is loaded with (no write yet), which a read
//! returns as `null`. [`RegisterTxn`] is the shipped procedure: reads go to the
//! read set, written keys to the write set, and the micro-ops run in order on
//! the values read, so a read after the transaction's own write returns it.

//!
//! The client side (generator, result completion) is
//! `splitkv_workloads::register`, re-exported here.

use crate::list_append::codec::{OpKind, TxOps, MICRO_OPS_PER_TX_MAX};
use crate::micro_txn;
use splitkv_nic::{ProcError, Procedure, ReadView, TxPlan, UserAbort, WriteSet};

pub use splitkv_workloads::register::{
    complete, distinct_keys, RegisterConfig, RegisterGenerator, REGISTER_READ_RESULT_BYTES,
    REGISTER_TABLE, REGISTER_VALUE_BYTES,
};

/// Why a register transaction cannot run; the procedure turns each into a
/// user abort (the client records a `fail`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// A stored value is neither empty nor 8 bytes.
    #[error("value of key {key} is not a register ({len} B)")]
    NotARegister {
        /// The key.
        key: u64,
        /// Its length in bytes.
        len: usize,
    },
    /// An append micro-op in a register workload.
    #[error("register transactions only read and write")]
    NotRegisterOp,
}

/// A stored register as its value (`None`: the initial, never-written state).
///
/// # Errors
/// [`RegisterError::NotARegister`] naming `key`.
pub fn decode_register(key: u64, bytes: &[u8]) -> Result<Option<u64>, RegisterError> {
    match bytes.len() {
        0 => Ok(None),
        REGISTER_VALUE_BYTES => Ok(Some(u64::from_le_bytes(bytes.try_into().expect("8 bytes")))),
        len => Err(RegisterError::NotARegister { key, len }),
    }
}

/// Runs `ops` on the registers `stored` returns (`None`: absent, the initial
/// state): appends each read's value to `result` (tag 0, or tag 1 and 8 bytes)
/// and calls `write(key, value)` once per written key (its last value), after
/// every micro-op succeeded. Allocates nothing.
///
/// # Errors
/// [`RegisterError`]; nothing was written then.
pub fn run_txn<'a>(
    ops: &TxOps,
    stored: impl Fn(u64) -> Option<&'a [u8]>,
    result: &mut Vec<u8>,
    mut write: impl FnMut(u64, &[u8]),
) -> Result<(), RegisterError> {
    // (key, value, written) per key touched, in first-touch order.
    let mut regs: [Option<(u64, Option<u64>, bool)>; MICRO_OPS_PER_TX_MAX] =
        [None; MICRO_OPS_PER_TX_MAX];
    for op in ops.as_slice() {
        let slot = match regs.iter().position(|r| r.is_some_and(|r| r.0 == op.key)) {
            Some(i) => i,
            None => {
                let i = regs.iter().position(Option::is_none).expect("one per op");
                let v = decode_register(op.key, stored(op.key).unwrap_or(&[]))?;
                regs[i] = Some((op.key, v, false));
                i
            }
        };
        let reg = regs[slot].as_mut().expect("loaded");
        match op.kind {
            OpKind::Read => match reg.1 {
                None => result.push(0),
                Some(v) => {
                    result.push(1);
                    result.extend_from_slice(&v.to_le_bytes());
                }
            },
            OpKind::Write => *reg = (op.key, Some(op.value), true),
            OpKind::Append => return Err(RegisterError::NotRegisterOp),
        }
    }
    for (key, value, _) in regs.iter().flatten().filter(|r| r.2) {
        write(*key, &value.expect("written").to_le_bytes());
    }
    Ok(())
}

/// The register transaction as a shipped procedure (Xenic §4.2.2).
#[derive(Debug, Clone, Copy, Default)]
pub struct RegisterTxn;

impl Procedure for RegisterTxn {
    fn name(&self) -> &'static str {
        splitkv_workloads::register::REGISTER_PROCEDURE
    }

    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        let wrong = "register has no appends";
        micro_txn::plan_ops(args, plan, REGISTER_TABLE, OpKind::Write, wrong)
    }

    fn execute(
        &self,
        args: &[u8],
        reads: &ReadView,
        writes: &mut WriteSet,
        result: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        micro_txn::execute_ops(args, reads, writes, result, REGISTER_TABLE, |o, s, r, w| {
            run_txn(o, s, r, w)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history_gen::TxShape;
    use crate::micro_txn::test_support::{ops, own_write_then_reads};
    use splitkv_check::history::{MicroOp, ReadValue};

    #[test]
    fn reads_see_own_writes_and_results_decode() {
        let stored = 7u64.to_le_bytes();
        let (written, reads) = own_write_then_reads(
            MicroOp::Write { key: 1, value: 9 },
            &stored,
            |o, s, r, w| run_txn(o, s, r, w),
            complete,
        );
        assert_eq!(written, [(1, 9u64.to_le_bytes().to_vec())]);
        assert_eq!(
            reads,
            [
                Some(ReadValue::Register(7)),
                Some(ReadValue::Register(9)),
                None
            ]
        );
    }

    #[test]
    fn a_corrupt_register_writes_nothing() {
        let bad = [1u8, 2, 3];
        let invoked = [
            MicroOp::Write { key: 4, value: 1 },
            MicroOp::Read {
                key: 5,
                value: None,
            },
        ];
        let mut written = 0;
        let e = run_txn(
            &ops(&invoked),
            |_| Some(&bad[..]),
            &mut Vec::new(),
            |_, _| written += 1,
        );
        assert_eq!(e, Err(RegisterError::NotARegister { key: 4, len: 3 }));
        assert_eq!(written, 0);
    }

    #[test]
    fn generator_values_are_unique_and_seeded() {
        let cfg = RegisterConfig::new(4, TxShape::Mixed).unwrap();
        let mut a = RegisterGenerator::new(cfg, 0, 5);
        let mut b = RegisterGenerator::new(cfg, 1, 5);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            for m in a.draw().into_iter().chain(b.draw()) {
                if let MicroOp::Write { value, .. } = m {
                    assert!(seen.insert(value), "value {value} drawn twice");
                }
            }
        }
        assert!(seen.len() > 1000);
        let mut c = RegisterGenerator::new(cfg, 0, 5);
        let mut d = RegisterGenerator::new(cfg, 0, 5);
        assert_eq!(c.draw(), d.draw());
        assert!(RegisterConfig::new(1, TxShape::Mixed).is_err());
    }
}
