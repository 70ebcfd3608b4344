//! Single-key calls in one round at the key's primary (Dandelion §3:
//! `GetOne`, `PutOne`, `InsertOne`, `DeleteOne`) on Xenic's OCC (Xenic §4.2). Specified
//! in `tla/SingleKey.tla` (its actions named below in brackets; requests and
//! replies are atomic there); the must-fail models
//! `tla/SingleKeyGetIgnoresLock.cfg`, `tla/SingleKeyReportEarly.cfg`,
//! `tla/SingleKeyReportEarly_crash.cfg` and `tla/SingleKeyDeleteRemoves.cfg`
//! show what each rule prevents.
//!
//! # The calls
//!
//! An application asks its node (the *caller*) through the ordinary request
//! ring with a reserved procedure id ([`GET_ONE_PROCEDURE_ID`],
//! [`WRITE_ONE_PROCEDURE_ID`]); the caller's NIC runtime sends ONE request
//! to the key's primary and maps the one reply back to the application's
//! outcome. Nothing else of the caller is involved: no coordinator slot, no
//! `TxCtx`. The caller's request id on the wire is a [`TxId`]-shaped
//! `caller node | ticket | generation`, echoed by the primary, which keeps
//! no state for it.
//!
//! **GetOne** `[GetOneRead]`: the primary reads the key as a lone read
//! of an EXECUTE would (NIC index, else its host table by DMA;
//! `server/get_one.rs`) if, on arrival, the key is **unlocked** there;
//! otherwise it answers `LockConflict` (a typed, retryable refusal: the
//! application sees `Aborted(LockConflict)`). It locks nothing, validates
//! nothing and writes nothing. It is linearised at the primary, at some
//! instant between its arrival and the DMA's completion:
//!
//! - Why unlocked means "the newest committed value": in Xenic's OCC a
//!   primary holds a written key's lock from EXECUTE until the COMMIT
//!   record of that write is appended and the new value installed in its
//!   NIC index (step 6: it unlocks only after the append completed;
//!   `protocol/mod.rs`). A LOG pending for a key at its primary therefore
//!   always comes with that key's lock held, so an unlocked key has no
//!   pending LOG and no write past its commit point that is not installed.
//!   The NIC index (pinned until the host applied it) or the host table
//!   then holds the newest committed value; a COMMIT installed while the
//!   DMA is in flight is picked up at completion (`recheck_read`, as for
//!   the single read of an EXECUTE), and a writer that locks the key after
//!   the GetOne arrived reaches its commit point later, so the read is
//!   linearised at its arrival or at that install.
//! - Why a locked key must be refused, although a primary never shows an
//!   uncommitted value (pending LOG records are not installed): a
//!   transaction T past its commit point that writes `x` at primary A and
//!   `y` at primary B installs them one COMMIT at a time. A GetOne of `x`
//!   may already return T's value while `y` at B is still locked with its
//!   old value; a GetOne of `y` that starts after the first one ended and
//!   ignores the lock would return the old `y`: T both before and after
//!   — no linearisation (a fractured read). `tla/SingleKeyGetIgnoresLock.cfg`
//!   is that trace; the mutation switch `get_one_ignores_lock`
//!   (`server/get_one.rs`) builds it, killed by `host/tests/single_key.rs`.
//! - A primary that is not serving (recovery epoch, NIC-restart rebuild:
//!   its locks are being rebuilt from undecided LOG records) refuses with
//!   `Unavailable`; it never answers from a lock table it has not rebuilt.
//!
//! **PutOne / InsertOne / DeleteOne**: the arguments are the
//! one-key `Txn` of the call (put: `[put k v]`; insert: `absent(k)` then
//! `[put k v]`; delete: `present(k)` then `[delete k]`, whose commit writes
//! the key's tombstone — DELETED, the next version, no value —
//! `procedure/txn.rs`), checked at the caller to name one key. The primary runs
//! it as a transaction **it coordinates itself**: its own coordinator
//! starts the built-in `txn` procedure with a [`TxId`] of its own
//! (`primary | slot | generation`; P's `Lock` at n1 in the model). So it is an ordinary Xenic OCC
//! transaction coordinated at the primary — EXECUTE (local: lock, read,
//! the room rule's reservation for an insert of an absent key), LOG to
//! every replica, the commit point, COMMIT — and the one reply carries
//! the outcome only once the coordinator reported it (after every replica
//! acknowledged COMMIT, as for any transaction: P's `Report`; replying at
//! the primary's own LOG is `WriteOneReplyEarly`, the bug of the
//! must-fail models).
//! On the network that is one round trip caller ↔ primary plus the
//! primary's replication (LOG and COMMIT with each backup); the EXECUTE
//! and the primary's own LOG/COMMIT go over loopback.
//!
//! A DeleteOne of an absent key (never written, or already deleted) runs
//! the failure branch, writes nothing and commits: the application hears
//! "key not found" `[DeleteAbsent]`. An insert over a tombstone finds the
//! key absent and writes the version after the tombstone's; a delete that
//! removed the key instead would let that write reuse a version another
//! value had (`tla/SingleKeyDeleteRemoves.cfg`).
//!
//! # Crashes, and which rule decides
//!
//! - **The caller crashes** (node or NIC runtime): only the answer is lost.
//!   A GetOne changed nothing. A WriteOne is the primary's transaction and
//!   finishes by the protocol's rules wherever the caller is; a reply for a
//!   dead caller is dropped by the sessions. The application of a crashed
//!   NIC runtime hears `Unknown` for every request in flight
//!   (`recovery/restart`), as for any transaction.
//! - **The primary crashes**: the caller hears nothing more from it. A
//!   GetOne is then answered `Unavailable` (nothing was written: retry
//!   against the new primary). A WriteOne is answered `Unknown`
//!   `[CallerGivesUp]`: its transaction's coordinator died, and crash
//!   recovery decides it from the replicas' LOG records exactly as for any
//!   transaction whose coordinator died (`recovery/epoch`, the decision
//!   rule of `tla/LostCoordinator.tla`: commit iff every written shard's
//!   surviving replicas hold its LOG, never contradicting a decision
//!   already reported). The caller never reports `Committed` without the
//!   primary's reply, and the primary replies only after its commit point
//!   and COMMIT acknowledgements, so a reported write is never lost
//!   (`tla/SingleKeyReportEarly.cfg` shows the loss when it replies at
//!   LOG time).
//! - **A backup crashes**: the primary's transaction waits or aborts by
//!   the coordinator's deadline rules (`coordinator/deadline.rs`), and its
//!   outcome — possibly `Unknown` — is what the caller is told.
//! - **Lost or late messages**: the caller ends a call whose reply is
//!   overdue ([`SingleKey::check_deadlines`]: a GetOne after one phase
//!   deadline, a WriteOne after [`WRITE_ONE_DEADLINE_PHASES`]) or whose
//!   primary failed, with `Unavailable` (get) or `Unknown` (write); a late
//!   reply of a call already ended is dropped by its generation.
//!
//! - **First contact**: a write is shipped only to a primary whose process
//!   this node has heard from ([`crate::net::session::Sessions::heard_from`]).
//!   Before that, the session may address a process that never ran (with
//!   static membership no configuration names the peer's incarnation, so
//!   the first guess is the floor): the real process drops the WriteOne,
//!   the session is renewed, and the caller could only answer `Unknown`.
//!   Such a write is coordinated here instead, as an ordinary one-key
//!   transaction (its failure before LOG is a certain, retryable
//!   `Unavailable`). A GetOne is always sent: its failure is `Unavailable`.
//!
//! # Bounds
//!
//! Caller entries are indexed by the request's ticket, so at most
//! [`TICKETS_MAX`](crate::runtime::TICKETS_MAX) are in flight; a primary
//! coordinates at most [`FORWARDS_MAX`] shipped writes at once (and only
//! while its coordinator has room and its network is not congested),
//! refusing others with `Unavailable`.
//!
//! # Messages per call
//!
//! Counted in [`SingleKeyStats`]: a GetOne is one `GetOne` and one
//! `GetOneResp`; a WriteOne one `WriteOne` and one `WriteOneResp` between
//! caller and primary, the rest being the primary's own transaction.

