//! The receive path of the sessions: identity checks (cluster, node,
//! epoch, incarnations, format), in-order acceptance by packet number, and
//! cumulative acknowledgements (Dandelion §5.3; eRPC's go-back-N). Every
//! dropped packet is counted by its reason ([`super::SessionDrops`]).

use super::{Sessions, RETRANSMIT_PACKETS_PER_TIMEOUT_MAX, SPARE_BUFFERS_MAX};
use crate::Nanos;
use splitkv_layout::wire::{decode_packet, Messages, PacketHeader};
use splitkv_layout::DecodeError;

/// Mutation switch `accept_after_gap`: a packet numbered past the next
/// expected one is taken (the gap fence removed). Killed by
/// `tests::a_lost_packet_is_resent_and_delivered_before_later_ones`.
/// Declared in `Cargo.toml` check-cfg.
const ACCEPT_AFTER_GAP: bool = cfg!(splitkv_mutation = "accept_after_gap");

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
        if !self.identity_ok(now, &h) {
            return None;
        }
        let p = h.src as usize;
        self.peers[p].heard = true;
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
            //
            // Not a safety fence, and nothing may rely on it as one: a
            // retransmission carries the sender's epoch at the time it is
            // resent (`send.rs`, `transmit`), so a message sent before an
            // epoch change can arrive stamped with the new epoch whatever
            // this check does
            // (`tests::a_retransmission_carries_the_epoch_it_is_resent_in`).
            // What keeps such a late message harmless is per message: a LOG
            // during a recovery epoch is refused (`runtime/dispatch.rs`);
            // a coordinator whose transaction recovery ended sends its
            // ABORT after every earlier message of it in the same in-order
            // session (`Coordinator::finish_recovered`), and the per-slot
            // generation fence refuses later copies (`protocol/server/txs.rs`);
            // recovery messages carry their own epoch; a NIC restart's
            // query from an older epoch is answered as one of the current
            // epoch (`on_query`). This check only drops and counts a
            // peer's stale traffic early (`SessionDrops::old_epoch`).
            self.stats.drops.old_epoch += 1;
            if ahead == 0 {
                s.expected = s.expected.wrapping_add(1);
                s.ack_owed_since.get_or_insert(now);
            }
            return None;
        }
        if ahead == 0 || (ahead > 0 && ACCEPT_AFTER_GAP) {
            s.expected = h.seq.wrapping_add(1);
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
            // A gap: taking this packet would make the cumulative ack cover
            // the missing ones, which the sender then frees and never
            // resends — their messages lost for good on a reliable session
            // (`tests::a_lost_packet_is_resent_and_delivered_before_later_ones`).
            self.stats.out_of_order_dropped += 1;
            None
        }
    }

    /// Cluster, sender, address, epoch and incarnation checks at `now`;
    /// renews the session of a peer that restarted (learned from any packet
    /// of its new incarnation of this node's epoch or later, even one
    /// addressed to another incarnation of this node; an older epoch's is
    /// dropped as such), and owes a notice to a peer that addressed an earlier
    /// incarnation of this node. False (counted) to drop.
    fn identity_ok(&mut self, now: Nanos, h: &PacketHeader) -> bool {
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
        let addressed = self.peers[h.src as usize].peer_incarnation;
        if h.src_incarnation < addressed {
            d.stale_incarnation += 1;
            return false;
        }
        if h.src_incarnation > addressed {
            if h.epoch < self.epoch {
                // A newer process of the peer that has not taken this
                // epoch (not admitted yet, or configured out and still
                // sending): nothing of it is taken, and the session is not
                // renewed by it; the configuration that admits it renews
                // the session (`raise_floor`).
                d.old_epoch += 1;
                return false;
            }
            self.renew(h.src, h.src_incarnation);
        }
        if h.dst_incarnation != self.incarnation {
            self.stats.drops.wrong_incarnation += 1;
            if h.dst_incarnation < self.incarnation {
                self.owe_notice(h.src, now);
            }
            return false;
        }
        if self.peers[h.src as usize].failed {
            self.stats.drops.failed_peer += 1;
            return false;
        }
        true
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
                if let Some(b) = b.into_heap() {
                    if self.spare.len() < SPARE_BUFFERS_MAX {
                        self.spare.push(b);
                    }
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
