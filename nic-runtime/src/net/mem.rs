//! The in-process transport: one unbounded MPSC channel per node (crossbeam).
//! Lossless and ordered per sender; used by the local cluster driver.

use super::{OutPacket, Transport};
use crate::Nanos;
use crossbeam::channel::{unbounded, Receiver, Sender};
use splitkv_layout::wire::PACKET_BYTES_MAX;
use std::collections::VecDeque;

/// One node's endpoint of an in-process network.
#[derive(Debug)]
pub struct MemTransport {
    peers: Vec<Sender<Vec<u8>>>,
    inbox: Receiver<Vec<u8>>,
}

/// Builds a fully connected in-process network of `nodes` endpoints; endpoint `i`
/// belongs to node `i`.
pub fn mem_network(nodes: usize) -> Vec<MemTransport> {
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..nodes).map(|_| unbounded()).unzip();
    rxs.into_iter()
        .map(|inbox| MemTransport {
            peers: txs.clone(),
            inbox,
        })
        .collect()
}

impl Transport for MemTransport {
    fn mtu(&self) -> usize {
        PACKET_BYTES_MAX
    }

    fn tx_burst(&mut self, _now: Nanos, packets: &mut VecDeque<OutPacket>) -> usize {
        let n = packets.len();
        for p in packets.drain(..) {
            let dst = p.dst as usize;
            assert!(dst < self.peers.len(), "packet to unknown node {}", p.dst);
            // A peer that has shut down drops the packet, as a network would.
            let _ = self.peers[dst].send(p.bytes);
        }
        n
    }

    fn rx_burst(&mut self, _now: Nanos, out: &mut Vec<Vec<u8>>, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            match self.inbox.try_recv() {
                Ok(p) => {
                    out.push(p);
                    n += 1;
                }
                Err(_) => break,
            }
        }
        n
    }
}