use super::coordinator::{Coordinator, QueuedOutcome};
use super::Io;
use crate::procedure::txn::TXN_PROCEDURE_ID;
use crate::procedure::{ProcedureRegistry, TxPlan};
use crate::protocol::coordinator::{DEADLINE_SCAN_INTERVAL_NS, TX_INFLIGHT_MAX};
use crate::Nanos;
use splitkv_layout::app::txn::{Branch, GetResult, TxnResult};
use splitkv_layout::host_nic::{TxRequest, TxStatus, ARGS_BYTES_MAX};
use splitkv_layout::wire::{Body, NodeId, ReplyStatus};
use splitkv_layout::{Key, ObjectFlags, TxId, KEY_BYTES};

/// Reserved procedure id of a GetOne request on the request ring: its
/// arguments are the key's [`KEY_BYTES`]-byte encoding; its committed result
/// is a [`TxnResult`] with one get (the built-in `txn`'s result for
/// `[get k]`, so applications read both alike).
pub const GET_ONE_PROCEDURE_ID: u32 = u32::MAX - 2;

/// Reserved procedure id of a single-key write (PutOne, InsertOne,
/// DeleteOne) on the request ring: its arguments are a one-key `Txn`
/// encoding (the built-in `txn`'s); its result is that procedure's.
pub const WRITE_ONE_PROCEDURE_ID: u32 = u32::MAX - 3;

