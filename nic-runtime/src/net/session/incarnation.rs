//! Which process of a peer a session talks to (restarted nodes
//! and NIC runtimes come back as newer incarnations).
//!
//! - **Always a named incarnation.** A session addresses one incarnation of
//!   its peer, never "any": at first the lowest the membership allows
//!   (the floor a configuration named, at least 1), then the newest it
//!   hears of. A process takes only packets addressed to it, so a packet
//!   number is only ever taken by the process it was meant for. (Packets
//!   once carried 0, "any incarnation", before the first was heard; a
//!   retransmission of such a packet could then take a number in the
//!   peer's new process — dropped there for its old epoch, yet numbered —
//!   and after the session was renewed its next packet, recovery evidence,
//!   was dropped as a duplicate and acknowledged: chaos list-append
//!   seed 103.)
//! - **Notices.** A process that gets a packet addressed to an earlier
//!   incarnation of its node drops it and owes its sender a standalone
//!   acknowledgement, which carries its own incarnation; so a session that
//!   guessed too old (the peer's NIC runtime restarted without a
//!   configuration naming it) learns the newer one within a round trip.
//!   A packet addressed to a later incarnation (this process is a
//!   predecessor) gets no notice.
//! - **Renewal.** Learning a newer incarnation — any packet from it, even
//!   one this node drops, or a configuration whose floor is above the one
//!   addressed — renews the session: numbering starts over both ways,
//!   packets held for the old process are dropped (they were for a process
//!   that is gone, and the new one never takes them), a failure is cleared,
//!   and the peer is reported by [`Sessions::take_renewed`] unless the
//!   session had carried nothing. The layers above then send again what
//!   the old process may have lost (recovery's step messages, a rebuild's
//!   query, a copy's stream: `crate::runtime`).

use super::{Session, Sessions, NODES_MAX};
use crate::Nanos;
use splitkv_layout::wire::NodeId;

// Renewed peers are kept in a u32 mask.
const _: () = assert!(NODES_MAX <= 32);

impl Sessions {
    /// A configuration names incarnation `incarnation` for `peer` (a live
    /// member, a restarted node being admitted, or the last incarnation of
    /// one configured out): the peer is at least that incarnation from now
    /// on (`Session::floor`). A session addressing an older one is renewed
    /// (see the module docs) and addresses `incarnation`. Ignored for a
    /// peer outside the cluster, this node, or incarnation 0 (none named).
    pub fn raise_floor(&mut self, peer: NodeId, incarnation: u32) {
        if peer as usize >= self.peers.len() || peer == self.node {
            return;
        }
        let s = &mut self.peers[peer as usize];
        s.floor = s.floor.max(incarnation);
        if incarnation > s.peer_incarnation {
            self.renew(peer, incarnation);
        }
    }

    /// The lowest incarnation of `peer` the membership named
    /// ([`Sessions::raise_floor`]; 0: none, or a peer outside the cluster).
    pub fn floor(&self, peer: NodeId) -> u32 {
        self.peers.get(peer as usize).map_or(0, |s| s.floor)
    }

    /// The incarnation of `peer` this node's packets are addressed to (≥ 1;
    /// 0 for a bad id or this node).
    pub fn addressed(&self, peer: NodeId) -> u32 {
        if peer == self.node {
            return 0;
        }
        self.peers
            .get(peer as usize)
            .map_or(0, |s| s.peer_incarnation)
    }

    /// The peers whose session was renewed since the last call, as a mask
    /// by node id (bit `n`: node `n`), cleared by the call. Only sessions
    /// that had carried packets either way, or had failed, are reported.
    pub fn take_renewed(&mut self) -> u32 {
        std::mem::take(&mut self.renewed)
    }

    /// `peer` is (at least) incarnation `incarnation`, newer than the one
    /// addressed: a fresh session with it (see the module docs). The
    /// membership's floor stays.
    pub(super) fn renew(&mut self, peer: NodeId, incarnation: u32) {
        let p = peer as usize;
        debug_assert!(incarnation > self.peers[p].peer_incarnation);
        let floor = self.peers[p].floor;
        let old = std::mem::replace(&mut self.peers[p], Session::addressing(incarnation, floor));
        if old.failed || old.next_seq != 0 || old.expected != 0 {
            self.renewed |= 1 << p;
            self.stats.sessions_reset += 1;
        }
        let dropped = self.drop_held(old.held);
        self.stats.messages_to_failed_dropped += dropped;
    }

    /// `peer` addressed an earlier incarnation of this node: a standalone
    /// acknowledgement (carrying this incarnation) is due at the next flush,
    /// without the ack delay, unless the session is failed (it sends
    /// nothing).
    pub(super) fn owe_notice(&mut self, peer: NodeId, now: Nanos) {
        let s = &mut self.peers[peer as usize];
        if !s.failed {
            s.ack_owed_since.get_or_insert(now);
            s.notice_owed = true;
        }
    }
}
