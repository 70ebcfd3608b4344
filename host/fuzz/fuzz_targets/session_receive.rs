//! The session layer's receive and send paths (`splitkv_nic::net::session`)
//! on arbitrary packets and timings: node 0 of a 3-node cluster.
//!
//! Input: `flags: u8` (bit 0: a lossy transport, keeping retransmission
//! copies), then up to [`OPS_MAX`] operations, each an `op: u8`:
//! - `0` chunk: receive the chunk as it is;
//! - `1` chunk: receive it with its header's cluster id, destination and
//!   both incarnations made valid (source node, packet number and ack as
//!   they are), so the fuzzer reaches numbering and acknowledgement;
//! - `2 peer n`: queue `n % 8` sealed one-message packets toward `peer % 3`;
//! - `3 room`: flush, the transport taking at most `room` packets;
//! - `4 t`: let `t` × 10 µs pass;
//! - `5 e`: raise the epoch to `e`.
//!
//! Checks: nothing panics; a session never has more unacknowledged packets
//! than its window; every packet handed to the transport decodes, is from
//! node 0 of the cluster and addressed to a peer and to an incarnation of
//! it (never 0, "any"), the one the session addresses; an accepted packet's
//! number is the one its session expected (exactly once, in order), where a
//! packet dropped for its old epoch still takes its number.
#![no_main]

use libfuzzer_sys::fuzz_target;
use splitkv_host_fuzz::input::Input;
use splitkv_layout::wire::{
    decode_packet, BodyWriter, MsgHeader, MsgKind, PacketHeader, ReplyStatus,
};
use splitkv_layout::TxId;
use splitkv_nic::net::session::{SessionConfig, Sessions};
use splitkv_nic::net::txbuf::PacketBuf;
use splitkv_nic::net::{Transport, TxPacket};
use splitkv_nic::Nanos;
use std::collections::VecDeque;

/// Most operations per input.
const OPS_MAX: usize = 256;
const NODES: usize = 3;
const CLUSTER: u32 = 7;
const WINDOW: usize = 4;

/// Takes at most `room` packets per flush and checks each.
struct Checked {
    room: usize,
    /// Per node, the incarnation its session addresses.
    addressed: [u32; NODES],
}

impl Transport for Checked {
    fn mtu(&self) -> usize {
        1500
    }
    fn tx_burst(&mut self, _now: Nanos, packets: &[TxPacket<'_>]) -> usize {
        let n = packets.len().min(self.room);
        self.room -= n;
        for p in &packets[..n] {
            let (h, _) = decode_packet(p.bytes).expect("a packet sent does not decode");
            assert_eq!((h.src, h.cluster_id, h.src_incarnation), (0, CLUSTER, 1));
            assert!(h.dst == p.dst && h.dst != 0 && (h.dst as usize) < NODES);
            assert_eq!(h.dst_incarnation, self.addressed[h.dst as usize]);
        }
        n
    }
    fn tx_flush(&mut self, _now: Nanos) {}
    fn rx_burst(&mut self, _: Nanos, _: usize, _: &mut dyn FnMut(&[u8])) -> usize {
        0
    }
}

fn sealed(dst: u16, tx: u64) -> Vec<u8> {
    let mut w = BodyWriter::new();
    w.ack(MsgKind::LogAck, TxId::from_bits(tx), ReplyStatus::Ok);
    let mut p = Vec::new();
    PacketHeader {
        cluster_id: CLUSTER,
        src: 0,
        dst,
        src_incarnation: 1,
        count: 1,
        len: (8 + w.bytes().len()) as u32,
        ..PacketHeader::default()
    }
    .encode(&mut p);
    MsgHeader::whole(MsgKind::LogAck, w.bytes().len() as u32).encode(&mut p);
    p.extend_from_slice(w.bytes());
    p
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let Some(flags) = input.u8() else { return };
    let cfg = SessionConfig {
        window_packets: WINDOW,
        backlog_packets: 64,
        ack_delay_ns: 5_000,
        retransmit_timeout_ns: 100_000,
        silence_ns: 2_000_000,
    };
    let mut s = Sessions::new(0, NODES, CLUSTER, 1, flags & 1 != 0, cfg).expect("config");
    let mut backlogs: Vec<VecDeque<PacketBuf>> = (0..NODES).map(|_| VecDeque::new()).collect();
    let mut expected = [0u32; NODES];
    let mut now: Nanos = 0;
    for _ in 0..OPS_MAX {
        let Some(op) = input.u8() else { break };
        match op % 6 {
            0 | 1 => {
                let Some(chunk) = input.chunk() else { break };
                let mut bytes = chunk.to_vec();
                if op % 6 == 1 && bytes.len() >= 40 {
                    bytes[8..12].copy_from_slice(&CLUSTER.to_le_bytes());
                    bytes[14..16].copy_from_slice(&0u16.to_le_bytes());
                    bytes[16..24].copy_from_slice(&[1, 0, 0, 0, 1, 0, 0, 0]);
                }
                let before = s.stats().sessions_reset;
                let old_epoch_before = s.stats().drops.old_epoch;
                let accepted = s.receive(now, &bytes).map(|(h, _)| (h.src, h.seq));
                if s.stats().sessions_reset > before {
                    // The sender restarted: its numbering starts over.
                    let src = u16::from_le_bytes([bytes[12], bytes[13]]) as usize;
                    expected[src] = 0;
                }
                if s.stats().drops.old_epoch > old_epoch_before {
                    // Dropped for its old epoch, but an in-order packet
                    // still takes its number (no gap is left).
                    let (h, _) = decode_packet(&bytes).expect("a counted drop decoded");
                    let p = h.src as usize;
                    if h.seq == expected[p] {
                        expected[p] = expected[p].wrapping_add(1);
                    }
                }
                if let Some((src, seq)) = accepted {
                    let p = src as usize;
                    assert_eq!(seq, expected[p], "accepted out of order");
                    expected[p] = expected[p].wrapping_add(1);
                }
            }
            2 => {
                let (Some(peer), Some(n)) = (input.u8(), input.u8()) else {
                    break;
                };
                let d = (peer as usize) % NODES;
                for i in 0..n % 8 {
                    if backlogs[d].len() < 64 {
                        backlogs[d].push_back(PacketBuf::Heap(sealed(d as u16, i as u64)));
                    }
                }
            }
            3 => {
                let Some(room) = input.u8() else { break };
                let mut t = Checked {
                    room: room as usize,
                    addressed: [0, s.addressed(1), s.addressed(2)],
                };
                assert!(t.addressed[1..].iter().all(|&i| i >= 1));
                s.flush(now, &mut t, &mut backlogs);
                backlogs[0].clear();
            }
            4 => {
                let Some(t) = input.u8() else { break };
                now += t as Nanos * 10_000;
            }
            _ => {
                let Some(e) = input.u8() else { break };
                s.set_epoch(e as u32);
            }
        }
        for p in 1..NODES as u16 {
            assert!(s.unacked(p) <= WINDOW, "window overrun");
        }
    }
});
