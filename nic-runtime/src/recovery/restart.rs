//! A NIC runtime that crashes alone and restarts (the NIC restart after a
//! NIC-runtime-only crash; DESIGN.md "Faults"; Xenic §4.2.1 (a)): the
//! SmartNIC SoC (or the pinned core running the NIC runtime) dies while its
//! host, the host's memory and the host's data live.
//!
//! # What is volatile and what survives
//! Volatile (lost, rebuilt): the NIC index — locks (they live only there,
//! Xenic §4.2.1 (a)), cached objects with their versions and pins, the
//! displacement hints d_i, the commit stamps ([`NicIndex::fresh`](crate::index::NicIndex::fresh)); the
//! server's requests in flight; the coordinator's `TxCtx` slots, so every
//! transaction it had in flight; the sessions (a new incarnation) and
//! fragment reassembly. Survives, because it is host memory: the host table,
//! the host log with its pending LOG and decision records, the
//! request/outcome and acknowledgement rings, and DMA requests already
//! posted (the restart lets them complete: [`NicRuntime::restart_nic`](crate::NicRuntime::restart_nic)). The
//! server's per-slot record table (`protocol/server/txs.rs`: which record
//! the host log holds for which transaction), the host log's tail and the
//! shard's row count (`Room`) mirror host memory and are kept
//! (`Server::restarted`); a NIC with no such mirror would rebuild them by
//! reading the host log from its last applied position — not done here.
//! The membership view (epoch, excluded nodes, serving placement) is kept:
//! a deployed node's agent holds it outside the NIC runtime.
//!
//! # Why not a recovery epoch
//! Crash recovery excludes a crashed node and promotes its backups;
//! here no data was lost and the node's lease still runs, so excluding it
//! would only cost re-replication. The restarted node instead asks its
//! peers directly ([`RebuildMsg`]), which needs no agreement: a lock is
//! known to its holder's coordinator, and a transaction the restarted node
//! coordinated is decided by the restarted node itself (it is still that
//! transaction's only coordinator).
//!
//! # Steps
//! 1. **Restart** ([`NicRuntime::restart_nic`](crate::NicRuntime::restart_nic)): DMA drains, volatile state
//!    is dropped, the stack comes back with a newer incarnation (peers reset
//!    their sessions and drop every packet of the old one), and every client
//!    request in flight is answered [`TxStatus::Unknown`] (its transaction
//!    may still commit: see step 4). The node is
//!    [`Availability::Rebuilding`]: it starts no transaction.
//! 2. **Query**: a [`RebuildMsg::Query`] to every node not excluded.
//! 3. **Report** (each peer, [`RestartState`]'s peer side): the peer stops
//!    suspecting the node, releases the locks of the restarted node's lost
//!    transactions that have no LOG there (no LOG of the old incarnation can
//!    arrive any more, so none reached the commit point without it), and
//!    answers with its coordinator's transactions that touch the node (locks
//!    there, LOG there, or waiting for its answer), the keys they lock
//!    there, the records it holds of the restarted node's transactions, and
//!    the newest generation of the restarted node's transaction ids its
//!    per-slot fence has seen (`protocol/server/txs.rs`): the fresh
//!    coordinator numbers its new transactions above every one reported
//!    ([`Coordinator::number_above`](crate::protocol::coordinator::Coordinator::number_above)), so the peers never refuse them as
//!    late and no id is used twice while records of the old one remain.
//!    Until a peer's last report part arrives, every message from that peer
//!    is dropped (what it sent before is accounted for by its report, see
//!    below); afterwards LOG, COMMIT and ABORT are served, EXECUTE and
//!    VALIDATE refused with [`ReplyStatus::Unavailable`] until step 6.
//! 4. **Rebuild** (restarted node, per report): locks are taken again for
//!    their holders (never for a transaction whose COMMIT or ABORT record is
//!    here already); a transaction waiting on this node is answered from the
//!    host log's records (`Server::answer_waiting`): LOG held → `Ok`; COMMIT
//!    phase with the LOG held → the COMMIT decision record is appended (the
//!    commit point was reached) and `Ok`; otherwise `Unavailable`, which
//!    aborts it before its commit point. A LOG record here of a peer's
//!    transaction the peer did not report is aborted (its coordinator had
//!    decided it and sent an ABORT the crash lost; had it committed, its
//!    slot would wait for this node's COMMIT acknowledgement) — unless a
//!    recovery epoch is under way here: every pending LOG is then that
//!    recovery's evidence, and the peer may be a rejoined process that
//!    never knew its predecessor's transactions, which the recovery may
//!    commit (register chaos seeds 107 and 182 split a decision
//!    this way once rule 4 stopped asking renewed nodes).
//! 5. **Decide** (all reports in): each transaction this node coordinated
//!    and some replica holds a record of is decided by the commit-point
//!    rule — commit if any replica holds its COMMIT record or every replica
//!    of every written shard holds its LOG, abort otherwise (no COMMIT was
//!    sent, so no client heard "committed") — recorded here and sent to
//!    the peers that hold records ([`RebuildMsg::Decisions`]).
//!    A node that rejoined and is still renewed decides none of them: they
//!    are its previous process's, crash recovery's to decide.
//!    Nor does a rebuild a recovery epoch overtook (under way at the
//!    restart, or begun before the reports were in): every replica gave
//!    that recovery its records, and its leader's decisions reach every
//!    holder (chaos Smallbank seed 135 of 5 nodes split a transaction
//!    between the two deciders). Each decision a rebuild does make is
//!    reported as the coordinator's outcome until the node next resumes
//!    (`recovery/epoch/unresumed.rs`), so a recovery epoch that begins before
//!    every holder took it makes the same one; and before it decides, a
//!    COMMIT record a peer reported of a lost transaction is reported the
//!    same way (`RestartState::lost_commits`: the old NIC sent COMMIT to
//!    some replicas only).
//! 6. **Settle**: once the decision records are appended and the host has
//!    applied its log through the tail (so the host table holds every
//!    committed write the lost cache had pinned: versions never go back),
//!    the node serves again ([`Availability::Serving`]).
//!
//! # Drivers
//! The simulator restarts a NIC runtime between two passes
//! (`sim/src/cluster/restarts.rs`). A node process's driver restarts the
//! NIC runtime's thread the same way: stop polling it, call
//! [`NicRuntime::restart_nic`](crate::NicRuntime::restart_nic) with `now` and one more than
//! [`NicRuntime::incarnation`](crate::NicRuntime::incarnation) (an incarnation no earlier process or NIC
//! restart of this node used), and poll it again on its thread; the host
//! workers and application threads keep running meanwhile (their requests
//! wait in the rings).
//! [`NicRuntime::availability`](crate::NicRuntime::availability) is what the node's status reports
//! ("unavailable, rebuilding" with the peers still awaited). A thread that
//! died with its `NicRuntime` (a panic) cannot be restarted this way: the
//! record table would have to be read back from the host log first.
//!
//! A peer that crashes during the rebuild is waited for until a
//! configuration excludes it ([`NicRuntime::apply_configuration`](crate::NicRuntime::apply_configuration) calls
//! [`RestartState::peers_excluded`]).
//!
//! # With membership changes (the chaos mix)
//! Packets of an older membership epoch are dropped, so a query and its
//! report must travel in one epoch: a peer answers a query of an epoch it
//! has not taken only once it has (`RestartState::on_query`), and the
//! restarted node asks the peers it still awaits again whenever it takes a
//! newer epoch, or its session with one of them is renewed (`requery`). A
//! restart inside a recovery epoch keeps the recovery machine (its evidence
//! was host memory), which sends its step's messages again
//! (`Recovery::resend_to`: the old sessions' packets died); re-replication
//! copies to or from the restarted node begin again from a new snapshot
//! (`Copies::restart_streams`), since their chunks and acknowledgements in
//! flight died with the old sessions.
//!
//! [`TxStatus::Unknown`]: splitkv_layout::host_nic::TxStatus::Unknown
//! [`ReplyStatus::Unavailable`]: splitkv_layout::wire::ReplyStatus::Unavailable

