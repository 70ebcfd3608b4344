//! The NIC's DLHT lookup (`splitkv_nic::index::dlht_lookup::DlhtLookup::advance`,
//! Dandelion §6 read by DMA) over arbitrary host memory: what a DMA read could
//! return from a torn or garbage table.
//!
//! Input: `key choice: u8`, `flags: u8`, then patches of 12 bytes,
//! `at_read: u8, line: u16, word: u8, value: u64`: before DMA read number
//! `at_read`, word `word % 8` of line `line` (modulo the lines; line 0 is the
//! descriptor) becomes `value`. Flags: bit 0 starts from zeroed lines; bits
//! 1–2 choose the bin count the lookup starts with (unknown, the right one,
//! half, double), as the NIC remembers it from earlier lookups.
//!
//! Checks: nothing panics; the lookup ends within the reads its retry bound
//! allows; a found value is at most 8 bytes (inline); with no patch applied
//! the answer is the table's (a long value fails: the NIC cannot read
//! out-of-line values yet, and says so).
#![no_main]

use libfuzzer_sys::fuzz_target;
use splitkv_host_fuzz::fixture::{dlht_image, key_for, DlhtMemory};
use splitkv_host_fuzz::input::Input;
use splitkv_layout::dlht_layout::LINE_BYTES;
use splitkv_layout::dlht_layout::LINK_BUCKETS_PER_BIN_MAX;
use splitkv_nic::dma::{read_vector, HostMemoryError};
use splitkv_nic::index::dlht_lookup::{DlhtLookup, DLHT_RESIZE_RETRIES_MAX, DLHT_RETRIES_MAX};
use splitkv_nic::index::Next;

/// Most patches applied per input.
const PATCHES_MAX: usize = 64;

fuzz_target!(|data: &[u8]| {
    let image = dlht_image();
    let mut input = Input::new(data);
    let (Some(choice), Some(flags)) = (input.u8(), input.u8()) else {
        return;
    };
    let key = key_for(choice);
    let zeroed = flags & 1 != 0;
    let mut mem = DlhtMemory {
        bin_count: image.bin_count,
        lines: if zeroed {
            vec![[0u8; LINE_BYTES]; image.lines.len()]
        } else {
            image.lines.clone()
        },
    };
    let mut patches = Vec::new();
    while patches.len() < PATCHES_MAX {
        let (Some(at), Some(line), Some(word), Some(value)) =
            (input.u8(), input.u16(), input.u8(), input.u64())
        else {
            break;
        };
        let line = line as usize % mem.lines.len();
        patches.push((at as u32, line, (word as usize % 8) * 8, value));
    }
    let bins_known = match (flags >> 1) & 3 {
        0 => 0,
        1 => image.bin_count,
        2 => (image.bin_count / 2).max(1),
        _ => image.bin_count * 2,
    };
    // Every retry re-reads at most the descriptor, the bin and its links.
    let retries = DLHT_RETRIES_MAX as usize + DLHT_RESIZE_RETRIES_MAX as usize;
    let reads_max = (retries + 2) * (LINK_BUCKETS_PER_BIN_MAX + 2);
    let torn_reads_max = (DLHT_RETRIES_MAX as usize + 2) * (LINK_BUCKETS_PER_BIN_MAX + 2);
    let (mut lookup, mut next) = DlhtLookup::start(key, bins_known);
    let mut patched = false;
    let mut buf = Vec::new();
    let mut reads_done = 0u32;
    let outcome = loop {
        let Next::Read(reads, n) = next else {
            break next;
        };
        assert!(
            (lookup.reads as usize) <= reads_max,
            "DLHT lookup of {key:?} still reading after {} reads",
            lookup.reads
        );
        // Garbage that keeps a bin "pending" holds the lookup in its long
        // wait for a resize (`DLHT_RESIZE_RETRIES_MAX`); past the torn-copy
        // budget nothing more is learnt from it, and fuzzing stays fast.
        if (patched || zeroed) && (lookup.reads as usize) > torn_reads_max {
            return;
        }
        for &(_, line, at, value) in patches.iter().filter(|p| p.0 == reads_done) {
            mem.lines[line][at..at + 8].copy_from_slice(&value.to_le_bytes());
            patched = true;
        }
        reads_done += 1;
        next = match read_vector(&mem, &reads[..n], &mut buf) {
            Ok(()) => lookup.advance(&buf),
            // The host resized under the lookup: start again from the descriptor.
            Err(HostMemoryError::Stale) => lookup.restart(),
            Err(HostMemoryError::OutOfBounds(e)) => {
                assert!(patched || zeroed, "read outside an intact table: {e}");
                return;
            }
        };
    };
    if let Next::Found { value, .. } = outcome {
        assert!(
            value.len() <= 8,
            "inline DLHT value of {} bytes",
            value.len()
        );
    }
    if patched || zeroed {
        return;
    }
    let mut expected = Vec::new();
    match (image.table.get(&key, &mut expected), outcome) {
        (Some(meta), Next::Found { meta: m, value }) => {
            assert_eq!((meta, expected.as_slice()), (m, value), "{key:?}");
        }
        (Some(_), Next::Failed(_)) if expected.len() > 8 => {}
        (None, Next::Absent) => {}
        (want, got) => {
            panic!("DLHT lookup of {key:?} in an intact table: {got:?}, table has {want:?}")
        }
    }
});
