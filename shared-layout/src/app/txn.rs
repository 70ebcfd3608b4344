//! The one-shot transaction: compares on keys, then the operations of one of
//! two branches — the success branch if every compare holds, the failure
//! branch otherwise — in the shape etcd's `Txn` has. It needs no code in the
//! node: the node runs it as a built-in procedure on the commit protocol
//! (Xenic §4.2, Dandelion §4.2.2), atomically and strictly serializably.
//!
//! # Meaning
//!
//! Every compare and every `get` reads the key at the transaction's
//! serialization point; the branch is chosen from the compares, and the
//! chosen branch's puts and deletes commit together. A failed compare is not
//! an abort: the transaction commits the failure branch and its result says
//! so ([`Branch::Failure`]). Compare semantics for a key that is absent (never
//! written, or deleted): [`Condition::Absent`] holds; [`Condition::Present`]
//! fails; every [`Condition::Value`] compare fails (an absent key has no value
//! to order, not even an empty one); a [`Condition::Version`] compare uses the
//! key's version (0 for a never-written key; a deleted key keeps the version
//! of its delete, [`crate::ObjectMeta`]). Values compare bytewise
//! (lexicographically, as `&[u8]` orders).
//!
//! # Bounds, checked at decode
//!
//! The node plans the transaction before running it, as the NIC runtime plans
//! a shipped procedure: the write set is the union of the keys the two
//! branches put or delete (both are locked, since the branch is known only
//! after the reads), and the read set is every compared or read key that is
//! not in the write set. So:
//!
//! - distinct write keys of both branches together ≤ [`TXN_WRITES_MAX`] (the
//!   NIC runtime's `WRITE_SET_MAX`, [`crate::TX_VALUES_MAX`]);
//! - distinct compared-or-read keys outside the write set ≤ [`TXN_READS_MAX`]
//!   (the NIC runtime's `READ_SET_MAX`; nic-runtime asserts the two are equal
//!   at compile time);
//! - a key appears in at most one operation of a branch (a branch is a set of
//!   operations, not a program; a `get` never sees its own branch's write);
//! - at most [`TXN_BRANCH_GETS_MAX`] gets per branch, so that the largest
//!   [`TxnResult`] fits a host↔NIC outcome ([`TXN_RESULT_BYTES_MAX`] ≤
//!   [`crate::host_nic::RESULT_BYTES_MAX`], asserted at compile time);
//! - at most [`TXN_COMPARES_MAX`] compares and [`TXN_BRANCH_OPS_MAX`]
//!   operations per branch, values of at most [`VALUE_BYTES_MAX`] bytes and an
//!   encoding of at most [`TXN_BYTES_MAX`] bytes (so the encoding is a valid
//!   host↔NIC `TxRequest` argument as it is).
//!
//! A transaction over a bound is a [`DecodeError::TooLarge`], so the node
//! refuses it before running it.
//!
//! # Encoding (little endian)
//!
//! | bytes | field |
//! |---|---|
//! | 0 | `compare_count: u8` ≤ [`TXN_COMPARES_MAX`] |
//! | 1 | `success_count: u8` ≤ [`TXN_BRANCH_OPS_MAX`] |
//! | 2 | `failure_count: u8` ≤ [`TXN_BRANCH_OPS_MAX`] |
//! | 3.. | the compares, then the success operations, then the failure operations |
//!
//! | item | bytes |
//! |---|---|
//! | compare | `key` (12 B, [`crate::Key`]), `target: u8`, `op: u8`, operand |
//! | — target value `0` | op `0..=3` ([`CmpOp`]), operand `len: u32` ≤ [`VALUE_BYTES_MAX`], `len` bytes |
//! | — target version `1` | op `0..=3` ([`CmpOp`]), operand `version: u64` ≤ [`crate::VERSION_MAX`] |
//! | — target existence `2` | op `4` present or `5` absent, no operand |
//! | operation | `kind: u8` (`1` get, `2` put, `3` delete), `key` (12 B) |
//! | — put | then `len: u32` ≤ [`VALUE_BYTES_MAX`], `len` bytes |
//!
//! A value or version target with op `4`/`5`, or an existence target with op
//! `0..=3`, is contradictory ([`DecodeError::Inconsistent`]).

