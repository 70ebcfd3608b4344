//! Receive checks: the GRH at the head of each UD receive, short and
//! truncated receives, the MTU, the QKey in the immediate data, the
//! source; and no input makes them panic.

use proptest::prelude::*;
use splitkv_nic::net::verbs::addr::{Gid, PeerTable, Route, VerbsPeer};
use splitkv_nic::net::verbs::recv::{
    check_recv, RecvCompletion, RecvLimits, RxDrop, RxDropCounts, GRH_SGID_OFFSET,
};
use splitkv_nic::net::verbs::VERBS_GRH_BYTES;

const MTU: usize = 256;
const QKEY: u32 = 0x1111_1111;
const LIMITS: RecvLimits = RecvLimits {
    slot_bytes: VERBS_GRH_BYTES + MTU,
    mtu: MTU,
    qkey: QKEY,
};

fn gid(last: u8) -> Gid {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[15] = last;
    Gid(g)
}

fn table() -> PeerTable {
    let peer = |qpn, route| VerbsPeer {
        addr: "10.0.0.9:1".parse().unwrap(),
        route,
        qpn,
        qkey: QKEY,
    };
    PeerTable::new(vec![
        None,
        Some(peer(77, Route::Gid(gid(2)))),
        Some(peer(88, Route::Lid(5))),
    ])
}

/// A slot holding a GRH from `sgid` and then `payload`.
fn slot(sgid: Gid, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; LIMITS.slot_bytes];
    buf[GRH_SGID_OFFSET..GRH_SGID_OFFSET + 16].copy_from_slice(&sgid.0);
    buf[VERBS_GRH_BYTES..VERBS_GRH_BYTES + payload.len()].copy_from_slice(payload);
    buf
}

fn wc(len: usize, src_qp: u32, grh: bool) -> RecvCompletion {
    RecvCompletion {
        status: 0,
        byte_len: len as u32,
        src_qp,
        slid: 5,
        grh,
        imm: Some(QKEY),
    }
}

#[test]
fn packet_follows_the_grh_and_the_source_is_its_sgid() {
    let buf = slot(gid(2), b"hello");
    let (range, node) =
        check_recv(&wc(VERBS_GRH_BYTES + 5, 77, true), &buf, LIMITS, &table()).unwrap();
    assert_eq!(&buf[range], b"hello");
    assert_eq!(node, 1);
}

#[test]
fn without_a_grh_the_source_is_the_lid() {
    // InfiniBand within a subnet: the first 40 bytes are undefined and
    // skipped all the same; the sender is told by its LID.
    let buf = slot(gid(99), b"ib");
    let (range, node) =
        check_recv(&wc(VERBS_GRH_BYTES + 2, 88, false), &buf, LIMITS, &table()).unwrap();
    assert_eq!((&buf[range], node), (&b"ib"[..], 2));
}

#[test]
fn bad_receives_are_dropped_by_reason() {
    let t = table();
    let buf = slot(gid(2), &[7; MTU]);
    let full = VERBS_GRH_BYTES + MTU;
    let check =
        |c: RecvCompletion, b: &[u8]| check_recv(&c, b, LIMITS, &t).map(|_| ()).unwrap_err();
    assert_eq!(
        check(
            RecvCompletion {
                status: 5,
                ..wc(full, 77, true)
            },
            &buf
        ),
        RxDrop::ErrorStatus
    );
    assert_eq!(
        check(wc(VERBS_GRH_BYTES - 1, 77, true), &buf),
        RxDrop::Short
    );
    assert_eq!(check(wc(0, 77, true), &buf), RxDrop::Short);
    assert_eq!(check(wc(full + 1, 77, true), &buf), RxDrop::Truncated);
    assert_eq!(
        check(wc(full, 77, true), &buf[..full - 1]),
        RxDrop::Truncated
    );
    let big = RecvLimits {
        slot_bytes: full + 8,
        ..LIMITS
    };
    let big_buf = vec![0u8; full + 8];
    assert_eq!(
        check_recv(&wc(full + 1, 77, true), &big_buf, big, &t).unwrap_err(),
        RxDrop::TooLong
    );
    assert_eq!(
        check(
            RecvCompletion {
                imm: None,
                ..wc(full, 77, true)
            },
            &buf
        ),
        RxDrop::WrongQkey
    );
    assert_eq!(
        check(
            RecvCompletion {
                imm: Some(QKEY ^ 1),
                ..wc(full, 77, true)
            },
            &buf
        ),
        RxDrop::WrongQkey
    );
    assert_eq!(check(wc(full, 78, true), &buf), RxDrop::Stranger);
    assert_eq!(
        check(wc(full, 77, true), &slot(gid(3), &[])),
        RxDrop::Stranger
    );
    // An empty packet (GRH only) is a packet: the sessions judge it.
    assert!(check_recv(&wc(VERBS_GRH_BYTES, 77, true), &buf, LIMITS, &t).is_ok());
}

#[test]
fn former_endpoint_is_its_own_reason_and_counts_add_up() {
    let mut t = table();
    let old = *t.get(1).unwrap();
    t.repoint(1, VerbsPeer { qpn: 99, ..old });
    let buf = slot(gid(2), b"x");
    let why = check_recv(&wc(VERBS_GRH_BYTES + 1, 77, true), &buf, LIMITS, &t).unwrap_err();
    assert_eq!(why, RxDrop::FormerPeer);
    let mut counts = RxDropCounts::default();
    for r in RxDrop::ALL {
        counts.count(r);
    }
    counts.count(why);
    assert_eq!(counts.get(RxDrop::FormerPeer), 2);
    assert_eq!(counts.total(), RxDrop::ALL.len() as u64 + 1);
    let names: std::collections::HashSet<_> = RxDrop::ALL.iter().map(|r| r.name()).collect();
    assert_eq!(names.len(), RxDrop::ALL.len());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    /// Any completion over any buffer: a drop reason or a range inside
    /// the buffer past the GRH, never a panic.
    #[test]
    fn any_completion_is_checked_without_panic(
        status in prop_oneof![Just(0u32), any::<u32>()],
        byte_len in prop_oneof![0u32..400, any::<u32>()],
        src_qp in prop_oneof![Just(77u32), Just(88), any::<u32>()],
        grh in any::<bool>(),
        imm in prop_oneof![Just(Some(QKEY)), any::<Option<u32>>()],
        buf_len in 0usize..400,
    ) {
        let buf = vec![0u8; buf_len];
        let c = RecvCompletion { status, byte_len, src_qp, slid: 5, grh, imm };
        if let Ok((range, _)) = check_recv(&c, &buf, LIMITS, &table()) {
            prop_assert!(range.start == VERBS_GRH_BYTES && range.end <= buf.len());
            prop_assert!(range.len() <= MTU);
        }
    }
}
