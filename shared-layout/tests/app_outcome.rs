//! Tests of the outcome ring entries ([`Outcome`], [`Status`], [`GetValue`]):
//! round trips, the mapping to and from the host↔NIC status for every
//! variant, arbitrary and mutated bytes, one test per rejection.

mod app_support;

use app_support::*;
use proptest::prelude::*;
use splitkv_layout::app::*;
use splitkv_layout::host_nic::{NicToHost, TxOutcome, TxStatus, RESULT_BYTES_MAX};
use splitkv_layout::{DecodeError, VALUE_BYTES_MAX, VERSION_MAX};

fn status() -> impl Strategy<Value = Status> {
    prop::sample::select(Status::ALL.to_vec())
}

/// A body valid for `status`: any bytes for a commit, a short UTF-8 text
/// otherwise.
fn outcome() -> impl Strategy<Value = (u64, Status, Vec<u8>)> {
    (any::<u64>(), status()).prop_flat_map(|(req_id, status)| {
        let body = if status.is_committed() {
            bytes_up_to(RESULT_BYTES_MAX).boxed()
        } else {
            "[a-z ]{0,40}|.{0,60}"
                .prop_filter("within the reason bound", |s: &String| {
                    s.len() <= OUTCOME_REASON_BYTES_MAX
                })
                .prop_map(String::into_bytes)
                .boxed()
        };
        (Just(req_id), Just(status), body)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn round_trips(o in outcome()) {
        let out_ = Outcome { req_id: o.0, status: o.1, body: &o.2 };
        let mut out = Vec::new();
        out_.encode(&mut out).unwrap();
        prop_assert_eq!(out.len(), out_.encoded_len());
        prop_assert!(out.len() <= OUTCOME_BYTES_MAX);
        let d = Outcome::decode(&out).unwrap();
        prop_assert_eq!(d, out_);
        if !d.status.is_committed() {
            prop_assert_eq!(d.reason().as_bytes(), &o.2[..]);
        }
        let mut slot = vec![0u8; out.len()];
        prop_assert_eq!(out_.encode_into(&mut slot).unwrap(), out.len());
        prop_assert_eq!(slot, out);
    }

    #[test]
    fn mutations_decode_canonically_or_fail(
        o in outcome(), kind in any::<u8>(), at in any::<usize>(), value in any::<u8>(),
    ) {
        let mut out = Vec::new();
        Outcome { req_id: o.0, status: o.1, body: &o.2 }.encode(&mut out).unwrap();
        let m = mutate(&out, kind, at, value);
        if let Ok(d) = Outcome::decode(&m) {
            let mut again = Vec::new();
            d.encode(&mut again).unwrap();
            prop_assert_eq!(again, m);
        }
    }

    #[test]
    fn decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..128)) {
        let _ = GetValue::decode(&bytes);
        if let Ok(d) = Outcome::decode(&bytes) {
            let mut again = Vec::new();
            d.encode(&mut again).unwrap();
            prop_assert_eq!(again, bytes);
        }
    }

    #[test]
    fn get_value_round_trips(version in 0..=VERSION_MAX, value in bytes_up_to(VALUE_BYTES_MAX)) {
        let g = GetValue { version, value: &value };
        let mut out = Vec::new();
        g.encode(&mut out).unwrap();
        prop_assert_eq!(out.len(), g.encoded_len());
        prop_assert_eq!(GetValue::decode(&out).unwrap(), g);
    }
}

#[test]
fn every_status_has_one_code() {
    for (i, s) in Status::ALL.iter().enumerate() {
        let (code, detail) = s.to_code();
        assert_eq!(Status::from_code(code, detail), Ok(*s));
        for t in &Status::ALL[..i] {
            assert_ne!(t.to_code(), (code, detail));
        }
    }
}

#[test]
fn every_tx_status_maps_and_back() {
    for t in TxStatus::ALL {
        let s = Status::from(t);
        assert_eq!(s.to_tx_status(), Some(t), "{t:?}");
        assert_eq!(s.is_committed(), t == TxStatus::Committed);
        assert_eq!(
            s.is_retryable(),
            t.is_conflict() || t == TxStatus::Unavailable
        );
    }
}