mod item;
mod result;

pub(crate) use item::check_version;
use item::{read_compare, read_op, write_compare, write_op};
pub use item::{CmpOp, Compare, Condition, Op};
pub use result::{Branch, GetResult, TxnResult, GET_RESULT_HEADER_BYTES, TXN_RESULT_BYTES_MAX};

use super::{check_len, AppEncodeError};
use crate::error::{DecodeError, Reader};
use crate::host_nic::ARGS_BYTES_MAX;
use crate::{Key, TX_VALUES_MAX, VALUE_BYTES_MAX};

/// Most distinct keys in a transaction's read set (compared or read keys that
/// are not written). Equal to the NIC runtime's `READ_SET_MAX`, which asserts
/// the equality at compile time.
pub const TXN_READS_MAX: usize = 16;

/// Most distinct keys the two branches put or delete, together: the write set
/// locked before the branch is known. Equal to the NIC runtime's
/// `WRITE_SET_MAX` ([`TX_VALUES_MAX`]).
pub const TXN_WRITES_MAX: usize = TX_VALUES_MAX;

/// Most compares in a transaction: one per key the read and write sets can
/// hold ([`TXN_READS_MAX`] + [`TXN_WRITES_MAX`] = 32); a key may be compared
/// more than once (a version range is two compares).
pub const TXN_COMPARES_MAX: usize = TXN_READS_MAX + TXN_WRITES_MAX;

/// Most operations in one branch: each names a distinct key of the read or
/// write set ([`TXN_READS_MAX`] + [`TXN_WRITES_MAX`] = 32).
pub const TXN_BRANCH_OPS_MAX: usize = TXN_READS_MAX + TXN_WRITES_MAX;

/// Most gets in one branch: [`TX_VALUES_MAX`] = 16, the values one host↔NIC
/// outcome carries ([`TXN_RESULT_BYTES_MAX`]).
pub const TXN_BRANCH_GETS_MAX: usize = TX_VALUES_MAX;

/// Largest encoded transaction, in bytes: [`ARGS_BYTES_MAX`] (66 560), so the
/// encoding travels to the NIC runtime as a `TxRequest`'s arguments unchanged.
pub const TXN_BYTES_MAX: usize = ARGS_BYTES_MAX;

/// Bytes before the first compare: the three counts.
pub const TXN_HEADER_BYTES: usize = 3;

// The counts fit their `u8` fields.
const _: () = assert!(TXN_COMPARES_MAX <= u8::MAX as usize);
const _: () = assert!(TXN_BRANCH_OPS_MAX <= u8::MAX as usize);
const _: () = assert!(TXN_BRANCH_GETS_MAX <= TXN_BRANCH_OPS_MAX);
const _: () = assert!(VALUE_BYTES_MAX <= u32::MAX as usize);

/// A decoded, validated one-shot transaction: a view over its encoding
/// (module docs) that yields compares and operations without copying.
/// Built only by [`Txn::decode`] (or [`Txn::encode`] then decode), so every
/// `Txn` is within every bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Txn<'a> {
    bytes: &'a [u8],
    compare_count: u8,
    success_count: u8,
    failure_count: u8,
    /// Offset of the first failure operation in `bytes`.
    failure_offset: usize,
    /// Offset of the first success operation in `bytes`.
    success_offset: usize,
}

/// Distinct keys, at most `N`, on the stack (the decoder does not allocate).
struct KeySet<const N: usize> {
    keys: [Key; N],
    len: usize,
}

impl<const N: usize> KeySet<N> {
    fn new() -> Self {
        KeySet {
            keys: [Key::default(); N],
            len: 0,
        }
    }

    fn contains(&self, key: Key) -> bool {
        self.keys[..self.len.min(N)].contains(&key)
    }

