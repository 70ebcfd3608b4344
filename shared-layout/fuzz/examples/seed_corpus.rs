//! Writes seed inputs for this package's fuzz targets — valid encodings made
//! with the codecs, so the fuzzer starts past the magic numbers and length
//! checks — into `corpus/<target>/seed-<name>` under the folder given
//! (default: this package's folder). Run from the repository root with
//! `cargo run --manifest-path shared-layout/fuzz/Cargo.toml --example seed_corpus`.

use splitkv_layout::app::{
    AbortReason, AppLimits, AppMemoryLayout, Branch, CmpOp, Compare, Condition, GetResult,
    GetValue, Hello, Op, Outcome, Refused, RefusedReason, Request, Status, Txn, TxnResult,
    UnavailableReason, Welcome, APP_RING_CAPACITY_MIN_BYTES,
};
use splitkv_layout::host_nic::{HostToNic, LogApplied, NicToHost, TxOutcome, TxRequest, TxStatus};
use splitkv_layout::log_record::{LogKind, LogRecord};
use splitkv_layout::wire::{
    BodyWriter, CoordPhase, Decision, LockEntry, MsgHeader, MsgKind, NodeMask, PacketHeader,
    PeerTx, RebuildMsg, RecordEvidence, RecordKind, ReplyStatus, MSG_FLAG_FRAG_MORE,
    MSG_HEADER_BYTES, PACKET_FLAG_ACK_ONLY,
};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, TxId};
use std::path::PathBuf;

/// A packet (format v2) from node 1 to node 0 of cluster 7 carrying `bodies`.
fn packet(bodies: &[BodyWriter]) -> Vec<u8> {
    let mut msgs = Vec::new();
    for b in bodies {
        MsgHeader::whole(b.kind(), b.bytes().len() as u32).encode(&mut msgs);
        msgs.extend_from_slice(b.bytes());
    }
    let mut out = Vec::new();
    PacketHeader {
        cluster_id: 7,
        src: 1,
        dst: 0,
        src_incarnation: 1,
        count: bodies.len() as u16,
        len: msgs.len() as u32,
        ..PacketHeader::default()
    }
    .encode(&mut out);
    out.extend_from_slice(&msgs);
    out
}

/// A standalone acknowledgement (no messages) and a packet whose one
/// message is a fragment (FRAG_MORE) of a body.
fn session_packets() -> Vec<(String, Vec<u8>)> {
    let mut ack = Vec::new();
    PacketHeader {
        flags: PACKET_FLAG_ACK_ONLY,
        cluster_id: 7,
        src: 1,
        src_incarnation: 1,
        ack: 3,
        ..PacketHeader::default()
    }
    .encode(&mut ack);
    let mut frag = Vec::new();
    let part = [5u8; 24];
    PacketHeader {
        cluster_id: 7,
        src: 1,
        src_incarnation: 1,
        count: 1,
        len: (MSG_HEADER_BYTES + part.len()) as u32,
        ..PacketHeader::default()
    }
    .encode(&mut frag);
    MsgHeader {
        flags: MSG_FLAG_FRAG_MORE,
        ..MsgHeader::whole(MsgKind::Commit, part.len() as u32)
    }
    .encode(&mut frag);
    frag.extend_from_slice(&part);
    vec![("ack-only".into(), ack), ("fragment".into(), frag)]
}

