//! The list-append workload of Jepsen's Elle (Kingsbury & Alvaro, VLDB'20 §4):
//! transactions of 1–[`MICRO_OPS_PER_TX_MAX`] micro-ops (their shape:
//! [`crate::history_gen::TxShape`]), each a read of a key or
//! an append of a unique `u64` element to the list stored at a key. Because
//! every element is unique, each read names exactly the appends it saw, which
//! is what lets the strict-serializability checker (`splitkv_check::checker`)
//! recover write-write, write-read and read-write dependencies.
//!
//! - [`ListAppendTxn`] is the shipped procedure (Xenic §4.2.2): its plan puts
//!   read keys in the read set and appended keys in the write set; `execute`
//!   runs the micro-ops in order on the values read, so a read after the
//!   transaction's own append sees it (internal consistency), and returns what
//!   every read saw in its result.
//! - [`generator`] draws transactions (seeded) over a small window of active
//!   keys and retires a key after a bounded number of appends, as Elle's
//!   generator does, so a list never outgrows [`LIST_VALUE_BYTES_MAX`], the
//!   value limit the cluster's nodes are configured with.
//!
//! A list is stored as its elements, 8 bytes little-endian each, in append
//! order; the empty list (every key's initial row) is the empty value. An
//! append that would make a list longer than [`LIST_ELEMENTS_MAX`] aborts the
//! transaction ([`ListAppendError::ListFull`], seen by the client as a user
//! abort) rather than truncating the list.

use crate::micro_txn;
use codec::{OpKind, TxOps, MICRO_OPS_PER_TX_MAX};
use splitkv_nic::{ProcError, Procedure, ReadView, TxPlan, UserAbort, WriteSet};

pub use splitkv_workloads::list_append::{
    codec, complete, generator, ListAppendConfig, ListAppendGenerator, LIST_ELEMENTS_MAX,
    LIST_TABLE, LIST_VALUE_BYTES_MAX, READ_RESULT_BYTES_MAX,
};

/// Why a list-append transaction cannot run; the procedure turns each into a
/// user abort (the client records a `fail`), never a partial write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListAppendError {
    /// The append would make the list longer than [`LIST_ELEMENTS_MAX`].
    #[error("list at key {key} already holds {LIST_ELEMENTS_MAX} elements")]
    ListFull {
        /// The key.
        key: u64,
    },
    /// A stored value is not a list (length not a multiple of 8, or too long).
    #[error("value of key {key} is not a list ({len} B)")]
    NotAList {
        /// The key.
        key: u64,
        /// Its length in bytes.
        len: usize,
    },
    /// The transaction writes a register (a register micro-op in a list workload).
    #[error("list-append transactions only read and append")]
    NotListOp,
}

/// One list a transaction works on, on the stack.
#[derive(Debug, Clone, Copy)]
struct WorkList {
    key: u64,
    elements: [u64; LIST_ELEMENTS_MAX],
    len: usize,
    appended: bool,
}

impl WorkList {
    fn load(key: u64, stored: Option<&[u8]>) -> Result<WorkList, ListAppendError> {
        let mut w = WorkList {
            key,
            elements: [0; LIST_ELEMENTS_MAX],
            len: 0,
            appended: false,
        };
        let bytes = stored.unwrap_or(&[]);
        if !bytes.len().is_multiple_of(8) || bytes.len() > LIST_VALUE_BYTES_MAX {
            return Err(ListAppendError::NotAList {
                key,
                len: bytes.len(),
            });
        }
        for (i, e) in bytes.chunks_exact(8).enumerate() {
            w.elements[i] = u64::from_le_bytes(e.try_into().expect("8 bytes"));
        }
        w.len = bytes.len() / 8;
        Ok(w)
    }
}

/// Runs `ops` on the lists `stored` returns (`None`: absent, the empty list):
/// appends each read's elements to `result` (count byte, then 8 bytes each)
/// and calls `write(key, list bytes)` once per appended key, after every
/// micro-op succeeded. Allocates nothing.
///
/// # Errors
/// [`ListAppendError`]; nothing was written then.
pub fn run_txn<'a>(
    ops: &TxOps,
    stored: impl Fn(u64) -> Option<&'a [u8]>,
    result: &mut Vec<u8>,
    mut write: impl FnMut(u64, &[u8]),
) -> Result<(), ListAppendError> {
    let mut lists: [Option<WorkList>; MICRO_OPS_PER_TX_MAX] = [None; MICRO_OPS_PER_TX_MAX];
    for op in ops.as_slice() {
        let slot = match lists
            .iter()
            .position(|l| l.is_some_and(|l| l.key == op.key))
        {
            Some(i) => i,
            None => {
                let i = lists.iter().position(Option::is_none).expect("one per op");
                lists[i] = Some(WorkList::load(op.key, stored(op.key))?);
                i
            }
        };
        let list = lists[slot].as_mut().expect("loaded");
        match op.kind {
            OpKind::Read => {
                result.push(list.len as u8);
                for e in &list.elements[..list.len] {
                    result.extend_from_slice(&e.to_le_bytes());
                }
            }
            OpKind::Append if list.len == LIST_ELEMENTS_MAX => {
                return Err(ListAppendError::ListFull { key: op.key })
            }
            OpKind::Append => {
                list.elements[list.len] = op.value;
                list.len += 1;
                list.appended = true;
            }
            OpKind::Write => return Err(ListAppendError::NotListOp),
        }
    }
    let mut bytes = [0u8; LIST_VALUE_BYTES_MAX];
    for l in lists.iter().flatten().filter(|l| l.appended) {
        for (i, e) in l.elements[..l.len].iter().enumerate() {
            bytes[i * 8..i * 8 + 8].copy_from_slice(&e.to_le_bytes());
        }
        write(l.key, &bytes[..l.len * 8]);
    }
    Ok(())
}

/// The list-append transaction as a shipped procedure (Xenic §4.2.2). Register
/// it once per node; the generator's transactions name it by its id.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListAppendTxn;

impl Procedure for ListAppendTxn {
    fn name(&self) -> &'static str {
        splitkv_workloads::list_append::LIST_APPEND_PROCEDURE
    }

    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        let wrong = "list-append has no register writes";
        micro_txn::plan_ops(args, plan, LIST_TABLE, OpKind::Append, wrong)
    }

    fn execute(
        &self,
        args: &[u8],
        reads: &ReadView,
        writes: &mut WriteSet,
        result: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        micro_txn::execute_ops(args, reads, writes, result, LIST_TABLE, |o, s, r, w| {
            run_txn(o, s, r, w)
        })
    }
}

/// A stored list value as its elements.
///
/// # Errors
/// [`ListAppendError::NotAList`] (naming `key`) if `bytes` is not a list.
pub fn decode_list(key: u64, bytes: &[u8]) -> Result<Vec<u64>, ListAppendError> {
    let w = WorkList::load(key, Some(bytes))?;
    Ok(w.elements[..w.len].to_vec())
}

#[cfg(test)]
mod tests;
