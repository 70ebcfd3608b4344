//! Room for inserts into a full table: an insert of an absent key reserves room on
//! every replica of its shard **before the commit point**, at the primary's
//! EXECUTE, and a transaction with no room aborts with
//! [`ReplyStatus::TableFull`](splitkv_layout::wire::ReplyStatus::TableFull)
//! instead of committing a write some replica's host table cannot take.
//!
//! # Why the primary decides, and why its view covers every replica
//!
//! The decision must be the same for every replica: a LOG refused by one
//! replica after another appended it would make the transaction abort (the
//! others drop their pending records at the ABORT), and room is better
//! decided once, before anything is logged. The primary of shard `s` is where the transaction locks its
//! write-set keys of `s` and learns, under that lock, whether each is absent
//! (Xenic §4.2 step 1), so it decides there, once, for all replicas. Every
//! replica of `s` holds exactly the keys of `s` (placement is fixed: DESIGN.md
//! "Data and metadata"), so the primary knows how many keys of `s` each of its
//! replicas holds: its committed count, plus at most the reservations in flight
//! (a backup may hold a reserved key's LOG record before the COMMIT).
//!
//! # Quotas
//!
//! Each node's table guarantees some number of keys (its configured
//! capacity). A node hosts several shards (one as primary, the rest as backup),
//! so its capacity is split among them, and a shard's **quota** is the smallest
//! share over its replicas (the cluster builder computes it,
//! `splitkv_host::cluster`; a node built alone has no quota,
//! [`ROOM_KEYS_UNLIMITED`]). The quotas of the shards a node hosts then sum to
//! at most its capacity, so as long as every primary keeps
//! `count + reserved ≤ quota`, no replica's table is asked to hold more keys
//! than it guarantees.
//!
//! # The rule
//!
//! * **EXECUTE** (all write-set locks held, every key read): `n` = the write-set
//!   keys found absent. If `count + reserved + n > quota`, the EXECUTE is
//!   refused with `TableFull` (its locks released); otherwise `n` reservations
//!   are held, one per key, tagged with the transaction id.
//! * **COMMIT** of a reserved key turns its reservation into a count
//!   (`reserved − 1`, `count + 1`).
//! * **ABORT** of a reserved key (the transaction aborted, or committed
//!   without writing it) releases the reservation.
//! * A delete writes a tombstone (DELETED, the next version, no value) that
//!   stays in every replica's table: it still takes a slot, so it leaves
//!   `count` as it is, and an insert over it needs no room (only keys absent
//!   with version 0 reserve). Tombstones are not reclaimed, so the count only
//!   grows; [`Room::removed`] is for a reclaim, which needs a per-shard
//!   version floor first.
//!
//! A key is absent at EXECUTE and still absent at its COMMIT: the transaction
//! holds its lock throughout, and every earlier COMMIT of the key was installed
//! in the NIC index before its lock was released, so the read sees it.
//!
//! # What the quota does not cover
//!
//! The quota counts keys; it cannot see how keys hash. A table that is
//! physically full below its guaranteed capacity (keys chosen to collide,
//! overflowing a Robinhood segment's chain) still refuses a committed write at
//! the host worker, which stops the node with a typed reason
//! (`splitkv_host::WorkerError::TableFull`), never a panic or a silent drop.

use splitkv_layout::{FixedState, Key, TxId};

/// The quota of a node nobody gave one: every insert fits.
pub const ROOM_KEYS_UNLIMITED: u64 = u64::MAX;

/// Most reservations one primary holds at once: every transaction that may
/// hold locks here ([`SERVER_OPS_MAX`](super::SERVER_OPS_MAX), one per
/// coordinator slot and node) inserting a whole write set
/// ([`WRITE_SET_MAX`](crate::procedure::WRITE_SET_MAX)). Not reached by
/// well-behaved peers; an EXECUTE that would pass it is refused as busy.
pub const RESERVATIONS_MAX: usize = super::SERVER_OPS_MAX * crate::procedure::WRITE_SET_MAX;

/// Reservations the table has room for from the start (it grows, up to
/// [`RESERVATIONS_MAX`], only under many concurrent inserts).
const RESERVATIONS_RESERVED: usize = 1024;

