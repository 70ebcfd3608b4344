//! The table a node keeps its data in: either kind, behind one interface, and
//! how the NIC runtime reaches it by DMA.

use super::dlht::dma::DlhtDma;
use super::dlht::{Dlht, DlhtError, DLHT_VALUE_INLINE_BYTES_MAX};
use super::robinhood::{RobinhoodError, RobinhoodTable};
use super::Request;
use splitkv_layout::robinhood_layout::TableConfig;
use splitkv_layout::{Key, ObjectMeta};
use splitkv_nic::dma::HostMemory;
use splitkv_nic::index::HostTableLayout;
pub use splitkv_nic::index::TableKind;
use std::sync::Arc;

/// A host-table operation that failed; the table is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostTableError {
    /// From the Robinhood table.
    #[error(transparent)]
    Robinhood(#[from] RobinhoodError),
    /// From the DLHT.
    #[error(transparent)]
    Dlht(#[from] DlhtError),
    /// The DLHT keeps values over 8 bytes out of line, where the NIC runtime
    /// cannot read them by DMA yet.
    #[error(
        "with the DLHT, values are limited to {DLHT_VALUE_INLINE_BYTES_MAX} B (asked for {0} B)"
    )]
    DlhtValueSize(usize),
}

/// A node's host table. (One per node, so the size difference between the
/// variants does not matter.)
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum HostTable {
    /// Robinhood (single writer: the host worker).
    Robinhood(RobinhoodTable),
    /// DLHT (shared with its DMA adapter).
    Dlht(Arc<Dlht>),
}

impl HostTable {
    /// A table of `kind` sized by `config` (the DLHT uses only its capacity and
    /// value bound).
    pub fn new(kind: TableKind, config: &TableConfig) -> Result<HostTable, HostTableError> {
        Ok(match kind {
            TableKind::Robinhood => HostTable::Robinhood(RobinhoodTable::new(config)?),
            TableKind::Dlht => {
                if config.value_bytes_max > DLHT_VALUE_INLINE_BYTES_MAX {
                    return Err(HostTableError::DlhtValueSize(config.value_bytes_max));
                }
                HostTable::Dlht(Arc::new(Dlht::with_capacity(config.capacity_keys)))
            }
        })
    }

    /// The value of `key` into `value_out` (cleared first) and its metadata.
    pub fn get(&self, key: &Key, value_out: &mut Vec<u8>) -> Option<ObjectMeta> {
        match self {
            HostTable::Robinhood(t) => t.get(key, value_out),
            HostTable::Dlht(t) => t.get(key, value_out),
        }
    }

    /// Inserts or replaces `key`; true if inserted.
    pub fn upsert(
        &mut self,
        key: Key,
        meta: ObjectMeta,
        value: &[u8],
    ) -> Result<bool, HostTableError> {
        Ok(match self {
            HostTable::Robinhood(t) => t.upsert(key, meta, value)?,
            HostTable::Dlht(t) => t.upsert(key, meta, value)?,
        })
    }

    /// Executes a batch of requests (Dandelion §6) on either table: first a
    /// software prefetch of every request's home slots (Robinhood,
    /// [`RobinhoodTable::batch`]) or bins (DLHT, [`Dlht::apply_batch`]), then
    /// the requests in slice order, each one's result stored in it. A failed
    /// upsert (its `result` holds the table's error) does not stop the
    /// requests after it.
    pub fn batch(&mut self, reqs: &mut [Request<'_, HostTableError>]) {
        match self {
            HostTable::Robinhood(t) => t.apply_batch(reqs),
            HostTable::Dlht(t) => t.apply_batch(reqs),
        }
    }

    /// Objects stored.
    pub fn len(&self) -> usize {
        match self {
            HostTable::Robinhood(t) => t.len(),
            HostTable::Dlht(t) => t.len(),
        }
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls `f` for every object.
    pub fn for_each(&self, f: impl FnMut(Key, ObjectMeta, &[u8])) {
        match self {
            HostTable::Robinhood(t) => t.for_each(f),
            HostTable::Dlht(t) => t.for_each(f),
        }
    }

    /// Host memory the NIC runtime's DMA engine reads, and what it will find there.
    pub fn dma(&self) -> (Arc<dyn HostMemory>, HostTableLayout) {
        match self {
            HostTable::Robinhood(t) => (
                Arc::new(t.region().clone()),
                HostTableLayout::Robinhood(*t.layout()),
            ),
            HostTable::Dlht(t) => (Arc::new(DlhtDma::new(t.clone())), HostTableLayout::Dlht),
        }
    }

    /// The largest value this table stores (inline or, in the Robinhood table,
    /// out of line) where the NIC runtime can read it by DMA, in bytes.
    pub fn value_bytes_max(&self) -> usize {
        match self {
            HostTable::Robinhood(t) => t.layout().value_bytes_max(),
            HostTable::Dlht(_) => DLHT_VALUE_INLINE_BYTES_MAX,
        }
    }
}
