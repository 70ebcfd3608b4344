//! The host tables: the data store the NIC runtime reads by DMA.
//!
//! - [`robinhood`] is Xenic's Robinhood table (Xenic §4.1.2) laid out in a shared
//!   [`splitkv_layout::Region`] as `splitkv_layout::robinhood_layout` defines;
//! - [`dlht`] is Dandelion's lock-free DLHT (Dandelion §6), laid out as
//!   `splitkv_layout::dlht_layout` defines.
//!
//! [`Request`] is the host tables' one batch request type (Dandelion §6): a
//! batch ([`RobinhoodTable::batch`], [`dlht::Dlht::apply_batch`], or
//! [`HostTable::batch`] for either) prefetches every request's home location
//! first and then executes the requests in order, so their cache misses
//! overlap. (The DLHT also keeps [`dlht::Request`], with owned buffers and its
//! insert-only and update-only writes, for callers of its standalone API.)

pub mod dlht;
mod host_table;
pub mod robinhood;
mod sync;

pub use host_table::{HostTable, HostTableError, TableKind};

pub use robinhood::{RobinhoodError, RobinhoodStats, RobinhoodTable};
pub use splitkv_layout::robinhood_layout::{TableConfig, TableLayout};

use splitkv_layout::{Key, ObjectMeta};

/// What an executed [`Request::Upsert`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upserted {
    /// The key was absent and has been inserted.
    Inserted,
    /// The key was present; its metadata and value have been replaced.
    Updated,
    /// `only_if_newer` was set and the table already held this version or a
    /// newer one (the stored metadata is given); nothing was written.
    Stale(ObjectMeta),
}

/// One operation of a table batch (Dandelion §6, "BatchReqs"): the input fields
/// and a `result` field that the batch fills in. Requests of one batch execute
/// in slice order, so a batch has exactly the effect and the results of the same
/// operations issued one at a time.
///
/// `E` is the error type of a failed upsert: [`RobinhoodError`] for the Robinhood
/// table, [`dlht::DlhtError`] (or anything it converts into) for the DLHT,
/// [`HostTableError`] for [`HostTable::batch`].
#[derive(Debug)]
pub enum Request<'a, E = RobinhoodError> {
    /// Look `key` up. On a hit `value` holds the value (cleared and refilled;
    /// keep its capacity at the table's `value_bytes_max` to avoid allocating)
    /// and `result` the metadata; on a miss `value` is empty and `result` `None`.
    Get {
        /// Key to look up.
        key: Key,
        /// Output: the value on a hit, empty on a miss.
        value: &'a mut Vec<u8>,
        /// Output: the object's metadata on a hit.
        result: Option<ObjectMeta>,
    },
    /// Insert `key` or replace its metadata and value. With `only_if_newer`,
    /// an existing object is replaced only if its version is lower than
    /// `meta.version()` (the host log's apply rule: replays and duplicates are
    /// harmless).
    Upsert {
        /// Key to write.
        key: Key,
        /// New metadata (version and flags).
        meta: ObjectMeta,
        /// New value, at most the table's `value_bytes_max` bytes.
        value: &'a [u8],
        /// Skip the write if the stored version is ≥ `meta.version()`.
        only_if_newer: bool,
        /// Output: `None` until executed, then what happened or why it failed
        /// (a failed upsert leaves the table unchanged).
        result: Option<Result<Upserted, E>>,
    },
    /// Remove `key`.
    Remove {
        /// Key to remove.
        key: Key,
        /// Output: whether the key was present (`false` until executed).
        result: bool,
    },
}

impl<'a, E> Request<'a, E> {
    /// A Get of `key` whose value goes to `value`.
    pub fn get(key: Key, value: &'a mut Vec<u8>) -> Request<'a, E> {
        Request::Get {
            key,
            value,
            result: None,
        }
    }

    /// An unconditional upsert.
    pub fn upsert(key: Key, meta: ObjectMeta, value: &'a [u8]) -> Request<'a, E> {
        Request::Upsert {
            key,
            meta,
            value,
            only_if_newer: false,
            result: None,
        }
    }

    /// An upsert that only replaces an older version (see [`Request::Upsert`]).
    pub fn upsert_if_newer(key: Key, meta: ObjectMeta, value: &'a [u8]) -> Request<'a, E> {
        Request::Upsert {
            key,
            meta,
            value,
            only_if_newer: true,
            result: None,
        }
    }

    /// A removal of `key`.
    pub const fn remove(key: Key) -> Request<'a, E> {
        Request::Remove { key, result: false }
    }

    /// The key the request is about.
    #[inline]
    pub fn key(&self) -> &Key {
        match self {
            Request::Get { key, .. }
            | Request::Upsert { key, .. }
            | Request::Remove { key, .. } => key,
        }
    }
}
