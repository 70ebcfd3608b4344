//! Reliable sessions below the batching layer (Dandelion §5.3; in the manner
//! of eRPC, NSDI'19): one session per peer node, go-back-N.
//!
//! - **Numbering.** Every data packet to a peer gets the next packet number of
//!   that session. The receiver accepts only the number it expects next, so
//!   the protocol sees each message exactly once and in per-session order;
//!   duplicates (numbers below) and out-of-order packets (numbers above) are
//!   dropped and counted.
//! - **Window.** At most [`SessionConfig::window_packets`] numbered packets
//!   are unacknowledged at once; sealed packets beyond it wait in the
//!   batcher's per-peer backlog ([`super::batch`], bound
//!   [`SessionConfig::backlog_packets`]).
//! - **Acknowledgements** are cumulative and ride on every packet to the peer;
//!   with no reverse traffic, a standalone ack-only packet (which consumes no
//!   number) leaves [`SessionConfig::ack_delay_ns`] after the first packet
//!   that needs acknowledging.
//! - **Retransmission.** After the session's retransmission timeout
//!   without progress, everything unacknowledged is sent again, at most
//!   [`RETRANSMIT_PACKETS_PER_TIMEOUT_MAX`] packets per timeout. The timeout
//!   adapts per session in the manner of RFC 6298 ([`rto`]): it starts at
//!   [`SessionConfig::retransmit_timeout_ns`], follows the smoothed
//!   round-trip time plus four times its variation (never sampling a
//!   retransmitted packet: Karn's rule), doubles on each timeout until a
//!   fresh sample, and stays between the configured value (its minimum:
//!   see [`rto`] for the measurement that chose this) and
//!   [`RETRANSMIT_TIMEOUT_MAX_NS`]. On a
//!   transport that cannot lose packets ([`super::Transport::is_lossy`] is
//!   false) no copies are kept and nothing is retransmitted; numbering, acks
//!   and checks still run. A packet the batcher filled in a buffer the
//!   transport lent ([`super::txbuf`]) is kept as a reference to that
//!   buffer, not a copy, and sent again by reference; only when the driver
//!   or a receiver still holds it is its header patched in a heap copy
//!   ([`SessionStats::resend_copies`]).
//! - **Own stalls.** Time during which this node did not run is not held
//!   against its peers: when more than [`FLUSH_GAP_GRACE_NS`] passed
//!   between two flushes (the polling thread was descheduled, as on an
//!   oversubscribed core), the retransmission and silence timers are moved
//!   on by the excess, since the acknowledgements that arrived meanwhile
//!   still wait unread in the transport. Without this, a node process that
//!   lost its core for a scheduler slice retransmitted on resuming packets
//!   its peers had long acknowledged. Measured together with the adaptive
//!   timeout (three node processes on two shared cores at load 7,
//!   Smallbank 5 s, three alternating runs, retransmissions before → after):
//!   batching on 4,263 / 8,041 / 2,879 → 145 / 655 / 926; batching off
//!   78,877 / 72,177 / 21,643 → 1,668 / 1,888 / 23,473. Each was a duplicate
//!   at the peer; what remains is a peer off its core for longer than the
//!   timeout, which no estimate from past round trips foresees.
//! - **Failure.** A peer silent for [`SessionConfig::silence_ns`] while we
//!   wait on it (unacknowledged packets outstanding) is declared failed: a
//!   [`SessionEvent::PeerFailed`] is raised, and what is queued for it, or
//!   queued later, is dropped and counted.
//! - **Identity.** Packets from another cluster, a node outside the
//!   configuration, an older epoch, an unknown format version, addressed to
//!   another node or to another incarnation of this node, from an older
//!   incarnation of the peer, or that do not decode, are dropped, each
//!   counted by its reason ([`SessionDrops`]).
//! - **Incarnations** ([`incarnation`]). Every packet names the incarnation
//!   of the peer it is for, and only that process takes it (and its
//!   number). A session addresses the newest incarnation it knows of: the
//!   one it heard, or the lowest the membership allows (its floor), never
//!   "any". A packet addressed to an earlier incarnation of this node is
//!   answered by a standalone acknowledgement (a notice) that carries this
//!   one. Learning a newer incarnation (a packet or notice from it, a
//!   configuration that names it) renews the session: fresh numbering both
//!   ways, packets held for the old process dropped, and the peer reported
//!   ([`Sessions::take_renewed`]) so the layers above send again what that
//!   process may have lost.
//!
//! The receive path is [`Sessions::receive`]; the send path (numbering,
//! timers, standalone acks, transmission) is [`Sessions::flush`] in
//! `send`. Time is passed in; nothing here reads a clock.

