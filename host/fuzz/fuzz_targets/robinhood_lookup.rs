//! The NIC's Robinhood lookup (`splitkv_nic::index::robinhood_lookup::RobinhoodLookup::advance`,
//! Xenic §4.1.3) over arbitrary host memory: what a DMA read could return from
//! a torn or garbage table.
//!
//! Input: `key choice: u8`, `flags: u8`, three hint bytes, then patches of 11
//! bytes, `at_read: u8, word: u16, value: u64`: before DMA read number
//! `at_read` of the lookup (0 = before the first), one word of host memory
//! becomes `value` — garbage or a concurrent writer. `word % 4` picks what is
//! hit, `word / 4` which one: any word of the region, the link of a bucket
//! header or of a segment header (`value` taken modulo the buckets, so links
//! stay decodable and chains can loop), or a word of a slot in the key's
//! probe range. Flags: bit 0 starts from zeroed memory instead of the loaded
//! fixture table; bit 1 seeds the NIC's hints (d_i and the overflow head of
//! the key's segment, in range) from the hint bytes.
//!
//! Checks: nothing panics; the lookup ends within the reads its documented
//! retry bounds allow (never loops); a found value fits the table's value
//! limit; and with no patch applied, the answer is exactly the table's (a
//! quiescent table never fails a lookup, whatever the hints say).
#![no_main]

use libfuzzer_sys::fuzz_target;
use splitkv_host_fuzz::fixture::{key_for, region_from, robinhood_image};
use splitkv_host_fuzz::input::Input;
use splitkv_layout::robinhood_layout::{TableLayout, HEADER_LINK_OFFSET};
use splitkv_layout::Key;
use splitkv_nic::dma::read_vector;
use splitkv_nic::index::hints::SegmentHints;
use splitkv_nic::index::robinhood_lookup::{RobinhoodLookup, MOVED_RESTARTS_MAX, TORN_RETRIES_MAX};
use splitkv_nic::index::Next;

/// Most patches applied per input.
const PATCHES_MAX: usize = 64;

fuzz_target!(|data: &[u8]| {
    let image = robinhood_image();
    let layout = image.layout;
    let mut input = Input::new(data);
    let (Some(choice), Some(flags), Some(hint)) = (input.u8(), input.u8(), input.bytes(3)) else {
        return;
    };
    let key = key_for(choice);
    let zeroed = flags & 1 != 0;
    let region = if zeroed {
        region_from(&vec![0u8; image.bytes.len()])
    } else {
        region_from(&image.bytes)
    };
    let mut patches = Vec::new();
    while patches.len() < PATCHES_MAX {
        let (Some(at), Some(word), Some(value)) = (input.u8(), input.u16(), input.u64()) else {
            break;
        };
        patches.push((at as u32, patch_target(&layout, &key, word as usize, value)));
    }
    let mut hints = SegmentHints::new(&layout);
    let segment = layout.segment_of(layout.home_slot(&key));
    if flags & 2 != 0 {
        hints.observe(segment, hint[0] as usize % (layout.d_max() + 1));
        let bucket = (hint[1] as usize) % (layout.buckets() + 1);
        hints.set_overflow(segment, (bucket < layout.buckets()).then_some(bucket));
    }
    // Every retry or restart re-runs at most the main reads (2), a chain walk
    // from a hint (at most `buckets` links, then the lookup fails), the header,
    // a chain walk from the header (as long), the confirmation and the value
    // block.
    let reads_max =
        (TORN_RETRIES_MAX + MOVED_RESTARTS_MAX + 2) as usize * (7 + 2 * layout.buckets());
    let (mut lookup, mut next) = RobinhoodLookup::start(&layout, &hints, key);
    let mut patched = false;
    let mut buf = Vec::new();
    let mut reads_done = 0u32;
    let outcome = loop {
        let Next::Read(reads, n) = next else {
            break next;
        };
        assert!(
            (lookup.reads as usize) <= reads_max,
            "lookup of {key:?} still reading after {} reads",
            lookup.reads
        );
        for &(_, (at, value)) in patches.iter().filter(|p| p.0 == reads_done) {
            region
                .write_bytes(at, &value.to_le_bytes())
                .expect("in range");
            patched = true;
        }
        reads_done += 1;
        if read_vector(&region, &reads[..n], &mut buf).is_err() {
            // The DMA engine refuses a read outside the table: the request
            // fails there (the runtime aborts the transaction).
            assert!(patched || zeroed, "read outside an intact table: {reads:?}");
            return;
        }
        next = lookup.advance(&layout, &mut hints, &buf);
    };
    if let Next::Found { value, .. } = outcome {
        assert!(value.len() <= layout.value_bytes_max());
    }
    if patched || zeroed {
        return;
    }
    let mut expected = Vec::new();
    match (image.table.get(&key, &mut expected), outcome) {
        (Some(meta), Next::Found { meta: m, value }) => {
            assert_eq!((meta, expected.as_slice()), (m, value), "{key:?}");
        }
        (None, Next::Absent) => {}
        (want, got) => panic!("lookup of {key:?} in an intact table: {got:?}, table has {want:?}"),
    }
});

/// The byte offset and new value of a patch (see the module docs).
fn patch_target(layout: &TableLayout, key: &Key, word: usize, value: u64) -> (usize, u64) {
    let which = word / 4;
    let links = layout.buckets() as u64 + 1;
    match word % 4 {
        0 => ((which % (layout.region_bytes() / 8)) * 8, value),
        1 => (
            layout.bucket_header_offset(which % layout.buckets()) + HEADER_LINK_OFFSET,
            value % links,
        ),
        2 => (
            layout.segment_header_offset(which % layout.segments()) + HEADER_LINK_OFFSET,
            value % links,
        ),
        _ => {
            let slot =
                (layout.home_slot(key) + which % (layout.d_max() + 1)).min(layout.main_slots() - 1);
            let slot_words = layout.slot_bytes() / 8;
            (
                layout.slot_offset(slot) + (which / 4 % slot_words) * 8,
                value,
            )
        }
    }
}
