//! The one-shot transaction, as an application writes it: compares, then the
//! operations to run if every compare holds, and those to run otherwise
//! (etcd's `Txn` shape; `splitkv_layout::app::txn` for the meaning and the
//! wire format). It needs no code in the node: the node runs it as a
//! built-in procedure on the commit protocol (Xenic §4.2), atomically and
//! strictly serializably.
//!
//! ```
//! use splitkv_client::{Cmp, Txn, TxnOp};
//! use splitkv_layout::Key;
//!
//! let counter = Key::new(1, 7);
//! // Compare-and-swap: 5 → 6 if the version is still 3, else read it.
//! let txn = Txn::new()
//!     .when([Cmp::version_eq(counter, 3)])
//!     .then([TxnOp::put(counter, 6u64.to_le_bytes())])
//!     .otherwise([TxnOp::get(counter)]);
//! assert!(txn.check(splitkv_layout::VALUE_BYTES_MAX).is_ok());
//! ```
//!
//! [`Txn::check`] (and every client before it sends) checks the format's
//! bounds with a typed [`TxnError`]: compares ≤ `TXN_COMPARES_MAX`,
//! operations per branch ≤ `TXN_BRANCH_OPS_MAX`, gets per branch ≤
//! `TXN_BRANCH_GETS_MAX`, distinct keys written by both branches ≤
//! `TXN_WRITES_MAX` (the write set is locked before the branch is known),
//! distinct compared or read keys outside it ≤ `TXN_READS_MAX`
//! (`READ_SET_MAX`), a key in at most one operation per branch, values of at
//! most the node's `value_bytes_max`.

use crate::error::TxnError;
use splitkv_layout::app::txn::{
    Branch, CmpOp, Compare, Condition, Op, Txn as TxnView, TXN_BRANCH_GETS_MAX, TXN_BRANCH_OPS_MAX,
    TXN_COMPARES_MAX, TXN_READS_MAX, TXN_WRITES_MAX,
};
use splitkv_layout::app::AppEncodeError;
use splitkv_layout::{Key, VALUE_BYTES_MAX, VERSION_MAX};

/// What a [`Cmp`] checks about its key (owned form of the format's
/// `Condition`; an absent key fails every value compare and has version 0
/// if never written).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CmpTarget {
    /// The value compared bytewise with the operand.
    Value(CmpOp, Vec<u8>),
    /// The version compared with the operand.
    Version(CmpOp, u64),
    /// The key exists.
    Present,
    /// The key does not exist.
    Absent,
}

/// One compare of a [`Txn`]: `target` holds for `key`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cmp {
    /// The key compared.
    pub key: Key,
    /// What must hold.
    pub target: CmpTarget,
}

impl Cmp {
    /// The key's value `op` `operand`, bytewise.
    pub fn value(key: Key, op: CmpOp, operand: impl Into<Vec<u8>>) -> Cmp {
        Cmp {
            key,
            target: CmpTarget::Value(op, operand.into()),
        }
    }

    /// The key's value equals `operand` (the key exists).
    pub fn value_eq(key: Key, operand: impl Into<Vec<u8>>) -> Cmp {
        Cmp::value(key, CmpOp::Equal, operand)
    }

    /// The key's version `op` `operand` (0 for a never-written key).
    pub fn version(key: Key, op: CmpOp, operand: u64) -> Cmp {
        Cmp {
            key,
            target: CmpTarget::Version(op, operand),
        }
    }

    /// The key's version equals `operand`: the usual optimistic check of a
    /// read-modify-write.
    pub fn version_eq(key: Key, operand: u64) -> Cmp {
        Cmp::version(key, CmpOp::Equal, operand)
    }

    /// The key exists.
    pub fn present(key: Key) -> Cmp {
        Cmp {
            key,
            target: CmpTarget::Present,
        }
    }

    /// The key does not exist.
    pub fn absent(key: Key) -> Cmp {
        Cmp {
            key,
            target: CmpTarget::Absent,
        }
    }

    fn as_compare(&self) -> Compare<'_> {
        let condition = match &self.target {
            CmpTarget::Value(op, v) => Condition::Value {
                op: *op,
                operand: v,
            },
            CmpTarget::Version(op, v) => Condition::Version {
                op: *op,
                operand: *v,
            },
            CmpTarget::Present => Condition::Present,
            CmpTarget::Absent => Condition::Absent,
        };
        Compare {
            key: self.key,
            condition,
        }
    }
}