pub mod incarnation;
mod receive;
pub mod rto;
mod send;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_rto;

pub use rto::{RETRANSMIT_BACKOFFS_MAX, RETRANSMIT_TIMEOUT_MAX_NS};

use super::PacketBuf;
use crate::placement::NODES_MAX;
use crate::Nanos;
use splitkv_layout::wire::{NodeId, PacketHeader};
use std::collections::VecDeque;

/// Default window: numbered, unacknowledged packets per session.
pub const SESSION_WINDOW_PACKETS_DEFAULT: usize = 64;
/// Largest window a configuration may ask for.
pub const SESSION_WINDOW_PACKETS_MAX: usize = 4096;
/// Default bound of the per-peer backlog of sealed packets waiting for the
/// window (see [`super::batch::Batcher`] for why it suffices).
pub const SESSION_BACKLOG_PACKETS_DEFAULT: usize = 8192;
/// Default delay before a standalone acknowledgement (20 µs).
pub const ACK_DELAY_NS_DEFAULT: Nanos = 20_000;
/// Default initial retransmission timeout: time without progress on a
/// session with unacknowledged packets before they are all sent again
/// (5 ms, eRPC's), until round-trip samples adapt it ([`rto`]).
pub const RETRANSMIT_TIMEOUT_NS_DEFAULT: Nanos = 5_000_000;
/// Gap between two flushes beyond which this node is taken to have been
/// stalled (descheduled) and its timers are moved on by the excess (1 ms:
/// far above one polling iteration, below a scheduler slice).
pub const FLUSH_GAP_GRACE_NS: Nanos = 1_000_000;
/// Most packets sent again per retransmission timeout and session.
pub const RETRANSMIT_PACKETS_PER_TIMEOUT_MAX: usize = 128;
/// Default silence after which a peer we wait on is declared failed (3 s).
pub const SESSION_SILENCE_NS_DEFAULT: Nanos = 3_000_000_000;
/// Most undrained session events; older ones are kept, newer ones dropped
/// and counted ([`SessionStats::events_dropped`]). Two per node: a failure
/// and, after a reset, another.
pub const SESSION_EVENTS_MAX: usize = 2 * NODES_MAX;

/// Limits and timers of every session of one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionConfig {
    /// Numbered, unacknowledged packets per session (1..=[`SESSION_WINDOW_PACKETS_MAX`]).
    pub window_packets: usize,
    /// Sealed packets waiting for the window, per peer (≥ 1).
    pub backlog_packets: usize,
    /// Delay before a standalone acknowledgement, in ns.
    pub ack_delay_ns: Nanos,
    /// Initial retransmission timeout, in ns (> 0); see [`rto`].
    pub retransmit_timeout_ns: Nanos,
    /// Silence after which a peer we wait on is failed, in ns (> 0).
    pub silence_ns: Nanos,
}

impl Default for SessionConfig {
    fn default() -> SessionConfig {
        SessionConfig {
            window_packets: SESSION_WINDOW_PACKETS_DEFAULT,
            backlog_packets: SESSION_BACKLOG_PACKETS_DEFAULT,
            ack_delay_ns: ACK_DELAY_NS_DEFAULT,
            retransmit_timeout_ns: RETRANSMIT_TIMEOUT_NS_DEFAULT,
            silence_ns: SESSION_SILENCE_NS_DEFAULT,
        }
    }
}

/// A session configuration that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionConfigError {
    /// A limit or timer out of its range.
    #[error("session {field} is {value}, must be {range}")]
    OutOfRange {
        /// Which field.
        field: &'static str,
        /// The value given.
        value: u64,
        /// The allowed range, in words.
        range: &'static str,
    },
}

