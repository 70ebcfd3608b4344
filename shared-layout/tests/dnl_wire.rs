//! The Dnl kinds' bodies (Get … ReadableAck): round trips against a model
//! through the writer, the decoder and whole packets; truncated, scribbled
//! and random bytes give errors, never panics; the counts, the commit flag
//! and the status byte are checked.

mod wire_support;

use proptest::prelude::*;
use splitkv_layout::wire::*;
use splitkv_layout::{DecodeError, Key, ObjectMeta, TxId, KEY_BYTES};

type Items = Vec<(Key, u64, Vec<u8>)>;

/// A Dnl message as plain data (the model).
#[derive(Debug, Clone, PartialEq)]
enum Model {
    Get(TxId, Vec<Key>),
    GetResp(TxId, ReplyStatus, u64, Items),
    Lock(TxId, u16, Vec<(Key, u64)>, Items),
    Replicate(TxId, u16, Items),
    Unlock(TxId, bool, Vec<Key>, Items),
    Readable(TxId, Items),
    /// LockResp, ReplicateAck, UnlockAck, ReadableAck.
    Ack(MsgKind, TxId, ReplyStatus),
}

const ACKS: [MsgKind; 4] = [
    MsgKind::LockResp,
    MsgKind::ReplicateAck,
    MsgKind::UnlockAck,
    MsgKind::ReadableAck,
];

const DNL_KINDS: [MsgKind; 10] = [
    MsgKind::Get,
    MsgKind::GetResp,
    MsgKind::Lock,
    MsgKind::LockResp,
    MsgKind::Replicate,
    MsgKind::ReplicateAck,
    MsgKind::Unlock,
    MsgKind::UnlockAck,
    MsgKind::Readable,
    MsgKind::ReadableAck,
];

fn key() -> impl Strategy<Value = Key> {
    (any::<u32>(), any::<u64>()).prop_map(|(t, i)| Key::new(t, i))
}

fn items() -> impl Strategy<Value = Items> {
    prop::collection::vec(
        (
            key(),
            any::<u64>(),
            prop::collection::vec(any::<u8>(), 0..40),
        ),
        0..6,
    )
}

fn status() -> impl Strategy<Value = ReplyStatus> {
    prop::sample::select(ReplyStatus::ALL.to_vec())
}

fn tx() -> impl Strategy<Value = TxId> {
    any::<u64>().prop_map(TxId::from_bits)
}

fn model() -> impl Strategy<Value = Model> {
    prop_oneof![
        (tx(), prop::collection::vec(key(), 0..8)).prop_map(|(t, k)| Model::Get(t, k)),
        (tx(), status(), any::<u64>(), items()).prop_map(|(t, s, c, i)| Model::GetResp(t, s, c, i)),
        (
            tx(),
            any::<u16>(),
            prop::collection::vec((key(), any::<u64>()), 0..8),
            items()
        )
            .prop_map(|(t, m, v, i)| Model::Lock(t, m, v, i)),
        (tx(), any::<u16>(), items()).prop_map(|(t, m, i)| Model::Replicate(t, m, i)),
        (
            tx(),
            any::<bool>(),
            prop::collection::vec(key(), 0..8),
            items()
        )
            .prop_map(|(t, c, k, i)| Model::Unlock(t, c, k, i)),
        (tx(), items()).prop_map(|(t, i)| Model::Readable(t, i)),
        (prop::sample::select(ACKS.to_vec()), tx(), status())
            .prop_map(|(k, t, s)| Model::Ack(k, t, s)),
    ]
}

fn push_items(w: &mut BodyWriter, items: &Items) {
    for (k, m, v) in items {
        w.push_item(k, ObjectMeta(*m), v);
    }
}

fn encode(m: &Model, w: &mut BodyWriter) {
    match m {
        Model::Get(t, keys) => {
            w.begin_get(*t);
            keys.iter().for_each(|k| w.push_get_key(k));
        }
        Model::GetResp(t, s, clean, i) => {
            w.begin_get_resp(*t, *s, *clean);
            push_items(w, i);
        }
        Model::Lock(t, shards, versions, i) => {
            w.begin_lock(*t, NodeMask(*shards));
            versions.iter().for_each(|(k, v)| w.push_version(k, *v));
            push_items(w, i);
        }
        Model::Replicate(t, shards, i) => {
            w.begin_replicate(*t, NodeMask(*shards));
            push_items(w, i);
        }
        Model::Unlock(t, commit, keys, i) => {
            w.begin_unlock(*t, *commit);
            keys.iter().for_each(|k| w.push_unlock_key(k));
            push_items(w, i);
        }
        Model::Readable(t, i) => {
            w.begin_readable(*t);
            push_items(w, i);
        }
        Model::Ack(kind, t, s) => w.ack(*kind, *t, *s),
    }
}

fn to_model(b: &Body<'_>) -> Model {
    let items = |l: &ItemList<'_>| -> Items {
        l.iter()
            .map(|i| (i.key, i.meta.0, i.value.to_vec()))
            .collect()
    };
    match b {
        Body::Get { tx_id, keys } => Model::Get(*tx_id, keys.iter().collect()),
        Body::GetResp {
            tx_id,
            status,
            clean,
            items: i,
        } => Model::GetResp(*tx_id, *status, *clean, items(i)),
        Body::Lock {
            tx_id,
            lock_shards,
            reads,
            items: i,
        } => Model::Lock(*tx_id, lock_shards.0, reads.iter().collect(), items(i)),
        Body::Replicate {
            tx_id,
            write_shards,
            items: i,
        } => Model::Replicate(*tx_id, write_shards.0, items(i)),
        Body::Unlock {
            tx_id,
            commit,
            keys,
            items: i,
        } => Model::Unlock(*tx_id, *commit, keys.iter().collect(), items(i)),
        Body::Readable { tx_id, items: i } => Model::Readable(*tx_id, items(i)),
        Body::LockResp { tx_id, status }
        | Body::ReplicateAck { tx_id, status }
        | Body::UnlockAck { tx_id, status }
        | Body::ReadableAck { tx_id, status } => Model::Ack(b.kind(), *tx_id, *status),
        other => panic!("not a Dnl body: {other:?}"),
    }
}

