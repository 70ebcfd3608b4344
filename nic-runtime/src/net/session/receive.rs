//! The receive path of the sessions: identity checks (cluster, node,
//! epoch, incarnations, format), in-order acceptance by packet number, and
//! cumulative acknowledgements (Dandelion §5.3; eRPC's go-back-N). Every
//! dropped packet is counted by its reason ([`super::SessionDrops`]).

use super::{Sessions, RETRANSMIT_PACKETS_PER_TIMEOUT_MAX, SPARE_BUFFERS_MAX};
use crate::Nanos;
use splitkv_layout::wire::{decode_packet, Messages, NodeId, PacketHeader};
use splitkv_layout::DecodeError;

impl Sessions {
    /// Checks one received packet at `now` against its session and returns
    /// its header and messages (borrowing `bytes`, zero copy) if it is the
    /// next data packet of that session; `None` if it was dropped (counted by
    /// reason) or was a standalone acknowledgement. Its acknowledgement field
    /// is applied either way once the packet's identity checks pass.
    pub fn receive<'a>(
        &mut self,
        now: Nanos,
        bytes: &'a [u8],
    ) -> Option<(PacketHeader, Messages<'a>)> {
        let (h, msgs) = match decode_packet(bytes) {
            Ok(x) => x,
            Err(DecodeError::BadTag {
                what: "packet format version",
                ..
            }) => {
                self.stats.drops.bad_version += 1;
                return None;
            }
            Err(_) => {
                self.stats.drops.malformed += 1;
                return None;
            }
        };
        if !self.identity_ok(&h) {
            return None;
        }
        let p = h.src as usize;
        if !self.apply_ack(p, h.ack, now) {
            self.stats.drops.bad_ack += 1;
            return None;
        }
        let s = &mut self.peers[p];
        s.silence_from = now;
        if h.is_ack_only() {
            self.stats.acks_received_alone += 1;
            return None;
        }
        let ahead = h.seq.wrapping_sub(s.expected) as i32;
        if h.epoch < self.epoch {
            // Sent before the peer learned our epoch: dropped, but its
            // number is taken, so the session goes on without a gap (on a
            // transport that keeps no copies there would be no resend).
            self.stats.drops.old_epoch += 1;
            if ahead == 0 {
                s.expected = s.expected.wrapping_add(1);
                s.ack_owed_since.get_or_insert(now);
            }
            return None;
        }
        if ahead == 0 {
            s.expected = s.expected.wrapping_add(1);
            s.ack_owed_since.get_or_insert(now);
            self.stats.packets_received += 1;
            self.stats.messages_received += h.count as u64;
            Some((h, msgs))
        } else if ahead < 0 {
            // Our ack was lost or is late: acknowledge at the next flush.
            s.ack_owed_since = Some(now.saturating_sub(self.cfg.ack_delay_ns));
            self.stats.duplicates_dropped += 1;
            None
        } else {
            self.stats.out_of_order_dropped += 1;
            None
        }
    }

    /// Cluster, sender, address, epoch and incarnation checks; resets the
    /// session of a peer that restarted. False (counted) to drop.
    fn identity_ok(&mut self, h: &PacketHeader) -> bool {
        let d = &mut self.stats.drops;
        if h.cluster_id != self.cluster_id {
            d.other_cluster += 1;
            return false;
        }
        if h.src as usize >= self.peers.len() || h.src == self.node {
            d.stranger += 1;
            return false;
        }
        if h.dst != self.node {
            d.misaddressed += 1;
            return false;
        }
        if h.dst_incarnation != 0 && h.dst_incarnation != self.incarnation {
            d.wrong_incarnation += 1;
            return false;
        }
        let known = self.peers[h.src as usize].peer_incarnation;
        if h.src_incarnation == 0 || h.src_incarnation < known {
            d.stale_incarnation += 1;
            return false;
        }
        if h.src_incarnation > known {
            if known != 0 {
                self.reset(h.src);
            }
            self.peers[h.src as usize].peer_incarnation = h.src_incarnation;
        }
        if self.peers[h.src as usize].failed {
            self.stats.drops.failed_peer += 1;
            return false;
        }
        true
    }

    /// The membership admitted incarnation `incarnation` of `peer` (a
    /// restarted node rejoining, issue 12): a session with an older
    /// incarnation is reset (fresh numbering both ways, no longer failed)
    /// and packets to it carry the new incarnation, so they reach the new
    /// process even before it speaks; so is a session that sent packets to
    /// a peer whose incarnation it never learned. A fresh session is left
    /// open to any incarnation. Nothing changes for a peer outside
    /// the cluster or an incarnation not newer than the one known.
    pub fn admit_incarnation(&mut self, peer: NodeId, incarnation: u32) {
        if peer as usize >= self.peers.len() || peer == self.node {
            return;
        }
        self.raise_floor(peer, incarnation);
        let s = &self.peers[peer as usize];
        // A failed session is never fresh: its failure recorded the
        // incarnation it declared failed (at least 1, `check_timers`), even
        // when nothing was heard and the failure cleared its numbering
        // (chaos list-append seed 72: node 1's NIC restarted, queried node 0
        // just before node 0 crashed, declared it failed 30 ms later, and
        // kept dropping everything to node 0's admitted new process, its
        // recovery evidence included, until the leader was fenced).
        let known = s.peer_incarnation;
        debug_assert!(!s.failed || known != 0, "a failure records its incarnation");
        let fresh = known == 0 && s.next_seq == 0;
        // A fresh session (nothing heard, nothing sent) stays open to any
        // incarnation: the admitted one is only a lower bound, the peer's
        // NIC runtime may have restarted since (a newer incarnation, issue
        // 12), and packets addressed to the older one would be dropped.
        if incarnation > known && !fresh {
            // A session that sent to a peer it never heard from (0: not
            // known) is reset too: its packets went to an older incarnation
            // (a NIC restarted just before its peer crashed, issue 12).
            self.reset(peer);
            self.peers[peer as usize].peer_incarnation = incarnation;
        }
    }

    /// A configuration names incarnation `incarnation` for `peer` (a live
    /// member, or the last incarnation of one configured out): the peer is
    /// at least that incarnation from now on (`Session::floor`). Nothing
    /// else changes; ignored for a peer outside the cluster.
    pub fn raise_floor(&mut self, peer: NodeId, incarnation: u32) {
        if let Some(s) = self.peers.get_mut(peer as usize) {
            s.floor = s.floor.max(incarnation);
        }
    }

    /// The lowest incarnation of `peer` the membership named
    /// ([`Sessions::raise_floor`]; 0: none, or a peer outside the cluster).
    pub fn floor(&self, peer: NodeId) -> u32 {
        self.peers.get(peer as usize).map_or(0, |s| s.floor)
    }

    /// A fresh session with `peer` (it restarted): numbering starts over both
    /// ways; packets held for its previous incarnation are dropped. The
    /// membership's floor stays.
    fn reset(&mut self, peer: NodeId) {
        let floor = self.peers[peer as usize].floor;
        let s = std::mem::take(&mut self.peers[peer as usize]);
        self.peers[peer as usize].floor = floor;
        let dropped = self.drop_held(s.held);
        self.stats.messages_to_failed_dropped += dropped;
        self.stats.sessions_reset += 1;
    }

    /// Applies a cumulative acknowledgement from `peer`: false if it
    /// acknowledges packets never handed to the transport.
    fn apply_ack(&mut self, p: usize, ack: u32, now: Nanos) -> bool {
        let lossy = self.lossy;
        let s = &mut self.peers[p];
        let n = ack.wrapping_sub(s.acked);
        if n == 0 {
            return true;
        }
        if n > s.sent_unacked() {
            return false;
        }
        s.acked = ack;
        s.timer_from = now;
        s.resend_left = RETRANSMIT_PACKETS_PER_TIMEOUT_MAX;
        if s.rto.on_ack(ack, now).is_some() {
            self.stats.rtt_samples += 1;
        }
        if lossy {
            let n = n as usize;
            for b in s.held.drain(..n) {
                if self.spare.len() < SPARE_BUFFERS_MAX {
                    self.spare.push(b);
                }
            }
            // A go-back-N resend may not have reached the acknowledged packets
            // yet (`unsent` below `n`): the next to send is then the first kept.
            s.unsent = s.unsent.saturating_sub(n);
            s.sent_hwm -= n;
        }
        true
    }
}
