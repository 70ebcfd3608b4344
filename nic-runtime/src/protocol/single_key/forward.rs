//! The primary's side of a single-key write (`protocol/single_key.rs`,
//! `tla/SingleKey.tla` P's `Lock` and `Report`): a shipped write is started
//! as a transaction this node coordinates, under a request id with the
//! `FORWARDED` bit, and its outcome goes back to the caller instead of a
//! client of this node.

use super::{Forward, SingleKey, FORWARDED};
use crate::procedure::txn::TXN_PROCEDURE_ID;
use crate::procedure::ProcedureRegistry;
use crate::protocol::coordinator::Coordinator;
use crate::protocol::Io;
use splitkv_layout::host_nic::{TxRequest, TxStatus, RESULT_BYTES_MAX};
use splitkv_layout::wire::NodeId;
use splitkv_layout::TxId;

impl SingleKey {
    /// A WriteOne arrived from caller `src`: start its
    /// transaction here as coordinator, or refuse it with `Unavailable`
    /// when this node is not `serving`, its coordinator or forward table
    /// is full, or its network congested.
    #[allow(clippy::too_many_arguments)]
    pub fn on_write_one(
        &mut self,
        io: &mut Io,
        coordinator: &mut Coordinator,
        procs: &ProcedureRegistry,
        serving: bool,
        src: NodeId,
        id: TxId,
        args: &[u8],
    ) {
        let room = coordinator.has_room() && !io.net.congested();
        let slot = match self.free_forwards.last() {
            Some(&f) if serving && room => f,
            _ => {
                self.stats.write_one_refused += 1;
                io.w.write_one_resp(id, TxStatus::Unavailable, b"primary busy or not serving");
                return io.send(src);
            }
        };
        self.free_forwards.pop();
        self.forwards[slot] = Some(Forward { caller: src, id });
        self.stats.write_one_started += 1;
        let req = TxRequest {
            req_id: FORWARDED | slot as u64,
            procedure: TXN_PROCEDURE_ID,
            args,
        };
        coordinator.start(io, procs, &req);
    }

    /// Sends the outcomes of the writes this node coordinated for callers
    /// (`tla/SingleKey.tla` `Report` of P; called before the client ports
    /// take the rest).
    pub fn reply_forwarded(&mut self, io: &mut Io, coordinator: &mut Coordinator) -> bool {
        let mut work = false;
        let mut i = 0;
        while i < coordinator.outcomes().len() {
            if coordinator.outcomes()[i].req_id & FORWARDED == 0 {
                i += 1;
                continue;
            }
            let Some(o) = coordinator.outcomes().remove(i) else {
                break;
            };
            work = true;
            let slot = (o.req_id & !FORWARDED) as usize;
            if let Some(f) = self.forwards.get_mut(slot).and_then(Option::take) {
                self.free_forwards.push(slot);
                let mut result = &o.result[..];
                if result.len() > RESULT_BYTES_MAX {
                    result = &result[..RESULT_BYTES_MAX];
                }
                io.w.write_one_resp(f.id, o.status, result);
                io.send(f.caller);
            }
            coordinator.recycle(o.result);
        }
        work
    }
}
