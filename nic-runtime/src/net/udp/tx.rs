//! The send side of the UDP transport: a ring of transport-owned packet
//! buffers filled by `tx_burst` and drained by `tx_flush`, and what a flush
//! does with each `sendmmsg` result.

use super::UdpStats;
use splitkv_layout::wire::NodeId;
use std::io;

/// A fixed ring of `slots` packet buffers of `mtu` bytes each, allocated once.
/// Packets leave in the order they were queued.
#[derive(Debug)]
pub(super) struct TxRing {
    bufs: Box<[u8]>,
    lens: Box<[u32]>,
    dsts: Box<[NodeId]>,
    mtu: usize,
    head: usize,
    len: usize,
}

impl TxRing {
    /// A ring of `slots` (≥ 1) buffers of `mtu` bytes.
    pub(super) fn new(slots: usize, mtu: usize) -> TxRing {
        let slots = slots.max(1);
        TxRing {
            bufs: vec![0u8; slots * mtu].into_boxed_slice(),
            lens: vec![0u32; slots].into_boxed_slice(),
            dsts: vec![0; slots].into_boxed_slice(),
            mtu,
            head: 0,
            len: 0,
        }
    }

    /// Packets queued.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Whether every buffer holds a queued packet.
    pub(super) fn is_full(&self) -> bool {
        self.len == self.lens.len()
    }

    /// Copies `bytes` (at most the MTU) for `dst` into the next free buffer;
    /// false when the ring is full or the packet too long.
    pub(super) fn push(&mut self, dst: NodeId, bytes: &[u8]) -> bool {
        if self.is_full() || bytes.len() > self.mtu {
            return false;
        }
        let slot = (self.head + self.len) % self.lens.len();
        self.bufs[slot * self.mtu..slot * self.mtu + bytes.len()].copy_from_slice(bytes);
        self.lens[slot] = bytes.len() as u32;
        self.dsts[slot] = dst;
        self.len += 1;
        true
    }

    /// The `i`-th queued packet from the oldest (`i < len()`): destination and bytes.
    pub(super) fn get(&self, i: usize) -> (NodeId, &[u8]) {
        debug_assert!(i < self.len);
        let slot = (self.head + i) % self.lens.len();
        let start = slot * self.mtu;
        (
            self.dsts[slot],
            &self.bufs[start..start + self.lens[slot] as usize],
        )
    }

    /// Frees the `n` oldest packets (`n ≤ len()`).
    pub(super) fn pop(&mut self, n: usize) {
        debug_assert!(n <= self.len);
        let n = n.min(self.len);
        self.head = (self.head + n) % self.lens.len();
        self.len -= n;
    }
}

/// Whether a send error means "the socket is full for now" (the packets stay
/// queued for the next flush) rather than "this datagram cannot be sent"
/// (dropped, as a network would).
pub(super) fn is_congestion(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR)
    ) || e.kind() == io::ErrorKind::WouldBlock
}

/// Applies one `sendmmsg` result for a batch starting at the ring's oldest
/// packet: frees what was sent (or the one packet that failed) and counts it.
/// Returns whether the flush should go on.
pub(super) fn settle(ring: &mut TxRing, stats: &mut UdpStats, result: io::Result<usize>) -> bool {
    match result {
        Ok(0) => {
            // The kernel took nothing without saying why: treat as a full socket.
            stats.congestion_events += 1;
            false
        }
        Ok(n) => {
            let n = n.min(ring.len());
            for i in 0..n {
                stats.bytes_sent += ring.get(i).1.len() as u64;
            }
            stats.packets_sent += n as u64;
            ring.pop(n);
            true
        }
        Err(e) if is_congestion(&e) => {
            stats.congestion_events += 1;
            false
        }
        Err(_) => {
            stats.send_errors += 1;
            ring.pop(1);
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_order_across_the_wrap_and_refuses_when_full() {
        let mut r = TxRing::new(3, 8);
        assert!(r.push(1, b"a") && r.push(2, b"bb") && r.push(1, b"ccc"));
        assert!(r.is_full());
        assert!(!r.push(1, b"d"), "a full ring takes nothing");
        r.pop(2);
        assert!(r.push(2, b"dddd"), "the freed slot is reused");
        assert_eq!(r.get(0), (1, &b"ccc"[..]));
        assert_eq!(r.get(1), (2, &b"dddd"[..]));
        assert!(!r.push(1, &[0; 9]), "longer than the MTU");
    }

    #[test]
    fn congestion_keeps_packets_other_errors_drop_one() {
        let mut r = TxRing::new(4, 8);
        let mut s = UdpStats::default();
        for b in [b"a", b"b", b"c"] {
            assert!(r.push(0, b));
        }
        for errno in [libc::EAGAIN, libc::ENOBUFS] {
            assert!(!settle(
                &mut r,
                &mut s,
                Err(io::Error::from_raw_os_error(errno))
            ));
            assert_eq!(r.len(), 3, "congestion keeps every packet");
        }
        assert_eq!(s.congestion_events, 2);
        assert!(settle(&mut r, &mut s, Ok(1)));
        assert_eq!((s.packets_sent, s.bytes_sent, r.len()), (1, 1, 2));
        assert!(settle(
            &mut r,
            &mut s,
            Err(io::Error::from_raw_os_error(libc::EACCES))
        ));
        assert_eq!(
            (s.send_errors, r.len()),
            (1, 1),
            "the failed packet is dropped"
        );
        assert_eq!(r.get(0).1, b"c");
        assert!(!settle(&mut r, &mut s, Ok(0)));
        assert_eq!(r.len(), 1);
    }
}
