//! Wire messages and packets: round trips against a model, and bad bytes give
//! errors, never panics.

mod wire_support;

use proptest::prelude::*;
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::wire::*;
use splitkv_layout::{DecodeError, Key, ObjectMeta, TxId};

/// A message as plain data (the model).
#[derive(Debug, Clone, PartialEq)]
enum Model {
    Execute(TxId, Vec<Key>, Vec<Key>),
    ExecuteResp(TxId, ReplyStatus, Vec<(Key, u64, Vec<u8>)>),
    Validate(TxId, Vec<(Key, u64)>),
    ValidateResp(TxId, ReplyStatus),
    Items(bool, TxId, Vec<(Key, u64, Vec<u8>)>),
    Ack(bool, TxId, ReplyStatus),
    Abort(TxId, Vec<Key>),
    AbortLog(TxId),
    AbortLogAck(TxId, ReplyStatus),
    GetOne(TxId, Key),
    GetOneResp(TxId, ReplyStatus, Option<(Key, u64, Vec<u8>)>),
    WriteOne(TxId, Vec<u8>),
    WriteOneResp(TxId, TxStatus, Vec<u8>),
}

fn key() -> impl Strategy<Value = Key> {
    (any::<u32>(), any::<u64>()).prop_map(|(t, i)| Key::new(t, i))
}

fn item() -> impl Strategy<Value = (Key, u64, Vec<u8>)> {
    (
        key(),
        any::<u64>(),
        prop::collection::vec(any::<u8>(), 0..40),
    )
}

fn status() -> impl Strategy<Value = ReplyStatus> {
    prop::sample::select(ReplyStatus::ALL.to_vec())
}

/// Any transaction id: every `u64` is one.
fn tx() -> impl Strategy<Value = TxId> {
    any::<u64>().prop_map(TxId::from_bits)
}

fn model() -> impl Strategy<Value = Model> {
    prop_oneof![
        (
            tx(),
            prop::collection::vec(key(), 0..8),
            prop::collection::vec(key(), 0..8)
        )
            .prop_map(|(t, r, l)| Model::Execute(t, r, l)),
        (tx(), status(), prop::collection::vec(item(), 0..6))
            .prop_map(|(t, s, i)| Model::ExecuteResp(t, s, i)),
        (tx(), prop::collection::vec((key(), any::<u64>()), 0..8))
            .prop_map(|(t, v)| Model::Validate(t, v)),
        (tx(), status()).prop_map(|(t, s)| Model::ValidateResp(t, s)),
        (any::<bool>(), tx(), prop::collection::vec(item(), 0..6))
            .prop_map(|(c, t, i)| Model::Items(c, t, i)),
        (any::<bool>(), tx(), status()).prop_map(|(c, t, s)| Model::Ack(c, t, s)),
        (tx(), prop::collection::vec(key(), 0..8)).prop_map(|(t, k)| Model::Abort(t, k)),
        tx().prop_map(Model::AbortLog),
        (tx(), status()).prop_map(|(t, s)| Model::AbortLogAck(t, s)),
        (tx(), key()).prop_map(|(t, k)| Model::GetOne(t, k)),
        (tx(), status(), prop::option::of(item())).prop_map(|(t, s, i)| Model::GetOneResp(t, s, i)),
        (tx(), prop::collection::vec(any::<u8>(), 0..80)).prop_map(|(t, a)| Model::WriteOne(t, a)),
        (
            tx(),
            prop::sample::select(TxStatus::ALL.to_vec()),
            prop::collection::vec(any::<u8>(), 0..80)
        )
            .prop_map(|(t, s, r)| Model::WriteOneResp(t, s, r)),
    ]
}

