//! Locks of transactions whose coordinator crashed (issue 11 recovery,
//! Xenic §4.2.1): released at this primary when the transaction cannot
//! have reached its commit point.

use super::txs::TxState;
use super::Server;
use crate::index::NicIndex;

impl Server {
    /// A new epoch left the coordinators of `failed` (a mask by node id)
    /// out: releases every lock here held by one of their transactions that
    /// has no LOG record at this node (state `Active`, or superseded by a
    /// newer transaction of its slot). Such a transaction never reached its
    /// commit point: LOG goes to every replica of a written key, this
    /// primary included, and the commit point needs every replica's
    /// acknowledgement. Locks of transactions whose LOG is here wait for
    /// recovery's decision. Returns the locks released.
    pub fn release_orphan_locks(&mut self, index: &mut NicIndex, failed: u32) -> usize {
        let txs = &self.txs;
        let mut released = Vec::new();
        index.unlock_where(
            |tx_id| {
                let coordinator = (tx_id >> 48) as u32;
                coordinator < 32
                    && failed & (1 << coordinator) != 0
                    && matches!(txs.state(tx_id), None | Some(TxState::Active))
            },
            &mut released,
        );
        for (k, tx_id) in &released {
            self.room.released(k, *tx_id);
            self.txs.set(*tx_id, TxState::Finished);
        }
        self.stats.orphan_locks_released += released.len() as u64;
        released.len()
    }
}
