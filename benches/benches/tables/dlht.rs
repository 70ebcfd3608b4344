//! The DLHT (Dandelion §6): its Get benchmark and its mix adapters.

use super::{alloc::*, get::*, mix::*, ops::*, robinhood::*, sizes::*};
use splitkv_host::table::dlht::{Dlht, Request};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

impl GetTable for Dlht {
    const GROUP: &'static str = "dlht_get";
    /// [`GET_BATCH_MAX`] `Request::Get`s whose keys are overwritten per batch
    /// (their value buffers keep their capacity, so batches do not allocate).
    type Scratch = Vec<Request>;

    fn load(keys: usize, key: impl Fn(u64) -> Key) -> Self {
        let started = Instant::now();
        let table = Dlht::with_capacity(keys);
        let meta = ObjectMeta::new(1, ObjectFlags::READABLE);
        for i in 0..keys as u64 {
            let inserted = table
                .insert(key(i), meta, &i.to_le_bytes())
                .expect("the table grows as needed");
            assert!(inserted, "keys are distinct");
        }
        eprintln!(
            "dlht_get: {keys} keys in {} bins ({:.2} keys per bin), {} resizes, \
             memory_bytes {:.2} GiB, huge pages {}, loaded in {:.1?}",
            table.bin_count(),
            keys as f64 / table.bin_count() as f64,
            table.resizes_completed(),
            table.memory_bytes() as f64 / (1u64 << 30) as f64,
            HUGE_PAGES.load(Relaxed),
            started.elapsed(),
        );
        table
    }

    fn scratch() -> Self::Scratch {
        (0..GET_BATCH_MAX)
            .map(|_| Request::Get {
                key: Key::new(0, 0),
                value: Vec::with_capacity(8),
                result: None,
            })
            .collect()
    }

    /// One [`Dlht::get`] per key.
    fn gets_one_at_a_time(&self, keys: &[Key], value: &mut Vec<u8>) -> usize {
        keys.iter()
            .filter(|key| self.get(key, value).is_some())
            .count()
    }

    /// [`Dlht::batch`] calls of `batch` Get requests.
    fn gets_batched(&self, keys: &[Key], batch: usize, reqs: &mut Self::Scratch) -> usize {
        let mut hits = 0;
        for chunk in keys.chunks(batch) {
            let reqs = &mut reqs[..chunk.len()];
            for (r, k) in reqs.iter_mut().zip(chunk) {
                let Request::Get { key, .. } = r else {
                    unreachable!("the scratch holds Gets only")
                };
                *key = *k;
            }
            self.batch(reqs);
            hits += reqs
                .iter()
                .filter(|r| {
                    matches!(
                        r,
                        Request::Get {
                            result: Some(_),
                            ..
                        }
                    )
                })
                .count();
        }
        hits
    }
}

// ---- DLHT (Dandelion §6) ---------------------------------------------------------

/// The DLHT, one operation at a time. Its `get` fills a value buffer, so the
/// adapter keeps one per thread ([`DLHT_VALUE`]).
pub(crate) struct DlhtMap(Dlht);

thread_local! {
    /// The Get buffer of [`DlhtMap`] (one per thread; never reallocated).
    static DLHT_VALUE: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(Vec::with_capacity(8));
}

impl ConcurrentMap for DlhtMap {
    const NAME: &'static str = "dlht";
    fn with_capacity(keys: usize) -> Self {
        DlhtMap(Dlht::with_capacity(keys))
    }
    fn get(&self, key: u64) -> Option<u64> {
        DLHT_VALUE.with_borrow_mut(|v| {
            self.0.get(&Key::new(0, key), v)?;
            Some(u64::from_le_bytes(v[..8].try_into().unwrap()))
        })
    }
    fn insert(&self, key: u64, value: u64) -> bool {
        self.0
            .insert(Key::new(0, key), META, &value.to_le_bytes())
            .expect("dlht insert")
    }
    fn remove(&self, key: u64) -> bool {
        self.0.remove(&Key::new(0, key))
    }
    fn update(&self, key: u64, value: u64) -> bool {
        // `put` replaces a present key only, and says whether it was present.
        self.0
            .put(Key::new(0, key), META, &value.to_le_bytes())
            .expect("dlht put")
    }
}

/// Diagnostic: the DLHT one operation at a time, as [`DlhtMap`], but each
/// thread holds one crossbeam-epoch pin around its whole operation sequence,
/// so the pin every DLHT operation takes is only a counter increment instead
/// of a `lock cmpxchg` (a full barrier on x86). The difference from `dlht` is
/// what pinning costs. Holding a pin delays memory reclamation; the mixes
/// store 8-byte values inline and do not resize, so nothing waits for it.
pub(crate) struct DlhtPinned(DlhtMap);

impl ConcurrentMap for DlhtPinned {
    const NAME: &'static str = "dlht_pinned";
    fn with_capacity(keys: usize) -> Self {
        DlhtPinned(<DlhtMap as ConcurrentMap>::with_capacity(keys))
    }
    fn get(&self, key: u64) -> Option<u64> {
        ConcurrentMap::get(&self.0, key)
    }
    fn insert(&self, key: u64, value: u64) -> bool {
        ConcurrentMap::insert(&self.0, key, value)
    }
    fn remove(&self, key: u64) -> bool {
        ConcurrentMap::remove(&self.0, key)
    }
    fn update(&self, key: u64, value: u64) -> bool {
        ConcurrentMap::update(&self.0, key, value)
    }
    fn run(&self, ops: &[Op]) -> usize {
        let _pinned = crossbeam::epoch::pin();
        run_shared(self, ops)
    }
}

