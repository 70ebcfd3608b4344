//! DLHT writes (Dandelion §6): insert, update, upsert and upsert-if-newer as
//! one two-phase operation: reserve a free slot with a CAS that validates the
//! search, then publish it with a CAS that also frees the replaced slot.

use super::access::{bin_step, next_bin, BinStep};
use super::bin::{ExtendError, Find, Gen};
use super::pool::Draw;
use super::resize::GrowCause;
use super::value::{self, Staged};
use super::{
    tags, word_meta, word_value, Dlht, DlhtError, DLHT_VALUE_BYTES_MAX, LEN_CHECK_EVERY_INSERTS,
    LEN_EXACT_CHECK_LIMIT_MAX, LOAD_KEYS_PER_BIN_MAX_DEN, LOAD_KEYS_PER_BIN_MAX_NUM, TABLE_ID_MAX,
};
use crate::table::sync::{fence, pin, spin_wait, Guard, Line, Ordering};
use splitkv_layout::dlht_layout::{header, BinState, SlotState};
use splitkv_layout::{Key, ObjectMeta};

/// What a write does when the key is present or absent.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Mode {
    /// Only if absent.
    Insert,
    /// Only if present.
    Update,
    /// Either.
    Upsert,
    /// Either, but a present key only if its stored version is older.
    UpsertIfNewer,
}

/// The inputs of one write, carried through its phases.
struct WriteOp<'v> {
    key: Key,
    meta: ObjectMeta,
    value: &'v [u8],
    mode: Mode,
    /// The slot tag: the key's table id and the value's length code.
    tag: u16,
}

/// How phase 1 of a write ended.
enum Reservation {
    /// Settled without changing the table (see `Mode::settled`).
    Answer(Wrote),
    /// Slot `slot` is reserved and filled; `h` is the header the reservation
    /// CAS produced, `replaced` the slot holding the key under that header.
    Slot {
        slot: usize,
        h: u64,
        replaced: Option<Replaced>,
    },
}

impl Dlht {
    /// Insert, update, upsert or upsert-if-newer (see [`Wrote`]).
    pub(super) fn write(
        &self,
        key: Key,
        meta: ObjectMeta,
        value: &[u8],
        mode: Mode,
    ) -> Result<Wrote, DlhtError> {
        Dlht::check_write(&key, value, mode)?;
        let guard = pin();
        self.write_pinned(None, key, meta, value, mode, &guard)
    }

    /// The argument checks of a write.
    #[inline(always)]
    pub(super) fn check_write(key: &Key, value: &[u8], mode: Mode) -> Result<(), DlhtError> {
        if key.table > TABLE_ID_MAX {
            return Err(DlhtError::KeyOutOfRange {
                table: key.table,
                max: TABLE_ID_MAX,
            });
        }
        // Upsert-if-newer checks the length only once it knows it will write.
        if mode != Mode::UpsertIfNewer && value.len() > DLHT_VALUE_BYTES_MAX {
            return Err(DlhtError::ValueTooLarge {
                len: value.len(),
                max: DLHT_VALUE_BYTES_MAX,
            });
        }
        Ok(())
    }

    /// [`Dlht::write`] under the caller's pin, past the argument checks. `hint`
    /// is a generation the caller already looked at and the key's bin in it
    /// (a batch computes bins while prefetching); it is used only if that
    /// generation is still current.
    #[inline(always)]
    pub(super) fn write_pinned<'g>(
        &self,
        hint: Option<(&'g Gen, usize)>,
        key: Key,
        meta: ObjectMeta,
        value: &[u8],
        mode: Mode,
        guard: &'g Guard,
    ) -> Result<Wrote, DlhtError> {
        let (g, b) = self.current_bin(hint, &key, guard);
        self.write_at(g, b, key, meta, value, mode, guard)
    }

    /// The current generation (helping a resize along) and `key`'s bin in it:
    /// the bin of `hint` if the hint's generation is still the current one.
    #[inline(always)]
    pub(crate) fn current_bin<'g>(
        &self,
        hint: Option<(&'g Gen, usize)>,
        key: &Key,
        guard: &'g Guard,
    ) -> (&'g Gen, usize) {
        let g = self.current_helped(guard);
        let b = match hint {
            Some((hg, b)) if std::ptr::eq(hg, g) => b,
            _ => g.bin_of(key),
        };
        (g, b)
    }

