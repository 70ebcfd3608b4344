//! Checking one receive completion and its buffer before the packet is
//! lent upward: the completion's status, the 40-byte GRH at the head of
//! every UD receive buffer ([`VERBS_GRH_BYTES`]), the length (short,
//! truncated, past the MTU), the QKey the sender wrote in the immediate
//! data, and the source (a current peer, a re-pointed peer's former
//! endpoint, or a stranger). Pure: the device layer copies the
//! completion's fields into a [`RecvCompletion`].

use super::addr::{Gid, PeerTable, Route, Source, SourceLookup};
use super::wr::VERBS_GRH_BYTES;
use std::ops::Range;

/// Offset of the source GID in the GRH (after version / traffic class /
/// flow label, payload length, next header and hop limit: IB spec
/// §8.3.1).
pub const GRH_SGID_OFFSET: usize = 8;

/// The fields of a receive completion (`ibv_wc`) the checks read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvCompletion {
    /// `IBV_WC_SUCCESS` (0) or an error status.
    pub status: u32,
    /// Bytes written, GRH included (`wc.byte_len`).
    pub byte_len: u32,
    /// The sender's queue pair number (`wc.src_qp`).
    pub src_qp: u32,
    /// The sender's LID (`wc.slid`).
    pub slid: u16,
    /// Whether the buffer's first 40 bytes hold a GRH (`IBV_WC_GRH`).
    pub grh: bool,
    /// The immediate data, if the send carried any (`IBV_WC_WITH_IMM`).
    pub imm: Option<u32>,
}

/// Why a received datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RxDrop {
    /// The completion has an error status (e.g. a flushed receive).
    ErrorStatus,
    /// Shorter than the GRH: no packet.
    Short,
    /// Longer than the receive buffer: cut by the device.
    Truncated,
    /// The packet is longer than the MTU.
    TooLong,
    /// No immediate data, or a QKey other than this cluster's.
    WrongQkey,
    /// From a queue pair no peer has.
    Stranger,
    /// From a re-pointed peer's former endpoint.
    FormerPeer,
    /// The completion named a slot not posted for a receive.
    BadSlot,
}

/// Number of [`RxDrop`] reasons.
pub const RX_DROP_REASONS: usize = 8;

impl RxDrop {
    /// Every reason, in counter order.
    pub const ALL: [RxDrop; RX_DROP_REASONS] = [
        RxDrop::ErrorStatus,
        RxDrop::Short,
        RxDrop::Truncated,
        RxDrop::TooLong,
        RxDrop::WrongQkey,
        RxDrop::Stranger,
        RxDrop::FormerPeer,
        RxDrop::BadSlot,
    ];

    /// A stable name for status pages and metrics (`snake_case`).
    pub fn name(self) -> &'static str {
        match self {
            RxDrop::ErrorStatus => "error_status",
            RxDrop::Short => "short",
            RxDrop::Truncated => "truncated",
            RxDrop::TooLong => "too_long",
            RxDrop::WrongQkey => "wrong_qkey",
            RxDrop::Stranger => "stranger",
            RxDrop::FormerPeer => "former_peer",
            RxDrop::BadSlot => "bad_slot",
        }
    }
}

/// Counters of dropped datagrams, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxDropCounts(pub [u64; RX_DROP_REASONS]);

impl RxDropCounts {
    /// Counts one drop.
    pub fn count(&mut self, why: RxDrop) {
        self.0[why as usize] += 1;
    }

    /// Drops for `why`.
    pub fn get(&self, why: RxDrop) -> u64 {
        self.0[why as usize]
    }

    /// Drops for every reason.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

/// What the checks need besides the completion.
#[derive(Debug, Clone, Copy)]
pub struct RecvLimits {
    /// Bytes of one receive slot (GRH included).
    pub slot_bytes: usize,
    /// Largest packet.
    pub mtu: usize,
    /// This cluster's QKey.
    pub qkey: u32,
}

/// Checks completion `wc` of a receive into `buf` (the slot's bytes).
/// Returns the packet's range in `buf` (after the GRH) and the peer that
/// sent it.
///
/// # Errors
/// The [`RxDrop`] reason; never panics, whatever `wc` and `buf` hold.
pub fn check_recv(
    wc: &RecvCompletion,
    buf: &[u8],
    limits: RecvLimits,
    peers: &PeerTable,
) -> Result<(Range<usize>, splitkv_layout::wire::NodeId), RxDrop> {
    if wc.status != 0 {
        return Err(RxDrop::ErrorStatus);
    }
    let len = wc.byte_len as usize;
    if len < VERBS_GRH_BYTES {
        return Err(RxDrop::Short);
    }
    if len > limits.slot_bytes || len > buf.len() {
        return Err(RxDrop::Truncated);
    }
    if len - VERBS_GRH_BYTES > limits.mtu {
        return Err(RxDrop::TooLong);
    }
    if wc.imm != Some(limits.qkey) {
        return Err(RxDrop::WrongQkey);
    }
    let route = if wc.grh {
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&buf[GRH_SGID_OFFSET..GRH_SGID_OFFSET + 16]);
        Route::Gid(Gid(gid))
    } else {
        Route::Lid(wc.slid)
    };
    match peers.lookup(Source {
        qpn: wc.src_qp,
        route,
    }) {
        SourceLookup::Peer(node) => Ok((VERBS_GRH_BYTES..len, node)),
        SourceLookup::Former => Err(RxDrop::FormerPeer),
        SourceLookup::Stranger => Err(RxDrop::Stranger),
    }
}
