//! Tests of the request ring entries ([`Request`]): round trips of every
//! kind, arbitrary and mutated bytes, one test per rejection.

mod app_support;

use app_support::*;
use proptest::prelude::*;
use splitkv_layout::app::*;
use splitkv_layout::host_nic::{HostToNic, LogApplied, ARGS_BYTES_MAX};
use splitkv_layout::{DecodeError, Key, VALUE_BYTES_MAX};

/// Owned [`Request`]; a transaction is kept encoded.
#[derive(Debug, Clone)]
enum RequestOwned {
    Get(u64, Key),
    Put(u64, Key, Vec<u8>),
    Insert(u64, Key, Vec<u8>),
    Delete(u64, Key),
    Txn(u64, Vec<u8>),
    Call(u64, u32, Vec<u8>),
}

impl RequestOwned {
    fn borrow(&self) -> Request<'_> {
        match self {
            RequestOwned::Get(req_id, key) => Request::Get {
                req_id: *req_id,
                key: *key,
            },
            RequestOwned::Put(req_id, key, value) => Request::Put {
                req_id: *req_id,
                key: *key,
                value,
            },
            RequestOwned::Insert(req_id, key, value) => Request::Insert {
                req_id: *req_id,
                key: *key,
                value,
            },
            RequestOwned::Delete(req_id, key) => Request::Delete {
                req_id: *req_id,
                key: *key,
            },
            RequestOwned::Txn(req_id, bytes) => Request::Txn {
                req_id: *req_id,
                txn: Txn::decode(bytes).expect("strategy makes valid txns"),
            },
            RequestOwned::Call(req_id, procedure, args) => Request::Call {
                req_id: *req_id,
                procedure: *procedure,
                args,
            },
        }
    }
}

fn request() -> impl Strategy<Value = RequestOwned> {
    let id = any::<u64>;
    prop_oneof![
        (id(), key()).prop_map(|(r, k)| RequestOwned::Get(r, k)),
        (id(), key(), bytes_up_to(VALUE_BYTES_MAX))
            .prop_map(|(r, k, v)| RequestOwned::Put(r, k, v)),
        (id(), key(), bytes_up_to(VALUE_BYTES_MAX))
            .prop_map(|(r, k, v)| RequestOwned::Insert(r, k, v)),
        (id(), key()).prop_map(|(r, k)| RequestOwned::Delete(r, k)),
        (id(), txn_valid()).prop_map(|(r, t)| RequestOwned::Txn(r, t.encode().unwrap())),
        (id(), 0..PROCEDURE_ID_UNKNOWN, bytes_up_to(ARGS_BYTES_MAX))
            .prop_map(|(r, p, a)| RequestOwned::Call(r, p, a)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn round_trips_through_vec_and_slice(r in request()) {
        let req = r.borrow();
        let mut out = vec![0xee];
        req.encode(&mut out).unwrap();
        prop_assert_eq!(out.len() - 1, req.encoded_len());
        prop_assert!(req.encoded_len() <= REQUEST_BYTES_MAX);
        prop_assert_eq!(Request::decode(&out[1..]).unwrap(), req);
        let mut slot = vec![0u8; req.encoded_len() + 5];
        prop_assert_eq!(req.encode_into(&mut slot).unwrap(), req.encoded_len());
        prop_assert_eq!(&slot[..req.encoded_len()], &out[1..]);
        prop_assert_eq!(Request::decode(&out[1..]).unwrap().req_id(), req.req_id());
    }

    #[test]
    fn mutations_decode_canonically_or_fail(
        r in request(), kind in any::<u8>(), at in any::<usize>(), value in any::<u8>(),
    ) {
        let mut out = Vec::new();
        r.borrow().encode(&mut out).unwrap();
        let m = mutate(&out, kind, at, value);
        if let Ok(d) = Request::decode(&m) {
            let mut again = Vec::new();
            d.encode(&mut again).unwrap();
            prop_assert_eq!(again, m);
        }
    }

    #[test]
    fn decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(d) = Request::decode(&bytes) {
            let mut again = Vec::new();
            d.encode(&mut again).unwrap();
            prop_assert_eq!(again, bytes);
        }
    }
}

fn get(req_id: u64) -> Request<'static> {
    Request::Get {
        req_id,
        key: Key::new(1, 2),
    }
}

