//! The Robinhood host table: its Get benchmark and its mix adapter.

use super::{alloc::*, get::*, mix::*, sizes::*};
use splitkv_host::table::{RobinhoodTable, TableConfig};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

impl GetTable for RobinhoodTable {
    const GROUP: &'static str = "robinhood_get";
    type Scratch = (
        [Vec<u8>; GET_BATCH_MAX],
        [Option<ObjectMeta>; GET_BATCH_MAX],
    );

    fn load(keys: usize, key: impl Fn(u64) -> Key) -> Self {
        let started = Instant::now();
        let mut table = RobinhoodTable::new(&TableConfig::new(keys, 8)).expect("table layout");
        let meta = ObjectMeta::new(1, ObjectFlags::READABLE);
        for i in 0..keys as u64 {
            table
                .upsert(key(i), meta, &i.to_le_bytes())
                .expect("the table is sized for the keys");
        }
        if let Ok(slots) = std::env::var("SPLITKV_BENCH_PREFETCH_SLOTS") {
            let slots = slots.parse().expect("SPLITKV_BENCH_PREFETCH_SLOTS");
            table.set_prefetch_slots(Some(slots));
        }
        let layout = table.layout();
        eprintln!(
            "robinhood_get: {keys} keys in {} home slots ({:.1}% full, {} in overflow), \
             region {:.2} GiB, huge pages {}, prefetch {} slots, loaded in {:.1?}",
            layout.home_slots(),
            100.0 * keys as f64 / layout.home_slots() as f64,
            table.overflow_len(),
            layout.region_bytes() as f64 / (1u64 << 30) as f64,
            HUGE_PAGES.load(Relaxed),
            table.prefetch_slots(),
            started.elapsed(),
        );
        table
    }

    fn scratch() -> Self::Scratch {
        (
            std::array::from_fn(|_| Vec::with_capacity(8)),
            [None; GET_BATCH_MAX],
        )
    }

    /// One [`RobinhoodTable::get`] per key.
    fn gets_one_at_a_time(&self, keys: &[Key], value: &mut Vec<u8>) -> usize {
        keys.iter()
            .filter(|key| self.get(key, value).is_some())
            .count()
    }

    /// [`RobinhoodTable::get_batch`] calls of `batch` keys.
    fn gets_batched(
        &self,
        keys: &[Key],
        batch: usize,
        (values, metas): &mut Self::Scratch,
    ) -> usize {
        let mut hits = 0;
        for chunk in keys.chunks(batch) {
            let n = chunk.len();
            self.get_batch(chunk, &mut values[..n], &mut metas[..n]);
            hits += metas[..n].iter().filter(|m| m.is_some()).count();
        }
        hits
    }
}

/// The Robinhood host table with its Get buffer. Sized so that `keys` fill
/// about 90% of the home slots (`TableConfig::capacity_keys = 0.9 · keys`):
/// the same number of home positions a peer gets for `with_capacity(keys)`.
pub(crate) struct Robinhood {
    table: RobinhoodTable,
    value: Vec<u8>,
}

pub(crate) const META: ObjectMeta = ObjectMeta(1);

impl SingleThreadMap for Robinhood {
    const NAME: &'static str = "robinhood";
    fn with_capacity(keys: usize) -> Self {
        let config = TableConfig::new(keys / 10 * 9, 8);
        Robinhood {
            table: RobinhoodTable::new(&config).expect("table layout"),
            value: Vec::with_capacity(8),
        }
    }
    fn get(&mut self, key: u64) -> Option<u64> {
        self.table.get(&Key::new(0, key), &mut self.value)?;
        Some(u64::from_le_bytes(self.value[..8].try_into().unwrap()))
    }
    fn insert(&mut self, key: u64, value: u64) -> bool {
        let key = Key::new(0, key);
        if self.table.get(&key, &mut self.value).is_some() {
            return false;
        }
        self.table
            .upsert(key, META, &value.to_le_bytes())
            .expect("the table is sized for the mix")
    }
    fn remove(&mut self, key: u64) -> bool {
        self.table.remove(&Key::new(0, key))
    }
    fn update(&mut self, key: u64, value: u64) -> bool {
        let key = Key::new(0, key);
        if self.table.get(&key, &mut self.value).is_none() {
            return false;
        }
        self.table
            .upsert(key, META, &value.to_le_bytes())
            .expect("an update needs no room");
        true
    }
}
