//! The event trace: a bounded ring of the last events of a run (send,
//! delivery, drop with its reason, duplication, partition, heal, clog, hold,
//! crash) with their virtual times, printable, so a failing run can show
//! what happened around the failure; and the order-sensitive hash of every
//! event ever recorded (not only those still in the ring), which two runs of
//! one seed share.

use crate::net::DropReason;
use splitkv_layout::wire::NodeId;
use splitkv_nic::Nanos;
use std::collections::VecDeque;
use std::fmt;

/// Default events kept in the ring.
pub const TRACE_EVENTS_DEFAULT: usize = 1_024;
/// Most events the ring can be asked to keep.
pub const TRACE_EVENTS_MAX: usize = 1 << 20;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// A packet accepted on link `src → dst`, due at `due`.
    Send {
        /// Sender.
        src: NodeId,
        /// Receiver.
        dst: NodeId,
        /// Network-wide packet number.
        seq: u64,
        /// Bytes.
        len: u32,
        /// Virtual delivery time.
        due: Nanos,
    },
    /// An extra copy of packet `seq` was made.
    Duplicate {
        /// Sender.
        src: NodeId,
        /// Receiver.
        dst: NodeId,
        /// The copy's packet number.
        seq: u64,
    },
    /// Packet `seq` handed to its receiver.
    Deliver {
        /// Sender.
        src: NodeId,
        /// Receiver.
        dst: NodeId,
        /// Packet number.
        seq: u64,
    },
    /// Packet `seq` dropped (`seq` 0: dropped before it was numbered).
    Drop {
        /// Sender.
        src: NodeId,
        /// Receiver.
        dst: NodeId,
        /// Packet number.
        seq: u64,
        /// Why.
        reason: DropReason,
    },
    /// Nodes in `side` (a bit mask of node ids) cut off from the rest; if
    /// `one_way`, only packets leaving `side` are dropped.
    Partition {
        /// Bit mask of the cut-off nodes.
        side: u64,
        /// One-way partition.
        one_way: bool,
        /// When it heals.
        until: Nanos,
    },
    /// The partition healed.
    Heal,
    /// Link `src → dst` stops delivering until `until`.
    Clog {
        /// Sender.
        src: NodeId,
        /// Receiver.
        dst: NodeId,
        /// End of the clog.
        until: Nanos,
    },
    /// Link `src → dst` held (`on`) or released by a script.
    Hold {
        /// Sender.
        src: NodeId,
        /// Receiver.
        dst: NodeId,
        /// Held (true) or released.
        on: bool,
    },
    /// Node crashed: its components stop and its packets are dropped.
    Crash {
        /// The node.
        node: NodeId,
    },
    /// Node restarted empty as a new incarnation (rejoin): its packets
    /// flow again.
    Restart {
        /// The node.
        node: NodeId,
    },
}

/// One event at a virtual time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// Virtual time, ns.
    pub at: Nanos,
    /// What happened.
    pub kind: EventKind,
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:>12} ns  ", self.at)?;
        match self.kind {
            EventKind::Send {
                src,
                dst,
                seq,
                len,
                due,
            } => write!(f, "send    {src}->{dst} #{seq} {len} B due {due}"),
            EventKind::Duplicate { src, dst, seq } => write!(f, "dup     {src}->{dst} #{seq}"),
            EventKind::Deliver { src, dst, seq } => write!(f, "deliver {src}->{dst} #{seq}"),
            EventKind::Drop {
                src,
                dst,
                seq,
                reason,
            } => write!(f, "drop    {src}->{dst} #{seq} ({})", reason.name()),
            EventKind::Partition {
                side,
                one_way,
                until,
            } => {
                let kind = if one_way { "one-way" } else { "symmetric" };
                write!(f, "partition {kind} side {side:#b} until {until}")
            }
            EventKind::Heal => write!(f, "heal"),
            EventKind::Clog { src, dst, until } => write!(f, "clog    {src}->{dst} until {until}"),
            EventKind::Hold { src, dst, on } => {
                let what = if on { "hold   " } else { "release" };
                write!(f, "{what} {src}->{dst}")
            }
            EventKind::Crash { node } => write!(f, "crash   node {node}"),
            EventKind::Restart { node } => write!(f, "restart node {node}"),
        }
    }
}

