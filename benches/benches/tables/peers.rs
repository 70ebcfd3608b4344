//! The peer hash maps the mixes compare the host tables with.

use super::mix::*;
use parking_lot::RwLock;
use splitkv_layout::FixedState;

/// hashbrown, single-threaded (no lock).
pub(crate) struct Hashbrown(hashbrown::HashMap<u64, u64, FixedState>);

impl SingleThreadMap for Hashbrown {
    const NAME: &'static str = "hashbrown";
    fn with_capacity(keys: usize) -> Self {
        Hashbrown(hashbrown::HashMap::with_capacity_and_hasher(
            keys, FixedState,
        ))
    }
    fn get(&mut self, key: u64) -> Option<u64> {
        self.0.get(&key).copied()
    }
    fn insert(&mut self, key: u64, value: u64) -> bool {
        match self.0.entry(key) {
            hashbrown::hash_map::Entry::Occupied(_) => false,
            hashbrown::hash_map::Entry::Vacant(v) => {
                v.insert(value);
                true
            }
        }
    }
    fn remove(&mut self, key: u64) -> bool {
        self.0.remove(&key).is_some()
    }
    fn update(&mut self, key: u64, value: u64) -> bool {
        self.0.get_mut(&key).map(|v| *v = value).is_some()
    }
}

/// hashbrown behind one `parking_lot::RwLock` (shared for Gets).
pub(crate) struct LockedHashbrown(RwLock<hashbrown::HashMap<u64, u64, FixedState>>);

impl ConcurrentMap for LockedHashbrown {
    const NAME: &'static str = "rwlock_hashbrown";
    fn with_capacity(keys: usize) -> Self {
        LockedHashbrown(RwLock::new(hashbrown::HashMap::with_capacity_and_hasher(
            keys, FixedState,
        )))
    }
    fn get(&self, key: u64) -> Option<u64> {
        self.0.read().get(&key).copied()
    }
    fn insert(&self, key: u64, value: u64) -> bool {
        match self.0.write().entry(key) {
            hashbrown::hash_map::Entry::Occupied(_) => false,
            hashbrown::hash_map::Entry::Vacant(v) => {
                v.insert(value);
                true
            }
        }
    }
    fn remove(&self, key: u64) -> bool {
        self.0.write().remove(&key).is_some()
    }
    fn update(&self, key: u64, value: u64) -> bool {
        self.0.write().get_mut(&key).map(|v| *v = value).is_some()
    }
}

pub(crate) struct Dash(dashmap::DashMap<u64, u64, FixedState>);

impl ConcurrentMap for Dash {
    const NAME: &'static str = "dashmap";
    fn with_capacity(keys: usize) -> Self {
        Dash(dashmap::DashMap::with_capacity_and_hasher(keys, FixedState))
    }
    fn get(&self, key: u64) -> Option<u64> {
        self.0.get(&key).map(|v| *v)
    }
    fn insert(&self, key: u64, value: u64) -> bool {
        match self.0.entry(key) {
            dashmap::mapref::entry::Entry::Occupied(_) => false,
            dashmap::mapref::entry::Entry::Vacant(v) => {
                v.insert(value);
                true
            }
        }
    }
    fn remove(&self, key: u64) -> bool {
        self.0.remove(&key).is_some()
    }
    fn update(&self, key: u64, value: u64) -> bool {
        self.0.get_mut(&key).map(|mut v| *v = value).is_some()
    }
}

pub(crate) struct Scc(scc::HashMap<u64, u64, FixedState>);

impl ConcurrentMap for Scc {
    const NAME: &'static str = "scc";
    fn with_capacity(keys: usize) -> Self {
        Scc(scc::HashMap::with_capacity_and_hasher(keys, FixedState))
    }
    fn get(&self, key: u64) -> Option<u64> {
        self.0.read_sync(&key, |_, v| *v)
    }
    fn insert(&self, key: u64, value: u64) -> bool {
        self.0.insert_sync(key, value).is_ok()
    }
    fn remove(&self, key: u64) -> bool {
        self.0.remove_sync(&key).is_some()
    }
    fn update(&self, key: u64, value: u64) -> bool {
        self.0.update_sync(&key, |_, v| *v = value).is_some()
    }
}

/// papaya, pinned per operation (its documented default use).
pub(crate) struct Papaya(papaya::HashMap<u64, u64, FixedState>);

impl ConcurrentMap for Papaya {
    const NAME: &'static str = "papaya";
    fn with_capacity(keys: usize) -> Self {
        Papaya(papaya::HashMap::with_capacity_and_hasher(keys, FixedState))
    }
    fn get(&self, key: u64) -> Option<u64> {
        self.0.pin().get(&key).copied()
    }
    fn insert(&self, key: u64, value: u64) -> bool {
        self.0.pin().try_insert(key, value).is_ok()
    }
    fn remove(&self, key: u64) -> bool {
        self.0.pin().remove(&key).is_some()
    }
    fn update(&self, key: u64, value: u64) -> bool {
        self.0.pin().update(key, |_| value).is_some()
    }
}