fn encode(m: &Model, w: &mut BodyWriter) {
    match m {
        Model::Execute(t, r, l) => {
            w.begin_execute(*t);
            r.iter().for_each(|k| w.push_read(k));
            l.iter().for_each(|k| w.push_lock(k));
        }
        Model::ExecuteResp(t, s, items) => {
            w.begin_execute_resp(*t, *s);
            items
                .iter()
                .for_each(|(k, m, v)| w.push_item(k, ObjectMeta(*m), v));
        }
        Model::Validate(t, v) => {
            w.begin_validate(*t);
            v.iter().for_each(|(k, ver)| w.push_version(k, *ver));
        }
        Model::ValidateResp(t, s) => w.validate_resp(*t, *s),
        Model::Items(commit, t, items) => {
            w.begin_items(
                if *commit {
                    MsgKind::Commit
                } else {
                    MsgKind::Log
                },
                *t,
            );
            items
                .iter()
                .for_each(|(k, m, v)| w.push_item(k, ObjectMeta(*m), v));
        }
        Model::Ack(commit, t, s) => w.ack(
            if *commit {
                MsgKind::CommitAck
            } else {
                MsgKind::LogAck
            },
            *t,
            *s,
        ),
        Model::Abort(t, keys) => {
            w.begin_abort(*t);
            keys.iter().for_each(|k| w.push_abort_key(k));
        }
        Model::AbortLog(t) => w.abort_log(*t),
        Model::AbortLogAck(t, s) => w.ack(MsgKind::AbortLogAck, *t, *s),
        Model::GetOne(t, k) => w.get_one(*t, k),
        Model::GetOneResp(t, s, item) => {
            w.begin_get_one_resp(*t, *s);
            if let Some((k, m, v)) = item {
                w.push_item(k, ObjectMeta(*m), v);
            }
        }
        Model::WriteOne(t, a) => w.write_one(*t, a),
        Model::WriteOneResp(t, s, r) => w.write_one_resp(*t, *s, r),
    }
}

fn to_model(b: &Body<'_>) -> Model {
    let items = |l: &ItemList<'_>| {
        l.iter()
            .map(|i| (i.key, i.meta.0, i.value.to_vec()))
            .collect::<Vec<_>>()
    };
    match b {
        Body::Execute {
            tx_id,
            reads,
            locks,
        } => Model::Execute(*tx_id, reads.iter().collect(), locks.iter().collect()),
        Body::ExecuteResp {
            tx_id,
            status,
            items: i,
        } => Model::ExecuteResp(*tx_id, *status, items(i)),
        Body::Validate { tx_id, items } => Model::Validate(*tx_id, items.iter().collect()),
        Body::ValidateResp { tx_id, status } => Model::ValidateResp(*tx_id, *status),
        Body::Log {
            tx_id, items: i, ..
        } => Model::Items(false, *tx_id, items(i)),
        Body::Commit { tx_id, items: i } => Model::Items(true, *tx_id, items(i)),
        Body::LogAck { tx_id, status } => Model::Ack(false, *tx_id, *status),
        Body::CommitAck { tx_id, status } => Model::Ack(true, *tx_id, *status),
        Body::Abort { tx_id, keys } => Model::Abort(*tx_id, keys.iter().collect()),
        Body::AbortLog { tx_id } => Model::AbortLog(*tx_id),
        Body::AbortLogAck { tx_id, status } => Model::AbortLogAck(*tx_id, *status),
        Body::GetOne { tx_id, key } => Model::GetOne(*tx_id, *key),
        Body::GetOneResp {
            tx_id,
            status,
            items: i,
        } => Model::GetOneResp(*tx_id, *status, items(i).pop()),
        Body::WriteOne { tx_id, args } => Model::WriteOne(*tx_id, args.to_vec()),
        Body::WriteOneResp {
            tx_id,
            status,
            result,
        } => Model::WriteOneResp(*tx_id, *status, result.to_vec()),
        // The Dnl kinds have a model of their own (`dnl_wire.rs`).
        other => panic!("not modelled here: {other:?}"),
    }
}

fn packet(msgs: &[Model]) -> Vec<u8> {
    wire_support::packet_of(msgs, encode, (2, 5, 9))
}