impl SessionConfig {
    /// Checks every field against its range.
    ///
    /// # Errors
    /// [`SessionConfigError::OutOfRange`] naming the first bad field.
    pub fn validate(&self) -> Result<(), SessionConfigError> {
        let bad = |field, value: u64, range| {
            Err(SessionConfigError::OutOfRange {
                field,
                value,
                range,
            })
        };
        if self.window_packets == 0 || self.window_packets > SESSION_WINDOW_PACKETS_MAX {
            return bad("window_packets", self.window_packets as u64, "1..=4096");
        }
        if self.backlog_packets == 0 {
            return bad("backlog_packets", 0, "at least 1");
        }
        if self.retransmit_timeout_ns == 0 {
            return bad("retransmit_timeout_ns", 0, "at least 1");
        }
        if self.silence_ns == 0 {
            return bad("silence_ns", 0, "at least 1");
        }
        Ok(())
    }
}

/// Something the membership layer must hear about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEvent {
    /// `node` was silent for the configured silence while we waited on it;
    /// nothing more is sent to it until a newer incarnation of it speaks.
    PeerFailed {
        /// The silent peer.
        node: NodeId,
    },
}

/// Packets dropped on receipt, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionDrops {
    /// Did not decode (bad magic, flags, lengths, counts).
    pub malformed: u64,
    /// Of another packet format version.
    pub bad_version: u64,
    /// From another cluster id.
    pub other_cluster: u64,
    /// From a node outside the configuration (or claiming to be this node).
    pub stranger: u64,
    /// Addressed to another node.
    pub misaddressed: u64,
    /// Sent in an older membership epoch than ours.
    pub old_epoch: u64,
    /// Addressed to another incarnation of this node.
    pub wrong_incarnation: u64,
    /// From an older incarnation of the peer than its session knows.
    pub stale_incarnation: u64,
    /// Acknowledging packets never sent.
    pub bad_ack: u64,
    /// From a peer whose session failed (same incarnation).
    pub failed_peer: u64,
}

/// Counters of one node's sessions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Data packets handed to the transport (retransmissions included).
    pub packets_sent: u64,
    /// Of those, retransmissions.
    pub retransmissions: u64,
    /// Standalone acknowledgements sent.
    pub acks_sent_alone: u64,
    /// Header bytes of data packets sent (retransmissions included).
    pub header_bytes_sent: u64,
    /// Message bytes (headers and bodies) of data packets sent.
    pub payload_bytes_sent: u64,
    /// Data packets accepted, in order.
    pub packets_received: u64,
    /// Messages (fragments counted one by one) in those packets.
    pub messages_received: u64,
    /// Standalone acknowledgements received.
    pub acks_received_alone: u64,
    /// Data packets dropped as duplicates (already received).
    pub duplicates_dropped: u64,
    /// Data packets dropped as out of order (a gap before them).
    pub out_of_order_dropped: u64,
    /// Packets dropped for their identity or form, by reason.
    pub drops: SessionDrops,
    /// Sessions renewed for a newer incarnation of their peer after they
    /// had carried packets (or failed): see [`incarnation`].
    pub sessions_reset: u64,
    /// Standalone acknowledgements sent as notices (answering a packet
    /// addressed to an earlier incarnation of this node).
    pub notices_sent: u64,
    /// Sessions declared failed after silence.
    pub sessions_failed: u64,
    /// Messages dropped because their destination's session failed (or
    /// was reset under them).
    pub messages_to_failed_dropped: u64,
    /// Events dropped because [`SESSION_EVENTS_MAX`] were undrained.
    pub events_dropped: u64,
    /// Flushes after a gap over [`FLUSH_GAP_GRACE_NS`] (own stalls whose
    /// excess the timers forgave).
    pub stalls_forgiven: u64,
    /// Round-trip samples taken (acknowledged packets sent once).
    pub rtt_samples: u64,
    /// Packets in a transport's lent buffer that were copied to the heap
    /// before being numbered or sent again, because the driver or a
    /// receiver still held the buffer (see [`super::txbuf`]: otherwise a
    /// retransmission commits the same buffer, with no copy).
    pub resend_copies: u64,
}

