//! Tests of the host↔NIC message codec (`splitkv_layout::host_nic`) and the host
//! log record codec (`splitkv_layout::log_record`): round trips, truncation,
//! random bytes, oversized lengths, unknown tags.

use proptest::prelude::*;
use splitkv_layout::host_nic::*;
use splitkv_layout::log_record::*;
use splitkv_layout::ring::ring_pair;
use splitkv_layout::{DecodeError, Key, ObjectMeta, TxId, TX_VALUES_MAX, VALUE_BYTES_MAX};

// ---------------------------------------------------------------------------
// Strategies.

fn status() -> impl Strategy<Value = TxStatus> {
    prop::sample::select(vec![
        TxStatus::Committed,
        TxStatus::LockConflict,
        TxStatus::UserAborted,
        TxStatus::Rejected,
        TxStatus::ValidationFailed,
        TxStatus::TableFull,
        TxStatus::TooLarge,
        TxStatus::Unavailable,
        TxStatus::HostFailure,
        TxStatus::Unknown,
    ])
}

fn bytes_up_to(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::collection::vec(any::<u8>(), 0..=16),
        2 => prop::collection::vec(any::<u8>(), 0..=max),
        1 => prop::collection::vec(any::<u8>(), max..=max),
    ]
}

/// Owned form of a [`HostToNic`], so strategies can produce it.
#[derive(Debug, Clone)]
enum HostToNicOwned {
    TxRequest(u64, u32, Vec<u8>),
    LogApplied(u64),
}

impl HostToNicOwned {
    fn borrow(&self) -> HostToNic<'_> {
        match self {
            HostToNicOwned::TxRequest(req_id, procedure, args) => HostToNic::TxRequest(TxRequest {
                req_id: *req_id,
                procedure: *procedure,
                args,
            }),
            HostToNicOwned::LogApplied(applied_bytes) => HostToNic::LogApplied(LogApplied {
                applied_bytes: *applied_bytes,
            }),
        }
    }
}

fn host_to_nic() -> impl Strategy<Value = HostToNicOwned> {
    prop_oneof![
        (any::<u64>(), any::<u32>(), bytes_up_to(ARGS_BYTES_MAX))
            .prop_map(|(r, p, a)| HostToNicOwned::TxRequest(r, p, a)),
        any::<u64>().prop_map(HostToNicOwned::LogApplied),
    ]
}

fn nic_to_host() -> impl Strategy<Value = (u64, TxStatus, Vec<u8>)> {
    (any::<u64>(), status(), bytes_up_to(RESULT_BYTES_MAX))
}

fn outcome(o: &(u64, TxStatus, Vec<u8>)) -> NicToHost<'_> {
    NicToHost::TxOutcome(TxOutcome {
        req_id: o.0,
        status: o.1,
        result: &o.2,
    })
}

/// Owned form of a [`LogRecord`].
type RecordOwned = (LogKind, u64, Key, u64, Vec<u8>);

fn record_owned() -> impl Strategy<Value = RecordOwned> {
    (
        prop::sample::select(vec![
            LogKind::Log,
            LogKind::Commit,
            LogKind::Abort,
            LogKind::Lock,
            LogKind::Repl,
        ]),
        any::<u64>(),
        (any::<u32>(), any::<u64>()).prop_map(|(t, i)| Key::new(t, i)),
        any::<u64>(),
        bytes_up_to(VALUE_BYTES_MAX),
    )
}

fn record(r: &RecordOwned) -> LogRecord<'_> {
    LogRecord {
        kind: r.0,
        tx_id: TxId::from_bits(r.1),
        key: r.2,
        meta: ObjectMeta(r.3),
        value: &r.4,
    }
}

fn is_truncated<T: std::fmt::Debug>(r: &Result<T, DecodeError>) -> bool {
    matches!(r, Err(DecodeError::Truncated { .. }))
}

