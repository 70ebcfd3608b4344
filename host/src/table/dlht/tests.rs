//! Unit tests of the link pool (`pool.rs`, `bin.rs`): races that the public
//! API cannot arrange deterministically.

use super::bin::Gen;
use super::*;
use splitkv_layout::dlht_layout::SlotState;

/// A header in which chain slots `0..valid` are valid and the rest empty.
fn header_with_valid(valid: usize) -> u64 {
    (0..valid).fold(0, |h, s| header::with_slot(h, s, SlotState::Valid))
}

/// A thread that loses the race to install a link bucket (another thread
/// extends the chain between its taking a line and installing it) gives its
/// line back: the chain gets one line, and every other line of the pool can
/// still be taken.
#[test]
fn a_lost_install_race_gives_its_line_back() {
    let g = Gen::new(1, false);
    let full = header_with_valid(SLOTS_PER_LINE);
    let winner = || assert_eq!(g.extend_chain(0, full), Ok(()));
    assert_eq!(g.extend_chain_racing(0, full, winner), Ok(()));
    let mut cur = bin::Cursor::new(&g, 0);
    assert!(cur.line(1).is_some() && cur.line(2).is_none());
    assert_eq!(g.links_used(), 2, "both threads took a line");
    let mut left = 0;
    while g.pool.take(&g.links).is_ok() {
        left += 1;
    }
    assert_eq!(left, g.links.len() - 2, "the loser's line leaked");
}
