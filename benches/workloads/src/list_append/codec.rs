//! The argument codec of the history workloads' shipped procedures: a
//! transaction's micro-ops (Elle's `["r", k, nil]`, `["append", k, v]`,
//! `["w", k, v]`) as procedure arguments. Shared by list-append (reads and
//! appends) and the read-write register (reads and writes).
//!
//! ```text
//! args := n:u8  op{n}          (1 <= n <= MICRO_OPS_PER_TX_MAX)
//! op   := f:u8  key:u64 LE  value:u64 LE     (f: 0 read, 1 append, 2 write;
//!                                              a read's value is 0)
//! ```
//!
//! Decoding never allocates (it runs on the NIC runtime for every
//! transaction) and never panics: bad bytes are [`BadArgs`].

use crate::BadArgs;
use splitkv_check::history::{MicroOp, ReadValue};
use splitkv_layout::host_nic::ARGS_BYTES_MAX;

/// Most micro-ops in one transaction: Elle's generator draws 1–4
/// ([`crate::history_gen::MIXED_OPS_MAX`]); Dandelion §7's O(4,2) takes 6.
pub const MICRO_OPS_PER_TX_MAX: usize = 8;

/// Encoded bytes of one micro-op: `f`, key, value.
pub const TX_OP_BYTES: usize = 1 + 8 + 8;

/// Encoded bytes of the largest argument list.
pub const TX_ARGS_BYTES_MAX: usize = 1 + MICRO_OPS_PER_TX_MAX * TX_OP_BYTES;

const _: () = assert!(TX_ARGS_BYTES_MAX <= ARGS_BYTES_MAX);

/// What a micro-op does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// Read the key.
    Read = 0,
    /// Append `value` to the list at the key (list-append).
    Append = 1,
    /// Set the register at the key to `value` (read-write register).
    Write = 2,
}

/// One decoded micro-op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxOp {
    /// What it does.
    pub kind: OpKind,
    /// The key (the id within the workload's table).
    pub key: u64,
    /// The appended element or written value (0 for a read).
    pub value: u64,
}

/// A decoded argument list: up to [`MICRO_OPS_PER_TX_MAX`] micro-ops, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxOps {
    ops: [TxOp; MICRO_OPS_PER_TX_MAX],
    len: usize,
}

impl TxOps {
    /// The micro-ops in transaction order.
    pub fn as_slice(&self) -> &[TxOp] {
        &self.ops[..self.len]
    }
}

/// Encodes `ops` into `out` (cleared first). A read's value in `ops` is ignored.
///
/// # Panics
/// If `ops` is empty or longer than [`MICRO_OPS_PER_TX_MAX`]: generators draw
/// within the bound, so this is a bug of the caller.
pub fn encode(ops: &[MicroOp], out: &mut Vec<u8>) {
    assert!(
        (1..=MICRO_OPS_PER_TX_MAX).contains(&ops.len()),
        "a transaction has 1..={MICRO_OPS_PER_TX_MAX} micro-ops"
    );
    out.clear();
    out.push(ops.len() as u8);
    for op in ops {
        let (f, key, value) = match *op {
            MicroOp::Read { key, .. } => (OpKind::Read, key, 0),
            MicroOp::Append { key, element } => (OpKind::Append, key, element),
            MicroOp::Write { key, value } => (OpKind::Write, key, value),
        };
        out.push(f as u8);
        out.extend_from_slice(&key.to_le_bytes());
        out.extend_from_slice(&value.to_le_bytes());
    }
}

/// Decodes an argument list (see the module docs).
///
/// # Errors
/// [`BadArgs`] if the count is 0 or over [`MICRO_OPS_PER_TX_MAX`],
/// the length does not match the count, or a micro-op kind is unknown.
pub fn decode(args: &[u8]) -> Result<TxOps, BadArgs> {
    let Some((&n, body)) = args.split_first() else {
        return Err(BadArgs("empty micro-op list"));
    };
    let n = n as usize;
    if n == 0 || n > MICRO_OPS_PER_TX_MAX {
        return Err(BadArgs("micro-op count outside 1..=4"));
    }
    if body.len() != n * TX_OP_BYTES {
        return Err(BadArgs("micro-op list length does not match its count"));
    }
    let empty = TxOp {
        kind: OpKind::Read,
        key: 0,
        value: 0,
    };
    let mut ops = TxOps {
        ops: [empty; MICRO_OPS_PER_TX_MAX],
        len: n,
    };
    for (i, b) in body.chunks_exact(TX_OP_BYTES).enumerate() {
        let kind = match b[0] {
            0 => OpKind::Read,
            1 => OpKind::Append,
            2 => OpKind::Write,
            _ => return Err(BadArgs("unknown micro-op kind")),
        };
        let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        ops.ops[i] = TxOp {
            kind,
            key: word(1),
            value: word(9),
        };
    }
    Ok(ops)
}

