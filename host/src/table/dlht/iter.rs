//! Iteration (Dandelion §6): a walk over the bins of the generation current
//! when the walk starts. Each chain is read as one consistent snapshot (header,
//! slots, header); a `Moved` bin is read in the next generation instead, where
//! its keys are exactly those of its destination bins (`b`, and `b + n` if the
//! table doubled), so a
//! key present throughout the walk is visited exactly once even across resizes.

use std::collections::VecDeque;
use std::marker::PhantomData;

use super::bin::{Cursor, Gen};
use super::{value, Dlht};
use crate::table::sync::{fence, pin, spin_wait, Guard, Ordering};
use splitkv_layout::dlht_layout::{
    header, tags, word_id, word_meta, word_value, BinState, SLOTS_PER_CHAIN_MAX, SLOTS_PER_LINE,
    WORD_TAGS,
};
use splitkv_layout::{Key, ObjectMeta};

/// Calls `f` for every key of bin `b` of `g` (following `Moved` bins into the
/// next generation). `buf` is scratch space for values. The caller is pinned.
pub(crate) fn visit_bin(
    g: &Gen,
    b: usize,
    buf: &mut Vec<u8>,
    f: &mut impl FnMut(Key, ObjectMeta, &[u8]),
) {
    let mut snap = [(Key::default(), 0u64, 0u16, 0u64); SLOTS_PER_CHAIN_MAX];
    let count = loop {
        let h1 = g.header(b).load(Ordering::Acquire);
        match header::bin_state(h1) {
            BinState::Moved => {
                let next = g.next_gen().expect("a moved bin has a next generation");
                let n = g.bin_count();
                for d in (b..next.bin_count()).step_by(n) {
                    visit_bin(next, d, buf, f);
                }
                return;
            }
            BinState::Pending => {
                debug_assert!(false, "iteration reached a Pending bin");
                spin_wait();
                continue;
            }
            BinState::Live | BinState::Frozen => {}
        }
        let mut cur = Cursor::new(g, b);
        let mut valid = header::valid_mask(h1);
        let mut count = 0;
        let mut torn = false;
        while valid != 0 {
            let s = valid.trailing_zeros() as usize;
            valid &= valid - 1;
            let Some(line) = cur.line(s / SLOTS_PER_LINE) else {
                torn = true;
                break;
            };
            let pos = s % SLOTS_PER_LINE;
            let tag = tags::tag(line.w[WORD_TAGS].load(Ordering::Acquire), pos);
            let id = line.w[word_id(pos)].load(Ordering::Relaxed);
            let meta = line.w[word_meta(pos)].load(Ordering::Relaxed);
            let word = line.w[word_value(pos)].load(Ordering::Relaxed);
            snap[count] = (Key::new(tags::tag_table(tag), id), meta, tag, word);
            count += 1;
        }
        fence(Ordering::Acquire);
        if !torn && g.header(b).load(Ordering::Relaxed) == h1 {
            break count;
        }
        spin_wait();
    };
    for &(key, meta, tag, word) in &snap[..count] {
        buf.clear();
        // SAFETY: the slot was valid while we were pinned (header unchanged
        // around the reads) and the caller is still pinned.
        unsafe { value::copy_value(tags::tag_len_code(tag), word, buf) };
        f(key, ObjectMeta(meta), buf);
    }
}

/// Iterator over a [`Dlht`]'s `(key, meta, value)` triples; see
/// [`Dlht::for_each`] for what it sees under concurrent writes. Holds the
/// thread pinned (old memory is not reclaimed) until dropped.
pub struct Iter<'a> {
    _guard: Guard,
    gen: *const Gen,
    next_bin: usize,
    bin_count: usize,
    ready: VecDeque<(Key, ObjectMeta, Vec<u8>)>,
    buf: Vec<u8>,
    _table: PhantomData<&'a Dlht>,
}

impl<'a> Iter<'a> {
    pub(crate) fn new(dlht: &'a Dlht) -> Iter<'a> {
        let guard = pin();
        let gen = dlht.current(&guard) as *const Gen;
        // SAFETY: just loaded while pinned.
        let bin_count = unsafe { (*gen).bin_count() };
        Iter {
            _guard: guard,
            gen,
            next_bin: 0,
            bin_count,
            ready: VecDeque::new(),
            buf: Vec::new(),
            _table: PhantomData,
        }
    }
}

impl Iterator for Iter<'_> {
    type Item = (Key, ObjectMeta, Vec<u8>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return Some(item);
            }
            if self.next_bin >= self.bin_count {
                return None;
            }
            // SAFETY: `gen` was current when `_guard` was taken and `_guard`
            // is still held, so it has not been freed.
            let g = unsafe { &*self.gen };
            let ready = &mut self.ready;
            visit_bin(g, self.next_bin, &mut self.buf, &mut |k, m, v| {
                ready.push_back((k, m, v.to_vec()))
            });
            self.next_bin += 1;
        }
    }
}
