//! The message handlers behind the packet magic: arbitrary packets received by
//! a NIC runtime (`NicRuntime::run_iteration` → `decode_packet` → the server's
//! EXECUTE/VALIDATE/LOG/COMMIT/ABORT handlers and the coordinator's response
//! handlers), on node 0 of a 3-node cluster whose host table holds the
//! fixture keys, with its host worker applying what the runtime logs.
//!
//! Input: `flags: u8` (bit 0: DLHT host table instead of Robinhood), then up
//! to [`PACKETS_MAX`] packets, each `ctrl: u8` and a chunk (`len: u16`, bytes).
//! `ctrl` bits 0–1: iterations to run after delivering it, minus one; bit 2:
//! overwrite the packet header's session fields (magic, version, cluster id,
//! `src`, `dst`, incarnations, epoch, the packet number node 0 expects next
//! from that peer, ack 0) as that peer's session would, so the fuzzer spends
//! its time on messages, not on addressing and numbering; bit 3: the
//! sending peer (node 1 or 2); bit 4: the chunk is not a packet but the
//! arguments of a transaction the application submits (procedure
//! `ReadWrite`), so the coordinator has transactions in flight; bit 5: every
//! message's transaction id becomes the last one node 0 sent (so replies
//! reach a live transaction whatever the id format).
//!
//! Checks: nothing panics; a packet that does not decode is counted in
//! `bad_packets`, one the session drops for its identity or number in the
//! session counters, and an accepted one holding a message that does not
//! decode in `bad_packets` (never dropped silently); every packet the node
//! sends decodes completely and is from node 0 of the fixture's cluster.
#![no_main]

use libfuzzer_sys::fuzz_target;
use splitkv_host::table::TableKind;
use splitkv_host_fuzz::fixture::{fuzz_node, FuzzNode};
use splitkv_host_fuzz::input::Input;
use splitkv_layout::wire::{
    decode_packet, Body, PacketHeader, MSG_HEADER_BYTES, PACKET_FLAG_ACK_ONLY, PACKET_HEADER_BYTES,
};
use splitkv_layout::TxId;
use splitkv_nic::net::stack::{CLUSTER_ID_DEFAULT, INCARNATION_DEFAULT};
use splitkv_nic::net::{Transport, TxPacket};
use splitkv_nic::NicStats;

/// Most packets delivered per input.
const PACKETS_MAX: usize = 16;
/// Iterations run at the end so that DMA, logging and replies complete.
const DRAIN_ITERATIONS: usize = 4;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let Some(flags) = input.u8() else { return };
    let kind = if flags & 1 != 0 {
        TableKind::Dlht
    } else {
        TableKind::Robinhood
    };
    let mut f = fuzz_node(kind);
    let mut now = 0;
    let mut last_tx = TxId::from_bits(0);
    // Packet number node 0's session expects next from peers 1 and 2.
    let mut next_seq = [0u32; 2];
    for req_id in 0..PACKETS_MAX as u64 {
        let (Some(ctrl), Some(chunk)) = (input.u8(), input.chunk()) else {
            break;
        };
        if ctrl & 16 != 0 {
            // A full request ring or oversized arguments are the client's
            // typed errors, not the runtime's concern here.
            let _ = f.node.client.submit(req_id, 0, chunk);
            now += 1_000;
            last_tx = run(&mut f, now).unwrap_or(last_tx);
            continue;
        }
        let peer = 1 + ((ctrl >> 3) & 1) as u16;
        let mut bytes = chunk.to_vec();
        if ctrl & 4 != 0 && bytes.len() >= PACKET_HEADER_BYTES {
            as_session_would(&mut bytes, peer, next_seq[peer as usize - 1]);
        }
        if ctrl & 32 != 0 {
            set_tx_ids(&mut bytes, last_tx);
        }
        let before = f.node.nic.stats();
        f.peers[peer as usize - 1].tx_burst(
            now,
            &[TxPacket {
                dst: 0,
                bytes: &bytes,
            }],
        );
        for _ in 0..=(ctrl & 3) {
            now += 1_000;
            last_tx = run(&mut f, now).unwrap_or(last_tx);
        }
        let after = f.node.nic.stats();
        let accepted = after.net.sessions.packets_received > before.net.sessions.packets_received;
        if accepted {
            next_seq[peer as usize - 1] += 1;
        }
        check_counted(&bytes, accepted, &before, &after);
    }
    for _ in 0..DRAIN_ITERATIONS {
        now += 1_000;
        run(&mut f, now);
    }
});

