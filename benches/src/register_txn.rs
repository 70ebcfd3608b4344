//! The register workload ([`crate::register`]) through the one-shot `Txn`
//! (etcd's shape, `splitkv_layout::app::txn`): each drawn transaction becomes
//! one `Txn` with no compares whose success branch gets every key the
//! transaction reads and puts every key it writes, run by the node's built-in
//! procedure (`splitkv_nic::procedure::txn`, at `TXN_PROCEDURE_ID`). Its
//! [`TxnResult`] is decoded into the same history micro-ops as the shipped
//! procedure's result, so the same strict-serializability and lost-commit
//! checks run on it.
//!
//! **What one `Txn` can say.** A branch names each key once, and its gets
//! see the state before the transaction (never its own puts). So, per key:
//!
//! - a key only read becomes one `Get`; every read of it returns that value;
//! - a key written becomes one `Put` of its last written value; a read after
//!   the transaction's own write returns that write (resolved client-side,
//!   as the shipped procedure resolves it on the NIC);
//! - a read of a key *before* the transaction writes it cannot be expressed
//!   (it would need a get and a put of one key in one branch): such reads
//!   are left out of the transaction ([`TxnRegisterSource::reads_dropped`]
//!   counts them), and the history records the transaction as it ran. The
//!   write-skew shape loses its read of the written key this way (the
//!   shipped api checks write skew).

use crate::history_gen::MicroOpSource;
use crate::list_append::codec::ResultError;
use crate::register::{decode_register, RegisterGenerator, REGISTER_TABLE};
use splitkv_check::history::{MicroOp, ReadValue};
use splitkv_layout::app::txn::{Branch, GetResult, Op, Txn, TxnResult};
use splitkv_layout::Key;

/// A register generator whose transactions are one `Txn` each (module docs).
#[derive(Debug, Clone)]
pub struct TxnRegisterSource {
    inner: RegisterGenerator,
    reads_dropped: u64,
}

impl TxnRegisterSource {
    /// Draws from `inner`.
    pub fn new(inner: RegisterGenerator) -> TxnRegisterSource {
        TxnRegisterSource {
            inner,
            reads_dropped: 0,
        }
    }

    /// Reads left out because their transaction wrote the key after them.
    pub fn reads_dropped(&self) -> u64 {
        self.reads_dropped
    }
}

/// `ops` without the reads of a key that a later micro-op writes (module
/// docs), and how many were dropped.
pub fn expressible(ops: Vec<MicroOp>) -> (Vec<MicroOp>, u64) {
    let written_later = |i: usize, key: u64| {
        ops[i + 1..]
            .iter()
            .any(|m| matches!(m, MicroOp::Write { key: k, .. } if *k == key))
    };
    let written_before = |i: usize, key: u64| {
        ops[..i]
            .iter()
            .any(|m| matches!(m, MicroOp::Write { key: k, .. } if *k == key))
    };
    let keep: Vec<bool> = ops
        .iter()
        .enumerate()
        .map(|(i, m)| match m {
            MicroOp::Read { key, .. } => written_before(i, *key) || !written_later(i, *key),
            _ => true,
        })
        .collect();
    let dropped = keep.iter().filter(|k| !**k).count() as u64;
    let kept = ops
        .into_iter()
        .zip(keep)
        .filter_map(|(m, k)| k.then_some(m))
        .collect();
    (kept, dropped)
}

/// The keys a `Txn` of `ops` gets (read, never written), in first-read order.
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

/// Appends the `Txn` of `ops` (expressible: no read before a write of its
/// key) to `out`: no compares, the success branch gets every read-only key
/// and puts every written key's last value.
///
/// # Errors
/// [`ResultError::Txn`] if the `Txn` breaks a bound (more keys than a `Txn`
/// holds; a register transaction has at most 8 micro-ops, so never).
pub fn encode_txn(ops: &[MicroOp], out: &mut Vec<u8>) -> Result<(), ResultError> {
    let gets = get_keys(ops);
    let mut puts: Vec<(u64, [u8; 8])> = Vec::new();
    for m in ops {
        if let MicroOp::Write { key, value } = m {
            match puts.iter_mut().find(|p| p.0 == *key) {
                Some(p) => p.1 = value.to_le_bytes(),
                None => puts.push((*key, value.to_le_bytes())),
            }
        }
    }
    let key = |k| Key::new(REGISTER_TABLE, k);
    let success: Vec<Op<'_>> = gets
        .iter()
        .map(|&k| Op::Get(key(k)))
        .chain(puts.iter().map(|(k, v)| Op::Put {
            key: key(*k),
            value: v,
        }))
        .collect();
    Txn::encode(&[], &success, &[], out).map_err(|e| ResultError::Txn(e.to_string()))
}

