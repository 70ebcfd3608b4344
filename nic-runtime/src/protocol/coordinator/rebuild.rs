//! What a coordinator tells a peer whose NIC runtime restarted alone
//! (the NIC restart's rebuild; the design is argued in `recovery::restart`):
//! the locks its transactions hold there live only in that NIC's index (Xenic
//! §4.2.1 (a)), so they are given back from here, with each transaction's phase
//! and whether it still waits for that node's answer.

use super::{bit, Coordinator, Phase};
use crate::protocol::Io;
use splitkv_layout::wire::{CoordPhase, LockEntry, NodeId, PeerTx};
use splitkv_layout::TxId;

impl Coordinator {
    /// Appends to `txs` every transaction in flight here that touches node
    /// `asker` — it holds locks there, was logged there, or its current
    /// phase waits for `asker`'s answer — and to `locks` each key it holds
    /// locked there: the write-set keys `asker` is primary of once `asker`
    /// answered its EXECUTE `Ok`, only the written ones in the COMMIT phase
    /// (the others were unlocked at commit), none once `asker` acknowledged
    /// the COMMIT (its locks were released there). At most
    /// [`TX_INFLIGHT_MAX`](super::TX_INFLIGHT_MAX) entries go to `txs`.
    pub fn rebuild_report(
        &self,
        io: &Io,
        asker: NodeId,
        txs: &mut Vec<PeerTx>,
        locks: &mut Vec<LockEntry>,
    ) {
        let b = bit(asker);
        for (slot, t) in self.txs.iter().enumerate() {
            let phase = match t.phase {
                Phase::Free => continue,
                Phase::Execute => CoordPhase::Execute,
                Phase::Validate => CoordPhase::Validate,
                Phase::Log | Phase::AbortLog => CoordPhase::Log,
                Phase::Commit => CoordPhase::Commit,
                Phase::Get => CoordPhase::Get,
                Phase::Lock => CoordPhase::Lock,
                Phase::Replicate => CoordPhase::Replicate,
                Phase::Unlock | Phase::Readable => CoordPhase::Unlock,
            };
            // An abort after LOG waits for an ABORT acknowledgement, which
            // the deadline's resend recovers, not for a LOG answer.
            let waiting = t.pending.sent() & b != 0
                && t.answered & b == 0
                && t.pending != 0
                && t.phase != Phase::AbortLog;
            let committed_there = t.phase == Phase::Commit && t.answered & b != 0;
            let locked = t.locked & b != 0 && !committed_there;
            if !waiting && !locked && t.logged & b == 0 {
                continue;
            }
            let tx_id = TxId::new(io.node, slot, t.gen);
            txs.push(PeerTx {
                tx_id,
                phase,
                waiting,
            });
            if !locked {
                continue;
            }
            let placement = io.placement;
            for k in t
                .plan
                .writes
                .iter()
                .filter(|k| placement.primary(k) == asker)
            {
                let written = t.writes.iter().any(|(w, _)| w == k);
                if t.phase != Phase::Commit || written {
                    locks.push(LockEntry { tx_id, key: *k });
                }
            }
        }
    }
}

impl Coordinator {
    /// A fresh coordinator (after a NIC restart) numbers every free slot's next
    /// transaction above `generation`, the newest generation of this node's
    /// transaction ids that a peer's per-slot fence (or this node's own) has
    /// seen (`Server::newest_generation`): after a NIC restart, carried by
    /// each rebuild report; after a process restart, the newest over every
    /// live node, carried by the recovery leader's decisions of the epoch
    /// that admits it (and of every epoch after). Peers refuse a request
    /// whose generation is not above the one their fence holds for its
    /// slot, so ids that started over at 1 would be refused as late until
    /// they passed the lost ones (hundreds of `Rejected` outcomes per
    /// restart), and an id used twice could meet the first one's records in
    /// a host log or a peer's recovery evidence (a stale COMMIT record
    /// would decide the new transaction). A slot in use keeps its number
    /// (its transaction is this process's); a slot never moves back
    /// (generations compare with wrap-around).
    pub fn number_above(&mut self, generation: u32) {
        for t in &mut self.txs {
            if t.phase == Phase::Free && crate::protocol::generation_newer(generation, t.gen) {
                t.gen = generation;
            }
        }
    }
}