mod forward;

const _: () = assert!(GET_ONE_PROCEDURE_ID != TXN_PROCEDURE_ID);
const _: () = assert!(WRITE_ONE_PROCEDURE_ID != TXN_PROCEDURE_ID);
const _: () = assert!(GET_ONE_PROCEDURE_ID != splitkv_layout::app::PROCEDURE_ID_UNKNOWN);

/// Whether `procedure` names a single-key call this module runs.
pub fn is_single_key(procedure: u32) -> bool {
    procedure == GET_ONE_PROCEDURE_ID || procedure == WRITE_ONE_PROCEDURE_ID
}

/// Most shipped writes one primary coordinates at once.
pub const FORWARDS_MAX: usize = TX_INFLIGHT_MAX;

/// Phase deadlines a caller waits for a WriteOne's reply before it reports
/// `Unknown`: the primary's transaction runs up to four phases (Execute,
/// Log, Commit, or the two rounds of an abort after LOG).
pub const WRITE_ONE_DEADLINE_PHASES: u64 = 4;

/// The request-id bit of a transaction a primary coordinates for a caller
/// (above every ticket).
const FORWARDED: u64 = 1 << 63;

/// Counters of the single-key calls of one node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SingleKeyStats {
    /// GetOne requests sent by this node as caller.
    pub get_one_sent: u64,
    /// GetOne replies taken (each ends its call).
    pub get_one_replies: u64,
    /// WriteOne requests sent by this node as caller.
    pub write_one_sent: u64,
    /// WriteOne replies taken.
    pub write_one_replies: u64,
    /// WriteOnes started here as primary (coordinated here).
    pub write_one_started: u64,
    /// WriteOnes refused here as primary (not serving, no room, congested).
    pub write_one_refused: u64,
    /// Calls refused at the caller before anything was sent (bad arguments).
    pub rejected: u64,
    /// Writes coordinated here as caller instead of shipped, because no
    /// packet of the primary's process had arrived yet (see the module
    /// docs, "First contact").
    pub write_one_coordinated_here: u64,
    /// Calls ended at the caller without a reply (overdue, or the primary failed).
    pub given_up: u64,
    /// Replies dropped as stale (their call ended, or not from its primary).
    pub stale_replies: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallKind {
    Get,
    Write,
}

#[derive(Debug, Clone, Copy)]
struct Call {
    gen: u32,
    live: bool,
    kind: CallKind,
    primary: NodeId,
    sent_at: Nanos,
}

#[derive(Debug, Clone, Copy)]
struct Forward {
    caller: NodeId,
    id: TxId,
}

