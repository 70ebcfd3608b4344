//! What a server remembers about each coordinator slot: the newest
//! transaction generation it has seen from that slot and how far that
//! transaction got here (against the orphan lock).
//!
//! Transaction ids name `coordinator | slot | generation` ([`TxId`], see
//! [`coordinator`](crate::protocol::coordinator)); a coordinator reuses a slot
//! only after it decided the slot's previous transaction, so per
//! (coordinator node, slot) only the newest generation can still be live. A
//! request of an older generation, or of the newest one after it finished
//! here, is late or duplicated: an EXECUTE then would take locks nobody
//! releases, and a LOG would leave a pending record nobody decides, so the
//! server refuses both. The table holds one entry per slot:
//! [`NODES_MAX`] × ([`TX_INFLIGHT_MAX`] + copy slots) entries of 16 bytes, allocated once.
//!
//! Each entry also says which record this node's host log holds for that
//! transaction ([`Held`]): the evidence crash recovery reads (Xenic
//! §4.2.1). It is reset when a newer generation of the slot arrives,
//! which its coordinator starts only after every replica acknowledged the
//! previous one's decision.

use crate::placement::NODES_MAX;
use crate::protocol::coordinator::TX_INFLIGHT_MAX;
use splitkv_layout::wire::{NodeId, NodeMask, RecordKind};
use splitkv_layout::TxId;

/// Slots per coordinator node: its transactions', then the copy
/// transactions' of re-replication ([`crate::slots`]).
const SLOTS: usize = crate::slots::SLOTS_PER_NODE;
const _: () = assert!(SLOTS <= TxId::SLOTS);

/// How far the newest transaction of one coordinator slot got at this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TxState {
    /// Seen (EXECUTE or VALIDATE), no LOG here yet.
    Active,
    /// Its LOG records are being appended to this node's host log
    /// (duplicates get no answer of their own).
    Logging,
    /// Its LOG records are in this node's host log, undecided.
    Logged,
    /// Its COMMIT is being appended here (duplicates get no answer of their own).
    Committing,
    /// Decided here (committed, or aborted): nothing more of it is accepted.
    Finished,
}

use crate::protocol::generation_newer as newer;

/// The record this node's host log holds for a transaction: its kind (the
/// latest one: a LOG, a Dnl LOCK or REPL, then its COMMIT or ABORT
/// decision), the shards of the values it holds pending here, and every
/// shard the transaction's recovery rule asks about (as its LOG or Dnl
/// Lock/Replicate said: the written shards, or a Dnl-1 transaction's locked
/// ones). A Dnl transaction also says which shards it holds locks on here
/// and which shards its REPL record covers (`server/dnl_recovery.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Held {
    pub(super) kind: RecordKind,
    pub(super) shards: NodeMask,
    pub(super) write_shards: NodeMask,
    /// Dnl: shards of the keys a LOCK record holds locked here.
    pub(super) locked: NodeMask,
    /// Dnl: shards a REPL record covers here.
    pub(super) repl: NodeMask,
}

impl Held {
    /// Whether no decision record is held: the records are pending.
    pub(super) fn pending(&self) -> bool {
        !matches!(self.kind, RecordKind::Commit | RecordKind::Abort)
    }
}

/// The shards a Dnl step's records cover at this node ([`TxTable::hold_dnl`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct DnlHeld {
    /// Shards of the values the step carried here (pending value records).
    pub(super) values: NodeMask,
    /// Shards of the keys a Lock locked here.
    pub(super) locked: NodeMask,
    /// Shards a Replicate's REPL record covers here.
    pub(super) repl: NodeMask,
}

/// How far a Dnl transaction's steps got at this node (`server/dnl.rs`):
/// bits of the `DNL_*` constants, reset with the entry when a newer
/// generation of the slot arrives.
pub(super) type DnlMarks = u8;
/// A Lock took this transaction's locks here (its records may still be
/// being appended).
pub(super) const DNL_LOCKING: DnlMarks = 1 << 0;
/// Its Lock's records are in the host log and answered `Ok`: a lock holder.
pub(super) const DNL_LOCKED: DnlMarks = 1 << 1;
/// A Replicate's records are being appended.
pub(super) const DNL_REPLICATING: DnlMarks = 1 << 2;
/// A Replicate's records are in the host log (a pending REPL record).
pub(super) const DNL_REPLICATED: DnlMarks = 1 << 3;
/// An Unlock's decision record is being appended.
pub(super) const DNL_UNLOCKING: DnlMarks = 1 << 4;
/// Unlocked here (decided at this lock holder, or aborted before any lock).
pub(super) const DNL_UNLOCKED: DnlMarks = 1 << 5;
/// A Readable's COMMIT record is being appended.
pub(super) const DNL_INSTALLING: DnlMarks = 1 << 6;
/// Made readable here (installed from its REPL record).
pub(super) const DNL_READABLE: DnlMarks = 1 << 7;

#[derive(Debug, Clone, Copy)]
struct Entry {
    gen: u32,
    state: TxState,
    held: Option<Held>,
    dnl: DnlMarks,
}

