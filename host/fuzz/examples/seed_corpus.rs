//! Writes the seed inputs of this package's fuzz targets (valid encodings
//! made with the codecs, so the fuzzer starts deep) into
//! `corpus/<target>/seed-<name>` under the folder given (default: this
//! package's folder). Run from the repository root with
//! `cargo run --manifest-path host/fuzz/Cargo.toml --example seed_corpus`.

//!
//! The encoders live here, not in the harness library, so that a change of
//! the codecs' writer API breaks only this generator (to be updated with it),
//! never the fuzz stage, which builds the library but not the examples.

use std::path::PathBuf;

mod seed {
    use splitkv_host_fuzz::fixture::{meta_of, KEYS_LOADED};
    use splitkv_host_fuzz::input::push_chunk;
    use splitkv_layout::log_record::{LogKind, LogRecord};
    use splitkv_layout::wire::{
        BodyWriter, MsgHeader, MsgKind, NodeId, PacketHeader, ReplyStatus, MESSAGES_PER_PACKET_MAX,
    };
    use splitkv_layout::{Key, ObjectFlags, ObjectMeta, TxId};
    use splitkv_nic::net::stack::{CLUSTER_ID_DEFAULT, INCARNATION_DEFAULT};

    /// A packet (format v2) from `src` to `dst` carrying the bodies `w`
    /// wrote, each as a message of its kind, epoch 0, packet number 0 (the
    /// `nic_packet` target renumbers it when its ctrl bit 2 says so).
    ///
    /// # Panics
    /// With more than `MESSAGES_PER_PACKET_MAX` bodies.
    pub fn packet(src: NodeId, dst: NodeId, bodies: &[BodyWriter]) -> Vec<u8> {
        assert!(bodies.len() <= MESSAGES_PER_PACKET_MAX);
        let mut msgs = Vec::new();
        for b in bodies {
            MsgHeader::whole(b.kind(), b.bytes().len() as u32).encode(&mut msgs);
            msgs.extend_from_slice(b.bytes());
        }
        let mut out = Vec::new();
        PacketHeader {
            cluster_id: CLUSTER_ID_DEFAULT,
            src,
            dst,
            src_incarnation: INCARNATION_DEFAULT,
            count: bodies.len() as u16,
            len: msgs.len() as u32,
            ..PacketHeader::default()
        }
        .encode(&mut out);
        out.extend_from_slice(&msgs);
        out
    }

    /// An EXECUTE of transaction `tx` reading `reads` and locking `locks` (key ids of table 0).
    pub fn execute(tx: u64, reads: &[u64], locks: &[u64]) -> BodyWriter {
        let tx = TxId::from_bits(tx);
        let mut w = BodyWriter::new();
        w.begin_execute(tx);
        reads.iter().for_each(|&id| w.push_read(&Key::new(0, id)));
        locks.iter().for_each(|&id| w.push_lock(&Key::new(0, id)));
        w
    }

    /// A LOG or COMMIT of transaction `tx` writing version `id + 2` of each key id.
    pub fn items(kind: MsgKind, tx: u64, ids: &[u64]) -> BodyWriter {
        let tx = TxId::from_bits(tx);
        let mut w = BodyWriter::new();
        w.begin_items(kind, tx);
        for &id in ids {
            let meta = ObjectMeta::new(id + 2, ObjectFlags::READABLE);
            w.push_item(
                &Key::new(0, id),
                meta,
                &id.to_le_bytes()[..(id % 9) as usize],
            );
        }
        w
    }

    /// A VALIDATE of transaction `tx` expecting the fixture versions of `ids`.
    pub fn validate(tx: u64, ids: &[u64]) -> BodyWriter {
        let tx = TxId::from_bits(tx);
        let mut w = BodyWriter::new();
        w.begin_validate(tx);
        for &id in ids {
            w.push_version(&Key::new(0, id), meta_of(id).version());
        }
        w
    }

    /// An ABORT of transaction `tx` releasing `ids`.
    pub fn abort(tx: u64, ids: &[u64]) -> BodyWriter {
        let tx = TxId::from_bits(tx);
        let mut w = BodyWriter::new();
        w.begin_abort(tx);
        ids.iter()
            .for_each(|&id| w.push_abort_key(&Key::new(0, id)));
        w
    }

    /// The replies a coordinator handles, for transaction `tx`.
    pub fn responses(tx: u64) -> Vec<BodyWriter> {
        let tx = TxId::from_bits(tx);
        let mut exec = BodyWriter::new();
        exec.begin_execute_resp(tx, ReplyStatus::Ok);
        exec.push_item(&Key::new(0, 1), meta_of(1), b"v");
        let mut val = BodyWriter::new();
        val.validate_resp(tx, ReplyStatus::Ok);
        let mut log_ack = BodyWriter::new();
        log_ack.ack(MsgKind::LogAck, tx, ReplyStatus::Ok);
        let mut commit_ack = BodyWriter::new();
        commit_ack.ack(MsgKind::CommitAck, tx, ReplyStatus::Ok);
        vec![exec, val, log_ack, commit_ack]
    }