/// One operation of a [`Txn`] branch (owned form of the format's `Op`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TxnOp {
    /// Read the key: its value and version are in the result.
    Get(Key),
    /// Write the key, creating it if absent.
    Put(Key, Vec<u8>),
    /// Delete the key (nothing happens if it is absent).
    Delete(Key),
}

impl TxnOp {
    /// Reads `key`.
    pub fn get(key: Key) -> TxnOp {
        TxnOp::Get(key)
    }

    /// Writes `value` at `key`.
    pub fn put(key: Key, value: impl Into<Vec<u8>>) -> TxnOp {
        TxnOp::Put(key, value.into())
    }

    /// Deletes `key`.
    pub fn delete(key: Key) -> TxnOp {
        TxnOp::Delete(key)
    }

    /// The key the operation names.
    pub fn key(&self) -> Key {
        match self {
            TxnOp::Get(k) | TxnOp::Put(k, _) | TxnOp::Delete(k) => *k,
        }
    }

    fn as_op(&self) -> Op<'_> {
        match self {
            TxnOp::Get(k) => Op::Get(*k),
            TxnOp::Put(key, value) => Op::Put { key: *key, value },
            TxnOp::Delete(k) => Op::Delete(*k),
        }
    }
}

/// A one-shot transaction being built (module docs): compares, the success
/// branch ([`Txn::then`]) and the failure branch ([`Txn::otherwise`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Txn {
    compares: Vec<Cmp>,
    success: Vec<TxnOp>,
    failure: Vec<TxnOp>,
}

impl Txn {
    /// An empty transaction: no compares, empty branches (commits the empty
    /// success branch).
    pub fn new() -> Txn {
        Txn::default()
    }

    /// Adds compares; all must hold for the success branch to run.
    pub fn when(mut self, compares: impl IntoIterator<Item = Cmp>) -> Txn {
        self.compares.extend(compares);
        self
    }

    /// Adds operations to the success branch.
    pub fn then(mut self, ops: impl IntoIterator<Item = TxnOp>) -> Txn {
        self.success.extend(ops);
        self
    }

    /// Adds operations to the failure branch.
    pub fn otherwise(mut self, ops: impl IntoIterator<Item = TxnOp>) -> Txn {
        self.failure.extend(ops);
        self
    }

    /// The compares, in order.
    pub fn compares(&self) -> &[Cmp] {
        &self.compares
    }

    /// The operations of `branch`, in order.
    pub fn ops(&self, branch: Branch) -> &[TxnOp] {
        match branch {
            Branch::Success => &self.success,
            Branch::Failure => &self.failure,
        }
    }

    /// Gets in `branch`: the entries of its result.
    pub fn get_count(&self, branch: Branch) -> usize {
        self.ops(branch)
            .iter()
            .filter(|o| matches!(o, TxnOp::Get(_)))
            .count()
    }

    /// Checks every bound (module docs), with values of at most
    /// `value_bytes_max` bytes (the node's `AppLimits::value_bytes_max`,
    /// itself at most [`VALUE_BYTES_MAX`]).
    ///
    /// # Errors
    /// The [`TxnError`] of the first bound broken.
    pub fn check(&self, value_bytes_max: usize) -> Result<(), TxnError> {
        self.check_shape(value_bytes_max.min(VALUE_BYTES_MAX))?;
        let mut scratch = Vec::new();
        self.encode_checked(&mut scratch)
    }

    /// Appends the wire encoding (`splitkv_layout::app::txn`) to `out`,
    /// after [`Txn::check`] with `value_bytes_max`.
    ///
    /// # Errors
    /// As [`Txn::check`]; nothing is appended then.
    pub fn encode(&self, value_bytes_max: usize, out: &mut Vec<u8>) -> Result<(), TxnError> {
        self.check_shape(value_bytes_max.min(VALUE_BYTES_MAX))?;
        self.encode_checked(out)
    }