use crate::net::stack::{Stack, StackConfig, StackError};
use crate::protocol::Io;
use crate::recovery::lost_outcome;
use crate::Nanos;
use splitkv_layout::wire::{
    Body, CoordEvidence, Flow, MsgKind, NodeId, RebuildMsg, RecordEvidence, RecordKind, ReplyStatus,
};
use splitkv_layout::TxId;

/// Most rounds of DMA completions a restart waits through for the requests
/// posted before the crash.
pub const RESTART_DRAIN_ROUNDS_MAX: usize = 4096;
/// Most recovered commits a peer holds locks for until its host applied
/// them (each restarted peer decides at most `TX_INFLIGHT_MAX` of its own).
pub const RELEASES_PENDING_MAX: usize = crate::protocol::coordinator::TX_INFLIGHT_MAX * 4;
/// Most records of its own lost transactions the restarted node collects
/// (every peer's records of at most `TX_INFLIGHT_MAX` transactions, one per
/// shard). More are counted ([`RebuildStats::records_dropped`]) and the node
/// then stays unavailable: deciding without them could abort a transaction
/// that reached its commit point.
pub const REBUILD_RECORDS_MAX: usize = 64 * 1024;

/// Whether a NIC runtime serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Availability {
    /// Serving.
    Serving,
    /// Restarted, rebuilding: starts no transaction, refuses EXECUTE and
    /// VALIDATE with [`ReplyStatus::Unavailable`].
    Rebuilding {
        /// Peers whose report has not fully arrived (a mask by node id).
        waiting_for: u32,
    },
}

