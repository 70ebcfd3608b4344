//! The send path of the sessions: numbering packets from the backlog into
//! the window, retransmission and silence timers, standalone acknowledgements
//! and handing packets to the transport (Dandelion §5.3; eRPC's go-back-N).

use super::{
    Session, SessionEvent, Sessions, FLUSH_GAP_GRACE_NS, RETRANSMIT_PACKETS_PER_TIMEOUT_MAX,
};
use crate::net::{PacketBuf, Transport, TxCommit, TxPacket, TX_BURST_MAX};
use crate::Nanos;
use splitkv_layout::wire::{NodeId, PacketHeader, PACKET_FLAG_ACK_ONLY, PACKET_HEADER_BYTES};
use std::collections::VecDeque;

/// What one peer's flush did.
#[derive(Debug, Clone, Copy, Default)]
struct Flushed {
    /// Handed something to the transport (or changed state).
    work: bool,
    /// The transport took less than it was offered.
    congested: bool,
}

impl Sessions {
    /// End of an iteration at `now`: for each peer, runs its timers (silence,
    /// retransmission), numbers packets from `backlogs[peer]` while its
    /// window has room, hands what is due to `transport` (in bursts of at
    /// most [`TX_BURST_MAX`]), sends a standalone acknowledgement where one
    /// has been owed for the ack delay, and then flushes the transport.
    /// `backlogs` is indexed by node id (the batcher's per-peer queues of
    /// sealed packets); a failed peer's queue is emptied and its messages
    /// counted as dropped. Returns whether anything was done.
    pub fn flush(
        &mut self,
        now: Nanos,
        transport: &mut dyn Transport,
        backlogs: &mut [VecDeque<PacketBuf>],
    ) -> bool {
        self.forgive_stall(now);
        let mut work = false;
        let mut congested = false;
        for (p, backlog) in backlogs.iter_mut().enumerate().take(self.peers.len()) {
            if p == self.node as usize {
                continue;
            }
            if self.check_timers(p, now) {
                work = true;
            }
            if self.peers[p].failed {
                if !backlog.is_empty() {
                    let dropped = self.drop_held(std::mem::take(backlog));
                    self.stats.messages_to_failed_dropped += dropped;
                    work = true;
                }
                continue;
            }
            if congested {
                continue;
            }
            self.number(p, now, backlog);
            let f = self.transmit(p, now, transport);
            work |= f.work;
            congested |= f.congested;
            if !congested {
                work |= self.ack_alone(p, now, transport);
            }
        }
        if work {
            transport.tx_flush(now);
        }
        work
    }

    /// Moves every timer on by how much the gap since the last flush exceeds
    /// [`FLUSH_GAP_GRACE_NS`]: this node was not running, so what its peers
    /// sent meanwhile is still unread (see the module docs, "Own stalls").
    fn forgive_stall(&mut self, now: Nanos) {
        let last = self.last_flush.replace(now);
        let Some(last) = last else {
            return;
        };
        let excess = now.saturating_sub(last).saturating_sub(FLUSH_GAP_GRACE_NS);
        if excess == 0 {
            return;
        }
        self.stats.stalls_forgiven += 1;
        for s in &mut self.peers {
            s.timer_from = s.timer_from.saturating_add(excess).min(now);
            s.silence_from = s.silence_from.saturating_add(excess).min(now);
        }
    }

    /// Silence and retransmission timers of peer `p`. True if one fired.
    fn check_timers(&mut self, p: usize, now: Nanos) -> bool {
        let cfg = self.cfg;
        let lossy = self.lossy;
        let s = &mut self.peers[p];
        if s.failed || s.unacked() == 0 {
            return false;
        }
        if now.saturating_sub(s.silence_from) >= cfg.silence_ns {
            s.failed = true;
            let held = std::mem::take(&mut s.held);
            // The incarnation declared failed is the one addressed; only a
            // newer one revives the session (`incarnation`'s renewal).
            *s = Session {
                failed: true,
                ..Session::addressing(s.peer_incarnation, s.floor)
            };
            let dropped = self.drop_held(held);
            self.stats.messages_to_failed_dropped += dropped;
            self.stats.sessions_failed += 1;
            self.raise(SessionEvent::PeerFailed { node: p as NodeId });
            return true;
        }
        if lossy && now.saturating_sub(s.timer_from) >= s.rto.timeout_ns(cfg.retransmit_timeout_ns)
        {
            // Go back N: everything unacknowledged goes again.
            s.rto.on_timeout();
            s.unsent = 0;
            s.resend_left = RETRANSMIT_PACKETS_PER_TIMEOUT_MAX;
            s.timer_from = now;
            return true;
        }
        false
    }