#[test]
fn every_status_maps_to_its_tx_status() {
    use AbortReason as A;
    use UnavailableReason as U;
    let expected = |s: Status| match s {
        Status::Committed => Some(TxStatus::Committed),
        Status::Aborted(A::LockConflict) => Some(TxStatus::LockConflict),
        Status::Aborted(A::ValidationFailed) => Some(TxStatus::ValidationFailed),
        Status::Aborted(A::UserAbort) => Some(TxStatus::UserAborted),
        Status::Aborted(A::CompareFailed) => None,
        Status::Aborted(A::TableFull) => Some(TxStatus::TableFull),
        Status::Aborted(A::HostFailure) => Some(TxStatus::HostFailure),
        Status::KeyNotFound => None,
        Status::TooLarge => Some(TxStatus::TooLarge),
        Status::UnknownProcedure | Status::Rejected => Some(TxStatus::Rejected),
        Status::Unavailable(U::Recovering | U::NicRestarting | U::Draining) => {
            Some(TxStatus::Unavailable)
        }
        Status::OutcomeUnknown => Some(TxStatus::Unknown),
    };
    for s in Status::ALL {
        assert_eq!(s.to_tx_status(), expected(s), "{s:?}");
    }
}

#[test]
fn layout_matches_the_table() {
    let o = Outcome {
        req_id: 5,
        status: Status::Aborted(AbortReason::CompareFailed),
        body: b"exists",
    };
    let mut out = Vec::new();
    o.encode(&mut out).unwrap();
    let expected = Raw::default()
        .u8(0xA1)
        .u64(5)
        .u8(1)
        .u8(3)
        .u32(6)
        .bytes(b"exists");
    assert_eq!(out, expected.0);
}

#[test]
fn bad_codes_are_refused() {
    let raw = |code: u8, detail: u8| Raw::default().u8(0xA1).u64(1).u8(code).u8(detail).u32(0).0;
    assert!(matches!(
        Outcome::decode(&raw(8, 0)),
        Err(DecodeError::BadTag {
            what: "outcome status",
            ..
        })
    ));
    assert!(matches!(
        Outcome::decode(&raw(1, 6)),
        Err(DecodeError::BadTag { .. })
    ));
    assert!(matches!(
        Outcome::decode(&raw(6, 3)),
        Err(DecodeError::BadTag { .. })
    ));
    // A detail on a status without one contradicts it.
    assert!(matches!(
        Outcome::decode(&raw(0, 1)),
        Err(DecodeError::Inconsistent { .. })
    ));
    // The host↔NIC outcome is not an application outcome.
    let mut host = Vec::new();
    NicToHost::TxOutcome(TxOutcome {
        req_id: 1,
        status: TxStatus::Committed,
        result: b"",
    })
    .encode(&mut host);
    assert!(matches!(
        Outcome::decode(&host),
        Err(DecodeError::BadTag { .. })
    ));
}

#[test]
fn bad_bodies_are_refused() {
    let long = vec![b'a'; OUTCOME_REASON_BYTES_MAX + 1];
    let o = Outcome {
        req_id: 1,
        status: Status::KeyNotFound,
        body: &long,
    };
    assert!(o.encode(&mut Vec::new()).is_err());
    let raw = Raw::default()
        .u8(0xA1)
        .u64(1)
        .u8(2)
        .u8(0)
        .u32(long.len() as u32)
        .bytes(&long)
        .0;
    assert!(matches!(
        Outcome::decode(&raw),
        Err(DecodeError::TooLarge { .. })
    ));
    let raw = Raw::default()
        .u8(0xA1)
        .u64(1)
        .u8(2)
        .u8(0)
        .u32(2)
        .bytes(&[0xff, 0xfe])
        .0;
    assert!(matches!(
        Outcome::decode(&raw),
        Err(DecodeError::Inconsistent { .. })
    ));
    let raw = Raw::default().u8(0xA1).u64(1).u8(0).u8(0).u32(u32::MAX).0;
    assert!(matches!(
        Outcome::decode(&raw),
        Err(DecodeError::TooLarge { .. })
    ));
    let big = vec![0u8; RESULT_BYTES_MAX + 1];
    let o = Outcome {
        req_id: 1,
        status: Status::Committed,
        body: &big,
    };
    assert!(o.encode(&mut Vec::new()).is_err());
}

#[test]
fn trailing_bytes_are_refused() {
    let mut out = Vec::new();
    Outcome {
        req_id: 1,
        status: Status::Committed,
        body: b"x",
    }
    .encode(&mut out)
    .unwrap();
    out.push(0);
    assert!(matches!(
        Outcome::decode(&out),
        Err(DecodeError::Inconsistent { .. })
    ));
}

#[test]
fn get_value_rejections() {
    assert!(matches!(
        GetValue::decode(&[0; 7]),
        Err(DecodeError::Truncated { .. })
    ));
    let over = Raw::default().u64(VERSION_MAX + 1).0;
    assert!(matches!(
        GetValue::decode(&over),
        Err(DecodeError::TooLarge { .. })
    ));
    let big = Raw::default().u64(1).bytes(&[0; VALUE_BYTES_MAX + 1]).0;
    assert!(matches!(
        GetValue::decode(&big),
        Err(DecodeError::TooLarge { .. })
    ));
}
