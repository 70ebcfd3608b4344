//! Bulk load through the API: each `(Key, value)` row goes onto every replica
//! the placement names (primary and backups), written straight into the host
//! tables while no component runs — before a run or between runs.

use crate::table::{HostTable, HostTableError};
use splitkv_layout::wire::NodeId;
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
use splitkv_nic::Placement;

/// Rows between two calls of a load's progress callback.
pub const LOAD_PROGRESS_ROWS: u64 = 65_536;

/// Version a loaded row starts at.
pub const LOADED_VERSION: u64 = 1;

/// How far a load got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadProgress {
    /// Rows loaded (each on all its replicas).
    pub rows: u64,
    /// Copies written, over all replicas.
    pub copies: u64,
}

/// Why a row could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The value is longer than the tables store.
    #[error("row {key:?}: value of {len} B exceeds the table's maximum of {max} B")]
    ValueTooLarge {
        /// The row's key.
        key: Key,
        /// Value length in bytes.
        len: usize,
        /// The tables' `value_bytes_max`.
        max: usize,
    },
    /// The key is already in a replica's table (a load only creates rows).
    #[error("row {key:?} is already present on node {node}")]
    KeyExists {
        /// The row's key.
        key: Key,
        /// The replica that holds it.
        node: NodeId,
    },
    /// A replica's table has no room for the row.
    #[error("row {key:?}: the table of node {node} is full ({source})")]
    TableFull {
        /// The row's key.
        key: Key,
        /// The full replica.
        node: NodeId,
        /// What the table said.
        source: HostTableError,
    },
}

/// Loads `rows` into `tables` (by node id) on every replica of each key;
/// see [`ClusterParts::load`](super::ClusterParts::load).
pub(crate) fn load_rows<V: AsRef<[u8]>>(
    placement: Placement,
    tables: &mut [&mut HostTable],
    rows: impl IntoIterator<Item = (Key, V)>,
    mut progress: impl FnMut(LoadProgress),
) -> Result<LoadProgress, LoadError> {
    let meta = ObjectMeta::new(LOADED_VERSION, ObjectFlags::empty());
    let max = tables
        .iter()
        .map(|t| t.value_bytes_max())
        .min()
        .unwrap_or(0);
    let mut done = LoadProgress::default();
    let mut scratch = Vec::new();
    for (key, value) in rows {
        let value = value.as_ref();
        if value.len() > max {
            return Err(LoadError::ValueTooLarge {
                key,
                len: value.len(),
                max,
            });
        }
        for (n, table) in tables.iter_mut().enumerate() {
            let node = n as NodeId;
            if !placement.is_replica(node, &key) {
                continue;
            }
            if table.get(&key, &mut scratch).is_some() {
                return Err(LoadError::KeyExists { key, node });
            }
            table
                .upsert(key, meta, value)
                .map_err(|source| match source {
                    HostTableError::DlhtValueSize(len) => {
                        LoadError::ValueTooLarge { key, len, max }
                    }
                    source => LoadError::TableFull { key, node, source },
                })?;
            done.copies += 1;
        }
        done.rows += 1;
        if done.rows.is_multiple_of(LOAD_PROGRESS_ROWS) {
            progress(done);
        }
    }
    progress(done);
    Ok(done)
}