fn packet(msgs: &[Model]) -> Vec<u8> {
    wire_support::packet_of(msgs, encode, (1, 2, 3))
}

proptest! {
    #[test]
    fn dnl_bodies_round_trip(m in model()) {
        let mut w = BodyWriter::new();
        encode(&m, &mut w);
        let b = Body::decode(w.kind(), w.bytes()).unwrap();
        prop_assert_eq!(b.kind(), w.kind());
        prop_assert_eq!(to_model(&b), m);
    }

    #[test]
    fn dnl_packets_round_trip(msgs in prop::collection::vec(model(), 1..10)) {
        let p = packet(&msgs);
        let (h, it) = decode_packet(&p).unwrap();
        prop_assert_eq!(h.count as usize, msgs.len());
        let got: Vec<Model> = it
            .map(|r| {
                let (mh, b) = r.unwrap();
                assert_eq!(mh.flow, mh.kind.flow());
                to_model(&b)
            })
            .collect();
        prop_assert_eq!(got, msgs);
    }

    #[test]
    fn truncated_dnl_bodies_fail(m in model(), cut in any::<prop::sample::Index>()) {
        let mut w = BodyWriter::new();
        encode(&m, &mut w);
        let n = cut.index(w.bytes().len());
        prop_assert!(Body::decode(w.kind(), &w.bytes()[..n]).is_err());
    }

    #[test]
    fn random_bytes_as_dnl_bodies_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..600),
        kind in prop::sample::select(DNL_KINDS.to_vec()),
    ) {
        let _ = Body::decode(kind, &bytes);
    }

    #[test]
    fn scribbled_dnl_packets_never_panic(
        msgs in prop::collection::vec(model(), 1..6),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let mut p = packet(&msgs);
        let i = at.index(p.len());
        p[i] = byte;
        if let Ok((_, it)) = decode_packet(&p) {
            for r in it { let _ = r; }
        }
    }
}

#[test]
fn dnl_kinds_travel_on_their_flows_at_format_6() {
    assert_eq!(PACKET_FORMAT_VERSION, 6);
    for k in DNL_KINDS {
        let expected = match k {
            MsgKind::Get | MsgKind::GetResp => Flow::Execution,
            _ => Flow::Commit,
        };
        assert_eq!(k.flow(), expected, "{k:?}");
    }
    // Kind numbers follow the single-key kinds, 19 ..= 28.
    let numbers: Vec<u8> = DNL_KINDS.iter().map(|&k| k as u8).collect();
    assert_eq!(numbers, (19..=28).collect::<Vec<u8>>());
}

#[test]
fn malformed_dnl_bodies_are_typed_errors() {
    let tx = TxId::from_bits(9);
    // An Unlock commit flag other than 0 or 1.
    let mut w = BodyWriter::new();
    w.begin_unlock(tx, true);
    let mut bytes = w.bytes().to_vec();
    bytes[8] = 2;
    assert!(matches!(
        Body::decode(MsgKind::Unlock, &bytes),
        Err(DecodeError::BadTag {
            what: "Unlock commit flag",
            tag: 2
        })
    ));
    // A Lock whose two counts together pass the per-message bound.
    w.begin_lock(tx, NodeMask(1));
    let mut bytes = w.bytes().to_vec();
    let half = (ITEMS_PER_MESSAGE_MAX / 2 + 1) as u16;
    bytes[10..12].copy_from_slice(&half.to_le_bytes());
    bytes[12..14].copy_from_slice(&half.to_le_bytes());
    bytes.resize(bytes.len() + half as usize * (KEY_BYTES + 8), 0);
    assert!(matches!(
        Body::decode(MsgKind::Lock, &bytes),
        Err(DecodeError::TooLarge { .. })
    ));
    // A Get answered with an unknown status.
    w.begin_get_resp(tx, ReplyStatus::Ok, u64::MAX);
    let mut bytes = w.bytes().to_vec();
    bytes[8] = ReplyStatus::ALL.len() as u8;
    assert!(matches!(
        Body::decode(MsgKind::GetResp, &bytes),
        Err(DecodeError::BadTag { .. })
    ));
    // Trailing bytes after a whole body.
    w.ack(MsgKind::ReadableAck, tx, ReplyStatus::Ok);
    let mut bytes = w.bytes().to_vec();
    bytes.push(0);
    assert!(Body::decode(MsgKind::ReadableAck, &bytes).is_err());
    // Items past the versions' count are the items' own: a Lock announcing
    // one item and carrying none is short.
    w.begin_lock(tx, NodeMask(1));
    w.push_version(&Key::new(0, 1), 4);
    let mut bytes = w.bytes().to_vec();
    bytes[12..14].copy_from_slice(&1u16.to_le_bytes());
    assert!(Body::decode(MsgKind::Lock, &bytes).is_err());
}
