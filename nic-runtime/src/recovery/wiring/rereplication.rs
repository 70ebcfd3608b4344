//! The runtime's side of re-replication ([`crate::recovery::rereplication`]):
//! copies begin at a recovery epoch's `Resume`, are abandoned by a new
//! configuration, read their snapshots through the driver's host scan, and
//! report the end of this node's own copy to the membership layer.

use crate::recovery::rereplication::{CopyStats, ShardSnapshot, SnapshotError};
use crate::runtime::NicRuntime;

impl NicRuntime {
    /// Takes the snapshot of every copy that waits for one (this node is
    /// the primary of a shard with a copying replica, and the epoch
    /// resumed) from `host`, the host table as it is now. Drivers call it
    /// after [`NicRuntime::run_iteration`]; it does nothing (and does not
    /// scan) when no copy waits. Returns how many snapshots were taken.
    ///
    /// # Errors
    /// [`SnapshotError::TooLarge`] when a shard exceeds
    /// [`crate::recovery::rereplication::COPY_OBJECTS_MAX`] objects (that copy is
    /// given up and counted).
    pub fn serve_copy_reads(
        &mut self,
        host: &mut dyn ShardSnapshot,
    ) -> Result<usize, SnapshotError> {
        if !self.copies.needs_snapshot() || self.recovery.paused() {
            return Ok(0);
        }
        let placement = self.io.placement;
        self.copies.take_snapshots(&placement, host)
    }

    /// Whether some copy waits for its snapshot ([`NicRuntime::serve_copy_reads`]).
    pub fn needs_copy_reads(&self) -> bool {
        self.copies.needs_snapshot() && !self.recovery.paused()
    }

    /// The epoch in which this node, being copied, got every shard of its
    /// ring position from their primaries, once: the membership layer then
    /// asks for a configuration in which it is a replica
    /// (`Configuration::caught_up`).
    pub fn take_caught_up(&mut self) -> Option<u32> {
        let epoch = self.copies.take_caught_up();
        if epoch.is_some() {
            self.actions.copy_caught_up_ns = self.io.now;
        }
        epoch
    }

    /// Whether this node is being copied and has not finished.
    pub fn copying(&self) -> bool {
        !self.copies.joining().is_empty() && self.copies.done() != self.copies.joining()
    }

    /// Whether a copy runs here as source.
    pub fn sourcing_copies(&self) -> bool {
        self.copies.sourcing()
    }

    /// Re-replication counters.
    pub fn copy_stats(&self) -> CopyStats {
        self.copies.stats()
    }
}
