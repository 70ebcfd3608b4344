//! One directed link's state (its packets in flight, hold and clog) and the
//! active partition.

use splitkv_layout::wire::NodeId;
use splitkv_nic::Nanos;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A packet on a link, ordered so the heap's top is the earliest due (then
/// the earliest sent).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct InFlight {
    pub(crate) due: Reverse<Nanos>,
    pub(crate) seq: Reverse<u64>,
    pub(crate) bytes: Vec<u8>,
}

/// One directed link (sender → receiver).
#[derive(Debug, Default)]
pub(crate) struct Link {
    pub(crate) queue: BinaryHeap<InFlight>,
    /// Due time of the last in-order packet: packets that are not reordered
    /// never arrive before it.
    pub(crate) last_due: Nanos,
    /// Held by a script: delivers nothing until released.
    pub(crate) held: bool,
    /// Clogged: delivers nothing before this time.
    pub(crate) clogged_until: Nanos,
}

impl Link {
    /// Whether the link may deliver at `now`.
    pub(crate) fn open(&self, now: Nanos) -> bool {
        !self.held && self.clogged_until <= now
    }

    /// The head packet's (due, seq) if it is due by `now` and the link is open.
    pub(crate) fn due_head(&self, now: Nanos) -> Option<(Nanos, u64)> {
        if !self.open(now) {
            return None;
        }
        self.queue
            .peek()
            .filter(|p| p.due.0 <= now)
            .map(|p| (p.due.0, p.seq.0))
    }
}

/// An active partition: `side` (bit mask of node ids) against the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Partition {
    pub(crate) side: u64,
    pub(crate) one_way: bool,
    pub(crate) until: Nanos,
}

impl Partition {
    /// Whether packets from `src` to `dst` are cut.
    pub(crate) fn cuts(&self, src: NodeId, dst: NodeId) -> bool {
        let s = self.side >> src & 1 == 1;
        let d = self.side >> dst & 1 == 1;
        s != d && (!self.one_way || s)
    }
}
