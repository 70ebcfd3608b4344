//! The rebuild messages (steps 3–4 of `recovery::restart`'s docs): a
//! peer's answer to a query, and the restarted node's use of each report.

use super::{RestartState, REBUILD_RECORDS_MAX};
use crate::net::stack::Stack;
use crate::protocol::coordinator::Coordinator;
use crate::protocol::server::WaitingAnswer;
use crate::protocol::Io;
use splitkv_layout::wire::{
    LockEntry, NodeId, PeerTx, RebuildMsg, RecordEvidence, REBUILD_ENTRIES_PER_MESSAGE_MAX,
};

/// The parts of a runtime the rebuild messages reach.
pub(crate) struct Parts<'r> {
    /// Messages and host memory.
    pub(crate) io: &'r mut Io,
    /// The NIC index.
    pub(crate) index: &'r mut crate::index::NicIndex,
    /// The server role.
    pub(crate) server: &'r mut crate::protocol::server::Server,
    /// The coordinator role.
    pub(crate) coordinator: &'r mut Coordinator,
    /// Whether a recovery epoch is under way here (not yet resumed): every
    /// pending LOG record is then that recovery's evidence, which only its
    /// decisions may change.
    pub(crate) recovering: bool,
}

impl RestartState {
    /// Peer side (step 3): a restarted node's query, sent in membership
    /// epoch `epoch`. A query of an epoch this node has not taken yet is
    /// answered only once it has ([`RestartState::answer_deferred`]): a
    /// report sent now would carry the older epoch and the asker's session
    /// would drop it (old-epoch packets are dropped), leaving the asker
    /// waiting for good. One deferred query per asker, the newest.
    pub(super) fn on_query(&mut self, asker: NodeId, restart: u32, epoch: u32, p: Parts<'_>) {
        if epoch <= p.io.net.epoch() {
            return self.answer_query(asker, restart, p);
        }
        self.stats.queries_deferred += 1;
        self.deferred.retain(|&(a, _, _)| a != asker);
        if self.deferred.len() < crate::NODES_MAX {
            self.deferred.push((asker, restart, epoch));
        }
    }

    /// Peer side: answers the deferred queries whose epoch this node has
    /// now taken; returns whether any was.
    pub(crate) fn answer_deferred(&mut self, mut p: Parts<'_>) -> bool {
        let now = p.io.net.epoch();
        let due: Vec<(NodeId, u32, u32)> = self
            .deferred
            .iter()
            .copied()
            .filter(|&(_, _, e)| e <= now)
            .collect();
        self.deferred.retain(|&(_, _, e)| e > now);
        for &(asker, restart, _) in &due {
            self.answer_query(asker, restart, p.reborrow());
        }
        !due.is_empty()
    }

    /// Peer side (step 3): answer a restarted node's query.
    fn answer_query(&mut self, asker: NodeId, restart: u32, p: Parts<'_>) {
        if asker == p.io.node {
            return;
        }
        self.stats.queries_answered += 1;
        if (asker as usize) < 16 {
            self.answered |= 1 << asker;
        }
        p.coordinator.peer_restarted(asker);
        let mut records = Vec::new();
        let released = p.server.forget_coordinator(p.index, asker, &mut records);
        self.stats.lost_locks_released += released as u64;
        let (mut txs, mut locks) = (Vec::new(), Vec::new());
        p.coordinator
            .rebuild_report(p.io, asker, &mut txs, &mut locks);
        let generation = p.server.newest_generation(asker);
        let report = (generation, txs, locks, records);
        send_report(self, &mut p.io.net, asker, restart, report);
    }
}

/// A report's contents: the newest generation of the asker's transaction
/// ids seen here, then its three lists.
type Report = (u32, Vec<PeerTx>, Vec<LockEntry>, Vec<RecordEvidence>);

