//! Scripted control of the network, for tests that replay a trace or force
//! one interleaving: hold a link (it delivers nothing), list what it holds,
//! deliver one chosen packet next, release it; start or heal a partition and
//! clog a link at chosen times. Each action is an event of the trace.

use super::link::{InFlight, Partition};
use super::SimNetwork;
use crate::trace::EventKind;
use splitkv_layout::wire::NodeId;
use splitkv_nic::Nanos;
use std::collections::BinaryHeap;

/// A packet waiting on a link, as a script sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldPacket {
    /// Network-wide packet number (the trace's `#seq`).
    pub seq: u64,
    /// When it would be delivered on an open link.
    pub due: Nanos,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

impl SimNetwork {
    fn link_index(&self, src: NodeId, dst: NodeId) -> Option<usize> {
        let n = self.lock().nodes;
        ((src as usize) < n && (dst as usize) < n).then(|| src as usize * n + dst as usize)
    }

    /// Holds (`on`) or releases link `src → dst` at `now`: a held link
    /// delivers nothing (its packets wait, still counted in flight) except
    /// what [`SimNetwork::deliver_held`] picks. Unknown nodes are ignored.
    pub fn hold(&self, src: NodeId, dst: NodeId, on: bool, now: Nanos) {
        let Some(li) = self.link_index(src, dst) else {
            return;
        };
        let mut net = self.lock();
        net.links[li].held = on;
        net.event(now, EventKind::Hold { src, dst, on });
    }

    /// The packets waiting on link `src → dst`, in the order an open link
    /// would deliver them.
    pub fn held(&self, src: NodeId, dst: NodeId) -> Vec<HeldPacket> {
        let Some(li) = self.link_index(src, dst) else {
            return Vec::new();
        };
        let net = self.lock();
        let mut v: Vec<&InFlight> = net.links[li].queue.iter().collect();
        v.sort_by(|a, b| b.cmp(a));
        v.into_iter()
            .map(|p| HeldPacket {
                seq: p.seq.0,
                due: p.due.0,
                bytes: p.bytes.clone(),
            })
            .collect()
    }

    /// Takes packet `seq` off link `src → dst` (held or not) and makes it
    /// the next packet `dst` receives, ahead of everything else. False if
    /// the link has no such packet.
    pub fn deliver_held(&self, src: NodeId, dst: NodeId, seq: u64) -> bool {
        let Some(li) = self.link_index(src, dst) else {
            return false;
        };
        let mut net = self.lock();
        let q = std::mem::take(&mut net.links[li].queue);
        let mut kept = Vec::with_capacity(q.len());
        let mut found = None;
        for p in q.into_vec() {
            if p.seq.0 == seq && found.is_none() {
                found = Some(p);
            } else {
                kept.push(p);
            }
        }
        net.links[li].queue = BinaryHeap::from(kept);
        match found {
            Some(p) => {
                net.forced[dst as usize].push_back((src, seq, p.bytes));
                net.stats.forced_deliveries += 1;
                true
            }
            None => false,
        }
    }

    /// Starts a partition at `now`, healing at `until`: the nodes of `side`
    /// (bit mask of node ids) are cut from the rest, both ways or, if
    /// `one_way`, only for packets leaving `side`. Replaces any active one.
    pub fn partition(&self, side: u64, one_way: bool, now: Nanos, until: Nanos) {
        self.lock().set_partition(now, side, one_way, until);
    }

    /// Heals the active partition at `now`, if any.
    pub fn heal(&self, now: Nanos) {
        let mut net = self.lock();
        let active: Option<Partition> = net.partition.take();
        if active.is_some() {
            net.stats.heals += 1;
            net.event(now, EventKind::Heal);
        }
    }

    /// Clogs link `src → dst` from `now` until `until` (it delivers nothing
    /// meanwhile; nothing is lost). Unknown nodes are ignored.
    pub fn clog(&self, src: NodeId, dst: NodeId, now: Nanos, until: Nanos) {
        if self.link_index(src, dst).is_some() {
            self.lock().set_clog(now, src, dst, until);
        }
    }
}
