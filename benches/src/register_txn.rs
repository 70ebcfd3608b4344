//! The register workload ([`crate::register`]) through the one-shot `Txn`
//! (etcd's shape, `splitkv_layout::app::txn`): each drawn transaction becomes
//! one `Txn`, run by the node's built-in procedure
//! (`splitkv_nic::procedure::txn`, at `TXN_PROCEDURE_ID`). Its [`TxnResult`]
//! is decoded into the same history micro-ops as the shipped procedure's
//! result, so the same strict-serializability and lost-commit checks run on
//! it, compares and both branches included.
//!
//! **What one `Txn` says.** A branch names each key once, and its gets see
//! the state before the transaction (never its own puts). So, per key:
//!
//! - a key only read is one `Get` of the success branch; every read of it
//!   returns that value;
//! - a key written is one `Put` of its last written value; a read after the
//!   transaction's own write returns that write (resolved client-side, as the
//!   shipped procedure resolves it on the NIC);
//! - a key read *before* the transaction writes it cannot be both got and put
//!   in one branch, so it is **compared**: its value must equal the one this
//!   client last saw of it (empty for a never-written register), and that is
//!   what the read returns. If every compare holds the success branch runs
//!   (gets and puts) and the transaction took effect; if one fails, the
//!   failure branch gets the compared keys — the client learns their values
//!   for its next guess — and writes nothing: the history records a `fail`
//!   ([`crate::history_gen::Committed::NoEffect`]), counted as a user abort.
//!
//! Without a read before a write (O(G,P), most of Elle's mix) the `Txn` has no
//! compare and always runs its success branch.

use crate::history_gen::{Committed, MicroOpSource};
use crate::list_append::codec::ResultError;
use crate::register::{decode_register, RegisterGenerator, REGISTER_TABLE};
use hashbrown::HashMap;
use splitkv_check::history::{MicroOp, ReadValue};
use splitkv_layout::app::txn::{Branch, CmpOp, Compare, Condition, GetResult, Op, Txn, TxnResult};
use splitkv_layout::{FixedState, Key};

/// A compared key and the value the client expects it to hold (`None`: the
/// empty, never-written register).
type Expected = (u64, Option<u64>);

/// A register generator whose transactions are one `Txn` each (module docs).
#[derive(Debug, Clone)]
pub struct TxnRegisterSource {
    inner: RegisterGenerator,
    /// The last value this client saw of each key (read or written).
    known: HashMap<u64, Option<u64>, FixedState>,
    /// The compares of each transaction in flight, by its first written
    /// value (unique: [`RegisterGenerator`]'s values are).
    expected: HashMap<u64, Vec<Expected>, FixedState>,
    compare_failed: u64,
}

impl TxnRegisterSource {
    /// Draws from `inner`.
    pub fn new(inner: RegisterGenerator) -> TxnRegisterSource {
        TxnRegisterSource {
            inner,
            known: HashMap::with_hasher(FixedState),
            expected: HashMap::with_hasher(FixedState),
            compare_failed: 0,
        }
    }

    /// Transactions whose compare failed (recorded as `fail`).
    pub fn compare_failed(&self) -> u64 {
        self.compare_failed
    }
}

fn written_value(ops: &[MicroOp]) -> Option<u64> {
    ops.iter().find_map(|m| match m {
        MicroOp::Write { value, .. } => Some(*value),
        _ => None,
    })
}

/// Whether micro-op `i` of `ops` is a read of a key a later micro-op writes
/// and no earlier one did.
fn read_before_write(ops: &[MicroOp], i: usize) -> bool {
    let MicroOp::Read { key, .. } = ops[i] else {
        return false;
    };
    let writes = |m: &MicroOp| matches!(m, MicroOp::Write { key: k, .. } if *k == key);
    !ops[..i].iter().any(writes) && ops[i + 1..].iter().any(writes)
}