/// Why a committed transaction's result could not be read back into micro-ops.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResultError {
    /// The result ended before every read's value.
    #[error("result truncated at byte {at} (micro-op {op})")]
    Truncated {
        /// Byte offset where more was expected.
        at: usize,
        /// Index of the micro-op being decoded.
        op: usize,
    },
    /// Bytes left after the last read's value.
    #[error("{0} bytes after the last read's value")]
    Trailing(usize),
    /// A register read's presence tag is neither 0 nor 1.
    #[error("micro-op {op}: bad register tag {tag}")]
    BadTag {
        /// Index of the micro-op.
        op: usize,
        /// The tag found.
        tag: u8,
    },
    /// A one-shot `Txn`'s result does not match its transaction (or the
    /// `Txn` could not be encoded), as the message says.
    #[error("Txn: {0}")]
    Txn(String),
}

/// A cursor over a result's bytes that names where it ran out.
#[derive(Debug)]
pub(crate) struct ResultReader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> ResultReader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> ResultReader<'a> {
        ResultReader { bytes, at: 0 }
    }

    pub(crate) fn u8(&mut self, op: usize) -> Result<u8, ResultError> {
        let b = *self
            .bytes
            .get(self.at)
            .ok_or(ResultError::Truncated { at: self.at, op })?;
        self.at += 1;
        Ok(b)
    }

    pub(crate) fn u64(&mut self, op: usize) -> Result<u64, ResultError> {
        let b = self
            .bytes
            .get(self.at..self.at + 8)
            .ok_or(ResultError::Truncated { at: self.at, op })?;
        self.at += 8;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    pub(crate) fn finish(self) -> Result<(), ResultError> {
        match self.bytes.len() - self.at {
            0 => Ok(()),
            n => Err(ResultError::Trailing(n)),
        }
    }
}

/// The micro-ops of a committed transaction as it completed: `invoked` with
/// every read's value taken in order from `result` by `read(reader, op)`
/// (`op`: the micro-op's index, for errors); other micro-ops unchanged.
///
/// # Errors
/// [`ResultError`] from `read`, or if `result` holds bytes past the last read.
pub(crate) fn complete_reads(
    invoked: &[MicroOp],
    result: &[u8],
    mut read: impl FnMut(&mut ResultReader<'_>, usize) -> Result<Option<ReadValue>, ResultError>,
) -> Result<Vec<MicroOp>, ResultError> {
    let mut r = ResultReader::new(result);
    let mut out = Vec::with_capacity(invoked.len());
    for (i, op) in invoked.iter().enumerate() {
        out.push(match *op {
            MicroOp::Read { key, .. } => MicroOp::Read {
                key,
                value: read(&mut r, i)?,
            },
            ref other => other.clone(),
        });
    }
    r.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bad_args() {
        let ops = [
            MicroOp::Read {
                key: 3,
                value: None,
            },
            MicroOp::Append {
                key: 4,
                element: 99,
            },
            MicroOp::Write { key: 5, value: 7 },
        ];
        let mut b = Vec::new();
        encode(&ops, &mut b);
        assert_eq!(b.len(), 1 + 3 * TX_OP_BYTES);
        let d = decode(&b).unwrap();
        let kinds: Vec<_> = d
            .as_slice()
            .iter()
            .map(|o| (o.kind, o.key, o.value))
            .collect();
        assert_eq!(
            kinds,
            [
                (OpKind::Read, 3, 0),
                (OpKind::Append, 4, 99),
                (OpKind::Write, 5, 7)
            ]
        );
        assert!(decode(&[]).is_err());
        assert!(decode(&b[..b.len() - 1]).is_err());
        let mut bad = b.clone();
        bad[0] = 0;
        assert!(decode(&bad).is_err());
        bad[0] = 5;
        assert!(decode(&bad).is_err());
        let mut bad = b;
        bad[1] = 9;
        assert!(decode(&bad).is_err());
    }
}