proptest! {
    #[test]
    fn bodies_round_trip(m in model()) {
        let mut w = BodyWriter::new();
        encode(&m, &mut w);
        let b = Body::decode(w.kind(), w.bytes()).unwrap();
        prop_assert_eq!(to_model(&b), m);
    }

    #[test]
    fn packets_round_trip(msgs in prop::collection::vec(model(), 1..12)) {
        let p = packet(&msgs);
        let (h, it) = decode_packet(&p).unwrap();
        prop_assert_eq!((h.src, h.dst, h.epoch, h.count as usize), (2, 5, 9, msgs.len()));
        let got: Vec<Model> = it.map(|r| { let (mh, b) = r.unwrap(); assert_eq!(mh.flags, 0); to_model(&b) }).collect();
        prop_assert_eq!(got, msgs);
    }

    #[test]
    fn truncated_packets_fail_cleanly(msgs in prop::collection::vec(model(), 1..4), cut in any::<prop::sample::Index>()) {
        let p = packet(&msgs);
        let n = cut.index(p.len());
        match decode_packet(&p[..n]) {
            Err(_) => {}
            Ok((_, it)) => prop_assert!(it.into_iter().any(|r| r.is_err()), "a strict prefix cannot decode fully"),
        }
    }

    #[test]
    fn truncated_bodies_fail(m in model(), cut in any::<prop::sample::Index>()) {
        let mut w = BodyWriter::new();
        encode(&m, &mut w);
        let n = cut.index(w.bytes().len());
        prop_assert!(Body::decode(w.kind(), &w.bytes()[..n]).is_err());
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600), kind in 1u8..=15) {
        if let Ok((_, it)) = decode_packet(&bytes) {
            for r in it { let _ = r; }
        }
        let kinds = [MsgKind::Execute, MsgKind::ExecuteResp, MsgKind::Validate, MsgKind::ValidateResp, MsgKind::Log,
                     MsgKind::LogAck, MsgKind::Commit, MsgKind::CommitAck, MsgKind::Abort,
                     MsgKind::AbortLog, MsgKind::AbortLogAck, MsgKind::GetOne, MsgKind::GetOneResp,
                     MsgKind::WriteOne, MsgKind::WriteOneResp];
        let _ = Body::decode(kinds[kind as usize - 1], &bytes);
    }

    #[test]
    fn scribbled_packets_never_panic(msgs in prop::collection::vec(model(), 1..6), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut p = packet(&msgs);
        let i = at.index(p.len());
        p[i] = byte;
        if let Ok((_, it)) = decode_packet(&p) {
            for r in it { let _ = r; }
        }
    }
}

#[test]
fn packet_header_checks() {
    let p = packet(&[Model::Ack(true, TxId::from_bits(1), ReplyStatus::Ok)]);
    let mut bad = p.clone();
    bad[0] ^= 1;
    assert!(matches!(
        decode_packet(&bad),
        Err(DecodeError::BadMagic { .. })
    ));
    let mut bad = p.clone();
    bad.push(0);
    assert!(matches!(
        decode_packet(&bad),
        Err(DecodeError::Inconsistent { .. })
    ));
    let mut bad = p.clone();
    bad[6..8].copy_from_slice(&(MESSAGES_PER_PACKET_MAX as u16 + 1).to_le_bytes());
    assert!(matches!(
        decode_packet(&bad),
        Err(DecodeError::TooLarge { .. })
    ));
    assert!(matches!(
        decode_packet(&vec![0u8; PACKET_BYTES_MAX + 1]),
        Err(DecodeError::TooLarge { .. })
    ));
    // A kind on the wrong flow is refused.
    let mut bad = p.clone();
    bad[PACKET_HEADER_BYTES] = Flow::Execution as u8;
    let (_, mut it) = decode_packet(&bad).unwrap();
    assert!(it.next().unwrap().is_err());
}

#[test]
fn item_count_bound_is_enforced() {
    let mut w = BodyWriter::new();
    w.begin_abort(TxId::from_bits(1));
    for i in 0..ITEMS_PER_MESSAGE_MAX as u64 {
        w.push_abort_key(&Key::new(0, i));
    }
    let mut bytes = w.bytes().to_vec();
    bytes[8..10].copy_from_slice(&(ITEMS_PER_MESSAGE_MAX as u16 + 1).to_le_bytes());
    bytes.extend_from_slice(&[0u8; 12]);
    assert!(matches!(
        Body::decode(MsgKind::Abort, &bytes),
        Err(DecodeError::TooLarge { .. })
    ));
}

#[test]
fn single_key_bodies_refuse_what_breaks_their_bounds() {
    let mut w = BodyWriter::new();
    let tx = TxId::from_bits(3);
    w.begin_get_one_resp(tx, ReplyStatus::Ok);
    w.push_item(&Key::new(1, 1), ObjectMeta(1), b"a");
    w.push_item(&Key::new(1, 2), ObjectMeta(1), b"b");
    assert!(
        matches!(
            Body::decode(MsgKind::GetOneResp, w.bytes()),
            Err(DecodeError::TooLarge { max: 1, .. })
        ),
        "a GetOne answers one key"
    );
    let mut bytes = tx.to_le_bytes().to_vec();
    bytes.extend_from_slice(&(ONE_WRITE_ARGS_BYTES_MAX as u32 + 1).to_le_bytes());
    assert!(matches!(
        Body::decode(MsgKind::WriteOne, &bytes),
        Err(DecodeError::TooLarge { .. })
    ));
    let mut bytes = tx.to_le_bytes().to_vec();
    bytes.push(TxStatus::ALL.len() as u8);
    bytes.extend_from_slice(&0u32.to_le_bytes());
    assert!(matches!(
        Body::decode(MsgKind::WriteOneResp, &bytes),
        Err(DecodeError::BadTag { .. })
    ));
}
