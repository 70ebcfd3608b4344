//! The items of a [`super::Txn`]: compares and operations, and how each is
//! read from and written to the encoding (layout table in [`super`]).

use crate::app::SliceWriter;
use crate::error::{DecodeError, Reader};
use crate::{Key, KEY_BYTES, VALUE_BYTES_MAX, VERSION_MAX};

use super::check_len;

const TARGET_VALUE: u8 = 0;
const TARGET_VERSION: u8 = 1;
const TARGET_EXISTENCE: u8 = 2;
const OP_PRESENT: u8 = 4;
const OP_ABSENT: u8 = 5;
const KIND_GET: u8 = 1;
const KIND_PUT: u8 = 2;
const KIND_DELETE: u8 = 3;

/// How a value or version compares with the operand: the key's value (or
/// version) on the left, the operand on the right.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// Equal to the operand.
    Equal = 0,
    /// Not equal to the operand.
    NotEqual = 1,
    /// Less than the operand (bytewise for values).
    Less = 2,
    /// Greater than the operand (bytewise for values).
    Greater = 3,
}

impl CmpOp {
    /// Every operator, in wire-value order.
    pub const ALL: [CmpOp; 4] = [CmpOp::Equal, CmpOp::NotEqual, CmpOp::Less, CmpOp::Greater];

    /// Whether `left op right` holds.
    pub fn holds<T: Ord + ?Sized>(self, left: &T, right: &T) -> bool {
        let o = left.cmp(right);
        match self {
            CmpOp::Equal => o.is_eq(),
            CmpOp::NotEqual => o.is_ne(),
            CmpOp::Less => o.is_lt(),
            CmpOp::Greater => o.is_gt(),
        }
    }
}

/// What a compare checks about its key (module docs for an absent key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Condition<'a> {
    /// The value compared bytewise with `operand` (at most
    /// [`VALUE_BYTES_MAX`] bytes).
    Value {
        /// The operator.
        op: CmpOp,
        /// The right-hand side.
        operand: &'a [u8],
    },
    /// The version compared with `operand` (at most [`VERSION_MAX`]).
    Version {
        /// The operator.
        op: CmpOp,
        /// The right-hand side.
        operand: u64,
    },
    /// The key exists.
    Present,
    /// The key does not exist.
    Absent,
}

/// One compare: `condition` on `key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Compare<'a> {
    /// The key compared.
    pub key: Key,
    /// What must hold.
    pub condition: Condition<'a>,
}

/// One operation of a branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op<'a> {
    /// Read the key; its value and version are in the [`super::TxnResult`].
    Get(Key),
    /// Write the key (creating it if absent), at most [`VALUE_BYTES_MAX`] bytes.
    Put {
        /// The key written.
        key: Key,
        /// The new value.
        value: &'a [u8],
    },
    /// Delete the key (nothing happens if it is absent).
    Delete(Key),
}

impl Op<'_> {
    /// The key the operation names.
    pub fn key(&self) -> Key {
        match *self {
            Op::Get(k) | Op::Delete(k) | Op::Put { key: k, .. } => k,
        }
    }

    /// Whether the operation writes (put or delete).
    pub fn is_write(&self) -> bool {
        !matches!(self, Op::Get(_))
    }

    pub(super) fn encoded_len(&self) -> usize {
        match self {
            Op::Put { value, .. } => 1 + KEY_BYTES + 4 + value.len(),
            _ => 1 + KEY_BYTES,
        }
    }
}

impl Compare<'_> {
    pub(super) fn encoded_len(&self) -> usize {
        KEY_BYTES
            + 2
            + match self.condition {
                Condition::Value { operand, .. } => 4 + operand.len(),
                Condition::Version { .. } => 8,
                Condition::Present | Condition::Absent => 0,
            }
    }
}