/// The per-slot table (module docs).
#[derive(Debug)]
pub(super) struct TxTable {
    entries: Vec<Entry>,
}

impl TxTable {
    /// Every slot at generation 0, finished (coordinators start at 1).
    pub(super) fn new() -> TxTable {
        let e = Entry {
            gen: 0,
            state: TxState::Finished,
            held: None,
            dnl: 0,
        };
        TxTable {
            entries: vec![e; NODES_MAX * SLOTS],
        }
    }

    /// The entry index and generation of `tx_id`, or `None` when its node or
    /// slot is out of range (a malformed id).
    #[inline]
    fn at(tx_id: TxId) -> Option<(usize, u32)> {
        let node = tx_id.coordinator() as usize;
        let slot = tx_id.slot();
        (node < NODES_MAX && slot < SLOTS).then_some((node * SLOTS + slot, tx_id.generation()))
    }

    /// The state of `tx_id` here: `None` if a newer generation of its slot
    /// was seen or its id is out of range (too late for anything), otherwise
    /// its state (`Active` if never seen).
    #[inline]
    pub(super) fn state(&self, tx_id: TxId) -> Option<TxState> {
        let (i, gen) = Self::at(tx_id)?;
        let Entry {
            gen: seen, state, ..
        } = self.entries[i];
        if newer(gen, seen) {
            Some(TxState::Active)
        } else if gen == seen {
            Some(state)
        } else {
            None
        }
    }

    /// Whether `tx_id` may still act here: neither superseded nor finished.
    #[inline]
    pub(super) fn live(&self, tx_id: TxId) -> bool {
        self.state(tx_id).is_some_and(|s| s != TxState::Finished)
    }

    /// Records that `tx_id` reached `state` (ignored for a superseded or
    /// malformed id).
    #[inline]
    pub(super) fn set(&mut self, tx_id: TxId, state: TxState) {
        if let Some((i, gen)) = Self::at(tx_id) {
            let e = &mut self.entries[i];
            if newer(gen, e.gen) {
                *e = Entry {
                    gen,
                    state,
                    held: None,
                    dnl: 0,
                };
            } else if gen == e.gen {
                e.state = state;
            }
        }
    }

    /// The Dnl marks of `tx_id` here: `None` if superseded or out of range,
    /// 0 for a generation not seen yet.
    pub(super) fn dnl(&self, tx_id: TxId) -> Option<DnlMarks> {
        let (i, gen) = Self::at(tx_id)?;
        let e = &self.entries[i];
        if newer(gen, e.gen) {
            Some(0)
        } else {
            (gen == e.gen).then_some(e.dnl)
        }
    }

    /// Sets the Dnl marks `set` and clears `clear` of `tx_id` (a generation
    /// not seen yet becomes the slot's newest, `Active`); ignored for a
    /// superseded or malformed id.
    pub(super) fn mark_dnl(&mut self, tx_id: TxId, set: DnlMarks, clear: DnlMarks) {
        if self.state(tx_id) == Some(TxState::Active) {
            self.set(tx_id, TxState::Active);
        }
        if let Some((i, gen)) = Self::at(tx_id) {
            let e = &mut self.entries[i];
            if gen == e.gen {
                e.dnl = (e.dnl & !clear) | set;
            }
        }
    }

    /// The record this node holds for `tx_id`, if any (none for a
    /// superseded or malformed id).
    pub(super) fn held(&self, tx_id: TxId) -> Option<Held> {
        let (i, gen) = Self::at(tx_id)?;
        let e = &self.entries[i];
        (e.gen == gen).then_some(e.held).flatten()
    }

    /// Records that this node's host log holds (or is being given) a record
    /// of `kind` for `tx_id`, for keys of `shards`; `write_shards` are added
    /// to those already known. Ignored for a superseded or malformed id.
    pub(super) fn hold(
        &mut self,
        tx_id: TxId,
        kind: RecordKind,
        shards: NodeMask,
        write_shards: NodeMask,
    ) {
        let Some((i, gen)) = Self::at(tx_id) else {
            return;
        };
        let e = &mut self.entries[i];
        if gen != e.gen {
            return;
        }
        let old = e.held.unwrap_or(Held {
            kind,
            shards: NodeMask::EMPTY,
            write_shards: NodeMask::EMPTY,
            locked: NodeMask::EMPTY,
            repl: NodeMask::EMPTY,
        });
        e.held = Some(Held {
            kind,
            shards: NodeMask(old.shards.0 | shards.0),
            write_shards: NodeMask(old.write_shards.0 | write_shards.0 | shards.0),
            ..old
        });
    }

    /// [`TxTable::hold`] of a Dnl step's pending records (`kind`
    /// [`RecordKind::Lock`] or [`RecordKind::Repl`]), adding the shards it
    /// locked and its REPL covers to those already held.
    pub(super) fn hold_dnl(
        &mut self,
        tx_id: TxId,
        kind: RecordKind,
        held: DnlHeld,
        asked: NodeMask,
    ) {
        self.hold(tx_id, kind, held.values, asked);
        if let Some((i, gen)) = Self::at(tx_id) {
            let e = &mut self.entries[i];
            if let (true, Some(h)) = (gen == e.gen, e.held.as_mut()) {
                h.locked = NodeMask(h.locked.0 | held.locked.0);
                h.repl = NodeMask(h.repl.0 | held.repl.0);
            }
        }
    }

