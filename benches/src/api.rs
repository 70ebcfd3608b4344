//! How a workload's transactions reach the store: `splitkv_workloads::api`,
//! re-exported here.

pub use splitkv_workloads::api::{procedure_slot, ApiError, TxApi, TXN_SLOT};

// The client side names the built-in `Txn` procedure's id without the NIC
// runtime: it must be the runtime's.
const _: () =
    assert!(splitkv_workloads::TXN_PROCEDURE_ID == splitkv_nic::procedure::txn::TXN_PROCEDURE_ID);