    /// `nic_packet` inputs: `flags` then `(ctrl, packet)` chunks, for both tables.
    pub fn nic_packet_seeds() -> Vec<(String, Vec<u8>)> {
        let scenarios: Vec<(&str, Vec<Vec<BodyWriter>>)> = vec![
            (
                "occ-commit",
                vec![
                    vec![execute(1, &[0, 1, 2], &[3, 4])],
                    vec![validate(1, &[0, 1, 2])],
                    vec![items(MsgKind::Commit, 1, &[3, 4])],
                ],
            ),
            (
                "occ-abort",
                vec![vec![execute(2, &[5], &[6, 7])], vec![abort(2, &[6, 7])]],
            ),
            (
                "backup-log",
                vec![vec![items(MsgKind::Log, 3, &[8, 9, 10, 11])]],
            ),
            (
                "absent-keys",
                vec![vec![execute(4, &[KEYS_LOADED + 1], &[KEYS_LOADED + 2])]],
            ),
            ("responses", vec![responses(5)]),
            (
                "batched",
                vec![vec![
                    execute(6, &[12], &[13]),
                    items(MsgKind::Log, 7, &[14]),
                    validate(8, &[15]),
                ]],
            ),
        ];
        let mut out = Vec::new();
        for (flags, table) in [(0u8, "robinhood"), (1, "dlht")] {
            for (name, packets) in &scenarios {
                let mut input = vec![flags];
                for bodies in packets {
                    input.push(4 | 1); // two iterations, numbered by its session, from node 1
                    push_chunk(&mut input, &packet(1, 0, bodies));
                }
                out.push((format!("{name}-{table}"), input));
            }
            // The coordinator: the application submits a transaction (ctrl bit 4),
            // then each peer's replies arrive carrying its id (ctrl bit 5).
            for peer in [1u16, 2] {
                let mut input = vec![flags, 16 | 1];
                push_chunk(&mut input, &[2, 0, 1, 2, 3]);
                for body in responses(0) {
                    input.push(32 | 4 | ((peer as u8 - 1) << 3) | 1);
                    push_chunk(&mut input, &packet(peer, 0, &[body]));
                }
                out.push((format!("coordinator-from-{peer}-{table}"), input));
            }
        }
        out
    }

    /// `session_receive` inputs (see that target): node 0 sends to peer 1,
    /// peer 1's packets arrive in order, out of order, twice and acked; time
    /// passes past the retransmission timeout and the silence.
    pub fn session_receive_seeds() -> Vec<(String, Vec<u8>)> {
        let data = |seq: u8| {
            let mut p = packet(1, 0, &[responses(seq as u64).remove(0)]);
            p[28] = seq;
            p
        };
        let mut exchange = vec![0u8];
        exchange.extend_from_slice(&[2, 1, 3, 3, 0xff]); // queue 3 to peer 1, flush
        for seq in [0u8, 2, 1, 1, 2] {
            exchange.push(1);
            push_chunk(&mut exchange, &data(seq));
        }
        exchange.extend_from_slice(&[4, 10, 3, 0xff, 4, 0xff, 3, 0xff]);
        let mut lossy = exchange.clone();
        lossy[0] = 1;
        let mut silent = vec![1u8, 2, 1, 2, 3, 0xff];
        for _ in 0..8 {
            silent.extend_from_slice(&[4, 0xff, 3, 0xff]);
        }
        vec![
            ("exchange".into(), exchange),
            ("exchange-lossy".into(), lossy),
            ("silent-peer".into(), silent),
        ]
    }

    /// `host_worker` inputs: `flags` then log entries of valid records.
    pub fn host_worker_seeds() -> Vec<(String, Vec<u8>)> {
        let entry = |kind: LogKind, ids: &[u64], version: u64| {
            let mut e = Vec::new();
            for &id in ids {
                let value = vec![id as u8; (id as usize * 5) % 12];
                LogRecord {
                    kind,
                    tx_id: TxId::from_bits(id),
                    key: Key::new(0, id),
                    meta: ObjectMeta::new(version, ObjectFlags::READABLE),
                    value: &value,
                }
                .encode(&mut e);
            }
            e
        };
        let mut out = Vec::new();
        for (flags, table) in [(0u8, "robinhood"), (1, "dlht")] {
            let mut input = vec![flags];
            push_chunk(&mut input, &entry(LogKind::Log, &[1, 2, 3], 5));
            push_chunk(&mut input, &entry(LogKind::Commit, &[2, 4], 6));
            push_chunk(&mut input, &entry(LogKind::Commit, &[1], 3)); // stale
            out.push((format!("entries-{table}"), input));
        }
        out
    }

    /// `robinhood_lookup` and `dlht_lookup` inputs: every loaded key and a few
    /// absent ones, with the NIC's knowledge fresh and (for the Robinhood table)
    /// hinted, and one with a patch that tears the key's first read.
    pub fn lookup_seeds() -> (Vec<(String, Vec<u8>)>, Vec<(String, Vec<u8>)>) {
        let mut robinhood = Vec::new();
        let mut dlht = Vec::new();
        for choice in (0..KEYS_LOADED as u8 + 4).chain([60, 200]) {
            robinhood.push((format!("key{choice}"), vec![choice, 0, 0, 0, 0]));
            robinhood.push((format!("key{choice}-hinted"), vec![choice, 2, 1, 0, 0]));
            dlht.push((format!("key{choice}"), vec![choice, (choice % 4) << 1]));
        }
        let mut torn = vec![3u8, 0, 0, 0, 0, 1];
        torn.extend_from_slice(&7u16.to_le_bytes());
        torn.extend_from_slice(&u64::MAX.to_le_bytes());
        robinhood.push(("torn".into(), torn));
        (robinhood, dlht)
    }
}

fn main() -> std::io::Result<()> {
    let root = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let (robinhood, dlht) = seed::lookup_seeds();
    let sets = [
        ("nic_packet", seed::nic_packet_seeds()),
        ("session_receive", seed::session_receive_seeds()),
        ("host_worker", seed::host_worker_seeds()),
        ("robinhood_lookup", robinhood),
        ("dlht_lookup", dlht),
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
