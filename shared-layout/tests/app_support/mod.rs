//! Shared by the application-format tests: owned forms of the borrowed
//! formats (so strategies can produce them), strategies, an independent model
//! of the one-shot transaction's rules, and a byte writer that ignores every
//! rule (to build encodings the encoders refuse).
#![allow(dead_code)]

use proptest::prelude::*;
use splitkv_layout::app::*;
use splitkv_layout::{Key, KEY_BYTES, VALUE_BYTES_MAX, VERSION_MAX};

/// Owned [`Condition`].
#[derive(Debug, Clone, PartialEq)]
pub enum CondOwned {
    Value(CmpOp, Vec<u8>),
    Version(CmpOp, u64),
    Present,
    Absent,
}

/// Owned [`Op`].
#[derive(Debug, Clone, PartialEq)]
pub enum OpOwned {
    Get(Key),
    Put(Key, Vec<u8>),
    Delete(Key),
}

impl OpOwned {
    pub fn key(&self) -> Key {
        match self {
            OpOwned::Get(k) | OpOwned::Put(k, _) | OpOwned::Delete(k) => *k,
        }
    }
    pub fn borrow(&self) -> Op<'_> {
        match self {
            OpOwned::Get(k) => Op::Get(*k),
            OpOwned::Put(key, v) => Op::Put {
                key: *key,
                value: v,
            },
            OpOwned::Delete(k) => Op::Delete(*k),
        }
    }
    pub fn from_op(op: Op<'_>) -> OpOwned {
        match op {
            Op::Get(k) => OpOwned::Get(k),
            Op::Put { key, value } => OpOwned::Put(key, value.to_vec()),
            Op::Delete(k) => OpOwned::Delete(k),
        }
    }
}

/// Owned one-shot transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct TxnOwned {
    pub compares: Vec<(Key, CondOwned)>,
    pub success: Vec<OpOwned>,
    pub failure: Vec<OpOwned>,
}

impl TxnOwned {
    pub fn compares(&self) -> Vec<Compare<'_>> {
        self.compares
            .iter()
            .map(|(key, c)| Compare {
                key: *key,
                condition: match c {
                    CondOwned::Value(op, v) => Condition::Value {
                        op: *op,
                        operand: v,
                    },
                    CondOwned::Version(op, v) => Condition::Version {
                        op: *op,
                        operand: *v,
                    },
                    CondOwned::Present => Condition::Present,
                    CondOwned::Absent => Condition::Absent,
                },
            })
            .collect()
    }

    pub fn ops(&self, branch: Branch) -> Vec<Op<'_>> {
        match branch {
            Branch::Success => &self.success,
            Branch::Failure => &self.failure,
        }
        .iter()
        .map(OpOwned::borrow)
        .collect()
    }

    pub fn encode(&self) -> Result<Vec<u8>, AppEncodeError> {
        let mut out = Vec::new();
        Txn::encode(
            &self.compares(),
            &self.ops(Branch::Success),
            &self.ops(Branch::Failure),
            &mut out,
        )?;
        Ok(out)
    }

    pub fn from_txn(t: &Txn<'_>) -> TxnOwned {
        TxnOwned {
            compares: t
                .compares()
                .map(|c| {
                    let cond = match c.condition {
                        Condition::Value { op, operand } => CondOwned::Value(op, operand.to_vec()),
                        Condition::Version { op, operand } => CondOwned::Version(op, operand),
                        Condition::Present => CondOwned::Present,
                        Condition::Absent => CondOwned::Absent,
                    };
                    (c.key, cond)
                })
                .collect(),
            success: t.ops(Branch::Success).map(OpOwned::from_op).collect(),
            failure: t.ops(Branch::Failure).map(OpOwned::from_op).collect(),
        }
    }

    /// Bytes of the encoding, computed from the layout table.
    pub fn model_len(&self) -> usize {
        let c: usize = self
            .compares
            .iter()
            .map(|(_, c)| {
                KEY_BYTES
                    + 2
                    + match c {
                        CondOwned::Value(_, v) => 4 + v.len(),
                        CondOwned::Version(..) => 8,
                        _ => 0,
                    }
            })
            .sum();
        let o: usize = self
            .success
            .iter()
            .chain(&self.failure)
            .map(|op| match op {
                OpOwned::Put(_, v) => 1 + KEY_BYTES + 4 + v.len(),
                _ => 1 + KEY_BYTES,
            })
            .sum();
        3 + c + o
    }

    /// The rules of the module docs, written independently of the decoder.
    pub fn model_valid(&self) -> bool {
        use std::collections::BTreeSet;
        if self.compares.len() > TXN_COMPARES_MAX
            || self.success.len() > TXN_BRANCH_OPS_MAX
            || self.failure.len() > TXN_BRANCH_OPS_MAX
            || self.model_len() > TXN_BYTES_MAX
        {
            return false;
        }
        for (_, c) in &self.compares {
            match c {
                CondOwned::Value(_, v) if v.len() > VALUE_BYTES_MAX => return false,
                CondOwned::Version(_, v) if *v > VERSION_MAX => return false,
                _ => {}
            }
        }
        let mut writes = BTreeSet::new();
        let mut reads: BTreeSet<Key> = self.compares.iter().map(|(k, _)| *k).collect();
        for branch in [&self.success, &self.failure] {
            let keys: BTreeSet<Key> = branch.iter().map(OpOwned::key).collect();
            if keys.len() != branch.len() {
                return false;
            }
            let gets = branch
                .iter()
                .filter(|o| matches!(o, OpOwned::Get(_)))
                .count();
            if gets > TXN_BRANCH_GETS_MAX {
                return false;
            }
            for op in branch {
                match op {
                    OpOwned::Get(k) => {
                        reads.insert(*k);
                    }
                    OpOwned::Put(k, v) => {
                        if v.len() > VALUE_BYTES_MAX {
                            return false;
                        }
                        writes.insert(*k);
                    }
                    OpOwned::Delete(k) => {
                        writes.insert(*k);
                    }
                }
            }
        }
        writes.len() <= TXN_WRITES_MAX && reads.difference(&writes).count() <= TXN_READS_MAX
    }
}