/// The keys read before the transaction writes them, in first-read order.
fn compared_keys(ops: &[MicroOp]) -> Vec<u64> {
    let mut keys = Vec::new();
    for (i, m) in ops.iter().enumerate() {
        if let MicroOp::Read { key, .. } = m {
            if read_before_write(ops, i) && !keys.contains(key) {
                keys.push(*key);
            }
        }
    }
    keys
}

/// The keys a `Txn` of `ops` gets in its success branch (read, never
/// written), in first-read order.
fn get_keys(ops: &[MicroOp]) -> Vec<u64> {
    let mut keys = Vec::new();
    for m in ops {
        if let MicroOp::Read { key, .. } = m {
            let written = ops
                .iter()
                .any(|w| matches!(w, MicroOp::Write { key: k, .. } if k == key));
            if !written && !keys.contains(key) {
                keys.push(*key);
            }
        }
    }
    keys
}

fn register_bytes(v: Option<u64>) -> Vec<u8> {
    v.map_or_else(Vec::new, |v| v.to_le_bytes().to_vec())
}

/// Appends the `Txn` of `ops` to `out` (module docs): a value compare per
/// key of `expected`; the success branch gets every read-only key and puts
/// every written key's last value; the failure branch gets the compared keys.
///
/// # Errors
/// [`ResultError::Txn`] if the `Txn` breaks a bound (a register transaction
/// has at most 8 micro-ops, so never).
pub fn encode_txn(
    ops: &[MicroOp],
    expected: &[Expected],
    out: &mut Vec<u8>,
) -> Result<(), ResultError> {
    let key = |k| Key::new(REGISTER_TABLE, k);
    let mut puts: Vec<(u64, [u8; 8])> = Vec::new();
    for m in ops {
        if let MicroOp::Write { key, value } = m {
            match puts.iter_mut().find(|p| p.0 == *key) {
                Some(p) => p.1 = value.to_le_bytes(),
                None => puts.push((*key, value.to_le_bytes())),
            }
        }
    }
    let operands: Vec<(u64, Vec<u8>)> = expected
        .iter()
        .map(|(k, v)| (*k, register_bytes(*v)))
        .collect();
    let compares: Vec<Compare<'_>> = operands
        .iter()
        .map(|(k, v)| Compare {
            key: key(*k),
            condition: Condition::Value {
                op: CmpOp::Equal,
                operand: v,
            },
        })
        .collect();
    let success: Vec<Op<'_>> = get_keys(ops)
        .into_iter()
        .map(|k| Op::Get(key(k)))
        .chain(puts.iter().map(|(k, v)| Op::Put {
            key: key(*k),
            value: v,
        }))
        .collect();
    let failure: Vec<Op<'_>> = expected.iter().map(|(k, _)| Op::Get(key(*k))).collect();
    Txn::encode(&compares, &success, &failure, out).map_err(|e| ResultError::Txn(e.to_string()))
}

/// The registers a result's gets of `keys` read, in order.
fn got_values(keys: &[u64], r: &TxnResult<'_>) -> Result<Vec<(u64, Option<u64>)>, ResultError> {
    let bad = ResultError::Txn;
    if r.get_count() != keys.len() {
        return Err(bad(format!(
            "{} gets in the result, {} keys got",
            r.get_count(),
            keys.len()
        )));
    }
    keys.iter()
        .zip(r.gets())
        .map(|(key, g)| match g {
            GetResult::NotFound => Ok((*key, None)),
            GetResult::Found { value, .. } => decode_register(*key, value)
                .map(|v| (*key, v))
                .map_err(|e| bad(e.to_string())),
        })
        .collect()
}

