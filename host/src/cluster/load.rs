//! Bulk load through the API: each `(Key, value)` row goes onto every replica
//! the placement names (primary and backups), written straight into the host
//! tables while no component runs — before a run or between runs.
//!
//! The load bypasses the protocol, so it also tells each primary how many rows
//! of its shard it wrote ([`Room::add_loaded`](splitkv_nic::protocol::server::Room::add_loaded)),
//! and this module computes the per-shard quotas the primaries reserve room
//! against (the room rule for inserts into a full table; the rule is in
//! `splitkv_nic::protocol::server::Room`): [`node_keys_max`] is what one node's
//! table guarantees, [`shard_quotas`] splits it among the shards each node
//! hosts.

use crate::node::NodeConfig;
use crate::table::dlht::{BINS_MAX_DEFAULT, LOAD_KEYS_PER_BIN_MAX_DEN, LOAD_KEYS_PER_BIN_MAX_NUM};
use crate::table::{HostTable, HostTableError, TableKind};
use splitkv_layout::robinhood_layout::ROBINHOOD_VALUE_INLINE_BYTES_MAX;
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
    /// Rows loaded (each on all its replicas this process holds; rows no
    /// node here replicates are skipped, not counted).
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

/// Keys the host table of a node built from `cfg` guarantees to hold, the
/// amount its shards' quotas split ([`shard_quotas`]):
///
/// * **Robinhood**: its configured `capacity_keys` (the layout gives it at
///   least 10/9 as many home slots, plus the overflow pool). When values may
///   go out of line, every key may hold one value-heap block and an update
///   takes its new block before freeing the old one, so the heap caps it at
///   `value_blocks − 1` keys (the default heap, `capacity_keys` plus 1/8, never
///   does).
/// * **DLHT**: it grows instead of refusing (Dandelion §6, non-blocking
///   resize), up to its bin bound at the load bound: [`BINS_MAX_DEFAULT`] ×
///   [`LOAD_KEYS_PER_BIN_MAX_NUM`] / [`LOAD_KEYS_PER_BIN_MAX_DEN`] keys (the
///   bound of tables built by [`HostTable::new`]; memory runs out first).
pub fn node_keys_max(cfg: &NodeConfig) -> u64 {
    match cfg.table_kind {
        TableKind::Robinhood => {
            let keys = cfg.table.capacity_keys as u64;
            if cfg.table.value_bytes_max <= ROBINHOOD_VALUE_INLINE_BYTES_MAX {
                return keys;
            }
            let blocks = cfg.table.value_blocks_resolved().unwrap_or(usize::MAX) as u64;
            keys.min(blocks.saturating_sub(1))
        }
        TableKind::Dlht => {
            (BINS_MAX_DEFAULT / LOAD_KEYS_PER_BIN_MAX_DEN * LOAD_KEYS_PER_BIN_MAX_NUM) as u64
        }
    }
}

/// The quota of each shard (by shard id = primary's node id), given what
/// each node's table guarantees (`node_keys`, by node id): every node's
/// guarantee is split evenly among the `replication` shards it hosts, and a
/// shard gets the smallest share over its replicas, so the quotas of the
/// shards a node hosts sum to at most its guarantee.
///
/// # Panics
/// If `node_keys` does not have one entry per node of `placement`.
pub fn shard_quotas(placement: &Placement, node_keys: &[u64]) -> Vec<u64> {
    assert_eq!(node_keys.len(), placement.nodes(), "one capacity per node");
    let r = placement.replication() as u64;
    (0..placement.nodes() as NodeId)
        .map(|s| {
            placement
                .shard_replicas(s)
                .map(|n| node_keys[n as usize] / r)
                .min()
                .unwrap_or(0)
        })
        .collect()
}

/// Loads `rows` into `tables` (node `ids[i]`'s table is `tables[i]`) on every
/// replica of each key among them; see [`ClusterParts::load`](super::ClusterParts::load).
/// `primary_rows[i]` counts the rows written at `tables[i]` as their primary,
/// also when the load fails part way.
pub(crate) fn load_rows<V: AsRef<[u8]>>(
    placement: Placement,
    ids: &[NodeId],
    tables: &mut [&mut HostTable],
    rows: impl IntoIterator<Item = (Key, V)>,
    primary_rows: &mut [u64],
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
        let mut held = false;
        for (n, table) in tables.iter_mut().enumerate() {
            let node = ids[n];
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
            held = true;
            if node == placement.primary(&key) {
                primary_rows[n] += 1;
            }
        }
        if held {
            done.rows += 1;
            if done.rows.is_multiple_of(LOAD_PROGRESS_ROWS) {
                progress(done);
            }
        }
    }
    progress(done);
    Ok(done)
}
