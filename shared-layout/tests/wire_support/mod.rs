//! Shared by the wire tests: the strategies of the entries the multi-part
//! messages carry and the codec properties every such message type has
//! (`rebuild_wire.rs`, `recovery_wire.rs`), and whole packets of modelled
//! messages (`wire.rs`, `dnl_wire.rs`).
#![allow(dead_code)]

use proptest::prelude::*;
use splitkv_layout::wire::{
    BodyWriter, Decision, MsgHeader, NodeMask, PacketHeader, RecordEvidence, RecordKind,
    MASK_NODES_MAX,
};
use splitkv_layout::TxId;

/// An arbitrary record's evidence: any transaction, shard, kind and write
/// shards.
pub fn record() -> impl Strategy<Value = RecordEvidence> {
    (
        any::<u64>(),
        0..MASK_NODES_MAX as u16,
        0..RecordKind::ALL.len(),
        any::<u16>(),
    )
        .prop_map(|(tx_id, shard, k, m)| RecordEvidence {
            tx_id: TxId::from_bits(tx_id),
            shard,
            kind: RecordKind::ALL[k],
            write_shards: NodeMask(m),
        })
}

/// An arbitrary decision (commit or abort) of any transaction.
pub fn decision() -> impl Strategy<Value = Decision> {
    (any::<u64>(), any::<bool>()).prop_map(|(tx_id, commit)| Decision {
        tx_id: TxId::from_bits(tx_id),
        commit,
    })
}

/// The codec properties of message type `$msg` (with `encode(&self, &mut
/// Vec<u8>) -> Result<(), _>` and `decode(&[u8]) -> Result<$msg,
/// DecodeError>`), each a proptest of 256 cases over messages drawn from
/// `$strategy`:
///
/// - `round_trip`: a message encodes within `$bytes_max` bytes and decodes
///   back to itself;
/// - `truncation_and_trailing_bytes_are_errors`: every strict prefix of an
///   encoding fails to decode, and an encoding with a byte appended is
///   `DecodeError::Inconsistent`;
/// - `arbitrary_bytes_never_panic`: up to 256 arbitrary bytes decode to an
///   error or to a message that encodes back to exactly those bytes.
#[allow(unused_macros)] // used by the multi-part message tests only
macro_rules! codec_properties {
    ($msg:ty, $strategy:expr, $bytes_max:expr) => {
        ::proptest::proptest! {
            #![proptest_config(::proptest::prelude::ProptestConfig::with_cases(256))]

            #[test]
            fn round_trip(m in $strategy) {
                let mut out = Vec::new();
                m.encode(&mut out).unwrap();
                ::proptest::prop_assert!(out.len() <= $bytes_max);
                ::proptest::prop_assert_eq!(<$msg>::decode(&out).unwrap(), m);
            }

            #[test]
            fn truncation_and_trailing_bytes_are_errors(
                m in $strategy,
                cut in ::proptest::prelude::any::<::proptest::sample::Index>(),
            ) {
                let mut out = Vec::new();
                m.encode(&mut out).unwrap();
                let at = cut.index(out.len());
                ::proptest::prop_assert!(<$msg>::decode(&out[..at]).is_err());
                out.push(0);
                let trailing = matches!(
                    <$msg>::decode(&out),
                    Err(::splitkv_layout::DecodeError::Inconsistent { .. })
                );
                ::proptest::prop_assert!(trailing);
            }

            #[test]
            fn arbitrary_bytes_never_panic(
                bytes in ::proptest::collection::vec(::proptest::prelude::any::<u8>(), 0..256),
            ) {
                if let Ok(m) = <$msg>::decode(&bytes) {
                    let mut out = Vec::new();
                    m.encode(&mut out).unwrap();
                    ::proptest::prop_assert_eq!(out, bytes);
                }
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use codec_properties;

/// One packet from node `src` to node `dst` in epoch `epoch` carrying
/// `msgs`, each written by `encode` as one whole message.
pub fn packet_of<M>(
    msgs: &[M],
    mut encode: impl FnMut(&M, &mut BodyWriter),
    (src, dst, epoch): (u16, u16, u32),
) -> Vec<u8> {
    let (mut out, mut body, mut w) = (Vec::new(), Vec::new(), BodyWriter::new());
    for m in msgs {
        encode(m, &mut w);
        MsgHeader::whole(w.kind(), w.bytes().len() as u32).encode(&mut body);
        body.extend_from_slice(w.bytes());
    }
    PacketHeader {
        src,
        dst,
        epoch,
        count: msgs.len() as u16,
        len: body.len() as u32,
        ..PacketHeader::default()
    }
    .encode(&mut out);
    out.extend_from_slice(&body);
    out
}