/// One peer's session state.
#[derive(Debug, Default)]
struct Session {
    /// The peer's incarnation this session addresses (≥ 1): the newest
    /// heard, or the membership's floor, whichever is newer (see
    /// [`incarnation`]). Only a packet from it (or a newer one) is taken.
    peer_incarnation: u32,
    /// Next packet number to assign.
    next_seq: u32,
    /// Oldest unacknowledged packet number (everything below is acknowledged).
    acked: u32,
    /// Numbered packets still held: on a lossy transport every packet of
    /// `acked..next_seq` (retransmission copies); otherwise only those the
    /// transport has not taken yet.
    held: VecDeque<PacketBuf>,
    /// Index in `held` of the next packet to hand to the transport.
    unsent: usize,
    /// Index in `held` of the first packet never handed to the transport.
    sent_hwm: usize,
    /// Round-trip estimate and retransmission timeout.
    rto: rto::Rto,
    /// Retransmissions left in the current timeout.
    resend_left: usize,
    /// Start of the current retransmission timer (last progress).
    timer_from: Nanos,
    /// Start of the current silence (last packet heard, or the moment we
    /// started waiting on the peer).
    silence_from: Nanos,
    /// Next packet number expected from the peer.
    expected: u32,
    /// Since when an acknowledgement is owed (a packet arrived and no packet
    /// carried the ack back yet).
    ack_owed_since: Option<Nanos>,
    /// The acknowledgement owed is a notice ([`incarnation`]), for the count.
    notice_owed: bool,
    /// A packet of the addressed incarnation passed the identity checks:
    /// that process exists (a session's first guess, the membership's
    /// floor, may name none).
    heard: bool,
    /// Declared failed; cleared by a newer incarnation of the peer (newer
    /// than `peer_incarnation`, which a failure sets to the incarnation it
    /// declared failed).
    failed: bool,
    /// The lowest incarnation the peer can have as far as the membership
    /// told this node: the newest a configuration named for it
    /// ([`Sessions::raise_floor`]); 0 before any. Kept through resets and failures, and carried into the
    /// sessions of this node's next NIC incarnation ([`Sessions::floor`]):
    /// it is the membership's knowledge, which outlives the NIC runtime.
    floor: u32,
}

impl Session {
    /// A fresh session addressing incarnation `incarnation` (≥ 1) of its
    /// peer, whose membership floor is `floor`.
    fn addressing(incarnation: u32, floor: u32) -> Session {
        debug_assert!(incarnation >= floor.max(1));
        Session {
            peer_incarnation: incarnation,
            floor,
            ..Session::default()
        }
    }

    /// Numbered packets handed to the transport (at least once) and not
    /// yet acknowledged. Counted from `sent_hwm`, not `unsent`: during a
    /// go-back-N retransmission `unsent` is back at 0, yet the peer may
    /// rightly acknowledge packets it got the first time (taking those
    /// acks for bad ones dropped their packets and stalled the session).
    fn sent_unacked(&self) -> u32 {
        let untaken = (self.held.len() - self.sent_hwm) as u32;
        self.unacked().saturating_sub(untaken)
    }

    /// Numbered packets not yet acknowledged.
    fn unacked(&self) -> u32 {
        self.next_seq.wrapping_sub(self.acked)
    }
}

/// The sessions of one node with every other node of its cluster.
#[derive(Debug)]
pub struct Sessions {
    node: NodeId,
    cluster_id: u32,
    incarnation: u32,
    epoch: u32,
    lossy: bool,
    cfg: SessionConfig,
    peers: Vec<Session>,
    events: VecDeque<SessionEvent>,
    /// Peers whose session was renewed since [`Sessions::take_renewed`]
    /// (a mask by node id).
    renewed: u32,
    spare: Vec<Vec<u8>>,
    stats: SessionStats,
    /// When the last flush ran (`None` before the first).
    last_flush: Option<Nanos>,
}

/// Most spare packet buffers kept for reuse.
const SPARE_BUFFERS_MAX: usize = 256;