/// One body of every message kind.
fn bodies() -> Vec<BodyWriter> {
    let k = |id| Key::new(0, id);
    let meta = ObjectMeta::new(3, ObjectFlags::READABLE);
    let tx = TxId::from_bits(1);
    let mut all = Vec::new();
    let mut w = BodyWriter::new();
    w.begin_execute(tx);
    w.push_read(&k(1));
    w.push_lock(&k(2));
    all.push(w);
    let mut w = BodyWriter::new();
    w.begin_execute_resp(tx, ReplyStatus::Ok);
    w.push_item(&k(1), meta, b"value");
    all.push(w);
    let mut w = BodyWriter::new();
    w.begin_validate(tx);
    w.push_version(&k(1), 3);
    all.push(w);
    let mut w = BodyWriter::new();
    w.validate_resp(tx, ReplyStatus::Ok);
    all.push(w);
    for kind in [MsgKind::Log, MsgKind::Commit] {
        let mut w = BodyWriter::new();
        w.begin_items(kind, tx);
        w.push_item(&k(2), meta, &[7; 300]);
        all.push(w);
    }
    for kind in [MsgKind::LogAck, MsgKind::CommitAck, MsgKind::AbortLogAck] {
        let mut w = BodyWriter::new();
        w.ack(kind, tx, ReplyStatus::Ok);
        all.push(w);
    }
    let mut w = BodyWriter::new();
    w.begin_abort(tx);
    w.push_abort_key(&k(2));
    all.push(w);
    let mut w = BodyWriter::new();
    w.get_one(tx, &k(2));
    all.push(w);
    let mut w = BodyWriter::new();
    w.begin_get_one_resp(tx, ReplyStatus::Ok);
    w.push_item(&k(2), meta, &[7; 30]);
    all.push(w);
    let mut w = BodyWriter::new();
    w.write_one(tx, &[1; 40]);
    all.push(w);
    let mut w = BodyWriter::new();
    w.write_one_resp(tx, splitkv_layout::host_nic::TxStatus::Committed, &[2; 20]);
    all.push(w);
    let mut w = BodyWriter::new();
    w.abort_log(tx);
    all.push(w);
    all.extend(dnl_bodies());
    all
}

/// One body of every Dnl kind (Get … ReadableAck).
fn dnl_bodies() -> Vec<BodyWriter> {
    let k = |id| Key::new(0, id);
    let meta = ObjectMeta::new(3, ObjectFlags::READABLE);
    let tx = TxId::from_bits(1);
    let mut all = Vec::new();
    let mut w = BodyWriter::new();
    w.begin_get(tx);
    w.push_get_key(&k(1));
    w.push_get_key(&k(2));
    all.push(w);
    let mut w = BodyWriter::new();
    w.begin_get_resp(tx, ReplyStatus::Ok, 0b01);
    w.push_item(&k(1), meta, b"value");
    w.push_item(&k(2), meta, b"other");
    all.push(w);
    let mut w = BodyWriter::new();
    w.begin_lock(tx, NodeMask(0b11));
    w.push_version(&k(1), 3);
    w.push_item(&k(2), meta, &[7; 30]);
    all.push(w);
    let mut w = BodyWriter::new();
    w.begin_replicate(tx, NodeMask(0b10));
    w.push_item(&k(2), meta, &[7; 30]);
    all.push(w);
    let mut w = BodyWriter::new();
    w.begin_unlock(tx, true);
    w.push_unlock_key(&k(1));
    w.push_item(&k(2), meta, &[7; 30]);
    all.push(w);
    let mut w = BodyWriter::new();
    w.begin_readable(tx);
    w.push_item(&k(2), meta, &[7; 30]);
    all.push(w);
    for kind in [
        MsgKind::LockResp,
        MsgKind::ReplicateAck,
        MsgKind::UnlockAck,
        MsgKind::ReadableAck,
    ] {
        let mut w = BodyWriter::new();
        w.ack(kind, tx, ReplyStatus::Ok);
        all.push(w);
    }
    all
}

fn wire_packet() -> Vec<(String, Vec<u8>)> {
    let all = bodies();
    let mut seeds: Vec<(String, Vec<u8>)> = all
        .iter()
        .map(|b| (format!("{:?}", b.kind()), packet(std::slice::from_ref(b))))
        .collect();
    seeds.push(("batched".into(), packet(&all)));
    seeds.extend(session_packets());
    seeds
}

fn host_to_nic() -> Vec<(String, Vec<u8>)> {
    let mut req = Vec::new();
    HostToNic::TxRequest(TxRequest {
        req_id: 9,
        procedure: 2,
        args: b"args",
    })
    .encode(&mut req);
    let mut ack = Vec::new();
    HostToNic::LogApplied(LogApplied {
        applied_bytes: 4096,
    })
    .encode(&mut ack);
    vec![("tx-request".into(), req), ("log-applied".into(), ack)]
}

fn nic_to_host() -> Vec<(String, Vec<u8>)> {
    [
        TxStatus::Committed,
        TxStatus::LockConflict,
        TxStatus::TableFull,
        TxStatus::Unknown,
    ]
    .into_iter()
    .map(|status| {
        let mut out = Vec::new();
        NicToHost::TxOutcome(TxOutcome {
            req_id: 9,
            status,
            result: b"result",
        })
        .encode(&mut out);
        (format!("{status:?}"), out)
    })
    .collect()
}

