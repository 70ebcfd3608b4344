//! Tests of the connection handshake ([`Hello`], [`Welcome`], [`Refused`])
//! and the connection memory layout ([`AppMemoryLayout`]): round trips, the
//! version mismatch on both sides, hostile sizes, one test per rejection.

mod app_support;

use app_support::*;
use proptest::prelude::*;
use splitkv_layout::app::handshake::handshake_frame_len;
use splitkv_layout::app::*;
use splitkv_layout::ring::ring_region_bytes;
use splitkv_layout::{DecodeError, CACHE_LINE_BYTES, VALUE_BYTES_MAX};

fn capacity() -> impl Strategy<Value = u64> {
    let min = APP_RING_CAPACITY_MIN_BYTES.trailing_zeros();
    let max = APP_RING_CAPACITY_MAX_BYTES.trailing_zeros();
    (min..=max).prop_map(|s| 1u64 << s)
}

fn names() -> impl Strategy<Value = Vec<String>> {
    prop::collection::btree_set("[!-~]{1,64}", 0..=PROCEDURES_PER_HELLO_MAX)
        .prop_map(|s| s.into_iter().collect())
}

fn layout(req: u64, out: u64) -> AppMemoryLayout {
    AppMemoryLayout::new(req, out).unwrap()
}

fn hello_bytes(l: &AppMemoryLayout, in_flight: u32, names: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    Hello::encode(l, in_flight, names, &mut out).unwrap();
    out
}

fn limits() -> AppLimits {
    AppLimits {
        in_flight_max: 8,
        value_bytes_max: 4096,
        args_bytes_max: 1024,
        result_bytes_max: 2048,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn hello_round_trips(
        req in capacity(), out in capacity(), in_flight in 1..=APP_IN_FLIGHT_MAX as u32,
        names in names(),
    ) {
        let l = layout(req, out);
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let bytes = hello_bytes(&l, in_flight, &refs);
        prop_assert!(bytes.len() <= HANDSHAKE_BYTES_MAX);
        prop_assert_eq!(handshake_frame_len(&bytes[..12]).unwrap(), bytes.len());
        let HandshakeMsg::Hello(h) = HandshakeMsg::decode(&bytes).unwrap() else {
            panic!("not a Hello");
        };
        prop_assert_eq!(h.layout, l);
        prop_assert_eq!(h.in_flight_max, in_flight);
        prop_assert_eq!(h.names().collect::<Vec<_>>(), refs);
        let mut again = Vec::new();
        HandshakeMsg::Hello(h).encode(&mut again);
        prop_assert_eq!(again, bytes);
    }

    #[test]
    fn welcome_round_trips(
        node_id in any::<u16>(),
        ids in prop::collection::vec(prop::option::of(0..PROCEDURE_ID_UNKNOWN), 0..=PROCEDURES_PER_HELLO_MAX),
    ) {
        let mut bytes = Vec::new();
        Welcome::encode(node_id, &limits(), &ids, &mut bytes).unwrap();
        let HandshakeMsg::Welcome(w) = HandshakeMsg::decode(&bytes).unwrap() else {
            panic!("not a Welcome");
        };
        prop_assert_eq!(w.node_id, node_id);
        prop_assert_eq!(w.limits, limits());
        prop_assert_eq!(w.procedure_ids().collect::<Vec<_>>(), ids);
        let mut again = Vec::new();
        HandshakeMsg::Welcome(w).encode(&mut again);
        prop_assert_eq!(again, bytes);
    }

    #[test]
    fn mutations_decode_canonically_or_fail(
        names in names(), kind in any::<u8>(), at in any::<usize>(), value in any::<u8>(),
    ) {
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let l = layout(1 << 17, 1 << 18);
        let mut welcome = Vec::new();
        Welcome::encode(3, &limits(), &[Some(1), None], &mut welcome).unwrap();
        for bytes in [hello_bytes(&l, 4, &refs), welcome] {
            let m = mutate(&bytes, kind, at, value);
            if let Ok(d) = HandshakeMsg::decode(&m) {
                let mut again = Vec::new();
                d.encode(&mut again);
                prop_assert_eq!(again, m);
            }
        }
    }

    #[test]
    fn decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = HandshakeMsg::decode(&bytes);
        let _ = handshake_frame_len(&bytes);
    }

    /// No pair of capacities yields a part outside the memory, unaligned or
    /// overlapping another.
    #[test]
    fn layout_parts_lie_inside_the_memory(
        req in prop_oneof![any::<u64>(), capacity()],
        out in prop_oneof![any::<u64>(), capacity()],
    ) {
        if let Ok(l) = AppMemoryLayout::new(req, out) {
            prop_assert!(l.memory_bytes <= APP_MEMORY_BYTES_MAX);
            let mut end = 0;
            for (offset, bytes) in l.parts() {
                prop_assert_eq!(offset % CACHE_LINE_BYTES, 0);
                prop_assert_eq!(offset, end, "parts are contiguous and in order");
                end = offset + bytes;
            }
            prop_assert_eq!(end, l.memory_bytes);
            prop_assert_eq!(l.parts()[0].1, ring_region_bytes(req as usize));
            prop_assert!(l.check_size(l.memory_bytes as u64).is_ok());
            prop_assert!(l.check_size(l.memory_bytes as u64 + 1).is_err());
        } else {
            let ok = |c: u64| c.is_power_of_two()
                && (APP_RING_CAPACITY_MIN_BYTES as u64..=APP_RING_CAPACITY_MAX_BYTES as u64).contains(&c);
            prop_assert!(!(ok(req) && ok(out)));
        }
    }
}