impl Sessions {
    /// Sessions of `node` (incarnation `incarnation` ≥ 1) with the other
    /// nodes of a cluster of `nodes` with id `cluster_id`, over a transport
    /// that is `lossy` or not.
    ///
    /// # Errors
    /// [`SessionConfigError`] if `cfg` does not [`validate`](SessionConfig::validate).
    ///
    /// # Panics
    /// If `node >= nodes`, `nodes > NODES_MAX` or `incarnation == 0` (the
    /// runtime checks these before).
    pub fn new(
        node: NodeId,
        nodes: usize,
        cluster_id: u32,
        incarnation: u32,
        lossy: bool,
        cfg: SessionConfig,
    ) -> Result<Sessions, SessionConfigError> {
        cfg.validate()?;
        assert!((node as usize) < nodes && nodes <= NODES_MAX && incarnation != 0);
        Ok(Sessions {
            node,
            cluster_id,
            incarnation,
            epoch: 0,
            lossy,
            cfg,
            peers: (0..nodes).map(|_| Session::addressing(1, 0)).collect(),
            events: VecDeque::with_capacity(SESSION_EVENTS_MAX),
            renewed: 0,
            spare: Vec::new(),
            stats: SessionStats::default(),
            last_flush: None,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &SessionConfig {
        &self.cfg
    }

    /// This node's membership epoch (stamped on every packet sent).
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Raises this node's epoch to `epoch` (never lowers it); packets from
    /// older epochs are dropped from now on (their acknowledgements and
    /// numbers still count, so no session is left with a gap that would
    /// hold up the new epoch's first messages, crash recovery's).
    pub fn set_epoch(&mut self, epoch: u32) {
        self.epoch = self.epoch.max(epoch);
    }

    /// Counters so far.
    pub fn stats(&self) -> SessionStats {
        self.stats
    }

    /// Whether a packet of the incarnation `peer`'s session addresses
    /// has arrived (false for a bad id). Until then the process addressed
    /// may not exist: a session's first guess is the membership's floor,
    /// and with static membership no configuration names the peer's real
    /// incarnation, so a first packet can be for a process that never ran
    /// (dropped by the real one, the session then renewed).
    pub fn heard_from(&self, peer: NodeId) -> bool {
        self.peers.get(peer as usize).is_some_and(|s| s.heard)
    }

    /// Whether `peer`'s session is failed.
    pub fn is_failed(&self, peer: NodeId) -> bool {
        self.peers.get(peer as usize).is_some_and(|s| s.failed)
    }

    /// Numbered packets to `peer` not yet acknowledged (0 for a bad id).
    pub fn unacked(&self, peer: NodeId) -> usize {
        self.peers
            .get(peer as usize)
            .map_or(0, |s| s.unacked() as usize)
    }

    /// Whether no session holds a packet: none waits for the transport and,
    /// on a lossy transport, none is unacknowledged (each is held as a
    /// retransmission copy until acknowledged). On a lossless transport a
    /// packet the transport took is the network's, as for the driver.
    pub fn is_idle(&self) -> bool {
        self.peers.iter().all(|s| s.held.is_empty())
    }

    /// The current retransmission timeout of `peer`'s session, ns (backoff
    /// included; the configured one for a bad id).
    pub fn retransmit_timeout_ns(&self, peer: NodeId) -> Nanos {
        let initial = self.cfg.retransmit_timeout_ns;
        self.peers
            .get(peer as usize)
            .map_or(initial, |s| s.rto.timeout_ns(initial))
    }

    /// Whether some session owes its peer an acknowledgement.
    pub fn owes_acks(&self) -> bool {
        self.peers.iter().any(|s| s.ack_owed_since.is_some())
    }

    /// Moves the events raised so far into `out`, oldest first.
    pub fn drain_events(&mut self, out: &mut Vec<SessionEvent>) {
        out.extend(self.events.drain(..));
    }

    fn raise(&mut self, e: SessionEvent) {
        if self.events.len() < SESSION_EVENTS_MAX {
            self.events.push_back(e);
        } else {
            self.stats.events_dropped += 1;
        }
    }

    /// Returns a packet buffer for reuse (a lent one goes back to its
    /// lender).
    pub(crate) fn recycle(&mut self, buf: PacketBuf) {
        if let Some(buf) = buf.into_heap() {
            if self.spare.len() < SPARE_BUFFERS_MAX {
                self.spare.push(buf);
            }
        }
    }

    /// A spare packet buffer (empty), if one is kept.
    pub(crate) fn spare_buffer(&mut self) -> Option<Vec<u8>> {
        self.spare.pop().map(|mut b| {
            b.clear();
            b
        })
    }

    fn drop_held(&mut self, held: VecDeque<PacketBuf>) -> u64 {
        let mut messages = 0;
        for b in held {
            messages += PacketHeader::count_of(&b) as u64;
            self.recycle(b);
        }
        messages
    }
}