/// Why [`Room::reserve`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RoomError {
    /// `count + reserved + n` would pass the quota.
    #[error("shard full: {count} keys and {reserved} reserved, {n} more would pass the quota of {quota}")]
    Full {
        /// Keys committed.
        count: u64,
        /// Reservations in flight.
        reserved: u64,
        /// Keys asked for.
        n: u64,
        /// The shard's quota.
        quota: u64,
    },
    /// [`RESERVATIONS_MAX`] reservations are already held.
    #[error("{RESERVATIONS_MAX} reservations already held")]
    TooManyReservations,
}

/// Whether `n` more keys fit a shard holding `count` keys with `reserved`
/// in flight under `quota` (`count + reserved + n ≤ quota`, without overflow).
#[inline]
pub fn fits(count: u64, reserved: u64, n: u64, quota: u64) -> bool {
    count
        .checked_add(reserved)
        .and_then(|used| used.checked_add(n))
        .is_some_and(|total| total <= quota)
}

/// The room of the shard this node is primary of: quota, committed key
/// count, and the reservations of inserts in flight (see the module docs).
#[derive(Debug)]
pub struct Room {
    quota: u64,
    count: u64,
    /// Reserved key → the transaction holding the reservation (the NIC
    /// index's hasher: deterministic, and cheaper than SipHash).
    held: hashbrown::HashMap<Key, TxId, FixedState>,
    refusals: u64,
}

impl Default for Room {
    fn default() -> Self {
        Room::new()
    }
}

impl Room {
    /// No keys, no quota ([`ROOM_KEYS_UNLIMITED`]).
    pub fn new() -> Room {
        Room {
            quota: ROOM_KEYS_UNLIMITED,
            count: 0,
            held: hashbrown::HashMap::with_capacity_and_hasher(RESERVATIONS_RESERVED, FixedState),
            refusals: 0,
        }
    }

    /// Sets the shard's quota in keys (see the module docs). Call while the
    /// node does not run; a quota below the current count refuses every
    /// insert until deletes bring the count under it.
    pub fn set_quota(&mut self, keys: u64) {
        self.quota = keys;
    }

    /// Adds `keys` rows a bulk load put on this shard's replicas directly
    /// (bypassing the protocol). Saturates at `u64::MAX`.
    pub fn add_loaded(&mut self, keys: u64) {
        self.count = self.count.saturating_add(keys);
    }

    /// The shard's quota in keys.
    pub fn quota(&self) -> u64 {
        self.quota
    }

    /// Keys of the shard committed (or loaded).
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Reservations held by inserts in flight.
    pub fn reserved(&self) -> u64 {
        self.held.len() as u64
    }

    /// EXECUTEs refused for want of room.
    pub fn refusals(&self) -> u64 {
        self.refusals
    }

