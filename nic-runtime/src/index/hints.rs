//! Location hints of the NIC index (Xenic §4.1.3): per host-table segment, the
//! highest known displacement d_i of objects whose home is in the segment, and
//! the segment's overflow-chain head once seen.
//!
//! Hints only make lookups cheaper; a stale hint costs an extra DMA read, never
//! a wrong answer (see [`crate::index::robinhood_lookup`]).

use splitkv_layout::robinhood_layout::{decode_slot, SegmentHeader, SlotRead, TableLayout};
use splitkv_layout::{DecodeError, Key};

/// Overflow head not known yet.
const OVERFLOW_UNKNOWN: u32 = u32::MAX;
/// Known to have no overflow chain.
const OVERFLOW_NONE: u32 = u32::MAX - 1;

/// What the NIC knows about a segment's overflow chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverflowHint {
    /// Never read: the segment header must be read first.
    Unknown,
    /// The segment had no chain when last read.
    None,
    /// The chain started at this bucket when last read.
    Head(usize),
}

/// Per-segment hints: d_i (u16) and overflow head (u32) — 6 bytes per segment.
#[derive(Debug, Clone)]
pub struct SegmentHints {
    d_known: Vec<u16>,
    overflow: Vec<u32>,
    d_max: usize,
}

impl SegmentHints {
    /// Hints for `layout`, all d_i = 0 and overflow unknown.
    pub fn new(layout: &TableLayout) -> SegmentHints {
        let n = layout.segments();
        SegmentHints {
            d_known: vec![0; n],
            overflow: vec![OVERFLOW_UNKNOWN; n],
            d_max: layout.d_max(),
        }
    }

    /// No segments (for host tables without displacement, such as the DLHT).
    pub fn none() -> SegmentHints {
        SegmentHints {
            d_known: Vec::new(),
            overflow: Vec::new(),
            d_max: 0,
        }
    }

    /// Known displacement d_i of `segment`.
    #[inline]
    pub fn d_known(&self, segment: usize) -> usize {
        self.d_known[segment] as usize
    }

    /// Records that an object with home in `segment` sits at `displacement`.
    #[inline]
    pub fn observe(&mut self, segment: usize, displacement: usize) {
        let d = displacement.min(self.d_max).min(u16::MAX as usize) as u16;
        if d > self.d_known[segment] {
            self.d_known[segment] = d;
        }
    }

    /// The overflow hint of `segment`.
    #[inline]
    pub fn overflow(&self, segment: usize) -> OverflowHint {
        match self.overflow[segment] {
            OVERFLOW_UNKNOWN => OverflowHint::Unknown,
            OVERFLOW_NONE => OverflowHint::None,
            b => OverflowHint::Head(b as usize),
        }
    }

    /// Records the overflow head read from `segment`'s header.
    #[inline]
    pub fn set_overflow(&mut self, segment: usize, head: Option<usize>) {
        self.overflow[segment] = match head {
            None => OVERFLOW_NONE,
            Some(b) => (b as u32).min(OVERFLOW_NONE - 1),
        };
    }

    /// Learns from a copied run of main-array slots starting at slot
    /// `first_slot`: every object seen updates d_i of its home segment.
    /// Returns the slot index (within the run) and contents of `want`, if seen,
    /// and whether any slot was torn.
    pub fn observe_slots<'a>(
        &mut self,
        layout: &TableLayout,
        first_slot: usize,
        bytes: &'a [u8],
        want: Option<&Key>,
    ) -> Result<(Option<SlotRead<'a>>, bool), DecodeError> {
        let mut found = None;
        let mut torn = false;
        for (i, slot) in bytes.chunks_exact(layout.slot_bytes()).enumerate() {
            match decode_slot(layout, slot)? {
                r @ SlotRead::Object { key, .. } => {
                    let pos = first_slot + i;
                    let home = layout.home_slot(&key);
                    if pos >= home {
                        self.observe(layout.segment_of(home), pos - home);
                    }
                    if want == Some(&key) {
                        found = Some(r);
                    }
                }
                SlotRead::Torn => torn = true,
                SlotRead::Empty => {}
            }
        }
        Ok((found, torn))
    }

    /// Learns every segment's d_i and overflow head from a full copy of the
    /// table region (a NIC warm-up scan; one pass, no lookups needed).
    pub fn warm_up(
        &mut self,
        layout: &TableLayout,
        region_bytes: &[u8],
    ) -> Result<(), DecodeError> {
        let main = layout.main_offset();
        let len = layout.main_slots() * layout.slot_bytes();
        let slots = region_bytes
            .get(main..main + len)
            .ok_or(DecodeError::Truncated {
                what: "table region",
                need: main + len,
                have: region_bytes.len(),
            })?;
        self.observe_slots(layout, 0, slots, None)?;
        for s in 0..self.segments() {
            let off = layout.segment_header_offset(s);
            let h = region_bytes
                .get(off..off + 64)
                .ok_or(DecodeError::Truncated {
                    what: "table region",
                    need: off + 64,
                    have: region_bytes.len(),
                })?;
            self.set_overflow(s, SegmentHeader::decode(layout, h)?.overflow_head);
        }
        Ok(())
    }

    /// Number of segments.
    pub fn segments(&self) -> usize {
        self.d_known.len()
    }

    /// NIC memory these hints take, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.d_known.len() * 2 + self.overflow.len() * 4
    }
}