/// Default number of consecutive operations a [`DlhtBatched`] thread issues as
/// one [`Dlht::batch`] (`SPLITKV_BENCH_MIX_BATCH` overrides it).
pub(crate) const MIX_BATCH_DEFAULT: usize = 24;
/// Bound on `SPLITKV_BENCH_MIX_BATCH`.
pub(crate) const MIX_BATCH_MAX: usize = 64;

/// The DLHT driven through its batch API: each thread cuts its operation
/// sequence into consecutive groups of `SPLITKV_BENCH_MIX_BATCH` (default
/// [`MIX_BATCH_DEFAULT`]) operations, whatever their kinds, and issues each
/// group as one [`Dlht::batch`] (Get → `Request::Get`, insert →
/// `Request::Insert`, remove → `Request::Delete`, update → `Request::Put`).
/// `Dlht::batch` prefetches every request's bin and then runs them in order,
/// so each thread sees the same results as one operation at a time.
pub(crate) struct DlhtBatched {
    table: Dlht,
    batch: usize,
}

impl ConcurrentMap for DlhtBatched {
    const NAME: &'static str = "dlht_batched";
    fn with_capacity(keys: usize) -> Self {
        let batch = env_usize("SPLITKV_BENCH_MIX_BATCH", MIX_BATCH_DEFAULT);
        assert!(
            (1..=MIX_BATCH_MAX).contains(&batch),
            "SPLITKV_BENCH_MIX_BATCH={batch}: 1 to {MIX_BATCH_MAX}"
        );
        DlhtBatched {
            table: Dlht::with_capacity(keys),
            batch,
        }
    }
    // Prefill and anything outside `run` go one at a time.
    fn get(&self, key: u64) -> Option<u64> {
        let mut v = Vec::with_capacity(8);
        self.table.get(&Key::new(0, key), &mut v)?;
        Some(u64::from_le_bytes(v[..8].try_into().unwrap()))
    }
    fn insert(&self, key: u64, value: u64) -> bool {
        self.table
            .insert(Key::new(0, key), META, &value.to_le_bytes())
            .expect("dlht insert")
    }
    fn remove(&self, key: u64) -> bool {
        self.table.remove(&Key::new(0, key))
    }
    fn update(&self, key: u64, value: u64) -> bool {
        self.table
            .put(Key::new(0, key), META, &value.to_le_bytes())
            .expect("dlht put")
    }
    fn run(&self, ops: &[Op]) -> usize {
        // One request and one 8-byte buffer per batch position, allocated once
        // per run; `set_request` moves buffers between request kinds, so the
        // batches themselves do not allocate.
        let mut reqs: Vec<Request> = (0..self.batch)
            .map(|_| Request::delete(Key::new(0, 0)))
            .collect();
        let mut bufs: Vec<Vec<u8>> = (0..self.batch).map(|_| Vec::with_capacity(8)).collect();
        let mut hits = 0;
        for chunk in ops.chunks(self.batch) {
            let reqs = &mut reqs[..chunk.len()];
            for ((r, buf), &op) in reqs.iter_mut().zip(&mut bufs).zip(chunk) {
                set_request(r, buf, op);
            }
            self.table.batch(reqs);
            hits += reqs
                .iter()
                .filter(|r| match r {
                    Request::Get { result, .. } => result.is_some(),
                    Request::Insert { result, .. }
                    | Request::Put { result, .. }
                    | Request::Upsert { result, .. } => *result.as_ref().expect("dlht write"),
                    Request::Delete { result, .. } => *result,
                })
                .count();
        }
        hits
    }
}

/// Turns `r` into the request for `op`. `spare` holds the 8-byte buffer of
/// this batch position whenever `r` is a `Delete` (which has none). A request
/// of the same kind is only given its new key and value (the common case:
/// read-heavy batches are mostly Gets), so the adapter does not rebuild every
/// request of every batch.
#[inline]
pub(crate) fn set_request(r: &mut Request, spare: &mut Vec<u8>, op: Op) {
    let set = |buf: &mut Vec<u8>, v: u64| {
        buf.clear();
        buf.extend_from_slice(&v.to_le_bytes());
    };
    match (&mut *r, op) {
        (Request::Get { key, .. }, Op::Get(k)) | (Request::Delete { key, .. }, Op::Remove(k)) => {
            *key = Key::new(0, k);
            return;
        }
        (Request::Insert { key, value, .. }, Op::Insert(k)) => {
            *key = Key::new(0, k);
            set(value, k);
            return;
        }
        (Request::Put { key, value, .. }, Op::Update(k)) => {
            *key = Key::new(0, k);
            set(value, k ^ 1);
            return;
        }
        _ => {}
    }
    let mut buf = match r {
        Request::Get { value, .. }
        | Request::Insert { value, .. }
        | Request::Put { value, .. }
        | Request::Upsert { value, .. } => std::mem::take(value),
        Request::Delete { .. } => std::mem::take(spare),
    };
    let key = |k: u64| Key::new(0, k);
    let value = |buf: &mut Vec<u8>, v: u64| {
        buf.clear();
        buf.extend_from_slice(&v.to_le_bytes());
    };
    *r = match op {
        Op::Get(k) => Request::Get {
            key: key(k),
            value: buf,
            result: None,
        },
        Op::Insert(k) => {
            value(&mut buf, k);
            Request::Insert {
                key: key(k),
                meta: META,
                value: buf,
                result: Ok(false),
            }
        }
        Op::Update(k) => {
            value(&mut buf, k ^ 1);
            Request::Put {
                key: key(k),
                meta: META,
                value: buf,
                result: Ok(false),
            }
        }
        Op::Remove(k) => {
            *spare = buf;
            Request::Delete {
                key: key(k),
                result: false,
            }
        }
    };
}