/// The micro-ops of a committed register `Txn` as it completed: `invoked`
/// with every read's value, from the [`TxnResult`]'s gets (a read-only key)
/// or from the transaction's own last write before it.
///
/// # Errors
/// [`ResultError::Txn`] if `result` is not a success-branch [`TxnResult`]
/// with one get per read-only key, or a value is not a register.
pub fn complete_txn(invoked: &[MicroOp], result: &[u8]) -> Result<Vec<MicroOp>, ResultError> {
    let bad = |what: String| ResultError::Txn(what);
    let r = TxnResult::decode(result).map_err(|e| bad(e.to_string()))?;
    if r.branch() != Branch::Success {
        return Err(bad(
            "the failure branch ran in a Txn without compares".into()
        ));
    }
    let keys = get_keys(invoked);
    if r.get_count() != keys.len() {
        return Err(bad(format!(
            "{} gets in the result, {} read-only keys",
            r.get_count(),
            keys.len()
        )));
    }
    let mut got = Vec::with_capacity(keys.len());
    for (key, g) in keys.iter().zip(r.gets()) {
        let v = match g {
            GetResult::NotFound => None,
            GetResult::Found { value, .. } => {
                decode_register(*key, value).map_err(|e| bad(e.to_string()))?
            }
        };
        got.push((*key, v));
    }
    let mut out = Vec::with_capacity(invoked.len());
    for (i, m) in invoked.iter().enumerate() {
        out.push(match *m {
            MicroOp::Read { key, .. } => {
                let own = invoked[..i].iter().rev().find_map(|w| match w {
                    MicroOp::Write { key: k, value } if *k == key => Some(*value),
                    _ => None,
                });
                let v = match own {
                    Some(v) => Some(v),
                    None => got.iter().find(|g| g.0 == key).and_then(|g| g.1),
                };
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

impl MicroOpSource for TxnRegisterSource {
    fn next_tx(&mut self, args: &mut Vec<u8>) -> Option<Vec<MicroOp>> {
        let (ops, dropped) = expressible(self.inner.draw());
        self.reads_dropped += dropped;
        args.clear();
        // A register transaction is far within a Txn's bounds.
        encode_txn(&ops, args).ok()?;
        Some(ops)
    }

    fn complete(&self, invoked: &[MicroOp], result: &[u8]) -> Result<Vec<MicroOp>, ResultError> {
        complete_txn(invoked, result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use splitkv_layout::app::txn::GetResult;
    use splitkv_layout::app::txn::TxnResult;

    fn read(key: u64) -> MicroOp {
        MicroOp::Read { key, value: None }
    }

    #[test]
    fn reads_before_a_write_of_their_key_are_dropped_and_the_rest_complete() {
        let ops = vec![
            read(1),
            MicroOp::Write { key: 1, value: 9 },
            read(1),
            read(2),
            read(2),
            MicroOp::Write { key: 3, value: 4 },
            MicroOp::Write { key: 3, value: 5 },
        ];
        let (ops, dropped) = expressible(ops);
        assert_eq!(dropped, 1);
        assert_eq!(ops.len(), 6);
        let mut txn = Vec::new();
        encode_txn(&ops, &mut txn).unwrap();
        let t = Txn::decode(&txn).unwrap();
        assert_eq!(t.compare_count(), 0);
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
        let seven = 7u64.to_le_bytes();
        let mut result = Vec::new();
        let got = [GetResult::Found {
            version: 3,
            value: &seven,
        }];
        TxnResult::encode(Branch::Success, &got, &mut result).unwrap();
        let done = complete_txn(&ops, &result).unwrap();
        let reads: Vec<_> = done
            .iter()
            .filter_map(|m| match m {
                MicroOp::Read { value, .. } => Some(value.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            reads,
            [
                Some(ReadValue::Register(9)),
                Some(ReadValue::Register(7)),
                Some(ReadValue::Register(7))
            ]
        );
        // The wrong branch, or a get short, is refused.
        let mut failure = Vec::new();
        TxnResult::encode(Branch::Failure, &got, &mut failure).unwrap();
        assert!(complete_txn(&ops, &failure).is_err());
        let mut short = Vec::new();
        TxnResult::encode(Branch::Success, &[], &mut short).unwrap();
        assert!(complete_txn(&ops, &short).is_err());
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
        let done = complete_txn(&ops, &result).unwrap();
        assert_eq!(done, vec![read(4)]);
    }
}