    /// Reserves one key for each of `keys` (absent write-set keys the
    /// transaction `tx_id` holds locked), all or none.
    ///
    /// # Errors
    /// [`RoomError::Full`] when they would pass the quota,
    /// [`RoomError::TooManyReservations`] past [`RESERVATIONS_MAX`]; nothing
    /// is reserved then.
    pub fn reserve<'a>(
        &mut self,
        tx_id: TxId,
        keys: impl Iterator<Item = &'a Key> + Clone,
    ) -> Result<(), RoomError> {
        let n = keys.clone().count();
        if n == 0 {
            return Ok(());
        }
        let reserved = self.reserved();
        if !fits(self.count, reserved, n as u64, self.quota) {
            self.refusals += 1;
            return Err(RoomError::Full {
                count: self.count,
                reserved,
                n: n as u64,
                quota: self.quota,
            });
        }
        if self.held.len() + n > RESERVATIONS_MAX {
            return Err(RoomError::TooManyReservations);
        }
        for k in keys {
            self.held.insert(*k, tx_id);
        }
        Ok(())
    }

    /// The reservation of `key` by `tx_id`, if held, leaves the map.
    #[inline]
    fn take(&mut self, key: &Key, tx_id: TxId) -> bool {
        if self.held.is_empty() {
            return false;
        }
        match self.held.get(key) {
            Some(&h) if h == tx_id => {
                self.held.remove(key);
                true
            }
            _ => false,
        }
    }

    /// `tx_id` committed a write of `key`: a reservation becomes a key.
    /// (A write of a present key holds none and changes nothing.)
    #[inline]
    pub fn committed(&mut self, key: &Key, tx_id: TxId) {
        if self.take(key, tx_id) {
            self.count += 1;
        }
    }

    /// `tx_id` released `key` without writing it: its reservation, if any,
    /// is given back.
    #[inline]
    pub fn released(&mut self, key: &Key, tx_id: TxId) {
        self.take(key, tx_id);
    }

    /// A key left the table: one key of room comes back (saturating at 0).
    /// No protocol step removes a key yet: a delete's tombstone stays
    /// (module docs).
    pub fn removed(&mut self) {
        self.count = self.count.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(ids: std::ops::Range<u64>) -> Vec<Key> {
        ids.map(|i| Key::new(0, i)).collect()
    }

    #[test]
    fn fits_at_its_edges() {
        assert!(fits(0, 0, 0, 0));
        assert!(!fits(0, 0, 1, 0));
        assert!(fits(3, 2, 5, 10), "exactly the quota fits");
        assert!(!fits(3, 2, 6, 10), "one past it does not");
        assert!(fits(u64::MAX - 1, 0, 1, u64::MAX));
        assert!(!fits(u64::MAX, 1, 0, u64::MAX), "overflow is not room");
        assert!(!fits(1, u64::MAX, 1, u64::MAX));
    }

    #[test]
    fn reservations_fill_the_quota_exactly_and_are_all_or_none() {
        let mut r = Room::new();
        r.set_quota(4);
        r.add_loaded(1);
        let ks = keys(0..4);
        assert!(matches!(
            r.reserve(TxId::from_bits(7), ks[..4].iter()),
            Err(RoomError::Full {
                count: 1,
                reserved: 0,
                n: 4,
                quota: 4
            })
        ));
        assert_eq!((r.reserved(), r.refusals()), (0, 1), "nothing held");
        r.reserve(TxId::from_bits(7), ks[..2].iter()).unwrap();
        r.reserve(TxId::from_bits(8), ks[2..3].iter()).unwrap();
        assert_eq!((r.count(), r.reserved()), (1, 3));
        assert!(
            r.reserve(TxId::from_bits(9), ks[3..4].iter()).is_err(),
            "the quota is used"
        );
        r.reserve(TxId::from_bits(9), std::iter::empty()).unwrap();
    }

    #[test]
    fn commit_counts_abort_releases_and_others_change_nothing() {
        let mut r = Room::new();
        r.set_quota(3);
        let ks = keys(0..3);
        r.reserve(TxId::from_bits(1), ks[..2].iter()).unwrap();
        r.released(&ks[0], TxId::from_bits(2)); // another transaction: not its reservation
        r.committed(&ks[2], TxId::from_bits(1)); // a key it did not reserve (was present)
        assert_eq!((r.count(), r.reserved()), (0, 2));
        r.committed(&ks[0], TxId::from_bits(1));
        r.released(&ks[1], TxId::from_bits(1));
        assert_eq!((r.count(), r.reserved()), (1, 0));
        r.committed(&ks[0], TxId::from_bits(1)); // a duplicate COMMIT counts once
        assert_eq!(r.count(), 1);
        r.reserve(TxId::from_bits(3), ks[1..3].iter()).unwrap();
        assert!(r.reserve(TxId::from_bits(4), ks[..1].iter()).is_err());
        r.removed();
        r.reserve(TxId::from_bits(4), ks[..1].iter()).unwrap();
        assert_eq!((r.count(), r.reserved()), (0, 3));
    }

    #[test]
    fn unlimited_and_saturating() {
        let mut r = Room::new();
        r.add_loaded(u64::MAX);
        assert_eq!(r.count(), u64::MAX);
        assert!(
            r.reserve(TxId::from_bits(1), keys(0..1).iter()).is_err(),
            "no overflow"
        );
        let mut r = Room::new();
        r.removed();
        assert_eq!(r.count(), 0);
        r.reserve(TxId::from_bits(1), keys(0..16).iter()).unwrap();
        assert_eq!(r.reserved(), 16);
    }
}