    /// The format's own encoder, whose rules are its decoder's: anything
    /// [`Txn::check_shape`] missed ends here as [`TxnError::Invalid`].
    fn encode_checked(&self, out: &mut Vec<u8>) -> Result<(), TxnError> {
        let compares: Vec<Compare<'_>> = self.compares.iter().map(Cmp::as_compare).collect();
        let success: Vec<Op<'_>> = self.success.iter().map(TxnOp::as_op).collect();
        let failure: Vec<Op<'_>> = self.failure.iter().map(TxnOp::as_op).collect();
        TxnView::encode(&compares, &success, &failure, out).map_err(|e| match e {
            AppEncodeError::Invalid(d) => TxnError::Invalid(d),
            // `encode` appends to a vector: it has no buffer to be short of.
            AppEncodeError::BufferTooSmall { need, have } => {
                TxnError::Invalid(splitkv_layout::DecodeError::TooLarge {
                    what: "Txn encoding",
                    len: need,
                    max: have,
                })
            }
        })
    }

    /// The bounds with specific errors: counts, keys per branch, value
    /// sizes, versions, read and write sets.
    fn check_shape(&self, value_bytes_max: usize) -> Result<(), TxnError> {
        if self.compares.len() > TXN_COMPARES_MAX {
            return Err(TxnError::TooManyCompares {
                count: self.compares.len(),
                max: TXN_COMPARES_MAX,
            });
        }
        let mut read: Vec<Key> = Vec::new();
        for c in &self.compares {
            match &c.target {
                CmpTarget::Value(_, v) => check_value(v.len(), value_bytes_max)?,
                CmpTarget::Version(_, v) if *v > VERSION_MAX => {
                    return Err(TxnError::VersionTooLarge {
                        version: *v,
                        max: VERSION_MAX,
                    })
                }
                _ => {}
            }
            push_distinct(&mut read, c.key);
        }
        let mut written: Vec<Key> = Vec::new();
        for branch in [Branch::Success, Branch::Failure] {
            self.check_branch(branch, value_bytes_max, &mut read, &mut written)?;
        }
        if written.len() > TXN_WRITES_MAX {
            return Err(TxnError::WriteSetTooLarge {
                count: written.len(),
                max: TXN_WRITES_MAX,
            });
        }
        let reads_only = read.iter().filter(|k| !written.contains(k)).count();
        if reads_only > TXN_READS_MAX {
            return Err(TxnError::ReadSetTooLarge {
                count: reads_only,
                max: TXN_READS_MAX,
            });
        }
        Ok(())
    }

    /// Checks one branch's counts, distinct keys and values; adds its keys
    /// to `read` (gets) and `written` (puts and deletes).
    fn check_branch(
        &self,
        branch: Branch,
        value_bytes_max: usize,
        read: &mut Vec<Key>,
        written: &mut Vec<Key>,
    ) -> Result<(), TxnError> {
        let ops = self.ops(branch);
        if ops.len() > TXN_BRANCH_OPS_MAX {
            return Err(TxnError::TooManyOps {
                branch,
                count: ops.len(),
                max: TXN_BRANCH_OPS_MAX,
            });
        }
        let gets = self.get_count(branch);
        if gets > TXN_BRANCH_GETS_MAX {
            return Err(TxnError::TooManyGets {
                branch,
                count: gets,
                max: TXN_BRANCH_GETS_MAX,
            });
        }
        let mut here: Vec<Key> = Vec::with_capacity(ops.len());
        for op in ops {
            if !push_distinct(&mut here, op.key()) {
                return Err(TxnError::KeyTwiceInBranch {
                    branch,
                    key: op.key(),
                });
            }
            match op {
                TxnOp::Get(k) => push_distinct(read, *k),
                TxnOp::Put(k, v) => {
                    check_value(v.len(), value_bytes_max)?;
                    push_distinct(written, *k)
                }
                TxnOp::Delete(k) => push_distinct(written, *k),
            };
        }
        Ok(())
    }
}

/// Fails with [`TxnError::ValueTooLarge`] for a value of `len` bytes over
/// `max`.
fn check_value(len: usize, max: usize) -> Result<(), TxnError> {
    if len > max {
        return Err(TxnError::ValueTooLarge { len, max });
    }
    Ok(())
}

/// Adds `key` to `keys` unless it is there; whether it was added. Linear:
/// the sets are bounded by the format (tens of keys).
fn push_distinct(keys: &mut Vec<Key>, key: Key) -> bool {
    if keys.contains(&key) {
        return false;
    }
    keys.push(key);
    true
}

#[cfg(test)]
mod tests;
