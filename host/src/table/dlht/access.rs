//! The bin walk every DLHT operation shares (Dandelion §6): read the bin's
//! header, follow a `Moved` bin into the next generation, and wait out a
//! `Pending` one; then the searches of Get and Delete under that header.

use super::bin::{Find, Gen};
use super::{tags, value, word_meta, word_value, Dlht};
use crate::table::sync::{fence, spin_wait, Guard, Ordering};
use splitkv_layout::dlht_layout::{header, BinState, SlotState};
use splitkv_layout::{Key, ObjectMeta};

/// What an operation does next with the bin whose header it read.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum BinStep {
    /// The bin is live: search it.
    Live,
    /// The bin is frozen by a resize: a Get reads it in place, a write or a
    /// Delete moves it first.
    Frozen,
    /// The bin had moved (`g` and `b` now name the key's bin in the next
    /// generation) or was pending: read the header again.
    Again,
}

/// The arms of the bin-state match that every operation shares: a `Moved`
/// bin sends the operation to the key's bin in the next generation (updating
/// `g` and `b`), a `Pending` one (which no operation should reach) waits.
#[inline(always)]
pub(super) fn bin_step(g: &mut &Gen, b: &mut usize, key: &Key, h: u64) -> BinStep {
    match header::bin_state(h) {
        BinState::Live => BinStep::Live,
        BinState::Frozen => BinStep::Frozen,
        BinState::Moved => {
            next_bin(g, b, key);
            BinStep::Again
        }
        BinState::Pending => {
            debug_assert!(false, "an operation reached a Pending bin");
            spin_wait();
            BinStep::Again
        }
    }
}

/// Sends an operation on from bin `b` of `g`, which a resize has frozen or
/// moved, to `key`'s bin in the next generation.
#[inline(always)]
pub(super) fn next_bin(g: &mut &Gen, b: &mut usize, key: &Key) {
    // Copied out of `g` with the generation's lifetime (not reborrowed
    // through the `&mut`), so `next` can be stored back into `g`.
    let cur = *g;
    let next = cur.next_gen().expect("a moved bin has a next generation");
    *b = next.bin_of(key);
    *g = next;
}

impl Dlht {
    /// [`Dlht::get`] of a key whose table id is in range, starting at bin `b` of
    /// `g` (the key's bin in `g`; `g` was reached through the table under the
    /// caller's guard, which is still held). `value_out` must be empty.
    #[inline(always)]
    pub(super) fn get_at(
        &self,
        mut g: &Gen,
        mut b: usize,
        key: &Key,
        value_out: &mut Vec<u8>,
    ) -> Option<ObjectMeta> {
        debug_assert!(value_out.is_empty());
        loop {
            let h1 = g.header(b).load(Ordering::Acquire);
            match bin_step(&mut g, &mut b, key, h1) {
                // A frozen bin's contents are final: read it in place.
                BinStep::Live | BinStep::Frozen => {}
                BinStep::Again => continue,
            }
            match g.find(b, h1, key) {
                Find::Found { line, pos, tag, .. } => {
                    let meta = line.w[word_meta(pos)].load(Ordering::Relaxed);
                    let word = line.w[word_value(pos)].load(Ordering::Relaxed);
                    fence(Ordering::Acquire);
                    if g.header(b).load(Ordering::Relaxed) != h1 {
                        continue;
                    }
                    // SAFETY: the slot was valid while we were pinned (header
                    // unchanged around the reads) and we are still pinned;
                    // `value_out` is empty.
                    unsafe { value::copy_value(tags::tag_len_code(tag), word, value_out) };
                    return Some(ObjectMeta(meta));
                }
                Find::Absent => {
                    fence(Ordering::Acquire);
                    if g.header(b).load(Ordering::Relaxed) == h1 {
                        return None;
                    }
                }
                Find::Torn => spin_wait(),
            }
        }
    }

    /// [`Dlht::remove`] of a key whose table id is in range, starting at its
    /// bin `b` of `g` (see [`Dlht::get_at`]).
    #[inline(always)]
    pub(super) fn remove_at<'g>(
        &self,
        mut g: &'g Gen,
        mut b: usize,
        key: &Key,
        guard: &'g Guard,
    ) -> bool {
        loop {
            let h = g.header(b).load(Ordering::Acquire);
            match bin_step(&mut g, &mut b, key, h) {
                BinStep::Live => {}
                BinStep::Frozen => {
                    self.move_bin(g, b, guard);
                    continue;
                }
                BinStep::Again => continue,
            }
            match g.find(b, h, key) {
                Find::Found {
                    slot,
                    line,
                    pos,
                    tag,
                } => {
                    let word = line.w[word_value(pos)].load(Ordering::Relaxed);
                    fence(Ordering::Acquire);
                    if g.cas_header(b, h, header::with_slot(h, slot, SlotState::Empty))
                        .is_ok()
                    {
                        self.retire_value(tags::tag_len_code(tag), word, guard);
                        self.len.add(-1);
                        return true;
                    }
                }
                Find::Absent => {
                    fence(Ordering::Acquire);
                    if g.header(b).load(Ordering::Relaxed) == h {
                        return false;
                    }
                }
                Find::Torn => spin_wait(),
            }
        }
    }
}