/// The micro-ops of a register `Txn` whose success branch committed: every
/// read's value from the result's gets (a read-only key), from the
/// transaction's own last write before it, or the value its compare held on
/// (`expected`, a key read before its write).
///
/// # Errors
/// [`ResultError::Txn`] if `result` is not a success-branch [`TxnResult`]
/// with one get per read-only key, or a value is not a register.
pub fn complete_txn(
    invoked: &[MicroOp],
    expected: &[Expected],
    result: &[u8],
) -> Result<Vec<MicroOp>, ResultError> {
    let r = TxnResult::decode(result).map_err(|e| ResultError::Txn(e.to_string()))?;
    if r.branch() != Branch::Success {
        return Err(ResultError::Txn("the failure branch ran".into()));
    }
    let got = got_values(&get_keys(invoked), &r)?;
    let mut out = Vec::with_capacity(invoked.len());
    for (i, m) in invoked.iter().enumerate() {
        out.push(match *m {
            MicroOp::Read { key, .. } => {
                let own = invoked[..i].iter().rev().find_map(|w| match w {
                    MicroOp::Write { key: k, value } if *k == key => Some(Some(*value)),
                    _ => None,
                });
                let v = own
                    .or_else(|| got.iter().find(|g| g.0 == key).map(|g| g.1))
                    .or_else(|| expected.iter().find(|e| e.0 == key).map(|e| e.1))
                    .ok_or_else(|| ResultError::Txn(format!("no value for the read of {key}")))?;
                MicroOp::Read {
                    key,
                    value: v.map(ReadValue::Register),
                }
            }
            ref other => other.clone(),
        });
    }
    Ok(out)
}

impl TxnRegisterSource {
    fn learn(&mut self, ops: &[MicroOp]) {
        for m in ops {
            match m {
                MicroOp::Read { key, value } => {
                    let v = match value {
                        Some(ReadValue::Register(v)) => Some(*v),
                        _ => None,
                    };
                    self.known.insert(*key, v);
                }
                MicroOp::Write { key, value } => {
                    self.known.insert(*key, Some(*value));
                }
                MicroOp::Append { .. } => {}
            }
        }
    }
}

impl MicroOpSource for TxnRegisterSource {
    fn next_tx(&mut self, args: &mut Vec<u8>) -> Option<Vec<MicroOp>> {
        let ops = self.inner.draw();
        let expected: Vec<Expected> = compared_keys(&ops)
            .into_iter()
            .map(|k| (k, self.known.get(&k).copied().flatten()))
            .collect();
        args.clear();
        // A register transaction is far within a Txn's bounds.
        encode_txn(&ops, &expected, args).ok()?;
        if let (Some(tag), false) = (written_value(&ops), expected.is_empty()) {
            self.expected.insert(tag, expected);
        }
        Some(ops)
    }

    fn complete(&self, invoked: &[MicroOp], result: &[u8]) -> Result<Vec<MicroOp>, ResultError> {
        let expected = written_value(invoked).and_then(|t| self.expected.get(&t));
        complete_txn(invoked, expected.map_or(&[][..], Vec::as_slice), result)
    }

    fn committed(&mut self, invoked: &[MicroOp], result: &[u8]) -> Committed {
        let expected = written_value(invoked)
            .and_then(|t| self.expected.remove(&t))
            .unwrap_or_default();
        let failed_compare = TxnResult::decode(result)
            .ok()
            .filter(|r| r.branch() == Branch::Failure);
        let Some(r) = failed_compare else {
            let done = complete_txn(invoked, &expected, result);
            if let Ok(ops) = &done {
                self.learn(ops);
            }
            return Committed::Done(done);
        };
        let keys: Vec<u64> = expected.iter().map(|e| e.0).collect();
        if let Ok(seen) = got_values(&keys, &r) {
            for (k, v) in seen {
                self.known.insert(k, v);
            }
        }
        self.compare_failed += 1;
        Committed::NoEffect("compare failed (a register read before its write had changed)".into())
    }