/// Why [`NicRuntime::restart_nic`](crate::NicRuntime::restart_nic) refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestartError {
    /// The new incarnation is not above the old one (peers would take the
    /// restarted node's packets for its old session's).
    #[error("incarnation {new} is not above the current {old}")]
    Incarnation {
        /// The current incarnation.
        old: u32,
        /// The one asked for.
        new: u32,
    },
    /// DMA requests posted before the crash did not complete within
    /// [`RESTART_DRAIN_ROUNDS_MAX`] rounds.
    #[error("{inflight} DMA requests still in flight after {RESTART_DRAIN_ROUNDS_MAX} rounds")]
    Drain {
        /// Requests left.
        inflight: usize,
    },
    /// The network stack could not be rebuilt.
    #[error(transparent)]
    Stack(#[from] StackError),
}

/// Counters of restarts and rebuilds (restarted node and peers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RebuildStats {
    /// Restarts of this NIC runtime.
    pub restarts: u64,
    /// Rebuilds finished (serving again).
    pub rebuilds_done: u64,
    /// Client requests in flight at a restart, answered `Unknown`.
    pub outcomes_unknown: u64,
    /// Report parts received.
    pub reports: u64,
    /// Locks taken again for their holders.
    pub locks_reinstalled: u64,
    /// Reported locks not taken (decided here already, or held by another).
    pub locks_skipped: u64,
    /// Waiting transactions answered, by kind: an EXECUTE or VALIDATE
    /// refused `Unavailable` (its coordinator aborts: one client
    /// `Unavailable` outcome each, unless that client's node also
    /// restarted).
    pub answered_refused: u64,
    /// A LOG this node lost, answered `Unavailable`: its coordinator sends
    /// it again (no abort; counted apart from `answered_refused`, which
    /// it was part of before, so that counter matches the aborts).
    pub answered_log_lost: u64,
    /// LOGs acknowledged from the host log's records.
    pub answered_log_ok: u64,
    /// COMMITs recorded and acknowledged.
    pub answered_committed: u64,
    /// COMMITs for a LOG never held (answered `Malformed`).
    pub answered_not_held: u64,
    /// Waiting transactions reported in a Dnl phase (no Dnl coordinator
    /// runs yet: a peer that broke the protocol), not answered.
    pub answered_unknown_phase: u64,
    /// Peers' unreported transactions whose LOG here was aborted.
    pub unreported_aborted: u64,
    /// Peers' unreported transactions whose LOG here was left to the
    /// recovery under way when the report came (its evidence).
    pub unreported_left_to_recovery: u64,
    /// Own lost transactions decided commit / abort.
    pub decided_commit: u64,
    /// Own lost transactions decided abort.
    pub decided_abort: u64,
    /// Lost transactions this rebuild left undecided for crash recovery to
    /// decide: its previous process's (it rejoined and is still renewed),
    /// or any, when a recovery epoch was under way at the restart or began
    /// before the reports were in.
    pub left_to_recovery: u64,
    /// Decisions of lost transactions not kept for the next recovery's
    /// evidence (over `LOST_DECISIONS_MAX`; the coordinator's outcome
    /// is then not reported).
    pub decisions_unkept: u64,
    /// Records dropped over [`REBUILD_RECORDS_MAX`].
    pub records_dropped: u64,
    /// Protocol messages dropped while rebuilding (their sender had not
    /// reported yet).
    pub messages_dropped: u64,
    /// EXECUTE and VALIDATE that arrived while rebuilding, refused
    /// `Unavailable` (each aborts its transaction: one client
    /// `Unavailable` outcome, never retried by the load generators).
    pub requests_refused: u64,
    /// Rebuild messages that did not decode, or were dropped for a full
    /// inbox or a stale incarnation.
    pub messages_bad: u64,
    /// Rebuild messages the stack refused to queue.
    pub send_failed: u64,
    /// Peer side: queries answered.
    pub queries_answered: u64,
    /// Peer side: locks of a restarted node's lost transactions released.
    pub lost_locks_released: u64,
    /// Peer side: decisions applied for a restarted node's transactions.
    pub decisions_applied: u64,
    /// Peer side: queries of a membership epoch not yet taken here, answered
    /// once it is (a report of the older epoch would be dropped).
    pub queries_deferred: u64,
    /// Restarted side: queries sent again to the peers still awaited after
    /// this node took a newer membership epoch (the peers drop a query of
    /// an older epoch, and the asker drops a report of one), or after the
    /// session with one was renewed (the query or its report was lost).
    pub queries_resent: u64,
    /// Peer side: recovered commits over [`RELEASES_PENDING_MAX`] (their
    /// locks are then never released: a fault to report).
    pub releases_overflowed: u64,
    /// Time of the last restart and of the last return to service (ns).
    pub last_restart_ns: Nanos,
    /// See `last_restart_ns`.
    pub last_serving_ns: Nanos,
}