// ---------------------------------------------------------------------------
// Strategies.

pub fn bytes_up_to(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => prop::collection::vec(any::<u8>(), 0..=16),
        1 => prop::collection::vec(any::<u8>(), 0..=max),
        1 => prop::collection::vec(any::<u8>(), max..=max),
    ]
}

/// Keys from a pool of 64, so transactions name some keys more than once.
pub fn key() -> impl Strategy<Value = Key> {
    (0u32..2, 0u64..32).prop_map(|(t, i)| Key::new(t, i))
}

pub fn cmp_op() -> impl Strategy<Value = CmpOp> {
    prop::sample::select(CmpOp::ALL.to_vec())
}

pub fn condition() -> impl Strategy<Value = CondOwned> {
    prop_oneof![
        (cmp_op(), bytes_up_to(VALUE_BYTES_MAX)).prop_map(|(o, v)| CondOwned::Value(o, v)),
        (cmp_op(), prop_oneof![0u64..10, 0..=VERSION_MAX])
            .prop_map(|(o, v)| CondOwned::Version(o, v)),
        Just(CondOwned::Present),
        Just(CondOwned::Absent),
    ]
}

/// A branch: distinct keys (mostly), each with a random operation.
pub fn branch(max: usize) -> impl Strategy<Value = Vec<OpOwned>> {
    let pool: Vec<Key> = (0..2u32)
        .flat_map(|t| (0..32u64).map(move |i| Key::new(t, i)))
        .collect();
    prop::sample::subsequence(pool, 0..=max)
        .prop_shuffle()
        .prop_flat_map(|keys| {
            keys.into_iter()
                .map(|k| {
                    prop_oneof![
                        Just(OpOwned::Get(k)),
                        bytes_up_to(VALUE_BYTES_MAX).prop_map(move |v| OpOwned::Put(k, v)),
                        Just(OpOwned::Delete(k)),
                    ]
                })
                .collect::<Vec<_>>()
        })
}

/// Any transaction within the count fields' ranges, valid or not; now and
/// then a branch names one key twice.
pub fn txn_any() -> impl Strategy<Value = TxnOwned> {
    let sizes = prop_oneof![4 => Just(6usize), 1 => Just(TXN_BRANCH_OPS_MAX)];
    sizes.prop_flat_map(|n| {
        (
            prop::collection::vec((key(), condition()), 0..=n),
            branch(n),
            branch(n),
            prop::bool::weighted(0.1),
        )
            .prop_map(|(compares, mut success, failure, twice)| {
                if let (true, Some(first)) = (twice, success.first()) {
                    if success.len() < TXN_BRANCH_OPS_MAX {
                        success.push(OpOwned::Delete(first.key()));
                    }
                }
                TxnOwned {
                    compares,
                    success,
                    failure,
                }
            })
    })
}

/// A transaction the model calls valid.
pub fn txn_valid() -> impl Strategy<Value = TxnOwned> {
    txn_any().prop_filter("within the Txn bounds", TxnOwned::model_valid)
}

/// Owned [`GetResult`].
pub type GetOwned = Option<(u64, Vec<u8>)>;

pub fn get_result() -> impl Strategy<Value = GetOwned> {
    prop::option::of((0..=VERSION_MAX, bytes_up_to(VALUE_BYTES_MAX)))
}

pub fn borrow_gets(gets: &[GetOwned]) -> Vec<GetResult<'_>> {
    gets.iter()
        .map(|g| match g {
            None => GetResult::NotFound,
            Some((version, value)) => GetResult::Found {
                version: *version,
                value,
            },
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Encodings built without any rule.

/// A little-endian byte writer for hand-made (possibly invalid) encodings.
#[derive(Default)]
pub struct Raw(pub Vec<u8>);

impl Raw {
    pub fn u8(mut self, v: u8) -> Raw {
        self.0.push(v);
        self
    }
    pub fn u16(mut self, v: u16) -> Raw {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u32(mut self, v: u32) -> Raw {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(mut self, v: u64) -> Raw {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn key(mut self, k: Key) -> Raw {
        let mut b = [0u8; KEY_BYTES];
        k.encode(&mut b);
        self.0.extend_from_slice(&b);
        self
    }
    pub fn bytes(mut self, b: &[u8]) -> Raw {
        self.0.extend_from_slice(b);
        self
    }
}

/// Mutations of a valid encoding: flip a byte, truncate, or insert a byte.
pub fn mutate(bytes: &[u8], kind: u8, at: usize, value: u8) -> Vec<u8> {
    let mut m = bytes.to_vec();
    if m.is_empty() {
        return vec![value];
    }
    let i = at % m.len();
    match kind % 3 {
        0 => m[i] ^= value.max(1),
        1 => m.truncate(i),
        _ => m.insert(i, value),
    }
    m
}
