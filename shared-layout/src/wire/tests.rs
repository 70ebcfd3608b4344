use super::*;
use crate::error::DecodeError;
use crate::key::{Key, KEY_BYTES};
use crate::meta::ObjectMeta;
use crate::{TxId, VALUE_BYTES_MAX};

#[test]
fn execute_round_trip() {
    let mut w = BodyWriter::new();
    w.begin_execute(TxId::from_bits(77));
    w.push_read(&Key::new(0, 1));
    w.push_lock(&Key::new(1, 2));
    w.push_lock(&Key::new(1, 3));
    let b = Body::decode(MsgKind::Execute, w.bytes()).unwrap();
    match b {
        Body::Execute {
            tx_id,
            reads,
            locks,
        } => {
            assert_eq!(tx_id, TxId::from_bits(77));
            assert_eq!(reads.iter().collect::<Vec<_>>(), vec![Key::new(0, 1)]);
            assert_eq!(
                locks.iter().collect::<Vec<_>>(),
                vec![Key::new(1, 2), Key::new(1, 3)]
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn items_reject_oversized_value_length() {
    let mut w = BodyWriter::new();
    w.begin_log(TxId::from_bits(1), NodeMask(0b101));
    w.push_item(&Key::new(0, 1), ObjectMeta(3), b"abc");
    let mut bytes = w.bytes().to_vec();
    let len_at = 8 + 2 + 2 + KEY_BYTES + 8;
    assert!(matches!(
        Body::decode(MsgKind::Log, &bytes),
        Ok(Body::Log {
            write_shards: NodeMask(0b101),
            ..
        })
    ));
    bytes[len_at..len_at + 2].copy_from_slice(&(VALUE_BYTES_MAX as u16 + 1).to_le_bytes());
    assert!(matches!(
        Body::decode(MsgKind::Log, &bytes),
        Err(DecodeError::TooLarge { .. })
    ));
}

fn header() -> PacketHeader {
    PacketHeader {
        flags: 0,
        count: 1,
        cluster_id: 0xC1,
        src: 3,
        dst: 4,
        src_incarnation: 7,
        dst_incarnation: 8,
        epoch: 9,
        seq: 10,
        ack: 11,
        len: 0,
    }
}

/// A packet of `header()` carrying one LogAck.
fn one_message_packet() -> Vec<u8> {
    let mut w = BodyWriter::new();
    w.ack(MsgKind::LogAck, TxId::from_bits(5), ReplyStatus::Ok);
    let mut msgs = Vec::new();
    MsgHeader::whole(MsgKind::LogAck, w.bytes().len() as u32).encode(&mut msgs);
    msgs.extend_from_slice(w.bytes());
    let mut p = Vec::new();
    PacketHeader {
        len: msgs.len() as u32,
        ..header()
    }
    .encode(&mut p);
    p.extend_from_slice(&msgs);
    p
}

#[test]
fn packet_header_v2_round_trips_in_40_bytes() {
    let p = one_message_packet();
    assert_eq!(&p[0..4], b"SKV2");
    assert_eq!(p[4], PACKET_FORMAT_VERSION);
    let (h, mut msgs) = decode_packet(&p).unwrap();
    assert_eq!(
        h,
        PacketHeader {
            len: (p.len() - PACKET_HEADER_BYTES) as u32,
            ..header()
        }
    );
    let (mh, body) = msgs.next().unwrap().unwrap();
    assert_eq!(
        (mh.kind, mh.flags, mh.frag_more()),
        (MsgKind::LogAck, 0, false)
    );
    assert_eq!(body.tx_id(), TxId::from_bits(5));
    assert!(msgs.next().is_none());
}

#[test]
fn session_fields_are_patched_in_place() {
    let mut p = one_message_packet();
    PacketHeader::patch_session(&mut p, 21, 22, 23, 24);
    let len = (p.len() - PACKET_HEADER_BYTES) as u32;
    PacketHeader::patch_count_len(&mut p, 1, len);
    let (h, _) = decode_packet(&p).unwrap();
    assert_eq!(
        (h.dst_incarnation, h.epoch, h.seq, h.ack, h.src_incarnation),
        (21, 22, 23, 24, 7)
    );
    assert_eq!(PacketHeader::count_of(&p), 1);
}

#[test]
fn packet_header_v2_refuses_bad_version_flags_and_ack_only_shapes() {
    let p = one_message_packet();
    let mut bad = p.clone();
    bad[4] = 1;
    assert!(matches!(
        decode_packet(&bad),
        Err(DecodeError::BadTag {
            what: "packet format version",
            tag: 1
        })
    ));
    let mut bad = p.clone();
    bad[5] = 0x80;
    assert!(matches!(
        decode_packet(&bad),
        Err(DecodeError::BadTag {
            what: "packet flags",
            ..
        })
    ));
    // Ack-only with a message, and a data packet without one, are refused.
    let mut bad = p.clone();
    bad[5] = PACKET_FLAG_ACK_ONLY;
    assert!(matches!(
        decode_packet(&bad),
        Err(DecodeError::Inconsistent { .. })
    ));
    let mut ack = Vec::new();
    PacketHeader {
        count: 0,
        flags: PACKET_FLAG_ACK_ONLY,
        ..header()
    }
    .encode(&mut ack);
    let (h, mut msgs) = decode_packet(&ack).unwrap();
    assert!(h.is_ack_only() && msgs.next().is_none());
    let mut empty = Vec::new();
    PacketHeader {
        count: 0,
        ..header()
    }
    .encode(&mut empty);
    assert!(matches!(
        decode_packet(&empty),
        Err(DecodeError::Inconsistent { .. })
    ));
}

#[test]
fn message_header_v2_refuses_unknown_flags_and_reserved_bits() {
    let p = one_message_packet();
    let at = PACKET_HEADER_BYTES;
    let mut bad = p.clone();
    bad[at + 2] = 0x02;
    let (_, mut it) = decode_packet(&bad).unwrap();
    assert!(matches!(
        it.next().unwrap(),
        Err(DecodeError::BadTag {
            what: "message flags",
            ..
        })
    ));
    assert!(it.next().is_none(), "iteration stops after an error");
    let mut bad = p.clone();
    bad[at + 3] = 1;
    let (_, mut it) = decode_packet(&bad).unwrap();
    assert!(matches!(
        it.next().unwrap(),
        Err(DecodeError::Inconsistent { .. })
    ));
    // A fragment flag is accepted, and the raw body is lent without decoding.
    let mut frag = p.clone();
    frag[at + 2] = MSG_FLAG_FRAG_MORE;
    let (_, mut it) = decode_packet(&frag).unwrap();
    let (mh, raw) = it.next_raw().unwrap().unwrap();
    assert!(mh.frag_more());
    assert_eq!(raw, &p[at + MSG_HEADER_BYTES..]);
}

#[test]
fn each_generation_of_a_cluster_carries_its_own_cluster_id() {
    assert_eq!(
        generation_cluster_id(7, 1),
        7,
        "the first generation is the file's id"
    );
    let ids: std::collections::HashSet<u32> =
        (1..=1_000).map(|g| generation_cluster_id(7, g)).collect();
    assert_eq!(ids.len(), 1_000, "no two generations share an id");
}