/// The rebuild under way at a restarted node.
#[derive(Debug)]
struct Rebuild {
    restart: u32,
    /// The membership epoch the queries were last sent in.
    query_epoch: u32,
    /// Peers whose last report part has not arrived.
    waiting_for: u32,
    /// Peers awaited whose session was renewed since they were asked
    /// (`requery`).
    renewed: u32,
    /// Transactions each peer reported (tx ids).
    reported: hashbrown::HashSet<TxId>,
    /// Peers' records of this node's lost transactions.
    records: Vec<(NodeId, RecordEvidence)>,
    /// All reports in and decisions made.
    decided: bool,
    /// Recovery epochs begun at this node when it restarted, and whether
    /// one was under way then: if one was, or began since, the recovery
    /// decides the lost transactions instead (`restart/decide.rs`).
    recovery_at_restart: (u64, bool),
}

/// The restart and rebuild state of one runtime: the rebuild under way if
/// this node restarted, the messages received, counters.
#[derive(Debug)]
pub struct RestartState {
    /// The network stack's set-up; its incarnation is the current one.
    net: StackConfig,
    rebuild: Option<Rebuild>,
    /// Peer side: queries of an epoch not yet taken here: (asker, its
    /// restart incarnation, the query's epoch), at most one per asker.
    deferred: Vec<(NodeId, u32, u32)>,
    /// Peer side: nodes whose query was answered since the last poll (their
    /// NIC restarted: re-replication copies to them begin again).
    pub(crate) answered: u32,
    /// Peer side: recovered commits whose locks wait for the host to apply
    /// them: (tx_id, the host-log tail to wait for, once the append is done).
    releases: Vec<(TxId, Option<u64>)>,
    enc: Vec<u8>,
    stats: RebuildStats,
}

/// What the dispatcher does with a protocol message while rebuilding.
pub(crate) enum Gate {
    /// Handle it.
    Pass,
    /// Drop it (counted).
    Drop,
    /// Refuse it with [`ReplyStatus::Unavailable`].
    Refuse,
}

impl RestartState {
    /// The lost transactions whose COMMIT record a peer reported to the
    /// rebuild under way (not decided yet), as this coordinator's outcome
    /// for a recovery epoch's evidence: a COMMIT is sent only past the
    /// commit point, so the transaction committed, and a leader that saw
    /// this coordinator silent about it would abort it by its "forgot"
    /// rule at a replica still holding the LOG (a live coordinator's COMMIT
    /// records are not evidence). Appended to `out` unless listed there.
    pub(crate) fn lost_commits(&self, out: &mut Vec<CoordEvidence>) {
        let Some(r) = self.rebuild.as_ref().filter(|r| !r.decided) else {
            return;
        };
        let mut listed: hashbrown::HashSet<TxId> = out.iter().map(|c| c.tx_id).collect();
        for (_, rec) in r
            .records
            .iter()
            .filter(|(_, x)| x.kind == RecordKind::Commit)
        {
            if listed.insert(rec.tx_id) {
                out.push(lost_outcome(
                    rec.tx_id,
                    rec.write_shards.with(rec.shard),
                    true,
                ));
            }
        }
    }