#[test]
fn version_mismatch_is_typed_on_both_sides() {
    let l = layout(1 << 17, 1 << 17);
    let mut hello = hello_bytes(&l, 4, &["smallbank.amalgamate"]);
    hello[4..8].copy_from_slice(&2u32.to_le_bytes());
    // The node reads a Hello of another version...
    assert_eq!(
        HandshakeMsg::decode(&hello),
        Err(HandshakeError::VersionMismatch {
            ours: APP_LAYOUT_VERSION,
            theirs: 2
        })
    );
    // ... and a client reads a Refused from a node of another version.
    let mut refused = Vec::new();
    Refused {
        reason: RefusedReason::VersionMismatch,
    }
    .encode(&mut refused);
    assert!(matches!(
        HandshakeMsg::decode(&refused),
        Ok(HandshakeMsg::Refused(Refused {
            reason: RefusedReason::VersionMismatch
        }))
    ));
    refused[4..8].copy_from_slice(&0u32.to_le_bytes());
    assert_eq!(
        HandshakeMsg::decode(&refused),
        Err(HandshakeError::VersionMismatch {
            ours: APP_LAYOUT_VERSION,
            theirs: 0
        })
    );
    // The frame length reads across versions.
    assert_eq!(handshake_frame_len(&refused), Ok(refused.len()));
}

#[test]
fn header_rejections() {
    let mut refused = Vec::new();
    Refused {
        reason: RefusedReason::BadMemory,
    }
    .encode(&mut refused);
    assert_eq!(refused.len(), HANDSHAKE_HEADER_BYTES + 1);
    let mut bad = refused.clone();
    bad[0] ^= 1;
    assert!(matches!(
        HandshakeMsg::decode(&bad),
        Err(HandshakeError::Decode(DecodeError::BadMagic { .. }))
    ));
    let mut bad = refused.clone();
    bad.push(0);
    assert!(matches!(
        HandshakeMsg::decode(&bad),
        Err(HandshakeError::Decode(DecodeError::Inconsistent { .. }))
    ));
    let mut bad = refused.clone();
    bad[8..12].copy_from_slice(&(HANDSHAKE_BYTES_MAX as u32 + 1).to_le_bytes());
    assert!(matches!(
        handshake_frame_len(&bad),
        Err(DecodeError::TooLarge { .. })
    ));
    bad[8..12].copy_from_slice(&3u32.to_le_bytes());
    assert!(matches!(
        handshake_frame_len(&bad),
        Err(DecodeError::Inconsistent { .. })
    ));
    let mut bad = refused.clone();
    bad[12] = 9;
    assert!(matches!(
        HandshakeMsg::decode(&bad),
        Err(HandshakeError::Decode(DecodeError::BadTag { .. }))
    ));
    let mut bad = refused.clone();
    bad[13] = 0;
    assert!(matches!(
        HandshakeMsg::decode(&bad),
        Err(HandshakeError::Decode(DecodeError::BadTag { .. }))
    ));
}