    /// The newest generation seen of coordinator `node`'s transactions,
    /// over its slots, compared with wrap-around (0: none seen, or `node`
    /// out of range). Transaction slots only: the copy slots of
    /// re-replication number their own ids.
    pub(super) fn newest_generation(&self, node: usize) -> u32 {
        if node >= NODES_MAX {
            return 0;
        }
        self.entries[node * SLOTS..node * SLOTS + TX_INFLIGHT_MAX]
            .iter()
            .fold(0, |m, e| crate::protocol::newer_generation(e.gen, m))
    }

    /// Every transaction with a record here, as `(tx_id, held)`.
    pub(super) fn held_all(&self) -> impl Iterator<Item = (TxId, Held)> + '_ {
        self.entries.iter().enumerate().filter_map(|(i, e)| {
            let held = e.held?;
            let node = (i / SLOTS) as NodeId;
            Some((TxId::new(node, i % SLOTS, e.gen), held))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(node: usize, slot: usize, gen: u32) -> TxId {
        TxId::new(node as NodeId, slot, gen)
    }

    #[test]
    fn newer_generations_supersede_and_finished_ones_stay_refused() {
        let mut t = TxTable::new();
        assert_eq!(t.state(id(1, 2, 1)), Some(TxState::Active));
        t.set(id(1, 2, 1), TxState::Logged);
        assert_eq!(t.state(id(1, 2, 1)), Some(TxState::Logged));
        t.set(id(1, 2, 1), TxState::Finished);
        assert!(!t.live(id(1, 2, 1)), "finished: a late request is refused");
        assert!(t.live(id(1, 2, 2)), "the next generation is new");
        t.set(id(1, 2, 2), TxState::Active);
        assert_eq!(t.state(id(1, 2, 1)), None, "superseded");
        t.set(id(1, 2, 1), TxState::Active);
        assert_eq!(t.state(id(1, 2, 2)), Some(TxState::Active), "no going back");
        assert!(t.live(id(1, 3, 1)), "other slots are independent");
    }

    #[test]
    fn records_held_follow_the_generation() {
        let mut t = TxTable::new();
        let (tx, next) = (id(2, 5, 7), id(2, 5, 8));
        t.hold(tx, RecordKind::Log, NodeMask(0b01), NodeMask(0b11));
        assert_eq!(t.held(tx), None, "a generation not seen yet holds nothing");
        t.set(tx, TxState::Logging);
        t.hold(tx, RecordKind::Log, NodeMask(0b01), NodeMask(0b11));
        t.hold(tx, RecordKind::Commit, NodeMask::EMPTY, NodeMask::EMPTY);
        let held = Held {
            kind: RecordKind::Commit,
            shards: NodeMask(0b01),
            write_shards: NodeMask(0b11),
            locked: NodeMask::EMPTY,
            repl: NodeMask::EMPTY,
        };
        assert_eq!(t.held(tx), Some(held));
        assert_eq!(t.held_all().collect::<Vec<_>>(), vec![(tx, held)]);
        t.set(next, TxState::Active);
        assert_eq!((t.held(tx), t.held(next)), (None, None));
        assert_eq!(t.held_all().count(), 0);
    }

    #[test]
    fn dnl_marks_follow_the_generation() {
        let mut t = TxTable::new();
        let (tx, next) = (id(3, 1, 4), id(3, 1, 5));
        assert_eq!(t.dnl(tx), Some(0));
        t.mark_dnl(tx, DNL_LOCKING, 0);
        t.mark_dnl(tx, DNL_LOCKED, DNL_LOCKING);
        assert_eq!(t.dnl(tx), Some(DNL_LOCKED));
        assert_eq!(t.state(tx), Some(TxState::Active));
        t.mark_dnl(next, DNL_REPLICATING, 0);
        assert_eq!(t.dnl(tx), None, "superseded");
        assert_eq!(t.dnl(next), Some(DNL_REPLICATING));
        t.mark_dnl(tx, DNL_UNLOCKED, 0);
        assert_eq!(t.dnl(next), Some(DNL_REPLICATING), "no going back");
        assert_eq!(t.dnl(id(NODES_MAX, 0, 1)), None);
    }

    #[test]
    fn wraps_and_refuses_out_of_range_ids() {
        let mut t = TxTable::new();
        for gen in [1, 0x8000_0000, u32::MAX] {
            t.set(id(0, 0, gen), TxState::Finished);
        }
        assert!(!t.live(id(0, 0, u32::MAX)));
        assert!(t.live(id(0, 0, 0)), "0 follows u32::MAX");
        assert!(!t.live(id(NODES_MAX, 0, 1)));
        assert!(!t.live(id(0, SLOTS, 1)));
    }
}
