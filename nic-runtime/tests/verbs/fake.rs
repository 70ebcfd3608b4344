//! An in-memory device behind `VerbsDevice`: posted receives are slots a
//! test can deliver datagrams into; posted sends are recorded (their
//! bytes copied) and, when `complete_sends` is on, signalled ones
//! complete at once.

use splitkv_nic::net::verbs::addr::{Gid, Route, VerbsPeer};
use splitkv_nic::net::verbs::device::{SendWr, VerbsDevice};
use splitkv_nic::net::verbs::pool::Slot;
use splitkv_nic::net::verbs::recv::{RecvCompletion, GRH_SGID_OFFSET};
use splitkv_nic::net::verbs::{VerbsConfig, VERBS_BURST_MAX, VERBS_GRH_BYTES};
use std::collections::VecDeque;

/// One posted send as the device saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    pub wr_id: u64,
    pub bytes: Vec<u8>,
    pub inline: bool,
    pub signaled: bool,
    pub ah: usize,
    pub qpn: u32,
    pub qkey: u32,
    pub imm: u32,
}

pub struct FakeDevice {
    region: Vec<u8>,
    slot_bytes: usize,
    inline_max: usize,
    pub posted_recvs: VecDeque<Slot>,
    pub recv_done: VecDeque<(u64, RecvCompletion)>,
    pub sent: Vec<Sent>,
    pub send_done: VecDeque<(u64, bool)>,
    pub complete_sends: bool,
    /// Refuse the next send chain from this index on.
    pub refuse_send_at: Option<usize>,
}

pub const LOCAL_QPN: u32 = 0x42;

impl FakeDevice {
    pub fn new(cfg: &VerbsConfig, inline_max: usize) -> FakeDevice {
        FakeDevice {
            region: vec![0; cfg.slots() as usize * cfg.slot_bytes()],
            slot_bytes: cfg.slot_bytes(),
            inline_max,
            posted_recvs: VecDeque::new(),
            recv_done: VecDeque::new(),
            sent: Vec::new(),
            send_done: VecDeque::new(),
            complete_sends: true,
            refuse_send_at: None,
        }
    }

    /// A datagram from `from` carrying `payload` and immediate data `imm`
    /// lands in the oldest posted receive. Returns false when none is
    /// posted (a real device would drop it).
    pub fn deliver(&mut self, from: &VerbsPeer, payload: &[u8], imm: Option<u32>) -> bool {
        let Some(slot) = self.posted_recvs.pop_front() else {
            return false;
        };
        let buf = &mut self.region[slot.0 as usize * self.slot_bytes..][..self.slot_bytes];
        buf[..VERBS_GRH_BYTES].fill(0);
        let (grh, slid) = match from.route {
            Route::Gid(Gid(g)) => {
                buf[GRH_SGID_OFFSET..GRH_SGID_OFFSET + 16].copy_from_slice(&g);
                (true, 0)
            }
            Route::Lid(l) => (false, l),
        };
        let len = payload.len().min(self.slot_bytes - VERBS_GRH_BYTES);
        buf[VERBS_GRH_BYTES..VERBS_GRH_BYTES + len].copy_from_slice(&payload[..len]);
        let wc = RecvCompletion {
            status: 0,
            byte_len: (VERBS_GRH_BYTES + payload.len()) as u32,
            src_qp: from.qpn,
            slid,
            grh,
            imm,
        };
        self.recv_done.push_back((u64::from(slot.0), wc));
        true
    }
}

impl VerbsDevice for FakeDevice {
    type Ah = usize;

    fn name(&self) -> &str {
        "fake0"
    }
    fn qpn(&self) -> u32 {
        LOCAL_QPN
    }
    fn route(&self) -> Route {
        Route::Lid(1)
    }
    fn inline_max(&self) -> usize {
        self.inline_max
    }
    fn slot(&self, slot: Slot) -> &[u8] {
        &self.region[slot.0 as usize * self.slot_bytes..][..self.slot_bytes]
    }
    fn slot_mut(&mut self, slot: Slot) -> &mut [u8] {
        &mut self.region[slot.0 as usize * self.slot_bytes..][..self.slot_bytes]
    }
    /// The token is the peer's QPN, so a test sees which handle a send used.
    fn address_handle(&self, peer: &VerbsPeer) -> Result<usize, i32> {
        Ok(peer.qpn as usize)
    }
    fn ah_token(ah: &usize) -> usize {
        *ah
    }
    fn post_recvs(&mut self, slots: &[Slot]) -> Result<(), (usize, i32)> {
        assert!(slots.len() <= VERBS_BURST_MAX);
        for s in slots {
            assert!(!self.posted_recvs.contains(s), "slot {s:?} posted twice");
        }
        self.posted_recvs.extend(slots);
        Ok(())
    }
    unsafe fn post_sends(&mut self, sends: &[SendWr]) -> Result<(), (usize, i32)> {
        assert!(sends.len() <= VERBS_BURST_MAX);
        for (i, s) in sends.iter().enumerate() {
            if self.refuse_send_at.is_some_and(|k| k <= i) {
                self.refuse_send_at = None;
                return Err((i, 22));
            }
            assert_ne!(s.ah, 0, "send without an address handle");
            // SAFETY: the caller promises plan.bytes readable bytes.
            let bytes = unsafe { std::slice::from_raw_parts(s.payload, s.plan.bytes) }.to_vec();
            self.sent.push(Sent {
                wr_id: s.plan.wr_id,
                bytes,
                inline: s.plan.inline,
                signaled: s.plan.signaled,
                ah: s.ah,
                qpn: s.qpn,
                qkey: s.qkey,
                imm: s.imm,
            });
            if s.plan.signaled && self.complete_sends {
                self.send_done.push_back((s.plan.wr_id, true));
            }
        }
        Ok(())
    }
    fn poll_recv(
        &mut self,
        max: usize,
        out: &mut [(u64, RecvCompletion); VERBS_BURST_MAX],
    ) -> usize {
        let n = max.min(VERBS_BURST_MAX).min(self.recv_done.len());
        for o in out.iter_mut().take(n) {
            *o = self.recv_done.pop_front().unwrap();
        }
        n
    }
    fn poll_send(&mut self, out: &mut [(u64, bool); VERBS_BURST_MAX]) -> usize {
        let n = VERBS_BURST_MAX.min(self.send_done.len());
        for o in out.iter_mut().take(n) {
            *o = self.send_done.pop_front().unwrap();
        }
        n
    }
}
