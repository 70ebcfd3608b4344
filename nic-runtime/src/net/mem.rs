//! The in-process transport: one bounded MPSC channel per node (crossbeam),
//! with packet buffers drawn from and returned to one pool per network, so
//! the hot path does not allocate. Lossless and ordered per sender; used by
//! the local cluster driver. (Loss, duplication and reordering for tests come
//! from wrapping it in a fault-injecting transport.)

use super::{Transport, TxPacket};
use crate::Nanos;
use crossbeam::channel::{bounded, Receiver, Sender, TrySendError};
use crossbeam::queue::ArrayQueue;
use splitkv_layout::wire::PACKET_BYTES_MAX;
use std::sync::Arc;

/// Packets queued towards one endpoint before senders see congestion.
pub const MEM_QUEUE_PACKETS_DEFAULT: usize = 16 * 1024;
/// Spare packet buffers kept in a network's pool.
pub const MEM_POOL_BUFFERS: usize = 4096;

/// One node's endpoint of an in-process network.
#[derive(Debug)]
pub struct MemTransport {
    peers: Vec<Sender<Vec<u8>>>,
    inbox: Receiver<Vec<u8>>,
    pool: Arc<ArrayQueue<Vec<u8>>>,
    congested: u64,
}

/// Builds a fully connected in-process network of `nodes` endpoints, each
/// queueing up to [`MEM_QUEUE_PACKETS_DEFAULT`] packets; endpoint `i` belongs
/// to node `i`.
pub fn mem_network(nodes: usize) -> Vec<MemTransport> {
    mem_network_bounded(nodes, MEM_QUEUE_PACKETS_DEFAULT)
}

/// [`mem_network`] with each endpoint's queue bounded at `queue_packets`
/// (at least 1): a sender whose peer's queue is full is congested and keeps
/// its packets.
pub fn mem_network_bounded(nodes: usize, queue_packets: usize) -> Vec<MemTransport> {
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..nodes).map(|_| bounded(queue_packets.max(1))).unzip();
    let pool = Arc::new(ArrayQueue::new(MEM_POOL_BUFFERS));
    rxs.into_iter()
        .map(|inbox| MemTransport {
            peers: txs.clone(),
            inbox,
            pool: pool.clone(),
            congested: 0,
        })
        .collect()
}

impl MemTransport {
    /// Times a burst stopped because a peer's queue was full.
    pub fn congested(&self) -> u64 {
        self.congested
    }
}

impl Transport for MemTransport {
    fn mtu(&self) -> usize {
        PACKET_BYTES_MAX
    }

    fn is_lossy(&self) -> bool {
        false
    }

    fn tx_burst(&mut self, _now: Nanos, packets: &[TxPacket<'_>]) -> usize {
        for (i, p) in packets.iter().enumerate() {
            let Some(peer) = self.peers.get(p.dst as usize) else {
                continue; // unknown destination: dropped, as a network would
            };
            let mut buf = self
                .pool
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(PACKET_BYTES_MAX));
            buf.clear();
            buf.extend_from_slice(p.bytes);
            match peer.try_send(buf) {
                Ok(()) => {}
                Err(TrySendError::Full(buf)) => {
                    let _ = self.pool.push(buf);
                    self.congested += 1;
                    return i;
                }
                // A peer that has shut down drops the packet, as a network would.
                Err(TrySendError::Disconnected(buf)) => {
                    let _ = self.pool.push(buf);
                }
            }
        }
        packets.len()
    }

    fn tx_flush(&mut self, _now: Nanos) {}

    fn rx_burst(&mut self, _now: Nanos, max: usize, on_packet: &mut dyn FnMut(&[u8])) -> usize {
        let mut n = 0;
        while n < max {
            match self.inbox.try_recv() {
                Ok(p) => {
                    on_packet(&p);
                    let _ = self.pool.push(p);
                    n += 1;
                }
                Err(_) => break,
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_queue_congests_and_keeps_the_rest() {
        let mut ends = mem_network_bounded(2, 2);
        let pkts = [
            TxPacket {
                dst: 1,
                bytes: b"a",
            },
            TxPacket {
                dst: 1,
                bytes: b"b",
            },
            TxPacket {
                dst: 1,
                bytes: b"c",
            },
        ];
        assert_eq!(
            ends[0].tx_burst(0, &pkts),
            2,
            "the third packet finds the queue full"
        );
        assert_eq!(ends[0].congested(), 1);
        let mut got = Vec::new();
        assert_eq!(ends[1].rx_burst(0, 10, &mut |p| got.push(p.to_vec())), 2);
        assert_eq!(got, vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(ends[0].tx_burst(0, &pkts[2..]), 1);
        assert_eq!(ends[1].rx_burst(0, 1, &mut |p| got.push(p.to_vec())), 1);
        assert_eq!(got.last().unwrap(), b"c");
    }

    #[test]
    fn unknown_destination_is_dropped_not_a_panic() {
        let mut ends = mem_network(2);
        assert_eq!(
            ends[0].tx_burst(
                0,
                &[TxPacket {
                    dst: 7,
                    bytes: b"x"
                }]
            ),
            1
        );
        assert_eq!(
            ends[1].rx_burst(0, 10, &mut |_| panic!("nothing arrives")),
            0
        );
    }
}
