//! NIC-restart rebuild messages (`wire::RebuildMsg`): encode/decode round
//! trips within the bounds, and typed errors (never a panic) for arbitrary,
//! truncated or padded bytes.

mod wire_support;

use proptest::prelude::*;
use splitkv_layout::wire::{
    CoordPhase, LockEntry, PeerTx, RebuildMsg, REBUILD_DECISIONS_PER_MESSAGE_MAX,
    REBUILD_ENTRIES_PER_MESSAGE_MAX, REBUILD_MESSAGE_BYTES_MAX,
};
use splitkv_layout::{DecodeError, Key, TxId};
use wire_support::{codec_properties, decision, record};

fn peer_tx() -> impl Strategy<Value = PeerTx> {
    (any::<u64>(), 0..CoordPhase::ALL.len(), any::<bool>()).prop_map(|(tx_id, p, waiting)| PeerTx {
        tx_id: TxId::from_bits(tx_id),
        phase: CoordPhase::ALL[p],
        waiting,
    })
}

fn lock() -> impl Strategy<Value = LockEntry> {
    (any::<u64>(), any::<u32>(), any::<u64>()).prop_map(|(tx_id, t, id)| LockEntry {
        tx_id: TxId::from_bits(tx_id),
        key: Key::new(t, id),
    })
}

fn msg() -> impl Strategy<Value = RebuildMsg> {
    let third = REBUILD_ENTRIES_PER_MESSAGE_MAX / 3;
    prop_oneof![
        any::<u32>().prop_map(|restart| RebuildMsg::Query { restart }),
        (
            any::<u32>(),
            any::<u16>(),
            any::<bool>(),
            any::<u32>(),
            prop::collection::vec(peer_tx(), 0..=third),
            prop::collection::vec(lock(), 0..=third),
            prop::collection::vec(record(), 0..=third),
        )
            .prop_map(|(restart, part, last, generation, txs, locks, records)| {
                RebuildMsg::Report {
                    restart,
                    part,
                    last,
                    generation,
                    txs,
                    locks,
                    records,
                }
            }),
        (
            any::<u32>(),
            prop::collection::vec(decision(), 0..=REBUILD_DECISIONS_PER_MESSAGE_MAX)
        )
            .prop_map(|(restart, decisions)| RebuildMsg::Decisions { restart, decisions }),
    ]
}

// round_trip, truncation_and_trailing_bytes_are_errors and
// arbitrary_bytes_never_panic (`wire_support`).
codec_properties!(RebuildMsg, msg(), REBUILD_MESSAGE_BYTES_MAX);

#[test]
fn bounds_and_bad_tags_are_typed_errors() {
    let too_many = RebuildMsg::Report {
        restart: 2,
        part: 0,
        last: true,
        generation: 0,
        txs: vec![],
        locks: vec![
            LockEntry {
                tx_id: TxId::from_bits(1),
                key: Key::new(0, 1)
            };
            REBUILD_ENTRIES_PER_MESSAGE_MAX + 1
        ],
        records: vec![],
    };
    let mut out = Vec::new();
    assert!(too_many.encode(&mut out).is_err());
    assert!(out.is_empty(), "nothing appended on error");
    assert!(matches!(
        RebuildMsg::decode(&[9, 0, 0, 0, 0]),
        Err(DecodeError::BadTag { .. })
    ));
    // A Report whose last-part flag is 2 (tag, restart, part, last,
    // generation, three empty lists).
    let mut bad = vec![2, 2, 0, 0, 0, 0, 0, 2, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    assert!(matches!(
        RebuildMsg::decode(&bad),
        Err(DecodeError::BadTag { .. })
    ));
    bad[7] = 1;
    assert!(RebuildMsg::decode(&bad).is_ok(), "an empty last part");
    // An undecided decision.
    let mut d = vec![3, 2, 0, 0, 0, 1, 0];
    d.extend_from_slice(&7u64.to_le_bytes());
    d.push(0);
    assert!(matches!(
        RebuildMsg::decode(&d),
        Err(DecodeError::Inconsistent { .. })
    ));
}