// ---------------------------------------------------------------------------
// Round trips and prefixes.

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn host_to_nic_round_trips(msg in host_to_nic(), prefix in prop::collection::vec(any::<u8>(), 0..4)) {
        let msg = msg.borrow();
        let mut out = prefix.clone();
        msg.encode(&mut out);
        prop_assert_eq!(&out[..prefix.len()], &prefix[..]);
        let bytes = &out[prefix.len()..];
        prop_assert_eq!(bytes.len(), msg.encoded_len());
        prop_assert!(bytes.len() <= HOST_TO_NIC_BYTES_MAX);
        prop_assert_eq!(HostToNic::decode(bytes), Ok(msg));
        for n in 0..bytes.len() {
            let r = HostToNic::decode(&bytes[..n]);
            prop_assert!(is_truncated(&r), "prefix {}: {:?}", n, r);
        }
        let mut longer = bytes.to_vec();
        longer.push(0);
        let ok = matches!(HostToNic::decode(&longer), Err(DecodeError::Inconsistent { .. }));
        prop_assert!(ok);
    }

    #[test]
    fn nic_to_host_round_trips(o in nic_to_host(), prefix in prop::collection::vec(any::<u8>(), 0..4)) {
        let msg = outcome(&o);
        let mut out = prefix.clone();
        msg.encode(&mut out);
        let bytes = &out[prefix.len()..];
        prop_assert_eq!(bytes.len(), msg.encoded_len());
        prop_assert!(bytes.len() <= NIC_TO_HOST_BYTES_MAX);
        prop_assert_eq!(NicToHost::decode(bytes), Ok(msg));
        for n in 0..bytes.len() {
            let r = NicToHost::decode(&bytes[..n]);
            prop_assert!(is_truncated(&r), "prefix {}: {:?}", n, r);
        }
        let mut longer = bytes.to_vec();
        longer.push(0);
        let ok = matches!(NicToHost::decode(&longer), Err(DecodeError::Inconsistent { .. }));
        prop_assert!(ok);
    }

    #[test]
    fn log_record_round_trips(r in record_owned(), prefix in prop::collection::vec(any::<u8>(), 0..4), suffix in prop::collection::vec(any::<u8>(), 0..8)) {
        let rec = record(&r);
        let mut out = prefix.clone();
        rec.encode(&mut out);
        let len = out.len() - prefix.len();
        prop_assert_eq!(len, rec.encoded_len());
        prop_assert!(len <= LOG_RECORD_BYTES_MAX);
        out.extend_from_slice(&suffix);
        let bytes = &out[prefix.len()..];
        // Bytes after the record are left to the caller.
        prop_assert_eq!(LogRecord::decode(bytes), Ok((rec, len)));
        for n in 0..len {
            let r = LogRecord::decode(&bytes[..n]);
            prop_assert!(is_truncated(&r), "prefix {}: {:?}", n, r);
        }
    }

    #[test]
    fn log_records_iterate_in_order(recs in prop::collection::vec(record_owned(), 0..8), cut in any::<prop::sample::Index>()) {
        let mut bytes = Vec::new();
        for r in &recs {
            record(r).encode(&mut bytes);
        }
        let got: Vec<_> = LogRecords::new(&bytes).collect();
        prop_assert_eq!(got.len(), recs.len());
        for (g, r) in got.iter().zip(&recs) {
            prop_assert_eq!(g, &Ok(record(r)));
        }
        // Cutting the entry anywhere inside a record: the whole records before
        // the cut, then one error, then nothing.
        if !bytes.is_empty() {
            let cut = cut.index(bytes.len());
            let mut it = LogRecords::new(&bytes[..cut]);
            let mut whole = 0;
            let mut end = 0;
            for r in &recs {
                if end + record(r).encoded_len() > cut {
                    break;
                }
                end += record(r).encoded_len();
                whole += 1;
            }
            for r in recs.iter().take(whole) {
                prop_assert_eq!(it.next(), Some(Ok(record(r))));
            }
            if end < cut {
                let ok = matches!(it.next(), Some(Err(DecodeError::Truncated { .. })));
        prop_assert!(ok);
            }
            prop_assert_eq!(it.next(), None);
            prop_assert_eq!(it.next(), None);
        }
    }
}

// ---------------------------------------------------------------------------
// Random bytes: never panic; whatever decodes re-encodes to the same bytes.