/// Rewrites the header of `bytes` as `peer`'s session would send its packet
/// numbered `seq` to node 0 (flags other than ack-only cleared).
fn as_session_would(bytes: &mut [u8], peer: u16, seq: u32) {
    let count = u16::from_le_bytes([bytes[6], bytes[7]]);
    let len = u32::from_le_bytes(bytes[36..40].try_into().expect("4 bytes"));
    PacketHeader {
        flags: bytes[5] & PACKET_FLAG_ACK_ONLY,
        count,
        cluster_id: CLUSTER_ID_DEFAULT,
        src: peer,
        dst: 0,
        src_incarnation: INCARNATION_DEFAULT,
        dst_incarnation: 0,
        epoch: 0,
        seq,
        ack: 0,
        len,
    }
    .write(bytes);
}

/// Every packet is accounted for: one that does not decode is counted in
/// `bad_packets`, one the session does not accept in a session counter, and
/// an accepted one whose messages do not all decode in `bad_packets`.
fn check_counted(bytes: &[u8], accepted: bool, before: &NicStats, after: &NicStats) {
    let Ok((_, mut msgs)) = decode_packet(bytes) else {
        assert!(
            after.bad_packets > before.bad_packets,
            "a malformed packet was dropped without being counted"
        );
        return;
    };
    if !accepted {
        let counted = |s: &NicStats| {
            let n = &s.net.sessions;
            let d = &n.drops;
            d.other_cluster
                + d.stranger
                + d.misaddressed
                + d.old_epoch
                + d.wrong_incarnation
                + d.stale_incarnation
                + d.bad_ack
                + d.failed_peer
                + n.duplicates_dropped
                + n.out_of_order_dropped
                + n.acks_received_alone
        };
        assert!(
            counted(after) > counted(before),
            "a packet was dropped without being counted"
        );
        return;
    }
    let mut raw_ok = true;
    while let Some(m) = msgs.next_raw() {
        raw_ok &= m.is_ok();
    }
    if !raw_ok {
        assert!(
            after.bad_packets > before.bad_packets,
            "a message that does not decode was dropped without being counted"
        );
    }
}

/// One iteration of the node and its application, then checks everything it
/// sent to its peers; returns the transaction id of the last message sent.
fn run(f: &mut FuzzNode, now: u64) -> Option<TxId> {
    f.node.nic.run_iteration(now);
    f.node.worker.run_iteration(now);
    f.node
        .client
        .poll(usize::MAX, |_| {})
        .expect("an outcome from the NIC runtime does not decode");
    let mut got: Vec<Vec<u8>> = Vec::new();
    for peer in &mut f.peers {
        peer.rx_burst(now, usize::MAX, &mut |p| got.push(p.to_vec()));
    }
    let mut last_tx = None;
    for pkt in got {
        let (h, mut msgs) = decode_packet(&pkt).expect("node 0 sent a packet that does not decode");
        assert_eq!(h.src, 0, "packet from node 0 names another source");
        assert_eq!(h.cluster_id, CLUSTER_ID_DEFAULT);
        let mut in_fragments = false;
        while let Some(m) = msgs.next_raw() {
            let (mh, raw) = m.expect("node 0 sent a message that does not decode");
            if !mh.frag_more() && !in_fragments {
                let body =
                    Body::decode(mh.kind, raw).expect("node 0 sent a message that does not decode");
                last_tx = Some(body.tx_id());
            }
            in_fragments = mh.frag_more();
        }
    }
    last_tx
}

/// Sets the transaction id (the first 8 body bytes of every message kind) of
/// each message of `packet` to `tx`, as far as the message lengths allow.
fn set_tx_ids(packet: &mut [u8], tx: TxId) {
    let mut at = PACKET_HEADER_BYTES;
    while at + MSG_HEADER_BYTES <= packet.len() {
        let len = u32::from_le_bytes(packet[at + 4..at + 8].try_into().expect("4 bytes")) as usize;
        let body = at + MSG_HEADER_BYTES;
        if body + 8 <= packet.len() && len >= 8 {
            packet[body..body + 8].copy_from_slice(&tx.to_le_bytes());
        }
        at = body.saturating_add(len);
    }
}