    /// Numbers packets from `backlog` into peer `p`'s window.
    fn number(&mut self, p: usize, now: Nanos, backlog: &mut VecDeque<PacketBuf>) {
        let window = self.cfg.window_packets as u32;
        let epoch = self.epoch;
        let s = &mut self.peers[p];
        while s.unacked() < window {
            let Some(mut b) = backlog.pop_front() else {
                break;
            };
            if s.unacked() == 0 {
                // We start waiting on the peer now.
                s.timer_from = now;
                s.silence_from = now;
                s.resend_left = RETRANSMIT_PACKETS_PER_TIMEOUT_MAX;
            }
            let seq = s.next_seq;
            s.next_seq = seq.wrapping_add(1);
            let (bytes, copied) = b.make_mut();
            PacketHeader::patch_session(bytes, s.peer_incarnation, epoch, seq, s.expected);
            self.stats.resend_copies += copied as u64;
            s.held.push_back(b);
        }
    }

    /// Hands peer `p`'s due packets to the transport: new ones, and after a
    /// timeout the unacknowledged ones again (at most
    /// [`RETRANSMIT_PACKETS_PER_TIMEOUT_MAX`] per timeout).
    fn transmit(&mut self, p: usize, now: Nanos, transport: &mut dyn Transport) -> Flushed {
        let mut f = Flushed::default();
        let (epoch, lossy) = (self.epoch, self.lossy);
        let s = &mut self.peers[p];
        while s.unsent < s.held.len() {
            let start = s.unsent;
            let mut n = (s.held.len() - start).min(TX_BURST_MAX);
            if start < s.sent_hwm {
                n = n.min(s.sent_hwm - start).min(s.resend_left);
                if n == 0 {
                    break; // retransmission cap reached until progress or the next timeout
                }
            }
            for i in start..start + n {
                // A packet sent before may still be held by the driver or
                // a receiver: then its header is patched in a heap copy.
                let (b, copied) = s.held[i].make_mut();
                let seq = PacketHeader::seq_of(b);
                PacketHeader::patch_session(b, s.peer_incarnation, epoch, seq, s.expected);
                self.stats.resend_copies += copied as u64;
            }
            let empty = PacketBuf::default();
            let mut burst = [TxCommit {
                dst: 0,
                buf: &empty,
            }; TX_BURST_MAX];
            for (slot, i) in burst.iter_mut().zip(start..start + n) {
                *slot = TxCommit {
                    dst: p as NodeId,
                    buf: &s.held[i],
                };
            }
            let took = transport.tx_commit(now, &burst[..n]);
            let resent = took.min(s.sent_hwm.saturating_sub(start));
            if lossy && took > resent {
                // The first packet sent for the first time may be timed.
                let seq = PacketHeader::seq_of(&s.held[start + resent]);
                s.rto.on_first_send(seq, now);
            }
            let bytes: usize = (start..start + took).map(|i| s.held[i].len()).sum();
            self.stats.packets_sent += took as u64;
            self.stats.retransmissions += resent as u64;
            self.stats.header_bytes_sent += (took * PACKET_HEADER_BYTES) as u64;
            self.stats.payload_bytes_sent += (bytes - took * PACKET_HEADER_BYTES) as u64;
            s.resend_left = s.resend_left.saturating_sub(resent);
            if took > 0 {
                f.work = true;
                s.ack_owed_since = None;
                s.notice_owed = false;
            }
            if lossy {
                s.unsent += took;
                s.sent_hwm = s.sent_hwm.max(s.unsent);
            } else {
                for b in s.held.drain(..took) {
                    if let Some(b) = b.into_heap() {
                        if self.spare.len() < super::SPARE_BUFFERS_MAX {
                            self.spare.push(b);
                        }
                    }
                }
            }
            if took < n {
                f.congested = true;
                break;
            }
        }
        f
    }

    /// Sends peer `p` a standalone acknowledgement if one has been owed for
    /// the ack delay, or at once if it is a notice (`incarnation`). True if
    /// one was sent.
    fn ack_alone(&mut self, p: usize, now: Nanos, transport: &mut dyn Transport) -> bool {
        let s = &mut self.peers[p];
        let Some(since) = s.ack_owed_since else {
            return false;
        };
        if !s.notice_owed && now.saturating_sub(since) < self.cfg.ack_delay_ns {
            return false;
        }
        let mut buf = [0u8; PACKET_HEADER_BYTES];
        PacketHeader {
            flags: PACKET_FLAG_ACK_ONLY,
            count: 0,
            cluster_id: self.cluster_id,
            src: self.node,
            dst: p as NodeId,
            src_incarnation: self.incarnation,
            dst_incarnation: s.peer_incarnation,
            epoch: self.epoch,
            seq: 0,
            ack: s.expected,
            len: 0,
        }
        .write(&mut buf);
        let pkt = [TxPacket {
            dst: p as NodeId,
            bytes: &buf,
        }];
        if transport.tx_burst(now, &pkt) == 1 {
            s.ack_owed_since = None;
            self.stats.acks_sent_alone += 1;
            self.stats.notices_sent += u64::from(std::mem::take(&mut s.notice_owed));
            true
        } else {
            false
        }
    }
}
