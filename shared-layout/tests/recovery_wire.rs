//! Recovery messages (`wire::RecoveryMsg`): encode/decode round trips for
//! arbitrary messages within the bounds, and typed errors (never a panic)
//! for arbitrary or corrupted bytes.

mod wire_support;

use proptest::prelude::*;
use splitkv_layout::wire::{
    CoordEvidence, CoordOutcome, CoordPhase, Decision, NodeMask, RecoveryEncodeError, RecoveryMsg,
    DECISIONS_PER_MESSAGE_MAX, EVIDENCE_ENTRIES_PER_MESSAGE_MAX, MASK_NODES_MAX,
    RECOVERY_MESSAGE_BYTES_MAX, RECOVERY_PARTS_MAX,
};
use splitkv_layout::{DecodeError, TxId};
use wire_support::{codec_properties, decision, record};

fn coord() -> impl Strategy<Value = CoordEvidence> {
    (
        any::<u64>(),
        0..CoordPhase::ALL.len(),
        0..CoordOutcome::ALL.len(),
        any::<bool>(),
        any::<u16>(),
    )
        .prop_map(|(tx_id, p, o, reported, m)| CoordEvidence {
            tx_id: TxId::from_bits(tx_id),
            phase: CoordPhase::ALL[p],
            outcome: CoordOutcome::ALL[o],
            reported,
            write_shards: NodeMask(m),
        })
}

fn part() -> impl Strategy<Value = (u16, u16)> {
    (1..=RECOVERY_PARTS_MAX as u16).prop_flat_map(|parts| (0..parts, Just(parts)))
}

fn msg() -> impl Strategy<Value = RecoveryMsg> {
    let half = EVIDENCE_ENTRIES_PER_MESSAGE_MAX / 2;
    prop_oneof![
        (
            any::<u32>(),
            part(),
            prop::collection::vec(coord(), 0..=half),
            prop::collection::vec(record(), 0..=half),
            prop::collection::vec(any::<u32>(), 0..=MASK_NODES_MAX)
        )
            .prop_map(
                |(epoch, (part, parts), coordinated, records, generations)| {
                    RecoveryMsg::Evidence {
                        epoch,
                        part,
                        parts,
                        coordinated,
                        records,
                        generations,
                    }
                }
            ),
        (
            any::<u32>(),
            part(),
            prop::collection::vec(decision(), 0..=DECISIONS_PER_MESSAGE_MAX),
            any::<u32>()
        )
            .prop_map(|(epoch, (part, parts), decisions, generation)| {
                RecoveryMsg::Decisions {
                    epoch,
                    part,
                    parts,
                    decisions,
                    generation,
                }
            }),
        any::<u32>().prop_map(|epoch| RecoveryMsg::Applied { epoch }),
        any::<u32>().prop_map(|epoch| RecoveryMsg::Resume { epoch }),
    ]
}

// round_trip, truncation_and_trailing_bytes_are_errors and
// arbitrary_bytes_never_panic (`wire_support`).
codec_properties!(RecoveryMsg, msg(), RECOVERY_MESSAGE_BYTES_MAX);

#[test]
fn bounds_are_typed_errors() {
    let too_many = RecoveryMsg::Decisions {
        epoch: 1,
        part: 0,
        parts: 1,
        decisions: vec![
            Decision {
                tx_id: TxId::from_bits(1),
                commit: true
            };
            DECISIONS_PER_MESSAGE_MAX + 1
        ],
        generation: 0,
    };
    let mut out = Vec::new();
    assert!(matches!(
        too_many.encode(&mut out),
        Err(RecoveryEncodeError::TooMany { .. })
    ));
    assert!(out.is_empty(), "nothing appended on error");
    let bad_part = RecoveryMsg::Decisions {
        epoch: 1,
        part: 1,
        parts: 1,
        decisions: vec![],
        generation: 0,
    };
    assert!(matches!(
        bad_part.encode(&mut out),
        Err(RecoveryEncodeError::Part { .. })
    ));
    // Count over the bound on the wire.
    let mut bytes = vec![2u8];
    bytes.extend_from_slice(&7u32.to_le_bytes());
    bytes.extend_from_slice(&0u16.to_le_bytes());
    bytes.extend_from_slice(&1u16.to_le_bytes());
    bytes.extend_from_slice(&((DECISIONS_PER_MESSAGE_MAX + 1) as u16).to_le_bytes());
    assert!(matches!(
        RecoveryMsg::decode(&bytes),
        Err(DecodeError::TooLarge { .. })
    ));
    // An undecided decision is refused.
    let mut bytes = vec![2u8];
    bytes.extend_from_slice(&7u32.to_le_bytes());
    bytes.extend_from_slice(&0u16.to_le_bytes());
    bytes.extend_from_slice(&1u16.to_le_bytes());
    bytes.extend_from_slice(&1u16.to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.extend_from_slice(&9u64.to_le_bytes());
    bytes.push(CoordOutcome::Undecided as u8);
    assert!(matches!(
        RecoveryMsg::decode(&bytes),
        Err(DecodeError::Inconsistent { .. })
    ));
    assert!(matches!(
        RecoveryMsg::decode(&[9]),
        Err(DecodeError::BadTag { .. })
    ));
    // More generations than nodes, encoded or on the wire.
    let too_many_gens = RecoveryMsg::Evidence {
        epoch: 1,
        part: 0,
        parts: 1,
        coordinated: vec![],
        records: vec![],
        generations: vec![0; MASK_NODES_MAX + 1],
    };
    assert!(matches!(
        too_many_gens.encode(&mut out),
        Err(RecoveryEncodeError::TooMany {
            what: "generations",
            ..
        })
    ));
    let mut bytes = vec![1u8];
    bytes.extend_from_slice(&7u32.to_le_bytes());
    bytes.extend_from_slice(&0u16.to_le_bytes());
    bytes.extend_from_slice(&1u16.to_le_bytes());
    bytes.extend_from_slice(&[0, 0, 0, 0, MASK_NODES_MAX as u8 + 1]);
    assert!(matches!(
        RecoveryMsg::decode(&bytes),
        Err(DecodeError::TooLarge {
            what: "generations",
            ..
        })
    ));
}

#[test]
fn node_mask_operations() {
    let m = NodeMask::EMPTY.with(0).with(3).with(15).with(16);
    assert_eq!(m.iter().collect::<Vec<_>>(), vec![0, 3, 15]);
    assert_eq!(m.len(), 3);
    assert!(m.contains(3) && !m.contains(2) && !m.contains(16));
    assert!(NodeMask::EMPTY.with(3).is_subset(m));
    assert!(!NodeMask::EMPTY.with(4).is_subset(m));
}