/// Reads one compare (module docs).
pub(super) fn read_compare<'a>(r: &mut Reader<'a>) -> Result<Compare<'a>, DecodeError> {
    let key = r.key()?;
    let target = r.u8()?;
    let op = r.u8()?;
    let cmp = match op {
        0..=3 => CmpOp::ALL.get(op as usize).copied(),
        OP_PRESENT | OP_ABSENT => None,
        _ => {
            return Err(DecodeError::BadTag {
                what: "Txn compare operator",
                tag: op as u64,
            })
        }
    };
    let contradiction = DecodeError::Inconsistent {
        what: "Txn compare",
        detail: "operator does not fit the target",
    };
    let condition = match (target, cmp) {
        (TARGET_VALUE, Some(op)) => {
            let len = r.u32()? as usize;
            check_len("Txn compare value", len, VALUE_BYTES_MAX)?;
            Condition::Value {
                op,
                operand: r.take(len)?,
            }
        }
        (TARGET_VERSION, Some(op)) => {
            let operand = r.u64()?;
            check_version("Txn compare version", operand)?;
            Condition::Version { op, operand }
        }
        (TARGET_EXISTENCE, None) if op == OP_PRESENT => Condition::Present,
        (TARGET_EXISTENCE, None) => Condition::Absent,
        (TARGET_VALUE | TARGET_VERSION | TARGET_EXISTENCE, _) => return Err(contradiction),
        (tag, _) => {
            return Err(DecodeError::BadTag {
                what: "Txn compare target",
                tag: tag as u64,
            })
        }
    };
    Ok(Compare { key, condition })
}

/// Fails with [`DecodeError::TooLarge`] for a version over [`VERSION_MAX`].
pub(crate) fn check_version(what: &'static str, version: u64) -> Result<(), DecodeError> {
    if version > VERSION_MAX {
        return Err(DecodeError::TooLarge {
            what,
            len: usize::try_from(version).unwrap_or(usize::MAX),
            max: usize::try_from(VERSION_MAX).unwrap_or(usize::MAX),
        });
    }
    Ok(())
}

/// Reads one operation (module docs).
pub(super) fn read_op<'a>(r: &mut Reader<'a>) -> Result<Op<'a>, DecodeError> {
    let kind = r.u8()?;
    if !(KIND_GET..=KIND_DELETE).contains(&kind) {
        return Err(DecodeError::BadTag {
            what: "Txn operation kind",
            tag: kind as u64,
        });
    }
    let key = r.key()?;
    Ok(match kind {
        KIND_GET => Op::Get(key),
        KIND_DELETE => Op::Delete(key),
        _ => {
            let len = r.u32()? as usize;
            check_len("Txn put value", len, VALUE_BYTES_MAX)?;
            Op::Put {
                key,
                value: r.take(len)?,
            }
        }
    })
}

pub(super) fn write_compare(w: &mut SliceWriter<'_>, c: &Compare<'_>) {
    w.key(&c.key);
    match c.condition {
        Condition::Value { op, operand } => {
            w.put(&[TARGET_VALUE, op as u8]);
            w.put(&(operand.len() as u32).to_le_bytes());
            w.put(operand);
        }
        Condition::Version { op, operand } => {
            w.put(&[TARGET_VERSION, op as u8]);
            w.put(&operand.to_le_bytes());
        }
        Condition::Present => w.put(&[TARGET_EXISTENCE, OP_PRESENT]),
        Condition::Absent => w.put(&[TARGET_EXISTENCE, OP_ABSENT]),
    }
}

pub(super) fn write_op(w: &mut SliceWriter<'_>, op: &Op<'_>) {
    match *op {
        Op::Get(key) => {
            w.put(&[KIND_GET]);
            w.key(&key);
        }
        Op::Delete(key) => {
            w.put(&[KIND_DELETE]);
            w.key(&key);
        }
        Op::Put { key, value } => {
            w.put(&[KIND_PUT]);
            w.key(&key);
            w.put(&(value.len() as u32).to_le_bytes());
            w.put(value);
        }
    }
}
