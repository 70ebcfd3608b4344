//! Re-replication messages (`wire::CopyMsg`): encode/decode round
//! trips, and typed errors (never a panic) for arbitrary or corrupted bytes.

use proptest::prelude::*;
use splitkv_layout::wire::{CopyMsg, MsgKind, COPY_MESSAGE_BYTES};
use splitkv_layout::DecodeError;

proptest! {
    #[test]
    fn done_round_trips(epoch in any::<u32>(), shard in any::<u16>(), objects in any::<u32>()) {
        let m = CopyMsg::Done { epoch, shard, objects };
        let mut b = Vec::new();
        m.encode(&mut b);
        prop_assert_eq!(b.len(), COPY_MESSAGE_BYTES);
        prop_assert_eq!(CopyMsg::decode(&b), Ok(m));
        prop_assert_eq!(m.epoch(), epoch);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..32)) {
        let r = CopyMsg::decode(&bytes);
        if bytes.len() != COPY_MESSAGE_BYTES || bytes[0] != 1 {
            prop_assert!(r.is_err());
        }
    }

    #[test]
    fn truncated_or_extended_is_an_error(cut in 0..COPY_MESSAGE_BYTES, extra in any::<u8>()) {
        let mut b = Vec::new();
        CopyMsg::Done { epoch: 7, shard: 2, objects: 9 }.encode(&mut b);
        prop_assert!(CopyMsg::decode(&b[..cut]).is_err());
        b.push(extra);
        prop_assert!(CopyMsg::decode(&b).is_err());
    }
}

#[test]
fn unknown_tag_is_named() {
    let mut b = Vec::new();
    CopyMsg::Done {
        epoch: 1,
        shard: 0,
        objects: 0,
    }
    .encode(&mut b);
    b[0] = 9;
    assert!(matches!(
        CopyMsg::decode(&b),
        Err(DecodeError::BadTag { tag: 9, .. })
    ));
    assert_eq!(MsgKind::Copy.flow(), splitkv_layout::wire::Flow::Recovery);
}
