//! Networking: the Dnl batching layer ([`batch`]) above a narrow transport
//! interface ([`Transport`]) with several implementations ([`mem`] in-process;
//! the simulator supplies its own).

pub mod batch;
pub mod mem;

use crate::Nanos;
use splitkv_layout::wire::NodeId;
use std::collections::VecDeque;

/// A sealed packet waiting for the transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutPacket {
    /// Destination node.
    pub dst: NodeId,
    /// The encoded packet (header and messages).
    pub bytes: Vec<u8>,
}

/// What every transport offers (eRPC-style `tx_burst` / `rx_burst`). Transports
/// are non-blocking state machines: calls never wait.
pub trait Transport: Send {
    /// Largest packet, in bytes, this transport carries.
    fn mtu(&self) -> usize;

    /// Sends packets from the front of `packets` at virtual or real time `now`,
    /// removing each one sent; stops early if the transport is congested.
    /// Returns how many were sent.
    fn tx_burst(&mut self, now: Nanos, packets: &mut VecDeque<OutPacket>) -> usize;

    /// Appends up to `max` received packets to `out`; returns how many.
    fn rx_burst(&mut self, now: Nanos, out: &mut Vec<Vec<u8>>, max: usize) -> usize;
}