#[test]
fn get_layout_matches_the_table() {
    let mut out = Vec::new();
    get(0x0102_0304_0506_0708).encode(&mut out).unwrap();
    let expected = Raw::default()
        .u8(0x21)
        .u64(0x0102_0304_0506_0708)
        .key(Key::new(1, 2));
    assert_eq!(out, expected.0);
}

#[test]
fn unknown_and_misrouted_tags_are_refused() {
    for tag in [0x00, 0x20, 0x27, 0x81, 0xA1, 0xff] {
        let bytes = Raw::default().u8(tag).u64(1).key(Key::new(0, 0)).0;
        assert!(
            matches!(Request::decode(&bytes), Err(DecodeError::BadTag { .. })),
            "tag {tag:#x}"
        );
    }
    let mut host = Vec::new();
    HostToNic::LogApplied(LogApplied { applied_bytes: 1 }).encode(&mut host);
    assert!(matches!(
        Request::decode(&host),
        Err(DecodeError::BadTag { .. })
    ));
}

#[test]
fn trailing_and_missing_bytes_are_refused() {
    let mut out = Vec::new();
    get(1).encode(&mut out).unwrap();
    out.push(0);
    assert!(matches!(
        Request::decode(&out),
        Err(DecodeError::Inconsistent { .. })
    ));
    out.truncate(out.len() - 2);
    assert!(matches!(
        Request::decode(&out),
        Err(DecodeError::Truncated { .. })
    ));
}

#[test]
fn values_and_args_over_bound_are_refused() {
    let big = vec![0u8; VALUE_BYTES_MAX + 1];
    let put = Request::Put {
        req_id: 1,
        key: Key::new(0, 1),
        value: &big,
    };
    let mut out = vec![9];
    assert!(matches!(
        put.encode(&mut out),
        Err(AppEncodeError::Invalid(DecodeError::TooLarge { .. }))
    ));
    assert_eq!(out, [9], "nothing appended on error");
    let raw = Raw::default()
        .u8(0x23)
        .u64(1)
        .key(Key::new(0, 1))
        .u32(VALUE_BYTES_MAX as u32 + 1)
        .bytes(&big)
        .0;
    assert!(matches!(
        Request::decode(&raw),
        Err(DecodeError::TooLarge { .. })
    ));
    let args = vec![0u8; ARGS_BYTES_MAX + 1];
    let call = Request::Call {
        req_id: 1,
        procedure: 3,
        args: &args,
    };
    assert!(call.encode(&mut Vec::new()).is_err());
    let raw = Raw::default().u8(0x26).u64(1).u32(3).u32(u32::MAX).0;
    assert!(matches!(
        Request::decode(&raw),
        Err(DecodeError::TooLarge { .. })
    ));
    let raw = Raw::default()
        .u8(0x25)
        .u64(1)
        .u32(TXN_BYTES_MAX as u32 + 1)
        .0;
    assert!(matches!(
        Request::decode(&raw),
        Err(DecodeError::TooLarge { .. })
    ));
}

#[test]
fn a_bad_txn_inside_a_request_is_refused() {
    // 17 compared keys: over the read set.
    let mut body = Raw::default().u8(17).u8(0).u8(0);
    for i in 0..17 {
        body = body.key(Key::new(0, i)).u8(2).u8(5);
    }
    let raw = Raw::default()
        .u8(0x25)
        .u64(1)
        .u32(body.0.len() as u32)
        .bytes(&body.0)
        .0;
    assert!(matches!(
        Request::decode(&raw),
        Err(DecodeError::TooLarge { .. })
    ));
}

#[test]
fn the_reserved_procedure_id_is_refused() {
    let call = Request::Call {
        req_id: 1,
        procedure: PROCEDURE_ID_UNKNOWN,
        args: b"",
    };
    assert!(call.encode(&mut Vec::new()).is_err());
    let raw = Raw::default()
        .u8(0x26)
        .u64(1)
        .u32(PROCEDURE_ID_UNKNOWN)
        .u32(0)
        .0;
    assert!(matches!(
        Request::decode(&raw),
        Err(DecodeError::Inconsistent { .. })
    ));
}

#[test]
fn a_short_slot_is_refused() {
    let mut slot = [0u8; 10];
    assert!(matches!(
        get(1).encode_into(&mut slot),
        Err(AppEncodeError::BufferTooSmall { need: 21, have: 10 })
    ));
    assert_eq!(slot, [0; 10], "nothing written on error");
}
