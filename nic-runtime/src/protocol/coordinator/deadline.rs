//! Coordinator deadlines and failed peers (Xenic §4.2; crash recovery's
//! timeouts). Without them one lost participant leaves a transaction's slot
//! and its locks held forever. Each phase of a `TxCtx` records the nodes it
//! sent to and when ([`Waiting`]); a phase that outlives its deadline
//! ([`PHASE_DEADLINE_NS_DEFAULT`], longer than the sessions' silence, so a
//! dead peer is suspected first), or that waits on a peer it no longer
//! counts on, ends by these rules.
//!
//! Two kinds of failed peer, because only one of them may change what a
//! replica is owed:
//! - **suspected**: this node's session to it fell silent
//!   ([`Coordinator::on_peer_failed`]). Suspicion is local and can be false
//!   (a partition longer than the silence): the peer may be alive and keep
//!   serving.
//! - **excluded**: a configuration left it out ([`Coordinator::set_live`]):
//!   the membership agreed, and the peer has stopped serving (its lease ran
//!   out, [`crate::membership`]).
//!
//! - **Execute / Validate** (nothing logged yet): abort when waiting on a
//!   suspected or excluded peer, or overdue. ABORT goes to every primary not
//!   excluded that holds, or may hold, locks of the transaction (an EXECUTE
//!   that reached a primary whose answer is missing may have locked; the
//!   session delivers the ABORT after it), and the client is told
//!   [`TxStatus::Unavailable`]: certainly not committed.
//! - **Log** (some LOG sent, the commit point not known reached): only an
//!   *excluded* replica is not waited for. Committing without a suspected
//!   replica's LOG would break the commit point if that replica is alive and
//!   the replicas that did log crash later. Once every replica not excluded
//!   answered, the coordinator, alive, applies the recovery rule itself:
//!   commit if every written key has a live replica that acknowledged its
//!   LOG (the client then hears `Committed` as usual), else abort. An
//!   overdue phase (a live replica slow to answer) aborts too
//!   (`tla/XenicOCCMsgs.tla`, `TimeoutAbort` in Log), as does a refused LOG
//!   (`commit.rs`). Every abort after LOG takes two rounds
//!   (`commit.rs`, `abort_after_log`).
//! - **AbortLog** (round 1 of an abort after LOG): only an excluded replica
//!   is not waited for. At each deadline the ABORT goes again to the live
//!   replicas that have not acknowledged, at most [`ABORT_LOG_RESENDS_MAX`]
//!   times; then the client is told [`TxStatus::Unknown`] (as
//!   FoundationDB's `commit_unknown_result`) and the slot waits for their
//!   answer or exclusion. The abort is reported, and the locks released,
//!   only after that: the slot never lets locks outlive the decision.
//! - **Commit** (past the commit point: committed): the client is told
//!   [`TxStatus::Committed`] once every replica not excluded acknowledged,
//!   or at the deadline; the slot stays until every replica not excluded
//!   acknowledged, so a suspected but live replica still gets its COMMIT
//!   (the sessions retransmit) and releases its locks.
//!
//! A peer's exclusion or suspicion is acted on at once for the phases
//! waiting on it; a phase whose last answer arrives while it still waits on
//! an excluded peer (a message sent to it anyway, which its session dropped)
//! moves on at the next scan, within [`DEADLINE_SCAN_INTERVAL_NS`].
//!
//! A transaction's client hears exactly once: a later outcome of a slot that
//! already told one (the COMMIT acknowledgements after `Unknown`) is counted
//! and dropped ([`Coordinator::tell`]).

use super::{bit, Coordinator, Phase, QueuedOutcome};
use crate::net::session::SESSION_SILENCE_NS_DEFAULT;
use crate::placement::NODES_MAX;
use crate::procedure::ProcedureRegistry;
use crate::protocol::Io;
use crate::Nanos;
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::wire::NodeId;

/// Default deadline of one coordinator phase (ns): twice the sessions'
/// default silence, so a peer that stopped answering is declared failed by
/// its session (and handled at once) before its transactions time out.
pub const PHASE_DEADLINE_NS_DEFAULT: Nanos = 2 * SESSION_SILENCE_NS_DEFAULT;
/// How often the coordinator scans its slots for overdue phases (ns).
pub const DEADLINE_SCAN_INTERVAL_NS: Nanos = 1_000_000;
/// The phase deadline for sessions that declare a peer failed after
/// `silence_ns`: twice that.
pub fn phase_deadline_ns(silence_ns: Nanos) -> Nanos {
    silence_ns.saturating_mul(2)
}

