//! The seam between the transport and the device: [`VerbsDevice`], the
//! calls the transport makes (post, poll, address handles, the registered
//! region's slots). [`super::sys::Device`] implements it with libibverbs;
//! a test implements it in memory, so the transport's own logic (receives
//! topped up, send chains, selective signalling, retiring, drops by
//! reason) runs without a device.

use super::addr::{Route, VerbsPeer};
use super::config::VERBS_BURST_MAX;
use super::pool::Slot;
use super::recv::RecvCompletion;
use super::wr::SendPlan;

/// One send ready to post: its plan, where its payload is (a slot of the
/// region, or the caller's bytes for an inline send), and where it goes.
/// Plain data; [`VerbsDevice::post_sends`] reads the payload.
#[derive(Debug, Clone, Copy)]
pub struct SendWr {
    /// Id, length, inline, signalled.
    pub plan: SendPlan,
    /// The payload's first byte (`plan.bytes` bytes).
    pub payload: *const u8,
    /// The destination's address handle ([`VerbsDevice::ah_token`]).
    pub ah: usize,
    /// The destination's queue pair number.
    pub qpn: u32,
    /// The QKey to send with.
    pub qkey: u32,
    /// The immediate data (this cluster's QKey, checked by the receiver).
    pub imm: u32,
}

impl Default for SendWr {
    fn default() -> Self {
        SendWr {
            plan: SendPlan {
                wr_id: 0,
                bytes: 0,
                inline: false,
                signaled: false,
            },
            payload: std::ptr::null(),
            ah: 0,
            qpn: 0,
            qkey: 0,
            imm: 0,
        }
    }
}

/// What the transport needs of a device. Calls never block.
pub trait VerbsDevice: Send {
    /// An address handle (released when dropped).
    type Ah: Send;

    /// The device's name (for errors).
    fn name(&self) -> &str;
    /// This queue pair's number.
    fn qpn(&self) -> u32;
    /// How peers reach this port (GID on RoCE, LID on InfiniBand).
    fn route(&self) -> Route;
    /// Inline bytes the device granted.
    fn inline_max(&self) -> usize;
    /// Slot `slot`'s bytes of the registered region.
    fn slot(&self, slot: Slot) -> &[u8];
    /// Slot `slot`'s bytes, to fill.
    fn slot_mut(&mut self, slot: Slot) -> &mut [u8];

    /// An address handle for `peer`.
    ///
    /// # Errors
    /// The device's `errno`.
    fn address_handle(&self, peer: &VerbsPeer) -> Result<Self::Ah, i32>;
    /// The value a [`SendWr`] carries for `ah`.
    fn ah_token(ah: &Self::Ah) -> usize;

    /// Posts receives of `slots` (at most [`VERBS_BURST_MAX`]), work
    /// request id = slot index.
    ///
    /// # Errors
    /// `(posted, code)`: the receives from index `posted` on were not
    /// posted.
    fn post_recvs(&mut self, slots: &[Slot]) -> Result<(), (usize, i32)>;

    /// Posts `sends` (at most [`VERBS_BURST_MAX`]) as one chain.
    ///
    /// # Errors
    /// As [`VerbsDevice::post_recvs`].
    ///
    /// # Safety
    /// Each send's payload is `plan.bytes` readable bytes, inside the
    /// region unless the send is inline; each `ah` is the token of a live
    /// handle of this device.
    unsafe fn post_sends(&mut self, sends: &[SendWr]) -> Result<(), (usize, i32)>;

    /// Up to `max` (at most [`VERBS_BURST_MAX`]) receive completions as
    /// (work request id, fields) into `out`; returns how many.
    fn poll_recv(
        &mut self,
        max: usize,
        out: &mut [(u64, RecvCompletion); VERBS_BURST_MAX],
    ) -> usize;

    /// Up to [`VERBS_BURST_MAX`] send completions as (work request id,
    /// success) into `out`; returns how many.
    fn poll_send(&mut self, out: &mut [(u64, bool); VERBS_BURST_MAX]) -> usize;
}
