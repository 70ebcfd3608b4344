//! The Dnl skeleton's part of crash recovery at a server (Dandelion §4.4;
//! TLA `Crash` and `DnlRecover` of `tla/DnlSkeleton.tla`).
//!
//! A Dnl transaction's pending records here (a Lock's values or marker, a
//! Replicate's values or marker: `server/dnl.rs`) wait for a decision: its
//! coordinator's Unlock or Readable, or recovery's
//! ([`Server::apply_recovered`] hands Dnl transactions to
//! [`Server::apply_recovered_dnl`]). A recovery decision appends the
//! decision record after them (the host worker installs or drops them: no
//! value is copied from another replica), releases the transaction's locks,
//! raises the READABLE bits it lowered, and on commit drops the cached
//! objects of those keys, so they are read from the host table once it
//! applied the record (the runtime resumes only then,
//! [`Server::appends_settled`]). Its marks say Unlocked and Readable, so a
//! late Unlock or Readable of its coordinator is answered `Ok` and a late
//! Lock refused.
//!
//! A Lock still reading its versions when a recovery epoch begins has no
//! record yet, so no recovery rule can commit its transaction (Dnl-4/2 need
//! this primary's value record, Dnl-1 its LOCK): it is dropped at once
//! ([`Server::drop_unrecorded_dnl_locks`]), whoever coordinates it, as its
//! answer would be of the old epoch and reach nobody.

use super::dnl::DnlStep;
use super::txs::{TxState, DNL_LOCKING, DNL_READABLE, DNL_UNLOCKED};
use super::{OpKind, Server};
use crate::index::NicIndex;
use crate::protocol::Io;
use splitkv_layout::log_record::LogKind;
use splitkv_layout::wire::RecordKind;
use splitkv_layout::TxId;

impl Server {
    /// At a recovery epoch's start: releases the locks of every Dnl Lock
    /// still reading its versions here (module docs) and finishes its
    /// transaction here; the read completes without an answer. Returns the
    /// Locks dropped.
    pub fn drop_unrecorded_dnl_locks(&mut self, index: &mut NicIndex) -> usize {
        let mut dropped = 0;
        for op in self
            .ops
            .iter()
            .filter(|o| o.active && o.kind == OpKind::DnlLock)
        {
            for k in &op.keys {
                index.unlock(k, op.tx_id);
            }
            self.txs.mark_dnl(op.tx_id, 0, DNL_LOCKING);
            self.txs.set(op.tx_id, TxState::Finished);
            dropped += 1;
        }
        self.stats.orphan_locks_released += dropped as u64;
        dropped
    }

    /// Recovery decided Dnl transaction `tx_id` (`commit` or not), which
    /// holds records here (module docs). Returns whether anything changed
    /// here: a decision record appended, a lock released or a READABLE bit
    /// raised (a transaction decided here already, by its Unlock, needs only
    /// the READABLE bits its Replicate lowered at this node).
    pub(super) fn apply_recovered_dnl(
        &mut self,
        io: &mut Io,
        index: &mut NicIndex,
        tx_id: TxId,
        commit: bool,
    ) -> bool {
        let Some(held) = self.txs.held(tx_id) else {
            return false;
        };
        let (kind, record) = if commit {
            (LogKind::Commit, RecordKind::Commit)
        } else {
            (LogKind::Abort, RecordKind::Abort)
        };
        let mut changed = held.pending();
        if held.pending() {
            self.hold_decision(tx_id, record);
            let appending = self.ops.iter_mut().find(|o| {
                o.active
                    && o.tx_id == tx_id
                    && o.decision.is_none()
                    && matches!(
                        o.kind,
                        OpKind::DnlAppend(DnlStep::Lock | DnlStep::Replicate)
                    )
            });
            match appending {
                // After its records (`Server::finish_dnl_append`).
                Some(op) => op.decision = Some(kind),
                None => self.append_decision(io, io.node, tx_id, kind),
            }
            let mut released = Vec::new();
            index.unlock_where(|holder| holder == tx_id, &mut released);
            for (k, _) in &released {
                if commit {
                    self.room.committed(k, tx_id);
                    index.forget(k);
                } else {
                    self.room.released(k, tx_id);
                }
            }
            self.stats.orphan_locks_released += released.len() as u64;
        }
        let mut raised = Vec::new();
        index.raise_readable_of(tx_id, &mut raised);
        if commit {
            raised.iter().for_each(|k| _ = index.forget(k));
        }
        changed |= !raised.is_empty();
        self.txs.mark_dnl(tx_id, DNL_UNLOCKED | DNL_READABLE, 0);
        self.txs.set(tx_id, TxState::Finished);
        if changed {
            self.stats.recovered_decisions += 1;
        }
        changed
    }
}