/// Most times one abort after LOG sends its ABORT again to a replica that
/// has not acknowledged (once per phase deadline); past it the coordinator
/// waits for the replica's answer or exclusion without resending.
pub const ABORT_LOG_RESENDS_MAX: u8 = 8;

const _: () = assert!(PHASE_DEADLINE_NS_DEFAULT > SESSION_SILENCE_NS_DEFAULT);
const _: () = assert!(NODES_MAX <= 32, "node sets are u32 masks");

/// The responses one phase of a transaction waits for: how many are still
/// due, the nodes its messages went to (a mask by [`NodeId`]) and when they
/// were sent (ns).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Waiting {
    count: u16,
    sent: u32,
    since: Nanos,
}

impl Waiting {
    /// A phase that sent `count` messages to the nodes of `sent` at `since`.
    pub(super) fn new(count: u16, sent: u32, since: Nanos) -> Waiting {
        Waiting { count, sent, since }
    }

    /// Once every node sent to answered: the nodes of `nodes` (a mask by
    /// node id, among those sent to) owe their answer again, and the phase
    /// keeps its start time. Returns the nodes whose answer stands (those
    /// sent to but not in `nodes`).
    pub(super) fn owe_again(&mut self, nodes: u32) -> u32 {
        debug_assert_eq!(self.count, 0);
        debug_assert_eq!(nodes & !self.sent, 0);
        self.count = (nodes & self.sent).count_ones() as u16;
        self.sent & !nodes
    }

    /// The nodes the phase's messages went to (a mask by node id).
    pub(super) fn sent(&self) -> u32 {
        self.sent
    }

    /// Messages of the phase were sent again at `now`: its deadline
    /// counts from then.
    pub(super) fn restart(&mut self, now: Nanos) {
        self.since = now;
    }
}

impl std::ops::SubAssign<u16> for Waiting {
    fn sub_assign(&mut self, n: u16) {
        self.count -= n;
    }
}

impl PartialEq<u16> for Waiting {
    fn eq(&self, n: &u16) -> bool {
        self.count == *n
    }
}

/// Counters of the deadline rules, one per case.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeadlineStats {
    /// Peers suspected by their session or excluded by a new configuration
    /// (each peer counted once per kind).
    pub peers_failed: u64,
    /// Transactions aborted in Execute or Validate for a failed or silent
    /// participant (told [`TxStatus::Unavailable`]).
    pub unavailable: u64,
    /// Transactions told [`TxStatus::Unknown`]: an abort after LOG that
    /// ran out of resends ([`ABORT_LOG_RESENDS_MAX`]) while a replica not
    /// excluded had not acknowledged it.
    pub unknown: u64,
    /// Of those, later committed (never, since the abort after LOG; kept
    /// for the reports).
    pub unknown_committed: u64,
    /// Of those, later aborted (the last acknowledgement or exclusion came).
    pub unknown_aborted: u64,
    /// Transactions aborted (in two rounds) because their Log phase was
    /// overdue while a replica not excluded owed its acknowledgement.
    pub log_overdue: u64,
    /// Transactions aborted (in two rounds) because, once every replica not
    /// excluded answered, some written key had no live LOG holder.
    pub shard_lost: u64,
    /// Committed transactions finished without the COMMIT acknowledgement
    /// of an excluded replica.
    pub commit_without_failed: u64,
    /// Committed transactions reported at the Commit deadline, before every
    /// live replica acknowledged.
    pub commit_overdue: u64,
}

/// The deadline state of one coordinator.
#[derive(Debug)]
pub(super) struct Deadlines {
    phase_ns: Nanos,
    /// Nodes excluded by the configuration (mask by node id).
    dead: u32,
    /// Nodes whose session fell silent (mask by node id; includes `dead`).
    suspected: u32,
    next_scan: Nanos,
}

impl Default for Deadlines {
    fn default() -> Deadlines {
        Deadlines {
            phase_ns: PHASE_DEADLINE_NS_DEFAULT,
            dead: 0,
            suspected: 0,
            next_scan: 0,
        }
    }
}