    /// [`Dlht::write`] of a key whose table id is in range, starting at its bin
    /// `b` of `g` (see [`Dlht::get_at`]).
    ///
    /// Phase 1 ([`Dlht::reserve`]) searches the chain under header `h` and
    /// reserves an empty slot with a CAS from `h`; phase 2 publishes it with a
    /// CAS that also frees the replaced slot. The reservation CAS succeeds only
    /// if the header is still `h`, so it validates the search just as a publish
    /// CAS from `h` would (the Acquire fence before it orders the search's slot
    /// reads first; see `Gen::fill_slot`). So when the header is still exactly
    /// the one our reservation produced, nothing has changed since the search
    /// and phase 2 publishes at once, without searching again; otherwise it
    /// searches again under the new header ([`Dlht::publish_reserved`]).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn write_at<'g>(
        &self,
        mut g: &'g Gen,
        mut b: usize,
        key: Key,
        meta: ObjectMeta,
        value: &[u8],
        mode: Mode,
        guard: &'g Guard,
    ) -> Result<Wrote, DlhtError> {
        let op = WriteOp {
            key,
            meta,
            value,
            mode,
            tag: tags::make_tag(key.table, value::len_code(value.len())),
        };
        // Staged on first use: a write that changes nothing never allocates.
        let mut staged: Option<Staged> = None;
        loop {
            let (slot, h_reserved, replaced) =
                match self.reserve(&mut g, &mut b, &op, &mut staged, guard)? {
                    Reservation::Answer(answer) => return Ok(answer),
                    Reservation::Slot { slot, h, replaced } => (slot, h, replaced),
                };
            // Phase 2, fast path: the header is still the one our reservation
            // made, so the search of phase 1 still holds.
            let published = Replaced::publish(h_reserved, slot, replaced.as_ref());
            if g.cas_header(b, h_reserved, published).is_ok() {
                return Ok(self.published(g, replaced, &mut staged, guard));
            }
            if let Some(answer) =
                self.publish_reserved(&mut g, &mut b, &op, slot, &mut staged, guard)
            {
                return Ok(answer);
            }
            // The bin moved on and our reserved slot with it: start over in
            // the key's bin of the next generation.
        }
    }

    /// Phase 1 of a write: finds the key in bin `b` of `g` (following moved
    /// bins, moving frozen ones) and either settles the write without changing
    /// the table or reserves an empty slot and fills it with the staged value.
    ///
    /// # Errors
    /// [`DlhtError::ValueTooLarge`] (checked only once the write will write),
    /// [`DlhtError::Full`] if no room can be made.
    #[inline(always)]
    fn reserve<'g>(
        &self,
        g: &mut &'g Gen,
        b: &mut usize,
        op: &WriteOp<'_>,
        staged: &mut Option<Staged>,
        guard: &'g Guard,
    ) -> Result<Reservation, DlhtError> {
        loop {
            let h = g.header(*b).load(Ordering::Acquire);
            match bin_step(g, b, &op.key, h) {
                BinStep::Live => {}
                BinStep::Frozen => {
                    self.move_bin(g, *b, guard);
                    continue;
                }
                BinStep::Again => continue,
            }
            let found = match Old::find(g, *b, h, &op.key) {
                Ok(found) => found,
                Err(Torn) => {
                    spin_wait();
                    continue;
                }
            };
            if let Some(answer) = op.mode.settled(found.as_ref(), op.meta) {
                fence(Ordering::Acquire);
                if g.header(*b).load(Ordering::Relaxed) == h {
                    return Ok(Reservation::Answer(answer));
                }
                continue;
            }
            let replaced = found.map(|old| old.replaced());
            let word = match staged {
                Some(st) => st.word,
                None => {
                    if op.value.len() > DLHT_VALUE_BYTES_MAX {
                        return Err(DlhtError::ValueTooLarge {
                            len: op.value.len(),
                            max: DLHT_VALUE_BYTES_MAX,
                        });
                    }
                    staged.insert(Staged::new(op.value)).word
                }
            };
            match g.pick_empty(*b, h) {
                Some((s, line, pos)) => {
                    // The search read slot words; order them before the CAS
                    // that validates them.
                    fence(Ordering::Acquire);
                    let reserving = header::with_slot(h, s, SlotState::Reserved);
                    if let Ok(h_reserved) = g.cas_header(*b, h, reserving) {
                        Gen::fill_slot(line, pos, op.tag, op.key.id, op.meta.0, word);
                        return Ok(Reservation::Slot {
                            slot: s,
                            h: h_reserved,
                            replaced,
                        });
                    }
                }
                None => self.make_room(g, *b, h, guard)?,
            }
        }
    }

    /// Bin `b` of `g` has no free slot under header `h`: extends its chain by
    /// a link bucket, or if there is none, resizes. The thread that allocates
    /// the next generation moves every bin it can; others move just this one.
    /// Either way the bin is `Moved` when the caller reads its header again.
    /// If `g` is still being filled by a resize and the writers' share of its
    /// pool is used up (`pool.rs`), finishes that resize instead.
    ///
    /// # Errors
    /// [`DlhtError::Full`] if the table cannot grow.
    fn make_room(&self, g: &Gen, b: usize, h: u64, guard: &Guard) -> Result<(), DlhtError> {
        let current = self.current(guard);
        let draw = if std::ptr::eq(current, g) {
            Draw::Current
        } else {
            Draw::Filling
        };
        let cause = match g.extend_chain(b, h, draw) {
            Ok(()) => return Ok(()),
            Err(ExtendError::Filling) => {
                if current.next_gen().is_some_and(|next| std::ptr::eq(next, g)) {
                    self.finish_resize_of(current, guard);
                }
                return Ok(());
            }
            Err(ExtendError::ChainFull) => GrowCause::ChainFull,
            Err(ExtendError::PoolExhausted) => GrowCause::PoolExhausted,
        };
        let started = g.next_gen().is_none();
        self.grow(g, guard, true, cause)?;
        if started {
            self.help_resize_of(g, guard, usize::MAX);
        }
        self.move_bin(g, b, guard);
        Ok(())
    }

    /// Phase 2 of a write whose fast path failed: publishes reserved slot
    /// `slot` of bin `b` of `g`, checking the key's presence again under each
    /// new header (and giving the slot back if the write is now settled).
    /// Returns `None` if the bin was frozen or moved: the reserved slot dies
    /// with it, and `g`, `b` name the key's bin in the next generation.
    #[inline(always)]
    fn publish_reserved<'g>(
        &self,
        g: &mut &'g Gen,
        b: &mut usize,
        op: &WriteOp<'_>,
        slot: usize,
        staged: &mut Option<Staged>,
        guard: &'g Guard,
    ) -> Option<Wrote> {
        loop {
            let h = g.header(*b).load(Ordering::Acquire);
            debug_assert_eq!(header::slot_bits(h, slot), SlotState::Reserved as u64);
            match header::bin_state(h) {
                BinState::Live => {}
                BinState::Frozen => {
                    self.move_bin(g, *b, guard);
                    next_bin(g, b, &op.key);
                    return None;
                }
                BinState::Moved => {
                    next_bin(g, b, &op.key);
                    return None;
                }
                BinState::Pending => unreachable!("reserved a slot in a Pending bin"),
            }
            let Ok(found) = Old::find(g, *b, h, &op.key) else {
                spin_wait();
                continue;
            };
            let answer = op.mode.settled(found.as_ref(), op.meta);
            let replaced = found.map(|old| old.replaced());
            // The presence check read slot words; order it before the CAS
            // that validates it.
            fence(Ordering::Acquire);
            if let Some(answer) = answer {
                let freed = header::with_slot(h, slot, SlotState::Empty);
                if g.cas_header(*b, h, freed).is_ok() {
                    return Some(answer);
                }
                continue;
            }
            if g.cas_header(*b, h, Replaced::publish(h, slot, replaced.as_ref()))
                .is_ok()
            {
                return Some(self.published(g, replaced, staged, guard));
            }
        }
    }

    /// After a publish CAS: accounts for the staged value it made reachable,
    /// retires the value of the slot it replaced (if any) or counts the new key
    /// (and grows the table if the load bound is passed).
    fn published(
        &self,
        g: &Gen,
        replaced: Option<Replaced>,
        staged: &mut Option<Staged>,
        guard: &Guard,
    ) -> Wrote {
        let staged = staged
            .as_mut()
            .expect("a published slot had a staged value");
        if staged.record_bytes > 0 {
            self.record_bytes
                .fetch_add(staged.record_bytes, Ordering::Relaxed);
        }
        staged.published();
        match replaced {
            Some(old) => {
                self.retire_value(tags::tag_len_code(old.tag), old.word, guard);
                Wrote::Updated
            }
            None => {
                let stripe_len = self.len.add(1);
                self.maybe_grow_for_load(g, stripe_len, guard);
                Wrote::Inserted
            }
        }
    }

    /// Starts a resize (and moves every bin it can) once the average load of
    /// `g` passes the bound, unless another thread already started one.
    /// `stripe_len` is this thread's stripe of the key count after its insert:
    /// a large table sums the stripes only every [`LEN_CHECK_EVERY_INSERTS`]
    /// inserts of a stripe (see [`LEN_EXACT_CHECK_LIMIT_MAX`]).
    fn maybe_grow_for_load(&self, g: &Gen, stripe_len: isize, guard: &Guard) {
        let limit = g.bin_count() * LOAD_KEYS_PER_BIN_MAX_NUM / LOAD_KEYS_PER_BIN_MAX_DEN;
        if limit > LEN_EXACT_CHECK_LIMIT_MAX
            && (stripe_len as usize) & (LEN_CHECK_EVERY_INSERTS - 1) != 0
        {
            return;
        }
        if self.len.sum().max(0) as usize <= limit
            || g.next_gen().is_some()
            || g.bin_count() * 2 > self.hot.bins_max
            || !std::ptr::eq(self.current(guard), g)
        {
            return;
        }
        if let Ok(Some(_)) = self.grow(g, guard, false, GrowCause::Load) {
            self.help_resize_of(g, guard, usize::MAX);
        }
    }
}

