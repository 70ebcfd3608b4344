//! Copy reads on a running cluster (re-replication's snapshot;
//! [`NicRuntime::serve_copy_reads`]). A node's NIC runtime and host worker
//! may live on different polling threads, and the host table belongs to the
//! worker, so the scan is handed over: the NIC runtime's thread asks for a
//! scan when a copy waits for its snapshot, the worker's thread scans its
//! table into an owned buffer between two of its passes (no data race: the
//! table is only ever touched by its own thread), and the NIC runtime's
//! thread serves the copies from that buffer on a later pass. Neither
//! thread waits for the other: each only looks at a flag on its hot path.
//!
//! A scan taken after the ask is at least as new as the host was at the
//! runtime's `Resume` (the runtime asks only once its epoch resumed), which
//! is what the copy needs: a snapshot newer than `Resume` is fine, the
//! receiver applies a record only if it is newer than what it holds
//! ("newest wins", `nic-runtime/src/recovery/rereplication`). An answer is tagged
//! with the copy generation it was asked for ([`CopyStats::copies_begun`]
//! when asked): a scan asked for copies a new configuration abandoned is
//! never served to the copies begun after it.
//!
//! Bounds: one scan per node at a time, holding at most the host table's
//! objects (its capacity, `ClusterBuilder::capacity_keys`); a copy cannot
//! take more than [`COPY_OBJECTS_MAX`](splitkv_nic::recovery::rereplication::COPY_OBJECTS_MAX)
//! of them per shard. Allocated per copy, never per packet.

use crate::log::HostWorker;
use crate::table::HostTable;
use splitkv_layout::{Key, ObjectMeta};
use splitkv_nic::NicRuntime;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// A host table's objects as they were when scanned: keys, metadata and
/// the offset and length of each value in `values`.
#[derive(Debug, Default)]
struct Scan {
    objects: Vec<(Key, ObjectMeta, usize, usize)>,
    values: Vec<u8>,
}

impl Scan {
    /// Scans every object of `table`.
    fn of(table: &HostTable) -> Scan {
        let mut scan = Scan {
            objects: Vec::with_capacity(table.len()),
            values: Vec::new(),
        };
        table.for_each(|k, meta, v| {
            scan.objects.push((k, meta, scan.values.len(), v.len()));
            scan.values.extend_from_slice(v);
        });
        scan
    }

    fn for_each(&self, f: &mut dyn FnMut(Key, ObjectMeta, &[u8])) {
        for &(k, meta, at, len) in &self.objects {
            f(k, meta, &self.values[at..at + len]);
        }
    }
}

/// The scan of one node handed between its two threads.
#[derive(Debug, Default)]
struct Handoff {
    /// Copy generation the NIC runtime asked a scan for.
    asked: Option<u64>,
    /// A scan taken for that generation, not served yet.
    taken: Option<(u64, Scan)>,
}

/// One node's copy-read handoff (an entry of the cluster's shared state).
#[derive(Debug, Default)]
pub(crate) struct CopyReads {
    /// Set when a scan is asked for and not taken yet: the worker's
    /// thread checks only this on its hot path.
    wanted: AtomicBool,
    handoff: Mutex<Handoff>,
}

impl CopyReads {
    /// On the NIC runtime's thread, after its pass: when a copy waits for
    /// its snapshot, serves it from a scan taken for its generation, or
    /// asks the worker's thread for one. Returns whether it served.
    pub(crate) fn serve(&self, nic: &mut NicRuntime) -> bool {
        if !nic.needs_copy_reads() {
            return false;
        }
        let generation = nic.copy_stats().copies_begun;
        let mut h = self.handoff.lock().unwrap_or_else(|e| e.into_inner());
        match h.taken.take() {
            Some((g, scan)) if g == generation => {
                drop(h);
                // A shard too large to copy is counted by the runtime
                // (`CopyStats::failed`); the others are served.
                let _ =
                    nic.serve_copy_reads(&mut |f: &mut dyn FnMut(_, _, &[u8])| scan.for_each(f));
                true
            }
            _ => {
                if h.asked != Some(generation) {
                    h.asked = Some(generation);
                    self.wanted.store(true, Ordering::Release);
                }
                false
            }
        }
    }

    /// On the host worker's thread, after its pass: takes the scan asked
    /// for, if any. Returns whether it scanned.
    pub(crate) fn scan_if_asked(&self, worker: &HostWorker) -> bool {
        if !self.wanted.swap(false, Ordering::AcqRel) {
            return false;
        }
        let Some(generation) = self.handoff.lock().unwrap_or_else(|e| e.into_inner()).asked else {
            return false;
        };
        // Scanned without the lock: the NIC runtime's thread never waits
        // on a scan.
        let scan = Scan::of(worker.table());
        let mut h = self.handoff.lock().unwrap_or_else(|e| e.into_inner());
        if h.asked == Some(generation) {
            h.taken = Some((generation, scan));
            // Asked again for this generation once served, if still needed.
            h.asked = None;
        }
        true
    }
}

/// Serves the copies waiting at `nic` directly from `table` (both on the
/// caller's thread: a stopped cluster's drain, [`super::ClusterParts`]).
/// Returns whether it served.
pub(crate) fn serve_direct(nic: &mut NicRuntime, table: &HostTable) -> bool {
    if !nic.needs_copy_reads() {
        return false;
    }
    let _ = nic.serve_copy_reads(&mut |f: &mut dyn FnMut(_, _, &[u8])| table.for_each(f));
    true
}
