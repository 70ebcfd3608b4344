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

use crate::history_gen::{MicroOpSource, TxShape, WorkloadConfigError, MIXED_OPS_MAX};
use crate::list_append::codec::{self, OpKind, ResultError, TxOps, MICRO_OPS_PER_TX_MAX};
use crate::list_append::generator::ELEMENT_COUNTER_BITS;
use crate::micro_txn;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_check::history::{MicroOp, ReadValue};
use splitkv_layout::host_nic::RESULT_BYTES_MAX;
use splitkv_nic::{ProcError, Procedure, ReadView, TxPlan, UserAbort, WriteSet};

/// Table id of the registers.
pub const REGISTER_TABLE: u32 = 21;

/// Bytes of a stored register: the `value_bytes_max` every node of a register
/// cluster is configured with.
pub const REGISTER_VALUE_BYTES: usize = 8;

/// Encoded bytes of one read in a result: a presence tag, then the value.
pub const REGISTER_READ_RESULT_BYTES: usize = 1 + REGISTER_VALUE_BYTES;

const _: () = assert!(MICRO_OPS_PER_TX_MAX * REGISTER_READ_RESULT_BYTES <= RESULT_BYTES_MAX);

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
        "register"
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

/// The micro-ops of a committed register transaction as it completed.
///
/// # Errors
/// [`ResultError`] if `result` does not hold exactly one value per read.
pub fn complete(invoked: &[MicroOp], result: &[u8]) -> Result<Vec<MicroOp>, ResultError> {
    micro_txn::complete_reads(invoked, result, |r, i| match r.u8(i)? {
        0 => Ok(None),
        1 => Ok(Some(ReadValue::Register(r.u64(i)?))),
        tag => Err(ResultError::BadTag { op: i, tag }),
    })
}

/// Shape of a register run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegisterConfig {
    /// Keys `0..keys`, each loaded in the initial (empty) state.
    pub keys: u64,
    /// What the transactions look like.
    pub shape: TxShape,
}

impl RegisterConfig {
    /// A configuration over `keys` keys.
    ///
    /// # Errors
    /// [`WorkloadConfigError::TooFewKeys`] if `keys` is below what one
    /// transaction of `shape` needs ([`TxShape::keys_min`]).
    pub fn new(keys: u64, shape: TxShape) -> Result<RegisterConfig, WorkloadConfigError> {
        shape.check(keys)?;
        Ok(RegisterConfig { keys, shape })
    }
}

/// One client's generator of register transactions (values `client << 40 | n`).
#[derive(Debug, Clone)]
pub struct RegisterGenerator {
    cfg: RegisterConfig,
    client: u64,
    rng: Xoshiro256PlusPlus,
    counter: u64,
}

impl RegisterGenerator {
    /// Client `client`'s generator, seeded with `seed`.
    pub fn new(cfg: RegisterConfig, client: u64, seed: u64) -> RegisterGenerator {
        RegisterGenerator {
            cfg,
            client,
            rng: Xoshiro256PlusPlus::seed_from_u64(
                seed ^ (client + 1).wrapping_mul(0xD1B5_4A32_D192_ED03),
            ),
            counter: 0,
        }
    }

    fn write(&mut self, key: u64) -> MicroOp {
        self.counter += 1;
        MicroOp::Write {
            key,
            value: (self.client + 1) << ELEMENT_COUNTER_BITS | self.counter,
        }
    }

    /// Draws the next transaction's micro-ops (reads carry no value yet).
    pub fn draw(&mut self) -> Vec<MicroOp> {
        let keys = self.cfg.keys;
        match self.cfg.shape {
            TxShape::Mixed => {
                let n = self.rng.gen_range(1..=MIXED_OPS_MAX);
                (0..n)
                    .map(|_| {
                        let key = self.rng.gen_range(0..keys);
                        if self.rng.gen_bool(0.5) {
                            MicroOp::Read { key, value: None }
                        } else {
                            self.write(key)
                        }
                    })
                    .collect()
            }
            TxShape::WriteSkew => {
                let a = self.rng.gen_range(0..keys);
                let b = (a + self.rng.gen_range(1..keys)) % keys;
                let w = if self.rng.gen_bool(0.5) { a } else { b };
                let write = self.write(w);
                vec![
                    MicroOp::Read {
                        key: a,
                        value: None,
                    },
                    MicroOp::Read {
                        key: b,
                        value: None,
                    },
                    write,
                ]
            }
            TxShape::GetsPuts { gets, puts } => {
                let keys = distinct_keys(&mut self.rng, keys, gets as usize + puts as usize);
                let (read, written) = keys.split_at(gets as usize);
                let mut ops: Vec<MicroOp> = read
                    .iter()
                    .map(|&key| MicroOp::Read { key, value: None })
                    .collect();
                ops.extend(written.iter().map(|&key| self.write(key)));
                ops
            }
        }
    }
}

/// `n` distinct keys drawn uniformly from `0..keys` (`n <= keys`, at most
/// [`MICRO_OPS_PER_TX_MAX`]), in drawing order.
pub(crate) fn distinct_keys(rng: &mut impl Rng, keys: u64, n: usize) -> Vec<u64> {
    debug_assert!(n as u64 <= keys && n <= MICRO_OPS_PER_TX_MAX);
    let mut drawn = Vec::with_capacity(n);
    while drawn.len() < n {
        let key = rng.gen_range(0..keys);
        if !drawn.contains(&key) {
            drawn.push(key);
        }
    }
    drawn
}

impl MicroOpSource for RegisterGenerator {
    fn next_tx(&mut self, args: &mut Vec<u8>) -> Option<Vec<MicroOp>> {
        let ops = self.draw();
        codec::encode(&ops, args);
        Some(ops)
    }

    fn complete(&self, invoked: &[MicroOp], result: &[u8]) -> Result<Vec<MicroOp>, ResultError> {
        complete(invoked, result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::micro_txn::test_support::{ops, own_write_then_reads};

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