/// What a write did (or, for a write that changed nothing, why).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Wrote {
    /// The key was absent and is now present.
    Inserted,
    /// The key was present and its slot has been replaced.
    Updated,
    /// Insert of a present key, or update of an absent one: nothing written.
    Unchanged,
    /// Upsert-if-newer found this metadata, at least as new: nothing written.
    Stale(ObjectMeta),
}

impl Mode {
    /// The answer of a write that must not change the table, given what the
    /// search found (`None`: the write goes ahead).
    #[inline(always)]
    fn settled(self, found: Option<&Old>, meta: ObjectMeta) -> Option<Wrote> {
        match (self, found) {
            (Mode::Insert, Some(_)) | (Mode::Update, None) => Some(Wrote::Unchanged),
            (Mode::UpsertIfNewer, Some(old)) => {
                let stored = old.meta();
                (stored.version() >= meta.version()).then_some(Wrote::Stale(stored))
            }
            _ => None,
        }
    }
}

/// The valid slot a write found holding its key (under one header word). Its
/// metadata and value word are read only when needed, before the fence that
/// precedes the CAS validating them.
struct Old<'g> {
    slot: usize,
    tag: u16,
    line: &'g Line,
    pos: usize,
}

/// A chain link could not be followed (see `bin::Find::Torn`).
struct Torn;

