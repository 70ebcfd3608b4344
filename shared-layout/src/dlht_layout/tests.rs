//! Unit tests of the DLHT line format.

use super::*;

#[test]
fn masks_agree_with_states() {
    let mut h = 0u64;
    h = header::with_slot(h, 0, SlotState::Valid);
    h = header::with_slot(h, 3, SlotState::Reserved);
    h = header::with_slot(h, 15, SlotState::Valid);
    h = header::with_bin_state(h, BinState::Frozen);
    assert_eq!(header::valid_mask(h), 1 | 1 << 15);
    assert_eq!(header::reserved_mask(h), 1 << 3);
    assert_eq!(header::empty_mask(h), 0xFFFF & !(1 | 1 << 3 | 1 << 15));
    assert_eq!(header::bin_state(h), BinState::Frozen);
    assert!(header::any_valid_from(h, 0));
    assert!(header::any_valid_from(h, 1));
    assert!(header::any_valid_from(h, 15));
    assert!(!header::any_valid_from(
        header::with_slot(h, 15, SlotState::Empty),
        1
    ));
    let b = header::bumped(h);
    assert_eq!(header::version(b), 1);
    assert_eq!(header::slot_states(b), header::slot_states(h));
    let top = h | (HEADER_VERSION_MASK << 34);
    assert_eq!(header::version(header::bumped(top)), 0);
    assert_eq!(header::bin_state(header::bumped(top)), BinState::Frozen);
}

#[test]
fn header_round_trips() {
    let mut hdr = BinHeader::from_word(0).unwrap();
    hdr.slots[5] = SlotState::Valid;
    hdr.bin_state = BinState::Pending;
    hdr.version = 12345;
    assert_eq!(BinHeader::from_word(hdr.to_word()).unwrap(), hdr);
    assert!(BinHeader::from_word(3).is_err());
}

#[test]
fn tags_pack() {
    let t = tags::make_tag(TABLE_ID_MAX, LEN_CODE_OUT_OF_LINE);
    assert_eq!(tags::tag_table(t), TABLE_ID_MAX);
    assert_eq!(tags::tag_len_code(t), LEN_CODE_OUT_OF_LINE);
    let w = tags::with_link((t as u64) << 16, 77);
    assert_eq!(tags::tag(w, 1), t);
    assert_eq!(tags::tag(w, 0), 0);
    assert_eq!(tags::link(w), 77);
}

/// An out-of-line record of a value at the node limit (4 KiB) decodes; one of
/// the table format's limit too; one byte more, or a short record, is a
/// typed error.
#[test]
fn out_of_line_records_at_the_limits() {
    let record = |len: usize| {
        let mut r = (len as u64).to_le_bytes().to_vec();
        r.extend((0..len).map(|i| i as u8));
        r
    };
    let node = record(crate::VALUE_BYTES_MAX);
    let value = decode_out_of_line(&node).unwrap();
    assert_eq!(value.len(), crate::VALUE_BYTES_MAX);
    assert_eq!(value[4095], 255);
    assert!(matches!(
        decode_out_of_line(&node[..node.len() - 1]),
        Err(DecodeError::Truncated { .. })
    ));
    assert!(decode_out_of_line(&record(DLHT_VALUE_BYTES_MAX)).is_ok());
    let mut over = (DLHT_VALUE_BYTES_MAX as u64 + 1).to_le_bytes().to_vec();
    over.resize(8 + DLHT_VALUE_BYTES_MAX + 1, 0);
    assert_eq!(
        decode_out_of_line(&over),
        Err(DecodeError::TooLarge {
            what: "dlht out-of-line value",
            len: DLHT_VALUE_BYTES_MAX + 1,
            max: DLHT_VALUE_BYTES_MAX,
        })
    );
}
