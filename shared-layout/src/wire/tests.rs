use super::*;
use crate::error::DecodeError;
use crate::key::{Key, KEY_BYTES};
use crate::meta::ObjectMeta;
use crate::VALUE_BYTES_MAX;

#[test]
fn execute_round_trip() {
    let mut w = BodyWriter::new();
    w.begin_execute(77);
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
            assert_eq!(tx_id, 77);
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
    w.begin_items(MsgKind::Log, 1);
    w.push_item(&Key::new(0, 1), ObjectMeta(3), b"abc");
    let mut bytes = w.bytes().to_vec();
    let len_at = 8 + 2 + KEY_BYTES + 8;
    bytes[len_at..len_at + 2].copy_from_slice(&(VALUE_BYTES_MAX as u16 + 1).to_le_bytes());
    assert!(matches!(
        Body::decode(MsgKind::Log, &bytes),
        Err(DecodeError::TooLarge { .. })
    ));
}