    /// Adds `key`; false if it was there already. A set sized for every key
    /// its caller can add never overflows; if it did, the key is counted
    /// without being kept.
    fn insert(&mut self, key: Key) -> bool {
        if self.contains(key) {
            return false;
        }
        if let Some(slot) = self.keys.get_mut(self.len) {
            *slot = key;
        }
        self.len += 1;
        true
    }
}

// Sizes of the decoder's key sets: every key a transaction names.
const KEYS_NAMED_MAX: usize = TXN_COMPARES_MAX + 2 * TXN_BRANCH_OPS_MAX;

impl<'a> Txn<'a> {
    /// Decodes a transaction that spans exactly `bytes`, borrowing its values.
    ///
    /// # Errors
    /// [`DecodeError::Truncated`] for missing bytes; [`DecodeError::BadTag`]
    /// for an unknown compare target, operator or operation kind;
    /// [`DecodeError::TooLarge`] for an encoding over [`TXN_BYTES_MAX`], a
    /// count over its bound, a value over [`VALUE_BYTES_MAX`], a version over
    /// [`crate::VERSION_MAX`], more than [`TXN_BRANCH_GETS_MAX`] gets in a branch, or
    /// read or write sets over [`TXN_READS_MAX`] / [`TXN_WRITES_MAX`];
    /// [`DecodeError::Inconsistent`] for an operator that does not fit its
    /// target, a key named twice in one branch, or trailing bytes.
    pub fn decode(bytes: &'a [u8]) -> Result<Txn<'a>, DecodeError> {
        check_len("Txn encoding", bytes.len(), TXN_BYTES_MAX)?;
        let mut r = Reader::new(bytes, "Txn");
        let compare_count = r.u8()?;
        let success_count = r.u8()?;
        let failure_count = r.u8()?;
        check_len("Txn compares", compare_count as usize, TXN_COMPARES_MAX)?;
        check_len(
            "Txn success ops",
            success_count as usize,
            TXN_BRANCH_OPS_MAX,
        )?;
        check_len(
            "Txn failure ops",
            failure_count as usize,
            TXN_BRANCH_OPS_MAX,
        )?;
        // Every key compared or read, and every key written.
        let mut read = KeySet::<KEYS_NAMED_MAX>::new();
        let mut written = KeySet::<KEYS_NAMED_MAX>::new();
        for _ in 0..compare_count {
            read.insert(read_compare(&mut r)?.key);
        }
        let success_offset = r.position();
        check_branch(
            &mut r,
            success_count,
            "Txn success branch",
            &mut read,
            &mut written,
        )?;
        let failure_offset = r.position();
        check_branch(
            &mut r,
            failure_count,
            "Txn failure branch",
            &mut read,
            &mut written,
        )?;
        r.finish()?;
        check_len(
            "Txn write set (keys both branches write)",
            written.len,
            TXN_WRITES_MAX,
        )?;
        let reads_only = read.keys[..read.len.min(KEYS_NAMED_MAX)]
            .iter()
            .filter(|k| !written.contains(**k))
            .count();
        check_len(
            "Txn read set (compared or read keys not written)",
            reads_only,
            TXN_READS_MAX,
        )?;
        Ok(Txn {
            bytes,
            compare_count,
            success_count,
            failure_count,
            success_offset,
            failure_offset,
        })
    }

    /// Appends the encoding of a transaction with these compares and branches
    /// to `out`.
    ///
    /// # Errors
    /// [`AppEncodeError::Invalid`] with the error [`Txn::decode`] would return
    /// (a bound broken, a key twice in a branch); nothing is appended then.
    pub fn encode(
        compares: &[Compare<'_>],
        success: &[Op<'_>],
        failure: &[Op<'_>],
        out: &mut Vec<u8>,
    ) -> Result<(), AppEncodeError> {
        // Bound the counts and sizes before writing anything, so the counts
        // fit their bytes and the length below cannot overflow.
        check_len("Txn compares", compares.len(), TXN_COMPARES_MAX)?;
        check_len("Txn success ops", success.len(), TXN_BRANCH_OPS_MAX)?;
        check_len("Txn failure ops", failure.len(), TXN_BRANCH_OPS_MAX)?;
        for c in compares {
            if let Condition::Value { operand, .. } = c.condition {
                check_len("Txn compare value", operand.len(), VALUE_BYTES_MAX)?;
            }
        }
        for op in success.iter().chain(failure) {
            if let Op::Put { value, .. } = op {
                check_len("Txn put value", value.len(), VALUE_BYTES_MAX)?;
            }
        }
        let len = TXN_HEADER_BYTES
            + compares.iter().map(Compare::encoded_len).sum::<usize>()
            + success
                .iter()
                .chain(failure)
                .map(Op::encoded_len)
                .sum::<usize>();
        check_len("Txn encoding", len, TXN_BYTES_MAX)?;
        super::append_with(out, len, |buf| {
            let mut w = super::SliceWriter::new(buf);
            w.put(&[
                compares.len() as u8,
                success.len() as u8,
                failure.len() as u8,
            ]);
            for c in compares {
                write_compare(&mut w, c);
            }
            for op in success.iter().chain(failure) {
                write_op(&mut w, op);
            }
            let written = w.position();
            // One set of rules: the encoding is valid iff it decodes.
            Txn::decode(buf)?;
            Ok(written)
        })
    }

    /// The encoding (module docs), [`Txn::encoded_len`] bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Bytes of the encoding.
    pub fn encoded_len(&self) -> usize {
        self.bytes.len()
    }

    /// The compares, in order.
    pub fn compares(&self) -> impl Iterator<Item = Compare<'a>> + 'a {
        let mut r = Reader::new(self.bytes, "Txn");
        // Validated at decode: every read below succeeds.
        let _ = r.take(TXN_HEADER_BYTES);
        (0..self.compare_count).map_while(move |_| read_compare(&mut r).ok())
    }

    /// The operations of `branch`, in order.
    pub fn ops(&self, branch: Branch) -> impl Iterator<Item = Op<'a>> + 'a {
        let (offset, count) = match branch {
            Branch::Success => (self.success_offset, self.success_count),
            Branch::Failure => (self.failure_offset, self.failure_count),
        };
        let mut r = Reader::new(self.bytes.get(offset..).unwrap_or_default(), "Txn");
        (0..count).map_while(move |_| read_op(&mut r).ok())
    }

    /// Number of compares.
    pub fn compare_count(&self) -> usize {
        self.compare_count as usize
    }

    /// Number of operations in `branch`.
    pub fn op_count(&self, branch: Branch) -> usize {
        match branch {
            Branch::Success => self.success_count as usize,
            Branch::Failure => self.failure_count as usize,
        }
    }

    /// Number of gets in `branch`: the entries of its [`TxnResult`].
    pub fn get_count(&self, branch: Branch) -> usize {
        self.ops(branch).filter(|op| !op.is_write()).count()
    }
}

/// Reads and checks `count` operations of one branch: distinct keys, at most
/// [`TXN_BRANCH_GETS_MAX`] gets; adds their keys to `read` / `written`.
fn check_branch(
    r: &mut Reader<'_>,
    count: u8,
    what: &'static str,
    read: &mut KeySet<KEYS_NAMED_MAX>,
    written: &mut KeySet<KEYS_NAMED_MAX>,
) -> Result<(), DecodeError> {
    let mut here = KeySet::<TXN_BRANCH_OPS_MAX>::new();
    let mut gets = 0;
    for _ in 0..count {
        let op = read_op(r)?;
        if !here.insert(op.key()) {
            return Err(DecodeError::Inconsistent {
                what,
                detail: "a key named by two operations",
            });
        }
        if op.is_write() {
            written.insert(op.key());
        } else {
            gets += 1;
            read.insert(op.key());
        }
    }
    check_len(what, gets, TXN_BRANCH_GETS_MAX)
}
