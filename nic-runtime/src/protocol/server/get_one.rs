//! GetOne at the key's primary (`protocol/single_key.rs`, Dandelion §3;
//! `tla/SingleKey.tla` `GetOneRead`): refused with `LockConflict` when the
//! key is locked or not READABLE on arrival (`tla/DnlSkeleton.tla` `GetOne`), with `Unavailable` when this node is not the
//! key's primary; otherwise read like the lone read of an EXECUTE (NIC
//! index, else the host table by DMA, `server/lookups.rs`, refreshed at
//! completion by `recheck_read`) and answered with the key's committed
//! metadata and value. It locks nothing and leaves no per-transaction
//! state: the `tx_id` is the caller's request id, echoed.

use super::{OpKind, Server};
use crate::index::NicIndex;
use crate::protocol::Io;
use splitkv_layout::wire::{NodeId, ReplyStatus};
use splitkv_layout::{Key, TxId};

impl Server {
    /// Serves one GetOne from `src` (module docs). Every request is answered
    /// once: at once when refused, else when its lookup ends.
    pub fn get_one(&mut self, io: &mut Io, index: &mut NicIndex, src: NodeId, id: TxId, key: Key) {
        self.stats.get_ones += 1;
        let refusal = if io.placement.primary(&key) != io.node {
            Some(ReplyStatus::Unavailable)
        } else if get_one_locked(index, &key) {
            self.stats.get_one_locked += 1;
            Some(ReplyStatus::LockConflict)
        } else {
            None
        };
        if let Some(why) = refusal {
            return refuse_get_one(io, src, id, why);
        }
        let Some(slot) = self.alloc(OpKind::GetOne, src, id) else {
            return refuse_get_one(io, src, id, ReplyStatus::Busy);
        };
        let op = &mut self.ops[slot];
        op.keys.push(key);
        op.n_reads = 1;
        self.start_lookups(io, index, slot);
    }
}

/// Whether a GetOne must be refused for a held lock or a lowered READABLE
/// bit (TLA `GetOne`; `false` under the
/// mutation switch `get_one_ignores_lock`, the TLC model
/// `SingleKeyGetIgnoresLock`'s bug).
fn get_one_locked(index: &NicIndex, key: &Key) -> bool {
    if cfg!(splitkv_mutation = "get_one_ignores_lock") {
        return false;
    }
    index.lock_holder(key).is_some() || !index.is_readable(key)
}

/// Answers a GetOne with a refusal and no item.
pub(crate) fn refuse_get_one(io: &mut Io, src: NodeId, id: TxId, why: ReplyStatus) {
    io.w.begin_get_one_resp(id, why);
    io.send(src);
}
