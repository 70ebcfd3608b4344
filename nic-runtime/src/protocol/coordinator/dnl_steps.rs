//! The requests of the coordinator's Dnl steps (Dandelion §4.2.2;
//! `tla/DnlSkeleton.tla` `Lock`, `ValidateReads`, `Replicate`, `Unlock`,
//! `Readable`), one function per step, each generic over the row: which
//! keys a step carries and which replicas it visits come from
//! [`Row::visit`] (the spec's `LockKeysAt`, `ValKeysAt`, `ReplKeysAt`),
//! so Dnl-4, Dnl-2 and Dnl-1 send through the same code. The decisions
//! (which step runs next, when an outcome is reported) are in
//! `coordinator/dnl.rs`.
//!
//! What each step carries to node `n`:
//! - Lock: the lock set's keys `n` is visited for, each with the version
//!   read, and the written ones' new values (the pending LOCK record);
//! - Read validation: the validated keys `n` is the primary of, with the
//!   versions read;
//! - Replicate: the written keys `n` is visited for; a value only where
//!   Lock did not already carry it there (a Dnl-2 primary gets none: its
//!   Replicate writes a REPL marker);
//! - Unlock: at every lock holder, the lock set's keys held there released,
//!   on commit the written ones installed from the values carried;
//! - Readable: at every node sent Replicate as a backup of a written key,
//!   those values, sent once the commit is reported (with Unlock in Dnl-2,
//!   after the Unlock acks in Dnl-4).

use super::dnl::dnl_shape;
use super::{bit, send_each, Coordinator, Phase};
use crate::placement::Placement;
use crate::procedure::TxPlan;
use crate::protocol::skeleton::{At, Decision, KeySet, Row, Step};
use crate::protocol::Io;
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::wire::{NodeId, NodeMask};
use splitkv_layout::{Key, TxId};

impl Coordinator {
    /// Locking (TLA `Lock`): the row's lock set at its replicas, each key
    /// with the version read, the written ones with their new values.
    pub(super) fn dnl_lock(&mut self, io: &mut Io, slot: usize, row: &Row) {
        let t = &mut self.txs[slot];
        let tx_id = TxId::new(io.node, slot, t.gen);
        t.phase = Phase::Lock;
        let shape = dnl_shape(t);
        let visit = row.visit(Step::Lock, shape);
        // What the row's recovery rule asks about (recovery evidence).
        let shards = super::evidence::dnl_asked_shards(row, t, &io.placement);
        let (plan, writes, reads) = (&t.plan, &t.writes, &t.reads);
        t.pending = send_each(io, |w, placement, n| {
            w.begin_lock(tx_id, shards);
            let mut any = false;
            for k in keys_of(visit.set, plan).filter(|k| visits(visit.at, placement, k, n)) {
                w.push_version(k, reads.meta(k).map_or(0, |m| m.version()));
                any = true;
            }
            for (k, v) in writes.iter() {
                if visits(visit.at, placement, k, n) {
                    w.push_item(k, Self::new_meta(reads, writes, k).unwrap_or_default(), v);
                }
            }
            any
        });
        let sent = u64::from(t.pending.sent().count_ones());
        self.stats.lock_requests += sent;
        if shape.is_read_only() {
            self.stats.read_only_lock_requests += sent;
        }
        if self.txs[slot].pending == 0 {
            self.dnl_step_done(io, slot, Step::Lock, false);
        }
    }

    /// Read validation (TLA `ValidateReads`) at the primaries: the row's
    /// validated keys (Dnl-4: the keys only read; Dnl-RO, nothing written:
    /// every key read), each with the version read.
    pub(super) fn dnl_validate(&mut self, io: &mut Io, slot: usize, row: &Row) {
        let t = &mut self.txs[slot];
        let tx_id = TxId::new(io.node, slot, t.gen);
        t.phase = Phase::Validate;
        let visit = row.visit(Step::Validate, dnl_shape(t));
        let (plan, reads) = (&t.plan, &t.reads);
        t.pending = send_each(io, |w, placement, n| {
            w.begin_validate(tx_id);
            let mut any = false;
            for k in keys_of(visit.set, plan).filter(|k| visits(visit.at, placement, k, n)) {
                w.push_version(k, reads.meta(k).map_or(0, |m| m.version()));
                any = true;
            }
            any
        });
        if t.pending == 0 {
            self.dnl_step_done(io, slot, Step::Validate, false);
        }
    }

    /// Replication (TLA `Replicate`): the written keys to the row's
    /// replicas, each value where Lock did not carry it (module docs).
    pub(super) fn dnl_replicate(&mut self, io: &mut Io, slot: usize, row: &Row) {
        let t = &mut self.txs[slot];
        let tx_id = TxId::new(io.node, slot, t.gen);
        t.phase = Phase::Replicate;
        let visit = row.visit(Step::Replicate, dnl_shape(t));
        let locked_at = row.visit(Step::Lock, dnl_shape(t)).at;
        let shards = shards_of(t.writes.iter().map(|(k, _)| k), &io.placement);
        let (writes, reads) = (&t.writes, &t.reads);
        t.pending = send_each(io, |w, placement, n| {
            w.begin_replicate(tx_id, shards);
            let mut any = false;
            for (k, v) in writes
                .iter()
                .filter(|(k, _)| visits(visit.at, placement, k, n))
            {
                any = true;
                if !visits(locked_at, placement, k, n) {
                    w.push_item(k, Self::new_meta(reads, writes, k).unwrap_or_default(), v);
                }
            }
            any
        });
        t.logged = t.pending.sent();
        if t.pending == 0 {
            self.dnl_step_done(io, slot, Step::Replicate, false);
        }
    }