fn tagged_bytes(tags: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        (
            prop::sample::select(tags),
            prop::collection::vec(any::<u8>(), 0..64)
        )
            .prop_map(|(t, mut rest)| {
                rest.insert(0, t);
                rest
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn random_host_to_nic_bytes(bytes in tagged_bytes(vec![TAG_TX_REQUEST, TAG_LOG_APPLIED])) {
        if let Ok(msg) = HostToNic::decode(&bytes) {
            let mut out = Vec::new();
            msg.encode(&mut out);
            prop_assert_eq!(out, bytes);
        }
    }

    #[test]
    fn random_nic_to_host_bytes(bytes in tagged_bytes(vec![TAG_TX_OUTCOME])) {
        if let Ok(msg) = NicToHost::decode(&bytes) {
            let mut out = Vec::new();
            msg.encode(&mut out);
            prop_assert_eq!(out, bytes);
        }
    }

    #[test]
    fn random_log_bytes(bytes in tagged_bytes(vec![1, 2])) {
        if let Ok((rec, used)) = LogRecord::decode(&bytes) {
            let mut out = Vec::new();
            rec.encode(&mut out);
            prop_assert_eq!(&out[..], &bytes[..used]);
        }
        let mut consumed = 0;
        for r in LogRecords::new(&bytes) {
            match r {
                Ok(rec) => consumed += rec.encoded_len(),
                Err(_) => consumed = bytes.len(),
            }
        }
        prop_assert_eq!(consumed, bytes.len());
    }
}

// ---------------------------------------------------------------------------
// Oversized lengths and unknown tags.

proptest! {
    #[test]
    fn oversized_args_are_too_large(len in (ARGS_BYTES_MAX + 1) as u32..=u32::MAX, body in any::<bool>()) {
        let mut bytes = vec![TAG_TX_REQUEST];
        bytes.extend_from_slice(&1u64.to_le_bytes());
        bytes.extend_from_slice(&2u32.to_le_bytes());
        bytes.extend_from_slice(&len.to_le_bytes());
        if body {
            bytes.resize(bytes.len() + (len as usize).min(2 * ARGS_BYTES_MAX), 0);
        }
        prop_assert_eq!(
            HostToNic::decode(&bytes),
            Err(DecodeError::TooLarge { what: "TxRequest args", len: len as usize, max: ARGS_BYTES_MAX })
        );
    }

    #[test]
    fn oversized_result_is_too_large(len in (RESULT_BYTES_MAX + 1) as u32..=u32::MAX, body in any::<bool>()) {
        let mut bytes = vec![TAG_TX_OUTCOME];
        bytes.extend_from_slice(&1u64.to_le_bytes());
        bytes.push(TxStatus::Committed as u8);
        bytes.extend_from_slice(&len.to_le_bytes());
        if body {
            bytes.resize(bytes.len() + (len as usize).min(2 * RESULT_BYTES_MAX), 0);
        }
        prop_assert_eq!(
            NicToHost::decode(&bytes),
            Err(DecodeError::TooLarge { what: "TxOutcome result", len: len as usize, max: RESULT_BYTES_MAX })
        );
    }

    #[test]
    fn oversized_value_is_too_large(len in (VALUE_BYTES_MAX + 1) as u32..=u32::MAX, body in any::<bool>()) {
        let rec = LogRecord { kind: LogKind::Log, tx_id: TxId::from_bits(1), key: Key::new(1, 1), meta: ObjectMeta(0), value: &[] };
        let mut bytes = Vec::new();
        rec.encode(&mut bytes);
        let at = LOG_RECORD_HEADER_BYTES - 4;
        bytes[at..].copy_from_slice(&len.to_le_bytes());
        if body {
            bytes.resize(bytes.len() + (len as usize).min(2 * VALUE_BYTES_MAX), 0);
        }
        prop_assert_eq!(
            LogRecord::decode(&bytes),
            Err(DecodeError::TooLarge { what: "log record value", len: len as usize, max: VALUE_BYTES_MAX })
        );
        let mut it = LogRecords::new(&bytes);
        let ok = matches!(it.next(), Some(Err(DecodeError::TooLarge { .. })));
        prop_assert!(ok);
        prop_assert_eq!(it.next(), None);
    }
}

#[test]
fn unknown_tags() {
    for tag in (0..=255u8).filter(|t| ![TAG_TX_REQUEST, TAG_LOG_APPLIED].contains(t)) {
        let mut bytes = vec![tag];
        bytes.extend_from_slice(&[0; 16]);
        assert_eq!(
            HostToNic::decode(&bytes),
            Err(DecodeError::BadTag {
                what: "host-to-nic message kind",
                tag: tag as u64
            })
        );
    }
    for tag in (0..=255u8).filter(|t| *t != TAG_TX_OUTCOME) {
        assert!(matches!(
            NicToHost::decode(&[tag; 12]),
            Err(DecodeError::BadTag { .. })
        ));
    }
    for status in TxStatus::ALL.len() as u8..=255u8 {
        let mut bytes = vec![TAG_TX_OUTCOME];
        bytes.extend_from_slice(&7u64.to_le_bytes());
        bytes.push(status);
        bytes.extend_from_slice(&0u16.to_le_bytes());
        assert_eq!(
            NicToHost::decode(&bytes),
            Err(DecodeError::BadTag {
                what: "TxOutcome status",
                tag: status as u64
            })
        );
        assert_eq!(TxStatus::from_u8(status), None);
    }
    for kind in (0..=255u8).filter(|k| !(1..=5).contains(k)) {
        let mut bytes = vec![kind];
        bytes.extend_from_slice(&[0; 40]);
        assert_eq!(
            LogRecord::decode(&bytes),
            Err(DecodeError::BadTag {
                what: "log record kind",
                tag: kind as u64
            })
        );
        assert_eq!(LogKind::from_u8(kind), None);
    }
    assert_eq!(
        HostToNic::decode(&[]),
        Err(DecodeError::Truncated {
            what: "host-to-nic message",
            need: 1,
            have: 0
        })
    );
    assert!(matches!(
        NicToHost::decode(&[]),
        Err(DecodeError::Truncated { .. })
    ));
    assert!(matches!(
        LogRecord::decode(&[]),
        Err(DecodeError::Truncated { .. })
    ));
    assert_eq!(LogRecords::new(&[]).next(), None);
}

#[test]
fn wire_values_of_enums() {
    for s in [
        TxStatus::Committed,
        TxStatus::LockConflict,
        TxStatus::UserAborted,
        TxStatus::Rejected,
        TxStatus::ValidationFailed,
        TxStatus::TableFull,
        TxStatus::TooLarge,
        TxStatus::Unavailable,
        TxStatus::HostFailure,
        TxStatus::Unknown,
    ] {
        assert_eq!(TxStatus::from_u8(s as u8), Some(s));
    }
    assert_eq!(TxStatus::ALL.len(), 10);
    assert_eq!(TxStatus::Unknown as u8, 9);
    assert!(TxStatus::Unknown.is_indeterminate());
    assert!(TxStatus::ALL
        .iter()
        .all(|s| s.is_indeterminate() == (*s == TxStatus::Unknown)));
    assert_eq!(TxStatus::Rejected as u8, 3);
    assert_eq!(TxStatus::Unavailable as u8, 7);
    assert_eq!(TxStatus::HostFailure as u8, 8);
    assert_eq!(LogKind::from_u8(LogKind::Log as u8), Some(LogKind::Log));
    assert_eq!(
        LogKind::from_u8(LogKind::Commit as u8),
        Some(LogKind::Commit)
    );
    assert_eq!(LogKind::Commit as u8, 2);
    assert_eq!(LogKind::from_u8(3), Some(LogKind::Abort));
    assert_eq!(LogKind::from_u8(4), Some(LogKind::Lock));
    assert_eq!(LogKind::from_u8(5), Some(LogKind::Repl));
}

#[test]
fn largest_messages_fit_one_ring_entry() {
    let (mut p, mut c) = ring_pair(512 * 1024).unwrap();
    let args = vec![0xa5; ARGS_BYTES_MAX];
    let value = vec![0x5a; VALUE_BYTES_MAX];
    let mut buf = Vec::new();
    HostToNic::TxRequest(TxRequest {
        req_id: 1,
        procedure: 2,
        args: &args,
    })
    .encode(&mut buf);
    assert_eq!(buf.len(), HOST_TO_NIC_BYTES_MAX);
    p.try_push(&buf).unwrap();
    buf.clear();
    let rec = LogRecord {
        kind: LogKind::Commit,
        tx_id: TxId::from_bits(3),
        key: Key::new(4, 5),
        meta: ObjectMeta(6),
        value: &value,
    };
    // A COMMIT of a full-size transaction: 16 values of 4 KiB in one entry.
    for _ in 0..TX_VALUES_MAX {
        rec.encode(&mut buf);
    }
    assert_eq!(buf.len(), LOG_ENTRY_BYTES_MAX);
    assert_eq!(VALUE_BYTES_MAX, 4096);
    p.try_push(&buf).unwrap();
    buf.clear();
    let result = vec![0x3c; RESULT_BYTES_MAX];
    NicToHost::TxOutcome(TxOutcome {
        req_id: 7,
        status: TxStatus::Committed,
        result: &result,
    })
    .encode(&mut buf);
    assert_eq!(buf.len(), NIC_TO_HOST_BYTES_MAX);
    p.try_push(&buf).unwrap();

    let mut out = Vec::new();
    assert!(c.try_pop(&mut out).unwrap());
    assert!(matches!(HostToNic::decode(&out), Ok(HostToNic::TxRequest(r)) if r.args == &args[..]));
    assert!(c.try_pop(&mut out).unwrap());
    let recs: Vec<_> = LogRecords::new(&out).collect();
    assert_eq!(recs, vec![Ok(rec); TX_VALUES_MAX]);
    assert!(c.try_pop(&mut out).unwrap());
    assert!(
        matches!(NicToHost::decode(&out), Ok(NicToHost::TxOutcome(o)) if o.result == &result[..])
    );
}

/// The ring-message limits hold a full-size transaction (16 values of 4 KiB
/// with their keys), and one byte more is a typed decode error.
#[test]
fn ring_message_limits_at_the_edge() {
    const { assert!(ARGS_BYTES_MAX >= TX_VALUES_MAX * (VALUE_BYTES_MAX + 8 + 4)) };
    const { assert!(RESULT_BYTES_MAX >= TX_VALUES_MAX * (VALUE_BYTES_MAX + 8 + 4)) };
    for (len, ok) in [(ARGS_BYTES_MAX, true), (ARGS_BYTES_MAX + 1, false)] {
        let mut bytes = vec![TAG_TX_REQUEST];
        bytes.extend_from_slice(&1u64.to_le_bytes());
        bytes.extend_from_slice(&2u32.to_le_bytes());
        bytes.extend_from_slice(&(len as u32).to_le_bytes());
        bytes.resize(bytes.len() + len, 7);
        match HostToNic::decode(&bytes) {
            Ok(HostToNic::TxRequest(r)) => assert!(ok && r.args.len() == len),
            Err(e) => assert!(
                !ok && e
                    == DecodeError::TooLarge {
                        what: "TxRequest args",
                        len,
                        max: ARGS_BYTES_MAX
                    }
            ),
            other => panic!("{other:?}"),
        }
    }
    for (len, ok) in [(RESULT_BYTES_MAX, true), (RESULT_BYTES_MAX + 1, false)] {
        let mut bytes = vec![TAG_TX_OUTCOME];
        bytes.extend_from_slice(&1u64.to_le_bytes());
        bytes.push(TxStatus::Committed as u8);
        bytes.extend_from_slice(&(len as u32).to_le_bytes());
        bytes.resize(bytes.len() + len, 7);
        let got = NicToHost::decode(&bytes).map(|NicToHost::TxOutcome(o)| o.result.len());
        let want = if ok {
            Ok(len)
        } else {
            Err(DecodeError::TooLarge {
                what: "TxOutcome result",
                len,
                max: RESULT_BYTES_MAX,
            })
        };
        assert_eq!(got, want);
    }
}

#[test]
#[should_panic(expected = "ARGS_BYTES_MAX")]
fn encode_rejects_oversized_args() {
    let args = vec![0; ARGS_BYTES_MAX + 1];
    HostToNic::TxRequest(TxRequest {
        req_id: 0,
        procedure: 0,
        args: &args,
    })
    .encode(&mut Vec::new());
}

#[test]
#[should_panic(expected = "RESULT_BYTES_MAX")]
fn encode_rejects_oversized_result() {
    let result = vec![0; RESULT_BYTES_MAX + 1];
    NicToHost::TxOutcome(TxOutcome {
        req_id: 0,
        status: TxStatus::Committed,
        result: &result,
    })
    .encode(&mut Vec::new());
}

#[test]
#[should_panic(expected = "VALUE_BYTES_MAX")]
fn encode_rejects_oversized_value() {
    let value = vec![0; VALUE_BYTES_MAX + 1];
    LogRecord {
        kind: LogKind::Log,
        tx_id: TxId::from_bits(0),
        key: Key::new(0, 0),
        meta: ObjectMeta(0),
        value: &value,
    }
    .encode(&mut Vec::new());
}
