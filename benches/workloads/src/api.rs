//! How a workload's transactions reach the store ([`TxApi`]): as the
//! workload's own shipped procedures (Xenic §4.2.2), registered on every node;
//! or as one-shot transactions in the shape of etcd's `Txn`
//! (`splitkv_layout::app::txn`), which the node runs as its built-in
//! procedure (`splitkv_nic::procedure::txn`) with no workload code compiled
//! into it; or, later, as interactive transactions (`TxCtx`).
//!
//! | api | register | Smallbank | list-append |
//! |---|---|---|---|
//! | `shipped` | the `register` procedure | the six procedures | the `list-append` procedure |
//! | `txn` | one `Txn` per transaction, a read before a write as a compare (`splitkv_bench::register_txn`) | a read `Txn`, then a write `Txn` comparing the versions read ([`crate::smallbank::txn`]) | refused ([`ApiError::ListAppendTxn`]) |
//! | `interactive` | refused ([`ApiError::InteractiveNotBuilt`]) | refused | refused |

use crate::TXN_PROCEDURE_ID;

/// How a workload's transactions reach the store (module docs). Its names
/// ([`TxApi::name`]) are the same for a binary's users and in a deployed
/// run's workload spec.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum TxApi {
    /// The workload's registered procedures, shipped to the coordinator's
    /// NIC runtime (Xenic §4.2.2): today's path.
    #[default]
    Shipped,
    /// One-shot transactions (etcd's `Txn` shape) through the built-in
    /// procedure at `TXN_PROCEDURE_ID`: no workload code in the node.
    Txn,
    /// Interactive transactions (`TxCtx`): not built yet, refused.
    Interactive,
}

/// Why a workload cannot run through the api asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// [`TxApi::Interactive`] for any workload.
    #[error("interactive transactions are not built yet (use the shipped or txn api)")]
    InteractiveNotBuilt,
    /// [`TxApi::Txn`] for list-append.
    #[error(
        "list-append cannot run through the one-shot Txn: an append is a read-modify-write of \
         the list, and a Txn names a key once per branch and has no append operation, so one \
         Txn cannot append (use the shipped api)"
    )]
    ListAppendTxn,
}

impl TxApi {
    /// Its lower-case name (`shipped`, `txn`, `interactive`).
    pub fn name(self) -> &'static str {
        match self {
            TxApi::Shipped => "shipped",
            TxApi::Txn => "txn",
            TxApi::Interactive => "interactive",
        }
    }

    /// Whether this is the default, [`TxApi::Shipped`] (left out of a
    /// deployed run's workload spec, so older nodes decode it).
    pub fn is_shipped(&self) -> bool {
        *self == TxApi::Shipped
    }

    /// Checks that the api is built at all.
    ///
    /// # Errors
    /// [`ApiError::InteractiveNotBuilt`] for [`TxApi::Interactive`].
    pub fn check_built(self) -> Result<TxApi, ApiError> {
        match self {
            TxApi::Interactive => Err(ApiError::InteractiveNotBuilt),
            api => Ok(api),
        }
    }
}

/// The load generator's commit-counter slot of procedure id `procedure`:
/// a registered procedure's own id (below [`crate::tx::PROCEDURES_MAX`]),
/// and the last slot, [`TXN_SLOT`], for the built-in `Txn` procedure (whose id
/// sits at the top of the id space). `None` for any other id.
pub fn procedure_slot(procedure: u32) -> Option<usize> {
    if procedure == TXN_PROCEDURE_ID {
        Some(TXN_SLOT)
    } else {
        Some(procedure as usize).filter(|&p| p < TXN_SLOT)
    }
}

/// The commit-counter slot of the built-in `Txn` procedure: the last of
/// [`crate::tx::PROCEDURES_MAX`] (so a workload registers at most
/// `PROCEDURES_MAX - 1` procedures of its own; Smallbank registers 6).
pub const TXN_SLOT: usize = crate::tx::PROCEDURES_MAX - 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_keep_registered_ids_and_put_the_txn_last() {
        assert_eq!(procedure_slot(0), Some(0));
        assert_eq!(procedure_slot(5), Some(5));
        assert_eq!(procedure_slot(TXN_SLOT as u32), None);
        assert_eq!(procedure_slot(TXN_PROCEDURE_ID), Some(TXN_SLOT));
        assert_eq!(procedure_slot(1000), None);
    }

    #[test]
    fn interactive_is_refused_and_shipped_is_the_default() {
        assert_eq!(TxApi::default(), TxApi::Shipped);
        assert_eq!(
            TxApi::Interactive.check_built(),
            Err(ApiError::InteractiveNotBuilt)
        );
        assert_eq!(TxApi::Txn.check_built(), Ok(TxApi::Txn));
        let json = serde_json::to_string(&TxApi::Txn).unwrap();
        assert_eq!(json, "\"txn\"");
    }
}