/// The single-key calls of one node: as caller (indexed by ticket) and as
/// primary (the writes it coordinates for callers). Module docs.
#[derive(Debug)]
pub struct SingleKey {
    calls: Vec<Call>,
    live: usize,
    forwards: Vec<Option<Forward>>,
    free_forwards: Vec<usize>,
    plan: TxPlan,
    phase_deadline_ns: Nanos,
    /// When the calls were last scanned for their deadlines, and the
    /// failed peers then (a new failure scans at once).
    last_scan: (Nanos, u32),
    stats: SingleKeyStats,
}

/// Queues an outcome for the application's ticket `req_id`, in a spare
/// result buffer of the coordinator's.
fn tell(coordinator: &mut Coordinator, req_id: u64, status: TxStatus, result: &[u8]) {
    let mut buf = coordinator.spare_buffer();
    buf.extend_from_slice(result);
    coordinator.outcomes().push_back(QueuedOutcome {
        req_id,
        status,
        result: buf,
    });
}

/// The outcome a caller reports for a GetOne refused with `why`.
fn get_refusal(why: ReplyStatus) -> TxStatus {
    match why {
        ReplyStatus::Ok => TxStatus::Committed,
        ReplyStatus::LockConflict | ReplyStatus::ValidationFailed => TxStatus::LockConflict,
        ReplyStatus::TooLarge => TxStatus::TooLarge,
        ReplyStatus::HostFailure => TxStatus::HostFailure,
        ReplyStatus::Busy | ReplyStatus::Unavailable => TxStatus::Unavailable,
        ReplyStatus::TableFull | ReplyStatus::Malformed => TxStatus::Rejected,
    }
}