fn log_record() -> Vec<(String, Vec<u8>)> {
    let mut entry = Vec::new();
    for (i, kind) in [LogKind::Log, LogKind::Commit, LogKind::Commit]
        .into_iter()
        .enumerate()
    {
        LogRecord {
            kind,
            tx_id: TxId::from_bits(5),
            key: Key::new(0, i as u64),
            meta: ObjectMeta::new(i as u64 + 1, ObjectFlags::READABLE),
            value: &vec![i as u8; i * 7],
        }
        .encode(&mut entry);
    }
    let one = entry[..splitkv_layout::log_record::LOG_RECORD_HEADER_BYTES].to_vec();
    vec![("three-records".into(), entry), ("one-record".into(), one)]
}

fn ring_consumer() -> Vec<(String, Vec<u8>)> {
    // capacity byte, then ops: 0 len = push, 1 = pop, 2 word b0..b7 = scribble,
    // 3 = re-attach, 4 = inspect (see fuzz_targets/ring_consumer.rs).
    let fill: Vec<u8> = [0, 60, 0, 120, 0, 30, 1, 1, 0, 200, 1, 4, 1, 1].to_vec();
    let mut scribble = fill.clone();
    scribble.extend_from_slice(&[2, 1, 0xff, 0, 0, 0, 0, 0, 0, 0, 1, 3, 1, 4]);
    let mut cap0 = vec![0u8];
    cap0.extend_from_slice(&fill);
    let mut cap3 = vec![3u8];
    cap3.extend_from_slice(&scribble);
    vec![("push-pop".into(), cap0), ("scribble".into(), cap3)]
}

/// Rebuild messages (the NIC restart's rebuild): a query, a report with one
/// entry of each list and the generation its fence saw, and decisions.
fn rebuild_msg() -> Vec<(String, Vec<u8>)> {
    let tx_id = TxId::new(2, 3, 41);
    let msgs = [
        ("query", RebuildMsg::Query { restart: 2 }),
        (
            "report",
            RebuildMsg::Report {
                restart: 2,
                part: 0,
                last: true,
                generation: 41,
                txs: vec![PeerTx {
                    tx_id,
                    phase: CoordPhase::Commit,
                    waiting: true,
                }],
                locks: vec![LockEntry {
                    tx_id,
                    key: Key::new(1, 9),
                }],
                records: vec![RecordEvidence {
                    tx_id,
                    shard: 1,
                    kind: RecordKind::Log,
                    write_shards: NodeMask::EMPTY.with(1),
                }],
            },
        ),
        (
            "decisions",
            RebuildMsg::Decisions {
                restart: 2,
                decisions: vec![Decision {
                    tx_id,
                    commit: true,
                }],
            },
        ),
    ];
    msgs.into_iter()
        .map(|(name, m)| {
            let mut out = Vec::new();
            m.encode(&mut out).expect("within bounds");
            (name.to_string(), out)
        })
        .collect()
}

/// A one-shot transaction with every compare target and operation kind:
/// compare-and-swap on key 1, a read of key 2, a delete on failure.
fn cas_txn() -> Vec<u8> {
    let k = |id| Key::new(0, id);
    let compares = [
        Compare {
            key: k(1),
            condition: Condition::Version {
                op: CmpOp::Equal,
                operand: 3,
            },
        },
        Compare {
            key: k(1),
            condition: Condition::Value {
                op: CmpOp::Less,
                operand: b"old",
            },
        },
        Compare {
            key: k(2),
            condition: Condition::Present,
        },
        Compare {
            key: k(3),
            condition: Condition::Absent,
        },
    ];
    let success = [
        Op::Put {
            key: k(1),
            value: b"new",
        },
        Op::Get(k(2)),
    ];
    let failure = [Op::Get(k(1)), Op::Delete(k(3))];
    let mut out = Vec::new();
    Txn::encode(&compares, &success, &failure, &mut out).expect("within bounds");
    out
}

fn app_txn() -> Vec<(String, Vec<u8>)> {
    let mut empty = Vec::new();
    Txn::encode(&[], &[], &[], &mut empty).expect("within bounds");
    vec![("cas".into(), cas_txn()), ("empty".into(), empty)]
}

