//! Re-replication (restoring the replication degree): a shard that lost a
//! replica gets a new backup — a survivor that was no replica of it
//! (`Configuration::without`, when the cluster has more nodes than the
//! replication degree), or a node that rejoins after a crash, a new incarnation
//! holding nothing — which is brought up to date while transactions keep
//! running, and only then counts as a replica, restoring the replication
//! degree. The protocol follows `tla/Rereplicate.tla` (whose `JoinStart` takes
//! any live non-replica):
//!
//! - **Join start.** The membership's configuration names the node a
//!   *joining* backup of the shard (`ShardReplicas::joining`). Every node takes it through a
//!   recovery epoch ([`crate::recovery`]): every transaction begun before it
//!   is decided and applied at its replicas' hosts before anyone resumes.
//!   From its `Resume` on, a node serves the epoch's placement, in which the
//!   joining node is the last backup of the shards it joins
//!   ([`crate::placement::Roles`]): every new write's LOG also goes to it,
//!   and the coordinator's commit point waits for its acknowledgement
//!   (the spec's `JoinStart` and `Forward`). It is never primary.
//! - **Snapshot.** At its `Resume` each shard's primary takes a snapshot of
//!   the shard from its host table (a host-side scan,
//!   [`crate::NicRuntime::serve_copy_reads`]). The `Resume` command is only
//!   taken once the host applied every record appended so far, and no
//!   transaction that started before the epoch is still writing, so the
//!   snapshot covers every write whose LOG did not go to the new backup
//!   (the spec's `SnapshotWaits`).
//! - **Stream.** The snapshot goes to the copying node in chunks of at most
//!   [`COPY_CHUNK_OBJECTS_MAX`] objects and [`COPY_CHUNK_BYTES_MAX`] bytes,
//!   each as a LOG then a COMMIT of a copy transaction (ids in coordinator
//!   slots past [`crate::protocol::coordinator::TX_INFLIGHT_MAX`], one chunk
//!   in flight per slot, [`COPY_SLOTS_MAX`] slots). The receiver appends them
//!   to its host log like any write, and its host applies a record only if
//!   it is newer than what its table holds, so a snapshot object never
//!   overwrites a newer forwarded write and versions never decrease there
//!   (the spec's `CatchUp`, "newest wins").
//! - **Catch-up.** Once every chunk is acknowledged the primary sends
//!   [`CopyMsg::Done`](splitkv_layout::wire::CopyMsg) with the copy's epoch.
//!   When the joining node has a `Done` of the current epoch from the
//!   primary of each shard it joins, it reports itself caught up
//!   ([`crate::NicRuntime::take_caught_up`]); the membership then issues a
//!   configuration in which it is a replica (`Configuration::caught_up`),
//!   ranked after every earlier replica, so no primary changes.
//! - **Abandon.** A new configuration abandons every copy in progress (its
//!   recovery epoch pauses the node); the next `Resume` starts them again
//!   from scratch, and a `Done` of an older epoch does not count.
//!
//! Not on the hot path: a snapshot is taken once per copy into one buffer
//! bounded by [`COPY_OBJECTS_MAX`]; chunks are built in place in the
//! runtime's message writer.

mod source;

pub use source::{Copies, CopyStats, ShardSnapshot, SnapshotError};

/// Most objects one snapshot holds (a shard larger than this cannot be
/// copied: the copy is given up and counted, [`CopyStats::failed`]).
pub const COPY_OBJECTS_MAX: usize = 1 << 22;
/// Most objects in one chunk (one copy transaction): as many as one
/// transaction may write, so a chunk's host-log entry fits the receiver's
/// bound like any transaction's (`log_entry_bytes_max`).
pub const COPY_CHUNK_OBJECTS_MAX: usize = splitkv_layout::TX_VALUES_MAX;
/// Most key and value bytes in one chunk (a chunk holds at least one object).
pub const COPY_CHUNK_BYTES_MAX: usize = 8 * 1024;
/// Copy-transaction slots per source node: chunks in flight at once (its
/// slots of the transaction-id slot space, [`crate::slots`]).
pub use crate::slots::COPY_SLOTS_MAX;
/// Most copies one node runs as source at once (one per shard it is
/// primary of and node being copied).
pub const COPIES_MAX: usize = crate::placement::NODES_MAX;
/// Most times one chunk is sent again after a refusal before its copy is
/// abandoned (counted, [`CopyStats::abandoned`]).
pub const COPY_CHUNK_RETRIES_MAX: u32 = 1_000;
/// Chunks one source node may send per epoch (the low 16 bits of a copy
/// transaction's generation; the high ones are the epoch).
pub const COPY_CHUNKS_PER_EPOCH_MAX: u32 = u16::MAX as u32;

const _: () = assert!(COPY_CHUNK_BYTES_MAX < splitkv_layout::wire::MESSAGE_BYTES_MAX / 2);