    /// The state of a runtime whose stack was built from `net`.
    pub(crate) fn new(net: StackConfig) -> RestartState {
        RestartState {
            net,
            rebuild: None,
            deferred: Vec::new(),
            answered: 0,
            releases: Vec::new(),
            enc: Vec::new(),
            stats: RebuildStats::default(),
        }
    }

    /// Whether this node is rebuilding (starts no transaction).
    pub(crate) fn rebuilding(&self) -> bool {
        self.rebuild.is_some()
    }

    /// A received [`MsgKind::Rebuild`] body from `from`, in a packet of
    /// membership epoch `epoch`, handled at once, in its place among the
    /// sender's messages (a report must take effect before the protocol
    /// messages its sender sent after it); returns `false` if it did not
    /// decode.
    pub(crate) fn on_wire(
        &mut self,
        from: NodeId,
        epoch: u32,
        bytes: &[u8],
        parts: Parts<'_>,
    ) -> bool {
        let Ok(msg) = RebuildMsg::decode(bytes) else {
            self.stats.messages_bad += 1;
            return false;
        };
        match &msg {
            RebuildMsg::Query { restart } => self.on_query(from, *restart, epoch, parts),
            RebuildMsg::Report { .. } => self.take_report(from, &msg, parts),
            RebuildMsg::Decisions { decisions, .. } => {
                for d in decisions.iter().filter(|d| d.tx_id.coordinator() == from) {
                    let s = &mut *parts.server;
                    let taken = if d.commit {
                        let t = s.commit_recovered_holding_locks(parts.io, d.tx_id);
                        if t && self.releases.len() < RELEASES_PENDING_MAX {
                            self.releases.push((d.tx_id, None));
                        } else if t {
                            // Over the bound: its locks stay (counted, a fault).
                            self.stats.releases_overflowed += 1;
                        }
                        t
                    } else {
                        s.apply_recovered(parts.io, parts.index, d.tx_id, false)
                    };
                    self.stats.decisions_applied += u64::from(taken);
                }
            }
        }
        true
    }

    /// What to do with protocol message `body` from `src` (step 3 of the
    /// module docs); responses always pass (the fresh coordinator drops
    /// those of lost transactions as stale).
    pub(crate) fn gate(&mut self, src: NodeId, body: &Body<'_>) -> Gate {
        let Some(r) = &self.rebuild else {
            return Gate::Pass;
        };
        let request = matches!(
            body,
            Body::Execute { .. }
                | Body::Validate { .. }
                | Body::Log { .. }
                | Body::Commit { .. }
                | Body::Abort { .. }
        );
        if !request {
            Gate::Pass
        } else if (src as usize) < 32 && r.waiting_for & (1 << src) != 0 {
            self.stats.messages_dropped += 1;
            Gate::Drop
        } else if matches!(body, Body::Execute { .. } | Body::Validate { .. }) {
            self.stats.requests_refused += 1;
            Gate::Refuse
        } else {
            Gate::Pass
        }
    }

    /// A configuration excluded the nodes outside `live`: the rebuild no
    /// longer waits for their reports.
    pub fn peers_excluded(&mut self, live: u32) {
        if let Some(r) = &mut self.rebuild {
            r.waiting_for &= live;
        }
    }

    fn send(&mut self, net: &mut Stack, to: NodeId, msg: &RebuildMsg) {
        self.enc.clear();
        let sent = msg.encode(&mut self.enc).is_ok()
            && net
                .try_insert_raw(to, Flow::Recovery, MsgKind::Rebuild, &self.enc)
                .is_ok();
        if !sent {
            self.stats.send_failed += 1;
        }
    }
}

/// Refuses a request with [`ReplyStatus::Unavailable`] (EXECUTE, VALIDATE).
pub(crate) fn refuse(io: &mut Io, src: NodeId, body: &Body<'_>) {
    match body {
        Body::Execute { tx_id, .. } => io.w.begin_execute_resp(*tx_id, ReplyStatus::Unavailable),
        Body::Validate { tx_id, .. } => io.w.validate_resp(*tx_id, ReplyStatus::Unavailable),
        _ => return,
    }
    io.send(src);
}

mod decide;
mod messages;
mod requery;
mod restart_nic;
pub use decide::commit_point_reached;
pub(crate) use messages::Parts;