/// Sends a report in parts of at most [`REBUILD_ENTRIES_PER_MESSAGE_MAX`]
/// entries; the last part is marked (an empty report is one empty part).
/// Every part carries the generation.
fn send_report(
    st: &mut RestartState,
    net: &mut Stack,
    to: NodeId,
    restart: u32,
    (generation, txs, locks, records): Report,
) {
    let per = REBUILD_ENTRIES_PER_MESSAGE_MAX;
    let (mut t, mut l, mut r) = (&txs[..], &locks[..], &records[..]);
    let mut part = 0u16;
    loop {
        let nt = t.len().min(per);
        let nl = l.len().min(per - nt);
        let nr = r.len().min(per - nt - nl);
        let last = nt == t.len() && nl == l.len() && nr == r.len();
        let msg = RebuildMsg::Report {
            restart,
            part,
            last,
            generation,
            txs: t[..nt].to_vec(),
            locks: l[..nl].to_vec(),
            records: r[..nr].to_vec(),
        };
        st.send(net, to, &msg);
        if last {
            return;
        }
        (t, l, r) = (&t[nt..], &l[nl..], &r[nr..]);
        part = part.wrapping_add(1);
    }
}

impl Parts<'_> {
    /// The same parts, borrowed again.
    fn reborrow(&mut self) -> Parts<'_> {
        Parts {
            io: self.io,
            index: self.index,
            server: self.server,
            coordinator: self.coordinator,
            recovering: self.recovering,
        }
    }
}

impl RestartState {
    /// Restarted side (step 4): one report part from `from`.
    pub(super) fn take_report(&mut self, from: NodeId, msg: &RebuildMsg, p: Parts<'_>) {
        let RebuildMsg::Report {
            restart,
            last,
            generation,
            txs,
            locks,
            records,
            ..
        } = msg
        else {
            return;
        };
        let Some(r) = self.rebuild.as_mut() else {
            self.stats.messages_bad += 1;
            return;
        };
        if *restart != r.restart || (from as usize) >= 32 || r.waiting_for & (1 << from) == 0 {
            self.stats.messages_bad += 1;
            return;
        }
        let st = &mut self.stats;
        st.reports += 1;
        p.coordinator.number_above(*generation);
        for l in locks {
            if p.server.reinstall_lock(p.index, l.tx_id, l.key) {
                st.locks_reinstalled += 1;
            } else {
                st.locks_skipped += 1;
            }
        }
        for t in txs {
            r.reported.insert(t.tx_id);
            if !t.waiting {
                continue;
            }
            match p.server.answer_waiting(p.io, p.index, from, *t) {
                WaitingAnswer::Refused => st.answered_refused += 1,
                WaitingAnswer::LogLost => st.answered_log_lost += 1,
                WaitingAnswer::LogAcked => st.answered_log_ok += 1,
                WaitingAnswer::Committed => st.answered_committed += 1,
                WaitingAnswer::NotHeld => st.answered_not_held += 1,
                WaitingAnswer::UnknownPhase => st.answered_unknown_phase += 1,
            }
        }
        for rec in records
            .iter()
            .filter(|x| x.tx_id.coordinator() == p.io.node)
        {
            if r.records.len() < REBUILD_RECORDS_MAX {
                r.records.push((from, *rec));
            } else {
                st.records_dropped += 1;
            }
        }
        if *last {
            r.waiting_for &= !(1 << from);
            let mut logged = Vec::new();
            p.server.logged_of(from, &mut logged);
            let unreported = logged.into_iter().filter(|t| !r.reported.contains(t));
            if p.recovering {
                // The recovery under way decides them: they are its evidence,
                // and `from` may be a new process that never knew them (a
                // rejoined node, whose predecessor's transactions the
                // recovery may commit).
                st.unreported_left_to_recovery += unreported.count() as u64;
            } else {
                for tx_id in unreported {
                    p.server.apply_recovered(p.io, p.index, tx_id, false);
                    st.unreported_aborted += 1;
                }
            }
        }
    }
}
