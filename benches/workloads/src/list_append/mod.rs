//! The client side of Elle's list-append workload (Kingsbury & Alvaro,
//! VLDB'20 §4): the micro-op codec ([`codec`]), the generator
//! ([`generator`]) and the completion of a committed transaction's reads
//! from its result ([`complete`]). The shipped procedure that runs the
//! micro-ops is the node side (`splitkv_bench::list_append::ListAppendTxn`).

pub mod codec;
pub mod generator;

use codec::{ResultError, MICRO_OPS_PER_TX_MAX};
use splitkv_check::history::{MicroOp, ReadValue};
use splitkv_layout::host_nic::RESULT_BYTES_MAX;

pub use generator::{ListAppendConfig, ListAppendGenerator};

/// Name of the list-append procedure (what an application resolves at connect).
pub const LIST_APPEND_PROCEDURE: &str = "list-append";

/// Table id of the lists.
pub const LIST_TABLE: u32 = 20;

/// Most elements in one list: a key is retired after this many appends.
pub const LIST_ELEMENTS_MAX: usize = 30;

/// Largest stored list in bytes: the `value_bytes_max` every node of a
/// list-append cluster is configured with.
pub const LIST_VALUE_BYTES_MAX: usize = LIST_ELEMENTS_MAX * 8;

/// Encoded bytes of one read in a result: the element count, then the elements.
pub const READ_RESULT_BYTES_MAX: usize = 1 + LIST_VALUE_BYTES_MAX;

const _: () = assert!(LIST_VALUE_BYTES_MAX <= splitkv_layout::VALUE_BYTES_MAX);
const _: () = assert!(LIST_ELEMENTS_MAX <= u8::MAX as usize);
// Every read of a transaction fits in its result.
const _: () = assert!(MICRO_OPS_PER_TX_MAX * READ_RESULT_BYTES_MAX <= RESULT_BYTES_MAX);

/// The micro-ops of a committed transaction as it completed: `invoked` with
/// every read's list taken from `result` (the node's procedure writes each read as its element count, then the elements).
///
/// # Errors
/// [`ResultError`] if `result` does not hold exactly one list per read.
pub fn complete(invoked: &[MicroOp], result: &[u8]) -> Result<Vec<MicroOp>, ResultError> {
    codec::complete_reads(invoked, result, |r, i| {
        let n = r.u8(i)? as usize;
        let list = (0..n).map(|_| r.u64(i)).collect::<Result<Vec<_>, _>>()?;
        Ok(Some(ReadValue::List(list)))
    })
}