impl<'g> Old<'g> {
    /// Searches the chain of bin `b` of `g` under `h`.
    #[inline(always)]
    fn find(g: &'g Gen, b: usize, h: u64, key: &Key) -> Result<Option<Old<'g>>, Torn> {
        match g.find(b, h, key) {
            Find::Found {
                slot,
                line,
                pos,
                tag,
            } => Ok(Some(Old {
                slot,
                tag,
                line,
                pos,
            })),
            Find::Absent => Ok(None),
            Find::Torn => Err(Torn),
        }
    }

    /// The stored metadata.
    #[inline(always)]
    fn meta(&self) -> ObjectMeta {
        ObjectMeta(self.line.w[word_meta(self.pos)].load(Ordering::Relaxed))
    }

    /// What the write that replaces this slot needs to know of it.
    #[inline(always)]
    fn replaced(self) -> Replaced {
        Replaced {
            slot: self.slot,
            tag: self.tag,
            word: self.line.w[word_value(self.pos)].load(Ordering::Relaxed),
        }
    }
}

/// The slot a write replaces: freed by its publish CAS, its value retired after.
struct Replaced {
    slot: usize,
    tag: u16,
    word: u64,
}

impl Replaced {
    /// The header that publishes reserved slot `slot` of `h` and frees the
    /// slot it replaces, if any.
    #[inline(always)]
    fn publish(h: u64, slot: usize, replaced: Option<&Replaced>) -> u64 {
        let h = header::with_slot(h, slot, SlotState::Valid);
        match replaced {
            Some(old) => header::with_slot(h, old.slot, SlotState::Empty),
            None => h,
        }
    }
}
