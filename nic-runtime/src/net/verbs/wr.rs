//! Building send and receive work requests, as plain values the device
//! layer turns into `ibv_send_wr` / `ibv_recv_wr`: the inline decision
//! (Dandelion §8.3: packets at or below the device's inline limit go in
//! the descriptor itself, so the NIC does not fetch the payload with a
//! second DMA), selective signalling (FaSST §4.1 / eRPC §4.2: one send in
//! [`SendCadence::every`] asks for a completion; completions on a send
//! queue arrive in order, so one completion retires every earlier send),
//! and the record of which slots the unsignalled sends still hold.

use super::pool::Slot;
use std::collections::VecDeque;

/// Bytes of the Global Routing Header the device writes at the head of
/// every UD receive buffer (present or not: IB spec §11.4.1.1, `man
/// ibv_post_recv`); a receive slot is `VERBS_GRH_BYTES + mtu` long.
pub const VERBS_GRH_BYTES: usize = 40;

/// How one packet is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendPlan {
    /// The work request's id: the send's sequence number (0, 1, ...).
    pub wr_id: u64,
    /// Payload bytes.
    pub bytes: usize,
    /// In the descriptor (`IBV_SEND_INLINE`): needs no slot.
    pub inline: bool,
    /// Asks for a completion (`IBV_SEND_SIGNALED`).
    pub signaled: bool,
}

/// Why a packet was not sent. A packet refused for being too long is
/// dropped (as a network would); the other causes are congestion (the
/// caller offers it again later).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendRefusal {
    /// Longer than the MTU: taken and dropped.
    #[error("packet of {bytes} B exceeds the MTU of {mtu} B")]
    TooLong {
        /// Its length.
        bytes: usize,
        /// The transport's MTU.
        mtu: usize,
    },
    /// The send queue holds `depth` unretired sends.
    #[error("the send queue is full ({depth} sends outstanding)")]
    QueueFull {
        /// The send queue's depth.
        depth: u32,
    },
}

/// The signalling cadence and the sends still outstanding (posted, not
/// yet retired by a signalled completion), with the slot each holds
/// (`None` for an inline send, whose bytes the device copied at post
/// time).
#[derive(Debug, Clone)]
pub struct SendCadence {
    every: u32,
    depth: u32,
    next_wr_id: u64,
    outstanding: VecDeque<(u64, Option<Slot>)>,
}

impl SendCadence {
    /// One send in `every` signalled, at most `depth` outstanding. `every`
    /// is clamped to `1..=depth` so the queue can never fill with sends
    /// none of which will complete.
    pub fn new(every: u32, depth: u32) -> SendCadence {
        let depth = depth.max(1);
        SendCadence {
            every: every.clamp(1, depth),
            depth,
            next_wr_id: 0,
            outstanding: VecDeque::with_capacity(depth as usize),
        }
    }

    /// Signalling period (sends per completion).
    pub fn every(&self) -> u32 {
        self.every
    }

    /// Sends posted and not yet retired.
    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }

    /// Plans the next send of `bytes` bytes on a transport with MTU `mtu`
    /// and inline limit `inline_max` (0: never inline), without recording
    /// it (see [`SendCadence::posted`]).
    ///
    /// # Errors
    /// [`SendRefusal::TooLong`], [`SendRefusal::QueueFull`].
    pub fn plan(
        &self,
        bytes: usize,
        mtu: usize,
        inline_max: usize,
    ) -> Result<SendPlan, SendRefusal> {
        if bytes > mtu {
            return Err(SendRefusal::TooLong { bytes, mtu });
        }
        if self.outstanding.len() >= self.depth as usize {
            return Err(SendRefusal::QueueFull { depth: self.depth });
        }
        let wr_id = self.next_wr_id;
        let last_slot_free = self.outstanding.len() + 1 == self.depth as usize;
        Ok(SendPlan {
            wr_id,
            bytes,
            inline: bytes <= inline_max,
            // Every `every`-th send, and always the one that fills the
            // queue (so a completion is always coming when it is full).
            signaled: (wr_id + 1).is_multiple_of(u64::from(self.every)) || last_slot_free,
        })
    }

    /// Records that `plan` was posted, holding `slot` until retired.
    pub fn posted(&mut self, plan: &SendPlan, slot: Option<Slot>) {
        debug_assert_eq!(plan.wr_id, self.next_wr_id);
        self.outstanding.push_back((plan.wr_id, slot));
        self.next_wr_id += 1;
    }

    /// Forgets the last `n` sends recorded by [`SendCadence::posted`]
    /// (the device refused them), returning each one's slot to `release`,
    /// newest first.
    pub fn unpost_last(&mut self, n: usize, mut release: impl FnMut(Option<Slot>)) {
        for _ in 0..n {
            let Some((_, slot)) = self.outstanding.pop_back() else {
                return;
            };
            self.next_wr_id -= 1;
            release(slot);
        }
    }

    /// A send completion for `wr_id` arrived (success or error: either way
    /// the device is done with it and with every earlier send). Calls
    /// `retire` with each retired send's slot, oldest first. Returns how
    /// many sends it retired (0 for an unknown or already-retired id).
    pub fn completed(&mut self, wr_id: u64, mut retire: impl FnMut(Option<Slot>)) -> usize {
        if !self.outstanding.iter().any(|&(id, _)| id == wr_id) {
            return 0;
        }
        let mut n = 0;
        while let Some((id, slot)) = self.outstanding.pop_front() {
            retire(slot);
            n += 1;
            if id == wr_id {
                break;
            }
        }
        n
    }
}

/// How many receives to post so that `posted` reaches `depth`, given
/// `free` slots in the pool.
pub fn receives_to_post(posted: u32, depth: u32, free: u32) -> u32 {
    depth.saturating_sub(posted).min(free)
}