    fn failed(&mut self, invoked: &[MicroOp]) {
        if let Some(tag) = written_value(invoked) {
            self.expected.remove(&tag);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(key: u64) -> MicroOp {
        MicroOp::Read { key, value: None }
    }

    fn reads(ops: &[MicroOp]) -> Vec<Option<ReadValue>> {
        ops.iter()
            .filter_map(|m| match m {
                MicroOp::Read { value, .. } => Some(value.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_read_before_a_write_is_a_compare_and_the_rest_complete_from_the_gets() {
        let ops = vec![
            read(1),
            MicroOp::Write { key: 1, value: 9 },
            read(1),
            read(2),
            read(2),
            MicroOp::Write { key: 3, value: 4 },
            MicroOp::Write { key: 3, value: 5 },
        ];
        let expected = [(1, Some(6))];
        let mut txn = Vec::new();
        encode_txn(&ops, &expected, &mut txn).unwrap();
        let t = Txn::decode(&txn).unwrap();
        let six = 6u64.to_le_bytes();
        assert_eq!(
            t.compares().next().unwrap().condition,
            Condition::Value {
                op: CmpOp::Equal,
                operand: &six
            }
        );
        let success: Vec<Op<'_>> = t.ops(Branch::Success).collect();
        assert_eq!(success.len(), 3, "get 2, put 1, put 3");
        assert_eq!(success[0], Op::Get(Key::new(REGISTER_TABLE, 2)));
        assert_eq!(
            success[2],
            Op::Put {
                key: Key::new(REGISTER_TABLE, 3),
                value: &5u64.to_le_bytes()
            }
        );
        let failure: Vec<Op<'_>> = t.ops(Branch::Failure).collect();
        assert_eq!(failure, [Op::Get(Key::new(REGISTER_TABLE, 1))]);
        let seven = 7u64.to_le_bytes();
        let got = [GetResult::Found {
            version: 3,
            value: &seven,
        }];
        let mut result = Vec::new();
        TxnResult::encode(Branch::Success, &got, &mut result).unwrap();
        let done = complete_txn(&ops, &expected, &result).unwrap();
        let r = |v| Some(ReadValue::Register(v));
        assert_eq!(reads(&done), [r(6), r(9), r(7), r(7)]);
        let mut short = Vec::new();
        TxnResult::encode(Branch::Success, &[], &mut short).unwrap();
        assert!(complete_txn(&ops, &expected, &short).is_err());
    }

    #[test]
    fn a_failed_compare_is_no_effect_and_teaches_the_client_the_value() {
        use crate::history_gen::TxShape;
        use crate::register::RegisterConfig;
        let cfg = RegisterConfig::new(2, TxShape::WriteSkew).unwrap();
        let mut s = TxnRegisterSource::new(RegisterGenerator::new(cfg, 0, 1));
        let mut args = Vec::new();
        let ops = s.next_tx(&mut args).unwrap();
        let t = Txn::decode(&args).unwrap();
        assert_eq!(t.compare_count(), 1, "write skew reads the key it writes");
        let compared = t.compares().next().unwrap();
        let empty: &[u8] = &[];
        assert!(matches!(compared.condition, Condition::Value { operand, .. } if operand == empty));
        let eight = 8u64.to_le_bytes();
        let got = [GetResult::Found {
            version: 2,
            value: &eight,
        }];
        let mut failure = Vec::new();
        TxnResult::encode(Branch::Failure, &got, &mut failure).unwrap();
        assert!(matches!(
            s.committed(&ops, &failure),
            Committed::NoEffect(_)
        ));
        assert_eq!(s.compare_failed(), 1);
        assert_eq!(s.known.get(&compared.key.id), Some(&Some(8)));
    }

    #[test]
    fn an_unwritten_register_reads_null() {
        let ops = vec![read(4)];
        let mut result = Vec::new();
        let got = [GetResult::Found {
            version: 1,
            value: &[],
        }];
        TxnResult::encode(Branch::Success, &got, &mut result).unwrap();
        let done = complete_txn(&ops, &[], &result).unwrap();
        assert_eq!(done, vec![read(4)]);
    }
}
