//! The registered buffer pool's accounting: one memory region cut into
//! fixed-size slots, a free list, and a record of who holds each slot (a
//! posted receive or a posted send), so that a slot is never handed out
//! twice and never lost (FaSST §4 and eRPC §4.2 both keep one registered
//! region per endpoint with a free list of message buffers).
//!
//! Pure bookkeeping: no device call. The transport maps a [`Slot`] to the
//! bytes at `index × slot_bytes` in its registered region.

/// Most slots one pool holds (a `u32` index; bounds the region to
/// `VERBS_SLOTS_MAX × slot bytes`).
pub const VERBS_SLOTS_MAX: u32 = 1 << 16;

/// One slot of the pool: its index (`0..slots`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slot(pub u32);

/// What a lent slot is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotUse {
    /// Posted to the receive queue (the device may write it).
    Receive,
    /// Holds a posted send's payload (the device may read it).
    Send,
}

/// Why the pool refused a call. Never a panic: a bad completion (a
/// `wr_id` the device should not have returned) ends here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// Every slot is lent.
    #[error("the buffer pool is exhausted ({slots} slots, all lent)")]
    Exhausted {
        /// Slots in the pool.
        slots: u32,
    },
    /// The slot index is outside the pool.
    #[error("slot {slot} is outside the pool of {slots} slots")]
    OutOfRange {
        /// The index given.
        slot: u32,
        /// Slots in the pool.
        slots: u32,
    },
    /// The slot is free (a second completion for one posting).
    #[error("slot {slot} is not lent")]
    NotLent {
        /// The index given.
        slot: u32,
    },
    /// The slot is lent for the other use (a receive completion naming a
    /// send slot, or the reverse).
    #[error("slot {slot} is lent for {lent:?}, returned as {returned:?}")]
    WrongUse {
        /// The index given.
        slot: u32,
        /// What it was lent for.
        lent: SlotUse,
        /// What it was returned as.
        returned: SlotUse,
    },
}

/// The free list and the owner of each slot. Invariant (checked by
/// [`SlotPool::check`]): every slot is either on the free list exactly
/// once or lent exactly once.
#[derive(Debug, Clone)]
pub struct SlotPool {
    free: Vec<u32>,
    owner: Vec<Option<SlotUse>>,
    lent_receive: u32,
    lent_send: u32,
}

impl SlotPool {
    /// A pool of `slots` free slots (at most [`VERBS_SLOTS_MAX`]; more are
    /// cut to it). Allocates once.
    pub fn new(slots: u32) -> SlotPool {
        let slots = slots.min(VERBS_SLOTS_MAX);
        SlotPool {
            // Lowest index first out: the first slots of the region are
            // the warm ones.
            free: (0..slots).rev().collect(),
            owner: vec![None; slots as usize],
            lent_receive: 0,
            lent_send: 0,
        }
    }

    /// Slots in the pool.
    pub fn slots(&self) -> u32 {
        self.owner.len() as u32
    }

    /// Slots on the free list.
    pub fn free(&self) -> u32 {
        self.free.len() as u32
    }

    /// Slots lent for `what`.
    pub fn lent(&self, what: SlotUse) -> u32 {
        match what {
            SlotUse::Receive => self.lent_receive,
            SlotUse::Send => self.lent_send,
        }
    }

    /// Lends a free slot for `what`.
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] when every slot is lent.
    pub fn take(&mut self, what: SlotUse) -> Result<Slot, PoolError> {
        let slots = self.slots();
        let i = self.free.pop().ok_or(PoolError::Exhausted { slots })?;
        debug_assert!(self.owner[i as usize].is_none());
        self.owner[i as usize] = Some(what);
        *self.counter(what) += 1;
        Ok(Slot(i))
    }

    /// Returns `slot`, lent for `what`, to the free list.
    ///
    /// # Errors
    /// [`PoolError::OutOfRange`], [`PoolError::NotLent`] (returned twice)
    /// or [`PoolError::WrongUse`]; the pool is unchanged on an error.
    pub fn release(&mut self, slot: Slot, what: SlotUse) -> Result<(), PoolError> {
        let slots = self.slots();
        let owner = self
            .owner
            .get_mut(slot.0 as usize)
            .ok_or(PoolError::OutOfRange {
                slot: slot.0,
                slots,
            })?;
        match *owner {
            None => Err(PoolError::NotLent { slot: slot.0 }),
            Some(lent) if lent != what => Err(PoolError::WrongUse {
                slot: slot.0,
                lent,
                returned: what,
            }),
            Some(_) => {
                *owner = None;
                self.free.push(slot.0);
                *self.counter(what) -= 1;
                Ok(())
            }
        }
    }

    fn counter(&mut self, what: SlotUse) -> &mut u32 {
        match what {
            SlotUse::Receive => &mut self.lent_receive,
            SlotUse::Send => &mut self.lent_send,
        }
    }

    /// Whether the invariant holds: each slot free exactly once or lent
    /// exactly once, and the counters agree. O(slots); for tests and debug
    /// assertions.
    pub fn check(&self) -> bool {
        let mut seen = vec![false; self.owner.len()];
        for &i in &self.free {
            let Some(s) = seen.get_mut(i as usize) else {
                return false;
            };
            if *s || self.owner[i as usize].is_some() {
                return false;
            }
            *s = true;
        }
        let lent = |w| self.owner.iter().filter(|o| **o == Some(w)).count() as u32;
        let lent_all = self.owner.iter().filter(|o| o.is_some()).count();
        lent(SlotUse::Receive) == self.lent_receive
            && lent(SlotUse::Send) == self.lent_send
            && lent_all + self.free.len() == self.owner.len()
    }
}