impl SingleKey {
    /// Room for `tickets` calls in flight as caller (the client ports'
    /// tickets) and [`FORWARDS_MAX`] writes as primary; calls end after
    /// `phase_deadline_ns` (a get) or [`WRITE_ONE_DEADLINE_PHASES`] times it
    /// (a write) without a reply.
    pub fn new(tickets: usize, phase_deadline_ns: Nanos) -> SingleKey {
        let idle = Call {
            gen: 0,
            live: false,
            kind: CallKind::Get,
            primary: 0,
            sent_at: 0,
        };
        SingleKey {
            calls: vec![idle; tickets],
            live: 0,
            forwards: vec![None; FORWARDS_MAX],
            free_forwards: (0..FORWARDS_MAX).rev().collect(),
            plan: TxPlan::default(),
            phase_deadline_ns,
            last_scan: (0, 0),
            stats: SingleKeyStats::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> SingleKeyStats {
        self.stats
    }

    /// Calls in flight here as caller, plus writes coordinated here for callers.
    pub fn inflight(&self) -> usize {
        self.live + (FORWARDS_MAX - self.free_forwards.len())
    }

    /// Forgets every call and forward (a NIC restart: the application was
    /// told `Unknown` for its tickets, the coordinator lost its
    /// transactions; late replies are dropped by generation).
    pub fn reset(&mut self) {
        for c in &mut self.calls {
            c.live = false;
        }
        self.live = 0;
        self.forwards.iter_mut().for_each(|f| *f = None);
        self.free_forwards = (0..FORWARDS_MAX).rev().collect();
    }

    fn reject(&mut self, coordinator: &mut Coordinator, req_id: u64, status: TxStatus, why: &str) {
        self.stats.rejected += 1;
        tell(coordinator, req_id, status, why.as_bytes());
    }

    /// Starts a single-key call for request `req` (its `req_id` is a ticket
    /// below the table's size, [`is_single_key`] holds for its procedure):
    /// one request to the key's primary, or an outcome at once for
    /// arguments that name no single key.
    pub fn start(
        &mut self,
        io: &mut Io,
        coordinator: &mut Coordinator,
        procs: &ProcedureRegistry,
        req: &TxRequest<'_>,
    ) {
        let ticket = req.req_id as usize;
        if ticket >= self.calls.len() || self.calls[ticket].live {
            // Tickets are unique and bounded by the table; kept as a handled case.
            return self.reject(coordinator, req.req_id, TxStatus::Rejected, "bad ticket");
        }
        let (kind, key) = if req.procedure == GET_ONE_PROCEDURE_ID {
            match Key::decode(req.args) {
                Some(k) if req.args.len() == KEY_BYTES => (CallKind::Get, k),
                _ => {
                    let why = "a GetOne's arguments are one key";
                    return self.reject(coordinator, req.req_id, TxStatus::Rejected, why);
                }
            }
        } else {
            match self.one_written_key(procs, req.args) {
                Ok(k) => (CallKind::Write, k),
                Err((status, why)) => return self.reject(coordinator, req.req_id, status, why),
            }
        };
        let primary = io.placement.primary(&key);
        if coordinator.failed_peers() & (1u32 << primary) != 0 {
            let why = "the key's primary failed";
            return self.reject(coordinator, req.req_id, TxStatus::Unavailable, why);
        }
        if kind == CallKind::Write && primary != io.node && !io.net.sessions().heard_from(primary) {
            // First contact (module docs): coordinated here.
            self.stats.write_one_coordinated_here += 1;
            let here = TxRequest {
                procedure: TXN_PROCEDURE_ID,
                ..*req
            };
            return coordinator.start(io, procs, &here);
        }
        let c = &mut self.calls[ticket];
        c.gen = c.gen.wrapping_add(1);
        *c = Call {
            gen: c.gen,
            live: true,
            kind,
            primary,
            sent_at: io.now,
        };
        self.live += 1;
        let id = TxId::new(io.node, ticket, c.gen);
        match kind {
            CallKind::Get => {
                self.stats.get_one_sent += 1;
                io.w.get_one(id, &key);
            }
            CallKind::Write => {
                self.stats.write_one_sent += 1;
                io.w.write_one(id, req.args);
            }
        }
        io.send(primary);
    }

    /// The one key a WriteOne's `Txn` writes, if it reads no other.
    fn one_written_key(
        &mut self,
        procs: &ProcedureRegistry,
        args: &[u8],
    ) -> Result<Key, (TxStatus, &'static str)> {
        if args.len() > ARGS_BYTES_MAX {
            return Err((TxStatus::TooLarge, "arguments too large"));
        }
        let txn = procs
            .get(TXN_PROCEDURE_ID)
            .map_err(|_| (TxStatus::Rejected, "no txn procedure"))?;
        self.plan.clear();
        txn.plan(args, &mut self.plan)
            .map_err(|_| (TxStatus::Rejected, "not a valid one-key Txn"))?;
        let key = match self.plan.writes[..] {
            [k] => k,
            _ => return Err((TxStatus::Rejected, "a single-key write writes one key")),
        };
        if self.plan.reads.iter().any(|r| *r != key) {
            return Err((TxStatus::Rejected, "a single-key write reads only its key"));
        }
        Ok(key)
    }

    /// The live call a reply from `src` with request id `id` answers.
    fn call_of(&mut self, io: &Io, src: NodeId, id: TxId, kind: CallKind) -> Option<usize> {
        let t = id.slot();
        let ok = id.coordinator() == io.node
            && self.calls.get(t).is_some_and(|c| {
                c.live && c.gen == id.generation() && c.kind == kind && c.primary == src
            });
        if !ok {
            self.stats.stale_replies += 1;
            return None;
        }
        self.calls[t].live = false;
        self.live -= 1;
        Some(t)
    }

    /// Takes a reply (`GetOneResp` or `WriteOneResp`) from `src`: the
    /// call's outcome goes to its application.
    pub fn on_reply(
        &mut self,
        io: &Io,
        coordinator: &mut Coordinator,
        src: NodeId,
        body: &Body<'_>,
    ) {
        let (ticket, status, result) = match *body {
            Body::GetOneResp {
                tx_id,
                status,
                items,
            } => {
                let Some(t) = self.call_of(io, src, tx_id, CallKind::Get) else {
                    return;
                };
                self.stats.get_one_replies += 1;
                let mut result = coordinator.spare_buffer();
                let item = items.iter().next();
                let status = match (status, item) {
                    (ReplyStatus::Ok, Some(it)) if it.meta.check_read(it.value.len()).is_ok() => {
                        let get = if it.meta.flags().contains(ObjectFlags::DELETED) {
                            GetResult::NotFound
                        } else {
                            GetResult::Found {
                                version: it.meta.version(),
                                value: it.value,
                            }
                        };
                        match TxnResult::encode(Branch::Success, &[get], &mut result) {
                            Ok(()) => TxStatus::Committed,
                            Err(_) => TxStatus::TooLarge,
                        }
                    }
                    (ReplyStatus::Ok, _) => TxStatus::Rejected,
                    (why, _) => get_refusal(why),
                };
                (t, status, result)
            }
            Body::WriteOneResp {
                tx_id,
                status,
                result,
            } => {
                let Some(t) = self.call_of(io, src, tx_id, CallKind::Write) else {
                    return;
                };
                self.stats.write_one_replies += 1;
                let mut buf = coordinator.spare_buffer();
                buf.extend_from_slice(result);
                (t, status, buf)
            }
            _ => return,
        };
        coordinator.outcomes().push_back(QueuedOutcome {
            req_id: ticket as u64,
            status,
            result,
        });
    }

    /// Ends the calls whose primary failed (a bit of `failed`, by node id)
    /// or whose reply is overdue `[CallerGivesUp]`: a get `Unavailable`
    /// (it wrote nothing), a write `Unknown` (its primary may still commit
    /// it, or recovery may). Returns whether any ended.
    /// Scans every [`DEADLINE_SCAN_INTERVAL_NS`], and at once when a peer
    /// newly failed.
    pub fn check_deadlines(&mut self, io: &Io, coordinator: &mut Coordinator, failed: u32) -> bool {
        let (scanned_at, failed_then) = self.last_scan;
        let due = io.now.saturating_sub(scanned_at) >= DEADLINE_SCAN_INTERVAL_NS;
        if self.live == 0 || (!due && failed == failed_then) {
            return false;
        }
        self.last_scan = (io.now, failed);
        let mut ended = false;
        for t in 0..self.calls.len() {
            let c = self.calls[t];
            if !c.live {
                continue;
            }
            let wait = match c.kind {
                CallKind::Get => self.phase_deadline_ns,
                CallKind::Write => self.phase_deadline_ns * WRITE_ONE_DEADLINE_PHASES,
            };
            let overdue = io.now.saturating_sub(c.sent_at) > wait;
            if !overdue && failed & (1u32 << c.primary) == 0 {
                continue;
            }
            self.calls[t].live = false;
            self.live -= 1;
            self.stats.given_up += 1;
            ended = true;
            let (status, why): (_, &[u8]) = match c.kind {
                CallKind::Get => (TxStatus::Unavailable, b"no answer from the key's primary"),
                CallKind::Write => (TxStatus::Unknown, b""),
            };
            tell(coordinator, t as u64, status, why);
        }
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_refusals_map_to_typed_outcomes() {
        assert_eq!(
            get_refusal(ReplyStatus::LockConflict),
            TxStatus::LockConflict
        );
        assert!(
            get_refusal(ReplyStatus::LockConflict).is_conflict(),
            "retryable"
        );
        assert_eq!(get_refusal(ReplyStatus::Unavailable), TxStatus::Unavailable);
        assert_eq!(get_refusal(ReplyStatus::Busy), TxStatus::Unavailable);
        assert_eq!(get_refusal(ReplyStatus::HostFailure), TxStatus::HostFailure);
        for s in ReplyStatus::ALL {
            assert_ne!(
                get_refusal(s),
                TxStatus::Unknown,
                "a get is never indeterminate"
            );
        }
    }

    #[test]
    fn reserved_ids_are_single_key_and_distinct() {
        assert!(is_single_key(GET_ONE_PROCEDURE_ID));
        assert!(is_single_key(WRITE_ONE_PROCEDURE_ID));
        assert!(!is_single_key(TXN_PROCEDURE_ID));
        assert!(!is_single_key(0));
    }
}