/// The ring of the last events and the hash of all of them.
#[derive(Debug, Clone)]
pub struct EventTrace {
    ring: VecDeque<Event>,
    cap: usize,
    hash: u64,
    total: u64,
}

impl EventTrace {
    /// A ring keeping the last `cap` events (clamped to `1..=`[`TRACE_EVENTS_MAX`]).
    pub fn new(cap: usize) -> EventTrace {
        let cap = cap.clamp(1, TRACE_EVENTS_MAX);
        EventTrace {
            ring: VecDeque::with_capacity(cap),
            cap,
            hash: TRACE_SEED,
            total: 0,
        }
    }

    /// Records `e`, folding it into the hash; the oldest event leaves a full ring.
    pub fn record(&mut self, e: Event) {
        self.hash = fold_event(self.hash, &e);
        self.total += 1;
        if self.ring.len() == self.cap {
            self.ring.pop_front();
        }
        self.ring.push_back(e);
    }

    /// Folds bytes (a delivered packet's contents) into the hash.
    pub fn fold_bytes(&mut self, bytes: &[u8]) {
        self.hash = fold(self.hash, bytes);
    }

    /// The order-sensitive hash of every event recorded (and every byte
    /// folded) so far.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// Events recorded so far (more than the ring keeps once it is full).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The events still in the ring, oldest first.
    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.ring.iter()
    }

    /// The last `n` events, one per line.
    pub fn tail(&self, n: usize) -> String {
        let skip = self.ring.len().saturating_sub(n);
        let mut s = String::new();
        for e in self.ring.iter().skip(skip) {
            s.push_str(&e.to_string());
            s.push('\n');
        }
        s
    }

    /// The events within `window_ns` of virtual time `at`, one per line.
    pub fn around(&self, at: Nanos, window_ns: Nanos) -> String {
        let mut s = String::new();
        for e in self.ring.iter().filter(|e| e.at.abs_diff(at) <= window_ns) {
            s.push_str(&e.to_string());
            s.push('\n');
        }
        s
    }
}

/// FNV-1a offset basis: the hash of an empty trace.
pub const TRACE_SEED: u64 = 0xcbf2_9ce4_8422_2325;

/// Folds `bytes` into the order-sensitive hash `h` (FNV-1a, 64 bit).
pub fn fold(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

fn fold_u64s(h: u64, tag: u8, xs: &[u64]) -> u64 {
    let mut h = fold(h, &[tag]);
    for x in xs {
        h = fold(h, &x.to_le_bytes());
    }
    h
}

fn fold_event(h: u64, e: &Event) -> u64 {
    let h = fold(h, &e.at.to_le_bytes());
    match e.kind {
        EventKind::Send {
            src,
            dst,
            seq,
            len,
            due,
        } => fold_u64s(h, 1, &[src as u64, dst as u64, seq, len as u64, due]),
        EventKind::Duplicate { src, dst, seq } => fold_u64s(h, 2, &[src as u64, dst as u64, seq]),
        EventKind::Deliver { src, dst, seq } => fold_u64s(h, 3, &[src as u64, dst as u64, seq]),
        EventKind::Drop {
            src,
            dst,
            seq,
            reason,
        } => fold_u64s(h, 4, &[src as u64, dst as u64, seq, reason as u64]),
        EventKind::Partition {
            side,
            one_way,
            until,
        } => fold_u64s(h, 5, &[side, one_way as u64, until]),
        EventKind::Heal => fold_u64s(h, 6, &[]),
        EventKind::Clog { src, dst, until } => fold_u64s(h, 7, &[src as u64, dst as u64, until]),
        EventKind::Hold { src, dst, on } => fold_u64s(h, 8, &[src as u64, dst as u64, on as u64]),
        EventKind::Crash { node } => fold_u64s(h, 9, &[node as u64]),
        EventKind::Restart { node } => fold_u64s(h, 10, &[node as u64]),
    }
}