impl Coordinator {
    /// Sets the deadline of each phase to `ns` (> 0; see
    /// [`phase_deadline_ns`] for the one that fits the sessions' silence).
    pub fn set_phase_deadline_ns(&mut self, ns: Nanos) {
        self.deadlines.phase_ns = ns.max(1);
    }

    /// Nodes suspected or excluded, a mask by node id.
    pub fn failed_peers(&self) -> u32 {
        self.deadlines.suspected
    }

    /// Nodes excluded by the configuration, a mask by node id.
    pub fn excluded_peers(&self) -> u32 {
        self.deadlines.dead
    }

    /// `node`'s session fell silent: it is suspected. Transactions in
    /// Execute or Validate waiting on it abort now; those past Execute keep
    /// waiting for it until a configuration excludes it (module docs).
    pub fn on_peer_failed(&mut self, io: &mut Io, procs: &ProcedureRegistry, node: NodeId) {
        if (node as usize) >= NODES_MAX || self.deadlines.suspected & bit(node) != 0 {
            return;
        }
        self.deadlines.suspected |= bit(node);
        self.stats.deadlines.peers_failed += 1;
        self.scan(io, procs);
    }

    /// `node` restarted its NIC runtime (a newer incarnation asked for a
    /// rebuild, `recovery::restart`): it is no longer suspected, unless a
    /// configuration excluded it.
    pub fn peer_restarted(&mut self, node: NodeId) {
        if (node as usize) < NODES_MAX && self.deadlines.dead & bit(node) == 0 {
            self.deadlines.suspected &= !bit(node);
        }
    }

    /// The live nodes of a new configuration (mask by node id): those
    /// outside it are excluded (and suspected), and every transaction
    /// waiting on them ends now by the rules of this module; those inside
    /// it are neither.
    pub fn set_live(&mut self, io: &mut Io, procs: &ProcedureRegistry, live: u32) {
        let all = (1u64 << io.placement.nodes()).wrapping_sub(1) as u32;
        let out = all & !live;
        let newly = out & !self.deadlines.dead;
        self.deadlines.dead = out;
        self.deadlines.suspected = (self.deadlines.suspected & !live) | out;
        self.stats.deadlines.peers_failed += u64::from(newly.count_ones());
        if newly != 0 {
            self.scan(io, procs);
        }
    }

    /// Ends the phases past their deadline (at `io.now`); scans at most
    /// every [`DEADLINE_SCAN_INTERVAL_NS`]. Called once per iteration.
    pub fn check_deadlines(&mut self, io: &mut Io, procs: &ProcedureRegistry) {
        if io.now < self.deadlines.next_scan {
            return;
        }
        self.deadlines.next_scan = io.now.saturating_add(DEADLINE_SCAN_INTERVAL_NS);
        self.scan(io, procs);
    }

    fn scan(&mut self, io: &mut Io, procs: &ProcedureRegistry) {
        for slot in 0..self.txs.len() {
            let t = &self.txs[slot];
            if t.phase == Phase::Free {
                continue;
            }
            let waiting = t.pending.sent & !t.answered;
            let overdue = io.now.saturating_sub(t.pending.since) >= self.deadlines.phase_ns;
            let gone = match t.phase {
                Phase::Execute | Phase::Validate => self.deadlines.suspected,
                _ => self.deadlines.dead,
            };
            if overdue || waiting & gone != 0 {
                self.expire(io, procs, slot, overdue);
            }
        }
    }

