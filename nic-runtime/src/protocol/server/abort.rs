//! ABORT at a server (Xenic §4.2, §4.2.1), and the two rounds of an abort
//! after LOG (`tla/XenicOCCMsgs.tla`, `AbortMode = "tworound"`): round 1,
//! [`MsgKind::AbortLog`] to every replica of every written key, records the
//! abort (no lock released) and is acknowledged; round 2, the plain
//! [`MsgKind::Abort`] to the primaries, releases the locks. A plain ABORT
//! releases only locks held by its own transaction, so a late or duplicated
//! one never unlocks another's (orphan-lock rule, `server/txs.rs`).

use super::txs::TxState;
use super::Server;
use crate::index::NicIndex;
use crate::protocol::Io;
use splitkv_layout::log_record::LogKind;
use splitkv_layout::wire::{KeyList, MsgKind, NodeId, RecordKind, ReplyStatus};
use splitkv_layout::TxId;

impl Server {
    /// ABORT: release the locks and reservations `tx_id` holds on `keys`;
    /// if this node took its LOG (and no COMMIT), append an ABORT decision
    /// record so the host drops the pending records. The transaction is
    /// finished here unless its COMMIT is being appended (a committing
    /// transaction's ABORT only releases keys it locked and did not write).
    pub(super) fn abort(
        &mut self,
        io: &mut Io,
        index: &mut NicIndex,
        src: NodeId,
        tx_id: TxId,
        keys: KeyList<'_>,
    ) {
        for k in keys.iter() {
            index.unlock(&k, tx_id);
            self.room.released(&k, tx_id);
        }
        // `Logging`: the ABORT record follows when the LOG append completes
        // (`finish_append`), so it lands after the records.
        if let s @ Some(TxState::Active | TxState::Logging | TxState::Logged) =
            self.txs.state(tx_id)
        {
            let s = s.filter(|_| !crate::protocol::LOG_BACKUPS_ONLY);
            self.decide_logged(io, src, tx_id, s, LogKind::Abort);
        }
    }

    /// ABORT after LOG, round 1 (`tla/XenicOCCMsgs.tla` `AbortLogL`): the
    /// transaction is aborted here. A LOG record taken (or being taken) is
    /// dropped by an ABORT decision record, and recovery finds the abort in
    /// this node's evidence (rule 3 of `crate::recovery::decide`); a LOG
    /// that arrives later is refused as late. Nothing is unlocked: the
    /// locks stay until the plain ABORT of round 2, sent once every replica
    /// acknowledged this one. Idempotent: a duplicate finds the transaction
    /// finished and is acknowledged again, changing nothing. Answered
    /// [`ReplyStatus::Ok`], or [`ReplyStatus::Malformed`] when this node
    /// holds its COMMIT (being appended, or recorded: a coordinator never
    /// sends both) or saw a newer transaction of its slot.
    pub(super) fn abort_log(
        &mut self,
        io: &mut Io,
        index: &mut NicIndex,
        src: NodeId,
        tx_id: TxId,
    ) {
        self.stats.abort_log_requests += 1;
        if crate::protocol::ABORT_UNLOCK_EARLY {
            let mut released = Vec::new();
            index.unlock_where(|holder| holder == tx_id, &mut released);
        }
        let status = match self.txs.state(tx_id) {
            // `Logging`: the ABORT record follows when the LOG append
            // completes (`finish_append`). `Active`: no LOG here yet; a late
            // one is refused.
            s @ Some(TxState::Active | TxState::Logging | TxState::Logged) => {
                let s = s.filter(|_| !crate::protocol::LOG_BACKUPS_ONLY);
                self.decide_logged(io, src, tx_id, s, LogKind::Abort);
                ReplyStatus::Ok
            }
            Some(TxState::Finished)
                if self.txs.held(tx_id).map(|h| h.kind) != Some(RecordKind::Commit) =>
            {
                ReplyStatus::Ok
            }
            _ => {
                self.stats.malformed += 1;
                ReplyStatus::Malformed
            }
        };
        io.w.ack(MsgKind::AbortLogAck, tx_id, status);
        io.send(src);
    }
}
