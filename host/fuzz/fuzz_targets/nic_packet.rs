//! The message handlers behind the packet magic: arbitrary packets received by
//! a NIC runtime (`NicRuntime::run_iteration` → `decode_packet` → the server's
//! EXECUTE/VALIDATE/LOG/COMMIT/ABORT handlers and the coordinator's response
//! handlers), on node 0 of a 3-node cluster whose host table holds the
//! fixture keys, with its host worker applying what the runtime logs.
//!
//! Input: `flags: u8` (bit 0: DLHT host table instead of Robinhood), then up
//! to [`PACKETS_MAX`] packets, each `ctrl: u8` and a chunk (`len: u16`, bytes).
//! `ctrl` bits 0–1: iterations to run after delivering it, minus one; bit 2:
//! overwrite the packet header's `src`/`dst` with a valid peer and node 0
//! (so the fuzzer spends its time on messages, not on addressing); bit 3: the
//! sending peer (node 1 or 2); bit 4: the chunk is not a packet but the
//! arguments of a transaction the application submits (procedure
//! `ReadWrite`), so the coordinator has transactions in flight; bit 5: every
//! message's transaction id becomes the last one node 0 sent (so replies
//! reach a live transaction whatever the id format).
//!
//! Checks: nothing panics; a packet that does not decode, is misaddressed or
//! holds a message that does not decode is counted in `bad_packets` (never
//! dropped silently); every packet the node sends decodes completely and is
//! from node 0.
#![no_main]

use libfuzzer_sys::fuzz_target;
use splitkv_host::table::TableKind;
use splitkv_host_fuzz::fixture::{fuzz_node, FuzzNode, NODES};
use splitkv_host_fuzz::input::Input;
use splitkv_layout::wire::{decode_packet, MSG_HEADER_BYTES, PACKET_HEADER_BYTES};
use splitkv_nic::net::{Transport, TxPacket};

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
    let mut last_tx = 0u64;
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
            bytes[4..6].copy_from_slice(&peer.to_le_bytes());
            bytes[6..8].copy_from_slice(&0u16.to_le_bytes());
        }
        if ctrl & 32 != 0 {
            set_tx_ids(&mut bytes, last_tx);
        }
        let well_formed = is_well_formed(&bytes);
        let bad_before = f.node.nic.stats().bad_packets;
        f.peers[peer as usize - 1].tx_burst(now, &[TxPacket { dst: 0, bytes: &bytes }]);
        for _ in 0..=(ctrl & 3) {
            now += 1_000;
            last_tx = run(&mut f, now).unwrap_or(last_tx);
        }
        if !well_formed {
            assert!(
                f.node.nic.stats().bad_packets > bad_before,
                "a malformed packet was dropped without being counted"
            );
        }
    }
    for _ in 0..DRAIN_ITERATIONS {
        now += 1_000;
        run(&mut f, now);
    }
});

/// Whether node 0 should accept every message of `bytes`: the packet and
/// each message decode, it is addressed to node 0 from a member, and each
/// message's sender is the packet's.
fn is_well_formed(bytes: &[u8]) -> bool {
    let Ok((h, msgs)) = decode_packet(bytes) else {
        return false;
    };
    if h.dst != 0 || h.src as usize >= NODES {
        return false;
    }
    let mut ok = true;
    for m in msgs {
        ok &= matches!(m, Ok((mh, _)) if mh.src == h.src);
    }
    ok
}

/// One iteration of the node and its application, then checks everything it
/// sent to its peers; returns the transaction id of the last message sent.
fn run(f: &mut FuzzNode, now: u64) -> Option<u64> {
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
        let (h, msgs) = decode_packet(&pkt).expect("node 0 sent a packet that does not decode");
        assert_eq!(h.src, 0, "packet from node 0 names another source");
        for m in msgs {
            let (mh, body) = m.expect("node 0 sent a message that does not decode");
            assert_eq!(mh.src, 0);
            last_tx = Some(body.tx_id());
        }
    }
    last_tx
}

/// Sets the transaction id (the first 8 body bytes of every message kind) of
/// each message of `packet` to `tx`, as far as the message lengths allow.
fn set_tx_ids(packet: &mut [u8], tx: u64) {
    let mut at = PACKET_HEADER_BYTES;
    while at + MSG_HEADER_BYTES <= packet.len() {
        let len = u32::from_le_bytes(packet[at + 8..at + 12].try_into().expect("4 bytes")) as usize;
        let body = at + MSG_HEADER_BYTES;
        if body + 8 <= packet.len() && len >= 8 {
            packet[body..body + 8].copy_from_slice(&tx.to_le_bytes());
        }
        at = body.saturating_add(len);
    }
}