#[test]
fn bad_names_are_refused() {
    let l = layout(1 << 17, 1 << 17);
    let long = "x".repeat(PROCEDURE_NAME_BYTES_MAX + 1);
    for names in [
        vec!["a", "a"],
        vec![""],
        vec!["has space"],
        vec!["tab\t"],
        vec!["é"],
        vec![long.as_str()],
    ] {
        assert!(
            Hello::encode(&l, 1, &names, &mut Vec::new()).is_err(),
            "{names:?}"
        );
    }
    let many: Vec<String> = (0..=PROCEDURES_PER_HELLO_MAX)
        .map(|i| i.to_string())
        .collect();
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    let mut out = vec![1];
    assert!(Hello::encode(&l, 1, &refs, &mut out).is_err());
    assert_eq!(out, [1], "nothing appended on error");
    assert!(Hello::encode(&l, 1, &refs[..PROCEDURES_PER_HELLO_MAX], &mut out).is_ok());
}

#[test]
fn hostile_memory_sizes_are_refused() {
    let l = layout(1 << 17, 1 << 17);
    let good = hello_bytes(&l, 4, &[]);
    let field = |bytes: &[u8], at: usize, v: u64| {
        let mut b = bytes.to_vec();
        b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        b
    };
    let h = HANDSHAKE_HEADER_BYTES;
    // memory_bytes one short of the layout, and far larger.
    for v in [l.memory_bytes as u64 - 1, u64::MAX] {
        assert!(matches!(
            HandshakeMsg::decode(&field(&good, h, v)),
            Err(HandshakeError::Decode(DecodeError::Inconsistent { .. }))
        ));
    }
    // A request ring capacity that is not a power of two, too small, too large.
    for v in [(1 << 17) + 64, 1 << 10, 1 << 40, u64::MAX] {
        assert!(
            HandshakeMsg::decode(&field(&good, h + 8, v)).is_err(),
            "capacity {v}"
        );
    }
    // In flight: zero and over the bound.
    for v in [0u32, APP_IN_FLIGHT_MAX as u32 + 1] {
        let mut b = good.clone();
        b[h + 24..h + 28].copy_from_slice(&v.to_le_bytes());
        assert!(HandshakeMsg::decode(&b).is_err(), "in flight {v}");
    }
    assert!(Hello::encode(&l, 0, &[], &mut Vec::new()).is_err());
}

#[test]
fn welcome_rejections_and_answers() {
    let mut out = Vec::new();
    assert!(Welcome::encode(1, &limits(), &[Some(PROCEDURE_ID_UNKNOWN)], &mut out).is_err());
    let over = AppLimits {
        value_bytes_max: VALUE_BYTES_MAX as u32 + 1,
        ..limits()
    };
    assert!(Welcome::encode(1, &over, &[], &mut out).is_err());
    let zero = AppLimits {
        in_flight_max: 0,
        ..limits()
    };
    assert!(Welcome::encode(1, &zero, &[], &mut out).is_err());
    assert!(out.is_empty());

    let l = layout(1 << 17, 1 << 17);
    let hello = hello_bytes(&l, 8, &["a", "b"]);
    let HandshakeMsg::Hello(h) = HandshakeMsg::decode(&hello).unwrap() else {
        panic!()
    };
    let welcome = |ids: &[Option<u32>], in_flight: u32| {
        let mut b = Vec::new();
        let lim = AppLimits {
            in_flight_max: in_flight,
            ..limits()
        };
        Welcome::encode(1, &lim, ids, &mut b).unwrap();
        b
    };
    let check = |b: &[u8]| match HandshakeMsg::decode(b).unwrap() {
        HandshakeMsg::Welcome(w) => w.check_answers(&h),
        _ => panic!(),
    };
    assert!(check(&welcome(&[Some(1), None], 8)).is_ok());
    assert!(check(&welcome(&[Some(1)], 8)).is_err());
    assert!(check(&welcome(&[Some(1), None], 9)).is_err());
}
