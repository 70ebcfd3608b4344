//! The NIC index (Xenic §4.1.3), first cut: lock metadata of keys in active
//! transactions (held only here, Xenic §4.2.1 (a)) and the objects written by
//! committed transactions that the host has not yet applied. Those objects stay
//! pinned here until the host acknowledges the log position that holds them
//! (Xenic §4.2 steps 6–7), so the NIC runtime never reads a stale value from the
//! host table.
//!
//! Not yet here (see the data-store issue): per-segment entries with displacement
//! hints d_i, a capacity-bounded object cache with epoch-based LRU.

use splitkv_layout::{FixedState, Key, ObjectMeta};
use std::collections::VecDeque;

type Map<K, V> = hashbrown::HashMap<K, V, FixedState>;

/// Pin position of an object whose log append has not completed yet.
pub const PIN_PENDING: u64 = u64::MAX;

/// A committed object cached in the NIC index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedObject {
    /// Version and flags of the committed value.
    pub meta: ObjectMeta,
    /// The committed value.
    pub value: Vec<u8>,
    /// Host-log position the host must reach before this entry may go
    /// ([`PIN_PENDING`] until the append completes).
    pub pin_until: u64,
}

/// Lock and cache metadata of one node's NIC runtime.
#[derive(Debug, Default)]
pub struct NicIndex {
    locks: Map<Key, u64>,
    cache: Map<Key, CachedObject>,
    pins: VecDeque<(u64, Key)>,
}

impl NicIndex {
    /// An empty index.
    pub fn new() -> NicIndex {
        NicIndex::default()
    }

    /// Locks `key` for `tx_id` (no-wait). True if now held by `tx_id`.
    #[inline]
    pub fn try_lock(&mut self, key: Key, tx_id: u64) -> bool {
        *self.locks.entry(key).or_insert(tx_id) == tx_id
    }

    /// Releases `key` if `tx_id` holds it; true if it did.
    #[inline]
    pub fn unlock(&mut self, key: &Key, tx_id: u64) -> bool {
        match self.locks.get(key) {
            Some(&h) if h == tx_id => {
                self.locks.remove(key);
                true
            }
            _ => false,
        }
    }

    /// The transaction holding `key`'s lock.
    #[inline]
    pub fn lock_holder(&self, key: &Key) -> Option<u64> {
        self.locks.get(key).copied()
    }

    /// Locks currently held.
    pub fn locks_held(&self) -> usize {
        self.locks.len()
    }

    /// The cached committed object of `key`.
    #[inline]
    pub fn cached(&self, key: &Key) -> Option<&CachedObject> {
        self.cache.get(key)
    }

    /// Installs a committed write; it stays pinned until [`NicIndex::set_pin`]
    /// and then [`NicIndex::unpin_applied`] release it.
    pub fn install_committed(&mut self, key: Key, meta: ObjectMeta, value: &[u8]) {
        let e = self.cache.entry(key).or_insert_with(|| CachedObject {
            meta,
            value: Vec::new(),
            pin_until: PIN_PENDING,
        });
        debug_assert!(
            meta.version() > e.meta.version() || e.value.is_empty(),
            "committed versions grow"
        );
        e.meta = meta;
        e.value.clear();
        e.value.extend_from_slice(value);
        e.pin_until = PIN_PENDING;
    }

    /// Records that the committed write of `key` at `version` is in the host log
    /// before position `pos`. A newer write of the same key keeps its own pin.
    pub fn set_pin(&mut self, key: Key, version: u64, pos: u64) {
        if let Some(e) = self.cache.get_mut(&key) {
            if e.meta.version() == version {
                e.pin_until = pos;
                self.pins.push_back((pos, key));
            }
        }
    }

    /// The host has applied its log up to `applied`: drop cached objects whose
    /// pin is at or below it. Returns how many were dropped.
    pub fn unpin_applied(&mut self, applied: u64) -> usize {
        let mut dropped = 0;
        while let Some(&(pos, key)) = self.pins.front() {
            if pos > applied {
                break;
            }
            self.pins.pop_front();
            if let Some(e) = self.cache.get(&key) {
                if e.pin_until <= applied {
                    self.cache.remove(&key);
                    dropped += 1;
                }
            }
        }
        dropped
    }

    /// Objects cached (all pinned in this version).
    pub fn cached_objects(&self) -> usize {
        self.cache.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_are_no_wait_and_owned() {
        let mut ix = NicIndex::new();
        let k = Key::new(0, 1);
        assert!(ix.try_lock(k, 1));
        assert!(ix.try_lock(k, 1), "re-lock by holder");
        assert!(!ix.try_lock(k, 2));
        assert!(!ix.unlock(&k, 2), "only the holder unlocks");
        assert!(ix.unlock(&k, 1));
        assert!(ix.try_lock(k, 2));
        assert_eq!(ix.locks_held(), 1);
    }

    #[test]
    fn objects_stay_pinned_until_applied() {
        let mut ix = NicIndex::new();
        let k = Key::new(0, 1);
        ix.install_committed(k, ObjectMeta(2), b"v2");
        assert_eq!(
            ix.unpin_applied(u64::MAX - 1),
            0,
            "pending append is never dropped"
        );
        ix.set_pin(k, 2, 100);
        assert_eq!(ix.unpin_applied(99), 0);
        ix.install_committed(k, ObjectMeta(3), b"v3");
        ix.set_pin(k, 3, 200);
        assert_eq!(ix.unpin_applied(150), 0, "newer write keeps the object");
        assert_eq!(ix.cached(&k).unwrap().value, b"v3");
        assert_eq!(ix.unpin_applied(200), 1);
        assert!(ix.cached(&k).is_none());
    }
}
