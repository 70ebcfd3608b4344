//! The transaction id (`splitkv_layout::TxId`): its fields round-trip through
//! the accessors and the raw `u64` over their full ranges, every `u64`
//! decodes to an id that encodes back to the same bytes, and the layout is
//! the one the wire always carried (`coordinator << 48 | slot << 32 |
//! generation`, little-endian).

use proptest::prelude::*;
use splitkv_layout::wire::{Body, BodyWriter, MsgKind, NodeId};
use splitkv_layout::{FixedState, Reader, TxId, TX_ID_BYTES};
use std::hash::BuildHasher;

proptest! {
    #[test]
    fn fields_round_trip(n in any::<NodeId>(), s in 0..TxId::SLOTS, g in any::<u32>()) {
        let t = TxId::new(n, s, g);
        prop_assert_eq!((t.coordinator(), t.slot(), t.generation()), (n, s, g));
        prop_assert_eq!(t.to_bits(), (n as u64) << 48 | (s as u64) << 32 | g as u64);
        prop_assert_eq!(TxId::from_bits(t.to_bits()), t);
        prop_assert_eq!(t.to_string(), format!("{n}:{s}:{g}"));
    }

    #[test]
    fn every_u64_is_an_id(bits in any::<u64>()) {
        let t = TxId::from_bits(bits);
        prop_assert_eq!(t.to_bits(), bits);
        prop_assert_eq!(TxId::new(t.coordinator(), t.slot(), t.generation()), t);
        prop_assert_eq!(t.to_le_bytes(), bits.to_le_bytes());
        let bytes = bits.to_le_bytes();
        let mut r = Reader::new(&bytes, "tx id");
        prop_assert_eq!(r.tx_id(), Ok(t));
        prop_assert_eq!(r.remaining(), 0);
        prop_assert_eq!(format!("{t:#x}"), format!("{bits:#x}"));
    }

    #[test]
    fn order_and_hash_are_the_raw_ids(a in any::<u64>(), b in any::<u64>()) {
        let (x, y) = (TxId::from_bits(a), TxId::from_bits(b));
        prop_assert_eq!(x.cmp(&y), a.cmp(&b));
        let h = FixedState;
        prop_assert_eq!(h.hash_one(x), h.hash_one(a));
    }
}

#[test]
fn a_message_carries_the_id_as_it_always_did() {
    let t = TxId::new(2, 5, 17);
    let mut w = BodyWriter::new();
    w.abort_log(t);
    assert_eq!(w.bytes(), &((2u64 << 48) | (5 << 32) | 17).to_le_bytes());
    assert_eq!(w.bytes().len(), TX_ID_BYTES);
    assert_eq!(
        Body::decode(MsgKind::AbortLog, w.bytes()),
        Ok(Body::AbortLog { tx_id: t })
    );
}

#[test]
fn a_short_read_is_truncated() {
    let mut r = Reader::new(&[1, 2, 3], "tx id");
    assert!(r.tx_id().is_err());
}