    /// Ends (or, in Log and Commit, moves on) the phase of `slot`, which
    /// is overdue or waits on a failed peer.
    fn expire(&mut self, io: &mut Io, procs: &ProcedureRegistry, slot: usize, overdue: bool) {
        let dead = self.excluded_peers();
        let t = &mut self.txs[slot];
        let live_waiting = t.pending.sent & !t.answered & !dead;
        match t.phase {
            Phase::Validate if self.row.is_some() => {
                t.locked &= !dead;
                self.stats.deadlines.unavailable += 1;
                self.dnl_abort(io, slot, TxStatus::Unavailable, b"a replica is unavailable");
            }
            Phase::Execute | Phase::Validate => {
                if t.phase == Phase::Execute {
                    let placement = io.placement;
                    let writers = t
                        .plan
                        .writes
                        .iter()
                        .fold(0, |m, k| m | bit(placement.primary(k)));
                    t.locked |= t.pending.sent & !t.answered & writers;
                }
                t.locked &= !dead;
                self.stats.deadlines.unavailable += 1;
                self.abort(io, slot, TxStatus::Unavailable, b"a replica is unavailable");
            }
            Phase::Log => {
                if live_waiting != 0 {
                    // Replicas not excluded still owe their LOG (their
                    // sessions retransmit). Overdue: abort in two rounds
                    // (`tla/XenicOCCMsgs.tla`, `TimeoutAbort` in Log).
                    if overdue {
                        self.stats.deadlines.log_overdue += 1;
                        let why = b"a replica did not answer its LOG in time";
                        self.abort_after_log(io, slot, TxStatus::Unavailable, why);
                    }
                    return;
                }
                let logged = t.answered & !dead;
                let placement = io.placement;
                let covered = t.writes.iter().all(|(k, _)| {
                    (0..placement.nodes() as NodeId)
                        .any(|n| logged & bit(n) != 0 && placement.is_replica(n, k))
                });
                // Nothing more goes to an excluded node (its session would
                // drop it): the COMMIT or ABORT goes to the others.
                t.logged &= !dead;
                t.locked &= !dead;
                if covered {
                    self.end_phase(io, procs, slot);
                } else {
                    self.stats.deadlines.shard_lost += 1;
                    let why = b"a written shard lost its log";
                    self.abort_after_log(io, slot, TxStatus::Unavailable, why);
                }
            }
            // Round 1 of an abort after LOG: only an excluded replica is not
            // waited for; a silent live one is sent the ABORT again.
            Phase::AbortLog if live_waiting == 0 => {
                t.logged &= !dead;
                t.locked &= !dead;
                self.abort_unlock(io, slot);
            }
            Phase::AbortLog if overdue => {
                if t.abort_resends < ABORT_LOG_RESENDS_MAX {
                    self.abort_log_again(io, slot, live_waiting);
                } else if t.told.is_none() {
                    // Out of resends: the client hears `Unknown` (which
                    // contradicts no decision); locks and slot stay until
                    // the silent replicas answer or are excluded.
                    self.told_unknown(slot);
                }
            }
            Phase::AbortLog => {}
            Phase::Commit if live_waiting == 0 => {
                self.stats.deadlines.commit_without_failed += 1;
                self.end_phase(io, procs, slot);
            }
            Phase::Commit if overdue && t.told.is_none() => {
                self.stats.deadlines.commit_overdue += 1;
                let result = t.result.clone();
                self.tell(slot, TxStatus::Committed, result);
            }
            Phase::Commit | Phase::Free => {}
            // Dnl (`coordinator/dnl.rs`): before the decision, abort (a
            // silent Lock target may hold locks: it is sent the Unlock too);
            // after it, the sessions retransmit until answered.
            Phase::Get | Phase::Lock => {
                if t.phase == Phase::Lock {
                    t.locked |= t.pending.sent() & !t.answered;
                }
                t.locked &= !dead;
                self.stats.deadlines.unavailable += 1;
                self.dnl_abort(io, slot, TxStatus::Unavailable, b"a replica is unavailable");
            }
            Phase::Replicate | Phase::Unlock | Phase::Readable => {}
        }
    }

    /// Tells the client of `slot` that its outcome is unknown (Log phase).
    pub(super) fn told_unknown(&mut self, slot: usize) {
        self.stats.deadlines.unknown += 1;
        let result = self.txs[slot].result.clone();
        self.tell(slot, TxStatus::Unknown, result);
    }

    /// Hands the outcome of `slot` to the application, unless it was told
    /// one already (then the late one is counted and dropped).
    pub(super) fn tell(&mut self, slot: usize, status: TxStatus, result: Vec<u8>) {
        let t = &mut self.txs[slot];
        if let Some(first) = t.told {
            let late = &mut self.stats.deadlines;
            match (first, status) {
                (TxStatus::Unknown, TxStatus::Committed) => late.unknown_committed += 1,
                (TxStatus::Unknown, _) => late.unknown_aborted += 1,
                _ => {}
            }
            self.recycle(result);
            return;
        }
        t.told = Some(status);
        let req_id = t.req_id;
        self.outcomes.push_back(QueuedOutcome {
            req_id,
            status,
            result,
        });
    }
}