fn app_request() -> Vec<(String, Vec<u8>)> {
    let key = Key::new(1, 7);
    let txn_bytes = cas_txn();
    let txn = Txn::decode(&txn_bytes).expect("valid");
    let requests = [
        ("get", Request::Get { req_id: 1, key }),
        (
            "put",
            Request::Put {
                req_id: 2,
                key,
                value: b"value",
            },
        ),
        (
            "insert",
            Request::Insert {
                req_id: 3,
                key,
                value: b"",
            },
        ),
        ("delete", Request::Delete { req_id: 4, key }),
        ("txn", Request::Txn { req_id: 5, txn }),
        (
            "call",
            Request::Call {
                req_id: 6,
                procedure: 2,
                args: b"args",
            },
        ),
    ];
    requests
        .into_iter()
        .map(|(name, r)| {
            let mut out = Vec::new();
            r.encode(&mut out).expect("within bounds");
            (name.to_string(), out)
        })
        .collect()
}

fn app_outcome() -> Vec<(String, Vec<u8>)> {
    let mut get = Vec::new();
    GetValue {
        version: 4,
        value: b"value",
    }
    .encode(&mut get)
    .expect("within bounds");
    let mut result = Vec::new();
    TxnResult::encode(
        Branch::Failure,
        &[
            GetResult::Found {
                version: 3,
                value: b"old",
            },
            GetResult::NotFound,
        ],
        &mut result,
    )
    .expect("within bounds");
    let outcomes = [
        ("get", Status::Committed, &get[..]),
        ("txn", Status::Committed, &result[..]),
        (
            "compare-failed",
            Status::Aborted(AbortReason::CompareFailed),
            b"key exists",
        ),
        (
            "draining",
            Status::Unavailable(UnavailableReason::Draining),
            b"",
        ),
        ("not-found", Status::KeyNotFound, b""),
    ];
    let mut seeds: Vec<(String, Vec<u8>)> = outcomes
        .into_iter()
        .map(|(name, status, body)| {
            let mut out = Vec::new();
            Outcome {
                req_id: 9,
                status,
                body,
            }
            .encode(&mut out)
            .expect("within bounds");
            (name.to_string(), out)
        })
        .collect();
    // The committed bodies alone (the target decodes those too).
    seeds.push(("body-get-value".into(), get));
    seeds.push(("body-txn-result".into(), result));
    seeds
}

fn app_handshake() -> Vec<(String, Vec<u8>)> {
    let cap = APP_RING_CAPACITY_MIN_BYTES as u64;
    let layout = AppMemoryLayout::new(cap, 2 * cap).expect("valid capacities");
    let mut hello = Vec::new();
    Hello::encode(
        &layout,
        32,
        &["smallbank.amalgamate", "register.write"],
        &mut hello,
    )
    .expect("within bounds");
    let mut welcome = Vec::new();
    let limits = AppLimits {
        in_flight_max: 16,
        value_bytes_max: 4096,
        args_bytes_max: 66560,
        result_bytes_max: 66560,
    };
    Welcome::encode(2, &limits, &[Some(3), None], &mut welcome).expect("within bounds");
    let mut refused = Vec::new();
    Refused {
        reason: RefusedReason::VersionMismatch,
    }
    .encode(&mut refused);
    vec![
        ("hello".into(), hello),
        ("welcome".into(), welcome),
        ("refused".into(), refused),
    ]
}

fn main() -> std::io::Result<()> {
    let root = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let sets = [
        ("wire_packet", wire_packet()),
        ("host_to_nic", host_to_nic()),
        ("nic_to_host", nic_to_host()),
        ("log_record", log_record()),
        ("ring_consumer", ring_consumer()),
        ("rebuild_msg", rebuild_msg()),
        ("app_request", app_request()),
        ("app_outcome", app_outcome()),
        ("app_txn", app_txn()),
        ("app_handshake", app_handshake()),
    ];
    for (target, seeds) in sets {
        let dir = root.join("corpus").join(target);
        std::fs::create_dir_all(&dir)?;
        for (name, bytes) in &seeds {
            std::fs::write(dir.join(format!("seed-{name}")), bytes)?;
        }
        println!("{target}: {} seeds in {}", seeds.len(), dir.display());
    }
    Ok(())
}