    /// Unlocking (TLA `Unlock`) at every lock holder: a commit installs the
    /// values written there, an abort drops them; the other locked keys are
    /// released. A commit already reported sends its Readable now too
    /// (Dnl-2: Readable goes out with Unlock; TLA `Readable` is enabled in
    /// the unlock phase once the commit is reported).
    pub(super) fn dnl_unlock(&mut self, io: &mut Io, slot: usize, row: &Row) {
        let t = &mut self.txs[slot];
        t.phase = Phase::Unlock;
        t.pending = Self::send_unlock(io, slot, t, row, t.locked);
        self.dnl_send_readable(io, slot);
        if self.txs[slot].pending == 0 {
            self.dnl_step_done(io, slot, Step::Unlock, false);
        }
    }

    /// The Unlock of `slot` was refused `Busy` by `refusers` (a node still
    /// checking or appending the transaction's Lock, which a deadline's
    /// abort did not wait for, or out of free slots): it goes to them
    /// again, and the step ends only once each answered otherwise. So no
    /// Lock taken after the decision stays held.
    pub(super) fn dnl_unlock_again(&mut self, io: &mut Io, slot: usize, refusers: u32) {
        let Some(row) = self.row else {
            return;
        };
        self.stats.unlock_resends += u64::from(refusers.count_ones());
        let t = &mut self.txs[slot];
        t.pending.owe_again(refusers);
        t.answered &= !refusers;
        Self::send_unlock(io, slot, t, row, refusers);
    }

    /// Sends the Unlock of `t` (in `slot`) to the lock holders among `to`
    /// (a mask by node id).
    fn send_unlock(
        io: &mut Io,
        slot: usize,
        t: &super::TxCtx,
        row: &Row,
        to: u32,
    ) -> super::Waiting {
        let tx_id = TxId::new(io.node, slot, t.gen);
        let commit = t.dnl_decision == Some(Decision::Commit);
        let visit = row.visit(Step::Unlock, dnl_shape(t));
        let (locked, plan, writes, reads) = (t.locked & to, &t.plan, &t.writes, &t.reads);
        send_each(io, |w, placement, n| {
            if locked & bit(n) == 0 {
                return false;
            }
            w.begin_unlock(tx_id, commit);
            for k in keys_of(visit.set, plan).filter(|k| visits(visit.at, placement, k, n)) {
                if !commit || writes.iter().all(|(written, _)| written != k) {
                    w.push_unlock_key(k);
                }
            }
            if commit {
                for (k, v) in writes.iter() {
                    if visits(visit.at, placement, k, n) {
                        w.push_item(k, Self::new_meta(reads, writes, k).unwrap_or_default(), v);
                    }
                }
            }
            true
        })
    }

    /// TLA `Readable`, if the row has it and the commit is reported
    /// (`readableAt = "report"`; otherwise nothing): the written values to
    /// every node sent Replicate that is a backup of a written key, which
    /// installs them and raises READABLE. At most once per transaction;
    /// their acks are counted down in `readable_due`.
    pub(super) fn dnl_send_readable(&mut self, io: &mut Io, slot: usize) {
        let readable = self.row.is_some_and(|r| r.readable);
        let t = &mut self.txs[slot];
        let reported =
            t.dnl_decision == Some(Decision::Commit) && t.told == Some(TxStatus::Committed);
        if t.readable_sent || !readable || !reported {
            return;
        }
        t.readable_sent = true;
        let tx_id = TxId::new(io.node, slot, t.gen);
        let (logged, writes, reads) = (t.logged, &t.writes, &t.reads);
        let sent = send_each(io, |w, placement, b| {
            if logged & bit(b) == 0 {
                return false;
            }
            w.begin_readable(tx_id);
            let mut any = false;
            for (k, v) in writes.iter() {
                if placement.backups(k).any(|n| n == b) {
                    w.push_item(k, Self::new_meta(reads, writes, k).unwrap_or_default(), v);
                    any = true;
                }
            }
            any
        });
        t.readable_due = sent.sent();
    }
}

/// The keys of `set` among `plan`'s: the read set is the keys read and the
/// keys written (writes are read-modify-write; [`super::dnl_shape`] makes a
/// transaction that wrote nothing read-only, its planned writes reads).
pub(super) fn keys_of(set: KeySet, plan: &TxPlan) -> impl Iterator<Item = &Key> {
    let (reads, writes): (&[Key], &[Key]) = match set {
        KeySet::Empty => (&[], &[]),
        KeySet::Reads => (&plan.reads, &plan.writes),
        KeySet::Writes => (&[], &plan.writes),
        KeySet::ReadsNotWritten => (&plan.reads, &[]),
    };
    reads.iter().chain(writes)
}

/// Whether a step visiting the replicas `at` of `key` visits node `n`.
pub(super) fn visits(at: At, placement: &Placement, key: &Key, n: NodeId) -> bool {
    (at.primary && placement.primary(key) == n)
        || (at.backups && placement.backups(key).any(|b| b == n))
}

/// The shards of `keys`.
fn shards_of<'a>(keys: impl Iterator<Item = &'a Key>, p: &Placement) -> NodeMask {
    keys.fold(NodeMask::EMPTY, |m, k| m.with(p.shard(k)))
}
